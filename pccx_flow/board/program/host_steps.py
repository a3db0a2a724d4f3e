"""Host steps in a program: the MEMCPY copies around them and their place in host memory.

`HostSteps` is a part of `pccx_flow.board.program.lower._Lowering` (it shares the lowering's
state). pccx v002 gives the host no path into L2 but MEMCPY words over the ACP DataMover
(``mem_dispatcher.sv``: from_host_to_L2, from_L2_to_host), so each L2 tensor a host step reads
is copied out into the host I/O area of the activation buffer, a fence follows (the host
waits for DONE), then the step runs on host memory, then each result an instruction reads is
copied back into L2. The sidecar's host step records its operation and where in the host
I/O area each tensor lies.
"""

from __future__ import annotations

import math

from pccx_flow.board.isa import L2_WORD_BYTES, encode
from pccx_flow.board.program.alloc import words_for
from pccx_flow.board.program.tensors import HOST_IO_ALIGN, HOST_READ, HOST_WRITE
from pccx_flow.graph.nodes import OP_LANE


class HostSteps:
    """Host steps and their copies (see the module docstring)."""

    def _host(self, n: str, d: dict, ins: list[str], outs: list[str]) -> None:
        copied = False
        for t in ins:
            if t in self.region and t not in self.host_io:
                self._copy(t, n, HOST_READ)
                copied = True
        # a copy out, or a result an instruction sent to host memory (the logits runs), is
        # there only once DONE says so (what the host made itself it has at once)
        sent = [t for t in ins if t in self.writer and t not in self.host_io]
        if copied or any(self._pending(self.writer[t][0]) for t in sent):
            self._fence("host reads an NPU result")
        else:
            self._close_batch()
        self.prog.steps.append(
            {
                "kind": "host",
                "node": n,
                "func": d["func"],
                "kernel": d["kernel"],
                "call": {
                    "params": d["params"],
                    "flags": d["flags"],
                    "weight": d["weight"],
                    "inputs": d["inputs"],
                    "outputs": d["outputs"],
                },
                "host_reads": {t: self._host_where(t) for t in ins if t in self.host_io},
                "host_writes": {t: self._host_where(t) for t in outs if t in self.npu},
                "slot_reads": {
                    t: [self.slot_tensor[t], self.slot_value[t]]
                    for t in ins
                    if t in self.slot_tensor
                },
            }
        )
        for t in outs:
            if t in self.npu:  # an instruction reads it: the host copies it into L2
                self._alloc(t, n, len(self.prog.words))
                self._copy(t, n, HOST_WRITE)

    def _host_where(self, t: str) -> list:
        """``[byte offset, bytes, elements, dtype]`` of a tensor in the host I/O area."""
        if t not in self.host_io:
            nbytes = self.region[t][1] * L2_WORD_BYTES if t in self.region else 0
            nbytes = nbytes or words_for(self._l2_bytes(t)) * L2_WORD_BYTES
            self.host_io[t] = (self.host_io_bytes, nbytes)
            self.host_io_bytes += -(-nbytes // HOST_IO_ALIGN) * HOST_IO_ALIGN
        offset, nbytes = self.host_io[t]
        return self._located([offset, nbytes, math.prod(self.info[t]["shape"])], t)

    def _copy(self, t: str, n: str, kind: str) -> None:
        """A MEMCPY word moving tensor `t` between its L2 region and the host I/O area."""
        to_host = kind == HOST_READ
        engine = OP_LANE["MEMCPY"]
        if to_host and self._needs_raw_fence([t], engine):
            self._fence("read after write across engines")
        addr, words = self.region[t]
        slot = self._length_slot(words, n)
        word = encode(
            "MEMCPY",
            from_device="npu" if to_host else "host",
            to_device="host" if to_host else "npu",
            dest=0 if to_host else addr,
            src=addr if to_host else 0,
            aux=0,
            shape_ptr=slot,
        )
        where = self._host_where(t)
        index = self._emit(word, n, "host_io")
        self.slot_users[slot] = index
        if to_host:
            self.readers[self.rep(t)][engine] = index
            self.prog.operands[index] = {"inputs": {t: self._where(t)}, "outputs": {}}
        else:
            self.writer[t] = (index, engine)
            self.prog.operands[index] = {"inputs": {}, "outputs": {t: self._where(t)}}
        self.prog.streams[index] = {
            "kind": kind,
            "tensor": t,
            "bytes": where[1],
            "host_offset": where[0],
        }
        self.host_copies[kind] += 1

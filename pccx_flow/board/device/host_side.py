"""The host's half of a decode step on a board: the host steps, on host memory only.

pccx v002 gives the host no path into L2 but MEMCPY words (``mem_dispatcher.sv``:
from_L2_to_host, from_host_to_L2 over the ACP DataMover channels), so the lowering copies
each L2 tensor a host step reads into the activation buffer's host I/O area before the step
and each result an instruction needs back into L2 after it. `HostSide` is what runs between
those copies: it reads a step's inputs from the host I/O area (and the logits runs from the
logits area), keeps every result it makes in `memory`, and writes the results the next
MEMCPY host->L2 word carries into the host I/O area. The same code runs against a board and
against the fake device, so the fake device tests the board's host path, not a stand-in.

Constants a host step reads from a MEMSET slot are the program's own (the sidecar records
each value); the host never reads the constant cache.
"""

from __future__ import annotations

import numpy as np

from pccx_flow.board.device.cma import Buffer
from pccx_flow.board.device.transfers import host_io_base, logits_runs
from pccx_flow.board.emulator.host_kernels import call_host_kernel
from pccx_flow.board.isa import wire
from pccx_flow.errors import BoardError
from pccx_flow.precision import tensor_dtype

WIRE_DTYPES = wire.WIRE_DTYPES


def slot_constant(exact: float, dtype) -> float:
    """A MEMSET constant as the hardware holds it: float32 bits, or exact in a float64 run."""
    return exact if dtype is np.float64 else float(np.float32(exact))


class HostSide:
    """Runs a program's host steps against its activation buffer (see the module docstring)."""

    def __init__(self, program, act: Buffer, weights, ctx):
        self.program = program
        self.act = act
        self.weights = weights
        self.ctx = ctx
        self.F = tensor_dtype()
        self.io_base = host_io_base(program)
        self.logits = {name: (off, n) for off, n, name in logits_runs(program).values()}
        self.memory: dict[str, np.ndarray] = {}  # every tensor the host made or read

    def _read(self, offset: int, nbytes: int, elements: int, dtype: str,
              first: int = 0) -> np.ndarray:  # fmt: skip
        """`elements` values of `dtype` from byte `offset`, `first` elements in (BF16 values
        come back as float32: the host computes in its own precision)."""
        size = wire.size_of(elements, dtype, first)
        if size > nbytes:
            raise BoardError(f"host I/O entry of {nbytes} B cannot hold {elements} {dtype} values")
        raw = wire.unpack(self.act.view(offset, size), elements, dtype, offset=first)
        return raw.astype(np.float16 if dtype == "float16" else self.F)

    def _input(self, step: dict, t: dict) -> np.ndarray:
        name = t["name"]
        if name in step.get("slot_reads", {}):
            _, exact = step["slot_reads"][name]
            return np.array([slot_constant(exact, self.F)], dtype=self.F).reshape(t["shape"])
        if name in step.get("host_reads", {}) and name not in self.memory:
            off, nbytes, n, dtype, first = wire.entry_fields(step["host_reads"][name])
            self.memory[name] = self._read(self.io_base + off, nbytes, n, dtype, first)
        elif name in self.logits and name not in self.memory:
            off, nbytes = self.logits[name]
            dtype = self.program.meta.get("l2_dtype", "float32")
            n = nbytes // wire.ELEMENT_BYTES[dtype]
            self.memory[name] = self._read(off, nbytes, n, dtype)
        if name not in self.memory:
            raise BoardError(
                f"host step {step['node']} reads {name}, which neither a copy from L2 nor an"
                " earlier host step put in host memory; re-emit the program"
            )
        return self.memory[name].reshape(t["shape"])

    def run(self, step: dict) -> None:
        """Run one host step: inputs from host memory, results into it (and the I/O area)."""
        inputs = [self._input(step, t) for t in step["call"]["inputs"]]
        outs = call_host_kernel(step, inputs, self.ctx, self.weights)
        writes = step.get("host_writes", {})
        for t, value in zip(step["call"]["outputs"], outs, strict=True):
            value = np.asarray(value)
            self.memory[t["name"]] = value
            if t["name"] in writes:
                off, nbytes, n, dtype, first = wire.entry_fields(writes[t["name"]])
                data = wire.pack(value, dtype, offset=first)
                if len(data) > nbytes or value.size != n:
                    raise BoardError(
                        f"host step {step['node']}: {t['name']} has {value.size} values, its"
                        f" host I/O entry holds {n} ({nbytes} B)"
                    )
                self.act.view(self.io_base + off, len(data))[:] = data

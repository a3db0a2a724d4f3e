"""Read L2 back on a board between batches, through MEMCPY L2->host words (bring-up aid).

pccx v002 has no L2 read register; the only way out of L2 is a MEMCPY L2->host word whose
bytes the ``acp_out`` DataMover writes into host memory (``mem_dispatcher.sv``:
from_L2_to_host). `MemcpyReadBack` is an `pccx_flow.board.device.golden_check.L2Reader` that, for
each range `dispatch --check-golden` wants, runs one batch of its own between the program's
batches:

1. MEMSET of one constant slot (`READBACK_SLOT`) to the copy's length;
2. MEMCPY L2->host of the range into the activation buffer's read-back area;
3. a MEMSET that puts back what the program had in that slot at this point (from its slot
   log), so the program's later words see their constants unchanged (the copy read its
   length from the slot when it issued);
4. the program's DONE marker (a one-element CVO on its scratch word), last: DONE comes from a
   CVO (a MEMSET after it would raise DONE at once on the RTL as built), and the RTL
   completes load-path instructions in order, so DONE means the copy landed.

It needs a program with DONE markers (the default of `emit`). Every batch goes through the
same checks as the program's own (`pccx_flow.board.device.dispatch`): timeouts, sticky errors and
DataMover status, each a one-line error.
"""

from __future__ import annotations

from pccx_flow.board.device import regmap
from pccx_flow.board.device.cma import Buffer
from pccx_flow.board.device.dispatch import Batch, Descriptor, DispatchReport, run_batch
from pccx_flow.board.device.uio import Npu
from pccx_flow.board.isa import L2_WORD_BYTES, encode, memcpy_length_fields
from pccx_flow.errors import BoardError

READBACK_SLOT = 63  # borrowed for the copy's length, restored after it
READBACK_TAG = 0xF  # the DataMover tag of read-back commands


def readback_batch(program, addr: int, words: int, after_word: int,
                   slot: int = READBACK_SLOT) -> list[int]:  # fmt: skip
    """The words that copy L2 ``addr .. addr + words - 1`` out after program word `after_word`."""
    marker = next((w for w, r in zip(program.words, program.roles, strict=True) if r == "done"),
                  None)  # fmt: skip
    if marker is None:
        raise BoardError(
            "reading L2 back needs a program with DONE markers (the RTL raises DONE only when"
            " a CVO completes); re-emit without --no-done-markers"
        )
    x, y, z = memcpy_length_fields(words)
    out = [
        encode("MEMSET", dest_cache="fmap_shape", slot=slot, a=x, b=y, c=z),
        encode(
            "MEMCPY",
            from_device="npu",
            to_device="host",
            dest=0,
            src=addr,
            aux=0,
            shape_ptr=slot,
        ),
    ]
    held = [s for s in program.slots if s["slot"] == slot and s["word"] <= after_word]
    if held:
        a, b, c = held[-1]["value"]
        out.append(encode("MEMSET", dest_cache=held[-1]["cache"], slot=slot, a=a, b=b, c=c))
    return [*out, marker]


class MemcpyReadBack:
    """Reads L2 ranges back through extra batches (see the module docstring)."""

    def __init__(self, npu: Npu, program, act: Buffer, offset: int, timeout: float | None,
                 slot: int = READBACK_SLOT):  # fmt: skip
        self.npu = npu
        self.slot = slot
        self.program = program
        self.act = act
        self.offset = offset
        self.timeout = timeout
        self.after_word = -1  # the last program word run so far (set by the caller)
        self.batches = 0

    def read_l2(self, addr: int, dtype: str, nbytes: int) -> bytes:
        """`nbytes` of L2 from word address `addr`, as the copy lays them out (`dtype` unused)."""
        words = -(-nbytes // L2_WORD_BYTES)
        if self.offset + words * L2_WORD_BYTES > self.act.size:
            raise BoardError(f"the read-back area cannot hold {words} L2 words")
        command = regmap.encode_command(
            addr=self.act.phys + self.offset, length_bytes=words * L2_WORD_BYTES, tag=READBACK_TAG
        )
        batch = Batch(
            -1, -1, tuple(readback_batch(self.program, addr, words, self.after_word, self.slot))
        )
        try:
            run_batch(self.npu, batch, lambda _b: [Descriptor("acp_out", command, -1)],
                       self.timeout, DispatchReport())  # fmt: skip
        except BoardError as exc:
            raise BoardError(
                f"reading L2 words {addr:#07x}+{words} back after instruction"
                f" {self.after_word}: {exc}"
            ) from None
        self.batches += 1
        return bytes(self.act.view(self.offset, nbytes))


def readback_bytes(golden) -> int:
    """The read-back area a golden check needs: its largest range, in whole L2 words."""
    return max((-(-len(w.data) // L2_WORD_BYTES) * L2_WORD_BYTES
                for ws in (golden or {}).values() for w in ws), default=0)  # fmt: skip


def golden_batch_check(program, npu: Npu, act: Buffer, golden, timeout: float):
    """``(check, reader)``: ``check(done)`` for `run_step`'s per-batch progress reads back,
    after batch `done` (1-based), the L2 ranges the golden words name by MEMCPY (the board's
    only way) and compares them, returning ``"after batch N, <the first difference>"`` or
    None; `reader` is the `MemcpyReadBack` doing it (it counts its read-back batches)."""
    from pccx_flow.board.device.dispatch import plan
    from pccx_flow.board.device.golden_check import check_batch
    from pccx_flow.board.device.run_step import readback_offset

    batches = [b for b in plan(program, 1 << 30) if isinstance(b, Batch)]
    reader = MemcpyReadBack(npu, program, act, readback_offset(program), timeout)

    def check(done: int) -> str | None:
        b = batches[done - 1]
        reader.after_word = b.last
        line = check_batch(golden, b.first, b.last, program.nodes, reader)
        return None if line is None else f"after batch {b.index}, {line}"

    return check, reader

"""Batches, fences, DONE markers and constant slots: how the lowering orders the words.

`Batches` is a part of `pccx_flow.board.program.lower._Lowering` (it shares the lowering's
state). Words go into batches of at most ``registers.max_batch`` (8: the command FIFO depth),
each ended by a kick. A fence (kick, wait for DONE) goes before an instruction that reads
what an unfenced instruction of another engine writes, before a slot eviction a pending word
needs, when L2 is full of regions waiting for a fence, and at the end of the step. A batch
whose last word is not a CVO ends with a DONE marker (a one-element CVO REDUCE_SUM on the
scratch word: today's RTL raises DONE only when a CVO completes); on a target that allows a
CVO only as a batch's last word (as built) a CVO closes its batch. Constant slots (shapes,
lengths, scalars) are filled by MEMSETs just before the word that needs them.
"""

from __future__ import annotations

from pccx_flow.board.isa import FORMATS, KICK_MARKER, IsaError, encode, memcpy_length_fields
from pccx_flow.board.program.tensors import DONE_NODE


class Batches:
    """Batching, fences, DONE markers and slot MEMSETs (see the module docstring)."""

    def _close_batch(self) -> None:
        if self.batch_start is None:
            return
        p = self.prog
        if self.done_markers and p.words[-1] >> 60 != FORMATS["CVO"].opcode:
            at = self.t.cvo_field(self.scratch)
            marker = encode("CVO", func="REDUCE_SUM", src=at, dst=at, length=1)
            p.words.append(marker)
            p.nodes.append(DONE_NODE)
            p.roles.append("done")
            self.markers += 1
        p.words.append(KICK_MARKER)
        p.nodes.append(None)
        p.roles.append("kick")
        p.steps.append({"kind": "batch", "start": self.batch_start, "end": len(p.words)})
        self.batch_start = None

    def _fence(self, reason: str) -> None:
        self._close_batch()
        self.prog.steps.append({"kind": "fence", "reason": reason})
        self.done_upto = len(self.prog.words)
        self.fences += 1
        self.fence_reasons[reason] += 1
        for addr, w in self.quarantine:
            self.l2.release(addr, w)
        self.quarantine = []

    def _emit(self, word: int, node: str, role: str) -> int:
        p = self.prog
        room = self.max_batch
        if self.done_markers and word >> 60 != FORMATS["CVO"].opcode:
            room -= 1  # the batch may need its DONE marker after this word
        if self.batch_start is not None and len(p.words) - self.batch_start >= room:
            self._close_batch()
        if self.batch_start is None:
            self.batch_start = len(p.words)
        p.words.append(word)
        p.nodes.append(node)
        p.roles.append(role)
        return len(p.words) - 1

    def _emit_cvo_last(self, index: int) -> None:
        """As built a CVO ends its batch: the bridge drops a CVO that arrives while it is
        busy, and the DONE the host waits for must be this CVO's (`rtl_rules.RULES`)."""
        if self.t.one_cvo_per_batch and self.prog.words[index] >> 60 == FORMATS["CVO"].opcode:
            self._close_batch()

    def _pending(self, word: int | None) -> bool:
        return word is not None and word >= self.done_upto

    def _needs_raw_fence(self, names: list[str], engine: str | None) -> bool:
        for t in names:
            w = self.writer.get(t)
            if w is not None and self._pending(w[0]) and w[1] != engine:
                return True
        return False

    def _slot(self, cache: str, a: int, b: int, c: int, node: str, meaning: str) -> int:
        for v, what in ((a, "a"), (b, "b"), (c, "c")):
            if not 0 <= v <= 0xFFFF:
                raise IsaError(
                    f"node {node}: {meaning} value {what}={v} does not fit a 16-bit slot field"
                )
        value = (cache, a, b, c)
        now = len(self.prog.words)
        slot, new, evicted = self.slots.lookup(value, now)
        if new:
            if evicted is not None and self._pending(self.slot_users.get(slot)):
                self._fence("slot eviction")
            index = self._emit(
                encode("MEMSET", dest_cache=cache, slot=slot, a=a, b=b, c=c), node, "slot"
            )
            self.prog.slots.append(
                {
                    "word": index,
                    "slot": slot,
                    "value": [a, b, c],
                    "cache": cache,
                    "meaning": meaning,
                }
            )
        return slot

    def _length_slot(self, words: int, n: str) -> int:
        """The constant slot holding a MEMCPY's length, in the RTL's (X, Y, Z) form."""
        x, y, z = memcpy_length_fields(words)
        return self._slot("fmap_shape", x, y, z, n, "MEMCPY length (X*Y*Z/8 words)")

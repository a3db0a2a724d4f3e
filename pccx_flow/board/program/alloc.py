"""L2 and constant-cache allocation for a lowered program.

*L2*: tensors live in 128-bit words (17-bit word addresses). A linear scan in issue order
allocates a tensor's region when its producer is issued and frees it once its last reader has
been issued (liveness by the schedule's order). Placement is a two-ended heap, because the
few large regions (KV tiles of 512 rows of one KV head, 256 KiB each on E4B) must find a
contiguous hole among many small ones:

- tensors that a CVO instruction touches must lie below the SFU's reach
  (`sfu.l2_reach_bytes`: all 1.75 MiB on v002-spec, the first 256 KiB as built): first fit
  from address 0 upward;
- other small tensors: first fit from address 0 as well (above the reach, they would split
  the space the large ones need), except one of at least 1/`WINDOW_SHARE` of a window
  smaller than L2, which is placed as a large one (below): a KV tile of a few hundred rows
  (below the large size) placed first fit from the bottom took 40 % of the window, and a
  layer's CVO operands found no room (E4B at 712 on v002-as-built, a 200-row tile of 100
  KiB in the 256 KiB window); first fit above the window instead, it split the space
  between the tiles and the next whole tile found a hole 64 words short;
  the lowering retries with all of them above the window (``small="above-reach"``) when
  that fails, since then they can crowd the CVO's tensors out of the window instead;
- large regions (at least 1/16 of L2): on a grid a KV tile apart (``slot_words``) below the
  long-lived regions planned at the top (``ceiling``: the lowest word planned, L2's top
  when none is; `pccx_flow.board.program.addresses`), at the highest grid place that fits a
  hole, so they stack from the top and the small ones never split the space they need.
  Under the whole top share those may take instead (1/16 of L2), the sixth tile's place
  took 7,168 words of the 16,384-word CVO window as built while 256 words of the share were
  planned, and a CVO operand found no hole (etf at position 8191 on v002-as-built). A tile
  holds one KV head's rows (256 KiB on E4B: L2 is seven of them); stacked from the top of
  its hole instead, the first tiles of a step ran into the top share, the next layer's
  tiles then stacked under the words reserved there, off the grid, and a layer's sixth tile
  found its 16,384 words only across reserved ones (every policy's program at 1023 and
  beyond on v002-spec). A large region smaller than the largest (a KV tile read without the
  new row, a last tile of fewer rows) starts where a region of the largest size would, its
  spare words on top: the boundaries of the stack stay a whole tile apart, so the hole a
  short tile leaves takes a whole one. Placed at the top of its hole instead, the short
  tile shifted every tile stacked under it down by its spare words, and once a whole tile
  took its place the hole above the lower one was short by that much (E4B at position 1023
  on v002-as-built, a KV-sharing layer whose V tile 1 is read before V tile 0's ·V: a hole
  of 32,704 words for a 32,768-word tile; at 760, a last tile of 248 rows: 320 words short;
  aligning only regions within 1/16 of a slot, the steps at 952 and 976, last tiles of 440
  and 464 rows, did not lower either). With no grid place in any hole a large region takes
  the top of the highest hole, a whole slot down when it is at least half a slot and the
  hole has room; a shorter one keeps the top of its hole, or the room idle above it was
  missed (E4B's layers 0-21 at position 700 on v002-as-built did not lower).

Tensors that one instruction reads as one operand (the parts of a GEMV's input vector, a KV
tile and the new row) are one *group*: one contiguous region, parts in order; each part is
freed after its own last reader. A group is placed when its first part is produced; the
words of a part produced later are *reserved* until then, not taken (`L2Allocator.alloc`):
a region that dies before the reservation is due may use them. So the new K row, produced
before the layer's attention, pins only its own 512 B, and the earlier KV tiles of the
layer stream through the space the last tile will take, as the schedule's L2 count has it.

*Constant cache*: 64 slots written by MEMSET, each holding three 16-bit values. A slot whose
value is already resident is reused; otherwise a free slot, else the least recently used one
is evicted.

Both allocators only decide addresses; whether a reuse needs a fence is the lowering's job
(it knows which engine read the old contents last).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from pccx_flow.board.isa import L2_WORD_BYTES
from pccx_flow.errors import PccxFlowError

# A region of at least 1/LARGE_FRACTION of L2 (a 512-row KV tile of one head: 256 KiB of
# 1.75 MiB) is "large" and stacks from the top; the small ones fill from the bottom.
LARGE_FRACTION = 16
# A region that no CVO touches, of at least 1/WINDOW_SHARE of a CVO window smaller than L2,
# is placed as a large one, not first fit from the bottom (module docstring).
WINDOW_SHARE = 8


class AllocationError(PccxFlowError):
    """A program that does not fit the hardware: L2, the SFU's reach or the constant cache.

    `node` names the node whose output found no room, when the failure is one of placement
    (`pccx_flow.board.program.lower` may then issue that node later and try again)."""

    def __init__(self, message: str, node: str | None = None) -> None:
        super().__init__(message)
        self.node = node


def words_for(nbytes: int) -> int:
    """128-bit L2 words needed for `nbytes` (at least one)."""
    return max(1, -(-nbytes // L2_WORD_BYTES))


@dataclass
class Region:
    """One allocated L2 range [addr, addr + words) in 128-bit words."""

    addr: int
    words: int


@dataclass
class L2Allocator:
    """Two-ended free-list allocator over ``total_words`` with a low window of ``reach_words``.

    ``low=True`` requests are placed first-fit from the bottom and must end within the reach;
    small others first-fit from the bottom too; large ones (and sizeable ones beside a
    small window) at the highest slot-grid place, else at the top of the highest hole
    (module docstring). It tracks the peak of live words and the fragmentation at that peak.
    """

    total_words: int
    reach_words: int
    # where small regions that no CVO touches go: "bottom" (first fit from 0, which keeps
    # the top free for the large ones) or "above-reach" (first fit above the CVO window,
    # else anywhere, which keeps the window for the CVO's tensors)
    small: str = "bottom"
    # the largest large region's words (0: none): a smaller large region starts where one of
    # this size would (module docstring)
    slot_words: int = 0
    # the top of the large regions' slot grid (0: none): they go a whole number of slots
    # below it, under the long-lived regions planned at the top (module docstring)
    ceiling: int = 0
    free: list[list[int]] = field(default_factory=list)  # sorted [start, end) ranges
    live_words: int = 0
    peak_words: int = 0
    high_water: int = 0  # highest address ever used + 1 (low allocations)
    # external fragmentation when the live peak was reached: 1 - largest hole / free words
    fragmentation_at_peak: float = 0.0
    # free ranges promised to a part not produced yet: [start, end, due] (`reserve`)
    reserved: list[list[int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.free = [[0, self.total_words]]

    def alloc(
        self,
        words: int,
        *,
        low: bool,
        dies: int | None = None,
        later: Iterable[tuple[int, int, int]] = (),
    ) -> int | None:
        """The start address of a new region of `words`, or None when no hole is large enough.

        `dies` is when the region will be freed (the lowering's issue position of its last
        reader): it may use reserved words due after that, none if it is not given. `later`
        are ``(offset, words, due)`` parts of the region produced at issue position `due`:
        their words are reserved, not taken, until `claim`."""
        addr = self._place(words, low, self._usable(dies))
        if addr is None:
            return None
        self._cut(addr, words)
        kept = words
        for offset, part, due in later:
            self._merge_in(addr + offset, part)
            self.reserved.append([addr + offset, addr + offset + part, due])
            kept -= part
        self._count(kept, addr + words if low else 0)
        return addr

    def placement(
        self, words: int, *, low: bool, dies: int | None = None, freed: Iterable = ()
    ) -> int | None:
        """Where `alloc` would place a region of `words` now, or once the `freed`
        ``(addr, words)`` ranges are back in the free list; None if nowhere. Nothing
        changes."""
        if not freed:
            return self._place(words, low, self._usable(dies))
        kept = self.free
        self.free = [hole[:] for hole in kept]
        try:
            for addr, n in freed:
                self._merge_in(addr, n)
            return self._place(words, low, self._usable(dies))
        finally:
            self.free = kept

    def reserve(self, addr: int, words: int, due: int) -> None:
        """Promise the free words [addr, addr + words) to a region the lowering placed ahead,
        produced at issue position `due`; regions that die before may use them."""
        self.reserved.append([addr, addr + words, due])

    def claim(self, addr: int, words: int, due: int) -> bool:
        """Take the words reserved at [addr, addr + words) for `due` now; False if a region
        still occupies part of them (a borrower in the lowering's quarantine: fence and
        claim again). A borrower may itself reserve words inside another's reservation (a
        group whose parts all die before it is due), so the reservation is named by `due`."""
        if not any(h[0] <= addr and addr + words <= h[1] for h in self.free):
            return False
        self.reserved.remove([addr, addr + words, due])
        self._cut(addr, words)
        self._count(words, 0)
        return True

    def _usable(self, dies: int | None) -> list[list[int]]:
        """The free holes less the reserved words a region freed at `dies` may not use."""
        blocked = [r for r in self.reserved if dies is None or r[2] <= dies]
        if not blocked:
            return self.free
        out = []
        for start, end in self.free:
            cuts = sorted((max(r[0], start), min(r[1], end)) for r in blocked
                          if r[0] < end and start < r[1])  # fmt: skip
            for a, b in cuts:
                if a > start:
                    out.append([start, a])
                start = max(start, b)
            if end > start:
                out.append([start, end])
        return out

    def _cut(self, addr: int, words: int) -> None:
        """Remove [addr, addr + words), inside one free hole, from the free list."""
        hole = next(h for h in self.free if h[0] <= addr and addr + words <= h[1])
        self.free.remove(hole)
        self.free.extend(h for h in ([hole[0], addr], [addr + words, hole[1]]) if h[1] > h[0])
        self.free.sort()

    def _merge_in(self, addr: int, words: int) -> None:
        """Add [addr, addr + words) to the free list, merging it with its neighbours."""
        self.free.append([addr, addr + words])
        self.free.sort()
        merged: list[list[int]] = []
        for hole in self.free:
            if merged and merged[-1][1] == hole[0]:
                merged[-1][1] = hole[1]
            else:
                merged.append(hole)
        self.free = merged

    def _count(self, words: int, low_end: int) -> None:
        """Account `words` more live words (and the low high-water mark)."""
        self.live_words += words
        if self.live_words > self.peak_words:
            self.peak_words = self.live_words
            free = self.free_words()
            self.fragmentation_at_peak = 1 - self.largest_hole() / free if free else 0.0
        self.high_water = max(self.high_water, low_end)

    def _place(self, words: int, low: bool, holes: list[list[int]]) -> int | None:
        """Where a region of `words` goes among `holes` (the class docstring), or None."""
        fits = [h for h in holes if h[1] - h[0] >= words]
        if low:
            return next((h[0] for h in fits if h[0] + words <= self.reach_words), None)
        if not fits:
            return None
        reach = self.reach_words
        if words * LARGE_FRACTION >= self.total_words or (
            reach < self.total_words and words * WINDOW_SHARE >= reach
        ):  # large, or sizeable beside a small CVO window: placed as a tile (module doc)
            for hole in reversed(fits):  # the highest place on the slot grid, if any
                at = self._on_grid(words, hole)
                if at is not None:
                    return at
            top = fits[-1][1]  # the top of the highest hole, a whole slot down if it has one
            slot = top - self.slot_words
            return slot if self._short_of_a_slot(words) and slot >= fits[-1][0] else top - words
        if self.small == "above-reach":
            above = [max(h[0], reach) for h in fits if h[1] - max(h[0], reach) >= words]
            if above:
                return above[0]
        return fits[0][0]  # small: first fit from the bottom

    def _on_grid(self, words: int, hole: list[int]) -> int | None:
        """The highest ``ceiling - k * slot_words`` (k >= 1) where `words` fit in `hole`, or
        None (no grid, or no grid place in the hole)."""
        slot, ceiling = self.slot_words, self.ceiling
        if not slot or not ceiling or words > slot:
            return None
        top = min(hole[1], ceiling)
        at = ceiling - -(-(ceiling - top + words) // slot) * slot
        return at if at >= hole[0] else None

    def _short_of_a_slot(self, words: int) -> bool:
        """A region smaller than the largest but at least half its size (a tile read
        without the new row, a last tile of more than half its rows). A shorter one keeps
        the top of its hole: a whole slot down, more room would idle above it than it
        takes."""
        return self.slot_words // 2 <= words < self.slot_words

    def release(self, addr: int, words: int) -> None:
        """Give a region back, merging it with its free neighbours."""
        self.live_words -= words
        self._merge_in(addr, words)

    def free_words(self) -> int:
        return sum(h[1] - h[0] for h in self.free)

    def largest_hole(self, below: int | None = None) -> int:
        """The largest free run (of those ending at or below `below`, cut there)."""
        end = self.total_words if below is None else below
        return max((min(h[1], end) - h[0] for h in self.free if h[0] < end), default=0)

    def live_below(self, below: int) -> int:
        """Words in use below address `below` (the CVO window's occupancy)."""
        return below - sum(min(h[1], below) - h[0] for h in self.free if h[0] < below)


@dataclass
class SlotCache:
    """The 64-slot constant cache: value -> slot, reuse on a hit, LRU eviction on a miss."""

    n_slots: int
    resident: dict[int, tuple] = field(default_factory=dict)  # slot -> value
    last_use: dict[int, int] = field(default_factory=dict)  # slot -> instruction index
    memsets: int = 0
    hits: int = 0
    evictions: int = 0
    used: set[int] = field(default_factory=set)

    def lookup(self, value: tuple, now: int) -> tuple[int, bool, tuple | None]:
        """``(slot, needs_memset, evicted_value)`` for `value` used by instruction `now`."""
        for slot, held in self.resident.items():
            if held == value:
                self.last_use[slot] = now
                self.hits += 1
                return slot, False, None
        free = [s for s in range(self.n_slots) if s not in self.resident]
        evicted = None
        if free:
            slot = free[0]
        else:
            slot = min(self.resident, key=lambda s: self.last_use[s])
            evicted = self.resident[slot]
            self.evictions += 1
        self.resident[slot] = value
        self.last_use[slot] = now
        self.memsets += 1
        self.used.add(slot)
        return slot, True, evicted

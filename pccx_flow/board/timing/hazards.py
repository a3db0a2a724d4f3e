"""Data hazards between instructions through L2 regions and constant slots (RAW, WAR, WAW).

The NPU checks no hazards itself (pccx-v002.md §1): an instruction's inputs are ready when
every earlier writer of an overlapping region has finished (RAW), and it may overwrite a
region once every earlier reader (WAR) and writer (WAW) of it has finished. `Hazards` keeps,
for every L2 word, the finish of its last writer and the latest finish of its readers as two
piecewise-constant functions, so a query costs a bisection plus the segments it spans instead
of a scan over every earlier instruction.

>>> h = Hazards()
>>> h.record(reads=(), writes=((0, 4),), slots_read=(), slots_written=(), finish=10)
>>> h.ready(reads=((2, 3),), writes=(), slots_read=(), slots_written=())
10
>>> h.ready(reads=((4, 8),), writes=(), slots_read=(), slots_written=())
0
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable


class IntervalMax:
    """A step function on [0, inf): range maximum, range assignment and range raise."""

    def __init__(self) -> None:
        self.starts = [0]
        self.values = [0]

    def _split(self, x: int) -> int:
        i = bisect_right(self.starts, x) - 1
        if self.starts[i] == x:
            return i
        self.starts.insert(i + 1, x)
        self.values.insert(i + 1, self.values[i])
        return i + 1

    def max(self, lo: int, hi: int) -> int:
        """The largest value on [lo, hi)."""
        i = bisect_right(self.starts, lo) - 1
        j = bisect_left(self.starts, hi)
        return max(self.values[i:j], default=0)

    def assign(self, lo: int, hi: int, value: int) -> None:
        """Set the function to `value` on [lo, hi)."""
        i = self._split(lo)
        j = self._split(hi)
        self.starts[i:j] = [lo]
        self.values[i:j] = [value]

    def raise_to(self, lo: int, hi: int, value: int) -> None:
        """Raise the function to at least `value` on [lo, hi)."""
        i = self._split(lo)
        j = self._split(hi)
        vals = self.values
        for k in range(i, j):
            if vals[k] < value:
                vals[k] = value


Regions = Iterable[tuple[int, int]]


class Hazards:
    """Finish times of the last writers and readers of every L2 word and constant slot."""

    def __init__(self) -> None:
        self.written = IntervalMax()
        self.read = IntervalMax()
        self.slot_written: dict[int, int] = {}
        self.slot_read: dict[int, int] = {}

    def ready(
        self, *, reads: Regions, writes: Regions, slots_read: Iterable[int],
        slots_written: Iterable[int],
    ) -> int:  # fmt: skip
        """The earliest start that respects RAW, WAR and WAW against everything recorded."""
        t = 0
        for lo, hi in reads:
            t = max(t, self.written.max(lo, hi))
        for lo, hi in writes:
            t = max(t, self.written.max(lo, hi), self.read.max(lo, hi))
        for s in slots_read:
            t = max(t, self.slot_written.get(s, 0))
        for s in slots_written:
            t = max(t, self.slot_written.get(s, 0), self.slot_read.get(s, 0))
        return t

    def record(
        self, *, reads: Regions, writes: Regions, slots_read: Iterable[int],
        slots_written: Iterable[int], finish: int,
    ) -> None:  # fmt: skip
        """Note an access that finishes at `finish` (it started after `ready` allowed)."""
        for lo, hi in reads:
            self.read.raise_to(lo, hi, finish)
        for lo, hi in writes:
            self.written.assign(lo, hi, finish)
        for s in slots_read:
            self.slot_read[s] = max(self.slot_read.get(s, 0), finish)
        for s in slots_written:
            self.slot_written[s] = finish

"""The shared timeline every policy builds its schedule on.

A policy only decides *which* node goes next and *on which lane*; the timeline answers when
that node can start there and records the placement. Keeping this in one place means every
policy obeys the same rules (and the validator checks them independently):

- a node starts no earlier than each predecessor's finish plus the edge's comm cost;
- a lane runs one node at a time. By default a node is *appended* after the last finish on
  its lane (classic list scheduling); with ``insertion=True`` it may fill an idle gap between
  two nodes already on the lane when the gap is long enough (HEFT's insertion policy);
- a node holds one instance of each shared pool it needs (a weight port) for its whole run.
  Pools are always searched for the earliest free window: their users sit on other lanes and
  list schedulers place those out of time order, so "append after the last user" would
  serialise lanes that the hardware runs side by side.

- a node's capacity demand (bytes of L2, say; see `SchedulingProblem`) is allocated at its
  start and freed when its last successor finishes. Until that successor is placed the end
  is unknown, so the allocation counts as *open*: it occupies the capacity for ever after
  its start. A node may start at t only if its demand fits under the capacity at every
  moment from t on, next to the open allocations and the closed ones (`CapacityLedger`).
  Closing an allocation only frees space, so every placement stays valid. When even the
  far future has no room (open allocations fill the capacity, only nodes not yet placed
  could free them), the policy's order deadlocks on memory and `place` raises
  `ScheduleError` instead of waiting for ever. What is guaranteed: if the nodes, run one
  at a time in the order they are placed, fit the capacity, no placement deadlocks. (When
  node k is placed, the open allocations are those of placed nodes with a successor not
  yet placed - all resident in that one-at-a-time run at node k's turn, beside k's own
  bytes - and closed ones end at finite times, so after the last of them k fits.) A
  capacity of at least the largest single node's need (its demand plus its inputs') is
  not enough for *every* order: three sources placed before any of their readers hold
  three outputs at once.

The earliest start is the fixed point of "lane free, then every pool free" pushed forward
together; each step jumps to an interval end, so it ends after a few steps. Busy intervals
are kept as two sorted lists per lane and per pool instance and searched with `bisect`, so
placing ~15k nodes takes well under a second.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable, Hashable
from operator import neg

from pccx_flow.errors import ScheduleError
from pccx_flow.schedule.model import Schedule, Slot
from pccx_flow.schedule.problem import SchedulingProblem

Node = Hashable


class BusyIntervals:
    """Busy time of one lane or pool instance: sorted, disjoint [start, finish) intervals.

    Intervals that touch are merged, so a lane or port packed back to back is one interval
    and a search from an early time does not walk every node placed since. Zero-length
    placements block nothing and are not stored; `last` still remembers them for appending.
    """

    __slots__ = ("starts", "finishes", "last")

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.finishes: list[int] = []
        self.last = 0

    def fit(self, t: int, duration: int, insertion: bool = True) -> int:
        """Earliest time >= t at which [time, time + duration) is free.

        Without insertion the answer is never before the last finish (append only).
        """
        if not insertion:
            return t if t >= self.last else self.last
        finishes = self.finishes
        if duration <= 0 or not finishes or t >= finishes[-1]:
            return t  # a zero-length slot overlaps nothing
        starts = self.starts
        i = bisect_right(finishes, t)  # first interval that is still busy after t
        n = len(starts)
        while i < n:
            if t + duration <= starts[i]:
                return t
            f = finishes[i]
            if f > t:
                t = f
            i += 1
        return t

    def add(self, start: int, finish: int) -> None:
        if finish > self.last:
            self.last = finish
        if finish <= start:
            return
        starts, finishes = self.starts, self.finishes
        i = bisect_right(starts, start)
        joins_prev = i > 0 and finishes[i - 1] == start
        joins_next = i < len(starts) and starts[i] == finish
        if joins_prev and joins_next:
            finishes[i - 1] = finishes[i]
            del starts[i], finishes[i]
        elif joins_prev:
            finishes[i - 1] = finish
        elif joins_next:
            starts[i] = start
        else:
            starts.insert(i, start)
            finishes.insert(i, finish)

    def busy(self) -> int:
        return sum(f - s for s, f in zip(self.starts, self.finishes, strict=True))


# Breakpoints per block of a `CapacityLedger` (a block splits at twice this): at 8191 a
# step function of ~60 k breakpoints; 32 was the fastest of 16-256 for heft there.
LEDGER_BLOCK = 32


class CapacityLedger:
    """Bytes of one capacity over time: closed allocations as a step function, open by start.

    The step function of closed allocations (``times``/``values``: ``values[i]`` bytes on
    [times[i], times[i+1]), the last value is 0) is kept in blocks of about `block`
    breakpoints. Closed allocations are only ever added, so values only grow: `peak` answers
    most questions without a scan, and a block adds an allocation that covers it whole to
    one number (its lazy add) instead of to each breakpoint. A long-lived tensor closed
    late (the PLE inputs, read at the end of the step) spans most of the step function,
    and walking every breakpoint under it made the adds ~30 % of heft's time at position
    8191. Suffix maxima per block and within each block let `free_from` find the last
    interval above a limit by two bisections instead of scanning the step function
    backwards (which made a schedule on a small capacity quadratic).

    An open allocation (end not known yet) occupies the capacity from its start for ever:
    ``open_starts`` (sorted) and ``open_sizes`` hold each start and the open bytes from it,
    ``open_bytes`` is their sum.
    """

    __slots__ = ("size", "block", "_bt", "_times", "_raw", "_lazy", "_isuf", "_bsuf", "peak",
                 "open_bytes", "open_starts", "open_sizes")  # fmt: skip

    def __init__(self, size: int, block: int = LEDGER_BLOCK) -> None:
        self.size = size
        self.block = block
        self._bt: list[int] = []  # first time of each block
        self._times: list[list[int]] = []  # per block: breakpoint times
        self._raw: list[list[int]] = []  # per block: values less the block's lazy add
        self._lazy: list[int] = []  # per block: bytes added to every value of the block
        self._isuf: list[list[int]] = []  # per block: suffix maxima of raw
        self._bsuf: list[int] = []  # per block: largest value from that block on
        self.peak = 0
        self.open_bytes = 0
        self.open_starts: list[int] = []
        self.open_sizes: list[int] = []

    # --- the step function as flat lists (for tests and inspection) ----------------------

    @property
    def times(self) -> list[int]:
        return [t for block in self._times for t in block]

    @property
    def values(self) -> list[int]:
        return [v + lazy for raw, lazy in zip(self._raw, self._lazy, strict=True) for v in raw]

    # --- open allocations -------------------------------------------------------------------

    def open(self, start: int, nbytes: int) -> None:
        """Hold `nbytes` from `start` until `close` says when they end."""
        if nbytes <= 0:
            return
        starts = self.open_starts
        i = bisect_left(starts, start)
        if i < len(starts) and starts[i] == start:
            self.open_sizes[i] += nbytes
        else:
            starts.insert(i, start)
            self.open_sizes.insert(i, nbytes)
        self.open_bytes += nbytes

    def close(self, start: int, end: int, nbytes: int) -> None:
        """The open `nbytes` held from `start` end at `end`: they become a closed allocation."""
        if nbytes <= 0:
            return
        i = bisect_left(self.open_starts, start)
        left = self.open_sizes[i] - nbytes
        if left:
            self.open_sizes[i] = left
        else:
            del self.open_starts[i], self.open_sizes[i]
        self.open_bytes -= nbytes
        self.add_closed(start, end, nbytes)

    # --- closed allocations ----------------------------------------------------------------

    def _block_max(self, b: int) -> int:
        return self._isuf[b][0] + self._lazy[b]

    def _resuffix(self, b: int, i: int = 0, j: int | None = None) -> None:
        """Suffix maxima of block b after raw[i:j] grew (all of it by default)."""
        raw = self._raw[b]
        isuf = self._isuf[b]
        if j is None:
            j = len(raw)
        top = isuf[j] if j < len(raw) else raw[j - 1]
        for k in range(j - 1, i - 1, -1):
            if raw[k] > top:
                top = raw[k]
            isuf[k] = top
        for k in range(i - 1, -1, -1):  # earlier entries, until one is already as high
            if isuf[k] >= top:
                break
            isuf[k] = top

    def _insert(self, t: int) -> None:
        """Add a breakpoint at t carrying the value just before it (no-op if present)."""
        bt = self._bt
        if not bt:
            self._bt.append(t)
            self._times.append([t])
            self._raw.append([0])
            self._lazy.append(0)
            self._isuf.append([0])
            self._bsuf.append(0)
            return
        b = bisect_right(bt, t) - 1
        if b < 0:  # before every breakpoint: the value there is 0
            lazy = self._lazy[0]
            self._times[0].insert(0, t)
            self._raw[0].insert(0, -lazy)
            isuf = self._isuf[0]
            isuf.insert(0, max(-lazy, isuf[0]))
            bt[0] = t
            b = 0
        else:
            times = self._times[b]
            i = bisect_right(times, t)
            if times[i - 1] == t:
                return
            raw = self._raw[b]
            carried = raw[i - 1]  # same block, same lazy: raw carries over
            times.insert(i, t)
            raw.insert(i, carried)
            isuf = self._isuf[b]
            isuf.insert(i, max(carried, isuf[i]) if i < len(isuf) else carried)
        if len(self._times[b]) > 2 * self.block:
            self._split(b)

    def _split(self, b: int) -> None:
        """Cut block b in two halves (same lazy add) once it holds twice `block` points."""
        times, raw = self._times[b], self._raw[b]
        half = len(times) // 2
        self._times[b : b + 1] = [times[:half], times[half:]]
        self._raw[b : b + 1] = [raw[:half], raw[half:]]
        self._isuf[b : b + 1] = [[0] * half, [0] * (len(times) - half)]
        self._lazy.insert(b + 1, self._lazy[b])
        self._bt.insert(b + 1, times[half])
        self._resuffix(b)
        self._resuffix(b + 1)
        bsuf = self._bsuf
        after = bsuf[b + 1] if b + 1 < len(bsuf) else 0  # the old block b+1's
        right = max(self._block_max(b + 1), after)
        bsuf.insert(b + 1, right)  # bsuf[b] (the max from b on) is unchanged

    def _locate(self, t: int) -> tuple[int, int]:
        """(block, index in it) of the breakpoint at t, which must exist."""
        b = bisect_right(self._bt, t) - 1
        return b, bisect_left(self._times[b], t)

    def add_closed(self, start: int, end: int, nbytes: int) -> None:
        """`nbytes` held on [start, end): breakpoints added one by one at the range's two
        ends, blocks it covers whole by their lazy add, then the suffix maxima."""
        if end <= start or nbytes <= 0:
            return
        self._insert(start)
        self._insert(end)
        bs, i = self._locate(start)
        be, j = self._locate(end)
        raws, lazies = self._raw, self._lazy
        if bs == be:
            raw = raws[bs]
            for k in range(i, j):
                raw[k] += nbytes
            self._resuffix(bs, i, j)
        else:
            raw = raws[bs]
            for k in range(i, len(raw)):
                raw[k] += nbytes
            self._resuffix(bs, i)
            for b in range(bs + 1, be):
                lazies[b] += nbytes
            if j:
                raw = raws[be]
                for k in range(j):
                    raw[k] += nbytes
                self._resuffix(be, 0, j)
        bsuf = self._bsuf
        after = bsuf[be + 1] if be + 1 < len(bsuf) else 0
        for b in range(be, bs - 1, -1):
            m = self._block_max(b)
            if m > after:
                after = m
            bsuf[b] = after
        for b in range(bs - 1, -1, -1):  # earlier blocks, until one is already as high
            if bsuf[b] >= after:
                break
            bsuf[b] = after
        if bsuf[0] > self.peak:
            self.peak = bsuf[0]

    def _closed_fit(self, limit: int) -> int:
        """Earliest t from which the closed allocations stay at or under `limit` (>= 0)."""
        if self.peak <= limit:
            return 0
        # both suffix maxima fall along their lists: bisect them negated (in C)
        b = bisect_left(self._bsuf, -limit, key=neg) - 1  # the last block above the limit
        lo = bisect_left(self._isuf[b], self._lazy[b] - limit, key=neg) - 1  # its last value
        times = self._times[b]
        return times[lo + 1] if lo + 1 < len(times) else self._bt[b + 1]

    def free_from(self, nbytes: int) -> int | None:
        """Earliest t with room for `nbytes` more (open) at every moment from t on, or None.

        Open allocations count from their own starts: between two open starts s_j <
        s_{j+1} the closed bytes must stay under the capacity less `nbytes` and the
        allocations open by s_j. Walking the starts from the last one back, the first
        segment whose limit is broken after its own start decides: a later segment has a
        lower limit that the closed bytes already keep from its start on, so an earlier
        violation of a looser limit cannot lie beyond it.
        """
        room = self.size - nbytes
        opened = self.open_bytes
        if room - opened < 0:
            return None
        t = self._closed_fit(room - opened)
        starts, sizes = self.open_starts, self.open_sizes
        p = len(starts) - 1  # `opened` counts the starts up to p; t is the answer for it
        while p >= 0 and t:
            if t > starts[p]:
                return t  # broken after start p, whose bytes count there
            # every start at or after t is passed (no violation can follow it) in one go;
            # the limit loosens by their bytes, so t can only fall
            i = bisect_left(starts, t, 0, p + 1)
            opened -= sum(sizes[i : p + 1])
            p = i - 1
            t = self._closed_fit(room - opened)
        return t


class Timeline:
    """Placements made so far, and the earliest legal start of the next one."""

    def __init__(self, problem: SchedulingProblem) -> None:
        self.problem = problem
        self.slots: dict[Node, Slot] = {}
        self._lanes: dict[str, BusyIntervals] = {
            lane.name: BusyIntervals() for lane in problem.lanes
        }
        self._pools: dict[str, list[tuple[str, BusyIntervals]]] = {
            pool: [(f"{pool}{i}", BusyIntervals()) for i in range(count)]
            for pool, count in problem.pools.items()
        }
        self._waiting: dict[Node, int] = {n: len(problem.preds[n]) for n in problem.order}
        self._released: dict[Node, tuple[Node, ...]] = {}
        self._data_ready: dict[Node, int] = {}
        self._memo: dict | None = None
        self._no_comm = not problem.has_comm
        self._hint: tuple | None = None
        self._floor: tuple = (None, -1, 0)  # (node, placements then, its memory floor)
        self._ledgers = {name: CapacityLedger(size) for name, size in problem.capacities.items()}
        # per hold (`SchedulingProblem.holds`): readers not placed yet; 0 once it is closed
        self._unread: list[int] = [len(h.readers) for h in problem.holds]
        self._demand_key: dict[Node, tuple] = {
            n: tuple(row.items()) for n, row in problem.demands.items()
        }
        self.memory_wait: dict[Node, int] = {}  # cycles a node waited for capacity after its
        # inputs were ready (only nodes that waited)
        self.on_place: Callable[[Slot], None] | None = None  # e.g. a progress bar's update

    def remember_starts(self) -> None:
        """Reuse earliest starts between placements for nodes that look alike to the timeline.

        Dynamic policies re-evaluate every ready node after every placement; tiles of one
        matrix have the same inputs, cost and pools, so until the next placement their answer
        is the same. Only valid without comm (a start then depends on no predecessor lane).
        """
        if not self.problem.has_comm:
            self._memo = {}

    # --- readiness ------------------------------------------------------------------------

    def initial_ready(self) -> list[Node]:
        """Nodes with no predecessors, in problem order."""
        return [n for n in self.problem.order if not self.problem.preds[n]]

    def is_ready(self, node: Node) -> bool:
        """True when every predecessor of `node` is placed and `node` itself is not."""
        return self._waiting[node] == 0 and node not in self.slots

    def released(self, node: Node) -> tuple[Node, ...]:
        """Successors of `node` that became ready when `node` was placed."""
        return self._released.get(node, ())

    def is_placed(self, node: Node) -> bool:
        return node in self.slots

    def unplaced(self) -> list[Node]:
        return [n for n in self.problem.order if n not in self.slots]

    # --- timing questions -----------------------------------------------------------------

    def data_ready(self, node: Node, lane: str) -> int:
        """Earliest time every input of `node` is available on `lane`."""
        if self._no_comm:
            cached = self._data_ready.get(node)
            if cached is not None:
                return cached
        problem = self.problem
        t = 0
        slots = self.slots
        for p in problem.preds[node]:
            slot = slots.get(p)
            if slot is None:
                raise ScheduleError(
                    f"node {node!r} asked for a start before its predecessor {p!r} was placed"
                )
            f = (
                slot.finish
                if self._no_comm
                else slot.finish + problem.comm(p, node, slot.lane, lane)
            )
            if f > t:
                t = f
        if self._no_comm:
            self._data_ready[node] = t
        return t

    def _fit(self, node: Node, lane: str, t: int, d: int, insertion: bool) -> int:
        lane_busy = self._lanes[lane]
        pools = self.problem.resources[node]
        if not pools:
            return lane_busy.fit(t, d, insertion)
        while True:
            t2 = lane_busy.fit(t, d, insertion)
            for pool in pools:
                best = None
                for _, busy in self._pools[pool]:
                    x = busy.fit(t2, d)
                    if best is None or x < best:
                        best = x
                        if x == t2:
                            break
                t2 = best
            if t2 == t:
                return t
            t = t2

    def earliest_start(
        self, node: Node, lane: str, insertion: bool = False, not_before: int = 0
    ) -> int:
        """Earliest start of `node` on `lane` given everything placed so far."""
        d = self.problem.costs[node].get(lane)
        if d is None:
            raise ScheduleError(f"lane {lane!r} cannot run node {node!r}")
        t = self.data_ready(node, lane)
        if not_before > t:
            t = not_before
        if node in self._demand_key:
            floor = self.memory_floor(node)
            if floor > t:
                t = floor
        memo = self._memo
        if memo is None:
            return self._fit(node, lane, t, d, insertion)
        key = (t, lane, d, self.problem.resources[node], insertion)
        start = memo.get(key)
        if start is None:
            start = memo[key] = self._fit(node, lane, t, d, insertion)
        return start

    def earliest_finish(
        self, node: Node, lane: str, insertion: bool = False, not_before: int = 0
    ) -> int:
        return (
            self.earliest_start(node, lane, insertion, not_before) + self.problem.costs[node][lane]
        )

    def best_lane(
        self, node: Node, insertion: bool = False, by: str = "finish", not_before: int = 0
    ) -> tuple[str, int]:
        """(lane, start) minimising the earliest start or finish; ties go to the first lane."""
        if not self._no_comm:
            best_lane, best_start, best_key = "", 0, None
            for lane, d in self.problem.costs[node].items():
                s = self.earliest_start(node, lane, insertion, not_before)
                key = s + d if by == "finish" else s
                if best_key is None or key < best_key:
                    best_lane, best_start, best_key = lane, s, key
            return best_lane, best_start
        problem = self.problem
        t = self.data_ready(node, "")
        if not_before > t:
            t = not_before
        if node in self._demand_key:
            floor = self.memory_floor(node)
            if floor > t:
                t = floor
        memo = self._memo
        if memo is not None:
            memo_key = (t, problem.cost_key[node], problem.resources[node], insertion, by)
            hit = memo.get(memo_key)
            if hit is not None:
                return hit
        best_lane, best_start, best_key = "", 0, None
        fit = self._fit
        for lane, d in problem.costs[node].items():
            s = fit(node, lane, t, d, insertion)
            key = s + d if by == "finish" else s
            if best_key is None or key < best_key:
                best_lane, best_start, best_key = lane, s, key
        if memo is not None:
            memo[memo_key] = (best_lane, best_start)
        self._hint = (node, best_lane, insertion, not_before, best_start, len(self.slots))
        return best_lane, best_start

    def memory_floor(self, node: Node) -> int:
        """Earliest time from which `node`'s demands fit for good; `ScheduleError` if never.

        Asked again for the same node before the next placement (a policy asks for its
        start, then places it), the answer is the one just computed: only a placement
        changes the ledgers."""
        last_node, placed, last_floor = self._floor
        if placed == len(self.slots) and last_node == node:
            return last_floor
        floor = 0
        for cap, nbytes in self._demand_key.get(node, ()):
            ledger = self._ledgers[cap]
            t = ledger.free_from(nbytes)
            if t is None:
                raise ScheduleError(self._no_room(node, cap, nbytes, ledger))
            if t > floor:
                floor = t
        self._floor = (node, len(self.slots), floor)
        return floor

    def _no_room(self, node: Node, cap: str, nbytes: int, ledger: CapacityLedger) -> str:
        if nbytes > ledger.size:
            return (
                f"node {node!r} needs {nbytes:,} bytes of {cap!r}, more than its capacity of "
                f"{ledger.size:,} bytes: no schedule fits; split the node into smaller tiles"
            )
        holds = self.problem.holds
        holders = len(
            {
                holds[i].node
                for i, left in enumerate(self._unread)
                if left and holds[i].node in self.slots and any(c == cap for c, _ in holds[i].row)
            }
        )
        return (
            f"memory deadlock: node {node!r} needs {nbytes:,} bytes of {cap!r} "
            f"({ledger.size:,} bytes) but {holders} placed nodes hold {ledger.open_bytes:,} "
            f"bytes for consumers not placed yet; this placement order cannot fit, use a "
            f"policy that places consumers sooner or a larger capacity"
        )

    def _allocate(self, node: Node, slot: Slot) -> None:
        """Open `node`'s holds, and close the holds it was the last reader of."""
        problem = self.problem
        holds = problem.holds
        for i in problem.holds_of.get(node, ()):
            if self._unread[i]:
                for cap, nbytes in holds[i].row:
                    self._ledgers[cap].open(slot.start, nbytes)
            else:
                for cap, nbytes in holds[i].row:
                    self._ledgers[cap].add_closed(slot.start, slot.finish, nbytes)
        slots = self.slots
        for i in problem.holds_read_by.get(node, ()):
            left = self._unread[i] - 1
            self._unread[i] = left
            if left:
                continue
            h = holds[i]
            start = slots[h.node].start
            end = max(slots[h.node].finish, max(slots[r].finish for r in h.readers))
            for cap, nbytes in h.row:
                self._ledgers[cap].close(start, end, nbytes)

    # --- placing --------------------------------------------------------------------------

    def place(self, node: Node, lane: str, insertion: bool = False, not_before: int = 0) -> Slot:
        """Place `node` on `lane` at its earliest start and return the slot."""
        if node in self.slots:
            raise ScheduleError(f"node {node!r} is already placed on {self.slots[node].lane!r}")
        if self._waiting.get(node, -1) != 0:
            if node not in self._waiting:
                raise ScheduleError(f"node {node!r} is not part of the problem")
            raise ScheduleError(f"node {node!r} was placed before all its predecessors")
        hint = self._hint
        if (
            hint is not None
            and hint[:4] == (node, lane, insertion, not_before)
            and hint[5] == len(self.slots)
        ):
            start = hint[4]  # best_lane just computed it and nothing was placed since
        else:
            start = self.earliest_start(node, lane, insertion, not_before)
        if self._memo:
            self._memo.clear()
        d = self.problem.costs[node][lane]
        finish = start + d
        self._lanes[lane].add(start, finish)
        held = []
        for pool in self.problem.resources[node]:
            for inst, busy in self._pools[pool]:
                if busy.fit(start, d) == start:
                    busy.add(start, finish)
                    held.append(inst)
                    break
            else:  # pragma: no cover - _fit guarantees a free instance
                raise ScheduleError(f"no free {pool!r} instance for {node!r} at {start}")
        slot = Slot(node, lane, start, finish, tuple(held))
        if self._ledgers and node in self._demand_key:  # before it is filed: the floor
            ready = max(self.data_ready(node, lane), not_before)  # asked for its start
            waited = self.memory_floor(node) - ready
            if waited > 0:
                self.memory_wait[node] = waited
        self.slots[node] = slot
        if self._ledgers:
            self._allocate(node, slot)
        released = []
        for s in self.problem.succs[node]:
            self._waiting[s] -= 1
            if self._waiting[s] == 0:
                released.append(s)
        self._released[node] = tuple(released)
        if self.on_place is not None:
            self.on_place(slot)
        return slot

    def lane_free_at(self, lane: str) -> int:
        """The last finish on `lane` (0 when empty)."""
        return self._lanes[lane].last

    def to_schedule(self, policy: str, profile: str) -> Schedule:
        return Schedule(
            policy, profile, self.problem.lanes, dict(self.slots), dict(self.memory_wait)
        )

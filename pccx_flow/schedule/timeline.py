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

A problem may also name nodes to *admit* by room (``problem.admit``, KV reads issued as
far ahead as L2 allows: `initial_ready`): the timeline then releases such nodes to the
policy in program order, each only when the capacities have room for it and a reserve
beside what is held open.

The earliest start is the fixed point of "lane free, then every pool free" pushed forward
together; each step jumps to an interval end, so it ends after a few steps. Busy intervals
are kept as two sorted lists per lane and per pool instance and searched with `bisect`, so
placing ~15k nodes takes well under a second.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Hashable

from pccx_flow.errors import ScheduleError
from pccx_flow.schedule.model import Schedule, Slot
from pccx_flow.schedule.problem import SchedulingProblem

Node = Hashable
_NO_DEMAND: dict[str, int] = {}  # a node that demands no capacity (never written)
# a `Slot` from its five fields in one C call, as ``Slot._make`` builds one, without the
# named tuple's Python-level ``__new__`` (one per placement: heft at 8191 0.988x the
# instructions)
_new_slot = tuple.__new__


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
        if not finishes or start > finishes[-1]:  # after every interval: most placements
            starts.append(start)
            finishes.append(finish)
            return
        if start == finishes[-1]:  # right after the last one
            finishes[-1] = finish
            return
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


# Breakpoints per block of a `CapacityLedger` (a block splits at twice this).
LEDGER_BLOCK = 32


class CapacityLedger:
    """Bytes of one capacity over time, as one step function that only ever gains suffixes.

    An allocation whose end is not known yet (*open*) holds its bytes from its start for
    ever: +n on [start, inf). When its end becomes known it is *closed* there: -n on
    [end, inf). An allocation known whole at once is both. So every change adds a constant
    to a suffix of the step function, which is what the capacity holds at each moment, open
    allocations included; after its last breakpoint it holds the open bytes.

    The breakpoints (``times``; ``values[i]`` bytes on [times[i], times[i+1])) are kept in
    blocks of about `block`. A block stores its values less its *lazy* add, the sum of
    ``_shift`` over it and every block before it, so a suffix add rewrites the block it
    begins in and one shift, never the blocks after it.

    `free_from` is asked from the moment a node's inputs are ready: only the blocks from
    there on are searched, from the last one back, and the search ends at the first block
    whose largest value is over the limit (it holds the last interval over it). A node's
    inputs are mostly ready near the end of what is placed, and in a filling step the last
    block is over the limit. The ledger before this one kept closed and open allocations
    apart, with suffix maxima per block that every release had to lower back towards
    the step's start: heft at position 8191 takes 0.73-0.80x its time with this one on
    both profiles (the same schedules; the two alternated in one process).

    Two bounds spare most of that work. A block's ``_max`` is at least its largest raw
    value, not always equal: a fall leaves it high (the rescan of the block is left to a
    search that finds the block whole under the limit, which sets it exact), and a search
    only looks into a block whose bound is over the limit, so the answer is the same.
    ``_peak`` is at least every value the step function has ever held, raised by each
    positive add: while it is within the limit, so is every moment, and `free_from`
    answers `after` without a search. At 8191 on `v002-as-built` heft asks 54k times;
    44.5k are answered so (all 20k of the SFU window's, which never fills there).
    """

    __slots__ = ("size", "block", "_bt", "_times", "_raw", "_max", "_shift", "_last_lazy",
                 "_peak", "open_bytes")  # fmt: skip

    def __init__(self, size: int, block: int = LEDGER_BLOCK) -> None:
        self.size = size
        self.block = block
        self._bt: list[int] = []  # first time of each block
        self._times: list[list[int]] = []  # per block: breakpoint times
        self._raw: list[list[int]] = []  # per block: values less the block's lazy add
        self._max: list[int] = []  # per block: at least its largest raw value
        self._shift: list[int] = []  # per block: added to it and every later block
        self._last_lazy = 0  # the last block's lazy add: the sum of every shift
        self._peak = 0  # at least every value the step function has ever held
        self.open_bytes = 0

    # --- the step function as flat lists (for tests and inspection) ----------------------

    @property
    def times(self) -> list[int]:
        return [t for block in self._times for t in block]

    @property
    def values(self) -> list[int]:
        out, lazy = [], 0
        for raw, shift in zip(self._raw, self._shift, strict=True):
            lazy += shift
            out.extend(v + lazy for v in raw)
        return out

    # --- allocations --------------------------------------------------------------------

    def open(self, start: int, nbytes: int) -> None:
        """Hold `nbytes` from `start` until `close` says when they end."""
        if nbytes > 0:
            self.open_bytes += nbytes
            self._add_from(start, nbytes)

    def close(self, start: int, end: int, nbytes: int) -> None:
        """The open `nbytes` held from `start` end at `end` (or at `start`, if earlier)."""
        self.close_at(end if end > start else start, nbytes)

    def close_at(self, end: int, nbytes: int) -> None:
        """The open `nbytes` end at `end` (not before they were opened)."""
        if nbytes > 0:
            self.open_bytes -= nbytes
            self._add_from(end, -nbytes)

    def add_closed(self, start: int, end: int, nbytes: int) -> None:
        """`nbytes` held on [start, end)."""
        if end > start and nbytes > 0:
            self._add_from(start, nbytes)
            self._add_from(end, -nbytes)

    # --- the blocks -----------------------------------------------------------------------

    def _prepend(self, t: int) -> None:
        """Make `t`, earlier than every breakpoint, the first one (nothing is held before)."""
        bt = self._bt
        if not bt:
            bt.append(t)
            self._times.append([t])
            self._raw.append([0])
            self._max.append(0)
            self._shift.append(0)
            return
        raw0 = -self._shift[0]
        self._times[0].insert(0, t)
        self._raw[0].insert(0, raw0)
        if raw0 > self._max[0]:
            self._max[0] = raw0
        bt[0] = t
        if len(self._times[0]) > 2 * self.block:
            self._split(0, len(self._times[0]) // 2)

    def _split(self, b: int, half: int) -> None:
        """Cut block b after its first `half` points; both halves keep its lazy add."""
        times, raw = self._times[b], self._raw[b]
        left, right = raw[:half], raw[half:]
        self._times[b : b + 1] = [times[:half], times[half:]]
        self._raw[b : b + 1] = [left, right]
        self._max[b : b + 1] = [max(left), max(right)]
        self._shift.insert(b + 1, 0)
        self._bt.insert(b + 1, times[half])

    def _add_from(self, t: int, delta: int) -> None:
        """Add `delta` bytes to the step function from `t` on; a breakpoint at `t` is
        added first if missing, with the value the step function has just before t."""
        bt = self._bt  # most changes fall in the last block
        last = len(bt) - 1
        b = last if last >= 0 and t >= bt[last] else bisect_right(bt, t) - 1
        if b < 0:
            self._prepend(t)
            b = i = 0
        else:
            times = self._times[b]
            n = len(times)
            i = n - 1 if t >= times[n - 1] else bisect_right(times, t) - 1
            if times[i] != t:
                i += 1
                raw = self._raw[b]
                times.insert(i, t)
                raw.insert(i, raw[i - 1])  # same block, same lazy add: the raw value carries
                if n >= 2 * self.block:
                    half = (n + 1) // 2
                    self._split(b, half)
                    last += 1
                    if i >= half:
                        b, i = b + 1, i - half
        if i == 0:  # the whole block and every later one
            self._shift[b] += delta
            self._last_lazy += delta
            if delta > 0:
                self._raise_peak(b)
            return
        raw = self._raw[b]
        block_max = self._max
        top = raw[i] = raw[i] + delta
        if i < len(raw) - 1:  # not the block's last point, where most changes come
            # a loop over the few points after: in Python 3.11 a comprehension builds a
            # function and a list per call (heft at 8191: 1.05x the instructions)
            for k in range(i + 1, len(raw)):
                v = raw[k] = raw[k] + delta
                if v > top:
                    top = v
        if top > block_max[b]:  # the largest value rose into the suffix
            block_max[b] = top
        if b < last:
            self._shift[b + 1] += delta
            self._last_lazy += delta
            if delta > 0:
                self._raise_peak(b + 1, top)
        elif delta > 0 and top + self._last_lazy > self._peak:  # the last block: most adds
            self._peak = top + self._last_lazy

    def _raise_peak(self, first: int, top: int | None = None) -> None:
        """Raise `_peak` to the values a positive add left from block `first` on, which
        rose whole (each block's largest value is at most its `_max` plus its lazy add),
        and, given `top`, in the block before, which rose in a suffix whose largest raw
        value is `top`."""
        lazy, shift, block_max = self._last_lazy, self._shift, self._max
        peak = self._peak
        for c in range(len(block_max) - 1, first - 1, -1):
            if block_max[c] + lazy > peak:
                peak = block_max[c] + lazy
            lazy -= shift[c]
        if top is not None and top + lazy > peak:  # lazy is block first - 1's now
            peak = top + lazy
        self._peak = peak

    # --- the question ---------------------------------------------------------------------

    def free_from(self, nbytes: int, after: int = 0) -> int | None:
        """Earliest t >= `after` with room for `nbytes` more (open) at every moment from t
        on, or None when the open bytes alone leave no room for ever.

        The answer is the end of the last interval over ``size - nbytes`` that reaches past
        `after`, or `after` when there is none: the blocks are searched from the last back
        to the one that holds `after` (class doc).
        """
        limit = self.size - nbytes
        if self.open_bytes > limit:
            return None  # what the step function holds after its last breakpoint
        if self._peak <= limit:  # it never held more than the limit
            return after
        bt = self._bt
        first = bisect_right(bt, after) - 1
        if first < 0:  # before every breakpoint (nothing is held there)
            first = 0
        block_max, shift = self._max, self._shift
        over = limit - self._last_lazy  # the limit in block b's raw values (its lazy add)
        for b in range(len(bt) - 1, first - 1, -1):
            if block_max[b] > over:
                raw = self._raw[b]
                stop = 0 if b > first or after < bt[0] else bisect_right(self._times[b], after) - 1
                k = len(raw) - 1
                while k >= stop and raw[k] <= over:
                    k -= 1
                if k >= stop:  # over the limit on [times[k], next breakpoint)
                    times = self._times[b]
                    return times[k + 1] if k + 1 < len(times) else bt[b + 1]
                if stop == 0:  # the whole block is under: its bound was stale
                    block_max[b] = max(raw)
            over += shift[b]
        return after


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
        self._waiting: dict[Node, int] = {n: len(ps) for n, ps in problem.preds.items()}
        self._released: dict[Node, tuple[Node, ...]] = {}
        # the latest finish of each node's placed predecessors, raised as they are placed:
        # once all of them are (`data_ready` checks), the node's data-ready time without comm
        self._inputs_done: dict[Node, int] = dict.fromkeys(problem.order, 0)
        self._memo: dict | None = None
        self._no_comm = not problem.has_comm
        # cost rows (`SchedulingProblem.cost_key`) whose lanes all cost the same (`best_lane`)
        self._uniform_rows: set[tuple] = {
            row for row in set(problem.cost_key.values()) if len({d for _, d in row}) == 1
        }
        # best_lane's last answer for `place`:
        # ((node, lane, insertion, not_before, nodes placed then), start, data ready, floor)
        self._hint: tuple | None = None
        self._floor: tuple = (None, 0)  # ((node, placements then, after), its floor)
        self._ledgers = {name: CapacityLedger(size) for name, size in problem.capacities.items()}
        # per hold (`SchedulingProblem.holds`): readers not placed yet; 0 once it is closed
        self._unread: list[int] = [len(h.readers) for h in problem.holds]
        self._hold_end: list[int] = [0] * len(problem.holds)  # last finish so far
        self._demands: dict[Node, dict[str, int]] = problem.demands  # {capacity: bytes}
        self.memory_wait: dict[Node, int] = {}  # cycles a node waited for capacity after its
        # inputs were ready (only nodes that waited)
        # `problem.admit`: its nodes are released in program order (`_turn` indexes
        # `_admit_order`), each once it is ready and the capacities have room (`_admitted`);
        # ready ones not released yet are withheld. `_ready_left`: released nodes not placed.
        self._admit_order: list[Node] = sorted(problem.admit or (), key=problem.index.__getitem__)
        self._turn = 0
        self._turn_unready = False  # its node is not ready yet (`_release`)
        self._withheld: set[Node] = set()
        self._ready_left = 0
        self._promised: dict[str, int] = {}  # bytes of admitted nodes not placed yet
        self._promised_nodes: set[Node] = set()
        self._initial: list[Node] | None = None
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
        """Nodes with no predecessors, in problem order.

        The nodes of ``problem.admit`` are released one after another in program order:
        each once it is ready and every capacity it demands has room for it and its
        reserve beside the bytes placed nodes hold for readers not placed yet and those of
        the admitted nodes not placed yet. It then comes in the `released` tuple of the
        placement that made the room, or, when no released node is left unplaced (a policy
        that places what is released never runs out of nodes), of the placement after
        which it is ready. In program order, a KV read of a later layer never takes the
        room a stream of the layer before still needs: released as they became ready,
        a layer's whole stream of one head took the six tile slots of E4B at 1400 tokens
        while the other head of the layer before waited for one (cpop and random stopped
        in a memory deadlock). A policy that places nodes in an order of its own may place
        a held node at any time."""
        preds = self.problem.preds
        ready = [n for n in self.problem.order if not preds[n]]
        if not self.problem.admit:
            return ready
        if self._initial is None:  # asked once: the nodes it holds back stay held
            out = self._release(ready)
            self._ready_left = len(out)
            self._initial = out
        return list(self._initial)

    def _admitted(self, node: Node) -> bool:
        """Whether `node` has room beside what placed nodes hold open and what nodes
        admitted before it will take."""
        reserve, promised = self.problem.admit[node], self._promised
        for cap, nbytes in self._demands.get(node, _NO_DEMAND).items():
            ledger = self._ledgers[cap]
            if ledger.open_bytes + promised.get(cap, 0) + nbytes + reserve > ledger.size:
                return False
        return True

    def _release(self, ready: list[Node]) -> list[Node]:
        """`ready` less the nodes of ``problem.admit`` (withheld), with those whose turn
        has come and that have room (`initial_ready`)."""
        admit = self.problem.admit
        out = []
        held = False
        for n in ready:
            if n in admit:
                self._withheld.add(n)
                held = True
            else:
                out.append(n)
        # the node whose turn it is waits for its inputs: only its own release (or its
        # placement before it was ever released, `place`) moves it
        if self._withheld and (held or not self._turn_unready):
            self._take_turns(out)
        return out

    def _take_turns(self, released: list[Node]) -> None:
        """Release onto `released` the withheld nodes whose turn has come, while they have
        room, or the next one anyway when no released node is left unplaced."""
        order, withheld, slots = self._admit_order, self._withheld, self.slots
        self._turn_unready = False
        while self._turn < len(order):
            n = order[self._turn]
            # a node a policy of its own order placed while it was held left the withheld
            # then (`place`): its turn is simply over
            if n not in slots:
                if n not in withheld:
                    self._turn_unready = True
                    return  # not ready yet
                if not (self._admitted(n) or self._ready_left + len(released) == 0):
                    return  # no room yet
                withheld.discard(n)
                for cap, nbytes in self._demands.get(n, _NO_DEMAND).items():
                    self._promised[cap] = self._promised.get(cap, 0) + nbytes
                self._promised_nodes.add(n)
                released.append(n)
            self._turn += 1

    def is_ready(self, node: Node) -> bool:
        """True when every predecessor of `node` is placed and `node` itself is not."""
        return self._waiting[node] == 0 and node not in self.slots

    def released(self, node: Node) -> tuple[Node, ...]:
        """Successors of `node` that became ready when `node` was placed."""
        return self._released.get(node, ())

    def is_placed(self, node: Node) -> bool:
        return node in self.slots

    def unplaced(self) -> list[Node]:
        slots = self.slots
        return [n for n in self.problem.order if n not in slots]

    # --- timing questions -----------------------------------------------------------------

    def data_ready(self, node: Node, lane: str) -> int:
        """Earliest time every input of `node` is available on `lane`."""
        if self._waiting[node]:
            slots = self.slots
            p = next(p for p in self.problem.preds[node] if p not in slots)
            raise ScheduleError(
                f"node {node!r} asked for a start before its predecessor {p!r} was placed"
            )
        if self._no_comm:
            return self._inputs_done[node]
        problem = self.problem
        t = 0
        for p in problem.preds[node]:
            slot = self.slots[p]
            f = slot.finish + problem.comm(p, node, slot.lane, lane)
            if f > t:
                t = f
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
        if node in self._demands:
            t = self.memory_floor(node, t)
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
        # `data_ready` without comm, inlined: asked for every node of a step
        t = self.data_ready(node, "") if self._waiting[node] else self._inputs_done[node]
        if not_before > t:
            t = not_before
        ready = t
        if node in self._demands:
            t = self.memory_floor(node, t)
        memo = self._memo
        if memo is not None:
            memo_key = (t, problem.cost_key[node], problem.resources[node], insertion, by)
            hit = memo.get(memo_key)
            if hit is not None:
                return hit
        best_lane, best_start, best_key = "", 0, None
        fit, lanes = self._fit, self._lanes
        pooled = bool(problem.resources[node])  # else the lane alone decides (`_fit`)
        # A lane that can start the node at `t` (no lane can start it sooner) wins unless a
        # later lane is cheaper: by start always, by finish when every lane costs the same.
        for lane, d in problem.costs[node].items():
            s = fit(node, lane, t, d, insertion) if pooled else lanes[lane].fit(t, d, insertion)
            key = s + d if by == "finish" else s
            if best_key is None or key < best_key:
                best_lane, best_start, best_key = lane, s, key
                if s == t and (by != "finish" or problem.cost_key[node] in self._uniform_rows):
                    break
        if memo is not None:
            memo[memo_key] = (best_lane, best_start)
        self._hint = ((node, best_lane, insertion, not_before, len(self.slots)), best_start,
                      ready, t)  # fmt: skip
        return best_lane, best_start

    def memory_floor(self, node: Node, after: int = 0) -> int:
        """Earliest time from `after` on from which `node`'s demands fit for good;
        `ScheduleError` if never.

        `after` is when the node could start otherwise (its inputs are ready): the ledgers
        are searched only from there (`CapacityLedger.free_from`). Asked again for the same
        node and time before the next placement (a policy asks for its start, then places
        it), the answer is the one just computed: only a placement changes the ledgers."""
        key = (node, len(self.slots), after)
        last_key, last_floor = self._floor
        if key == last_key:
            return last_floor
        floor = after
        for cap, nbytes in self._demands.get(node, _NO_DEMAND).items():
            ledger = self._ledgers[cap]
            t = ledger.free_from(nbytes, after)
            if t is None:
                raise ScheduleError(self._no_room(node, cap, nbytes, ledger))
            if t > floor:
                floor = t
        self._floor = (key, floor)
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
            f"bytes for consumers not placed yet; use a policy that places consumers sooner "
            f"or a larger capacity"
        )

    def _allocate(self, node: Node, slot: Slot) -> None:
        """Open `node`'s holds, and close the holds it was the last reader of.

        Changes at one moment of one ledger are added to it as one: a node's holds all
        open at its start, and the holds one placement closes mostly end together (the 48
        score tiles of a head at their last reader, say). At position 8191 that is 54k
        suffix adds instead of 76k; the step function, all a ledger answers from, is the
        same."""
        problem = self.problem
        holds = problem.holds
        ledgers, unread, ends = self._ledgers, self._unread, self._hold_end
        start, finish = slot.start, slot.finish
        mine = problem.holds_of.get(node, ())
        if len(mine) == 1 and unread[mine[0]]:  # most nodes: one hold, with readers
            ends[mine[0]] = finish
            for cap, nbytes in holds[mine[0]].row:  # bytes > 0 (`Hold`): `open` inlined
                ledger = ledgers[cap]
                ledger.open_bytes += nbytes
                ledger._add_from(start, nbytes)
        elif mine:
            opened: dict[str, int] = {}
            for i in mine:
                if unread[i]:  # its readers (successors) are not placed yet
                    ends[i] = finish
                    for cap, nbytes in holds[i].row:
                        opened[cap] = opened.get(cap, 0) + nbytes
                else:  # no readers: held while the node runs
                    for cap, nbytes in holds[i].row:
                        ledgers[cap].add_closed(start, finish, nbytes)
            for cap, nbytes in opened.items():
                ledgers[cap].open(start, nbytes)
        freed = None  # {(capacity, end): bytes} of the holds this node was the last reader of
        for i in problem.holds_read_by.get(node, ()):
            if finish > ends[i]:
                ends[i] = finish
            left = unread[i] - 1
            unread[i] = left
            if left:
                continue
            if freed is None:
                freed = {}
            end = ends[i]  # not before the hold's start: its readers start after its node
            for cap, nbytes in holds[i].row:
                key = (cap, end)
                freed[key] = freed.get(key, 0) + nbytes
        if freed is not None:
            for (cap, end), nbytes in freed.items():  # `close_at` inlined
                ledger = ledgers[cap]
                ledger.open_bytes -= nbytes
                ledger._add_from(end, -nbytes)

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
        if hint is not None and hint[0] == (node, lane, insertion, not_before, len(self.slots)):
            # best_lane just found the start on this lane, the data-ready time and the
            # memory floor, and nothing was placed since; it hints only without comm, where
            # neither of the last two depends on the lane
            _, start, ready, floor = hint
        else:
            start = self.earliest_start(node, lane, insertion, not_before)
            ready = floor = None
        if self._memo:
            self._memo.clear()
        problem = self.problem
        d = problem.costs[node][lane]
        finish = start + d
        self._lanes[lane].add(start, finish)
        pools = problem.resources[node]
        if pools:
            held = []
            for pool in pools:
                for inst, busy in self._pools[pool]:
                    if busy.fit(start, d) == start:
                        busy.add(start, finish)
                        held.append(inst)
                        break
                else:  # pragma: no cover - _fit guarantees a free instance
                    raise ScheduleError(f"no free {pool!r} instance for {node!r} at {start}")
            slot = _new_slot(Slot, (node, lane, start, finish, tuple(held)))
        else:
            slot = _new_slot(Slot, (node, lane, start, finish, ()))
        ledgers = self._ledgers
        if ledgers and node in self._demands:  # before it is filed: the floor
            if ready is None:  # asked for its start
                ready = max(self.data_ready(node, lane), not_before)
                floor = self.memory_floor(node, ready)
            if floor > ready:
                self.memory_wait[node] = floor - ready
        self.slots[node] = slot
        if ledgers:
            self._allocate(node, slot)
        released = []
        waiting, inputs_done = self._waiting, self._inputs_done
        for s in problem.succs[node]:
            if finish > inputs_done[s]:
                inputs_done[s] = finish
            left = waiting[s] - 1
            waiting[s] = left
            if not left:
                released.append(s)
        admit = problem.admit
        if admit:
            if node in admit:  # promised and withheld nodes are admit's (most nodes are not)
                if node in self._promised_nodes:  # its bytes are held now, not promised
                    self._promised_nodes.discard(node)
                    for cap, nbytes in self._demands.get(node, _NO_DEMAND).items():
                        self._promised[cap] -= nbytes
                elif node in self._withheld:  # placed while held
                    self._withheld.discard(node)
                    self._ready_left += 1
                else:  # placed before it was ever withheld (a source, `initial_ready` not
                    self._turn_unready = False  # asked): its turn may be over
            self._ready_left -= 1
            if released or self._withheld:
                released = self._release(released)
            self._ready_left += len(released)
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

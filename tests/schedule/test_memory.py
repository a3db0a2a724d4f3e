"""Capacity resources (L2) in the problem, timeline, validator, metrics and decode graphs."""

from __future__ import annotations

from bisect import bisect_right

import networkx as nx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pccx_flow.errors import GraphError, PolicyError, ProfileError, ScheduleError
from pccx_flow.graph.build import build_decode_graph
from pccx_flow.hardware.profile import load_profile
from pccx_flow.schedule.memory import (
    L2,
    L2_REACH,
    decode_capacities,
    decode_demands,
    decode_holds,
    l2_occupancy,
    occupancies,
    occupancy,
    occupancy_stats,
)
from pccx_flow.schedule.metrics import memory_metrics, residency_bounds
from pccx_flow.schedule.model import Lane, Schedule, Slot
from pccx_flow.schedule.problem import SchedulingProblem, problem_from_graph
from pccx_flow.schedule.registry import BUILTIN_POLICIES, make_policy, run_on_problem
from pccx_flow.schedule.timeline import CapacityLedger, Timeline
from pccx_flow.schedule.validate import validate_schedule


def two_pairs(capacity: int) -> SchedulingProblem:
    """Sources a, b (60 bytes each) read by c, d; two lanes, so a and b could overlap."""
    g = nx.DiGraph([("a", "c"), ("b", "d")])
    lanes = [Lane("x0", "cpu"), Lane("x1", "cpu")]
    costs = {n: {"x0": 10, "x1": 10} for n in "abcd"}
    return SchedulingProblem(
        g, lanes, costs, capacities={L2: capacity}, demands={"a": {L2: 60}, "b": {L2: 60}}
    )


def place_all(problem: SchedulingProblem, order) -> Timeline:
    t = Timeline(problem)
    for node, lane in order:
        t.place(node, lane)
    return t


PAIRS_ORDER = (("a", "x0"), ("c", "x0"), ("b", "x1"), ("d", "x1"))


def test_ledger_free_from_is_the_end_of_the_last_overfull_segment():
    ledger = CapacityLedger(100)
    ledger.add_closed(0, 10, 50)
    ledger.add_closed(5, 20, 30)  # 50 on [0, 5), 80 on [5, 10), 30 on [10, 20)
    assert (ledger.times, ledger.values) == ([0, 5, 10, 20], [50, 80, 30, 0])
    assert ledger.free_from(20) == 0  # 80 + 20 fits everywhere
    assert ledger.free_from(60) == 10  # 80 + 60 does not fit on [5, 10)
    assert ledger.free_from(75) == 20  # 30 + 75 does not fit on [10, 20)
    # asked from a later moment: only what is held from there on counts
    assert ledger.free_from(60, after=12) == 12
    assert ledger.free_from(75, after=12) == 20
    assert ledger.free_from(60, after=7) == 10  # [5, 10) reaches past 7
    ledger.open(0, 50)
    assert ledger.free_from(50) == 20
    assert ledger.free_from(51) is None  # open bytes never leave: no room, ever


def test_an_open_allocation_counts_from_its_own_start():
    ledger = CapacityLedger(100)
    ledger.add_closed(0, 10, 60)  # 60 on [0, 10)
    ledger.open(30, 50)  # 50 from 30 on, end not known yet
    # 60 + 30 fits before 30 and 50 + 30 after it: a node may start at 0, before the open
    # allocation begins, since both its bytes and the closed ones fit at every moment
    assert ledger.free_from(30) == 0
    assert ledger.free_from(45) == 10  # 60 + 45 does not fit on [0, 10)
    assert ledger.free_from(51) is None
    ledger.open(5, 10)  # 10 more from 5: 70 + 30 fits on [5, 10), 60 + 30 on [10, 30)
    assert ledger.free_from(30) == 0
    assert ledger.free_from(31) == 10
    ledger.close(30, 40, 50)  # the open 50 end at 40: closed on [30, 40)
    assert ledger.open_bytes == 10
    assert (ledger.times, ledger.values) == ([0, 5, 10, 30, 40], [60, 70, 10, 60, 10])
    assert ledger.free_from(41) == 40


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.integers(0, 60), st.integers(0, 30), st.integers(1, 40), st.booleans(), st.booleans()
        ),
        max_size=25,
    ),
    st.integers(0, 150),
    st.integers(0, 100),
)
def test_ledger_free_from_equals_a_scan_of_the_step_function(allocs, nbytes, after):
    """Allocations added whole, or opened and (some of them) closed later in any order: the
    blocked step function holds what they add up to at every breakpoint, and `free_from`
    answers what trying every moment from `after` on against the whole occupancy answers."""
    ledger = CapacityLedger(150, block=2)  # blocks of 2-4 points: every path of a split
    held: list[list] = []  # [start, end or None while open, bytes]
    pending: list[list] = []  # opened, to be closed after the next allocation
    peak = 0  # the most bytes held at any moment so far
    for start, length, size, whole, close_later in allocs:
        if whole:
            ledger.add_closed(start, start + length, size)
            held.append([start, start + length, size])
        else:
            ledger.open(start, size)
            entry = [start, None, size]
            held.append(entry)
            if close_later:
                pending.append(entry)
        if len(pending) > 1:  # close the one before: closes interleave with opens
            entry = pending.pop(0)
            entry[1] = entry[0] + length
            ledger.close(entry[0], entry[1], entry[2])

        def used(t: int) -> int:  # bytes held at t; an open allocation for ever from start
            return sum(n for s0, e0, n in held if s0 <= t and (e0 is None or t < e0))

        assert ledger.values == [used(t) for t in ledger.times]
        # the bounds `free_from` skips blocks and whole searches by: each block's at least
        # its largest value, the peak at least every value held so far
        assert all(top >= max(raw) for top, raw in zip(ledger._max, ledger._raw, strict=True))
        peak = max(peak, *ledger.values) if ledger.times else peak
        assert ledger._peak >= peak
    assert ledger.open_bytes == sum(n for _, e0, n in held if e0 is None)

    def used_at(t: int) -> int:
        return sum(n for s0, e0, n in held if s0 <= t and (e0 is None or t < e0))

    moments = sorted({after, *(x for s0, e0, _ in held for x in (s0, e0) if x is not None)})
    moments = [t for t in moments if t >= after]
    fits = [t for t in moments if all(used_at(u) + nbytes <= 150 for u in moments if u >= t)]
    assert ledger.free_from(nbytes, after) == (fits[0] if fits else None)
    if after == 0:
        assert ledger.free_from(nbytes) == (fits[0] if fits else None)


def test_the_timeline_delays_a_node_until_its_bytes_fit():
    t = place_all(two_pairs(100), PAIRS_ORDER)
    # lane x1 is free at 0, but a's 60 bytes stay in L2 until c finishes at 20
    assert [t.slots[n].start for n in "acbd"] == [0, 10, 20, 30]
    assert t.memory_wait == {"b": 20}
    schedule = t.to_schedule("test", "none")
    validate_schedule(schedule, t.problem)
    assert l2_occupancy(schedule, t.problem) == [(0, 60), (40, 0)]


def test_a_placement_after_best_lane_records_the_same_wait_as_one_without():
    """`place` takes the start, data-ready time and floor `best_lane` just found for that
    lane; on another lane, or asked alone, it finds them itself: b waits 20 cycles for
    a's bytes either way, and on x1, busy with e until 25, it starts at 25."""
    g = nx.DiGraph([("a", "c"), ("b", "d")])
    g.add_node("e")
    lanes = [Lane("x0", "cpu"), Lane("x1", "cpu")]
    costs = {n: {"x0": 10, "x1": 10} for n in "abcd"}
    costs["e"] = {"x1": 25}
    problem = SchedulingProblem(
        g, lanes, costs, capacities={L2: 100}, demands={"a": {L2: 60}, "b": {L2: 60}}
    )
    for lane, start in (("x0", 20), ("x1", 25)):
        t = place_all(problem, (("a", "x0"), ("e", "x1"), ("c", "x0")))
        assert t.best_lane("b") == ("x0", 20)  # a's 60 bytes stay until c ends at 20
        t.place("b", lane)
        assert t.slots["b"].start == start and t.memory_wait == {"b": 20}
    alone = place_all(problem, (("a", "x0"), ("e", "x1"), ("c", "x0"), ("b", "x1")))
    assert alone.slots["b"].start == 25 and alone.memory_wait == {"b": 20}


def test_with_room_for_both_the_same_order_overlaps():
    t = place_all(two_pairs(120), PAIRS_ORDER)
    assert t.slots["b"].start == 0 and not t.memory_wait
    assert l2_occupancy(t.to_schedule("t", "none"), t.problem) == [(0, 120), (20, 0)]


def test_an_order_that_deadlocks_on_memory_is_a_one_line_error():
    t = Timeline(two_pairs(100))
    t.place("a", "x0")
    with pytest.raises(ScheduleError, match=r"memory deadlock: node 'b' needs 60 bytes") as exc:
        t.place("b", "x1")  # a stays resident until c is placed, which comes after b
    assert "\n" not in str(exc.value)


def test_a_node_larger_than_the_capacity_says_no_schedule_fits():
    t = Timeline(two_pairs(50))
    with pytest.raises(ScheduleError, match="more than its capacity of 50 bytes"):
        t.place("a", "x0")


def two_outputs(per_tensor: bool) -> SchedulingProblem:
    """a writes 60 bytes read by b and 10 read by d; x (60 bytes) runs between b and d."""
    g = nx.DiGraph([("a", "b"), ("b", "x"), ("x", "d"), ("a", "d")])
    costs = {n: {"x0": 10} for n in "abxd"}
    if per_tensor:
        holds = {"a": [(("b",), {L2: 60}), (("d",), {L2: 10})], "x": [(("d",), {L2: 60})]}
        return SchedulingProblem(g, [Lane("x0", "cpu")], costs, capacities={L2: 100}, holds=holds)
    demands = {"a": {L2: 70}, "x": {L2: 60}}
    return SchedulingProblem(g, [Lane("x0", "cpu")], costs, capacities={L2: 100}, demands=demands)


def test_each_hold_is_freed_by_its_own_readers():
    """Per tensor: a's 60 bytes leave when b finishes, so x fits; per node (all of a's 70
    bytes until d) the same order deadlocks."""
    order = (("a", "x0"), ("b", "x0"), ("x", "x0"), ("d", "x0"))
    t = place_all(two_outputs(per_tensor=True), order)
    schedule = t.to_schedule("holds", "none")
    validate_schedule(schedule, t.problem)
    # at 20 a's 60 bytes leave as x's 60 arrive: 70 from 0 to 40, x never waits
    assert l2_occupancy(schedule, t.problem) == [(0, 70), (40, 0)]
    assert t.slots["x"].start == 20 and not t.memory_wait
    assert t.problem.demands == {"a": {L2: 70}, "x": {L2: 60}}  # the holds, summed
    with pytest.raises(ScheduleError, match="memory deadlock: node 'x'"):
        place_all(two_outputs(per_tensor=False), order)


def test_bad_holds_are_refused():
    g = nx.DiGraph([("a", "b"), ("b", "c")])
    lanes, costs = [Lane("x0", "cpu")], {n: {"x0": 1} for n in "abc"}
    with pytest.raises(GraphError, match="hold reader 'c' is not a successor"):
        SchedulingProblem(g, lanes, costs, capacities={L2: 9}, holds={"a": [(("c",), {L2: 1})]})
    with pytest.raises(GraphError, match="demands or holds, not both"):
        SchedulingProblem(
            g, lanes, costs, capacities={L2: 9}, demands={"a": {L2: 1}}, holds={"a": []}
        )
    with pytest.raises(GraphError, match="hold of -1 bytes"):
        SchedulingProblem(
            g, lanes, costs, capacities={L2: 9}, holds={"a": [(("b",), {L2: -1}), ((), {L2: 2})]}
        )
    with pytest.raises(GraphError, match="hold of 1.5 bytes"):
        SchedulingProblem(g, lanes, costs, capacities={L2: 9}, holds={"a": [(("b",), {L2: 1.5})]})
    with pytest.raises(GraphError, match="order-only edge 'a' -> 'z' names a node not in"):
        SchedulingProblem(g, lanes, costs, order_edges=[("a", "z")])
    with pytest.raises(ProfileError, match="unknown capacity 'l3'"):
        SchedulingProblem(g, lanes, costs, capacities={L2: 9}, holds={"a": [(("b",), {"l3": 1})]})
    with pytest.raises(ProfileError, match="capacity 'l2' is -1"):
        SchedulingProblem(g, lanes, costs, capacities={L2: -1}, holds={"a": [(("b",), {L2: 1})]})
    fan = nx.DiGraph([("a", f"r{i}") for i in range(12)] + [("r0", "z")])
    fan_costs = {n: {"x0": 1} for n in fan}
    with pytest.raises(GraphError, match="hold reader 'z' is not a successor"):  # 12 succs
        SchedulingProblem(
            fan, lanes, fan_costs, capacities={L2: 9}, holds={"a": [(("r3", "z"), {L2: 1})]}
        )
    # whole floats are bytes; a reader named twice reads once; a hold of 0 bytes is none
    ok = SchedulingProblem(
        g,
        lanes,
        costs,
        capacities={L2: 9},
        holds={"a": [(["b", "b"], {L2: 2.0}), (("b",), {L2: 0})]},
    )
    assert [(h.node, h.readers, h.row) for h in ok.holds] == [("a", ("b",), ((L2, 2),))]
    assert type(ok.holds[0].row[0][1]) is int and ok.demands == {"a": {L2: 2}}
    once = SchedulingProblem(
        g, lanes, costs, capacities={L2: 9}, holds={"a": [(iter("b"), {L2: 1})]}
    )
    assert once.holds[0].readers == ("b",)  # readers given as any iterable


def test_bad_capacity_data_is_refused():
    g = nx.DiGraph([("a", "b")])
    lanes, costs = [Lane("x0", "cpu")], {"a": {"x0": 1}, "b": {"x0": 1}}
    with pytest.raises(ProfileError, match="unknown capacity 'l3'"):
        SchedulingProblem(g, lanes, costs, capacities={L2: 10}, demands={"a": {"l3": 1}})
    with pytest.raises(ProfileError, match="capacity 'l2' is -1"):
        SchedulingProblem(g, lanes, costs, capacities={L2: -1})
    with pytest.raises(GraphError, match="demand 1.5"):
        SchedulingProblem(g, lanes, costs, capacities={L2: 10}, demands={"a": {L2: 1.5}})


def test_from_functions_carries_capacities():
    g = nx.DiGraph([("a", "b")])
    p = SchedulingProblem.from_functions(
        g, [Lane("x0", "cpu")], lambda n, lane: 1, capacities={L2: 8},
        demand=lambda n: {L2: 8 if n == "a" else 0},
    )  # fmt: skip
    assert (p.capacities, p.demands) == ({L2: 8}, {"a": {L2: 8}})


def test_the_validator_recomputes_peak_occupancy():
    p = two_pairs(100)
    overlapping = {
        "a": Slot("a", "x0", 0, 10),
        "c": Slot("c", "x0", 10, 20),
        "b": Slot("b", "x1", 0, 10),
        "d": Slot("d", "x1", 10, 20),
    }
    with pytest.raises(ScheduleError, match="'l2' holds 120 bytes at cycle 0"):
        validate_schedule(Schedule("hand", "none", p.lanes, overlapping), p)
    touching = dict(overlapping, b=Slot("b", "x1", 20, 30), d=Slot("d", "x1", 30, 40))
    validate_schedule(Schedule("hand", "none", p.lanes, touching), p)  # frees before allocs


def test_each_capacity_is_counted_on_its_own():
    """Holds on two capacities: occupancy per capacity, and the validator finds the one
    whose bytes overflow (the SFU's window here, not L2)."""
    g = nx.DiGraph([("a", "b"), ("c", "d")])
    holds = {"a": [(("b",), {L2: 60, L2_REACH: 20})], "c": [(("d",), {L2: 10, L2_REACH: 20})]}
    lanes = [Lane("x0", "cpu"), Lane("x1", "cpu")]
    p = SchedulingProblem(g, lanes, {n: {"x0": 10, "x1": 10} for n in "abcd"},
                          capacities={L2: 100, L2_REACH: 30}, holds=holds)  # fmt: skip
    side_by_side = {
        "a": Slot("a", "x0", 0, 10),
        "b": Slot("b", "x0", 10, 20),
        "c": Slot("c", "x1", 5, 15),
        "d": Slot("d", "x1", 15, 25),
    }
    schedule = Schedule("hand", "none", p.lanes, side_by_side)
    assert occupancies(schedule, p, (L2, L2_REACH)) == {
        L2: [(0, 60), (5, 70), (20, 10), (25, 0)],
        L2_REACH: [(0, 20), (5, 40), (20, 20), (25, 0)],
    }
    with pytest.raises(ScheduleError, match="'l2_reach' holds 40 bytes at cycle 5"):
        validate_schedule(schedule, p)
    apart = dict(side_by_side, c=Slot("c", "x1", 20, 30), d=Slot("d", "x1", 30, 40))
    validate_schedule(Schedule("hand", "none", p.lanes, apart), p)


def test_the_validated_occupancy_is_reused_only_for_the_very_same_slots(monkeypatch):
    """The metrics reuse the occupancy the validator kept for the same schedule, slot
    objects, holds and capacities; a changed slot, another schedule or problem, or a second
    ask computes it again; a freed schedule's answer is let go; and the validator never
    reuses one (it finds the overflow a kept answer would hide)."""
    from pccx_flow.schedule import memory

    g = nx.DiGraph([("a", "b")])
    p = SchedulingProblem(g, [Lane("x0", "cpu")], {"a": {"x0": 3}, "b": {"x0": 2}},
                          capacities={L2: 100}, demands={"a": {L2: 64}})  # fmt: skip
    slots = {"a": Slot("a", "x0", 0, 3), "b": Slot("b", "x0", 3, 5)}
    schedule = Schedule("hand", "none", p.lanes, dict(slots))
    kept = occupancies(schedule, p, (L2,), keep=True)
    assert occupancies(schedule, p, (L2,), reuse=True) is kept  # the same answer object
    assert occupancies(schedule, p, (L2,), reuse=True) is not kept  # used up: computed
    occupancies(schedule, p, (L2,), keep=True)
    schedule.slots["b"] = Slot("b", "x0", 5, 7)  # the same schedule, one slot changed
    assert occupancies(schedule, p, (L2,), reuse=True) == {L2: [(0, 64), (7, 0)]}
    schedule.slots["b"] = slots["b"]
    kept = occupancies(schedule, p, (L2,), keep=True)
    twin = Schedule("hand", "none", p.lanes, schedule.slots)  # another schedule, same slots
    assert occupancies(twin, p, (L2,), reuse=True) is not kept  # computed for it
    gone = Schedule("hand", "none", p.lanes, dict(slots))
    occupancies(gone, p, (L2,), keep=True)
    assert memory._last_kept is not None
    del gone  # its answer goes with it: nothing of a freed schedule stays pinned
    assert memory._last_kept is None
    same = SchedulingProblem(g, p.lanes, p.costs, capacities={L2: 100}, demands={"a": {L2: 64}})
    again = occupancies(schedule, p, (L2,), keep=True)
    assert occupancies(schedule, same, (L2,), reuse=True) is not again
    # a kept answer that says the schedule fits, where it does not: the validator computes
    small = SchedulingProblem(g, p.lanes, p.costs, capacities={L2: 32}, demands={"a": {L2: 64}})
    small_schedule = Schedule("hand", "none", p.lanes, dict(slots))
    occupancies(small_schedule, small, (L2,), keep=True)
    monkeypatch.setattr(memory, "_last_kept", memory._last_kept[:-1] + ({L2: [(0, 0)]},))
    with pytest.raises(ScheduleError, match="'l2' holds 64 bytes"):
        validate_schedule(small_schedule, small)
    # a schedule that cannot be weakly referenced is validated, and nothing is kept
    from types import SimpleNamespace

    memory._last_kept = None
    validate_schedule(SimpleNamespace(slots=dict(slots)), p)
    assert memory._last_kept is None
    # and the metrics after a validation take what it computed: one pass for the two
    passes, real = [], memory._occupancies
    monkeypatch.setattr(memory, "_occupancies", lambda *a: passes.append(1) or real(*a))
    validate_schedule(schedule, p)
    assert memory_metrics(schedule, p)["l2_peak_bytes"] == 64
    assert len(passes) == 1


def test_memory_metrics_peak_mean_and_wait():
    t = place_all(two_pairs(100), PAIRS_ORDER)
    m = memory_metrics(t.to_schedule("t", "none"), t.problem)
    assert m == {
        "l2_bytes": 100,
        "l2_peak_bytes": 60,
        "l2_mean_bytes": 60.0,  # 60 bytes for all 40 cycles of the makespan
        "memory_wait_cycles": 20,
        "memory_wait_nodes": 1,
        "memory_wait_admitted": 0,  # no node of problem.admit
    }
    assert occupancy_stats([(0, 10), (5, 0)], 10) == {"peak_bytes": 10, "mean_bytes": 5.0}
    assert memory_metrics(t.to_schedule("t", "none"), SchedulingProblem(
        t.problem.graph, t.problem.lanes, t.problem.costs)) == {}  # fmt: skip


# --- random DAGs with capacities --------------------------------------------------------


@st.composite
def dags_with_demands(draw):
    n = draw(st.integers(2, 14))
    g = nx.DiGraph()
    g.add_nodes_from(range(n))
    for v in range(1, n):
        g.add_edges_from((u, v) for u in draw(st.sets(st.integers(0, v - 1), max_size=3)))
    lanes = [Lane(f"x{i}", "cpu") for i in range(draw(st.integers(1, 3)))]
    costs = {v: {ln.name: draw(st.integers(0, 9)) for ln in lanes} for v in range(n)}
    demands = {v: {L2: draw(st.integers(0, 40))} for v in range(n)}
    return g, lanes, costs, demands


def sequential_peak(g: nx.DiGraph, order, demands) -> int:
    """Peak bytes when the nodes run one at a time in `order`, each node's bytes resident
    from its turn until its last successor's turn (written from the definition)."""
    pos = {v: i for i, v in enumerate(order)}
    last = {u: max([pos[u]] + [pos[s] for s in g.successors(u)]) for u in order}
    return max(
        sum(demands[u][L2] for u in order[: i + 1] if last[u] >= i) for i in range(len(order))
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags_with_demands(), st.integers(0, 60))
def test_the_timeline_never_deadlocks_when_the_order_fits_run_one_at_a_time(case, slack):
    # The guarantee (timeline docstring): placing nodes in an order whose one-at-a-time run
    # fits the capacity never deadlocks. program-order places nodes in problem order.
    g, lanes, costs, demands = case
    order = SchedulingProblem(g, lanes, costs).order
    capacity = sequential_peak(g, order, demands) + slack
    p = SchedulingProblem(g, lanes, costs, capacities={L2: capacity}, demands=demands)
    s = run_on_problem(make_policy("program-order"), p, label="po", profile="none")
    assert max((b for _, b in l2_occupancy(s, p)), default=0) <= capacity


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags_with_demands(), st.integers(0, 200), st.sampled_from(sorted(BUILTIN_POLICIES)))
def test_every_policy_fits_or_says_why_it_cannot(case, capacity, policy):
    g, lanes, costs, demands = case
    p = SchedulingProblem(g, lanes, costs, capacities={L2: capacity}, demands=demands)
    try:
        s = run_on_problem(make_policy(policy, seed=1), p, label=policy, profile="none")
    except PolicyError as exc:
        assert "memory deadlock" in str(exc) or "more than its capacity" in str(exc)
        assert "\n" not in str(exc)
        return
    # run_on_problem validated it; the occupancy series must agree
    assert max((b for _, b in l2_occupancy(s, p)), default=0) <= capacity


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags_with_demands(), st.data())
def test_no_schedule_the_validator_accepts_exceeds_a_capacity(case, data):
    g, lanes, costs, demands = case
    free = SchedulingProblem(g, lanes, costs, capacities={L2: 10**9}, demands=demands)
    s = run_on_problem(make_policy("random", seed=3), free, label="random", profile="none")
    peak = max((b for _, b in occupancy(s, free, L2)), default=0)
    capacity = data.draw(st.integers(0, 2 * max(peak, 1)))
    p = SchedulingProblem(g, lanes, costs, capacities={L2: capacity}, demands=demands)
    try:
        validate_schedule(s, p)
    except ScheduleError:
        assert peak > capacity
    else:
        assert peak <= capacity


@st.composite
def dags_with_holds(draw):
    """As `dags_with_demands`, but each node's bytes split into holds over subsets of its
    successors (one tensor per reader set), as decode graphs have them."""
    g, lanes, costs, _ = draw(dags_with_demands())
    holds = {}
    for v in g.nodes:
        succs = sorted(g.successors(v))
        parts = []
        for _ in range(draw(st.integers(0, 2))):
            readers = draw(st.lists(st.sampled_from(succs), unique=True)) if succs else []
            parts.append((tuple(readers), {L2: draw(st.integers(1, 40))}))
        holds[v] = parts
    return g, lanes, costs, holds


def sequential_hold_peak(order, holds) -> int:
    """Peak bytes when the nodes run one at a time in `order`: each hold resident from its
    node's turn until its last reader's turn (written from the definition)."""
    pos = {v: i for i, v in enumerate(order)}
    spans = [
        (pos[v], max([pos[v]] + [pos[r] for r in readers]), row[L2])
        for v, parts in holds.items()
        for readers, row in parts
    ]
    return max((sum(b for a, z, b in spans if a <= i <= z) for i in range(len(order))), default=0)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags_with_holds(), st.integers(0, 60), st.sampled_from(["program-order", "critical-path"]))
def test_holds_fit_validate_and_never_deadlock_when_one_at_a_time_fits(case, slack, policy):
    g, lanes, costs, holds = case
    order = SchedulingProblem(g, lanes, costs).order
    capacity = sequential_hold_peak(order, holds) + slack
    p = SchedulingProblem(g, lanes, costs, capacities={L2: capacity}, holds=holds)
    try:
        s = run_on_problem(make_policy(policy), p, label=policy, profile="none")
    except PolicyError as exc:  # only an order other than the problem's may deadlock
        assert policy != "program-order" and "memory deadlock" in str(exc)
        return
    assert max((b for _, b in l2_occupancy(s, p)), default=0) <= capacity  # and validated
    tight = SchedulingProblem(g, lanes, costs, capacities={L2: capacity // 2}, holds=holds)
    peak = max((b for _, b in l2_occupancy(s, p)), default=0)
    try:
        validate_schedule(s, tight)
    except ScheduleError:
        assert peak > capacity // 2
    else:
        assert peak <= capacity // 2



def held_by_definition(problem: SchedulingProblem, slots: dict, cap: str) -> list[tuple]:
    """(start, end or None while a reader is not placed, bytes) of each placed node's hold
    on `cap`: from the node's start to the last finish of it and its readers."""
    spans = []
    for h in problem.holds:
        nbytes = dict(h.row).get(cap, 0)
        if h.node not in slots or not nbytes:
            continue
        end = None
        if all(r in slots for r in h.readers):
            end = max(slots[v].finish for v in (h.node, *h.readers))
        spans.append((slots[h.node].start, end, nbytes))
    return spans


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags_with_holds())
def test_the_ledger_after_each_placement_holds_what_the_placed_holds_say(case):
    """Holds opened together and holds one placement closes at one end are added to the
    ledger as one change: after every placement its step function is still the sum of
    the placed holds (open ones for ever)."""
    g, lanes, costs, holds = case
    p = SchedulingProblem(g, lanes, costs, capacities={L2: 10**9}, holds=holds)
    t = Timeline(p)
    ledger = t._ledgers[L2]
    for n in p.order:
        t.place(n, t.best_lane(n, insertion=True)[0], insertion=True)
        spans = held_by_definition(p, t.slots, L2)
        times = ledger.times
        probes = {0, 10**6, *times, *(a for a, _, _ in spans), *(z for _, z, _ in spans if z)}
        for x in sorted(probes):
            i = bisect_right(times, x) - 1
            held = ledger.values[i] if i >= 0 else 0
            assert held == sum(b for a, z, b in spans if a <= x and (z is None or x < z)), x


# --- decode graphs ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tiny_step():
    profile = load_profile("v002-as-built")
    return build_decode_graph("tiny", position=40, profile=profile), profile


def test_decode_demands_count_what_the_npu_reads_from_l2(tiny_step):
    """In L2: NPU outputs and host results an NPU node reads (the host writes them there
    over the ACP, as the lowering allocates them). Not: constants, host-only values and the
    logits read-back (host memory)."""
    graph, profile = tiny_step
    caps = decode_capacities(profile)
    assert caps == {L2: profile.memory.l2_bytes, L2_REACH: profile.sfu.l2_reach_bytes}
    assert decode_capacities(load_profile("v002-spec")) == {L2: 1_835_008}  # SFU reaches all
    demands = decode_demands(graph, caps)
    counted_host = 0
    for n, attrs in graph.nodes(data=True):
        npu_reads = any(graph.nodes[s]["op"] != "HOST" for s in graph.successors(n))
        if attrs["op"] == "MEMSET" or attrs.get("func") == "logits_readback":
            assert n not in demands
        elif attrs["op"] == "HOST":
            assert (n in demands) == npu_reads, n
            counted_host += n in demands
        elif attrs["op"] == "CVO":
            assert demands[n][L2_REACH] == demands[n][L2] > 0
    assert counted_host > 0
    kv = [n for n, a in graph.nodes(data=True) if a.get("func") == "kv_read"]
    assert kv and all(demands[n][L2] == graph.nodes[n]["act_bytes"] for n in kv)


def test_decode_holds_free_each_output_after_its_own_readers():
    """A scores GEMV of a split softmax: the scores die at the EXP, the maximum lives on to
    the host's combine (and, both read by a CVO, both sit in the SFU's window)."""
    profile = load_profile("v002-as-built")
    graph = build_decode_graph("tiny", position=20, tile_rows=8, profile=profile)
    holds = decode_holds(graph, decode_capacities(profile))
    scores = "L04.attn.scores.h1.t02"
    got = {readers: row for readers, row in holds[scores]}
    exp, combine = "L04.attn.softmax.h1.exp.t02", "L04.attn.combine.h1"
    assert got == {(exp,): {L2: 5 * 4, L2_REACH: 5 * 4}, (exp, combine): {L2: 4, L2_REACH: 4}}
    problem = problem_from_graph(graph, profile, memory=True)
    assert problem.demands[scores] == {L2: 24, L2_REACH: 24}


def test_decode_holds_group_readers_by_the_tensors_each_edge_names():
    """A reader named on an edge twice reads once; an edge without ``tensors`` reads what
    the reader lists as inputs; an output no one reads is held until its node ends."""

    def t(name: str, n: int) -> dict:
        return {"name": name, "shape": [n], "dtype": "float32"}

    g = nx.DiGraph()
    g.add_node("a", op="GEMV", outputs=[t("x", 2), t("y", 3), t("z", 5)])
    g.add_node("b", op="GEMV", inputs=[t("x", 2)], outputs=[])
    g.add_node("c", op="CVO", inputs=[t("x", 2), t("y", 3)], outputs=[])
    g.add_edge("a", "b", tensors=["x", "x"])
    g.add_edge("a", "c")  # no tensors on the edge: c's inputs say what it reads
    holds = decode_holds(g, {L2: 1 << 20, L2_REACH: 1 << 10})
    assert holds["a"] == [
        (("b", "c"), {L2: 8, L2_REACH: 8}),  # x: c is a CVO, so x sits in its reach too
        (("c",), {L2: 12, L2_REACH: 12}),
        ((), {L2: 20}),
    ]


@pytest.mark.parametrize("policy", ["critical-path", "heft", "program-order"])
def test_tiny_decode_step_fits_l2_on_as_built(tiny_step, policy):
    graph, profile = tiny_step
    problem = problem_from_graph(graph, profile, memory=True)
    s = run_on_problem(make_policy(policy), problem, label=policy, profile=profile.name)
    m = memory_metrics(s, problem)
    assert 0 < m["l2_peak_bytes"] <= profile.memory.l2_bytes
    assert 0 < m["l2_reach_peak_bytes"] <= profile.sfu.l2_reach_bytes


def test_decode_problem_with_memory_on_a_tiled_context_validates():
    profile = load_profile("v002-as-built")
    graph = build_decode_graph("tiny", position=40, tile_rows=16, profile=profile)
    problem = problem_from_graph(graph, profile, memory=True)
    s = run_on_problem(make_policy("critical-path"), problem, label="cp", profile=profile.name)
    assert memory_metrics(s, problem)["l2_peak_bytes"] > 0


def test_residency_bound_is_exact_for_one_node_that_fills_the_capacity():
    g = nx.DiGraph()
    g.add_node("a")
    p = SchedulingProblem(
        g, [Lane("x0", "cpu")], {"a": {"x0": 10}}, capacities={L2: 8}, demands={"a": {L2: 8}}
    )
    assert residency_bounds(p) == {"residency:l2": 10}
    assert residency_bounds(two_pairs(100)) == {"residency:l2": 24}  # 2 * 60 * (10 + 10) / 100


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dags_with_demands(), st.integers(40, 300), st.sampled_from(sorted(BUILTIN_POLICIES)))
def test_residency_bound_never_exceeds_a_valid_schedule(case, capacity, policy):
    g, lanes, costs, demands = case
    p = SchedulingProblem(g, lanes, costs, capacities={L2: capacity}, demands=demands)
    try:
        s = run_on_problem(make_policy(policy, seed=2), p, label=policy, profile="none")
    except PolicyError:
        return  # this order cannot fit; nothing to compare
    assert s.makespan >= residency_bounds(p).get("residency:l2", 0)


def test_random_holds_back_a_node_with_no_room_until_a_placement_frees_some():
    """With a and b open (60 bytes each of 100) no order can go on, so a random order that
    picks b before c waits b until c has freed a's bytes instead of failing; a node that
    can never fit still fails in one line."""
    for seed in range(12):
        s = run_on_problem(make_policy("random", seed=seed), two_pairs(100), label="random",
                           profile="none")  # fmt: skip
        first, second = sorted("ab", key=lambda n: s.slots[n].start)
        assert s.slots[second].start >= s.slots[{"a": "c", "b": "d"}[first]].finish
    huge = SchedulingProblem(
        nx.DiGraph([("a", "b")]), [Lane("x0", "cpu")], {"a": {"x0": 1}, "b": {"x0": 1}},
        capacities={L2: 50}, demands={"a": {L2: 60}},
    )  # fmt: skip
    with pytest.raises(PolicyError, match="more than its capacity"):
        run_on_problem(make_policy("random"), huge, label="random", profile="none")

"""The shared timeline: interval search against brute force, and placement rules by hand."""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pccx_flow.errors import GraphError, ScheduleError
from pccx_flow.schedule.metrics import memory_metrics
from pccx_flow.schedule.model import Lane
from pccx_flow.schedule.problem import SchedulingProblem
from pccx_flow.schedule.timeline import BusyIntervals, Timeline
from pccx_flow.schedule.validate import validate_schedule


def brute_force_fit(intervals, t, d):
    """Smallest x >= t with [x, x+d) overlapping no interval, by trying every candidate.

    A zero-length slot overlaps nothing (the validator's rule), so it fits at t.
    """
    candidates = sorted({t, *(f for _, f in intervals if f >= t)})
    for x in candidates:
        if d == 0 or all(not (s < x + d and x < f) for s, f in intervals):
            return x
    raise AssertionError("unreachable: the last finish is always free")


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    st.lists(st.tuples(st.integers(0, 60), st.integers(1, 8)), max_size=12),
    st.integers(0, 80),
    st.integers(0, 10),
)
def test_fit_matches_brute_force(requests, t, d):
    busy = BusyIntervals()
    placed = []
    for start, dur in requests:  # place each request where fit puts it, like the timeline
        x = busy.fit(start, dur)
        busy.add(x, x + dur)
        placed.append((x, x + dur))
    for (s1, f1), (s2, f2) in ((a, b) for i, a in enumerate(placed) for b in placed[i + 1 :]):
        assert not (s1 < f2 and s2 < f1)
    assert busy.fit(t, d) == brute_force_fit(placed, t, d)
    assert busy.fit(t, d, insertion=False) == max([t, *(f for _, f in placed)])


def chain_problem(pools=None, resources=None):
    g = nx.DiGraph([("a", "b")])
    g.add_node("c")
    lanes = [Lane("g0", "gemv"), Lane("g1", "gemv")]
    costs = {n: {"g0": 10, "g1": 10} for n in "abc"}
    return SchedulingProblem(g, lanes, costs, resources=resources, pools=pools)


def test_successor_waits_for_predecessor_and_lanes_run_in_parallel():
    tl = Timeline(chain_problem())
    assert tl.initial_ready() == ["a", "c"]
    assert tl.place("a", "g0").finish == 10
    assert tl.released("a") == ("b",)
    assert tl.place("c", "g1").start == 0
    assert tl.place("b", "g1").start == 10


def test_pool_with_one_instance_serialises_lanes():
    problem = chain_problem(pools={"port": 1}, resources={"a": ("port",), "c": ("port",)})
    tl = Timeline(problem)
    tl.place("a", "g0")
    slot = tl.place("c", "g1")  # free lane, but the only port is busy until 10
    assert (slot.start, slot.resources) == (10, ("port0",))
    tl.place("b", "g0")
    validate_schedule(tl.to_schedule("t", "t"), problem)


def test_pool_gap_is_found_even_without_lane_insertion():
    g = nx.DiGraph()
    g.add_nodes_from(["late", "early"])
    lanes = [Lane("g0", "gemv"), Lane("g1", "gemv")]
    costs = {"late": {"g0": 5}, "early": {"g1": 5}}
    problem = SchedulingProblem(
        g, lanes, costs, resources={"late": ("p",), "early": ("p",)}, pools={"p": 1}
    )
    tl = Timeline(problem)
    tl.place("late", "g0", not_before=20)
    assert tl.place("early", "g1").start == 0  # the port is free before 20


def test_insertion_fills_a_lane_gap_append_does_not():
    g = nx.DiGraph([("a", "b")])
    g.add_node("c")
    lanes = [Lane("x", "cpu")]
    costs = {"a": {"x": 2}, "b": {"x": 3}, "c": {"x": 4}}
    problem = SchedulingProblem(g, lanes, costs)
    for insertion, expected in ((True, 2), (False, 23)):
        tl = Timeline(problem)
        tl.place("a", "x")
        tl.place("b", "x", not_before=20)
        assert tl.earliest_start("c", "x", insertion=insertion) == expected


def test_misuse_is_a_schedule_error():
    tl = Timeline(chain_problem())
    with pytest.raises(ScheduleError, match="before all its predecessors"):
        tl.place("b", "g0")
    tl.place("a", "g0")
    with pytest.raises(ScheduleError, match="already placed"):
        tl.place("a", "g1")
    with pytest.raises(ScheduleError, match="not part of the problem"):
        tl.place("zz", "g0")
    with pytest.raises(ScheduleError, match="cannot run"):
        tl.earliest_start("b", "nope")
    with pytest.raises(ScheduleError, match="start before its predecessor 'a' was placed"):
        Timeline(chain_problem()).earliest_start("b", "g0")


def test_comm_delays_only_cross_lane_successors():
    g = nx.DiGraph([("a", "b")])
    lanes = [Lane("p0", "cpu"), Lane("p1", "cpu")]
    costs = {"a": {"p0": 3, "p1": 3}, "b": {"p0": 2, "p1": 2}}
    problem = SchedulingProblem(g, lanes, costs, comm=lambda u, v, x, y: 0 if x == y else 7)
    tl = Timeline(problem)
    tl.place("a", "p0")
    assert tl.earliest_start("b", "p0") == 3
    assert tl.earliest_start("b", "p1") == 10
    assert tl.best_lane("b") == ("p0", 3)


def test_a_nodes_memory_floor_follows_every_placement():
    """The floor is remembered between a policy's question and its placement, never across
    a placement: `a`'s 60 bytes held for `c` leave `b` no room until `c` is placed."""
    g = nx.DiGraph([("a", "c")])
    g.add_node("b")
    costs = {"a": {"x0": 3}, "b": {"x0": 2}, "c": {"x0": 2}}
    holds = {"a": [(("c",), {"l2": 60})], "b": [((), {"l2": 60})]}
    problem = SchedulingProblem(g, [Lane("x0", "cpu")], costs, capacities={"l2": 100}, holds=holds)
    timeline = Timeline(problem)
    assert timeline.memory_floor("b") == 0
    timeline.place("a", "x0")
    with pytest.raises(ScheduleError, match="memory deadlock"):
        timeline.memory_floor("b")  # a's bytes wait for c: nothing fits beside them
    timeline.place("c", "x0")  # 3..5: a's bytes are freed at 5
    assert timeline.memory_floor("b") == 5
    assert timeline.place("b", "x0").start == 5


def _reads_problem(admit: dict | None) -> SchedulingProblem:
    """Three sources r0..r2 (40 bytes each, read by u0..u2) and a lane each; L2 of 100."""
    g = nx.DiGraph([(f"r{i}", f"u{i}") for i in range(3)])
    lanes = [Lane(f"x{i}", "cpu") for i in range(3)]
    costs = {n: {ln.name: 10 for ln in lanes} for n in g}
    holds = {f"r{i}": [((f"u{i}",), {"l2": 40})] for i in range(3)}
    return SchedulingProblem(g, lanes, costs, capacities={"l2": 100}, holds=holds, admit=admit)


def test_a_node_to_admit_is_released_once_l2_has_room_for_it_and_its_reserve():
    """r0..r2 need 40 bytes each of 100. With a 20-byte reserve one read is admitted at a
    time beside another's open bytes (40 + 40 + 20 = 100); without `admit` all three are
    ready at once and a policy that places every source first deadlocks on memory."""
    timeline = Timeline(_reads_problem({f"r{i}": 20 for i in range(3)}))
    assert timeline.initial_ready() == ["r0", "r1"]  # r0, then r1 beside r0's promise
    timeline.place("r0", "x0")
    assert timeline.released("r0") == ("u0",)
    timeline.place("r1", "x1")
    assert timeline.released("r1") == ("u1",)  # r2 waits: 80 held open
    timeline.place("u0", "x0")  # frees r0's 40 bytes: r2 has room
    assert timeline.released("u0") == ("r2",)
    assert timeline.place("r2", "x2").start == 20  # r0's bytes are freed when u0 ends (10-20)
    timeline.place("u1", "x1")
    timeline.place("u2", "x2")
    waits = memory_metrics(timeline.to_schedule("t", "none"), timeline.problem)
    assert waits["memory_wait_nodes"] == waits["memory_wait_admitted"] == 1  # r2, held back
    open_first = Timeline(_reads_problem(None))
    assert open_first.initial_ready() == ["r0", "r1", "r2"]
    open_first.place("r0", "x0")
    open_first.place("r1", "x1")
    with pytest.raises(ScheduleError, match="memory deadlock"):
        open_first.place("r2", "x2")


def test_a_withheld_node_is_released_when_nothing_else_is_left():
    """A reserve larger than the room: nothing would ever be admitted, so the first
    withheld node comes whenever no released node is left unplaced."""
    timeline = Timeline(_reads_problem({f"r{i}": 90 for i in range(3)}))
    assert timeline.initial_ready() == ["r0"]
    timeline.place("r0", "x0")
    assert timeline.released("r0") == ("u0",)  # u0 is left: nothing forced
    timeline.place("u0", "x0")
    assert timeline.released("u0") == ("r1",)  # nothing left: r1 goes
    for n in ("r1", "u1", "r2", "u2"):
        timeline.place(n, "x0")
    assert not timeline.unplaced()


def test_nodes_to_admit_are_released_in_program_order():
    """Two streams of reads (40 bytes each of 100): a0 then a1 (a1 waits for a0), and b0, b1,
    later in program order and read by work that needs a1's. Released as they became ready,
    b0 and b1 took the room while a1 still waited for a0, and a1 then found none beside
    them (b's bytes wait for `done`, which waits for a1): a deadlock. In program order b0
    waits its turn, and placing what is released finishes the step."""
    g = nx.DiGraph()
    g.add_nodes_from(["a0", "a1", "ua", "ua1", "done", "b0", "b1", "ub0", "ub1"])
    g.add_edges_from([("a0", "a1"), ("a0", "ua"), ("a1", "ua1"), ("ua", "done"),
                      ("ua1", "done"), ("done", "ub0"), ("done", "ub1"), ("b0", "ub0"),
                      ("b1", "ub1")])  # fmt: skip
    costs = {n: {"x0": 10} for n in g}
    readers = {"a0": "ua", "a1": "ua1", "b0": "ub0", "b1": "ub1"}
    holds = {r: [((u,), {"l2": 40})] for r, u in readers.items()}
    problem = SchedulingProblem(g, [Lane("x0", "cpu")], costs, capacities={"l2": 100},
                                holds=holds, admit=dict.fromkeys(readers, 0))  # fmt: skip
    timeline = Timeline(problem)
    ready = timeline.initial_ready()
    assert ready == ["a0"]  # b0 waits for a1's turn, though it is ready
    placed = []
    while ready:
        node = ready.pop(0)
        timeline.place(node, "x0")
        placed.append(node)
        ready += timeline.released(node)
    assert not timeline.unplaced()
    assert placed.index("a1") < placed.index("b0")


def test_a_source_to_admit_placed_before_it_was_handed_out_passes_its_turn():
    """A policy of its own order may place a source without asking `initial_ready`: the
    turn passes it then, and the read to admit behind it comes with that placement."""
    g = nx.DiGraph()
    g.add_nodes_from(["s0", "p", "r", "u", "v"])
    g.add_edges_from([("p", "r"), ("s0", "u"), ("r", "v")])
    costs = {n: {"x0": 10} for n in g}
    holds = {"s0": [(("u",), {"l2": 1})], "r": [(("v",), {"l2": 1})]}
    problem = SchedulingProblem(g, [Lane("x0", "cpu")], costs, capacities={"l2": 100},
                                holds=holds, admit={"s0": 0, "r": 0})  # fmt: skip
    timeline = Timeline(problem)
    timeline.place("p", "x0")
    assert timeline.released("p") == ()  # r is ready, but s0's turn comes first
    timeline.place("s0", "x0")
    assert timeline.released("s0") == ("u", "r")


def test_admit_refuses_an_unknown_node_or_a_bad_reserve():
    with pytest.raises(GraphError, match="not in the graph"):
        _reads_problem({"zz": 0})
    with pytest.raises(GraphError, match="not an int >= 0"):
        _reads_problem({"r0": -1})


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(st.integers(1, 6), min_size=3, max_size=3),  # cost per lane
            st.booleans(),  # holds the one port
            st.integers(0, 30),  # not before
        ),
        min_size=2,
        max_size=9,
    ),
    st.sampled_from(["start", "finish"]),
    st.booleans(),
)
def test_best_lane_is_the_first_lane_of_least_start_or_finish(nodes, by, insertion):
    """`best_lane` stops at a lane that starts the node as soon as it is ready (a shortcut):
    it must pick what comparing every lane picks, ties to the first lane. Rows of equal
    and of unequal costs, a shared port and random earlier placements."""
    names = [f"n{i}" for i in range(len(nodes))]
    g = nx.DiGraph()
    g.add_nodes_from(names)
    lanes = [Lane(f"x{i}", "cpu") for i in range(3)]
    uniform = {"x0": 4, "x1": 4, "x2": 4}
    costs = {
        n: uniform if i % 3 == 0 else {f"x{k}": c for k, c in enumerate(cost)}
        for i, (n, (cost, _, _)) in enumerate(zip(names, nodes, strict=True))
    }
    resources = {n: ("port",) for n, (_, port, _) in zip(names, nodes, strict=True) if port}
    problem = SchedulingProblem(g, lanes, costs, resources=resources, pools={"port": 1})
    tl = Timeline(problem)
    for n, (_, _, not_before) in zip(names, nodes, strict=True):
        row = problem.costs[n]
        keys = []
        for lane, d in row.items():
            s = tl.earliest_start(n, lane, insertion, not_before)
            keys.append((s + d if by == "finish" else s, s, lane))
        want = min(keys, key=lambda k: k[0])  # min keeps the first of equal keys
        assert tl.best_lane(n, insertion, by, not_before) == (want[2], want[1])
        tl.place(n, want[2], insertion, not_before)

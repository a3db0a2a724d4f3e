"""Chain bounds (`pccx_flow.schedule.chains`) on problems whose answers are worked out by
hand; their property tests against CP-SAT's optimum are in tests/compare/test_exact.py."""

from __future__ import annotations

import networkx as nx
from hypothesis import given, settings
from hypothesis import strategies as st

from pccx_flow.errors import PccxFlowError
from pccx_flow.schedule.chains import pool_chain_bounds
from pccx_flow.schedule.metrics import min_cost_critical_path, problem_bounds
from pccx_flow.schedule.model import Lane, Schedule, Slot
from pccx_flow.schedule.problem import SchedulingProblem
from pccx_flow.schedule.registry import BUILTIN_POLICIES, run_policy
from pccx_flow.schedule.validate import validate_schedule


def pool_chain_example():
    """p1, p2 (port users) -> h (10 cycles, no port) -> q1, q2, q3 (port users); 2 ports."""
    g = nx.DiGraph()
    g.add_nodes_from(["p1", "p2", "h", "q1", "q2", "q3"])
    g.add_edges_from([("p1", "h"), ("p2", "h"), ("h", "q1"), ("h", "q2"), ("h", "q3")])
    lanes = [Lane("g0", "gemv"), Lane("g1", "gemv"), Lane("c0", "host")]
    costs = {n: {"g0": 4, "g1": 4} for n in ("p1", "p2", "q1", "q2", "q3")}
    costs["h"] = {"c0": 10}
    users = {n: ("port",) for n in ("p1", "p2", "q1", "q2", "q3")}
    return SchedulingProblem(g, lanes, costs, resources=users, pools={"port": 2})


def test_pool_chain_bound_by_hand():
    problem = pool_chain_example()
    # Plain bounds: port work 20 / 2 ports = 10, critical path 4 + 10 + 4 = 18. The ports
    # idle while h runs: 8/2 before it, 10 for h, 12/2 after it = 20 (optimum here is 22).
    assert problem_bounds(problem)["pool:port"] == 10
    assert min_cost_critical_path(problem) == 18
    assert pool_chain_bounds(problem)["pool_chain:port"] == 20
    for policy in BUILTIN_POLICIES:
        assert run_policy(problem, policy=policy).makespan >= 20


def test_pool_chain_sees_fan_out_and_fan_in_with_enough_hops():
    # a -> four port users -> b -> four port users: needs m = a, n = b (two hops apart).
    g = nx.DiGraph()
    first = [f"t{i}" for i in range(4)]
    second = [f"u{i}" for i in range(4)]
    g.add_edges_from([("a", t) for t in first] + [(t, "b") for t in first])
    g.add_edges_from([("b", u) for u in second])
    lanes = [Lane("g0", "gemv"), Lane("g1", "gemv"), Lane("g2", "gemv"), Lane("c0", "host")]
    costs = {n: {"g0": 5, "g1": 5, "g2": 5} for n in first + second}
    costs |= {"a": {"c0": 3}, "b": {"c0": 3}}
    problem = SchedulingProblem(
        g, lanes, costs, resources={n: ("port",) for n in first + second}, pools={"port": 1}
    )
    # one port: 3 + 20 + 3 + 20 = 46 for any schedule, and the bound finds it
    assert pool_chain_bounds(problem, hops=2)["pool_chain:port"] == 46
    assert run_policy(problem, policy="critical-path").makespan == 46


def chains_example(into: bool) -> SchedulingProblem:
    """Two port users (10 cycles, one port) each with its own host chain (7 cycles, two
    host lanes) into a third user n, or (`into` False) n first and the chains out of it."""
    g = nx.DiGraph()
    for i in (1, 2):
        g.add_edges_from([(f"u{i}", f"h{i}"), (f"h{i}", "n")] if into
                         else [("n", f"h{i}"), (f"h{i}", f"u{i}")])  # fmt: skip
    lanes = [Lane("g0", "gemv"), Lane("c0", "host"), Lane("c1", "host")]
    costs = {n: {"g0": 10} for n in ("u1", "u2", "n")}
    costs |= {h: {"c0": 7, "c1": 7} for h in ("h1", "h2")}
    users = {n: ("port",) for n in ("u1", "u2", "n")}
    return SchedulingProblem(g, lanes, costs, resources=users, pools={"port": 1})


def test_pool_chain_adds_the_chain_after_the_last_user_and_before_the_first():
    """Into n: whichever of u1, u2 streams last (finishing at 20 or later), its host chain
    (7) still runs before n: 20 + 7 + 10 = 37, a schedule's length; the work term alone
    gave 20 + 10. Out of n the mirror image: n, a chain, then 20 of work: 37."""
    from pccx_flow.schedule.nearest import chains_around

    for into in (True, False):
        problem = chains_example(into)
        bounds = pool_chain_bounds(problem)
        assert bounds["pool_chain:port"] == 37
        # the GEMV lane runs exactly the port's users: the same resource, the same bound
        assert bounds["pool_chain:gemv_lanes"] == 37
        best = min(run_policy(problem, policy=p).makespan for p in BUILTIN_POLICIES)
        assert best == 37
    problem = chains_example(True)
    cost = {n: problem.min_cost(n) for n in problem.order}
    users = {"u1": 0, "u2": 1, "n": 2}  # each user's position
    to_user, from_user = chains_around(problem, users, cost, problem.preds, problem.succs)

    def chains(at):  # (chain, user's position) pairs, shortest first
        row, shift = at
        return [(x + shift, b) for x, b in row]

    # n's nearest users above: u1 and u2, each 7 away; h1's: u1 right above; u1 has none
    assert [chains(to_user[n]) for n in ("n", "h1", "u1")] == [[(7, 0), (7, 1)], [(0, 0)], []]
    assert [chains(from_user[n]) for n in ("u1", "h1", "n")] == [[(7, 2)], [(0, 2)], []]
    # one user reached by two chains: n waits for both, so the longer counts
    g = nx.DiGraph([("u", "a"), ("a", "b"), ("u", "c"), ("b", "n"), ("c", "n")])
    lanes = [Lane("g0", "gemv"), Lane("c0", "host")]
    costs = {"u": {"g0": 1}, "n": {"g0": 1}, "a": {"c0": 2}, "b": {"c0": 3}, "c": {"c0": 4}}
    p = SchedulingProblem(g, lanes, costs, resources={"u": ("port",), "n": ("port",)},
                          pools={"port": 1})  # fmt: skip
    cost = {n: p.min_cost(n) for n in p.order}
    to_user, from_user = chains_around(p, {"u": 0, "n": 1}, cost, p.preds, p.succs)
    assert chains(to_user["n"]) == [(5, 0)] and chains(from_user["u"]) == [(5, 1)]  # u-a-b-n


def test_pool_chain_counts_only_the_chains_of_users_between_two_nodes():
    """A block, as a decode layer's attention: its start s feeds two streams p1, p2, each
    followed by a host chain of 12 (two nodes of 6) into the block's end e, as the O
    projection and LAuReL are. A user c above s (the layer's AltUp coefficients) reaches e
    by one short host node k (1). Whichever stream runs second (finishing 20 after s at the
    earliest), its chain runs after it: e finishes at 10 + 1 + 2 + 20 + 12 + 10 = 55 at
    best. Taking the chain into e as the least from any user above e (c's, 1) gave 45: the
    users between s and e are p1 and p2 only, and both chains out of them are 12."""
    g = nx.DiGraph(
        [("c", "k"), ("k", "s"), ("k", "e"), ("s", "p1"), ("s", "p2"), ("p1", "h1"),
         ("h1", "h2"), ("h2", "e"), ("p2", "g1"), ("g1", "g2"), ("g2", "e")]
    )  # fmt: skip
    lanes = [Lane("g0", "gemv"), Lane("c0", "host"), Lane("c1", "host")]
    costs = {n: {"g0": 10} for n in ("c", "p1", "p2", "e")}
    costs |= {n: {"c0": 6, "c1": 6} for n in ("h1", "h2", "g1", "g2")}
    costs |= {"k": {"c0": 1, "c1": 1}, "s": {"c0": 2, "c1": 2}}
    pools = {n: ("port",) for n in ("c", "p1", "p2", "e")}
    problem = SchedulingProblem(g, lanes, costs, resources=pools, pools={"port": 1})
    assert pool_chain_bounds(problem)["pool_chain:port"] == 55
    best = min(run_policy(problem, policy=p).makespan for p in BUILTIN_POLICIES)
    assert best == 55


def test_a_lane_class_is_a_resource_when_its_work_is_as_large_as_the_pools():
    """Two GEMV lanes that are also the two ports' lanes (as on v002-as-built): four weight
    streams and two attention GEMVs (no port) into a fifth stream n. The ports see 40 / 2
    before n, 30 in all; the lanes see 60 / 2 before n, 40: the best schedule's length."""
    from pccx_flow.schedule.chains import chain_resources

    g = nx.DiGraph([(a, "n") for a in ("p1", "p2", "p3", "p4", "a1", "a2")])
    lanes = [Lane("g0", "gemv"), Lane("g1", "gemv"), Lane("c0", "host")]
    costs = {n: {"g0": 10, "g1": 10} for n in g}
    users = {n: ("port",) for n in ("p1", "p2", "p3", "p4", "n")}
    problem = SchedulingProblem(g, lanes, costs, resources=users, pools={"port": 2})
    assert [(name, k, len(u)) for name, k, u in chain_resources(problem)] == [
        ("port", 2, 5), ("gemv_lanes", 2, 7)
    ]
    bounds = pool_chain_bounds(problem)
    assert bounds == {"pool_chain:port": 30, "pool_chain:gemv_lanes": 40}
    assert min(run_policy(problem, policy=p).makespan for p in BUILTIN_POLICIES) == 40
    # a class with less work than the pool is not walked (the host lane here has none)
    assert "pool_chain:host_lanes" not in bounds


def test_order_only_edges_do_not_lengthen_a_bound():
    """A heuristic's order-only edge (c before a) is not a hardware constraint: the critical
    path and the pool-chain bound walk the data edges only, so they stay at what a schedule
    that ignores the edge achieves (c beside a on the other lane)."""
    from pccx_flow.schedule.metrics import min_cost_critical_path
    from pccx_flow.schedule.precedence import hardware_precedence

    g = nx.DiGraph()
    g.add_edge("a", "b")
    g.add_edge("c", "a", order_only=True)
    lanes = [Lane("x0", "x"), Lane("x1", "x")]
    costs = {"a": {"x0": 2, "x1": 2}, "b": {"x0": 3, "x1": 3}, "c": {"x0": 10, "x1": 10}}
    problem = SchedulingProblem(g, lanes, costs, resources={"c": ("p",), "a": ("p",)},
                                pools={"p": 2})  # fmt: skip
    preds, succs = hardware_precedence(problem)
    assert preds["a"] == () and succs["c"] == () and preds["b"] == ("a",)
    assert problem.preds["a"] == ("c",) and problem.succs["c"] == ("a",)  # schedules obey it
    assert min_cost_critical_path(problem) == 10  # c alone; a -> b is 5; not c -> a -> b = 15
    assert pool_chain_bounds(problem)["pool_chain:p"] <= 10
    # the schedule that ignores the edge: c on x1 from 0 to 10, a then b on x0: makespan 10


def capacity_example(capacity: int) -> SchedulingProblem:
    """Four 1-byte reads (10 cycles each on one DMA lane) of which a gate q (5 cycles) must
    finish before any reader; the reads' readers feed n, which holds the pool."""
    g = nx.DiGraph()
    for i in range(4):
        g.add_edge(f"s{i}", f"r{i}")
        g.add_edge("q", f"r{i}")
        g.add_edge(f"r{i}", "n")
    lanes = [Lane("dma0", "dma"), Lane("x0", "x")]
    costs = {f"s{i}": {"dma0": 10} for i in range(4)}
    costs.update({f"r{i}": {"x0": 1} for i in range(4)})
    costs.update({"q": {"x0": 5}, "n": {"x0": 3}})
    holds = {f"s{i}": [((f"r{i}",), {"l2": 1})] for i in range(4)}
    return SchedulingProblem(g, lanes, costs, resources={"n": ("p",)}, pools={"p": 1},
                             capacities={"l2": capacity}, holds=holds)  # fmt: skip


def test_capacity_chain_counts_the_reads_the_capacity_cannot_hold_ahead():
    """Two of the four reads can be resident when the first read can be freed (11: a read
    takes 10 cycles, its reader 1 more): the other two, 20 cycles on the one DMA lane,
    start after, so the last ends at 31 or later, its reader (1) runs before n, and n ends
    at 35 or later; pool_chain alone sees the chain q -> r -> n (5 + 1 + 3) and the reads
    (10 + 1 + 3)."""
    problem = capacity_example(2)
    assert pool_chain_bounds(problem)["pool_chain:p"] == 14
    assert pool_chain_bounds(problem, capacity=True)["capacity_chain:p"] == 35
    # room for all four: nothing is forced after the gate
    assert pool_chain_bounds(capacity_example(4), capacity=True)["capacity_chain:p"] == 14
    # the DMA lane as a resource: four reads in a row, then a reader and n, 40 + 1 + 3
    # (the schedule below is that long)
    from pccx_flow.schedule.chains import chain_bounds

    for capacity in (2, 4):
        bounds = chain_bounds(capacity_example(capacity), plain=True, capacity=True)
        assert bounds["capacity_chain:dma_lanes"] == 44
        # as `schedule` asks (both kinds): the x lane's work (12) plus the idle the port's
        # pool_chain proved (11) is far below 44, so its pass is skipped
        assert "capacity_chain:x_lanes" not in bounds
    # a valid schedule by hand: two reads, their readers, then the next two as room frees
    rows = {"s0": ("dma0", 0, 10), "s1": ("dma0", 10, 20), "s2": ("dma0", 20, 30),
            "s3": ("dma0", 30, 40), "q": ("x0", 0, 5), "r0": ("x0", 10, 11),
            "r1": ("x0", 20, 21), "r2": ("x0", 30, 31), "r3": ("x0", 40, 41),
            "n": ("x0", 41, 44)}  # fmt: skip
    slots = {n: Slot(n, ln, a, b, ("p0",) if n == "n" else ()) for n, (ln, a, b) in rows.items()}
    validate_schedule(Schedule("hand", "none", problem.lanes, slots), problem)
    for policy in BUILTIN_POLICIES:  # a policy that reads every source first deadlocks here
        try:
            s = run_policy(problem, None, policy)
        except PccxFlowError:
            continue
        assert s.makespan >= 28, policy


def test_a_read_is_freed_only_after_every_head_it_feeds_was_projected():
    """Two 1-byte tiles, room for one. Each tile's readers need all four heads, projected
    through a pool of two instances (10 cycles each, after a 1-cycle gate): the first tile
    cannot be freed before 1 + 40 / 2 + 1 = 22, so the second tile's read ends at 32 or
    later, one of its readers (1) runs after it and n (1 cycle) ends at 34 or later: the
    best schedule's length. Reader starts alone give only 11 + 10 + 1."""
    g = nx.DiGraph()
    heads, tiles = range(4), range(2)
    for h in heads:
        g.add_edge("gate", f"h{h}")
        for t in tiles:
            g.add_edge(f"h{h}", f"r{t}{h}")
            g.add_edge(f"s{t}", f"r{t}{h}")
            g.add_edge(f"r{t}{h}", "n")
    lanes = [Lane("dma0", "dma"), Lane("x0", "x")] + [Lane(f"w{i}", "w") for i in range(8)]
    wide = {f"w{i}": 1 for i in range(8)}
    costs = {"gate": {"x0": 1}, "n": {"x0": 1}}
    costs.update({f"s{t}": {"dma0": 10} for t in tiles})
    costs.update({f"h{h}": {k: 10 for k in wide} for h in heads})
    costs.update({f"r{t}{h}": wide for t in tiles for h in heads})
    holds = {f"s{t}": [(tuple(f"r{t}{h}" for h in heads), {"l2": 1})] for t in tiles}
    problem = SchedulingProblem(g, lanes, costs, resources={f"h{h}": ("p",) for h in heads},
                                pools={"p": 2}, capacities={"l2": 1}, holds=holds)  # fmt: skip
    assert pool_chain_bounds(problem, capacity=True)["capacity_chain:p"] == 34
    # the best schedule by hand ends at 34
    rows = {"gate": ("x0", 0, 1), "s0": ("dma0", 0, 10), "s1": ("dma0", 22, 32),
            "h0": ("w0", 1, 11), "h1": ("w1", 1, 11), "h2": ("w0", 11, 21),
            "h3": ("w1", 11, 21), "n": ("x0", 33, 34)}  # fmt: skip
    rows.update({f"r0{h}": (f"w{2 + h}", 21, 22) for h in heads})
    rows.update({f"r1{h}": (f"w{2 + h}", 32, 33) for h in heads})
    pool = {"h0": ("p0",), "h1": ("p1",), "h2": ("p0",), "h3": ("p1",)}
    slots = {n: Slot(n, ln, a, b, pool.get(n, ())) for n, (ln, a, b) in rows.items()}
    schedule = Schedule("hand", "none", problem.lanes, slots)
    validate_schedule(schedule, problem)
    assert schedule.makespan == 34


def test_the_early_reads_are_a_0_1_knapsack_of_whole_tiles():
    """Three 512 KiB tiles fit in 1.75 MiB, not three and a half; with many kinds of item
    the fractional relaxation (at least the 0/1 optimum) is used instead."""
    from pccx_flow.schedule.capacity import KNAPSACK_COMBINATIONS, most_work_within

    tile = 512 * 1024
    assert most_work_within([(tile, 100)] * 32, 3 * tile + tile // 2) == 300
    assert most_work_within([(3, 5), (4, 6), (2, 3)], 6) == 9  # (4, 6) + (2, 3), not 5 + 3
    many = [(i + 1, 2 * i + 1) for i in range(KNAPSACK_COMBINATIONS.bit_length() + 1)]
    best = [0] * 11  # the 0/1 optimum by dynamic programming over bytes
    for nbytes, work in many:
        for room in range(10, nbytes - 1, -1):
            best[room] = max(best[room], best[room - nbytes] + work)
    assert best[10] == 19
    # by work per byte the largest item comes first and is cut: ceil(35 * 10 / 18)
    assert most_work_within(many, 10) == 20
    # an item of no bytes always fits: the relaxation counts it before any cut
    free = [(0, 1)] + [(1, 3 + i) for i in range(KNAPSACK_COMBINATIONS.bit_length() + 3)]
    assert most_work_within(free, 5) >= 1 + sum(sorted((w for b, w in free if b), reverse=True)[:5])


def test_forced_starts_take_the_gap_after_a_layers_reads_from_one_read_per_kind(monkeypatch):
    """The gap from a KV read to a node below depends only on the users below the read and
    its chains to them, so `ForcedStarts` measures one read per such pair: E4B's first
    layer at 2047 tokens has 16 reads of 4 kinds, and its capacity chain is the same as
    with every read measured, while a single read of the wrong kind gives a larger one
    (the least gap over the reads is what the bound may add)."""
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.hardware.profile import load_profile
    from pccx_flow.schedule import capacity
    from pccx_flow.schedule.chains import chain_bounds
    from pccx_flow.schedule.problem import problem_from_graph

    profile = load_profile("v002-spec")
    graph = build_decode_graph("e4b", position=2047, profile=profile, layers=(0, 1))
    problem = problem_from_graph(graph, profile, memory=True)
    made = []
    init = capacity.ForcedStarts.__init__

    def bound(pick) -> int:
        def replaced(self, *args, **kwargs):
            init(self, *args, **kwargs)
            pairs = list(zip(self.groups, self.gap_sources, strict=True))
            made.append([(len(g.sources), len(kinds)) for g, kinds in pairs])
            self.gap_sources = [pick(g, kinds) for g, kinds in pairs]

        monkeypatch.setattr(capacity.ForcedStarts, "__init__", replaced)
        return chain_bounds(problem, capacity=True)["capacity_chain:weight_port"]

    one_per_kind = bound(lambda g, kinds: kinds)
    assert made[0] == [(16, 4)]
    assert one_per_kind == bound(lambda g, kinds: sorted(g.sources))
    assert max(bound(lambda g, kinds, k=k: [kinds[k]]) for k in range(4)) > one_per_kind


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.data())
def test_chains_to_readers_are_the_extreme_paths_to_a_reader(data):
    """`chains_to_readers` against every path of a small random DAG: from each user, the
    most (least) cost along a path of its descendants that ends at a reader, the user
    itself not counted; no entry for a user with no reader below it."""
    from pccx_flow.schedule.capacity import chains_to_readers

    n = data.draw(st.integers(2, 9))
    edges = [(u, v) for u in range(n) for v in range(u + 1, n) if data.draw(st.booleans())]
    cost = {v: data.draw(st.integers(0, 9)) for v in range(n)}
    readers = set(data.draw(st.lists(st.integers(0, n - 1), min_size=1, unique=True)))
    users = set(data.draw(st.lists(st.integers(0, n - 1), min_size=1, unique=True)))
    preds = {v: tuple(u for u, w in edges if w == v) for v in range(n)}
    succs = {v: [w for u, w in edges if u == v] for v in range(n)}

    def paths_cost(x):  # the costs of every path from x down that ends at a reader
        out = [cost[x]] if x in readers else []
        for s in succs[x]:
            out += [cost[x] + c for c in paths_cost(s)]
        return out

    for longest, pick in ((True, max), (False, min)):
        want = {}
        for u in users:
            ends = [c for s in succs[u] for c in paths_cost(s)]
            if ends:
                want[u] = pick(ends)
        index = {v: v for v in range(n)}
        assert chains_to_readers(users, readers, preds, index, cost, longest=longest) == want

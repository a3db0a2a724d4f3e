"""CP-SAT optimum: proven on small instances, no heuristic beats it, no bound exceeds it."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schedule.problems import heft_paper_problem  # tests/schedule; pytest puts tests/ on sys.path

from pccx_flow.compare.exact import ExactPolicy, ortools_available, solve_exact
from pccx_flow.compare.families import FAMILIES, random_dag
from pccx_flow.compare.run import instance_bounds
from pccx_flow.schedule.dagfile import problem_from_spec
from pccx_flow.schedule.registry import BUILTIN_POLICIES, run_on_problem, run_policy

pytestmark = pytest.mark.skipif(
    not ortools_available(), reason="ortools not installed (pip install 'pccx-flow[exact]')"
)


def test_heft_paper_example_optimum_is_below_heft():
    p = heft_paper_problem()
    res = solve_exact(p, seconds=20)
    assert res["status"] == "optimal" and res["lower_bound"] == res["makespan"]
    checked = run_on_problem(ExactPolicy(res["placement"]), p, label="exact", profile="x")
    assert checked.makespan == res["makespan"]
    assert run_policy(p, policy="heft").makespan == 80  # the paper's Fig. 3
    assert res["makespan"] < 80


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    family=st.sampled_from(FAMILIES),
    n=st.integers(2, 9),
    seed=st.integers(0, 10_000),
    pools=st.booleans(),
)
def test_optimum_is_proven_and_brackets_heuristics_and_bounds(family, n, seed, pools):
    p = problem_from_spec(random_dag(family, n, seed, pools=pools))
    res = solve_exact(p, seconds=20)
    assert res["status"] == "optimal"
    opt = run_on_problem(ExactPolicy(res["placement"]), p, label="exact", profile="x").makespan
    assert opt == res["makespan"] == res["lower_bound"]
    for name in BUILTIN_POLICIES:
        assert run_policy(p, policy=name).makespan >= opt, name
    for name, bound in instance_bounds(p, None).items():
        assert bound <= opt, name


@st.composite
def reads_into_a_capacity(draw):
    """KV-like reads (sources holding bytes of one capacity until their readers finish) into
    a chain of pool users, with a capacity too small to hold every read at once."""
    import networkx as nx

    from pccx_flow.schedule.model import Lane
    from pccx_flow.schedule.problem import SchedulingProblem

    g = nx.DiGraph()
    users = [f"c{j}" for j in range(draw(st.integers(2, 4)))]
    reads = [f"r{i}" for i in range(draw(st.integers(2, 5)))]
    g.add_nodes_from(reads + users)
    for a, b in zip(users, users[1:], strict=False):
        if draw(st.booleans()):
            g.add_edge(a, b)
    costs, resources, holds, need = {}, {}, {}, {}
    for r in reads:
        readers = draw(st.lists(st.sampled_from(users), min_size=1, max_size=2, unique=True))
        g.add_edges_from((r, c) for c in readers)
        nbytes = draw(st.integers(1, 10))
        holds[r] = [(tuple(readers), {"l2": nbytes})]
        costs[r] = {"dma0": draw(st.integers(1, 9))}
        for c in readers:
            need[c] = need.get(c, 0) + nbytes
    for c in users:
        costs[c] = {"g0": draw(st.integers(1, 9)), "g1": draw(st.integers(1, 9))}
        resources[c] = ("port",)
    fits = max(need.values())
    capacity = draw(st.integers(fits, max(fits, sum(need.values()))))
    lanes = [Lane("dma0", "dma"), Lane("g0", "gemv"), Lane("g1", "gemv")]
    return SchedulingProblem(g, lanes, costs, resources=resources, pools={"port": 1},
                             capacities={"l2": capacity}, holds=holds)  # fmt: skip


@st.composite
def reads_behind_projections(draw):
    """KV-like tiles whose readers also need several pool users (a layer's per-head Q
    projections behind one gate), readers feeding one sink: the shape on which
    capacity_chain's release gate counts the pool work before a tile can be freed. A head
    may reach its readers through a short chain (a Q norm), which the gate adds after the
    last projection, and its readers may feed a pool user of its own before the sink (the
    users between the last read and a merge, which the forced start adds)."""
    import networkx as nx

    from pccx_flow.schedule.model import Lane
    from pccx_flow.schedule.problem import SchedulingProblem

    g = nx.DiGraph()
    heads = [f"h{j}" for j in range(draw(st.integers(1, 4)))]
    tiles = [f"t{i}" for i in range(draw(st.integers(2, 4)))]
    costs = {"gate": {"x0": draw(st.integers(0, 5))}, "sink": {"x0": draw(st.integers(1, 5))}}
    resources, holds = {}, {}
    out = {}  # the node a head's readers read: the head, or the end of its chain
    for h in heads:
        g.add_edge("gate", h)
        costs[h] = {"g0": draw(st.integers(1, 9)), "g1": draw(st.integers(1, 9))}
        resources[h] = ("port",)
        out[h] = h
        for k in range(draw(st.integers(0, 2))):
            c = f"{h}.n{k}"
            g.add_edge(out[h], c)
            costs[c] = {"x0": draw(st.integers(0, 4)), "x1": draw(st.integers(0, 4))}
            out[h] = c
    # a head's readers may feed a pool user of its own before the sink (its O projection
    # tile): the sink is then a merge with users of every head behind it
    after = {}
    if draw(st.booleans()):
        for h in heads:
            after[h] = f"o.{h}"
            costs[after[h]] = {"g0": draw(st.integers(1, 9)), "g1": draw(st.integers(1, 9))}
            resources[after[h]] = ("port",)
            g.add_edge(after[h], "sink")
    nbytes = {t: draw(st.integers(1, 6)) for t in tiles}
    for t in tiles:
        costs[t] = {"dma0": draw(st.integers(1, 12))}
        used = draw(st.lists(st.sampled_from(heads), min_size=1, unique=True))
        readers = []
        for h in used:
            r = f"{t}.{h}"
            g.add_edges_from([(t, r), (out[h], r), (r, after.get(h, "sink"))])
            costs[r] = {"x0": draw(st.integers(0, 3)), "x1": draw(st.integers(0, 3))}
            readers.append(r)
        holds[t] = [(tuple(readers), {"l2": nbytes[t]})]
    # the gate's output, kept for the sink (a layer's main stream, kept for the residual
    # add after attention): resident beside the tiles when the first is freed
    bridge = draw(st.integers(0, 3))
    if bridge:
        g.add_edge("gate", "sink")
        holds["gate"] = [(("sink",), {"l2": bridge})]
    capacity = draw(st.integers(max(nbytes.values()) + bridge, sum(nbytes.values()) + bridge))
    lanes = [Lane("dma0", "dma"), Lane("g0", "gemv"), Lane("g1", "gemv"),
             Lane("x0", "x"), Lane("x1", "x")]  # fmt: skip
    return SchedulingProblem(g, lanes, costs, resources=resources,
                             pools={"port": draw(st.integers(1, 2))},
                             capacities={"l2": capacity}, holds=holds)  # fmt: skip


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=reads_into_a_capacity())
def test_capacity_bounds_never_exceed_the_optimum_within_the_capacity(problem):
    """The CP-SAT model with the capacity as a cumulative is validated (occupancy included)
    and brackets the policies; capacity_chain and residency stay at or below it."""
    from pccx_flow.errors import PolicyError

    res = solve_exact(problem, seconds=20)
    if res["status"] == "infeasible":
        # a read held for a late reader can leave no room for another reader's read (e.g.
        # capacity 1, r1 -> c0, c2 and r0 -> c1 on the chain c0 -> c1 -> c2): no schedule
        # fits, and every policy must say so rather than return one
        for name in ("heft", "critical-path", "etf"):
            with pytest.raises(PolicyError, match="memory deadlock|cannot fit|no schedule"):
                run_policy(problem, policy=name)
        return
    assert res["status"] == "optimal"
    opt = run_on_problem(ExactPolicy(res["placement"]), problem, label="exact",
                         profile="x").makespan  # fmt: skip
    assert opt == res["makespan"]
    for name in ("heft", "critical-path", "etf"):
        # an order that cannot fit is refused (a one-line error), never a shorter schedule
        with contextlib.suppress(PolicyError):
            assert run_policy(problem, policy=name).makespan >= opt, name
    bounds = instance_bounds(problem, None)
    assert any(b.startswith("capacity_chain:") for b in bounds)
    for name, bound in bounds.items():
        assert bound <= opt, (name, bound, opt)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=reads_behind_projections())
def test_capacity_chain_never_exceeds_the_optimum_behind_pool_work(problem):
    """Tiles freed only after pool work (their readers' projections): capacity_chain's
    release gate stays at or below the CP-SAT optimum within the capacity, and bounding
    all but the lowest hold by the group's shortest chains (`EXACT_HOLDS` 1) gives no
    more than each hold's own longest ones."""
    from pccx_flow.schedule import capacity

    res = solve_exact(problem, seconds=20)
    assert res["status"] == "optimal"  # every tile fits alone, readers need no other tile
    opt = run_on_problem(ExactPolicy(res["placement"]), problem, label="exact",
                         profile="x").makespan  # fmt: skip
    assert opt == res["makespan"]
    bounds = instance_bounds(problem, None)
    for name, bound in bounds.items():
        assert bound <= opt, (name, bound, opt)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(capacity, "EXACT_HOLDS", 1)
        short = instance_bounds(problem, None)
    for name, bound in short.items():
        assert bound <= bounds[name], (name, bound, bounds[name])


def bridged_tiles(tiles: int, capacity: int):
    """KV-like tiles (2 bytes, 10 cycles of DMA each) read by one reader each after a long
    projection (30 cycles), and a 1-byte hold on the gate that feeds it (a layer's main
    stream; the gate has an input, so it is not a read itself) read below every reader (as
    the residual add after attention)."""
    import networkx as nx

    from pccx_flow.schedule.model import Lane
    from pccx_flow.schedule.problem import SchedulingProblem

    g = nx.DiGraph([("start", "gate"), ("gate", "proj"), ("gate", "bridge_reader"),
                    ("bridge_reader", "sink")])  # fmt: skip
    costs = {"start": {"x0": 0}, "gate": {"x0": 0}, "proj": {"g0": 30}, "sink": {"x0": 1},
             "bridge_reader": {"x0": 0}}  # fmt: skip
    holds = {}
    for i in range(tiles):
        t, r = f"t{i}", f"r{i}"
        g.add_edges_from([(t, r), ("proj", r), (r, "sink"), (r, "bridge_reader")])
        costs[t], costs[r] = {"dma0": 10}, {"x0": 1}
        holds[t] = [((r,), {"l2": 2})]
    holds["gate"] = [(("bridge_reader",), {"l2": 1})]
    lanes = [Lane("dma0", "dma"), Lane("g0", "gemv"), Lane("x0", "x")]
    return SchedulingProblem(g, lanes, costs, resources={"proj": ("port",)},
                             pools={"port": 1}, capacities={"l2": capacity},
                             holds=holds)  # fmt: skip


def test_capacity_chain_counts_a_hold_kept_beside_the_first_tiles():
    """Four tiles of 2 bytes in 6 bytes, beside the gate's byte kept until every tile is
    read: only two tiles fit before the projection lets the first be freed (at 31), so
    two are read after it, 20 cycles on the one DMA lane, and the sink waits for them:
    53, CP-SAT's optimum. Without the kept byte the bound took three tiles for early (43)."""
    from pccx_flow.schedule import capacity

    kept = bridged_tiles(4, capacity=6)
    res = solve_exact(kept, seconds=20)
    assert (res["status"], res["makespan"]) == ("optimal", 53)
    assert instance_bounds(kept, None)["capacity_chain:port"] == 53
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(capacity, "resident_beside", lambda *args: {})
        assert instance_bounds(kept, None)["capacity_chain:port"] == 43


def test_a_node_of_no_time_may_sit_inside_another_nodes_slot():
    """The validator lets a 0-cycle node start inside another node's slot on its lane;
    CP-SAT's NoOverlap did not, and called 6 optimal where heft's valid schedule took 5
    (z on c1 inside y's 3..5; found by the phases-with-chains property below)."""
    import networkx as nx

    from pccx_flow.schedule.model import Lane
    from pccx_flow.schedule.problem import SchedulingProblem

    g = nx.DiGraph([("s", "u0"), ("u0", "u1"), ("u1", "u2"), ("u1", "u3"), ("u2", "z"),
                    ("u3", "y"), ("z", "w"), ("w", "end"), ("y", "end")])  # fmt: skip
    lanes = [Lane("g0", "gemv"), Lane("g1", "gemv"), Lane("c0", "host"), Lane("c1", "host")]
    costs = {u: {"g0": 1, "g1": 1} for u in ("u0", "u1", "u2", "u3")}
    costs |= {"s": {"c0": 0}, "end": {"c0": 0}, "z": {"c0": 1, "c1": 0},
              "w": {"c0": 1, "c1": 1}, "y": {"c0": 3, "c1": 2}}  # fmt: skip
    problem = SchedulingProblem(g, lanes, costs, pools={"port": 1},
                                resources={u: ("port",) for u in ("u0", "u1", "u2", "u3")})
    res = solve_exact(problem, seconds=20)
    assert (res["status"], res["makespan"]) == ("optimal", 5)
    assert run_policy(problem, policy="heft").makespan == 5


@st.composite
def phases_with_chains(draw):
    """Phases of pool users (a block's weight streams) joined by host chains of random
    length, with random skip edges: the shape on which pool_chain adds the chain after a
    phase's last user and before the next phase's first (`nearest.chains_around`)."""
    import networkx as nx

    from pccx_flow.schedule.model import Lane
    from pccx_flow.schedule.problem import SchedulingProblem

    g = nx.DiGraph()
    costs, resources, prev = {}, {}, ["start"]
    costs["start"] = {"c0": draw(st.integers(0, 3))}
    nodes = ["start"]
    for i in range(draw(st.integers(1, 3))):
        users = [f"p{i}u{j}" for j in range(draw(st.integers(1, 3)))]
        for u in users:
            costs[u] = {"g0": draw(st.integers(1, 9)), "g1": draw(st.integers(1, 9))}
            resources[u] = ("port",)
            g.add_edges_from((p, u) for p in prev)
        tails = []
        for u in users:  # each user's own chain, or straight into the next phase
            end = u
            for k in range(draw(st.integers(0, 2))):
                c = f"{u}.c{k}"
                costs[c] = {"c0": draw(st.integers(0, 6)), "c1": draw(st.integers(0, 6))}
                g.add_edge(end, c)
                end = c
            tails.append(end)
        nodes += users + [n for n in g if n not in nodes and n not in users]
        prev = tails
    costs["end"] = {"c0": draw(st.integers(0, 3))}
    g.add_edges_from((p, "end") for p in prev)
    order = list(nx.topological_sort(g))
    for _ in range(draw(st.integers(0, 3))):  # skip edges, forward in one topological order
        a, b = sorted(draw(st.lists(st.integers(0, len(order) - 1), min_size=2, max_size=2,
                                    unique=True)))  # fmt: skip
        g.add_edge(order[a], order[b])
    lanes = [Lane("g0", "gemv"), Lane("g1", "gemv"), Lane("c0", "host"), Lane("c1", "host")]
    return SchedulingProblem(g, lanes, costs, resources=resources,
                             pools={"port": draw(st.integers(1, 2))})  # fmt: skip


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=phases_with_chains())
def test_pool_chain_never_exceeds_the_optimum_of_phases_joined_by_chains(problem):
    """pool_chain's head and tail chains around the pool work stay at or below the CP-SAT
    optimum (and the policies at or above it)."""
    res = solve_exact(problem, seconds=20)
    assert res["status"] == "optimal"
    opt = run_on_problem(ExactPolicy(res["placement"]), problem, label="exact",
                         profile="x").makespan  # fmt: skip
    assert opt == res["makespan"]
    for name in ("heft", "critical-path"):
        assert run_policy(problem, policy=name).makespan >= opt, name
    for name, bound in instance_bounds(problem, None).items():
        assert bound <= opt, (name, bound, opt)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problem=phases_with_chains())
def test_pool_chain_keeping_one_nearest_user_only_loosens_it(problem):
    """`nearest._nearest_rows` keeps a node's `NEAREST_KEPT` shortest chains and a floor for the
    rest; kept to one, the bounds may fall but never rise above the full ones (small
    problems keep every chain by default), so the truncation of E4B's long rows is safe."""
    from pccx_flow.schedule import chains, nearest

    full = chains.pool_chain_bounds(problem)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(nearest, "NEAREST_KEPT", 1)
        short = chains.pool_chain_bounds(problem)
    assert short.keys() == full.keys()
    for name, bound in short.items():
        assert bound <= full[name], (name, bound, full[name])


CTRL_C_IN_A_SOLVE = """
import os, signal, sys, threading
from ortools.sat.python import cp_model
from pccx_flow.compare.exact import _solve

m = cp_model.CpModel()
xs = [m.NewIntVar(0, 10**6, f"x{i}") for i in range(60)]
for i in range(59):
    m.Add(xs[i] != xs[i + 1])
m.Add(sum(xs) == 12345678)
m.Minimize(sum(x * (i % 7 + 1) for i, x in enumerate(xs)))
solver = cp_model.CpSolver()
solver.parameters.max_time_in_seconds = 300
solver.parameters.log_search_progress = True
solver.parameters.log_to_stdout = False
started = threading.Event()
solver.log_callback = lambda _line: started.set()
def ctrl_c():
    started.wait()
    os.kill(os.getpid(), signal.SIGINT)
threading.Thread(target=ctrl_c, daemon=True).start()
try:
    _solve(solver, m)
except KeyboardInterrupt:
    print("interrupted", [t.name for t in threading.enumerate() if t.name == "cp-sat"])
    sys.exit(0)
print("the solve ran on")
"""


def test_ctrl_c_during_a_solve_interrupts_the_command_and_exits_cleanly():
    """CP-SAT's own SIGINT handler only ended the search: a sweep ran on and exited 0. Now
    Ctrl-C (sent once the search is running) reaches Python as KeyboardInterrupt, the solver
    thread is gone, and the process exits normally (no C++ terminate at shutdown)."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    proc = subprocess.run(
        [sys.executable, "-c", CTRL_C_IN_A_SOLVE], capture_output=True, text=True, timeout=120,
        env={**os.environ, "PYTHONPATH": str(root)},
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    assert (proc.returncode, proc.stdout) == (0, "interrupted []\n"), proc.stderr[-300:]


@pytest.mark.parametrize("seed", [1, 7])
def test_energy_and_parameters_keep_the_optimum(seed):
    """The pool-energy constraint is redundant and parameters only steer the search: the
    proven optimum of a DAG with a pool is the same with and without them."""
    p = problem_from_spec(random_dag(FAMILIES[0], 8, seed, pools=True))
    plain = solve_exact(p, seconds=20)
    tuned = solve_exact(p, seconds=20, energy=True, parameters={"linearization_level": 2,
                        "subsolvers": ["default_lp"]})  # fmt: skip
    assert plain["status"] == tuned["status"] == "optimal"
    assert plain["makespan"] == tuned["makespan"] == tuned["lower_bound"]
    run_on_problem(ExactPolicy(tuned["placement"]), p, label="exact", profile="x")

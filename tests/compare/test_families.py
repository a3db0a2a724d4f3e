"""Random DAG families: seeded, acyclic, the right shape, heterogeneous, pools on request."""

from __future__ import annotations

import networkx as nx
import pytest

from pccx_flow.compare.families import FAMILIES, random_dag, random_sizes
from pccx_flow.schedule.dagfile import problem_from_spec


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("n", [2, 9, 60])
def test_every_family_builds_a_valid_problem_of_n_nodes(family, n):
    spec = random_dag(family, n, seed=4)
    assert spec == random_dag(family, n, seed=4)  # same seed, same instance
    p = problem_from_spec(spec)
    g = p.graph
    assert len(p) == n and nx.is_directed_acyclic_graph(g) and nx.is_weakly_connected(g)
    entries = [v for v in g if g.in_degree(v) == 0]
    exits = [v for v in g if g.out_degree(v) == 0]
    if family in ("fork_join", "series_parallel", "out_tree"):
        assert len(entries) == 1
    if family in ("fork_join", "series_parallel", "in_tree"):
        assert len(exits) == 1
    if family in ("in_tree", "out_tree"):
        assert g.number_of_edges() == n - 1


def test_lanes_are_heterogeneous_with_comm_and_pools():
    specs = [random_dag(f, 40, s) for f in FAMILIES for s in range(4)]
    problems = [problem_from_spec(s) for s in specs]
    assert all(p.has_comm or not p.graph.number_of_edges() for p in problems)
    assert any(len({tuple(sorted(p.costs[n].values())) for n in p.order}) > 1 for p in problems)
    # some nodes only one lane class can run; some hold the shared pool
    assert any(len(p.costs[n]) < len(p.lanes) for p in problems for n in p.order)
    assert all(p.pools and any(p.resources[n] for n in p.order) for p in problems)
    # per-lane costs are unrelated (not one speed ratio for every node)
    p = problems[0]
    a, b = p.lanes[0].name, p.lanes[1].name
    ratios = {round(p.costs[n][a] / p.costs[n][b], 3) for n in p.order if {a, b} <= set(p.costs[n])}
    assert len(ratios) > 1


def test_no_pools_when_asked_and_seeds_differ():
    spec = random_dag("layered", 30, 1, pools=False)
    assert spec["pools"] == {} and not any(n.get("pools") for n in spec["nodes"])
    assert random_dag("layered", 30, 1) != random_dag("layered", 30, 2)


def test_sweep_sizes_cycle_families_and_span_small_to_large():
    sizes = random_sizes(200, seed=0)
    assert [f for f, _ in sizes[:5]] == list(FAMILIES)
    ns = [n for _, n in sizes]
    assert min(ns) >= 8 and max(ns) <= 500
    assert 0.25 < sum(n <= 40 for n in ns) / len(ns) < 0.6  # enough for the exact solver
    assert sizes == random_sizes(200, seed=0) and sizes != random_sizes(200, seed=1)

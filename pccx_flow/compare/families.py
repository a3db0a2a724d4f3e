"""Seeded random DAG families with heterogeneous lanes, communication costs and shared pools.

The shapes scheduling papers test on (saga's random families, the HEFT paper's generator):

- ``layered``: nodes in ~sqrt(n) levels, each node fed by 1-3 nodes of earlier levels;
- ``fork_join``: a chain of stages, each a fork into parallel nodes and a join;
- ``series_parallel``: a two-terminal series-parallel graph grown by random series and
  parallel expansions of its edges;
- ``in_tree`` (many entries, one exit: a reduction) and ``out_tree`` (one entry: a broadcast).

Every instance gets 2-4 lanes of two classes (``cpu``, ``acc``) with different speeds, per-lane
costs with noise (so lanes are unrelated, as in HEFT's model), about one node in five that only
one class can run, per-edge comm scaled to a drawn communication-to-computation ratio
(0.1-2), and, unless ``pools=False``, a shared pool ``port`` with 1-2 instances that about a
third of the nodes hold while they run (a weight port). Everything is a plain JSON-ready spec
(`pccx_flow.schedule.dagfile` format) drawn from ``random.Random`` seeded with the family, size
and seed, so an instance is named by those three and is the same on every machine.
"""

from __future__ import annotations

import math
import random

FAMILIES = ("layered", "fork_join", "series_parallel", "in_tree", "out_tree")


def _layered(rng: random.Random, n: int) -> list[tuple[int, int]]:
    levels = max(2, round(math.sqrt(n)))
    level_of = sorted(rng.randrange(levels) for _ in range(n))
    level_of[0] = 0
    edges = set()
    for v in range(n):
        earlier = [u for u in range(v) if level_of[u] < level_of[v]]
        if not earlier:
            continue
        close = [u for u in earlier if level_of[u] == level_of[v] - 1] or earlier
        for _ in range(rng.randint(1, 3)):
            edges.add((rng.choice(close if rng.random() < 0.8 else earlier), v))
    top = level_of[-1]
    has_succ = {u for u, _ in edges}
    for u in range(n):  # no stray nodes: everything below the last level feeds a later one
        if u not in has_succ and level_of[u] < top:
            later = [v for v in range(u + 1, n) if level_of[v] > level_of[u]]
            edges.add((u, rng.choice(later[: max(1, len(later) // 4)])))
    return sorted(edges)


def _fork_join(rng: random.Random, n: int) -> list[tuple[int, int]]:
    edges, v = [], 0
    source = v
    while v + 2 < n:
        width = min(rng.randint(2, max(2, round(math.sqrt(n)))), n - v - 2)
        branch = list(range(v + 1, v + 1 + width))
        join = v + 1 + width
        edges += [(source, b) for b in branch] + [(b, join) for b in branch]
        source = v = join
    for w in range(v + 1, n):  # at most one node left over: hang it off the last join
        edges.append((v, w))
    return edges


def _series_parallel(rng: random.Random, n: int) -> list[tuple[int, int]]:
    edges = [(0, 1)]
    for x in range(2, n):
        u, v = edges[rng.randrange(len(edges))]
        if rng.random() < 0.5:  # series: u -> x -> v replaces u -> v
            edges.remove((u, v))
            edges += [(u, x), (x, v)]
        else:  # parallel: u -> x -> v beside u -> v
            edges += [(u, x), (x, v)]
    # number nodes in a topological order so node ids read in program order
    succ: dict[int, list[int]] = {i: [] for i in range(n)}
    indeg = [0] * n
    for u, v in edges:
        succ[u].append(v)
        indeg[v] += 1
    order, ready = [], [i for i in range(n) if indeg[i] == 0]
    while ready:
        u = ready.pop(0)
        order.append(u)
        for v in succ[u]:
            indeg[v] -= 1
            if indeg[v] == 0:
                ready.append(v)
    rename = {old: new for new, old in enumerate(order)}
    return sorted((rename[u], rename[v]) for u, v in edges)


def _out_tree(rng: random.Random, n: int) -> list[tuple[int, int]]:
    return [(rng.randrange(max(0, v - 8), v), v) for v in range(1, n)]


def _in_tree(rng: random.Random, n: int) -> list[tuple[int, int]]:
    # the mirror image of an out-tree, renumbered so edges still go from low to high ids
    return sorted((n - 1 - v, n - 1 - u) for u, v in _out_tree(rng, n))


SHAPES = {
    "layered": _layered,
    "fork_join": _fork_join,
    "series_parallel": _series_parallel,
    "in_tree": _in_tree,
    "out_tree": _out_tree,
}


def random_dag(family: str, n: int, seed: int, *, pools: bool = True) -> dict:
    """One seeded instance of `family` with `n` nodes, as a DAG-file spec (a plain dict)."""
    if family not in SHAPES:
        raise ValueError(f"unknown family {family!r}; one of {', '.join(FAMILIES)}")
    if n < 2:
        raise ValueError("a random DAG needs at least 2 nodes")
    rng = random.Random(f"{family}:{n}:{seed}:{int(pools)}")
    edges = SHAPES[family](rng, n)
    n_lanes = rng.randint(2, 4)
    lanes = []
    for i in range(n_lanes):
        cls = "cpu" if i % 2 == 0 else "acc"
        lanes.append({"name": f"{cls}{i // 2}", "class": cls, "speed": rng.uniform(0.5, 2.0)})
    classes = sorted({ln["class"] for ln in lanes})
    ccr = rng.choice((0.1, 0.5, 1.0, 2.0))
    pool_count = rng.randint(1, 2)
    nodes, mean_work = [], 0.0
    for v in range(n):
        work = rng.uniform(5, 50)
        mean_work += work / n
        only = rng.choice(classes) if rng.random() < 0.2 else None
        costs = {
            ln["name"]: (
                None
                if only is not None and ln["class"] != only
                else max(1, round(work / ln["speed"] * rng.uniform(0.75, 1.25)))
            )
            for ln in lanes
        }
        node = {"id": f"n{v}", "costs": costs}
        if pools and rng.random() < 0.35:
            node["pools"] = ["port"]
        nodes.append(node)
    links = [
        {
            "source": f"n{u}",
            "target": f"n{v}",
            "comm": round(mean_work * ccr * rng.uniform(0.5, 1.5)),
        }
        for u, v in edges
    ]
    return {
        "format": "pccx-flow-dag/1",
        "name": f"{family}-n{n}-s{seed}" + ("" if pools else "-nopool"),
        "lanes": [{"name": ln["name"], "class": ln["class"]} for ln in lanes],
        "pools": {"port": pool_count} if pools else {},
        "nodes": nodes,
        "links": links,
    }


def random_sizes(count: int, seed: int = 0, lo: int = 8, hi: int = 500) -> list[tuple[str, int]]:
    """(family, nodes) of a sweep's `count` random instances: families in turn, sizes
    log-uniform in [lo, hi] so the time-vs-size plot spans decades and ~40 % are small
    enough for the exact solver."""
    rng = random.Random(f"sizes:{seed}")
    return [
        (FAMILIES[i % len(FAMILIES)], round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))
        for i in range(count)
    ]

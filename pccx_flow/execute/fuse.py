"""Optional fusion: fewer, larger Dask tasks for the same kernel calls.

A decode step has ~13,500 nodes on E4B. Most take microseconds (an RMSNorm alone is seven:
square, REDUCE_SUM, mean+eps, SQRT, RECIP, SCALE, ×γ), and even a 512-row INT4 GEMV tile
takes only ~0.2 ms here, while the threaded scheduler spends ~50-100 µs per task and
`distributed` ~0.6 ms plus a batching interval per dependency level (``dask-notes.md``).
One task per node therefore costs more than the arithmetic. Fusion is off unless asked for
(``execute(..., fuse=True)``); the one-task-per-node graph stays the default and is tested.

How nodes are grouped: the step is list-scheduled, in the plan's topological order, onto as
many simulated workers as will run it (each node starts on the worker where it can start
first, preferring the worker that produced its latest input), with a rough CPU cost per node
(`cpu_cost`). Each worker's sequence of nodes is then cut into *runs*: a node joins the run
its worker is working on unless it needs an input that another worker finishes only after
that run began. A run is one Dask task. Independent work (the tiles of a wide GEMV, the
heads of attention) still lands on different workers, so fusion keeps the parallelism the
machine has, while the chains between synchronisation points become single tasks.

Why the task graph stays acyclic: a run B depends on a run A only through an edge a -> b
with a in A, b in B. If A is on B's worker it is an earlier run there; otherwise a finished
no later than B started. Either way A started strictly before B (every cost is positive), so
start times order the runs topologically. Every node is in exactly one run.
"""

from __future__ import annotations

import networkx as nx

# Rough CPU costs, used only to shape the runs (not reported anywhere): a kernel call's fixed
# cost, and the INT4 GEMV streaming rate of the numba kernel on this machine's cores.
CALL_SECONDS = 10e-6
WEIGHT_BYTES_PER_SECOND = 3.5e9
ACT_BYTES_PER_SECOND = 5e9
# What starting a new task costs (Dask's dispatch plus building and ordering the task): a
# node moves to another worker only when that gains more than this.
TASK_SECONDS = 100e-6


def cpu_cost(attrs: dict) -> float:
    """Estimated CPU seconds of one node: a fixed call cost plus the bytes it streams."""
    weight = float(attrs.get("weight_bytes") or 0)
    act = float(attrs.get("act_bytes") or 0)
    return CALL_SECONDS + weight / WEIGHT_BYTES_PER_SECOND + act / ACT_BYTES_PER_SECOND


def fusion_groups(graph: nx.DiGraph, order: list[str], workers: int = 2) -> dict[str, list[str]]:
    """``{root: [members in topological order]}`` covering every node exactly once.

    `order` is a topological order of the graph (the plan's order); `workers` the number of
    threads or worker processes that will run the tasks (at least 1). A group's root is its
    first member.
    """
    workers = max(1, int(workers))
    placed: dict[str, tuple[int, float]] = {}  # node -> (worker, simulated finish)
    free = [0.0] * workers
    run_start = [0.0] * workers  # simulated start of the run each worker is on
    run_root: list[str | None] = [None] * workers
    groups: dict[str, list[str]] = {}
    nodes, pred = graph.nodes, graph.pred
    for node in order:
        inputs = [placed[p] for p in pred[node]]
        ready, preferred = max(((f, w) for w, f in inputs), default=(0.0, 0))
        best = None
        for i in range(workers):
            joins = run_root[i] is not None and all(w == i or f <= run_start[i] for w, f in inputs)
            start = max(ready, free[i]) + (0.0 if joins else TASK_SECONDS)
            rank = (start, i != preferred, i)
            if best is None or rank < best[0]:
                best = (rank, i, start, joins)
        _, w, start, joins = best
        free[w] = start + cpu_cost(nodes[node])
        placed[node] = (w, free[w])
        if not joins:
            run_root[w], run_start[w] = node, start
            groups[node] = []
        groups[run_root[w]].append(node)
    return groups


def group_graph(graph: nx.DiGraph, groups: dict[str, list[str]]) -> nx.DiGraph:
    """The graph between groups (for checks: it must be acyclic)."""
    root_of = {n: r for r, members in groups.items() for n in members}
    out = nx.DiGraph()
    out.add_nodes_from(groups)
    for u, v in graph.edges:
        if root_of[u] != root_of[v]:
            out.add_edge(root_of[u], root_of[v])
    return out

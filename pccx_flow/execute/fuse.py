"""Optional fusion: fewer, larger Dask tasks for the same kernel calls.

A decode step has ~13,500 nodes on E4B. Most take microseconds (an RMSNorm alone is seven:
square, REDUCE_SUM, mean+eps, SQRT, RECIP, SCALE, ×γ), and even a 512-row INT4 GEMV tile
takes only ~0.15 ms here, while Dask's threaded scheduler spends ~50-100 µs per task and
`distributed` ~0.6 ms plus a batching interval per dependency level (measured on this
machine). One task per node therefore costs more than the arithmetic. Fusion is off unless
asked for (``execute(..., fuse=True)``); the one-task-per-node graph stays the default and
is tested.

How nodes are grouped: the step is list-scheduled, in the plan's topological order, onto as
many simulated workers as will run it, with a rough CPU cost per node (`cpu_cost`). A worker
works through *runs*; a run is one Dask task, so its outputs reach other workers only when
it ends. Each node goes to the worker where it would start first in the simulation,
preferring the worker that produced its latest input. It continues that worker's open run
when all its inputs from other workers were there before the run began, and otherwise starts
a new run. When a node takes inputs from another worker's open run, that run is cut once,
right after the latest of those inputs (its outputs are handed over there), and what follows
in it continues as a new run. Starting a run adds `grain` seconds to the simulated clock of
its worker, and so does leaving a second task behind a cut: small independent nodes gather
on one worker unless another worker is idle or the work is big enough to repay the grain, so
the tiles of a wide GEMV still spread over the workers.

Why the task graph stays acyclic: a run B depends on a run A only through an edge a -> b with
a in A, b in B. If A is on B's worker it is an earlier run there; otherwise A had ended by the
time B began. Either way A started strictly before B (every cost is positive), so start times
order the runs topologically. A run created by a cut starts when the cut node finishes, no
later than its members started, and they had joined the original run with every input from
elsewhere in place before that run began, so the same holds for the new run. Every node is in
exactly one run.
"""

from __future__ import annotations

import networkx as nx

# Rough CPU costs, used only to shape the runs (never reported): a kernel call's fixed cost,
# and the rates at which the kernels stream weights and activations on this machine.
CALL_SECONDS = 10e-6
WEIGHT_BYTES_PER_SECOND = 3.5e9
ACT_BYTES_PER_SECOND = 5e9

# The default grain: what starting a task costs in the simulation, a few times what Dask's
# threaded scheduler spends dispatching one (~50-100 µs; its dispatch thread also waits for
# the GIL while kernels hold it). On one E4B step on this 2-core machine the Dask / loop
# ratio varied less between grains of 0.1 and 10 ms than the machine's own noise
# (`benchmarks/bench_execute.py` sweeps it); one task per node is ~2.5-2.9x.
GRAIN_SECONDS = 1e-3


def cpu_cost(attrs: dict) -> float:
    """Estimated CPU seconds of one node: a fixed call cost plus the bytes it streams."""
    weight = attrs.get("weight_bytes") or 0
    act = attrs.get("act_bytes") or 0
    return CALL_SECONDS + weight / WEIGHT_BYTES_PER_SECOND + act / ACT_BYTES_PER_SECOND


def fusion_groups(
    graph: nx.DiGraph, order: list[str], workers: int = 2, grain: float = GRAIN_SECONDS
) -> dict[str, list[str]]:
    """``{root: [members in topological order]}`` covering every node exactly once.

    `order` is a topological order of the graph (the plan's order); `workers` the number of
    threads or worker processes that will run the tasks (at least 1); `grain` what starting
    a task costs, in seconds. A group's root is its first member.
    """
    workers = max(1, int(workers))
    if workers == 1 or not order:  # one worker: nothing to overlap, the step is one task
        return {order[0]: list(order)} if order else {}
    finish: dict[str, float] = {}
    worker_of: dict[str, int] = {}
    run_of: dict[str, str] = {}  # node -> root of its run
    run_end: dict[str, float] = {}  # closed run -> when its task ends
    free = [0.0] * workers  # when each worker finishes its last node
    open_run: list[str | None] = [None] * workers
    run_start = [0.0] * workers
    groups: dict[str, list[str]] = {}
    attrs_of, pred = graph.nodes, graph.pred

    def cut_after(w: int, node: str) -> None:
        """Worker w's open run ends right after `node`; what follows is a new open run."""
        root = open_run[w]
        members = groups[root]
        cut = members.index(node) + 1
        run_end[root] = finish[node]
        if cut == len(members):
            open_run[w] = None
            return
        rest = members[cut:]
        groups[root] = members[:cut]
        groups[rest[0]] = rest
        for n in rest:
            run_of[n] = rest[0]
        open_run[w], run_start[w] = rest[0], finish[node]

    for node in order:
        # Inputs still in an open run: that run would be cut once, after the latest of them.
        # Inputs in closed runs are there when their run ended.
        cut_at: dict[int, str] = {}
        closed: list[tuple[int, float]] = []
        latest, preferred = -1.0, 0
        for p in pred[node]:
            w, f = worker_of[p], finish[p]
            if f > latest:
                latest, preferred = f, w
            if open_run[w] == run_of[p]:
                if w not in cut_at or f > finish[cut_at[w]]:
                    cut_at[w] = p
            else:
                closed.append((w, run_end[run_of[p]]))
        best_start, w, joins = 0.0, -1, False
        for i in range(workers):
            ready = extra = 0.0
            for pw, p in cut_at.items():
                if pw != i:
                    if finish[p] > ready:
                        ready = finish[p]
                    if groups[open_run[pw]][-1] != p:
                        extra = grain  # the cut leaves a second task behind it
            for pw, end in closed:
                if pw != i and end > ready:
                    ready = end
            i_joins = open_run[i] is not None and ready <= run_start[i]
            start = (free[i] if free[i] > ready else ready) + extra
            if not i_joins:
                start += grain
            # Earliest start; on a tie the worker of the latest input, then the lowest index.
            if w < 0 or start < best_start or (start == best_start and i == preferred):
                best_start, w, joins = start, i, i_joins
        start = best_start
        for pw, p in cut_at.items():
            if pw != w:
                cut_after(pw, p)
        if not joins:
            if open_run[w] is not None:
                run_end[open_run[w]] = free[w]
            open_run[w], run_start[w] = node, start
            groups[node] = []
        finish[node] = free[w] = start + cpu_cost(attrs_of[node])
        worker_of[node] = w
        run_of[node] = open_run[w]
        groups[open_run[w]].append(node)
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

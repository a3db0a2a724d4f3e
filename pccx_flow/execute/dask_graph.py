"""Turn a planned decode graph into a Dask task graph: one task per node, nothing fused.

Keys lead with the op and the lane (``gemv-gemv1-L07-ffn-gate-t03-s12``), so the Dask
dashboard groups tasks by op and lane (`dask.utils.key_split` keeps the leading alphabetic
words), and end with the step tag, so keys are unique per decode step: a long-lived
distributed client that saw the same key in an earlier step could otherwise hand back a stale
result (keys are the identity of a result to the scheduler, not a name of the task).

Every task carries annotations: its ``lane_class``, ``node``, ``layer``, ``block``, ``op`` and
``kernel`` (read by the dashboard's lanes page), and with a schedule its ``lane`` and a
``priority`` from the schedule order (the first node scheduled gets the highest priority;
Dask runs higher priorities first). The distributed scheduler honours priorities itself; the
local schedulers ignore annotations, so the executor sorts their ready tasks by priority
(`pccx_flow.execute.executor.follow_priorities`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import networkx as nx
from dask.task_spec import DataNode, Task, TaskRef

from pccx_flow.execute.plan import NodeCall
from pccx_flow.execute.runtime import StepContext, WeightsRef, run_node


@dataclass
class DaskStep:
    """A Dask graph of one decode step and the maps between node ids and task keys."""

    dsk: dict[str, Task]
    key_of: dict[str, str]  # node id -> task key
    node_of: dict[str, str]  # task key -> node id
    annotations: dict[str, dict[str, Any]] = field(default_factory=dict)  # key -> annotations

    def keys_for(self, nodes) -> list[str]:
        return [self.key_of[n] for n in nodes]


def task_key(node: str, attrs: dict, step_tag: str, lane: str | None = None) -> str:
    """``<op>-<lane>-<node id with dashes>-<step tag>``, e.g. ``gemv-gemv-L07-ffn-gate-t03-s12``."""
    op = str(attrs.get("op") or "node").lower()
    lane = lane or attrs.get("lane_class") or "any"
    return f"{op}-{lane}-{node.replace('.', '-')}-{step_tag}"


def schedule_priorities(schedule: Any, nodes) -> dict[str, int]:
    """Priority per node from a schedule's order: earlier in the order = higher priority."""
    order = [getattr(slot, "node", slot) for slot in schedule.order()]
    n = len(order)
    prio = {node: n - i for i, node in enumerate(order)}
    return {node: prio.get(node, 0) for node in nodes}


def _schedule_lanes(schedule: Any) -> dict[str, str]:
    """Node -> the lane a schedule put it on (empty without a schedule)."""
    return {} if schedule is None else {n: str(s.lane) for n, s in schedule.slots.items()}


def _annotation(graph: nx.DiGraph, node: str, lanes: dict, priority: int | None) -> dict:
    """The task annotations of `node`: its lane class, node id, layer, block, op and kernel
    (what the dashboard's lanes page shows), and with a schedule (a priority) its scheduled
    lane and that priority."""
    attrs = graph.nodes[node]
    layer = attrs.get("layer")
    ann: dict[str, Any] = {
        "lane_class": attrs.get("lane_class", "host"),
        "node": node,
        "layer": -1 if layer is None else int(layer),
        "block": attrs.get("block"),
        "op": attrs.get("op"),
        "kernel": attrs.get("kernel"),
    }
    if priority is not None:
        ann["lane"] = lanes.get(node, ann["lane_class"])
        ann["priority"] = priority
    return ann


def heaviest_member(graph: nx.DiGraph, members) -> str:
    """The member of a fused group whose kernel does the most work (multiply-adds, then
    bytes it moves), so the lanes page draws the task on the lane of what takes its time,
    not of its first node (a step's first group, mostly PLE and AltUp GEMVs, was drawn
    as "dma0 embedding")."""

    def work(node: str) -> tuple[int, int]:
        a = graph.nodes[node]
        moved = int(a.get("weight_bytes") or 0) + int(a.get("act_bytes") or 0)
        return int(a.get("macs") or 0), moved

    return max(members, key=lambda n: (work(n), -members.index(n)))


def build_dask_graph(
    graph: nx.DiGraph,
    calls: dict[str, NodeCall],
    *,
    kernels: str,
    ctx: StepContext,
    weights: WeightsRef,
    externals: dict[str, dict],
    step_tag: str,
    schedule: Any = None,
) -> DaskStep:
    """One `Task` per node calling `run_node`; dependencies are `TaskRef`s to producers.

    `kernels` names the kernel table (see `pccx_flow.execute.kernels.kernel_table`), so a
    task ships a short name rather than a table of functions.

    `externals` maps a node to the values it takes from the decode state (token id, KV rows
    of earlier positions); they enter the graph as `DataNode`s so the task stays pure and a
    worker process receives exactly the rows it needs.
    """
    lanes = _schedule_lanes(schedule)
    key_of = {n: task_key(n, graph.nodes[n], step_tag, lanes.get(n)) for n in calls}
    dsk: dict[str, Any] = {}
    for node, call in calls.items():
        key = key_of[node]
        external = externals.get(node)
        ext_arg = DataNode(None, external) if external is not None else None
        refs = [TaskRef(key_of[p]) for p in call.producers]
        dsk[key] = Task(key, run_node, call, kernels, ctx, weights, ext_arg, *refs)
    prio = schedule_priorities(schedule, calls) if schedule is not None else {}
    annotations = {key_of[n]: _annotation(graph, n, lanes, prio.get(n)) for n in calls}
    return DaskStep(
        dsk=dsk,
        key_of=key_of,
        node_of={k: n for n, k in key_of.items()},
        annotations=annotations,
    )


def build_fused_dask_graph(
    graph: nx.DiGraph,
    calls: dict[str, NodeCall],
    *,
    kernels: str,
    ctx: StepContext,
    weights: WeightsRef,
    externals: dict[str, dict],
    step_tag: str,
    schedule: Any = None,
    workers: int = 2,
    grain: float | None = None,
) -> DaskStep:
    """Like `build_dask_graph` but one task per fusion group (see `pccx_flow.execute.fuse`).

    `workers` is how many threads or worker processes will run the step: the groups are
    shaped for that many, with `grain` seconds charged per task (default
    `pccx_flow.execute.fuse.GRAIN_SECONDS`). A group's key is its root node's key (op and
    lane of its first member); it carries the lane annotations of its heaviest member
    (`heaviest_member`: where the task's time goes) and the highest priority of its
    members. ``key_of`` maps every member to its group's key; each task
    returns ``{node: outputs}`` for its members.
    """
    from pccx_flow.execute.fuse import GRAIN_SECONDS, fusion_groups
    from pccx_flow.execute.runtime import run_group

    lanes = _schedule_lanes(schedule)
    grain = GRAIN_SECONDS if grain is None else grain
    groups = fusion_groups(graph, list(calls), workers, grain)
    group_key = {r: task_key(r, graph.nodes[r], step_tag, lanes.get(r)) for r in groups}
    key_of = {n: group_key[r] for r, members in groups.items() for n in members}
    prio = schedule_priorities(schedule, calls) if schedule is not None else {}
    dsk: dict[str, Any] = {}
    annotations: dict[str, dict[str, Any]] = {}
    for root, members in groups.items():
        key = group_key[root]
        inside = set(members)
        # The other groups this one reads from, each once, in first-use order.
        deps = dict.fromkeys(
            key_of[p] for n in members for p in calls[n].producers if p not in inside
        )
        ext = {n: externals[n] for n in members if n in externals}
        member_calls = tuple(calls[n] for n in members)
        dsk[key] = Task(
            key, run_group, member_calls, kernels, ctx, weights, ext, *(TaskRef(d) for d in deps)
        )
        priority = max(prio[n] for n in members) if prio else None
        heavy = heaviest_member(graph, members)
        annotations[key] = _annotation(graph, heavy, lanes, priority)
        if len(members) > 1:
            annotations[key]["node"] = f"{heavy} (+{len(members) - 1} fused)"
    return DaskStep(
        dsk=dsk,
        key_of=key_of,
        node_of={k: r for r, k in group_key.items()},
        annotations=annotations,
    )

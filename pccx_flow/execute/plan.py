"""How each node of a decode graph finds its inputs: the execution plan shared by all runners.

A node lists the tensors it reads (``inputs``) and writes (``outputs``). Inside one step each
tensor has exactly one writer, so an input is either the output of a predecessor node (found
through the edges' ``tensor`` attribute) or a value from outside the step (token id, KV rows of
earlier positions), which the node names in its ``params`` and the decode state supplies.

`plan_graph` resolves this once per graph into `NodeCall` records (plain data, picklable), so
the Dask runner and the plain loop call exactly the same kernels with exactly the same
arguments; only the way they order and place the calls differs.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx

from pccx_flow.errors import GraphError


@dataclass(frozen=True)
class NodeCall:
    """One kernel call: which kernel, with what, reading which producers' outputs.

    ``sources`` lists, for each of the node's inputs in order, ``(producer_index,
    output_index)``: the position of the producing node in ``producers`` and the position of
    the tensor in that producer's ``outputs``. A source of ``None`` marks an input that is not
    produced inside the step; the kernel takes it from the step context.
    """

    node: str
    kernel: str
    op: str
    params: dict
    flags: dict
    weight: dict | None
    input_names: tuple[str, ...]
    output_names: tuple[str, ...]
    output_shapes: tuple[tuple[int, ...], ...]
    producers: tuple[str, ...]
    sources: tuple[tuple[int, int] | None, ...]

    def __dask_tokenize__(self) -> tuple:
        # Dask names a submitted graph by a token of every task's arguments; walking each
        # call's params, weights and shapes cost ~1 s a tiny step. A node id is unique in
        # its step, and the task keys it travels with carry the step.
        return ("NodeCall", self.node, self.kernel)


def plan_graph(graph: nx.DiGraph) -> dict[str, NodeCall]:
    """One `NodeCall` per node, in a topological order of the graph.

    Raises `GraphError` when the graph has a cycle, a node without a kernel, a tensor written
    by two nodes, or an edge whose tensor its source does not write.
    """
    try:  # one pass: the sort itself finds a cycle (a separate DAG check would sort twice)
        order = list(nx.topological_sort(graph))
    except nx.NetworkXUnfeasible:
        raise GraphError("the decode graph has a cycle; it cannot be executed") from None
    writer: dict[str, tuple[str, int]] = {}
    for node, attrs in graph.nodes(data=True):
        for j, t in enumerate(attrs.get("outputs") or ()):
            if t["name"] in writer:
                raise GraphError(
                    f"tensor {t['name']!r} is written by both {writer[t['name']][0]} and {node}"
                )
            writer[t["name"]] = (node, j)
    calls: dict[str, NodeCall] = {}
    for node in order:
        attrs = graph.nodes[node]
        if not attrs.get("kernel"):
            raise GraphError(f"node {node} has no kernel; every node must name one")
        preds = set(graph.predecessors(node))
        # Every predecessor is a producer, even one whose output this node does not read:
        # the executed graph keeps every ordering edge of the scheduled one.
        producers: list[str] = sorted(preds)
        sources: list[tuple[int, int] | None] = []
        for t in attrs.get("inputs") or ():
            src = writer.get(t["name"])
            if src is None or src[0] not in preds:
                # Not written in this step (or written by a node with no edge to this one,
                # which would be a race): the kernel must get it from the step context.
                if src is not None:
                    raise GraphError(
                        f"node {node} reads {t['name']!r} written by {src[0]} without an edge"
                    )
                sources.append(None)
                continue
            if src[0] not in producers:
                producers.append(src[0])
            sources.append((producers.index(src[0]), src[1]))
        calls[node] = NodeCall(
            node=node,
            kernel=attrs["kernel"],
            op=attrs.get("op", ""),
            params=dict(attrs.get("params") or {}),
            flags=dict(attrs.get("flags") or {}),
            weight=attrs.get("weight"),
            input_names=tuple(t["name"] for t in attrs.get("inputs") or ()),
            output_names=tuple(t["name"] for t in attrs.get("outputs") or ()),
            output_shapes=tuple(tuple(t["shape"]) for t in attrs.get("outputs") or ()),
            producers=tuple(producers),
            sources=tuple(sources),
        )
    return calls

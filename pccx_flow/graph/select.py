"""Picking parts of a decode graph: by layer, block, op or lane class, and counting them.

Plain functions over the graph's node attributes, used by the CLI (counts per op kind), the
renderer (one layer, one block) and tests.

>>> from pccx_flow.graph.build import build_decode_graph
>>> g = build_decode_graph("tiny")
>>> sub = select(g, layers=[4], blocks=["laurel"])
>>> sorted({g.nodes[n]["block"] for n in sub.nodes})
['laurel']
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

import networkx as nx

from pccx_flow.errors import InputError


def select_nodes(
    graph: nx.DiGraph,
    *,
    layers: Iterable[int] | None = None,
    blocks: Iterable[str] | None = None,
    ops: Iterable[str] | None = None,
    lane_classes: Iterable[str] | None = None,
) -> list[str]:
    """Node ids matching every given filter (None = no filter), in graph order.

    ``layers`` uses the ``layer`` attribute (-1 for the steps before and after the stack).
    """
    want = {
        "layer": None if layers is None else set(layers),
        "block": None if blocks is None else set(blocks),
        "op": None if ops is None else set(ops),
        "lane_class": None if lane_classes is None else set(lane_classes),
    }
    return [
        n
        for n, a in graph.nodes(data=True)
        if all(v is None or a.get(k) in v for k, v in want.items())
    ]


def select(graph: nx.DiGraph, **filters) -> nx.DiGraph:
    """The subgraph induced by `select_nodes` (a copy; `InputError` when nothing matches)."""
    nodes = select_nodes(graph, **filters)
    if not nodes:
        shown = {k: sorted(v) for k, v in filters.items() if v is not None}
        raise InputError(f"no node of the graph matches {shown}; check the layer/block names")
    return graph.subgraph(nodes).copy()


def count_by(graph: nx.DiGraph, attr: str) -> dict:
    """Number of nodes per value of `attr` (e.g. ``"op"``), most common first."""
    return dict(Counter(a.get(attr) for _, a in graph.nodes(data=True)).most_common())


def edge_count_by_source(graph: nx.DiGraph, attr: str) -> dict:
    """Number of edges per value of the source node's `attr` (e.g. edges leaving GEMV nodes)."""
    nodes = graph.nodes
    return dict(Counter(nodes[u].get(attr) for u, _ in graph.edges).most_common())

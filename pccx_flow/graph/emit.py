"""Adding nodes to a decode graph: one call per node, edges wired from the tensors it reads.

`GraphWriter.add` records a node with every attribute of the node contract
(`pccx_flow.graph.nodes`) and connects it to the writer of each tensor it reads, so the
builders never wire edges by hand and a tensor read before it is written is a bug caught at
build time. A tensor is referenced as the plain dict of `pccx_flow.graph.nodes.tensor`; a
vector produced in tiles is a list of such parts (a *Vec*).
"""

from __future__ import annotations

import math

import networkx as nx

from pccx_flow.graph.kernel_specs import CVO_KERNEL_FUNCS, KERNEL_OPS
from pccx_flow.graph.nodes import OP_LANE, tensor

DTYPE_BYTES = {"float32": 4, "float16": 2, "int64": 8}

Vec = list[dict]  # a vector as consecutive parts, each a tensor dict


def tensor_bytes(t: dict) -> int:
    """Bytes of a tensor dict (product of its shape times the dtype size)."""
    return math.prod(t["shape"]) * DTYPE_BYTES[t["dtype"]]


def vec_len(vec: Vec) -> int:
    """Total element count of a vector given as parts."""
    return sum(math.prod(t["shape"]) for t in vec)


class GraphWriter:
    """Owns the graph being built and the map tensor name -> writing node.

    On a plain `networkx.DiGraph` (what the builders make) `add` fills the dicts
    NetworkX keeps the graph in itself, in the dict-of-dicts layout DiGraph's docstring
    describes (private names: ``_node``, ``_succ`` and ``_pred``; one edge dict shared
    by both ends): ``add_node`` copies a node's fifteen attributes into a new dict and
    ``add_edges_from`` copies each edge dict and checks both ends again, a fifth of
    building a long-context step (31k nodes at 8191: 0.81x the build time alternated in
    one process). Any other graph class (its own dict factories), a frozen graph or
    view, or a NetworkX whose graph lacks those dicts goes through the public methods;
    the writer owns its graph while it builds (nothing else edits or freezes it
    meanwhile). Both give the same graph, nodes, attributes and edges in the same order
    (`tests/graph/test_emit.py`).
    """

    def __init__(self, graph: nx.DiGraph) -> None:
        self.graph = graph
        self.writer: dict[str, str] = {}
        self._direct = (
            type(graph) is nx.DiGraph
            and not nx.is_frozen(graph)  # a frozen graph or a view refuses new nodes
            and getattr(graph, "_succ", None) is getattr(graph, "_adj", False)
            and isinstance(getattr(graph, "_pred", None), dict)
            and isinstance(getattr(graph, "_node", None), dict)
        )
        if self._direct and getattr(graph, "__networkx_cache__", None):
            graph.__networkx_cache__.clear()  # nothing converted from it stays stale

    def add(
        self,
        nid: str,
        *,
        kernel: str,
        layer: int,
        block: str,
        inputs: list[dict],
        outputs: list[tuple[str, tuple[int, ...]] | tuple[str, tuple[int, ...], str]],
        params: dict | None = None,
        flags: dict | None = None,
        func: str | None = None,
        weight: dict | None = None,
        macs: int = 0,
        weight_bytes: int = 0,
        act_bytes: int | None = None,
        elements: int | None = None,
    ) -> list[dict]:
        """Add node `nid` and return its output tensor dicts.

        ``outputs`` are ``(name, shape[, dtype])``; dtype defaults to float32. ``act_bytes``
        defaults to the bytes read plus written (L2 traffic); ``elements`` defaults to the
        output element count for CVO and HOST nodes and 0 otherwise. A build bug (a node id
        or a tensor written twice, a tensor read before it is written) raises before the
        graph changes.
        """
        graph = self.graph
        if nid is None:
            raise RuntimeError("a node id is None")
        if nid in graph:
            raise RuntimeError(f"duplicate node id {nid}")
        op = KERNEL_OPS[kernel]
        if op == "CVO":
            func = CVO_KERNEL_FUNCS[kernel]
        outs = [tensor(o[0], o[1], o[2] if len(o) > 2 else "float32") for o in outputs]
        writer = self.writer
        for t in outs:
            if t["name"] in writer:
                raise RuntimeError(f"tensor {t['name']} written twice")
        if len(outs) > 1 and len({t["name"] for t in outs}) < len(outs):
            names = [t["name"] for t in outs]
            twice = next(name for i, name in enumerate(names) if name in names[:i])
            raise RuntimeError(f"tensor {twice} written twice")
        in_bytes = [tensor_bytes(t) for t in inputs]
        # one edge per writer read (nid is new: no edge into it exists yet), in read order
        edges: dict[str, dict] = {}
        for t, nbytes in zip(inputs, in_bytes, strict=True):
            name = t["name"]
            src = writer.get(name)
            if src is None:
                raise RuntimeError(f"{nid} reads {name} before any node writes it")
            e = edges.get(src)
            if e is None:
                edges[src] = {"tensor": name, "tensors": [name], "bytes": nbytes}
            elif name not in e["tensors"]:
                e["tensors"].append(name)
                e["bytes"] += nbytes
        if act_bytes is None:
            act_bytes = sum(in_bytes) + sum(tensor_bytes(t) for t in outs)
        if elements is None:
            elements = (
                max(math.prod(t["shape"]) for t in outs) if op in ("CVO", "HOST") and outs else 0
            )
        attrs = {
            "layer": layer,
            "block": block,
            "op": op,
            "func": func,
            "flags": dict(flags) if flags else {},
            "inputs": list(inputs),  # tensor dicts are shared with their writer: never mutate one
            "outputs": outs,
            "lane_class": OP_LANE[op],
            "macs": int(macs),
            "weight_bytes": int(weight_bytes),
            "act_bytes": int(act_bytes),
            "elements": int(elements),
            "weight": weight,
            "kernel": kernel,
            "params": params if params is not None else {},
        }
        if self._direct:
            succ = graph._succ
            into = [(succ[src], e) for src, e in edges.items()]  # each writer is in the graph
            graph._node[nid] = attrs
            succ[nid] = {}
            graph._pred[nid] = edges
            for after, e in into:
                after[nid] = e
        else:
            graph.add_node(nid, **attrs)
            if edges:
                graph.add_edges_from([(src, nid, e) for src, e in edges.items()])
        for t in outs:
            writer[t["name"]] = nid
        return outs

"""Small hand-made decode graphs and schedules that follow the node contract.

They let the render tests pin exact node counts per collapse level without depending on the
graph builder's tiling choices; the integration tests use the real builder as well.
"""

from __future__ import annotations

from collections import namedtuple
from types import SimpleNamespace

import networkx as nx

from pccx_flow.graph.nodes import OP_LANE

Slot = namedtuple("Slot", "node lane start finish resources")
Lane = namedtuple("Lane", "name lane_class")

# (block, name, op, func, tiles) per layer; tiles > 0 means GEMV tiles .t00 ...
LAYER_NODES = [
    ("const", "theta", "MEMSET", None, 0),
    ("altup_pred", "router", "GEMV", None, 0),
    ("altup_pred", "mix", "HOST", "altup_mix", 0),
    ("attn", "norm", "CVO", "REDUCE_SUM", 0),
    ("attn", "q", "GEMV", None, 3),
    ("attn", "rope", "HOST", "rope_combine", 0),
    ("attn", "exp", "CVO", "EXP", 0),
    ("attn", "o", "GEMV", None, 2),
    ("laurel", "left", "GEMV", None, 0),
    ("laurel", "right", "GEMV", None, 0),
    ("residual", "merge", "HOST", "add", 0),
    ("ffn", "gate", "GEMV", None, 4),
    ("ffn", "gelu", "HOST", "gelu_mul", 0),
    ("ffn", "down", "GEMV", None, 2),
    ("altup_corr", "corr", "HOST", "altup_mix", 0),
    ("ple_mix", "gate", "GEMV", None, 0),
    ("ple_mix", "add", "HOST", "add", 0),
]
# Edges inside a layer between (block, name) groups; tiles fan out / in.
LAYER_EDGES = [
    (("altup_pred", "router"), ("altup_pred", "mix")),
    (("altup_pred", "mix"), ("attn", "norm")),
    (("attn", "norm"), ("attn", "q")),
    (("attn", "q"), ("attn", "rope")),
    (("attn", "rope"), ("attn", "exp")),
    (("attn", "exp"), ("attn", "o")),
    (("attn", "norm"), ("laurel", "left")),
    (("laurel", "left"), ("laurel", "right")),
    (("attn", "o"), ("residual", "merge")),
    (("laurel", "right"), ("residual", "merge")),
    (("residual", "merge"), ("ffn", "gate")),
    (("ffn", "gate"), ("ffn", "gelu")),
    (("ffn", "gelu"), ("ffn", "down")),
    (("ffn", "down"), ("altup_corr", "corr")),
    (("altup_corr", "corr"), ("ple_mix", "gate")),
    (("ple_mix", "gate"), ("ple_mix", "add")),
    (("const", "theta"), ("attn", "rope")),
    # A source that feeds the layer's first node: without anchoring, dot ranks it beside
    # the previous layer's last node and puts the two layer clusters side by side.
    (("const", "theta"), ("altup_pred", "router")),
]
CYCLES = {"GEMV": 400, "CVO": 60, "HOST": 30, "MEMSET": 2, "MEMCPY": 50}


def _ids(scope: str, block: str, name: str, tiles: int) -> list[str]:
    base = f"{scope}.{block}.{name}"
    return [f"{base}.t{t:02d}" for t in range(tiles)] if tiles else [base]


def make_toy_graph(n_layers: int = 2, *, fanout: int = 0, cycles: bool = False) -> nx.DiGraph:
    """A decode-like DAG: pre (embed, PLE pre), `n_layers` layers, post (LM head tiles).

    With `fanout` > 0, one step-level MEMSET node ``pre.const.scale`` feeds that many
    nodes (the kind of node that stalls `dot`).
    """
    g = nx.DiGraph(config="toy", semantics="pccx", position=0, tile_rows=512)

    def add(scope, layer, block, name, op, func, tiles):
        ids = _ids(scope, block, name, tiles)
        for i, node in enumerate(ids):
            attrs = dict(layer=layer, block=block, op=op, func=func, lane_class=OP_LANE[op])
            attrs["weight"] = (
                {"key": f"{scope}.{block}.{name}.weight", "rows": [i * 512, (i + 1) * 512]}
                if op == "GEMV"
                else None
            )
            if cycles:
                attrs["cycles"] = CYCLES[op]
            g.add_node(node, **attrs)
        return ids

    def connect(srcs, dsts):
        for s in srcs:
            for d in dsts:
                g.add_edge(s, d, tensor=f"{s}->{d}", bytes=64)

    prev = add("pre", -1, "embed", "fetch", "MEMCPY", "embed_fetch", 0)
    connect(prev, add("pre", -1, "altup_init", "proj", "GEMV", None, 3))
    prev = [n for n in g if n.startswith("pre.altup_init")]
    ple = add("pre", -1, "ple_pre", "proj", "GEMV", None, 0)
    connect(add("pre", -1, "embed", "ple_fetch", "MEMCPY", "embed_fetch", 0), ple)
    for layer in range(n_layers):
        scope = f"L{layer:02d}"
        groups = {
            (block, name): add(scope, layer, block, name, op, func, tiles)
            for block, name, op, func, tiles in LAYER_NODES
        }
        for a, b in LAYER_EDGES:
            connect(groups[a], groups[b])
        connect(prev, groups[("altup_pred", "router")])
        connect(ple, groups[("ple_mix", "add")])
        prev = groups[("ple_mix", "add")]
    lm = add("post", -1, "final", "lm_head", "GEMV", None, 6)
    connect(prev, lm)
    cap = add("post", -1, "final", "softcap", "HOST", "tanh", 0)
    connect(lm, cap)
    connect(cap, add("post", -1, "final", "read_back", "MEMCPY", "logits_read", 0))
    if fanout:
        add("pre", -1, "const", "scale", "MEMSET", None, 0)
        targets = [n for n in g if n != "pre.const.scale"][:fanout]
        connect(["pre.const.scale"], targets)
    return g


TOY_LANES = [
    Lane("gemv0", "gemv"),
    Lane("gemv1", "gemv"),
    Lane("sfu0", "sfu"),
    Lane("dma0", "dma"),
    Lane("ctrl0", "ctrl"),
    Lane("host0", "host"),
]


def make_toy_schedule(graph: nx.DiGraph, policy: str = "toy-asap"):
    """A list schedule of `graph` on `TOY_LANES`: ASAP in topological order, earliest lane.

    Returns (schedule, critical_path) where the critical path is traced back from the last
    finishing node through the predecessor (data or lane) that finished last.
    """
    free = {lane.name: 0 for lane in TOY_LANES}
    slots, blocker = {}, {}
    lane_last = {}
    for node in nx.topological_sort(graph):
        attrs = graph.nodes[node]
        ready, why = 0, None
        for p in graph.predecessors(node):
            if slots[p].finish > ready:
                ready, why = slots[p].finish, p
        lanes = [lane.name for lane in TOY_LANES if lane.lane_class == attrs["lane_class"]]
        lane = min(lanes, key=lambda n: max(free[n], ready))
        start = max(free[lane], ready)
        if free[lane] > ready:
            why = lane_last[lane]
        finish = start + CYCLES[attrs["op"]]
        slots[node] = Slot(node, lane, start, finish, {})
        free[lane], lane_last[lane], blocker[node] = finish, node, why
    last = max(slots, key=lambda n: slots[n].finish)
    path = [last]
    while blocker[path[-1]] is not None:
        path.append(blocker[path[-1]])
    schedule = SimpleNamespace(
        slots=slots,
        lanes=list(TOY_LANES),
        makespan=max(s.finish for s in slots.values()),
        policy=policy,
        profile=SimpleNamespace(name="toy-profile", core_hz=400e6),
    )
    return schedule, path[::-1]

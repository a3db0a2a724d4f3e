"""Small scheduling problems the tests share: the HEFT paper example, a decode-shaped graph."""

from __future__ import annotations

import networkx as nx

from pccx_flow.schedule.model import Lane
from pccx_flow.schedule.problem import SchedulingProblem, comm_between_lanes

# Topcuoglu, Hariri and Wu, "Performance-effective and low-complexity task scheduling for
# heterogeneous computing", IEEE TPDS 13(3), 2002: Fig. 2 (DAG with edge costs) and Table 1
# (computation cost of each task on processors P1, P2, P3).
HEFT_PAPER_COSTS = {
    1: (14, 16, 9),
    2: (13, 19, 18),
    3: (11, 13, 19),
    4: (13, 8, 17),
    5: (12, 13, 10),
    6: (13, 16, 9),
    7: (7, 15, 11),
    8: (5, 11, 14),
    9: (18, 12, 20),
    10: (21, 7, 16),
}
HEFT_PAPER_EDGES = {
    (1, 2): 18,
    (1, 3): 12,
    (1, 4): 9,
    (1, 5): 11,
    (1, 6): 14,
    (2, 8): 19,
    (2, 9): 16,
    (3, 7): 23,
    (4, 8): 27,
    (4, 9): 23,
    (5, 9): 13,
    (6, 8): 15,
    (7, 10): 17,
    (8, 10): 11,
    (9, 10): 13,
}


def heft_paper_problem() -> SchedulingProblem:
    graph = nx.DiGraph()
    graph.add_nodes_from(f"n{i}" for i in HEFT_PAPER_COSTS)
    graph.add_edges_from((f"n{u}", f"n{v}") for u, v in HEFT_PAPER_EDGES)
    lanes = [Lane(f"p{j}", "cpu") for j in (1, 2, 3)]
    costs = {f"n{i}": {f"p{j + 1}": c[j] for j in range(3)} for i, c in HEFT_PAPER_COSTS.items()}
    comm = comm_between_lanes({(f"n{u}", f"n{v}"): c for (u, v), c in HEFT_PAPER_EDGES.items()})
    return SchedulingProblem(graph, lanes, costs, comm=comm, name="heft-paper")


def _gemv(rows: int, cols: int) -> dict:
    return {
        "op": "GEMV",
        "lane_class": "gemv",
        "macs": rows * cols,
        "weight_bytes": rows * cols // 2 + 4 * rows,
        "act_bytes": 0,
        "elements": 0,
    }


def _cvo(func: str, n: int) -> dict:
    return {
        "op": "CVO",
        "lane_class": "sfu",
        "func": func,
        "macs": 0,
        "weight_bytes": 0,
        "act_bytes": 0,
        "elements": n,
    }


def _host(func: str, n: int) -> dict:
    return {
        "op": "HOST",
        "lane_class": "host",
        "func": func,
        "macs": 0,
        "weight_bytes": 0,
        "act_bytes": 0,
        "elements": n,
    }


def decode_shaped_graph(n_layers: int = 3, hidden: int = 256, ffn: int = 1024) -> nx.DiGraph:
    """A small graph with the decode step's shape and node attributes (not the real builder).

    Per layer: a constant MEMSET, an AltUp host step, tiled Q/K/V/O GEMVs with a softmax on
    the SFU, a two-GEMV LAuReL branch parallel to attention, a host merge, tiled FFN GEMVs,
    and a PLE mix (GEMV, GELU, host add) that only feeds the next layer's shadow streams.
    Used to test the cost-model bridge and the metrics without depending on the graph builder.
    """
    g = nx.DiGraph(config="synthetic")
    tile = 128

    def add(name, layer, block, attrs, *preds):
        g.add_node(name, layer=layer, block=block, **attrs)
        for p in preds:
            g.add_edge(p, name)
        return name

    def tiles(prefix, layer, block, rows, cols, *preds):
        return [
            add(f"{prefix}.t{i:02d}", layer, block, _gemv(tile, cols), *preds)
            for i in range(rows // tile)
        ]

    x = add(
        "pre.embed.fetch",
        -1,
        "embed",
        {
            "op": "MEMCPY",
            "lane_class": "dma",
            "act_bytes": hidden * 2,
            "macs": 0,
            "weight_bytes": 0,
            "elements": 0,
        },
    )
    shadow = x
    for layer in range(n_layers):
        s = f"L{layer:02d}"
        const = add(
            f"{s}.const.theta",
            layer,
            "const",
            {
                "op": "MEMSET",
                "lane_class": "ctrl",
                "elements": 3,
                "macs": 0,
                "weight_bytes": 0,
                "act_bytes": 0,
            },
        )
        pred = add(
            f"{s}.altup_pred.mix", layer, "altup_pred", _host("altup_mix", 4 * hidden), x, shadow
        )
        norm = add(f"{s}.attn.norm", layer, "attn", _cvo("REDUCE_SUM", hidden), pred)
        q = tiles(f"{s}.attn.q", layer, "attn", hidden, hidden, norm)
        k = tiles(f"{s}.attn.k", layer, "attn", hidden // 2, hidden, norm)
        rope = add(f"{s}.attn.rope", layer, "attn", _host("rope_combine", hidden), *q, *k, const)
        sm = add(f"{s}.attn.softmax", layer, "attn", _cvo("EXP", 64), rope)
        o = tiles(f"{s}.attn.o", layer, "attn", hidden, hidden, sm)
        left = add(f"{s}.laurel.left", layer, "laurel", _gemv(16, hidden), norm)
        right = add(f"{s}.laurel.right", layer, "laurel", _gemv(hidden, 16), left)
        merge = add(f"{s}.residual.merge", layer, "residual", _host("add", hidden), *o, right)
        up = tiles(f"{s}.ffn.up", layer, "ffn", ffn, hidden, merge)
        act = add(f"{s}.ffn.gelu", layer, "ffn", _cvo("GELU", ffn), *up)
        down = tiles(f"{s}.ffn.down", layer, "ffn", hidden, ffn, act)
        x = add(f"{s}.altup_corr.add", layer, "altup_corr", _host("add", hidden), *down)
        gate = add(f"{s}.ple_mix.gate", layer, "ple_mix", _gemv(16, hidden), x)
        gelu = add(f"{s}.ple_mix.gelu", layer, "ple_mix", _cvo("GELU", 16), gate)
        shadow = add(f"{s}.ple_mix.add", layer, "ple_mix", _host("add", 3 * hidden), gelu)
    add("post.final.lm_head", -1, "final", _gemv(hidden, hidden), x, shadow)
    return g

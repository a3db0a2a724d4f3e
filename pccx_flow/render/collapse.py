"""Folding a decode graph into fewer, larger nodes so a picture of it stays readable.

One E4B decode step has thousands of instruction nodes; a picture of all of them is a wall of
boxes. Five levels of detail, coarsest last:

- ``none``: every node as built;
- ``tiles``: the indexed copies of one op become one node that records how many it holds: the
  GEMV tiles of one matrix (``L07.ffn.gate.t03``), the row chunks of a K-split GEMV
  (``.t02.c05``), per-head copies (``L07.attn.q_norm.h3.sqrt``) and partial sums (``.p1``);
  ids that differ only in such ``.<letter><digits>`` segments fold together;
- ``macros``: as ``tiles``, and each fixed instruction sequence that implements one
  operation (an RMSNorm's square → REDUCE_SUM → mean+ε → SQRT → RECIP → SCALE → γ, a
  softmax's EXP → REDUCE_SUM → SCALE, a RoPE phase → SIN/COS) becomes one node named after
  the operation (`MACROS`);
- ``blocks``: every block of a layer (attention, FFN, LAuReL, ...) becomes one node;
- ``layers``: every layer (and the steps before / after the stack) becomes one node.

`collapse` returns the folded graph and the map from original node to folded node, so the
caller can carry a critical path or a schedule over to the picture. Folded nodes keep the
attributes a picture needs (layer, block, op mix, dominant lane class, total cycles).

>>> import networkx as nx
>>> g = nx.DiGraph()
>>> g.add_node("L00.ffn.gate.t00", layer=0, block="ffn", op="GEMV", lane_class="gemv",
...            weight={"key": "layers.0.mlp.gate_proj.weight", "rows": [0, 512]})
>>> g.add_node("L00.ffn.gate.t01", layer=0, block="ffn", op="GEMV", lane_class="gemv",
...            weight={"key": "layers.0.mlp.gate_proj.weight", "rows": [512, 1024]})
>>> folded, group_of = collapse(g, "tiles")
>>> sorted(folded.nodes), folded.nodes["L00.ffn.gate"]["tiles"]
(['L00.ffn.gate'], 2)
"""

from __future__ import annotations

import re
from collections import Counter

import networkx as nx

from pccx_flow.errors import RenderError

LEVELS = ("none", "tiles", "macros", "blocks", "layers")
# Levels ``auto`` chooses from, finest first: ``tiles`` is left to those who ask, because
# ``macros`` shows the same tiles with every norm as one node instead of seven.
AUTO_LEVELS = ("none", "macros", "blocks", "layers")

# Fixed instruction sequences of `pccx_flow.graph.ops`, by the last id segments of their
# steps: a prefix whose steps (after tile folding) are all in `steps` and include every one
# of `required` is folded into one node named `name`.
MACROS = (
    {
        "name": "RMSNorm",
        "required": {"square", "rsum", "mean_eps", "sqrt", "recip", "scale"},
        "steps": {"square", "rsum", "mean_eps", "sqrt", "recip", "scale", "gamma"},
    },
    {"name": "softmax", "required": {"exp", "rsum", "norm"}, "steps": {"exp", "rsum", "norm"}},
    # several key tiles: EXP and REDUCE_SUM per tile; the host's attn_combine normalises
    {"name": "softmax tiles", "required": {"exp", "rsum"}, "steps": {"exp", "rsum"}},
    {"name": "RoPE sin/cos", "required": {"phase", "sin", "cos"}, "steps": {"phase", "sin", "cos"}},
    {
        "name": "mean of squares",
        "required": {"square", "rsum", "sum", "mean"},
        "steps": {"square", "rsum", "sum", "mean"},
    },
    {
        # spec 002's sparse gate (graph/blocks_ffn.py): mean, two-pass std, cutoff, ReLU
        "name": "Gaussian top-k",
        "id": "topk",
        "required": {"mean", "var", "std", "cutoff", "sparse"},
        "steps": {
            "mean.rsum", "mean.sum", "mean", "var.sq", "var.rsum", "var.sum", "var", "std",
            "cutoff", "sparse",
        },
    },
)  # fmt: skip

# The finest level whose picture has at most this many nodes is picked by default: a few
# screens of readable labels. One tiny layer (~230 nodes) stays in full detail, one or two
# E4B layers fold their tiles, a few E4B layers fold blocks, the whole step folds layers.
MAX_READABLE_NODES = 260

# A node that feeds more than this many others (a shared constant, a normed input read by
# hundreds of LM-head tiles) makes `dot` spend minutes on crossings: such nodes are left out.
FANOUT_LIMIT = 96

# An index segment of a node id: ``.t03`` (tile), ``.c05`` (chunk), ``.h2`` (head), ``.p1``
# (partial sum), ``.r0`` (stream row). Upper-case scopes such as ``L07`` are not indices.
_INDEX = re.compile(r"\.[a-z]\d+(?=\.|$)")
_SCOPE = re.compile(r"^(pre|post|L\d+)$")


def check_level(level: str) -> str:
    """Return `level` if it is a known collapse level, else raise `RenderError`."""
    if level not in LEVELS:
        raise RenderError(f"unknown collapse level {level!r}; choose one of: {', '.join(LEVELS)}")
    return level


def scope_of(node: str, attrs: dict) -> str:
    """``pre``, ``post`` or ``Lnn``: the part of the step a node belongs to.

    Taken from the node id's first dotted part (the id convention of `pccx_flow.graph.nodes`),
    else from its ``layer`` attribute (layer -1 outside the stack counts as ``pre`` unless the
    block is ``final``).
    """
    head = str(node).split(".", 1)[0]
    if _SCOPE.match(head):
        return head
    layer = attrs.get("layer", -1)
    if layer is None or layer < 0:
        return "post" if attrs.get("block") == "final" else "pre"
    return f"L{int(layer):02d}"


def scope_sort_key(scope: str) -> tuple[int, int]:
    """Order of scopes in a step: pre, L00, L01, ..., post."""
    if scope == "pre":
        return (0, 0)
    if scope == "post":
        return (2, 0)
    return (1, int(scope[1:]))


def group_of_node(node: str, attrs: dict, level: str) -> str:
    """Id of the folded node that `node` belongs to at `level` (``macros``: its tile group)."""
    if level == "none":
        return node
    scope = scope_of(node, attrs)
    if level == "layers":
        return scope
    if level == "blocks":
        return f"{scope}.{attrs.get('block')}"
    base = _INDEX.sub("", str(node))
    return base if base else node


def macro_groups(tile_groups: set[str]) -> dict[str, str]:
    """``{tile group: macro node id}`` for the tile groups that are steps of a `MACROS` entry.

    A macro's node id is the common prefix of its steps (plus the entry's ``id``, if any).
    """
    found: dict[tuple[str, int], set[str]] = {}
    for group in tile_groups:
        for k, macro in enumerate(MACROS):
            for step in macro["steps"]:
                if group.endswith("." + step):
                    found.setdefault((group[: -len(step) - 1], k), set()).add(step)
    out: dict[str, str] = {}
    for (prefix, k), steps in sorted(found.items()):
        macro = MACROS[k]
        if macro["required"] <= steps and not any(f"{prefix}.{s}" in out for s in steps):
            node = f"{prefix}.{macro['id']}" if "id" in macro else prefix
            out.update({f"{prefix}.{s}": node for s in steps})
    return out


def macro_name(steps: set[str]) -> str | None:
    """The `MACROS` name whose steps these are (last id segments), if any."""
    for macro in MACROS:
        names = {s.rsplit(".", 1)[-1] for s in macro["steps"]}
        required = {s.rsplit(".", 1)[-1] for s in macro["required"]}
        if required <= steps <= names:
            return macro["name"]
    return None


def _group_ids(graph: nx.DiGraph, level: str) -> dict[str, str]:
    """``{node: folded id}``; a folded group never takes the id of another node."""
    base = "tiles" if level == "macros" else level
    ids = {n: group_of_node(n, a, base) for n, a in graph.nodes(data=True)}
    if level == "macros":
        macro_of = macro_groups(set(ids.values()))
        ids = {n: macro_of.get(g, g) for n, g in ids.items()}
    if level in ("tiles", "macros"):
        ids = {n: f"{g}[tiles]" if g != n and g in graph else g for n, g in ids.items()}
    if level == "blocks":
        ids = split_two_way_blocks(graph, ids)
    return ids


def split_two_way_blocks(graph: nx.DiGraph, ids: dict[str, str]) -> dict[str, str]:
    """Split a block that both feeds and is fed by another block of its layer.

    The `residual` block holds the layer's input norm (read by attention) and the norm after
    attention (reading it): folded whole, the two blocks got opposite arrows and read as a
    cycle. The members of such a block that nothing of the other block reaches become a node
    of their own, named by their common prefix (``L03.residual.input_norm``), so the picture
    is again a DAG: input norm -> attention -> residual.
    """
    out = dict(ids)
    for _ in range(len(graph)):  # each pass splits one block; a few per layer in practice
        pair = _two_way_pair(graph, out)
        if pair is None:
            return out
        members: dict[str, list[str]] = {}
        for node, group in out.items():
            members.setdefault(group, []).append(node)
        for group, other in (pair, pair[::-1]):
            inside = set(members[group])
            reached = _reached_from(graph, members[other], inside)
            before = [n for n in members[group] if n not in reached]
            feeds = any(out[s] == other for n in before for s in graph.successors(n))
            if before and feeds and len(before) < len(inside):
                name = _common_prefix(before, group)
                out.update({n: name for n in before})
                break
        else:
            return out  # cannot happen in a DAG; leave the picture as it is
    return out


def _two_way_pair(graph: nx.DiGraph, ids: dict[str, str]) -> tuple[str, str] | None:
    """The first two groups joined by edges both ways, if any."""
    links = {(ids[u], ids[v]) for u, v in graph.edges if ids[u] != ids[v]}
    return next((pair for pair in sorted(links) if pair[::-1] in links), None)


def _reached_from(graph: nx.DiGraph, sources: list[str], within: set[str]) -> set[str]:
    """The members of `within` reachable from any of `sources` (walking the whole graph)."""
    seen: set[str] = set()
    stack = list(sources)
    visited: set[str] = set(stack)
    while stack:
        node = stack.pop()
        for nxt in graph.successors(node):
            if nxt not in visited:
                visited.add(nxt)
                stack.append(nxt)
                if nxt in within:
                    seen.add(nxt)
    return seen


def _common_prefix(nodes: list[str], group: str) -> str:
    """The longest dotted prefix the node ids share, if longer than `group`; else
    ``<group>.before``."""
    parts = [str(n).split(".") for n in nodes]
    common: list[str] = []
    for segs in zip(*parts, strict=False):
        if len(set(segs)) != 1:
            break
        common.append(segs[0])
    name = ".".join(common)
    return name if len(name) > len(group) and name not in nodes else f"{group}.before"


def collapse(graph: nx.DiGraph, level: str) -> tuple[nx.DiGraph, dict[str, str]]:
    """Fold `graph` to `level`; return the folded graph and ``{original node: folded node}``.

    Folded nodes carry ``count`` (members), ``ops`` (op -> count), ``op`` (the op if all
    members share it, else None), ``lane_class`` (the class with the most work: cycles when
    known, else members), ``mixed_lanes`` (True when members use several classes), ``layer``,
    ``block`` (None when mixed), ``scope``, ``tiles`` (copies folded at level tiles, else 0),
    ``cycles`` (sum, when members have it) and ``members`` (original ids in graph order).
    Parallel edges become one edge with ``count``; edges inside a folded node disappear.
    """
    check_level(level)
    group_of = _group_ids(graph, level)
    members: dict[str, list[str]] = {}
    for node, group in group_of.items():
        members.setdefault(group, []).append(node)

    folded = nx.DiGraph()
    folded.graph.update(graph.graph)
    for group, nodes in members.items():
        folded.add_node(group, **_group_attrs(graph, group, nodes, level))
    for u, v, data in graph.edges(data=True):
        gu, gv = group_of[u], group_of[v]
        if gu == gv:
            continue
        if folded.has_edge(gu, gv):
            edge = folded.edges[gu, gv]
            edge["count"] += 1
            edge["bytes"] += int(data.get("bytes", 0) or 0)
        else:
            folded.add_edge(gu, gv, count=1, bytes=int(data.get("bytes", 0) or 0))
    return folded, group_of


def _group_attrs(graph: nx.DiGraph, group: str, nodes: list[str], level: str) -> dict:
    if level == "none" or len(nodes) == 1 and nodes[0] == group:
        attrs = dict(graph.nodes[nodes[0]])
        attrs.update(
            count=1,
            ops={attrs.get("op"): 1},
            mixed_lanes=False,
            scope=scope_of(nodes[0], attrs),
            tiles=0,
            members=[nodes[0]],
        )
        return attrs
    datas = [graph.nodes[n] for n in nodes]
    ops = Counter(d.get("op") for d in datas)
    have_cycles = all(d.get("cycles") is not None for d in datas)
    lane_work: Counter = Counter()
    for d in datas:
        lane_work[d.get("lane_class")] += float(d["cycles"]) if have_cycles else 1.0
    blocks = {d.get("block") for d in datas}
    layers = {d.get("layer") for d in datas}
    attrs = {
        "count": len(nodes),
        "ops": dict(ops),
        "op": next(iter(ops)) if len(ops) == 1 else None,
        "lane_class": lane_work.most_common(1)[0][0],
        "mixed_lanes": len(lane_work) > 1,
        "layer": next(iter(layers)) if len(layers) == 1 else None,
        "block": next(iter(blocks)) if len(blocks) == 1 else None,
        "scope": scope_of(nodes[0], datas[0]),
        "tiles": len(nodes) if level in ("tiles", "macros") else 0,
        "members": nodes,
    }
    if level == "macros":
        steps = Counter(_INDEX.sub("", str(n)).rpartition(".")[2] for n in nodes)
        attrs["macro"] = macro_name(set(steps)) if len(steps) > 1 else None
        if attrs["macro"]:
            attrs["tiles"] = 0
            per_step = set(steps.values())  # one RMSNorm per head: every step 8 times
            attrs["copies"] = per_step.pop() if len(per_step) == 1 else 1
    if have_cycles:
        attrs["cycles"] = sum(float(d["cycles"]) for d in datas)
    attrs["bytes"] = sum(
        int(d.get("weight_bytes") or 0) + int(d.get("act_bytes") or 0) for d in datas
    )
    shapes = {tuple(o["shape"]) for d in datas for o in d.get("outputs", ())[:1]}
    attrs["out_shape"] = list(next(iter(shapes))) if len(shapes) == 1 else None
    return attrs


def pick_level(graph: nx.DiGraph, max_nodes: int = MAX_READABLE_NODES) -> str:
    """The finest of `AUTO_LEVELS` with at most `max_nodes` folded nodes (else ``layers``)."""
    for level in AUTO_LEVELS[:-1]:
        if len(set(_group_ids(graph, level).values())) <= max_nodes:
            return level
    return AUTO_LEVELS[-1]


def drop_fanout(
    graph: nx.DiGraph, limit: int = FANOUT_LIMIT, keep: set[str] | frozenset = frozenset()
) -> tuple[nx.DiGraph, list[str]]:
    """A copy of `graph` without nodes that feed more than `limit` others (unless in `keep`).

    Returns the smaller graph and the ids left out (in graph order), so a picture can say
    what it does not show.
    """
    dropped = [n for n in graph.nodes if graph.out_degree(n) > limit and n not in keep]
    if not dropped:
        return graph, []
    kept = graph.copy()
    kept.remove_nodes_from(dropped)
    return kept, dropped

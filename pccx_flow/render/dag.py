"""Graphviz pictures of a decode DAG: clustered by layer and block, coloured by lane class,
shaped by op kind, with the critical path drawn bold.

The picture is built as plain DOT source (the `graphviz` package) so it can be written as
``.dot`` without Graphviz installed; SVG, PNG and PDF need the `dot` program (see `dot.py`).

Layout choices, and why:

- one ``cluster_<scope>`` per layer (and for the steps before / after the stack) and, inside
  it, one ``cluster_<scope>_<block>`` per block, so the picture reads like the specification's
  §4.A-E sections;
- LAuReL and PLE blocks get dashed cluster and node borders: the specification puts them
  beside the critical path, and the picture should show whether the schedule agrees;
- nodes that feed hundreds of others are left out (and named in the caption): one such node
  keeps `dot` busy for minutes and its edges hide everything else;
- a picture of one layer is wrapped into two columns: the edges into the FFN do not rank it
  below attention, so FFN, AltUp correction and PLE stand beside AltUp prediction, attention
  and LAuReL (the bold critical path shows the jump) instead of one column twice as tall.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import graphviz
import networkx as nx

from pccx_flow import atomic
from pccx_flow.errors import ConfigError, RenderError
from pccx_flow.graph.nodes import BLOCKS, LANE_CLASSES, OPS
from pccx_flow.render import style
from pccx_flow.render.collapse import (
    FANOUT_LIMIT,
    check_level,
    collapse,
    drop_fanout,
    pick_level,
    scope_sort_key,
)
from pccx_flow.render.dot import DEFAULT_TIMEOUT_S, run_layout

OUTPUT_FORMATS = ("svg", "png", "pdf", "dot")

# A node whose edges reach more than this many other layers (PLE pre-compute feeding every
# layer's PLE mix, a shared KV cache write read by 15 layers) has those edges left undrawn.
SCOPE_FANOUT_LIMIT = 3


@dataclass(frozen=True)
class DagPicture:
    """DOT source of one picture plus what a caller should tell the user about it."""

    source: str
    level: str  # the collapse level drawn
    level_picked: bool  # True when the level was chosen automatically
    nodes: int  # nodes drawn (legend excluded)
    edges: int  # edges drawn (legend excluded)
    omitted: list[str] = field(default_factory=list)  # fan-out nodes left out
    critical_nodes: int = 0  # drawn nodes on the critical path
    critical_note: str = ""
    spine_lines: tuple[str, ...] = ()  # the spine's layout hints, lines of `source`

    @property
    def source_without_spine(self) -> str:
        """The picture without the spine (`write_dag` falls back to it); "" if it has none."""
        if not self.spine_lines:
            return ""
        hints = set(self.spine_lines)
        return "".join(line for line in self.source.splitlines(True) if line not in hints)


def longest_path_by_count(graph: nx.DiGraph) -> list[str]:
    """The longest path counted in nodes: the critical-path stand-in when no profile is given."""
    return nx.dag_longest_path(graph, weight="__unit__", default_weight=1)


def layer_view(graph: nx.DiGraph, span: tuple[int, int]) -> nx.DiGraph:
    """The part of `graph` in decoder layers ``span[0] .. span[1]-1`` (a read-only view).

    The steps before and after the layer stack are left out, so a picture of one layer is
    that layer (the LM head alone has hundreds of tiles).
    """
    first, stop = span
    keep = [n for n, d in graph.nodes(data=True) if first <= _layer(d) < stop]
    if not keep:
        raise RenderError(f"the graph has no nodes in layers {first}..{stop - 1}")
    return graph.subgraph(keep)


def build_dag_picture(
    graph: nx.DiGraph,
    *,
    level: str = "auto",
    critical_path: list[str] | None = None,
    critical_note: str | None = None,
    schedule=None,
    title: str | None = None,
    fanout_limit: int = FANOUT_LIMIT,
    scope_limit: int = SCOPE_FANOUT_LIMIT,
) -> DagPicture:
    """DOT source for a picture of `graph`.

    `critical_path` is a list of node ids drawn bold (default: the longest path by node
    count, and the caption says so). With `schedule` (a `Schedule` whose ``slots[node]`` has
    ``lane``, ``start``, ``finish``) every node is labelled with its lane and start cycle.
    `level` is one of `collapse.LEVELS` or ``"auto"`` (the finest readable level).
    Nodes feeding more than `fanout_limit` others are left out; a node feeding more than
    `scope_limit` other layers keeps its node but not those edges (they are not on the
    critical path, and a bundle of 35 layer-long edges hides everything else); the node's
    label says how many layers it feeds.
    """
    if graph.number_of_nodes() == 0:
        raise RenderError("the graph to render is empty: check --layers / --layer")
    picked = level == "auto"
    level = pick_level(graph) if picked else check_level(level)
    if critical_path is None:
        critical_path = longest_path_by_count(graph)
        if critical_note is None:
            critical_note = "bold: longest path by node count (no hardware profile given)"
    critical_note = critical_note or "bold: critical path"

    folded, group_of = collapse(graph, level)
    on_path = [group_of[n] for n in critical_path if n in group_of]
    critical_groups = set(on_path)
    critical_edges = {(a, b) for a, b in zip(on_path, on_path[1:], strict=False) if a != b}
    folded, omitted = drop_fanout(folded, fanout_limit)
    hidden = _spread_edges(folded, critical_edges, scope_limit)
    extra: dict[str, list[str]] = {}
    for node, text in (_group_slots(folded, schedule) if schedule is not None else {}).items():
        extra.setdefault(node, []).append(text)
    for node, scopes in _count_by_source(hidden, folded).items():
        extra.setdefault(node, []).append(f"feeds {scopes} layers (edges not drawn)")

    dot = graphviz.Digraph(name="decode_step", strict=False)
    dot.attr(
        rankdir="TB",
        newrank="true",
        fontname="Helvetica",
        fontsize="12",
        labelloc="t",
        label=_caption(graph, level, picked, critical_note, omitted, schedule, title, fanout_limit),
        outputorder="edgesfirst",
        nodesep="0.18",
        ranksep="0.3",
    )
    dot.attr("node", fontname="Helvetica", fontsize="10", style="filled", margin="0.06,0.03")
    dot.attr("edge", color=style.EDGE_COLOUR, arrowsize="0.6")

    by_scope: dict[str, dict[str, list[str]]] = {}
    for node, attrs in folded.nodes(data=True):
        block = attrs.get("block") or ""
        by_scope.setdefault(attrs["scope"], {}).setdefault(block, []).append(node)

    config = _config_of(graph)
    for scope in sorted(by_scope, key=scope_sort_key):
        blocks = by_scope[scope]
        if level == "layers":
            for node in blocks.get("", []) + [n for b, ns in blocks.items() if b for n in ns]:
                _add_node(dot, folded, node, level, node in critical_groups, extra)
            continue
        with dot.subgraph(name=f"cluster_{scope}") as layer_cluster:
            layer_cluster.attr(
                label=_scope_title(scope, config),
                style="rounded",
                color="#555555",
                fontsize="14",
            )
            for block in sorted(blocks, key=_block_order):
                nodes = blocks[block]
                if level == "blocks" or not block:
                    for node in nodes:
                        _add_node(
                            layer_cluster, folded, node, level, node in critical_groups, extra
                        )
                    continue
                with layer_cluster.subgraph(name=f"cluster_{scope}_{block}") as block_cluster:
                    block_cluster.attr(
                        label=style.block_title(block),
                        style="rounded,dashed" if block in style.OFF_PATH_BLOCKS else "rounded",
                        color=style.block_colour(block),
                        fontsize="11",
                    )
                    for node in nodes:
                        _add_node(
                            block_cluster, folded, node, level, node in critical_groups, extra
                        )

    wrap = _wraps(folded, level)
    for u, v, data in folded.edges(data=True):
        if (u, v) in hidden:
            continue
        attrs = {"constraint": "false"} if (u, v) in wrap else {}
        if data.get("count", 1) > 1:
            attrs["tooltip"] = f"{data['count']} tensors"
        if (u, v) in critical_edges:
            attrs.update(
                penwidth=style.CRITICAL_PENWIDTH,
                color=style.CRITICAL_COLOUR,
                style="bold",
                weight="8",
            )
        dot.edge(u, v, **attrs)

    for u, v in _scope_anchors(folded, hidden):
        dot.edge(u, v, style="invis")
    hints = len(dot.body)
    for u, v in _spine(folded, on_path):
        dot.edge(u, v, style="invis", weight="40")
    spine = tuple(dot.body[hints:])

    _add_legend(dot, folded)
    return DagPicture(
        source=dot.source,
        spine_lines=spine,
        level=level,
        level_picked=picked,
        nodes=folded.number_of_nodes(),
        edges=folded.number_of_edges() - len(hidden),
        omitted=omitted,
        critical_nodes=len(critical_groups & set(folded.nodes)),
        critical_note=critical_note,
    )


def write_dag(picture: DagPicture, out: str | Path, *, timeout: float = DEFAULT_TIMEOUT_S) -> Path:
    """Write `picture` to `out`; the suffix (.svg, .png, .pdf, .dot) picks the format.

    ``.dot`` writes the source and needs no Graphviz; the others run `dot` with `timeout`.
    """
    out = Path(out)
    fmt = out.suffix.lower().lstrip(".")
    if fmt not in OUTPUT_FORMATS:
        raise RenderError(
            f"cannot tell the picture format from {out.name!r}: end the output name with "
            + ", ".join(f".{f}" for f in OUTPUT_FORMATS)
        )
    if fmt == "dot":
        out.parent.mkdir(parents=True, exist_ok=True)
        atomic.write_text(out, picture.source)
        return out
    try:
        return run_layout(picture.source, out, fmt, timeout=timeout)
    except RenderError as exc:
        # Graphviz 2.43's ranking gives up ("trouble in init_rank") on some pictures that
        # hold the spine's heavy invisible edges beside a bold critical path (tiny, layers
        # 0:2, the heft schedule's path): the spine is only a hint, so lay out without it
        if "init_rank" not in str(exc) or not picture.source_without_spine:
            raise
        return run_layout(picture.source_without_spine, out, fmt, timeout=timeout)


# --- pieces ------------------------------------------------------------------------------


def _layer(attrs: dict) -> int:
    layer = attrs.get("layer")
    return -1 if layer is None else int(layer)


def _block_order(block: str) -> int:
    return BLOCKS.index(block) if block in BLOCKS else len(BLOCKS)


def _config_of(graph: nx.DiGraph):
    from pccx_flow.model.config import get_config

    try:
        return get_config(str(graph.graph.get("config", "")))
    except ConfigError:
        return None


def _scope_title(scope: str, config) -> str:
    if scope == "pre":
        return "before the layers"
    if scope == "post":
        return "after the layers"
    layer = int(scope[1:])
    if config is None or layer >= config.n_layers:
        return f"layer {layer}"
    from pccx_flow.model.config import is_global_layer, is_sparse_layer, kv_source_layer

    parts = [f"layer {layer}", "global" if is_global_layer(config, layer) else "local"]
    if is_sparse_layer(config, layer):
        parts.append("sparse FFN")
    source = kv_source_layer(config, layer)
    if source != layer:
        parts.append(f"KV of L{source}")
    return ", ".join(parts)


def _caption(graph, level, picked, critical_note, omitted, schedule, title, fanout_limit) -> str:
    g = graph.graph
    lines = [
        title
        or f"{g.get('config', '?')} decode step, semantics {g.get('semantics', '?')}, "
        f"position {g.get('position', '?')}"
    ]
    how = "picked automatically for readability" if picked else "as asked"
    lines.append(f"collapse: {level} ({how}); {critical_note}")
    if schedule is not None:
        profile = _profile_name(getattr(schedule, "profile", None))
        lines.append(
            f"labels: lane @ start cycle of the {getattr(schedule, 'policy', '?')} schedule on "
            f"{profile} (model estimate)"
        )
    if omitted:
        shown = ", ".join(omitted[:4]) + (" ..." if len(omitted) > 4 else "")
        lines.append(
            f"left out {len(omitted)} node(s) feeding more than {fanout_limit} others: {shown}"
        )
    return "\n".join(lines)


def _profile_name(profile) -> str:
    if profile is None:
        return "?"
    if isinstance(profile, str):
        return profile
    return str(getattr(profile, "name", profile))


def _short_name(node: str, attrs: dict) -> str:
    """The node id without its scope and block prefix (the clusters already say those)."""
    parts = str(node).split(".")
    scope, block = attrs.get("scope"), attrs.get("block")
    if parts and parts[0] == scope:
        parts = parts[1:]
    if len(parts) > 1 and parts[0] == block:
        parts = parts[1:]
    return ".".join(parts) or str(node)


def _op_text(attrs: dict) -> str:
    op, func = attrs.get("op"), attrs.get("func")
    if op in ("CVO", "HOST", "MEMCPY") and func:
        return f"{op} {func}"
    return op or ""


def _mix_text(ops: dict) -> str:
    order = {op: i for i, op in enumerate(OPS)}
    items = sorted(ops.items(), key=lambda kv: order.get(kv[0], len(order)))
    return ", ".join(f"{n} {op}" for op, n in items)


def _nodes_text(count: int) -> str:
    return "1 node" if count == 1 else f"{count} nodes"


def _shape_text(attrs: dict) -> str:
    """``-> [512] f32`` for a node, ``-> 32 x [512]`` for a folded run of equal outputs."""
    if attrs.get("count", 1) == 1:
        outs = attrs.get("outputs") or []
        if not outs:
            return ""
        first = outs[0]
        dtype = _DTYPES.get(first.get("dtype"), first.get("dtype") or "")
        more = f" (+{len(outs) - 1})" if len(outs) > 1 else ""
        return f"-> {list(first['shape'])} {dtype}{more}".rstrip()
    shape = attrs.get("out_shape")
    if shape is None or attrs.get("macro"):
        return ""
    return f"-> {attrs['count']} x {list(shape)}"


_DTYPES = {"float32": "f32", "float16": "f16", "float64": "f64", "int32": "i32", "uint8": "u8"}


def _cost_text(attrs: dict) -> str:
    """Bytes moved and cycles, when the graph was costed on a profile (model estimates)."""
    if attrs.get("cycles") is None:
        return ""
    if attrs.get("count", 1) == 1:
        moved = int(attrs.get("weight_bytes") or 0) + int(attrs.get("act_bytes") or 0)
    else:
        moved = int(attrs.get("bytes") or 0)
    return f"{_bytes_text(moved)}, {float(attrs['cycles']):,.0f} cyc"


def _bytes_text(n: int) -> str:
    for unit, size in (("MB", 1e6), ("kB", 1e3)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def _label(node: str, attrs: dict, level: str, extra: list[str]) -> str:
    if level == "layers":
        scope = attrs["scope"]
        name = {"pre": "before the layers", "post": "after the layers"}.get(
            scope, f"layer {scope[1:].lstrip('0') or '0'}"
        )
        lines = [name, _nodes_text(attrs["count"])]
    elif level == "blocks":
        title = style.block_title(attrs.get("block") or "?")
        part = str(node).split(".", 2)[2:]  # a block split in two (collapse.py): its part
        if part:
            title = f"{title}: {part[0].replace('_', ' ')}"
        lines = [title, _nodes_text(attrs["count"]), _mix_text(attrs["ops"])]
    elif attrs.get("macro"):
        times = f" x{attrs['copies']}" if attrs.get("copies", 1) > 1 else ""
        lines = [_short_name(node, attrs), f"{attrs['macro']}{times} ({attrs['count']} instr.)"]
    elif attrs.get("tiles"):
        unit = " tiles" if attrs.get("op") in ("GEMV", "GEMM") else ""
        what = _op_text(attrs) or _mix_text(attrs["ops"])
        lines = [_short_name(node, attrs), f"{what} x{attrs['tiles']}{unit}"]
    else:
        lines = [_short_name(node, attrs), _op_text(attrs)]
    if level not in ("layers", "blocks"):
        lines += [_shape_text(attrs), _cost_text(attrs)]
    lines.extend(extra)
    return "\n".join(line for line in lines if line)


WRAP_BLOCK = "ffn"


def _wraps(folded: nx.DiGraph, level: str) -> set[tuple[str, str]]:
    """Edges into the FFN from the rest of the layer, in a one-layer picture (else none)."""
    scopes = {a["scope"] for _, a in folded.nodes(data=True)}
    if level in ("blocks", "layers") or len(scopes) != 1 or not next(iter(scopes)).startswith("L"):
        return set()
    nodes = folded.nodes
    return {
        (u, v)
        for u, v in folded.edges
        if nodes[v].get("block") == WRAP_BLOCK and nodes[u].get("block") != WRAP_BLOCK
    }


def _spread_edges(folded: nx.DiGraph, critical_edges: set, limit: int) -> set:
    """Edges from a node into more than `limit` other scopes, except critical ones."""
    hidden = set()
    for node, attrs in folded.nodes(data=True):
        away = [v for v in folded.successors(node) if folded.nodes[v]["scope"] != attrs["scope"]]
        if len({folded.nodes[v]["scope"] for v in away}) > limit:
            hidden.update((node, v) for v in away if (node, v) not in critical_edges)
    return hidden


def _scope_anchors(folded: nx.DiGraph, hidden: set) -> list[tuple[str, str]]:
    """Invisible edges that keep each scope below the one before it: from every last node
    of a scope to every first node of the next.

    A node with no drawn inputs (a MEMSET constant, a cache read) would otherwise float up
    into the previous layer's last rank, which forces `dot` to put the two layer clusters
    side by side: the whole step then becomes a staircase many metres wide.
    """
    by_scope: dict[str, list[str]] = {}
    for node, attrs in folded.nodes(data=True):
        by_scope.setdefault(attrs["scope"], []).append(node)
    order = sorted(by_scope, key=scope_sort_key)
    anchors = []
    for before, after in zip(order, order[1:], strict=False):
        sinks = [
            n
            for n in by_scope[before]
            if not any(folded.nodes[v]["scope"] == before for v in folded.successors(n))
        ]
        # every node that starts a chain in the later scope (none of its inputs is in that
        # scope), not only those with no drawn input: a node fed from the middle of the
        # earlier layer was ranked beside it, and the two layers then stood side by side
        # (layer 0 top right, layer 1 bottom left)
        sources = [
            n
            for n in by_scope[after]
            if not any(folded.nodes[u]["scope"] == after for u in folded.predecessors(n))
        ]
        anchors += [(u, v) for u in sinks for v in sources]
    return anchors


def _spine(folded: nx.DiGraph, on_path: list[str]) -> list[tuple[str, str]]:
    """Heavy invisible edges between one FFN node of each layer and the next layer's.

    They pull each layer's FFN straight below the previous one; without them every layer
    sits a node's width beside the last and a whole step drifts into a diagonal staircase.
    The FFN node on the critical path is preferred, so the spine follows the bold path.
    """
    first: dict[str, str] = {}
    candidates = [n for n in on_path if n in folded] + sorted(folded.nodes)
    for node in candidates:
        attrs = folded.nodes[node]
        if attrs.get("block") == "ffn" and attrs["scope"].startswith("L"):
            first.setdefault(attrs["scope"], node)
    order = sorted(first, key=scope_sort_key)
    return [(first[a], first[b]) for a, b in zip(order, order[1:], strict=False)]


def _count_by_source(hidden: set, folded: nx.DiGraph) -> dict[str, int]:
    scopes: dict[str, set] = {}
    for u, v in hidden:
        scopes.setdefault(u, set()).add(folded.nodes[v]["scope"])
    return {u: len(s) for u, s in scopes.items()}


def _add_node(target, folded, node: str, level: str, critical: bool, extra: dict) -> None:
    attrs = folded.nodes[node]
    fill = style.lane_colour(attrs.get("lane_class"))
    styles = ["filled"]
    if attrs.get("block") in style.OFF_PATH_BLOCKS:
        styles.append("dashed")
    if attrs.get("count", 1) > 1 and attrs.get("op") is None:
        shape = style.GROUP_SHAPE
    else:
        shape = style.op_shape(attrs.get("op"))
    dot_attrs = {
        "label": _label(node, attrs, level, extra.get(node, [])),
        "shape": shape,
        **style.SHAPE_MARGINS.get(shape, {}),
        "fillcolor": fill,
        "fontcolor": style.text_colour(fill),
        "tooltip": _tooltip(node, attrs),
    }
    if critical:
        styles.append("bold")
        # One `group` keeps the critical path's nodes in a vertical line where it can.
        dot_attrs.update(
            penwidth=style.CRITICAL_PENWIDTH, color=style.CRITICAL_COLOUR, group="critical"
        )
    dot_attrs["style"] = ",".join(styles)
    target.node(node, **dot_attrs)


def _tooltip(node: str, attrs: dict) -> str:
    parts = [str(node), f"lane class {attrs.get('lane_class')}"]
    if attrs.get("count", 1) > 1:
        parts.append(_mix_text(attrs["ops"]))
    if attrs.get("cycles") is not None:
        parts.append(f"{float(attrs['cycles']):,.0f} cycles (model estimate)")
    return " | ".join(parts)


def _group_slots(folded: nx.DiGraph, schedule) -> dict[str, str]:
    """``lane @ start`` per drawn node; for folded nodes the lanes used and the time span."""
    out = {}
    for node, attrs in folded.nodes(data=True):
        placed = [schedule.slots[m] for m in attrs["members"] if m in schedule.slots]
        if not placed:
            continue
        if len(placed) == 1:
            slot = placed[0]
            out[node] = f"{_lane_name(slot.lane)} @ {int(slot.start):,}"
            continue
        lanes = sorted({_lane_name(s.lane) for s in placed})
        lane_text = lanes[0] if len(lanes) == 1 else f"{len(lanes)} lanes"
        start = min(s.start for s in placed)
        finish = max(s.finish for s in placed)
        out[node] = f"{lane_text} @ {int(start):,}-{int(finish):,}"
    return out


def _lane_name(lane) -> str:
    return str(getattr(lane, "name", lane))


def _add_legend(dot: graphviz.Digraph, folded: nx.DiGraph) -> None:
    """A legend cluster: lane-class colours and op shapes used, critical and off-path styles."""
    lane_classes = [
        c for c in LANE_CLASSES if any(a.get("lane_class") == c for _, a in folded.nodes(data=True))
    ]
    ops = [op for op in OPS if any(a.get("op") == op for _, a in folded.nodes(data=True))]
    with dot.subgraph(name="cluster_legend") as legend:
        legend.attr(label="legend", style="rounded", color="#555555", fontsize="12")
        legend.attr("node", fontsize="9", height="0.3")
        rows: list[list[str]] = [[], [], []]
        for cls in lane_classes:
            name = f"legend_lane_{cls}"
            fill = style.lane_colour(cls)
            legend.node(
                name,
                label=f"lane: {cls}",
                shape="box",
                style="filled",
                fillcolor=fill,
                fontcolor=style.text_colour(fill),
            )
            rows[0].append(name)
        for op in ops:
            name = f"legend_op_{op}"
            shape = style.op_shape(op)
            legend.node(name, label=op, shape=shape, style="filled", fillcolor="white",
                        **style.SHAPE_MARGINS.get(shape, {}))  # fmt: skip
            rows[1].append(name)
        if any(a.get("count", 1) > 1 and a.get("op") is None for _, a in folded.nodes(data=True)):
            legend.node(
                "legend_group",
                label="folded group\n(fill: lane class with most work)",
                shape=style.GROUP_SHAPE,
                style="filled",
                fillcolor="white",
                **style.SHAPE_MARGINS.get(style.GROUP_SHAPE, {}),
            )
            rows[1].append("legend_group")
        legend.node(
            "legend_offpath",
            label="LAuReL / PLE\n(beside the critical path)",
            shape="box",
            style="filled,dashed",
            fillcolor="white",
        )
        legend.node(
            "legend_crit_a",
            label="critical path",
            shape="box",
            style="filled,bold",
            penwidth=style.CRITICAL_PENWIDTH,
            fillcolor="white",
        )
        legend.node(
            "legend_crit_b",
            label="critical path",
            shape="box",
            style="filled,bold",
            penwidth=style.CRITICAL_PENWIDTH,
            fillcolor="white",
        )
        rows[2] += ["legend_offpath", "legend_crit_a"]
        legend.edge(
            "legend_crit_a",
            "legend_crit_b",
            penwidth=style.CRITICAL_PENWIDTH,
            color=style.CRITICAL_COLOUR,
            style="bold",
        )
        # Entries of a row share a rank; invisible edges stack the rows into a compact block.
        for row in rows:
            if len(row) > 1:
                with legend.subgraph() as same:
                    same.attr(rank="same")
                    for name in row:
                        same.node(name)
                    for a, b in zip(row, row[1:], strict=False):
                        same.edge(a, b, style="invis")
        heads = [row[0] for row in rows if row]
        for a, b in zip(heads, heads[1:], strict=False):
            legend.edge(a, b, style="invis")

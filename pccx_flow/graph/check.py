"""Invariants of a decode-step graph, checked on the graph alone (built or loaded from a file).

`check_graph` raises `GraphError` naming the first broken invariant and the nodes involved,
and otherwise returns one line of evidence per invariant it verified (what was counted), so a
user sees what the check proved and over how much of the graph:

- the graph is acyclic (a cycle is named node by node) and edges never run from a later
  layer back to an earlier one;
- every node has every attribute of `pccx_flow.graph.nodes`, a known op / block / kernel,
  the op its kernel belongs to, and a lane class that can run that op (`lane_can_run`);
- every tensor a node reads is written by exactly one node with an edge to the reader
  (values from outside the step enter through nodes whose params say ``source: state``);
- LAuReL nodes have no path to or from the attention nodes of their layer (spec 003 §1);
- PLE mixing writes only shadow rows 1..S-1 of xs (spec 003 §2.1);
- layers >= first_kv_shared_layer have no K/V projection and read the cache of
  ``kv_source_layer``; layers below it write their own slot (spec 000 §4.B-4);
- the Gaussian top-k gate appears exactly on the sparse layers (spec 002);
- each layer preloads its RoPE θ of the [L, L, L, L, G] cycle with one MEMSET, and its RoPE
  phases use that θ (spec 001 §2).
"""

from __future__ import annotations

import math
from collections import defaultdict, deque

import networkx as nx

from pccx_flow.errors import ConfigError, GraphError
from pccx_flow.graph.kernel_specs import CVO_KERNEL_FUNCS, KERNEL_OPS
from pccx_flow.graph.nodes import BLOCKS, LANE_CLASSES, OPS, lane_can_run
from pccx_flow.model.config import (
    Gemma3nConfig,
    get_config,
    is_sparse_layer,
    kv_source_layer,
    owns_kv,
    rope_theta,
)

NODE_ATTRS = (
    "layer",
    "block",
    "op",
    "func",
    "flags",
    "inputs",
    "outputs",
    "lane_class",
    "macs",
    "weight_bytes",
    "act_bytes",
    "elements",
    "weight",
    "kernel",
    "params",
)

KV_PROJ_KEYS = ("self_attn.k_proj.weight", "self_attn.v_proj.weight")
SPARSE_KERNELS = ("cutoff", "sub_relu")


def graph_config(graph: nx.DiGraph, config: Gemma3nConfig | None = None) -> Gemma3nConfig:
    """The config a graph was built for: `config`, else ``graph.graph["config_dict"]``."""
    if config is not None:
        return config
    data = graph.graph.get("config_dict")
    try:
        if isinstance(data, dict):
            return Gemma3nConfig(**data)
        return get_config(graph.graph.get("config", ""))
    except (TypeError, ConfigError) as exc:
        raise GraphError(
            f"the graph does not say which model it was built for ({exc}); pass a config"
        ) from None


def layer_ranges(layers: list[int]) -> str:
    """[0, 1, 2, 5] -> "0-2, 5"; an empty list -> "none"."""
    runs: list[list[int]] = []
    for x in sorted(layers):
        if runs and x == runs[-1][1] + 1:
            runs[-1][1] = x
        else:
            runs.append([x, x])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs) or "none"


def check_graph(graph: nx.DiGraph, config: Gemma3nConfig | None = None) -> list[tuple[str, str]]:
    """Check every invariant listed in the module doc; raise `GraphError` at the first broken one.

    Returns ``(invariant, evidence)`` pairs, e.g. ``("LAuReL ∥ attention", "no path between
    them in any of 35 layers")``.
    """
    cfg = graph_config(graph, config)
    _check_acyclic(graph)
    _check_nodes(graph)
    n_tensors, n_reads = _check_tensors(graph)
    _check_layer_order(graph, cfg)
    layers = sorted({a["layer"] for _, a in graph.nodes(data=True) if a["layer"] >= 0})
    by_layer: dict[int, list[str]] = defaultdict(list)
    for n, a in graph.nodes(data=True):
        by_layer[a["layer"]].append(n)
    laurel_layers = []
    for i in layers:
        if not 0 <= i < cfg.n_layers:
            raise GraphError(f"node {by_layer[i][0]} is on layer {i}, outside the model")
        nodes = by_layer[i]
        laurel_layers += [i] if _check_laurel(graph, i, nodes) else []
        _check_ple(graph, cfg, i, nodes)
        _check_kv(graph, cfg, i, nodes)
        _check_sparse(graph, cfg, i, nodes)
        _check_theta(graph, cfg, i, nodes)
    own = [i for i in layers if owns_kv(cfg, i)]
    shared = [i for i in layers if not owns_kv(cfg, i)]
    glob = [i for i in layers if rope_theta(cfg, i) == cfg.theta_global]
    sparse = [i for i in layers if is_sparse_layer(cfg, i)]
    n, e = graph.number_of_nodes(), graph.number_of_edges()
    kv = [f"layers {layer_ranges(own)} write their own K and V rows"] if own else []
    if shared:
        src = {kv_source_layer(cfg, i): "global" if i in glob else "local" for i in shared}
        reads = ", ".join(f"{j} ({kind})" for j, kind in sorted(src.items()))
        kv.append(f"layers {layer_ranges(shared)} project no K/V and read the slots of {reads}")
    gate = (
        f"a Gaussian top-k cutoff on layers {layer_ranges(sparse)}, on none of the other "
        f"{len(layers) - len(sparse)}"
        if sparse
        else f"no sparse layer here, and no cutoff node in any of the {len(layers)} layers"
    )
    theta = [f"{_power(cfg.theta_global)} on layers {layer_ranges(glob)}"] if glob else []
    rest = f"the other {len(layers) - len(glob)}" if glob else f"all {len(layers)} layers"
    theta.append(f"{_power(cfg.theta_local)} on {rest}")
    return [
        ("acyclic", f"a topological order of all {n:,} nodes and {e:,} edges exists"),
        ("layer order", f"none of the {e:,} edges runs from a later layer to an earlier one"),
        ("nodes", f"all {n:,}: known op and kernel, on a lane class that can run it"),
        (
            "tensors",
            f"{n_tensors:,} tensors, one writer each, an edge to each of {n_reads:,} reads",
        ),
        (
            "LAuReL ∥ attention",
            f"no path between them in any of {len(laurel_layers)} layers "
            f"({layer_ranges(laurel_layers)})",
        ),
        (
            "PLE → shadow rows",
            f"rows 1..{cfg.altup_streams - 1} of the corrected stream only, one write in "
            f"each of {len(layers)} layers",
        ),
        ("KV sharing", "; ".join(kv)),
        ("sparse gate", gate),
        ("RoPE θ cycle", "one θ MEMSET per layer feeds its phases: θ = " + ", ".join(theta)),
    ]


def _power(x: float) -> str:
    """1e6 rather than 1e+06 or 1000000.0."""
    exp = round(math.log10(x)) if x > 0 else 0
    return f"1e{exp}" if x == 10.0**exp else f"{x:g}"


def _check_acyclic(graph: nx.DiGraph) -> None:
    if nx.is_directed_acyclic_graph(graph):
        return
    cycle = [u for u, _ in nx.find_cycle(graph)]
    shown = cycle + cycle[:1]
    if len(shown) > 9:
        shown = shown[:4] + [f"... ({len(cycle) - 7} more)"] + shown[-4:]
    raise GraphError(f"the graph has a cycle of {len(cycle)} nodes: {' -> '.join(shown)}")


def _check_nodes(graph: nx.DiGraph) -> None:
    for n, a in graph.nodes(data=True):
        missing = [k for k in NODE_ATTRS if k not in a]
        if missing:
            raise GraphError(f"node {n} lacks attribute(s) {', '.join(missing)}")
        op, lane, kernel = a["op"], a["lane_class"], a["kernel"]
        if op not in OPS:
            raise GraphError(f"node {n} has unknown op {op!r}; ops are {', '.join(OPS)}")
        if a["block"] not in BLOCKS:
            raise GraphError(f"node {n} has unknown block {a['block']!r}")
        if lane not in LANE_CLASSES or not lane_can_run(lane, op):
            raise GraphError(f"node {n}: a lane of class {lane!r} cannot run a {op} node")
        if KERNEL_OPS.get(kernel) != op:
            want = KERNEL_OPS.get(kernel)
            raise GraphError(
                f"node {n}: kernel {kernel!r} "
                + (f"is a {want} kernel, not {op}" if want else "is not a known kernel")
            )
        if op == "CVO" and a["func"] != CVO_KERNEL_FUNCS[kernel]:
            raise GraphError(
                f"node {n}: kernel {kernel} issues CVO {CVO_KERNEL_FUNCS[kernel]}, "
                f"not {a['func']!r}"
            )


def _check_tensors(graph: nx.DiGraph) -> tuple[int, int]:
    """Check one writer per tensor and an edge per read; return (tensors, reads)."""
    writer: dict[str, str] = {}
    reads = 0
    for n, a in graph.nodes(data=True):
        for t in a["outputs"]:
            if t["name"] in writer:
                raise GraphError(
                    f"tensor {t['name']} is written by both {writer[t['name']]} and {n}"
                )
            writer[t["name"]] = n
    for n, a in graph.nodes(data=True):
        for t in a["inputs"]:
            reads += 1
            src = writer.get(t["name"])
            if src is None:
                raise GraphError(
                    f"node {n} reads tensor {t['name']} that no node writes (values from the "
                    "state enter through nodes with params source='state')"
                )
            if not graph.has_edge(src, n):
                raise GraphError(f"node {n} reads {t['name']} from {src} without an edge")
    return len(writer), reads


def _order(attrs: dict, cfg: Gemma3nConfig) -> int:
    """0 for the pre-layer steps, 1 + i for layer i, n_layers + 1 for the final steps."""
    if attrs["layer"] >= 0:
        return attrs["layer"] + 1
    return cfg.n_layers + 1 if attrs["block"] == "final" else 0


def _check_layer_order(graph: nx.DiGraph, cfg: Gemma3nConfig) -> None:
    nodes = graph.nodes
    for u, v in graph.edges:
        if _order(nodes[u], cfg) > _order(nodes[v], cfg):
            raise GraphError(
                f"edge {u} -> {v} runs backwards, from layer {nodes[u]['layer']} "
                f"to layer {nodes[v]['layer']}"
            )


def _reach(graph: nx.DiGraph, start: list[str], layer: int, forward: bool) -> set[str]:
    """Nodes of `layer` reachable from `start` (forward or backward) inside the layer."""
    step = graph.successors if forward else graph.predecessors
    seen, todo = set(start), deque(start)
    while todo:
        for m in step(todo.popleft()):
            if m not in seen and graph.nodes[m]["layer"] == layer:
                seen.add(m)
                todo.append(m)
    return seen


def _check_laurel(graph: nx.DiGraph, layer: int, nodes: list[str]) -> bool:
    """Raise if LAuReL and attention are connected; False when the layer has no LAuReL."""
    laurel = [n for n in nodes if graph.nodes[n]["block"] == "laurel"]
    attn = {n for n in nodes if graph.nodes[n]["block"] == "attn"}
    if not laurel:
        return False
    for forward in (True, False):
        hit = sorted(_reach(graph, laurel, layer, forward) & attn)
        if hit:
            direction = "to" if forward else "from"
            raise GraphError(
                f"layer {layer}: the LAuReL branch has a path {direction} attention node "
                f"{hit[0]}; LAuReL must run in parallel with attention (spec 003 §1)"
            )
    return True


def _writer_of(graph: nx.DiGraph, reader: str, name: str) -> str | None:
    for p in graph.predecessors(reader):
        if name in graph.edges[p, reader].get("tensors", [graph.edges[p, reader]["tensor"]]):
            return p
    return None


def _check_ple(graph: nx.DiGraph, cfg: Gemma3nConfig, layer: int, nodes: list[str]) -> None:
    shadow = list(range(1, cfg.altup_streams))
    writes = [n for n in nodes if graph.nodes[n]["kernel"] == "ple_write"]
    if len(writes) != 1:
        raise GraphError(f"layer {layer} has {len(writes)} PLE write nodes, expected 1")
    (w,) = writes
    a = graph.nodes[w]
    rows = a["params"].get("rows")
    if not isinstance(rows, list) or not rows or any(r not in shadow for r in rows):
        raise GraphError(
            f"{w} writes stream rows {rows}; PLE may write only the shadow rows "
            f"{shadow} of xs, never row 0 (spec 003 §2.1)"
        )
    if len(a["outputs"]) != len(rows):
        raise GraphError(f"{w} lists rows {rows} but writes {len(a['outputs'])} tensors")
    row_inputs = a["inputs"][len(a["inputs"]) - len(rows) :]
    for r, t in zip(rows, row_inputs, strict=True):
        src = _writer_of(graph, w, t["name"])
        sa = graph.nodes[src] if src else {}
        if sa.get("kernel") != "altup_correct" or sa["params"].get("row") != r:
            raise GraphError(
                f"{w} adds PLE into {t['name']} as row {r}, but that tensor is not the "
                f"corrected stream row {r} (written by {src})"
            )


def _check_kv(graph: nx.DiGraph, cfg: Gemma3nConfig, layer: int, nodes: list[str]) -> None:
    src = kv_source_layer(cfg, layer)
    own = owns_kv(cfg, layer)
    writes = []
    for n in nodes:
        a = graph.nodes[n]
        key = (a["weight"] or {}).get("key", "")
        if not own and key.endswith(KV_PROJ_KEYS):
            raise GraphError(
                f"layer {layer} shares the KV cache of layer {src} but has a K/V projection "
                f"node {n}; layers >= {cfg.first_kv_shared_layer} must not project K/V"
            )
        if a["kernel"] == "kv_write":
            writes.append(n)
            if a["params"].get("cache_layer") != layer:
                raise GraphError(
                    f"{n} writes cache slot {a['params'].get('cache_layer')}, not {layer}"
                )
        if a["kernel"] == "kv_read" and a["params"].get("cache_layer") != src:
            raise GraphError(
                f"{n} reads cache slot {a['params'].get('cache_layer')}; layer {layer} "
                f"attends over layer {src}'s cache"
            )
        if a["kernel"] not in ("attn_scores", "attn_pv"):
            continue
        _check_kv_heads(graph, n, a)
        if a["params"].get("has_new", True):
            new_row = a["inputs"][1 + int(bool(a["params"].get("has_past")))]["name"]
            w = _writer_of(graph, n, new_row)
            wp = graph.nodes[w]["params"] if w else {}
            if wp.get("cache_layer") != src:
                raise GraphError(
                    f"{n} reads the new KV row {new_row} of cache slot {wp.get('cache_layer')}; "
                    f"layer {layer} attends over layer {src}'s cache"
                )
    for n in writes:
        if not isinstance(graph.nodes[n]["params"].get("kv_head"), int):
            raise GraphError(f"{n} writes a KV row but names no KV head (params.kv_head)")
    written = sorted((graph.nodes[n]["params"]["kind"], graph.nodes[n]["params"]["kv_head"])
                     for n in writes)  # fmt: skip
    every = [(kind, g) for kind in ("k", "v") for g in range(cfg.n_kv_heads)]
    if own and written != every:
        raise GraphError(
            f"layer {layer} owns a KV slot but writes {len(writes)} KV rows, not K and V of "
            f"each of its {cfg.n_kv_heads} KV heads"
        )
    if not own and writes:
        raise GraphError(f"layer {layer} shares layer {src}'s KV cache but writes {writes[0]}")


def _check_kv_heads(graph: nx.DiGraph, n: str, a: dict) -> None:
    """Every KV tile and new row an attention GEMV reads is its own KV head's (the cache is
    per head: a tile of another head would be another head's keys)."""
    g = a["params"].get("kv_head")
    for p in graph.predecessors(n):
        pa = graph.nodes[p]
        kv_row = pa["kernel"] in ("kv_read", "kv_write", "state_read")
        if kv_row and pa["params"].get("kv_head", g) != g:
            raise GraphError(
                f"{n} is an attention GEMV of KV head {g} but reads {p}, a row of KV head "
                f"{pa['params']['kv_head']}"
            )


def _check_sparse(graph: nx.DiGraph, cfg: Gemma3nConfig, layer: int, nodes: list[str]) -> None:
    gate = [n for n in nodes if graph.nodes[n]["kernel"] in SPARSE_KERNELS]
    sparse = is_sparse_layer(cfg, layer)
    if gate and not sparse:
        raise GraphError(
            f"sparse gating node {gate[0]} on dense layer {layer}; the Gaussian top-k runs "
            f"only on layers 0..{cfg.n_sparse_layers - 1} (spec 002 §1)"
        )
    if sparse and not any(graph.nodes[n]["kernel"] == "cutoff" for n in gate):
        raise GraphError(f"sparse layer {layer} has no Gaussian top-k cutoff node (spec 002 §1)")


def _check_theta(graph: nx.DiGraph, cfg: Gemma3nConfig, layer: int, nodes: list[str]) -> None:
    want = rope_theta(cfg, layer)
    sets = [
        n
        for n in nodes
        if graph.nodes[n]["kernel"] == "memset"
        and graph.nodes[n]["params"].get("what") == "rope_theta"
    ]
    if len(sets) != 1:
        raise GraphError(f"layer {layer} has {len(sets)} RoPE θ MEMSETs, expected 1")
    got = graph.nodes[sets[0]]["params"].get("value")
    if got != want:
        raise GraphError(
            f"{sets[0]} preloads θ = {got}, but layer {layer} uses θ = {want} "
            f"(the [L, L, L, L, G] cycle, spec 001 §2)"
        )
    for n in nodes:
        a = graph.nodes[n]
        if a["kernel"] != "rope_phase":
            continue
        if (
            a["params"].get("theta") != want
            or _writer_of(graph, n, a["inputs"][0]["name"]) != sets[0]
        ):
            raise GraphError(f"{n} does not use layer {layer}'s θ = {want} from {sets[0]}")

"""The decode step a design point asks for: stored sizes, sparse W_down, speculative verify.

`build_point_graph` builds the ordinary decode step (`pccx_flow.graph.build`) and then
changes, in place, what each node costs, before the profile's costs are annotated:

- ``weight_bits``: every INT4-stored GEMV tile (flag ``w_scale``) streams
  ``rows * cols * bits / 8`` bytes plus its float32 scale per row; float32-stored small
  matrices are left as they are.
- ``kv_bits``: every KV read and write moves ``bits / 16`` of its float16 bytes; the L2 the
  rows occupy shrinks alike (the cached tensors' last dimension is scaled, so the memory
  model sees the bytes; such a graph is for costing, not for running).
- ``sparse_down``: W_down tiles of the sparse layers stream
  ``dense - s * (dense - sparse_weight_bytes)`` bytes and do the same share fewer MACs, ``s``
  the share of the masked inputs (95 % of them, `blocks_ffn`) a streamer skips. 0 is today's
  dense stream; 1 is the optimistic figure the graph records in ``sparse_weight_bytes``.
- ``spec_k``: the step becomes a *verify step* of ``c = k + 1`` columns (the last accepted
  token and k drafts; Leviathan et al. 2023): every weight matrix is read once for all c
  columns — on the GEMM array (``verify_on = "gemm"``: op GEMM, lane gemm, its own ports)
  or as c-wide GEMVs on the GEMV lanes — so its MACs grow c times and its weight bytes do
  not; attention scores and P·V do c times the MACs over the same KV rows, plus the causal
  triangle among the new columns; every CVO, HOST and activation MEMCPY handles c times the
  elements or bytes (c embedding rows, c KV rows written, c rows of logits read back), and
  every activation tensor is c times larger in L2. KV rows of earlier positions are read once.
  Constants (MEMSET) are shared. Each HOST node still pays one per-step overhead.
"""

from __future__ import annotations

import json
import math
import threading
from collections import OrderedDict
from typing import Any

import networkx as nx

from pccx_flow.errors import InputError

KV_BASE_BITS = 16  # pccx semantics keep KV rows as float16 (`blocks_attention`)
WEIGHT_BASE_BITS = 4


# Shaped (uncosted) graphs a thread built last, by step: most points of a sweep change only
# the hardware, whose costs `annotate_costs` rewrites on every node, so the graph itself can
# be reused. Per thread, so two points never cost one graph at once.
_SHAPED = threading.local()
SHAPED_KEPT = 2  # an E4B graph is ~70 MB at 1,023 tokens, ~150 MB at 8,191


def build_point_graph(config: Any, step: dict, profile: Any, *, reuse: bool = False) -> nx.DiGraph:
    """The costed decode graph of one design point (module docstring).

    With `reuse`, the shaped graph of an earlier point of this thread with the same config,
    step and row alignment is costed again instead of being built (only the cost attributes
    change; nothing downstream of `problem_from_graph` writes to the graph). The caller
    must be done with the previous point's graph: it is the same object.
    """
    from pccx_flow.hardware.cost import annotate_costs

    row_align = _row_align(profile)
    if not reuse:
        graph = _shaped_graph(config, step, row_align)
    else:
        kept: OrderedDict = getattr(_SHAPED, "graphs", None) or OrderedDict()
        _SHAPED.graphs = kept
        key = (config, json.dumps(step, sort_keys=True), row_align)
        graph = kept.get(key)
        if graph is None:
            graph = kept[key] = _shaped_graph(config, step, row_align)
            while len(kept) > SHAPED_KEPT:
                kept.popitem(last=False)
        kept.move_to_end(key)
    annotate_costs(graph, profile)
    return graph


def _shaped_graph(config: Any, step: dict, row_align: int) -> nx.DiGraph:
    from pccx_flow.graph.build import build_decode_graph

    graph = build_decode_graph(config, semantics="pccx", position=step["position"],
                               tile_rows=step["tile_rows"], profile=None,
                               row_align=row_align)  # fmt: skip
    reshape(graph, step)
    return graph


def _row_align(profile: Any) -> int:
    program = getattr(profile, "program", None)
    return 8 if program is not None and program.target == "as-built" else 1


def reshape(graph: nx.DiGraph, step: dict) -> None:
    """Apply the step parameters of `step` to an uncosted decode graph, in place."""
    wbits, kvbits = int(step["weight_bits"]), int(step["kv_bits"])
    skip, k = float(step["sparse_down"]), int(step["spec_k"])
    cols = k + 1
    if cols > 1 and step["verify_on"] not in ("gemm", "gemv"):
        raise InputError(f"verify_on {step['verify_on']!r}: give gemm or gemv")
    head_dim = graph.graph["config_dict"]["head_dim"]
    for _, a in graph.nodes(data=True):
        op, kernel = a.get("op"), a.get("kernel")
        if op == "GEMV" and a.get("weight_bytes"):
            _weights(a, wbits, skip)
            if cols > 1:
                a["macs"] *= cols
                if step["verify_on"] == "gemm":
                    a["op"], a["lane_class"] = "GEMM", "gemm"
        elif kernel in ("kv_read", "kv_write"):
            a["act_bytes"] = _kv_scaled(a["act_bytes"], kvbits)
            for t in a["outputs"]:
                t["shape"] = [*t["shape"][:-1], _kv_scaled(t["shape"][-1], kvbits)]
            if kernel == "kv_write" and cols > 1:
                a["act_bytes"] *= cols
                _widen_outputs(a, cols)
        elif cols > 1:
            _widen(a, cols, head_dim)
    if cols > 1:
        for _, _, d in graph.edges(data=True):
            d["bytes"] = d.get("bytes", 0) * cols
        graph.graph["verify_columns"] = cols
    graph.graph["explore_step"] = dict(step)


def _kv_scaled(n: int, bits: int) -> int:
    return max(1, math.ceil(n * bits / KV_BASE_BITS))


def _weights(a: dict, bits: int, skip: float) -> None:
    """Stored bytes (and MACs) of one weight tile for `bits` and a sparse-skip share."""
    if not a.get("flags", {}).get("w_scale"):
        return  # float32-stored: not an INT4 matrix
    r0, r1 = a["weight"]["rows"]
    rows = r1 - r0
    cols = a["macs"] // rows
    dense = math.ceil(rows * cols * bits / 8) + 4 * rows
    density = a.get("params", {}).get("expected_density")
    if density is not None and skip > 0:
        kept = 1.0 - skip * (1.0 - density)
        sparse = math.ceil(rows * cols * density * bits / 8) + 4 * rows
        a["weight_bytes"] = math.ceil(dense - skip * (dense - sparse))
        a["macs"] = max(1, math.ceil(a["macs"] * kept))
    else:
        a["weight_bytes"] = dense


def _widen(a: dict, cols: int, head_dim: int) -> None:
    """A node handling `cols` columns instead of one (MEMSET constants are shared)."""
    op = a.get("op")
    if op == "MEMSET":
        return
    if a.get("macs"):
        a["macs"] *= cols
        params = a.get("params") or {}
        if a.get("kernel") in ("attn_scores", "attn_pv") and params.get("has_new"):
            a["macs"] += head_dim * cols * (cols - 1) // 2  # new keys among the columns
    if a.get("elements") and op in ("CVO", "HOST"):
        a["elements"] *= cols
    if op == "MEMCPY" and a.get("act_bytes"):
        a["act_bytes"] *= cols
    _widen_outputs(a, cols)


def _widen_outputs(a: dict, cols: int) -> None:
    for t in a.get("outputs", ()):
        t["shape"] = [cols, *t["shape"]]


def tokens_per_step(k: int, alpha: float) -> float:
    """Expected tokens a verify step of k drafts yields, each accepted with probability alpha
    independently until the first rejection: (1 - alpha^(k+1)) / (1 - alpha); 1 at k = 0."""
    if k == 0:
        return 1.0
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)

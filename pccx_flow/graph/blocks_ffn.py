"""FFN of one layer (spec §4.D, spec 002): gate/up tiles, the sparse gate, GELU·up, W_down.

Element-wise work follows the tiles so it overlaps weight streaming: hidden chunk j is
``gelu(gate_j) · up_j`` (CVO GELU, HOST mul) over a run of gate/up tiles of at most 2,048
outputs (one CVO instruction), and W_down is split along its input dimension into the same
chunks (``accm=1`` chain per row tile), so W_down starts streaming when the first hidden
chunk exists rather than after the whole FFN width.

Sparse layers (``is_sparse_layer``) insert the Gaussian top-k before the GELU, mapped as
spec 002 §4 maps it: mean = REDUCE_SUM per chunk (CVO) → Σ (HOST) → SCALE 1/N (CVO); std is
two-pass, (g - mean)² per chunk (HOST) → REDUCE_SUM (CVO) → Σ (HOST) → SCALE 1/N (CVO)
→ SQRT (CVO): the population standard deviation (ddof = 0) in both semantics, as spec 002 §4
maps the variance (``CVO_SCALE (1/16384)``) and as pccx's runtime computes it (``np.std``);
cutoff = mean + z·std (HOST scalar); sparse = max(g - cutoff, 0) per chunk (HOST).

Sparse W_down: ``weight_bytes`` is the dense stored size. The mask selects *inputs* of W_down,
which are scattered nibbles inside every stored [out, in/2] row, so DDR bursts cannot skip
them; the spec's streamer skips DSP cycles (spec 002 §5). Each sparse W_down node records
``expected_density`` (0.05) and ``sparse_weight_bytes`` (the bytes if a streamer could skip
the 95 % masked inputs) for cost models that want the optimistic figure.
"""

from __future__ import annotations

import math

from pccx_flow.graph.blocks_altup import lkey
from pccx_flow.graph.emit import Vec, vec_len
from pccx_flow.graph.ops import (
    Ctx,
    add_vec,
    cvo_groups,
    cvo_map,
    cvo_scalar,
    gemv_ksplit,
    gemv_tiles,
    host,
    reduce_sums,
    rmsnorm,
    total,
)
from pccx_flow.model.config import is_sparse_layer

BLK = "ffn"
SPARSE_DENSITY = 0.05


def _sparse_gate(ctx: Ctx, layer: int, groups: list[Vec]) -> list[dict]:
    """max(gate - (mean + z·std), 0) per group of gate tiles (one 2,048-element run each)."""
    c = ctx.config
    base = f"L{layer:02d}.{BLK}"
    n = c.ffn
    gate = [t for g in groups for t in g]
    s = total(
        ctx, f"{base}.mean.sum", layer, BLK, reduce_sums(ctx, f"{base}.mean.rsum", layer, BLK, gate)
    )
    mean = cvo_scalar(
        ctx, f"{base}.mean", layer, BLK, "cvo_scale_const", s, params={"scale": 1.0 / n}
    )
    sq = [
        host(ctx, f"{base}.var.sq.c{j:02d}", layer, BLK, "sub_square", [g, [mean]], vec_len(g))
        for j, g in enumerate(groups)
    ]
    s2 = total(
        ctx, f"{base}.var.sum", layer, BLK, reduce_sums(ctx, f"{base}.var.rsum", layer, BLK, sq)
    )
    # Population variance (ddof = 0): spec 002 §4 ends the variance in SCALE 1/N.
    var = cvo_scalar(
        ctx, f"{base}.var", layer, BLK, "cvo_scale_const", s2,
        params={"scale": 1.0 / n, "ddof": 0},
    )  # fmt: skip
    std = cvo_scalar(ctx, f"{base}.std", layer, BLK, "cvo_sqrt", var)
    cut = host(
        ctx, f"{base}.cutoff", layer, BLK, "cutoff", [[mean], [std]], 1,
        params={"z": c.sparse_z},
    )  # fmt: skip
    return [
        host(ctx, f"{base}.sparse.c{j:02d}", layer, BLK, "sub_relu", [g, [cut]], vec_len(g))
        for j, g in enumerate(groups)
    ]


def ffn(ctx: Ctx, layer: int, x_attn: Vec) -> dict:
    """outputs = RMSNorm(hidden · W_downᵀ, post_ffn_ln) + x_attn (spec §4.D).

    Gate/up tiles are taken in runs of up to 2,048 outputs (4 tiles of 512): one CVO GELU,
    one HOST multiply and one W_down input chunk per run.
    """
    c = ctx.config
    base = f"L{layer:02d}.{BLK}"
    xn = rmsnorm(
        ctx, f"{base}.pre_norm", layer, BLK, x_attn, lkey(layer, "pre_feedforward_layernorm.weight")
    )
    kw = {"n_out": c.ffn, "n_in": c.hidden, "storage": "int4"}
    gate = gemv_tiles(
        ctx, f"{base}.gate", layer, BLK, xn, key=lkey(layer, "mlp.gate_proj.weight"), **kw
    )
    up = gemv_tiles(ctx, f"{base}.up", layer, BLK, xn, key=lkey(layer, "mlp.up_proj.weight"), **kw)
    gate_groups = [g for g, _ in cvo_groups(gate)]
    up_groups, i = [], 0
    for g in gate_groups:
        up_groups.append(up[i : i + len(g)])
        i += len(g)
    sparse = is_sparse_layer(c, layer)
    if sparse:
        gate_groups = [[t] for t in _sparse_gate(ctx, layer, gate_groups)]
    hidden = []
    for j, (g, u) in enumerate(zip(gate_groups, up_groups, strict=True)):
        (a,) = cvo_map(ctx, f"{base}.gelu.c{j:02d}", layer, BLK, "cvo_gelu", g)
        hidden.append(add_vec(ctx, f"{base}.hidden.c{j:02d}", layer, BLK, "mul", [a], u))
    down = gemv_ksplit(
        ctx, f"{base}.down", layer, BLK, [[h] for h in hidden],
        key=lkey(layer, "mlp.down_proj.weight"), n_out=c.hidden, storage="int4",
    )  # fmt: skip
    if sparse:
        n_tiles = len(down)
        for node in (
            f"{base}.down.t{i:02d}.c{j:02d}" for i in range(n_tiles) for j in range(len(hidden))
        ):
            attrs = ctx.w.graph.nodes[node]
            r0, r1 = attrs["weight"]["rows"]
            c0, c1 = attrs["weight"]["cols"]
            attrs["params"]["expected_density"] = SPARSE_DENSITY
            attrs["params"]["sparse_weight_bytes"] = math.ceil(
                (r1 - r0) * (c1 - c0) * SPARSE_DENSITY / 2
            ) + 4 * (r1 - r0)
    mn = rmsnorm(
        ctx, f"{base}.post_norm", layer, BLK, down, lkey(layer, "post_feedforward_layernorm.weight")
    )
    return add_vec(ctx, f"{base}.residual", layer, BLK, "add", mn, x_attn)

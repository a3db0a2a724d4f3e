"""LAuReL branch and the attention residual merge (spec §4.C, spec 003 §1).

The pre-attention norm ``x_norm`` is a ``residual`` node: it is the fork that feeds both the
attention and the LAuReL branch, and the merge is the join. LAuReL nodes (block ``laurel``)
therefore have no path to or from the attention nodes of their layer, which
`pccx_flow.graph.check` verifies.
"""

from __future__ import annotations

import math

from pccx_flow.graph.blocks_altup import lkey
from pccx_flow.graph.emit import Vec
from pccx_flow.graph.ops import SERIAL_MIN_TILES, Ctx, add_vec, cvo_map, gemv_tiles, rmsnorm


def input_norm(ctx: Ctx, layer: int, x_input: dict) -> Vec:
    """x_norm = RMSNorm(xs_pred[0], input_ln) (spec §4.B)."""
    return rmsnorm(
        ctx, f"L{layer:02d}.residual.input_norm", layer, "residual", [x_input],
        lkey(layer, "input_layernorm.weight"),
    )  # fmt: skip


def laurel(ctx: Ctx, layer: int, x_norm: Vec) -> dict:
    """laurel_out = x_norm + RMSNorm((x_norm · W_leftᵀ) · W_rightᵀ, laurel_norm)."""
    c = ctx.config
    base = f"L{layer:02d}.laurel"
    left = gemv_tiles(
        ctx, f"{base}.left", layer, "laurel", x_norm,
        key=lkey(layer, "laurel.linear_left.weight"), n_out=c.laurel_rank, n_in=c.hidden,
        storage="int4", min_tiles=SERIAL_MIN_TILES,
    )  # fmt: skip
    right = gemv_tiles(
        ctx, f"{base}.right", layer, "laurel", left,
        key=lkey(layer, "laurel.linear_right.weight"), n_out=c.hidden, n_in=c.laurel_rank,
        storage="int4",
    )  # fmt: skip
    normed = rmsnorm(
        ctx, f"{base}.norm", layer, "laurel", right, lkey(layer, "laurel.post_laurel_norm.weight")
    )
    return add_vec(ctx, f"{base}.residual", layer, "laurel", "add", x_norm, normed)


def merge(ctx: Ctx, layer: int, attn: Vec, x_input: dict, laurel_out: dict) -> Vec:
    """x_attn = (RMSNorm(attn, post_attn_ln) + x_input + laurel_out) × 1/√2."""
    base = f"L{layer:02d}.residual"
    an = rmsnorm(
        ctx, f"{base}.post_attn_norm", layer, "residual", attn,
        lkey(layer, "post_attention_layernorm.weight"),
    )  # fmt: skip
    ao = add_vec(ctx, f"{base}.attn_add", layer, "residual", "add", an, [x_input])
    s = add_vec(ctx, f"{base}.merge", layer, "residual", "add", [ao], [laurel_out])
    return cvo_map(
        ctx, f"{base}.merge_scale", layer, "residual", "cvo_scale_const", [s],
        params={"scale": 1.0 / math.sqrt(2.0)},
    )  # fmt: skip

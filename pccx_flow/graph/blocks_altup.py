"""AltUp router and prediction (spec §4.A) and AltUp correction (spec §4.E steps 1-3).

The 4×4 mixing and the correction have no pccx instruction: each output row is one HOST
node (``altup_mix`` / ``altup_correct``, param ``row``), so row 0, the only row the
attention needs, does not wait for the shadow rows' arithmetic.
"""

from __future__ import annotations

from pccx_flow.graph.emit import Vec
from pccx_flow.graph.ops import (
    SERIAL_MIN_TILES,
    Ctx,
    add_vec,
    gemv,
    gemv_tiles,
    host,
    mul_weight,
    rmsnorm,
)


def lkey(layer: int, suffix: str) -> str:
    """Checkpoint key of a layer tensor, e.g. ``lkey(3, "altup.router_norm.weight")``."""
    return f"layers.{layer}.{suffix}"


def _modalities(ctx: Ctx, base: str, layer: int, block: str, x: Vec) -> dict:
    """tanh(RMSNorm(x, altup_rn) / D · altup_router): the router's S modality weights."""
    c = ctx.config
    xn = rmsnorm(
        ctx, f"{base}.router_norm", layer, block, x,
        lkey(layer, "altup.router_norm.weight"), scale=1.0 / c.hidden,
    )  # fmt: skip
    r = gemv_tiles(
        ctx, f"{base}.router", layer, block, xn,
        key=lkey(layer, "altup.modality_router.weight"), n_out=c.altup_streams, n_in=c.hidden,
        storage="float32", layout="in_out", min_tiles=SERIAL_MIN_TILES,
    )  # fmt: skip
    return host(ctx, f"{base}.tanh", layer, block, "tanh", [r], c.altup_streams)


def altup_predict(ctx: Ctx, layer: int, xs: list[Vec]) -> list[dict]:
    """xs_pred rows: pred[k] = xs[k] + Σ_j C[k, j] xs[j], C from the router (spec §4.A)."""
    c = ctx.config
    S = c.altup_streams
    base = f"L{layer:02d}.altup_pred"
    m = _modalities(ctx, base, layer, "altup_pred", xs[0])
    coef = gemv(
        ctx,
        f"{base}.coefs",
        layer,
        "altup_pred",
        [m],
        key=lkey(layer, "altup.prediction_coefs.weight"),
        rows=(0, S * S),
        n_in=S,
        storage="float32",
    )
    return [
        host(
            ctx,
            f"{base}.mix.r{k}",
            layer,
            "altup_pred",
            "altup_mix",
            [[coef]] + xs,
            c.hidden,
            params={"row": k, "n_streams": S},
        )
        for k in range(S)
    ]


def altup_correct(ctx: Ctx, layer: int, pred: list[dict], outputs: dict) -> tuple[list[dict], dict]:
    """Corrected rows and the PLE gate input (spec §4.E steps 1-3).

    pccx: ``activated = outputs × altup_scale`` feeds the router, the innovation and the PLE
    gate. gemma3n: the router and the innovation use ``outputs``; the corrected row 0 times
    ``altup_scale`` feeds the PLE gate (one extra HOST node).
    """
    c = ctx.config
    S = c.altup_streams
    blk = "altup_corr"
    base = f"L{layer:02d}.{blk}"
    scale_key = lkey(layer, "altup.correct_output_scale")
    if ctx.gemma3n:
        src = outputs
    else:
        (src,) = mul_weight(ctx, f"{base}.activated", layer, blk, [outputs], scale_key)
    innov = add_vec(ctx, f"{base}.innovation", layer, blk, "sub", [src], [pred[0]])
    m = _modalities(ctx, base, layer, blk, [src])
    cc = gemv(
        ctx,
        f"{base}.coefs",
        layer,
        blk,
        [m],
        key=lkey(layer, "altup.correction_coefs.weight"),
        rows=(0, S),
        n_in=S,
        storage="float32",
    )
    corr = host(ctx, f"{base}.plus_one", layer, blk, "add_const", [[cc]], S, params={"value": 1.0})
    rows = [
        host(
            ctx,
            f"{base}.correct.r{k}",
            layer,
            blk,
            "altup_correct",
            [[corr], [pred[k]], [innov]],
            c.hidden,
            params={"row": k},
        )
        for k in range(S)
    ]
    if ctx.gemma3n:
        (ple_in,) = mul_weight(ctx, f"{base}.out_scale", layer, blk, [rows[0]], scale_key)
    else:
        ple_in = src
    return rows, ple_in

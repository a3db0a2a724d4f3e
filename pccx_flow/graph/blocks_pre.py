"""The steps before the layer stack: embedding (§1), AltUp init (§2), PLE pre-compute (§3).

Also the state reads that replace them when a graph is cut to ``layers=(a, b)`` with a > 0.
"""

from __future__ import annotations

import math

from pccx_flow.graph.emit import Vec
from pccx_flow.graph.ops import (
    CVO_MAX,
    Ctx,
    cvo_map,
    gemv,
    host,
    magnitude,
    match_magnitude,
    rmsnorm,
    tile_ranges,
)

SCOPE = "pre"


def _fetch_row(ctx: Ctx, nid: str, block: str, key: str, rows: int, cols: int, id_rule: str):
    """MEMCPY of one embedding-table row chosen by the token id (dequantised on the host)."""
    (o,) = ctx.w.add(
        nid,
        kernel="embed_row",
        layer=-1,
        block=block,
        inputs=[],
        outputs=[(nid, (cols,))],
        params={
            "source": "state",
            "field": "token_id",
            "id_rule": id_rule,
            "id_limit": ctx.config.vocab_per_layer,
        },
        func="embed_fetch",
        weight={"key": key, "rows": [0, rows]},
        act_bytes=4 * cols,
    )
    return o


def embedding(ctx: Ctx) -> Vec:
    """x0 = W_embed[token] × √D (spec §1); pccx clips the id to the PLE vocabulary."""
    c = ctx.config
    rule = "none" if ctx.gemma3n else "clip"
    row = _fetch_row(
        ctx, "pre.embed.fetch", "embed", "embed_tokens.weight", c.vocab, c.hidden, rule
    )
    return cvo_map(
        ctx,
        "pre.embed.scale",
        -1,
        "embed",
        "cvo_scale_const",
        [row],
        params={"scale": math.sqrt(c.hidden)},
    )


def altup_init(ctx: Ctx, x0: Vec) -> list[Vec]:
    """xs[0] = x0, xs[k+1] = x0 · altup_projs[k] (spec §2); gemma3n rescales to |x0|."""
    c = ctx.config
    rows = [x0]
    target = magnitude(ctx, "pre.altup_init.x0_mag", -1, "altup_init", x0) if ctx.gemma3n else None
    for k in range(c.altup_streams - 1):
        p = [
            gemv(
                ctx,
                f"pre.altup_init.proj{k}.t{i:02d}",
                -1,
                "altup_init",
                x0,
                key=f"altup_projections.{k}.weight",
                rows=r,
                n_in=c.hidden,
                storage="float32",
                layout="in_out",
            )
            for i, r in enumerate(tile_ranges(c.hidden, ctx.tile_rows))
        ]
        if ctx.gemma3n:
            p = match_magnitude(
                ctx, f"pre.altup_init.rescale{k}", -1, "altup_init", p, target,
                floor_sq=1e-5, floor=0.0,
            )  # fmt: skip
        rows.append(p)
    return rows


def ple_precompute(ctx: Ctx, x0: Vec, layers: range) -> dict[int, dict]:
    """pli_all rows for `layers` (spec §3), one independent chain per layer segment.

    x_proj segment i = (x0 · W_ple_projᵀ)[i·P:(i+1)·P] / √D (one GEMV tile of P = ple_dim
    rows), normed with norm_ple; y = W_ple[token] × √P (one row fetch, SCALE in chunks that
    hold whole segments); pli_i = (x_proj_normed_i + y_i) × 1/√2.
    """
    c = ctx.config
    P = c.ple_dim
    blk = "ple_pre"
    rule = "zero_if_oob" if ctx.gemma3n else "clip"
    y_raw = _fetch_row(
        ctx, "pre.ple_pre.fetch", blk, "embed_tokens_per_layer.weight",
        c.vocab_per_layer, c.ple_total, rule,
    )  # fmt: skip
    seg_per_chunk = max(1, CVO_MAX // P)
    y_chunks = {}
    for j, (a, b) in enumerate(tile_ranges(c.ple_total, seg_per_chunk * P)):
        nid = f"pre.ple_pre.y_scale.c{j:02d}"
        (y_chunks[j],) = ctx.w.add(
            nid,
            kernel="cvo_scale_const",
            layer=-1,
            block=blk,
            inputs=[y_raw],
            outputs=[(nid, (b - a,))],
            params={"scale": math.sqrt(P), "span": [a, b]},
            elements=b - a,
        )
    pli = {}
    for i in layers:
        base = f"pre.ple_pre.L{i:02d}"
        xp = gemv(
            ctx,
            f"{base}.proj",
            -1,
            blk,
            x0,
            key="per_layer_model_projection.weight",
            rows=(i * P, (i + 1) * P),
            n_in=c.hidden,
            storage="int4",
        )
        xp = cvo_map(
            ctx, f"{base}.proj_scale", -1, blk, "cvo_scale_const", [xp],
            params={"scale": 1.0 / math.sqrt(c.hidden)},
        )  # fmt: skip
        xn = rmsnorm(ctx, f"{base}.norm", -1, blk, xp, "per_layer_projection_norm.weight")
        j, off = divmod(i * P, seg_per_chunk * P)
        s = host(
            ctx, f"{base}.combine", -1, blk, "add_slice", [xn, [y_chunks[j]]], P,
            params={"offset": off}, func="add",
        )  # fmt: skip
        (pli[i],) = cvo_map(
            ctx, f"{base}.pli", -1, blk, "cvo_scale_const", [s],
            params={"scale": 1.0 / math.sqrt(2.0)},
        )  # fmt: skip
    return pli


def state_read(ctx: Ctx, nid: str, layer: int, block: str, shape, dtype: str, fields: dict) -> dict:
    """MEMCPY of a value entering a cut graph from the decode state."""
    n = math.prod(shape)
    (o,) = ctx.w.add(
        nid,
        kernel="state_read",
        layer=layer,
        block=block,
        inputs=[],
        outputs=[(nid, tuple(shape), dtype)],
        params={"source": "state", **fields},
        func="state_read",
        act_bytes=n * (2 if dtype == "float16" else 4),
    )
    return o

"""Decode logits (spec §5): magnitude match, unprojections, mean, final norm, LM head, softcap.

The LM head (tied to W_embed) is tiled like every GEMV; each run of tiles (2,048 logits,
8 KiB) is read back to the host by its own MEMCPY as soon as it exists (so L2 never holds
the 1 MiB of E4B's logits at once), and the host soft-caps them all (``softcap``,
30·tanh(x/30), no pccx instruction) into the tensor ``logits``.
"""

from __future__ import annotations

from pccx_flow.graph.emit import Vec, vec_len
from pccx_flow.graph.ops import (
    Ctx,
    cvo_groups,
    gemv_tiles,
    host,
    magnitude,
    match_magnitude,
    rmsnorm,
)

BLK = "final"
LOGITS = "logits"


def final(ctx: Ctx, xs: list[Vec]) -> dict:
    """The soft-capped logits [vocab] float32."""
    c = ctx.config
    L = -1
    base = f"post.{BLK}"
    target = magnitude(ctx, f"{base}.target_mag", L, BLK, xs[0])
    streams = [xs[0]]
    for k in range(c.altup_streams - 1):
        p = gemv_tiles(
            ctx, f"{base}.unproj{k}", L, BLK, xs[k + 1],
            key=f"altup_unembed_projections.{k}.weight", n_out=c.hidden, n_in=c.hidden,
            storage="float32", layout="in_out",
        )  # fmt: skip
        if ctx.gemma3n:
            p = match_magnitude(
                ctx, f"{base}.match{k}", L, BLK, p, target, floor_sq=1e-5, floor=0.0
            )
        else:
            p = match_magnitude(
                ctx, f"{base}.match{k}", L, BLK, p, target, floor_sq=None, floor=1e-12
            )
        streams.append(p)
    x = host(ctx, f"{base}.mean", L, BLK, "mean_streams", streams, c.hidden)
    xn = rmsnorm(ctx, f"{base}.norm", L, BLK, [x], "norm.weight")
    tiles = gemv_tiles(
        ctx, f"{base}.lm_head", L, BLK, xn, key="embed_tokens.weight", n_out=c.vocab,
        n_in=c.hidden, storage="int4",
    )  # fmt: skip
    groups = [g for g, _ in cvo_groups(tiles)]
    width = max(2, len(str(len(groups) - 1)))
    backs = []
    for j, g in enumerate(groups):
        nid = f"{base}.readback.c{j:0{width}d}"
        n = vec_len(g)
        (r,) = ctx.w.add(
            nid,
            kernel="readback",
            layer=L,
            block=BLK,
            inputs=g,
            outputs=[(nid, (n,))],
            params={"operands": [len(g)]},
            func="logits_readback",
            act_bytes=4 * n,
        )
        backs.append(r)
    (out,) = ctx.w.add(
        f"{base}.softcap",
        kernel="softcap",
        layer=L,
        block=BLK,
        inputs=backs,
        outputs=[(LOGITS, (c.vocab,))],
        params={"operands": [len(backs)], "cap": c.final_softcap},
        func="softcap",
        elements=c.vocab,
    )
    return out

"""Attention of one layer (spec §4.B, spec 001): Q/K/V, QK-norm, RoPE, KV cache, GQA, W_o.

Work is split per head so the hardware's parallelism is visible: each Q head is its own GEMV
tile (``head_dim`` rows) and its own norm → RoPE → scores → softmax → ·V chain, and W_o is
split along its input dimension per KV group (``accm=1`` chain per row tile), so W_o streaming
starts when the first group's heads are done rather than after all of them.

KV (pure-functional): an own-KV layer's ``kv_write`` nodes output the new row in the cache
dtype; ``kv_read`` nodes bring the rows of earlier positions from the state and depend on
nothing in the step (their DMA can overlap anything). Both move one KV head's rows: the
cache is head-major in DDR (`pccx_flow.board.program.ddr`), and a tile of one head is
freed in L2 once that head's query group is done with it, while the other group's tiles
are still read (tiles of both heads waited for all eight queries). The scores and ·V GEMVs
read the past rows and the new row. A KV-sharing layer (``i >= first_kv_shared_layer``) has no K/V
projection and reads the write node of layer ``kv_source_layer(i)``. The bytes of a step's KV
traffic are the past rows per reading layer plus one new row per write, i.e. the spec's
``L × kv_dim × 2`` per own layer (the new row of a shared layer stays on chip).

Softmax per head (spec 001 §1): GEMV with ``findemax`` → CVO EXP (``sub_emax``) → CVO
REDUCE_SUM → CVO SCALE (``recip_scale``); no 1/√d and no softcap. With more than one key
tile (512 keys each) a head is split along the keys (flash decoding): per tile EXP against
the tile's own maximum, REDUCE_SUM and an unnormalised ·V GEMV, and one HOST
``attn_combine`` rescales the tiles by exp(m_t - max m) and divides by the rescaled sum.
The result is the same softmax; what changes is memory: a tile's scores die at its EXP, so
the SFU's 256 KiB window (as built) never holds a head's whole context (8 heads × 8,192
keys × 4 B is the whole window).
"""

from __future__ import annotations

from pccx_flow.graph.blocks_altup import lkey
from pccx_flow.graph.blocks_pre import state_read
from pccx_flow.graph.emit import Vec
from pccx_flow.graph.ops import (
    Ctx,
    cvo_map,
    gemv,
    gemv_ksplit,
    host,
    rmsnorm,
    tile_ranges,
)
from pccx_flow.model.config import is_global_layer, kv_source_layer, owns_kv, rope_theta

BLK = "attn"

# per cache layer, its new K rows and new V rows this step: one tensor per KV head each
KvNew = dict[int, tuple[list[dict], list[dict]]]


def key_window(ctx: Ctx, layer: int) -> tuple[int, int]:
    """First and one-past-last key position this layer attends to at ``ctx.position``.

    All positions 0..p, except on gemma3n local layers: the sliding window p-w+1..p.
    """
    p = ctx.position
    start = 0
    if ctx.gemma3n and not is_global_layer(ctx.config, layer):
        start = max(0, p - ctx.config.sliding_window + 1)
    return start, p + 1


def theta_memset(ctx: Ctx, layer: int) -> dict:
    """The layer's RoPE θ preloaded into the constant cache (spec 001 §2.3)."""
    nid = f"L{layer:02d}.const.theta"
    theta = rope_theta(ctx.config, layer)
    (o,) = ctx.w.add(
        nid,
        kernel="memset",
        layer=layer,
        block="const",
        inputs=[],
        outputs=[(nid, (1,))],
        params={"value": theta, "what": "rope_theta", "slot": 0},
        func="rope_theta",
        elements=2,
        act_bytes=0,
    )
    return o


def _rope_tables(ctx: Ctx, layer: int, theta: dict) -> tuple[dict, dict]:
    """sin/cos of the range-reduced phases p·θ^(-2j/d), shared by every head of the layer."""
    c = ctx.config
    base = f"L{layer:02d}.{BLK}.rope"
    phase = host(
        ctx,
        f"{base}.phase",
        layer,
        BLK,
        "rope_phase",
        [[theta]],
        c.head_dim // 2,
        params={
            "position": ctx.position,
            "head_dim": c.head_dim,
            "theta": rope_theta(c, layer),
        },
    )
    (sin,) = cvo_map(ctx, f"{base}.sin", layer, BLK, "cvo_sin", [phase])
    (cos,) = cvo_map(ctx, f"{base}.cos", layer, BLK, "cvo_cos", [phase])
    return sin, cos


def _head_proj(ctx: Ctx, nid: str, layer: int, x: Vec, key: str, head: int) -> dict:
    d = ctx.config.head_dim
    return gemv(
        ctx,
        nid,
        layer,
        BLK,
        x,
        key=key,
        rows=(head * d, (head + 1) * d),
        n_in=ctx.config.hidden,
        storage="int4",
    )


def _rope(ctx: Ctx, nid: str, layer: int, x: Vec, sin: dict, cos: dict) -> dict:
    pairing = "split_half" if ctx.gemma3n else "interleaved"
    return host(
        ctx,
        nid,
        layer,
        BLK,
        "rope_combine",
        [x, [sin], [cos]],
        ctx.config.head_dim,
        params={"pairing": pairing},
    )


def _kv_write(ctx: Ctx, layer: int, kind: str, g: int, head: dict) -> dict:
    """This position's K or V row of KV head `g`, in the cache dtype, to the DDR cache.

    One write per head: the cache is head-major (a head's rows contiguous,
    `pccx_flow.board.program.ddr`), so a head's part of the row is one transfer."""
    c = ctx.config
    nid = f"L{layer:02d}.{BLK}.{kind}_write.g{g}"
    dtype = "float32" if ctx.gemma3n else "float16"
    (o,) = ctx.w.add(
        nid,
        kernel="kv_write",
        layer=layer,
        block=BLK,
        inputs=[head],
        outputs=[(nid, (c.head_dim,), dtype)],
        params={
            "cache_layer": layer,
            "kind": kind,
            "kv_head": g,
            "position": ctx.position,
            "cache_dtype": dtype,
            "operands": [1],
        },
        func="kv_write",
        act_bytes=c.head_dim * (4 if ctx.gemma3n else 2),
    )
    return o


def _kv_read(
    ctx: Ctx, layer: int, kind: str, src: int, g: int, first: int, stop: int, tile: int | None
) -> dict:
    """MEMCPY of KV head `g`'s cache rows first..stop-1 into L2 (one key tile of them, when
    `tile` is set)."""
    c = ctx.config
    nid = f"L{layer:02d}.{BLK}.{kind}_read.g{g}" + ("" if tile is None else f".t{tile:02d}")
    dtype = "float32" if ctx.gemma3n else "float16"
    n = stop - first
    (o,) = ctx.w.add(
        nid,
        kernel="kv_read",
        layer=layer,
        block=BLK,
        inputs=[],
        outputs=[(nid, (n, c.head_dim), dtype)],
        params={
            "source": "state",
            "field": f"{kind}_cache",
            "cache_layer": src,
            "kind": kind,
            "kv_head": g,
            "start": first,
            "positions": [first, stop],
        },
        func="kv_read",
        act_bytes=n * c.head_dim * (4 if ctx.gemma3n else 2),
    )
    return o


def kv_tiles(ctx: Ctx, layer: int, kind: str, src: int, g: int, new: dict) -> list[list[dict]]:
    """The rows each key tile of KV head `g` reads: a `_kv_read` of its past rows and/or
    this step's row of that head.

    Keys are tiled by ``ctx.tile_rows`` (as the scores are), and each tile's past rows come
    in through their own MEMCPY, so no KV transfer is larger than one tile: at 8k context a
    layer's K is sixteen 512-row reads per head instead of one 8 MiB read, which L2
    (1.75 MiB) could never hold. A tile holds one head's rows only (module docstring). With
    one tile the read keeps its name without a tile number.
    """
    start, end = key_window(ctx, layer)
    n_past = ctx.position - start
    ranges = tile_ranges(end - start, ctx.tile_rows)
    out = []
    for t, (a, b) in enumerate(ranges):
        rows = []
        if min(b, n_past) > a:
            tile = None if len(ranges) == 1 else t
            rows.append(_kv_read(ctx, layer, kind, src, g, start + a, start + min(b, n_past), tile))
        if b == end - start:
            rows.append(new)
        out.append(rows)
    return out


def kv_projection(
    ctx: Ctx, layer: int, x_norm: Vec, sin: dict, cos: dict
) -> tuple[list[dict], list[dict]]:
    """K (norm, RoPE) and V (gemma3n: weightless norm) per KV head, each head's row written
    to the cache on its own (`_kv_write`): the K rows and the V rows, one per head."""
    c = ctx.config
    L = f"L{layer:02d}.{BLK}"
    ks, vs = [], []
    for g in range(c.n_kv_heads):
        k = _head_proj(
            ctx, f"{L}.k_proj.h{g}", layer, x_norm, lkey(layer, "self_attn.k_proj.weight"), g
        )
        kn = rmsnorm(
            ctx, f"{L}.k_norm.h{g}", layer, BLK, [k], lkey(layer, "self_attn.k_norm.weight")
        )
        kr = _rope(ctx, f"{L}.k_rope.h{g}", layer, kn, sin, cos)
        ks.append(_kv_write(ctx, layer, "k", g, kr))
        v = _head_proj(
            ctx, f"{L}.v_proj.h{g}", layer, x_norm, lkey(layer, "self_attn.v_proj.weight"), g
        )
        if ctx.gemma3n:
            (v,) = rmsnorm(ctx, f"{L}.v_norm.h{g}", layer, BLK, [v], None)
        vs.append(_kv_write(ctx, layer, "v", g, v))
    return ks, vs


def _exp_sum(ctx: Ctx, base: str, layer: int, t: int, s: dict, m: dict) -> tuple[dict, dict]:
    """CVO EXP (``sub_emax``: exp(s - m)) and CVO REDUCE_SUM of one key tile's scores."""
    n = s["shape"][0]
    (e,) = ctx.w.add(
        f"{base}.exp.t{t:02d}", kernel="cvo_exp", layer=layer, block=BLK, inputs=[s, m],
        outputs=[(f"{base}.exp.t{t:02d}", (n,))], flags={"sub_emax": 1}, elements=n,
    )  # fmt: skip
    (r,) = ctx.w.add(
        f"{base}.rsum.t{t:02d}", kernel="cvo_reduce_sum", layer=layer, block=BLK, inputs=[e],
        outputs=[(f"{base}.rsum.t{t:02d}", (1,))], elements=n,
    )  # fmt: skip
    return e, r


def _softmax(ctx: Ctx, base: str, layer: int, s: dict, m: dict) -> dict:
    """exp(s - max) / Σ over one key tile: EXP, REDUCE_SUM, SCALE (``recip_scale``)."""
    e, tot = _exp_sum(ctx, base, layer, 0, s, m)
    nid = f"{base}.norm.t00"
    (p,) = ctx.w.add(
        nid, kernel="cvo_scale_recip", layer=layer, block=BLK, inputs=[e, tot],
        outputs=[(nid, (e["shape"][0],))], flags={"recip_scale": 1}, elements=e["shape"][0],
    )  # fmt: skip
    return p


def _tile_params(rows: list[dict], new: dict, a: int) -> dict:
    """What a tile's KV inputs hold: past rows, the new row, and the key index of row 0."""
    return {"has_past": rows[0] is not new, "has_new": rows[-1] is new, "row_offset": a}


def _head(
    ctx: Ctx,
    layer: int,
    h: int,
    x_norm: Vec,
    sin,
    cos,
    k_tiles: list[list[dict]],
    v_tiles: list[list[dict]],
) -> dict:
    """One query head: projection, QK-norm, RoPE, scores per key tile, softmax, ·V per tile.

    With several key tiles the softmax is split along the keys (module docstring), so each
    tile of K and V is needed only while its own GEMVs run."""
    c = ctx.config
    L = f"L{layer:02d}.{BLK}"
    g = h // c.q_per_kv
    q = _head_proj(
        ctx, f"{L}.q_proj.h{h}", layer, x_norm, lkey(layer, "self_attn.q_proj.weight"), h
    )
    qn = rmsnorm(ctx, f"{L}.q_norm.h{h}", layer, BLK, [q], lkey(layer, "self_attn.q_norm.weight"))
    qr = _rope(ctx, f"{L}.q_rope.h{h}", layer, qn, sin, cos)
    start, end = key_window(ctx, layer)
    n_keys = end - start
    ranges = tile_ranges(n_keys, ctx.tile_rows)
    k_new, v_new = k_tiles[-1][-1], v_tiles[-1][-1]
    tiles = []
    for t, (a, b) in enumerate(ranges):
        nid = f"{L}.scores.h{h}.t{t:02d}"
        s, e = ctx.w.add(
            nid,
            kernel="attn_scores",
            layer=layer,
            block=BLK,
            inputs=[qr] + k_tiles[t],
            outputs=[(nid, (b - a,)), (f"{nid}.emax", (1,))],
            params={
                "head": h,
                "kv_head": g,
                "head_dim": c.head_dim,
                "keys": [a, b],
                **_tile_params(k_tiles[t], k_new, a),
            },
            flags={"findemax": 1},
            macs=(b - a) * c.head_dim,
        )
        tiles.append((s, e))
    base = f"{L}.softmax.h{h}"
    if len(ranges) == 1:
        return _pv(ctx, layer, h, f"{L}.pv.h{h}", _softmax(ctx, base, layer, *tiles[0]),
                   v_tiles[0], v_new, ranges[0])  # fmt: skip
    # Split-K (flash decoding): each tile is exponentiated against its own maximum (the
    # findemax of its scores GEMV, as the hardware's sub_emax expects) and multiplied by V
    # unnormalised; the host rescales and sums the per-tile results. A tile's scores are
    # dead after its EXP, so no head keeps its whole context's scores in the SFU's window.
    maxima, sums, parts = [], [], []
    for t, ((s, m), (a, b)) in enumerate(zip(tiles, ranges, strict=True)):
        e, r = _exp_sum(ctx, base, layer, t, s, m)
        maxima.append(m)
        sums.append(r)
        parts.append(_pv(ctx, layer, h, f"{L}.pv.h{h}.t{t:02d}", e, v_tiles[t], v_new, (a, b)))
    return host(
        ctx, f"{L}.combine.h{h}", layer, BLK, "attn_combine", [maxima, sums, parts], c.head_dim
    )


def _pv(
    ctx: Ctx, layer: int, h: int, nid: str, p: dict, rows: list[dict], v_new: dict, keys
) -> dict:
    """(Unnormalised) probabilities · V of one head over one key tile (GEMV)."""
    c = ctx.config
    a, b = keys
    (out,) = ctx.w.add(
        nid,
        kernel="attn_pv",
        layer=layer,
        block=BLK,
        inputs=[p] + rows,
        outputs=[(nid, (c.head_dim,))],
        params={
            "head": h,
            "kv_head": h // c.q_per_kv,
            "head_dim": c.head_dim,
            "keys": [a, b],
            **_tile_params(rows, v_new, a),
            "operands": [1] * (1 + len(rows)),
        },
        macs=(b - a) * c.head_dim,
    )
    return out


def attention(ctx: Ctx, layer: int, x_norm: Vec, theta: dict, kv_new: KvNew) -> Vec:
    """attn_output = GQA(Q_rope, K, V) · W_oᵀ as W_o row tiles (spec §4.B).

    `kv_new` maps a cache layer to its (k_new, v_new) rows, one tensor per KV head; an own-KV
    layer adds itself.
    On a cut graph a missing source layer's rows come from the state (``state_read``).
    """
    c = ctx.config
    L = f"L{layer:02d}.{BLK}"
    sin, cos = _rope_tables(ctx, layer, theta)
    src = kv_source_layer(c, layer)
    if owns_kv(c, layer):
        kv_new[layer] = kv_projection(ctx, layer, x_norm, sin, cos)
    elif src not in kv_new:
        dtype = "float32" if ctx.gemma3n else "float16"
        kv_new[src] = tuple(
            [
                state_read(
                    ctx, f"{L}.{kind}_new_in.g{g}", layer, BLK, (c.head_dim,), dtype,
                    {"field": "kv_new", "cache_layer": src, "kind": kind, "kv_head": g},
                )
                for g in range(c.n_kv_heads)
            ]
            for kind in ("k", "v")
        )  # fmt: skip
    k_new, v_new = kv_new[src]
    k_tiles = [kv_tiles(ctx, layer, "k", src, g, k_new[g]) for g in range(c.n_kv_heads)]
    v_tiles = [kv_tiles(ctx, layer, "v", src, g, v_new[g]) for g in range(c.n_kv_heads)]
    heads = [
        _head(ctx, layer, h, x_norm, sin, cos, k_tiles[h // c.q_per_kv], v_tiles[h // c.q_per_kv])
        for h in range(c.n_q_heads)
    ]
    return gemv_ksplit(
        ctx,
        f"{L}.o_proj",
        layer,
        BLK,
        [heads[g * c.q_per_kv : (g + 1) * c.q_per_kv] for g in range(c.n_kv_heads)],
        key=lkey(layer, "self_attn.o_proj.weight"),
        n_out=c.hidden,
        storage="int4",
    )

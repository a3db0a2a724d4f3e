"""Composite steps used by every block: tiled GEMVs, CVO chunking, RMSNorm, mean squares.

Each helper expands one piece of the specification's math into instruction-level nodes and
returns the produced vector as parts (`Vec`). The mappings, chosen once here so every block
does them the same way:

- *GEMV tiles*: a matrix with more than ``tile_rows`` outputs is split into row tiles of at
  most ``tile_rows`` rows (512 = one instruction's output limit per GEMV lane), one node each,
  so the tiles of one matrix can stream on different lanes. The few small matrices on the
  serial path between layers get at least one tile per weight port (`SERIAL_MIN_TILES`).
- *CVO chunks*: a CVO instruction takes at most 2,048 elements (`CVO_MAX`); a longer part is
  processed as several nodes over consecutive ``span``s.
- *RMSNorm* (spec §0) as the hardware does it: ``square`` (HOST) → REDUCE_SUM (CVO) →
  ``mean_eps`` (HOST scalar: Σ partials · 1/N + eps) → SQRT (CVO) → RECIP (CVO) → SCALE (CVO,
  x · 1/rms) → ``mul_weight`` (HOST, × γ); the vector steps run once per run of parts of at
  most 2,048 elements (`cvo_groups`), the ×γ once per resulting part. pccx-v002.md §4 puts
  the square on the host; the 1/N and +eps are one scalar host step so no extra MEMSET slot is
  needed for eps.
- *Mean of squares* (spec 002 §4 and §5 magnitudes): square (HOST) → REDUCE_SUM (CVO) →
  Σ partials (HOST, only when there are several) → SCALE by 1/N (CVO).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from pccx_flow.graph.emit import GraphWriter, Vec
from pccx_flow.model.config import Gemma3nConfig

CVO_MAX = 2048  # elements per CVO instruction (pccx-v002.md §1)
# Small matrices on the serial path between layers (AltUp router, LAuReL left, PLE gate) are
# split into this many row tiles: one per GEMV weight port (HP2, HP3; pccx-v002.md §1).
SERIAL_MIN_TILES = 2


@dataclass
class Ctx:
    """What every block builder needs: the writer and the step's fixed choices."""

    w: GraphWriter
    config: Gemma3nConfig
    semantics: str
    position: int
    tile_rows: int
    # Row tiles split for `min_tiles` are whole multiples of this many rows, so each tile's
    # output fills whole L2 words on the target (8 BF16 values a word as built).
    row_align: int = 1

    @property
    def gemma3n(self) -> bool:
        return self.semantics == "gemma3n"


def n_elems(t: dict) -> int:
    return math.prod(t["shape"])


def part_offsets(vec: Vec) -> list[int]:
    """Start offset of each part within the whole vector."""
    out, off = [], 0
    for t in vec:
        out.append(off)
        off += n_elems(t)
    return out


def tile_ranges(n: int, size: int) -> list[tuple[int, int]]:
    """Half-open ranges [a, b) of at most `size` covering 0..n."""
    return [(a, min(a + size, n)) for a in range(0, n, size)]


def weight_tile_bytes(storage: str, rows: int, cols: int) -> int:
    """Bytes a GEMV tile streams as stored: INT4 nibbles + one float32 scale per row, or f32."""
    if storage == "int4":
        return rows * cols // 2 + 4 * rows
    return 4 * rows * cols


# Float32 values one 16-byte L2 word holds (the spec target). A matrix split into row tiles
# has its tiles rounded up to whole words where that keeps their number: a program reads
# the tiles' outputs as one operand of contiguous parts, and a part must end on a word.
# Split evenly, 2048 rows in tiles of at most 384 came in 342 rows (`emit --tile-rows 384`
# stopped on the spec target: LAuReL's up-projection "does not fill whole L2 words"); the
# default 512 splits no matrix the rounding changes, so those graphs are as they were.
WORD_ROWS = 4


# --- GEMV ---------------------------------------------------------------------------------


def gemv(
    ctx: Ctx,
    nid: str,
    layer: int,
    block: str,
    x: Vec,
    *,
    key: str,
    rows: tuple[int, int],
    cols: tuple[int, int] | None = None,
    n_in: int,
    storage: str,
    layout: str = "out_in",
    acc: dict | None = None,
    params: dict | None = None,
) -> dict:
    """One GEMV node computing outputs rows[0]:rows[1] of ``W x`` (optionally one input chunk)."""
    r0, r1 = rows
    c0, c1 = cols if cols is not None else (0, n_in)
    weight = {"key": key, "rows": [r0, r1]}
    if cols is not None:
        weight["cols"] = [c0, c1]
    flags = {"w_scale": 1} if storage == "int4" else {}
    inputs = list(x)
    counts = [len(x)]
    if acc is not None:
        flags["accm"] = 1
        inputs.append(acc)
        counts.append(1)
    p = {"layout": layout, "operands": counts}
    p.update(params or {})
    (out,) = ctx.w.add(
        nid,
        kernel="gemv",
        layer=layer,
        block=block,
        inputs=inputs,
        outputs=[(nid, (r1 - r0,))],
        params=p,
        flags=flags,
        weight=weight,
        macs=(r1 - r0) * (c1 - c0),
        weight_bytes=weight_tile_bytes(storage, r1 - r0, c1 - c0),
    )
    return out


def gemv_tiles(
    ctx: Ctx,
    nid: str,
    layer: int,
    block: str,
    x: Vec,
    *,
    key: str,
    n_out: int,
    n_in: int,
    storage: str,
    layout: str = "out_in",
    tile: int | None = None,
    min_tiles: int = 1,
    params: dict | None = None,
) -> Vec:
    """``W x`` as row tiles ``nid.tNN`` of at most `tile` (default ``tile_rows``) outputs.

    ``min_tiles`` splits a small matrix that sits on the step's serial path into that many
    tiles (when it has the rows), so its weights stream through both weight ports at once
    instead of one port idling while the other streams the whole matrix.
    """
    size = tile or ctx.tile_rows
    n_tiles = max(math.ceil(n_out / size), min(min_tiles, n_out))
    step = math.ceil(n_out / n_tiles)
    step = min(size, math.ceil(step / ctx.row_align) * ctx.row_align)
    whole = min(size, math.ceil(step / WORD_ROWS) * WORD_ROWS)
    if math.ceil(n_out / whole) == n_tiles:
        step = whole
    ranges = tile_ranges(n_out, step)
    width = max(2, len(str(len(ranges) - 1)))
    return [
        gemv(
            ctx,
            f"{nid}.t{i:0{width}d}",
            layer,
            block,
            x,
            key=key,
            rows=r,
            n_in=n_in,
            storage=storage,
            layout=layout,
            params=params,
        )
        for i, r in enumerate(ranges)
    ]


def gemv_ksplit(
    ctx: Ctx,
    nid: str,
    layer: int,
    block: str,
    chunks: list[Vec],
    *,
    key: str,
    n_out: int,
    storage: str,
    params: dict | None = None,
) -> Vec:
    """``W x`` with x given as input chunks: per row tile, a chain of accm=1 GEMVs.

    Node ``nid.tNN.cMM`` multiplies input chunk MM and accumulates onto ``nid.tNN.c(MM-1)``,
    so the weights of chunk 0 stream as soon as the first chunk of x exists.
    """
    starts = [0]
    for ch in chunks:
        starts.append(starts[-1] + sum(n_elems(t) for t in ch))
    n_in = starts[-1]
    out: Vec = []
    for i, r in enumerate(tile_ranges(n_out, ctx.tile_rows)):
        acc = None
        for j, ch in enumerate(chunks):
            acc = gemv(
                ctx,
                f"{nid}.t{i:02d}.c{j:02d}",
                layer,
                block,
                ch,
                key=key,
                rows=r,
                cols=(starts[j], starts[j + 1]),
                n_in=n_in,
                storage=storage,
                acc=acc,
                params=params,
            )
        out.append(acc)
    return out


# --- element-wise work ----------------------------------------------------------------------


def cvo_groups(x: Vec, limit: int = CVO_MAX) -> list[tuple[Vec, tuple[int, int] | None]]:
    """Split a vector into CVO-sized pieces: runs of whole consecutive parts holding at most
    `limit` elements, or spans ``(a, b)`` of one part longer than `limit`.

    >>> x = [{"shape": [512]}] * 5 + [{"shape": [5000]}]
    >>> [(len(g), s) for g, s in cvo_groups(x)]
    [(4, None), (1, None), (1, (0, 2048)), (1, (2048, 4096)), (1, (4096, 5000))]
    """
    out: list[tuple[Vec, tuple[int, int] | None]] = []
    run: Vec = []
    size = 0
    for t in x:
        n = n_elems(t)
        if n > limit:
            if run:
                out.append((run, None))
                run, size = [], 0
            out.extend(([t], span) for span in tile_ranges(n, limit))
            continue
        if size + n > limit and run:
            out.append((run, None))
            run, size = [], 0
        run.append(t)
        size += n
    if run:
        out.append((run, None))
    return out


def _piece_id(nid: str, j: int, n: int) -> str:
    """``nid`` for a one-piece vector, else ``nid.pJ``."""
    return nid if n == 1 else f"{nid}.p{j}"


def _piece_len(group: Vec, span: tuple[int, int] | None) -> int:
    return span[1] - span[0] if span else sum(n_elems(t) for t in group)


def cvo_map(
    ctx: Ctx,
    nid: str,
    layer: int,
    block: str,
    kernel: str,
    x: Vec,
    *,
    scalar: dict | None = None,
    params: dict | None = None,
    flags: dict | None = None,
) -> Vec:
    """An element-wise CVO kernel over x, one node per `cvo_groups` piece (<= 2,048 elements).

    `scalar` (a [1] tensor) is appended as the last input of every node (SCALE by a computed
    value). Nodes are ``nid`` or ``nid.pJ``; the output parts are the pieces.
    """
    out: Vec = []
    groups = cvo_groups(x)
    for j, (group, span) in enumerate(groups):
        sub = _piece_id(nid, j, len(groups))
        n = _piece_len(group, span)
        p = dict(params or {})
        if span:
            p["span"] = list(span)
        if len(group) > 1:
            p["operands"] = [len(group)] + ([1] if scalar is not None else [])
        inputs = group + ([scalar] if scalar is not None else [])
        (o,) = ctx.w.add(
            sub,
            kernel=kernel,
            layer=layer,
            block=block,
            inputs=inputs,
            outputs=[(sub, (n,))],
            params=p,
            flags=flags,
            elements=n,
        )
        out.append(o)
    return out


def reduce_sums(ctx: Ctx, nid: str, layer: int, block: str, x: Vec) -> Vec:
    """CVO REDUCE_SUM per `cvo_groups` piece: partial sums, each [1]."""
    out: Vec = []
    groups = cvo_groups(x)
    for j, (group, span) in enumerate(groups):
        sub = _piece_id(nid, j, len(groups))
        p: dict = {"span": list(span)} if span else {}
        if len(group) > 1:
            p["operands"] = [len(group)]
        (o,) = ctx.w.add(
            sub,
            kernel="cvo_reduce_sum",
            layer=layer,
            block=block,
            inputs=group,
            outputs=[(sub, (1,))],
            params=p,
            elements=_piece_len(group, span),
        )
        out.append(o)
    return out


def host_map(
    ctx: Ctx,
    nid: str,
    layer: int,
    block: str,
    kernel: str,
    x: Vec,
    *,
    other: dict | None = None,
    params: dict | None = None,
) -> Vec:
    """A HOST element-wise kernel over x, one node per run of parts of <= 2,048 elements
    (so the next CVO step gets whole instructions); `other` is a trailing [1] operand."""
    groups = [g for g, span in cvo_groups(x) if span is None] if x else []
    if sum(len(g) for g in groups) != len(x):  # a part longer than 2,048: keep it whole
        groups = [[t] for t in x]
    return [
        host(
            ctx,
            _piece_id(nid, j, len(groups)),
            layer,
            block,
            kernel,
            [g] + ([[other]] if other is not None else []),
            sum(n_elems(t) for t in g),
            params=params,
        )
        for j, g in enumerate(groups)
    ]


def host(
    ctx: Ctx,
    nid: str,
    layer: int,
    block: str,
    kernel: str,
    operands: list[Vec],
    n_out: int,
    *,
    params: dict | None = None,
    func: str | None = None,
    weight: dict | None = None,
) -> dict:
    """One HOST node whose operands are given as vectors (params.operands records the split)."""
    inputs = [t for v in operands for t in v]
    p = {"operands": [len(v) for v in operands]} if any(len(v) != 1 for v in operands) else {}
    p.update(params or {})
    (o,) = ctx.w.add(
        nid,
        kernel=kernel,
        layer=layer,
        block=block,
        inputs=inputs,
        outputs=[(nid, (n_out,))],
        params=p,
        func=func or kernel,
        weight=weight,
        elements=max([n_out] + [sum(n_elems(t) for t in v) for v in operands]),
    )
    return o


def mul_weight(
    ctx: Ctx, nid: str, layer: int, block: str, x: Vec, key: str, scale: float = 1.0
) -> Vec:
    """x × a float32 vector weight, per part (``rows`` follow each part's offset)."""
    out = []
    for j, (t, off) in enumerate(zip(x, part_offsets(x), strict=True)):
        n = n_elems(t)
        out.append(
            host(
                ctx,
                _piece_id(nid, j, len(x)),
                layer,
                block,
                "mul_weight",
                [[t]],
                n,
                params={"scale": scale},
                weight={"key": key, "rows": [off, off + n]},
            )
        )
    return out


def add_vec(ctx: Ctx, nid: str, layer: int, block: str, kernel: str, a: Vec, b: Vec) -> dict:
    """One HOST node ``a (op) b`` over whole vectors given as parts (add, sub, mul)."""
    return host(ctx, nid, layer, block, kernel, [a, b], sum(n_elems(t) for t in a))


def cvo_scalar(ctx: Ctx, nid: str, layer: int, block: str, kernel: str, x: dict, **kw) -> dict:
    """A CVO kernel on a single [1] value (SQRT, RECIP, SCALE by a constant)."""
    (o,) = ctx.w.add(
        nid, kernel=kernel, layer=layer, block=block, inputs=[x], outputs=[(nid, (1,))], **kw
    )
    return o


def total(ctx: Ctx, nid: str, layer: int, block: str, partials: Vec) -> dict:
    """Σ of partial sums on the host, or the single partial itself (no node needed)."""
    if len(partials) == 1:
        return partials[0]
    return host(ctx, nid, layer, block, "sum", [partials], 1)


# --- norms and statistics ---------------------------------------------------------------------


def rmsnorm(
    ctx: Ctx,
    nid: str,
    layer: int,
    block: str,
    x: Vec,
    gamma_key: str | None,
    *,
    scale: float = 1.0,
) -> Vec:
    """RMSNorm(x) × γ (× scale) as instructions; no γ node when `gamma_key` is None."""
    n = sum(n_elems(t) for t in x)
    sq = host_map(ctx, f"{nid}.square", layer, block, "square", x)
    sums = reduce_sums(ctx, f"{nid}.rsum", layer, block, sq)
    ms = host(
        ctx,
        f"{nid}.mean_eps",
        layer,
        block,
        "mean_eps",
        [sums],
        1,
        params={"inv_n": 1.0 / n, "eps": ctx.config.rms_eps},
    )
    rms = cvo_scalar(ctx, f"{nid}.sqrt", layer, block, "cvo_sqrt", ms)
    inv = cvo_scalar(ctx, f"{nid}.recip", layer, block, "cvo_recip", rms)
    y = cvo_map(ctx, f"{nid}.scale", layer, block, "cvo_scale_by", x, scalar=inv)
    if gamma_key is None:
        if scale != 1.0:
            raise ValueError("a scale needs a gamma node")
        return y
    return mul_weight(ctx, f"{nid}.gamma", layer, block, y, gamma_key, scale)


def mean_square(ctx: Ctx, nid: str, layer: int, block: str, x: Vec) -> dict:
    """[mean(x²)]: square (HOST) → REDUCE_SUM (CVO) → Σ (HOST) → SCALE 1/N (CVO)."""
    n = sum(n_elems(t) for t in x)
    sq = host_map(ctx, f"{nid}.square", layer, block, "square", x)
    s = total(ctx, f"{nid}.sum", layer, block, reduce_sums(ctx, f"{nid}.rsum", layer, block, sq))
    return cvo_scalar(
        ctx, f"{nid}.mean", layer, block, "cvo_scale_const", s, params={"scale": 1.0 / n}
    )


def magnitude(
    ctx: Ctx, nid: str, layer: int, block: str, x: Vec, floor_sq: float | None = None
) -> dict:
    """[sqrt(mean(x²))], or [sqrt(max(mean(x²), floor_sq))] with the gemma3n floor."""
    ms = mean_square(ctx, nid, layer, block, x)
    if floor_sq is not None:
        ms = host(
            ctx, f"{nid}.floor", layer, block, "max_const", [[ms]], 1, params={"value": floor_sq}
        )
    return cvo_scalar(ctx, f"{nid}.sqrt", layer, block, "cvo_sqrt", ms)


def match_magnitude(
    ctx: Ctx,
    nid: str,
    layer: int,
    block: str,
    x: Vec,
    target: dict,
    *,
    floor_sq: float | None,
    floor: float,
) -> Vec:
    """x · target / max(|x|_rms, floor): the AltUp magnitude matching (spec §5 step 1).

    pccx: ``floor`` (1e-12) applies after the square root; gemma3n: ``floor_sq`` (1e-5)
    applies to the mean square before it, and ``floor`` is 0.
    """
    mag = magnitude(ctx, f"{nid}.mag", layer, block, x, floor_sq)
    ratio = host(
        ctx,
        f"{nid}.ratio",
        layer,
        block,
        "mag_ratio",
        [[target], [mag]],
        1,
        params={"floor": floor},
    )
    return cvo_map(ctx, f"{nid}.scale", layer, block, "cvo_scale_by", x, scalar=ratio)

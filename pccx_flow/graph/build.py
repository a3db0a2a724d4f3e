"""Expand one Gemma 3N decode step into a DAG of pccx v002 instruction nodes.

>>> g = build_decode_graph("tiny", position=3)
>>> g.graph["config"], g.graph["position"], g.nodes["L04.const.theta"]["params"]["value"]
('tiny', 3, 1000000.0)

The step follows spec 000 §1-§5 block by block (one module per block: `blocks_pre`,
`blocks_altup`, `blocks_attention`, `blocks_residual`, `blocks_ffn`, `blocks_ple`,
`blocks_final`); `ops` holds the shared mappings (GEMV tiles, CVO chunks, RMSNorm) and
`kernel_specs` the exact math of every kernel. Node attributes follow
`pccx_flow.graph.nodes`. Edges carry ``tensor`` (the first tensor the edge carries),
``tensors`` (all of them, usually one) and ``bytes`` (their total).

``graph.graph`` holds ``config`` (preset name), ``config_dict``, ``semantics``, ``position``,
``tile_rows``, ``layers`` ([a, b]), ``outputs`` (the step's result tensors: ``["logits"]``, or
the stream rows leaving layer b-1 on a cut graph) and ``kv_commits`` (which tensors the
executor writes into the KV cache after the step).

Cut graphs (``layers=(a, b)``): the pre-layer steps exist only when a == 0 (their PLE part
then computes pli for layers a..b-1 only) and §5 only when b == n_layers. When a > 0 the
values that would cross the cut enter through ``state_read`` MEMCPY nodes: the four stream
rows entering layer a (field ``xs``), each layer's pli (field ``pli``), and the new K/V row of
a cache layer below a that a KV-sharing layer reads (field ``kv_new``).
"""

from __future__ import annotations

import math

import networkx as nx

from pccx_flow.collector import collector_paused
from pccx_flow.errors import InputError
from pccx_flow.graph.blocks_altup import altup_correct, altup_predict
from pccx_flow.graph.blocks_attention import KvNew, attention, theta_memset
from pccx_flow.graph.blocks_ffn import ffn
from pccx_flow.graph.blocks_final import LOGITS, final
from pccx_flow.graph.blocks_ple import ple_mix
from pccx_flow.graph.blocks_pre import altup_init, embedding, ple_precompute, state_read
from pccx_flow.graph.blocks_residual import input_norm, laurel, merge
from pccx_flow.graph.emit import GraphWriter, Vec
from pccx_flow.graph.ops import WORD_ROWS, Ctx
from pccx_flow.model.config import (
    Gemma3nConfig,
    check_position,
    check_semantics,
    get_config,
)

MAX_TILE_ROWS = 512  # outputs of one GEMV instruction per lane (pccx-v002.md §1)


def check_tile_rows(config: Gemma3nConfig, tile_rows: int) -> int:
    """Raise `InputError` unless max(head_dim, ple_dim) <= tile_rows <= 512."""
    low = max(config.head_dim, config.ple_dim)
    if isinstance(tile_rows, bool) or not isinstance(tile_rows, int):
        raise InputError(f"tile_rows must be an integer, got {tile_rows!r}")
    if not low <= tile_rows <= MAX_TILE_ROWS:
        raise InputError(
            f"tile_rows {tile_rows} out of range: use {low}..{MAX_TILE_ROWS} for {config.name} "
            f"(a tile holds whole heads and PLE segments; one GEMV instruction writes <= 512)"
        )
    return tile_rows


def check_layers(config: Gemma3nConfig, layers) -> tuple[int, int]:
    """Normalise ``layers`` to (a, b) with 0 <= a < b <= n_layers, else `InputError`."""
    n = config.n_layers
    if layers is None:
        return 0, n
    try:
        a, b = (int(v) for v in layers)
    except (TypeError, ValueError):
        raise InputError(f"layers must be a pair (first, end), got {layers!r}") from None
    if not 0 <= a < b <= n:
        raise InputError(
            f"layers ({a}, {b}) out of range: need 0 <= first < end <= {n} for {config.name}"
        )
    return a, b


def build_decode_graph(
    config: Gemma3nConfig | str,
    *,
    semantics: str = "pccx",
    position: int = 0,
    profile=None,
    tile_rows: int = 512,
    layers: tuple[int, int] | None = None,
    row_align: int | None = None,
) -> nx.DiGraph:
    """The DAG of one decode step at `position` (context length position + 1).

    `config` is a `Gemma3nConfig` or a preset name. With a hardware `profile`
    (`pccx_flow.hardware.profile.Profile`) every node also gets ``cycles`` and
    ``resources`` from `pccx_flow.hardware.cost.annotate_costs`. `row_align` (None: 8 when
    the profile's program target is ``as-built``, else 1) makes the row tiles a small matrix
    is split into whole multiples of that many rows, so each tile's output fills whole L2
    words (8 BF16 values a word on the as-built target).
    """
    if isinstance(config, str):
        config = get_config(config)
    check_semantics(semantics)
    check_position(config, position)
    check_tile_rows(config, tile_rows)
    a, b = check_layers(config, layers)
    # ~10^5 small dicts that all stay alive (`pccx_flow.collector`)
    with collector_paused():
        graph = _build(config, semantics, position, tile_rows, a, b, _row_align(profile, row_align))
        if profile is not None:
            from pccx_flow.hardware.cost import annotate_costs

            annotate_costs(graph, profile)
    return graph


def _row_align(profile, row_align: int | None) -> int:
    if row_align is not None:
        if isinstance(row_align, bool) or not isinstance(row_align, int) or row_align < 1:
            raise InputError(f"row_align must be a positive integer, got {row_align!r}")
        return row_align
    program = getattr(profile, "program", None)
    return 8 if program is not None and program.target == "as-built" else 1


def _whole_word_rows(config: Gemma3nConfig, tile_rows: int, row_align: int) -> int:
    """Rows a tile holds at most: `tile_rows`, less what ends short of a whole L2 word.

    A program reads the tiles of one matrix, of one head's keys or of one chain of
    accumulating GEMVs as one operand of contiguous parts, and a part must end on a
    16-byte word (4 float32 values on the spec target, `ops.WORD_ROWS`; `row_align` 8 BF16
    as built). Tiles of 300 rows as built ended mid-word and `emit --tile-rows 300` stopped
    ("does not fill whole L2 words"); they now hold 296. The sizes the builder is asked
    for most (512, 256, the tiny model's 8 to 32) are whole words already."""
    align = math.lcm(row_align, WORD_ROWS)
    rows = tile_rows - tile_rows % align
    return rows if rows >= max(config.head_dim, config.ple_dim) else tile_rows


def _build(
    config: Gemma3nConfig, semantics: str, position: int, tile_rows: int, a: int, b: int,
    row_align: int = 1,
) -> nx.DiGraph:  # fmt: skip
    graph = nx.DiGraph()
    rows = _whole_word_rows(config, tile_rows, row_align)
    ctx = Ctx(GraphWriter(graph), config, semantics, position, rows, row_align)
    S = config.altup_streams
    if a == 0:
        x0 = embedding(ctx)
        xs = altup_init(ctx, x0)
        pli = ple_precompute(ctx, x0, range(a, b))
    else:
        xs = [
            [state_read(ctx, f"L{a:02d}.altup_pred.xs_in.r{k}", a, "altup_pred",
                        (config.hidden,), "float32", {"field": "xs", "row": k})]
            for k in range(S)
        ]  # fmt: skip
        pli = {
            i: state_read(ctx, f"L{i:02d}.ple_mix.pli_in", i, "ple_mix", (config.ple_dim,),
                          "float32", {"field": "pli", "layer": i})
            for i in range(a, b)
        }  # fmt: skip
    kv_new: KvNew = {}
    for i in range(a, b):
        xs = build_layer(ctx, i, xs, pli[i], kv_new)
    if b == config.n_layers:
        final(ctx, xs)
        outputs = [LOGITS]
    else:
        outputs = [t["name"] for row in xs for t in row]

    graph.graph.update(
        config=config.name,
        config_dict=config.to_dict(),
        semantics=semantics,
        position=position,
        tile_rows=tile_rows,
        row_align=row_align,
        layers=[a, b],
        outputs=outputs,
        kv_commits=[
            {
                "tensor": t["name"],
                "cache_layer": i,
                "kind": kind,
                "kv_head": g,
                "position": position,
            }
            for i, pair in sorted(kv_new.items())
            if a <= i < b
            for kind, heads in zip(("k", "v"), pair, strict=True)
            for g, t in enumerate(heads)
            if graph.nodes[ctx.w.writer[t["name"]]]["kernel"] == "kv_write"
        ],
    )
    return graph


def build_layer(ctx: Ctx, i: int, xs: list[Vec], pli: dict, kv_new: KvNew) -> list[Vec]:
    """One decoder layer (spec §4.A-§4.E); returns the stream rows leaving it."""
    theta = theta_memset(ctx, i)
    pred = altup_predict(ctx, i, xs)
    x_norm = input_norm(ctx, i, pred[0])
    attn = attention(ctx, i, x_norm, theta, kv_new)
    lau = laurel(ctx, i, x_norm)
    x_attn = merge(ctx, i, attn, pred[0], lau)
    outputs = ffn(ctx, i, x_attn)
    rows, ple_in = altup_correct(ctx, i, pred, outputs)
    return ple_mix(ctx, i, rows, ple_in, pli)

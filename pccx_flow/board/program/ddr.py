"""The DDR image: where the checkpoint's tensors and the KV cache sit in one CMA buffer.

The board holds the weights and the KV cache in one physically contiguous buffer in host
DDR; GEMV tiles stream their rows from it through the weight ports (HP2/HP3) and KV rows move
to and from L2 by MEMCPY. Layout, in checkpoint-manifest order, each region 4 KiB aligned:

- an INT4 tensor: its packed nibbles ``[rows, cols/2]`` (row-major, as stored), then its
  float32 row scales;
- a float32 tensor: its values, row-major as stored;
- the KV cache: for every cache layer, K then V, head-major: per KV head ``max_seq`` rows of
  ``head_dim`` values in the cache's element type (float16 by the specification, float32
  under the ``gemma3n`` semantics, BF16 on the as-built target:
  `pccx_flow.board.isa.target`). A head's rows are contiguous, so one key tile of one head
  (what a KV read moves: `pccx_flow.graph.blocks_attention.kv_tiles`) is one DataMover
  transfer, which moves one contiguous range; row-major, it would be a piece per row.

>>> from pccx_flow.model.config import get_config
>>> image = ddr_layout(get_config("tiny"))
>>> image["total_bytes"] % 4096
0
"""

from __future__ import annotations

import math

import numpy as np

from pccx_flow.model.config import Gemma3nConfig
from pccx_flow.model.tensors import tensor_manifest

ALIGN = 4096


def _align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


KV_DTYPE_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4}


def ddr_layout(config: Gemma3nConfig, kv_dtype: str = "float16") -> dict:
    """Offsets and sizes of every checkpoint tensor and KV cache region (bytes)."""
    if kv_dtype not in KV_DTYPE_BYTES:
        raise ValueError(f"KV cache dtype {kv_dtype!r} is not one of {sorted(KV_DTYPE_BYTES)}")
    tensors: dict[str, dict] = {}
    off = 0
    for spec in tensor_manifest(config):
        if not spec.used:
            continue
        n = math.prod(spec.shape)
        entry = {"offset": off, "shape": list(spec.shape), "storage": spec.storage}
        if spec.storage == "int4":
            entry["scale_offset"] = off + _align(n // 2)
            entry["bytes"] = n // 2 + 4 * spec.shape[0]
            off = _align(entry["scale_offset"] + 4 * spec.shape[0])
        else:
            entry["bytes"] = 4 * n
            off = _align(off + 4 * n)
        tensors[spec.key] = entry
    weights_end = off
    kv: dict[str, dict] = {}
    row_bytes = config.head_dim * KV_DTYPE_BYTES[kv_dtype]  # one head's row
    head_bytes = config.max_seq * row_bytes
    for layer in range(config.n_kv_cache_layers):
        for kind in ("k", "v"):
            kv[f"{layer}.{kind}"] = {
                "offset": off,
                "rows": config.max_seq,
                "row_bytes": row_bytes,
                "heads": config.n_kv_heads,
                "head_bytes": head_bytes,
            }
            off = _align(off + config.n_kv_heads * head_bytes)
    return {
        "align": ALIGN,
        "tensors": tensors,
        "kv": kv,
        "kv_dtype": kv_dtype,
        "weights_bytes": weights_end,
        "kv_bytes": off - weights_end,
        "total_bytes": off,
    }


def join_kv_heads(rows: dict[str, dict[int, object]], heads: int) -> tuple | None:
    """``(k_row, v_row)`` of one cache layer from its heads' parts (``{"k": {head: part},
    "v": ...}``, as a step writes them: one transfer per head), or None until both kinds
    hold all `heads` parts (a program cut short, ``emit --bisect``, may stop between two
    heads: a row of fewer heads is no row). The parts join in head order, the cache's row
    order (``[kv_dim]``)."""
    every = set(range(heads))
    if set(rows) != {"k", "v"} or any(set(rows[kind]) != every for kind in ("k", "v")):
        return None
    return tuple(
        np.concatenate([np.asarray(rows[kind][h]).reshape(-1) for h in range(heads)])
        for kind in ("k", "v")
    )


def join_kv_layers(parts: dict[int, dict[str, dict[int, object]]], layout: dict) -> dict:
    """``{cache_layer: (k_row, v_row)}`` of the layers whose every head part of K and V a
    step wrote (`join_kv_heads`), from ``{layer: {"k": {head: part}, "v": ...}}``; the
    head count is the DDR layout's."""
    joined = {
        layer: join_kv_heads(kv, layout["kv"][f"{layer}.k"]["heads"])
        for layer, kv in sorted(parts.items())
    }
    return {layer: kv for layer, kv in joined.items() if kv is not None}


def check_ddr_capacity(config: Gemma3nConfig, profile, kv_dtype: str = "float16") -> dict:
    """The DDR image of `config`, or one line (`ProfileError`) when it exceeds the profile's
    ``memory.ddr_bytes``: a step whose weights and KV cache do not fit the board's DDR can be
    neither scheduled as if it ran there nor emitted for it."""
    from pccx_flow.errors import ProfileError

    image = ddr_layout(config, kv_dtype=kv_dtype)
    have = profile.memory.ddr_bytes
    if image["total_bytes"] > have:
        raise ProfileError(
            f"the {config.name} DDR image ({image['weights_bytes']:,} B of weights + "
            f"{image['kv_bytes']:,} B of {kv_dtype} KV cache = {image['total_bytes']:,} B) does "
            f"not fit profile {profile.name}'s memory.ddr_bytes = {have:,} B; give a profile "
            "with more DDR or a smaller preset"
        )
    return image


def step_kv_dtype(semantics: str, target=None) -> str:
    """The KV cache's element type of a step: the target's (as-built: BF16), else the
    semantics' (pccx: float16, gemma3n: float32), as `lower` chooses it."""
    from pccx_flow.precision import kv_cache_dtype

    chosen = getattr(target, "kv_cache_dtype", None)
    return chosen or kv_cache_dtype(semantics).name


def weight_stream(image: dict, weight: dict, layout: str) -> dict:
    """What the host programs into a weight-port DataMover for one GEMV tile.

    ``out_in`` (INT4 or float32 stored ``[out, in]``): the tile's rows are one contiguous run
    (plus a run of row scales for INT4). ``in_out`` (float32 stored ``[in, out]``): the tile is
    a column block, one strided run per input row.
    """
    entry = image["tensors"][weight["key"]]
    r0, r1 = weight["rows"]
    shape = entry["shape"]
    if entry["storage"] == "int4":
        cols = shape[1]
        c0, c1 = weight.get("cols", [0, cols])
        return {
            "key": weight["key"],
            "offset": entry["offset"] + r0 * cols // 2 + c0 // 2,
            "run_bytes": (c1 - c0) // 2,
            "runs": r1 - r0,
            "stride": cols // 2,
            "scale_offset": entry["scale_offset"] + 4 * r0,
            "scale_bytes": 4 * (r1 - r0),
        }
    if layout == "in_out":
        n_out = shape[-1]
        n_in = math.prod(shape[:-1])
        return {
            "key": weight["key"],
            "offset": entry["offset"] + 4 * r0,
            "run_bytes": 4 * (r1 - r0),
            "runs": n_in,
            "stride": 4 * n_out,
        }
    cols = math.prod(shape[1:]) if len(shape) > 1 else 1
    c0, c1 = weight.get("cols", [0, cols])
    return {
        "key": weight["key"],
        "offset": entry["offset"] + 4 * (r0 * cols + c0),
        "run_bytes": 4 * (c1 - c0),
        "runs": r1 - r0,
        "stride": 4 * cols,
    }

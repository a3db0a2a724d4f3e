"""GEMV kernels: weight tiles times a vector, and the two attention GEMVs.

An INT4 tile is multiplied straight from its packed rows (`pccx_flow.execute.int4`): the
tile is never dequantised to float32 as a whole. A float32 weight is read as stored, in the
orientation ``params["layout"]`` names (`pccx_flow.graph.kernel_specs`, "Weights").
"""

from __future__ import annotations

import numpy as np

from pccx_flow.execute.int4 import gemv_int4_numpy, gemv_int4_tile
from pccx_flow.execute.operands import operands, vector, weight_bounds
from pccx_flow.execute.weight_views import tensor_view
from pccx_flow.precision import tensor_dtype


def _product(call, x: np.ndarray, weights) -> np.ndarray:
    F = tensor_dtype()
    w = call.weight
    key = w["key"]
    layout = call.params.get("layout", "out_in")
    view = tensor_view(weights, key)
    r0, r1, c0, c1 = weight_bounds(w, view.shape, layout)
    if x.shape[0] != c1 - c0:
        n = x.shape[0]
        raise ValueError(f"input has {n} elements, weight columns {c0}:{c1} need {c1 - c0}")
    if view.storage == "int4":
        if layout != "out_in":
            raise ValueError(f"INT4 weight {key} must use layout out_in, not {layout}")
        if c0 % 2 or c1 % 2:
            raise ValueError(f"INT4 columns {c0}:{c1} must start and end on a byte boundary")
        if F is not np.float32:  # a float64 check: exact products, summed in float64
            packed = view.data[r0:r1, c0 // 2 : c1 // 2]
            return gemv_int4_numpy(packed, view.scale[r0:r1], x, dtype=F)
        return gemv_int4_tile(view.data, view.scale, x, (r0, r1), (c0, c1))
    stored = view.data
    if layout == "out_in":
        return (np.asarray(stored[r0:r1, c0:c1], dtype=F) @ x).astype(F, copy=False)
    if layout == "in_out":
        return (x @ np.asarray(stored[c0:c1, r0:r1], dtype=F)).astype(F, copy=False)
    raise ValueError(f"unknown weight layout {layout!r}")


def gemv(call, inputs, ctx, weights, external):
    """y = W x (+ acc when flags.accm = 1): one weight tile."""
    ops = operands(call.params, inputs)
    y = _product(call, vector(ops[0]), weights)
    if call.flags.get("accm"):
        y = y + vector(ops[1])
    return y


def _kv_rows(call, kv_inputs: list) -> np.ndarray:
    """concat(past, new[None]) along positions, as stored (float16 or float32).

    A key tile holds past rows (``has_past``), this step's row (``has_new``, default true)
    or both, in that order."""
    parts, rest = [], iter(kv_inputs)
    if call.params.get("has_past"):
        parts.append(np.asarray(next(rest)))
    if call.params.get("has_new", True):
        parts.append(np.asarray(next(rest)).reshape(1, -1))
    return parts[0] if len(parts) == 1 else np.concatenate(parts, axis=0)


def _kv_count(call) -> int:
    return int(bool(call.params.get("has_past"))) + int(bool(call.params.get("has_new", True)))


def _tile_keys(call, rows: np.ndarray) -> np.ndarray:
    """Keys a:b of the tile's rows (one KV head's: every KV tile and row is per head)."""
    F = tensor_dtype()
    p = call.params
    off = int(p.get("row_offset", 0))  # key index of the first row this tile holds
    a, b = (int(v) - off for v in p["keys"])
    return rows[a:b].astype(F)


def attn_scores(call, inputs, ctx, weights, external):
    """Q·Kᵀ of one query head over keys a:b, no scaling, and the max (findemax)."""
    F = tensor_dtype()
    q = vector(inputs[0])
    k = _tile_keys(call, _kv_rows(call, inputs[1:]))
    scores = (k @ q).astype(F, copy=False)
    return scores, np.array([scores.max()], dtype=F)


def attn_pv(call, inputs, ctx, weights, external):
    """Probabilities · V of one query head over keys a:b (one key tile; several tiles are
    combined on the host, see attn_combine)."""
    F = tensor_dtype()
    ops = operands(call.params, inputs)
    p = vector(ops[0])
    v = _tile_keys(call, _kv_rows(call, ops[1 : 1 + _kv_count(call)]))
    return (p @ v).astype(F, copy=False)


KERNELS = {"gemv": gemv, "attn_scores": attn_scores, "attn_pv": attn_pv}

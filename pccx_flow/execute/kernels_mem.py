"""MEMCPY and MEMSET kernels: row fetches, the KV cache boundary, constants, read-back.

The KV design is pure: a KV-write node outputs the new row (downcast to the cache dtype, as
the hardware stores it) and the executor commits it after the step (`kv_write_rows`); a
KV-read node gets the rows of earlier positions from the state (`kv_read_externals`) and the
new row from its input edge, and returns the rows the attention of this position sees.
"""

from __future__ import annotations

import numpy as np

from pccx_flow.errors import ExecutionError
from pccx_flow.execute.state import kv_cache_dtype

KV_WRITE_KERNELS = ("kv_write",)
KV_READ_KERNELS = ("kv_read",)


def kv_read_externals(call, state) -> dict | None:
    """Past rows ``[start, position)`` of the cache layer a KV-read node reads, else None."""
    if call.kernel not in KV_READ_KERNELS:
        return None
    p = call.params
    layer = int(p["cache_layer"])
    start = int(p.get("start", 0))
    kind = p["kind"]
    return {"past": np.array(state.past_rows(layer, kind)[start:], copy=True)}


def kv_write_rows(calls: dict, results: dict[str, tuple]) -> dict[int, tuple]:
    """``{cache_layer: (k_row, v_row)}`` from the outputs of the step's KV-write nodes."""
    rows: dict[int, dict[str, np.ndarray]] = {}
    for node, call in calls.items():
        if call.kernel not in KV_WRITE_KERNELS:
            continue
        layer = int(call.params["cache_layer"])
        rows.setdefault(layer, {})[call.params["kind"]] = results[node][0]
    out = {}
    for layer, kv in rows.items():
        if set(kv) != {"k", "v"}:
            raise ExecutionError(f"cache layer {layer}: the graph writes {sorted(kv)}, not k and v")
        out[layer] = (kv["k"], kv["v"])
    return out


def kv_write(call, inputs, ctx, weights, external):
    """The new row as the cache stores it: float16 (pccx) or float32 (gemma3n)."""
    return (
        np.asarray(inputs[0]).reshape(call.output_shapes[0]).astype(kv_cache_dtype(ctx.semantics))
    )


def kv_read(call, inputs, ctx, weights, external):
    """Earlier rows from the state followed by this step's row: ``[L, kv_dim]``."""
    past = external["past"]
    new = np.asarray(inputs[0]).reshape(1, -1).astype(past.dtype)
    return np.concatenate([past, new], axis=0).reshape(call.output_shapes[0])


KERNELS = {"kv_write": kv_write, "kv_read": kv_read}

"""MEMCPY and MEMSET kernels: row fetches, the KV cache boundary, constants, read-back.

The KV design is pure: a KV-write node outputs the new row in the cache dtype (float16 under
the specification) and the executor commits it after the step (`kv_write_rows`); a KV-read
node has no inputs and returns the rows of earlier positions, which the executor takes from
the decode state (`kv_read_externals`) and hands to the task as plain data. So a task never
touches shared mutable state, and a step that fails leaves the cache as it was.
"""

from __future__ import annotations

import numpy as np

from pccx_flow.errors import ExecutionError
from pccx_flow.execute.operands import operands, vector
from pccx_flow.precision import tensor_dtype

KV_WRITE_KERNELS = ("kv_write",)
KV_READ_KERNELS = ("kv_read",)


def kv_read_externals(call, state) -> dict | None:
    """For a KV-read node: ``{"rows": cache[layer][a:p]}`` of its KV head's columns, copied
    from the state, else None."""
    if call.kernel not in KV_READ_KERNELS:
        return None
    p = call.params
    layer = int(p["cache_layer"])
    a, b = (int(v) for v in p.get("positions", (p.get("start", 0), state.position)))
    if not 0 <= a <= b <= state.position:
        raise ExecutionError(
            f"node {call.node} reads cache positions {a}:{b} but the state is at position "
            f"{state.position}"
        )
    cache = state.k_cache if p["kind"] == "k" else state.v_cache
    d = state.config.head_dim
    g = int(p["kv_head"])
    return {"rows": np.array(cache[layer, a:b, g * d : (g + 1) * d], copy=True)}


def kv_write_rows(calls: dict, results: dict[str, tuple]) -> dict[int, tuple]:
    """``{cache_layer: (k_row, v_row)}`` from the outputs of the step's KV-write nodes (one
    per KV head, joined in head order)."""
    rows: dict[int, dict[str, dict[int, np.ndarray]]] = {}
    for node, call in calls.items():
        if call.kernel not in KV_WRITE_KERNELS:
            continue
        layer, kind, head = (int(call.params["cache_layer"]), call.params["kind"],
                             int(call.params["kv_head"]))  # fmt: skip
        row = np.asarray(results[node][0]).reshape(-1)
        rows.setdefault(layer, {}).setdefault(kind, {})[head] = row
    out = {}
    for layer, kv in rows.items():
        if set(kv) != {"k", "v"}:
            raise ExecutionError(f"cache layer {layer}: the graph writes {sorted(kv)}, not k and v")
        heads = sorted(kv["k"])
        if sorted(kv["v"]) != heads or heads != list(range(len(heads))):
            raise ExecutionError(
                f"cache layer {layer}: the graph writes K heads {sorted(kv['k'])} and V heads "
                f"{sorted(kv['v'])}, not every KV head of both"
            )
        out[layer] = tuple(np.concatenate([kv[kind][g] for g in heads]) for kind in ("k", "v"))
    return out


def _cache_dtype(call, ctx) -> np.dtype:
    from pccx_flow.execute.state import kv_cache_dtype

    name = call.params.get("cache_dtype")
    return np.dtype(name) if name else kv_cache_dtype(ctx.semantics)


def kv_write(call, inputs, ctx, weights, external):
    """This position's K or V row of one KV head, in the cache dtype."""
    row = vector(operands(call.params, inputs)[0])
    return row.astype(_cache_dtype(call, ctx))


def kv_read(call, inputs, ctx, weights, external):
    """Rows a:p of one cache layer, as stored, from the state snapshot the task was given."""
    rows = external["rows"]
    if inputs:  # a variant that also appends this step's row from its input edge
        new = np.asarray(operands(call.params, inputs)[0]).reshape(1, -1).astype(rows.dtype)
        rows = np.concatenate([rows, new], axis=0)
    return rows


def state_read(call, inputs, ctx, weights, external):
    """The value a cut graph (``layers=(a, b)``, a > 0) takes from outside: ``external["value"]``.

    `execute` refuses cut graphs (their entry values and partial KV commits are not part of
    `DecodeState`), so only a caller that supplies ``external`` itself reaches this kernel.
    """
    return np.array(external["value"], copy=True)


def embed_row(call, inputs, ctx, weights, external):
    """Row t of an embedding table, dequantised; t is the token id after the id rule."""
    F = tensor_dtype()
    p = call.params
    t = int(ctx.token_id)
    limit = int(p.get("id_limit", 0))
    rule = p.get("id_rule", "none")
    if rule == "clip":
        t = min(t, limit - 1)
    elif rule == "zero_if_oob":
        t = t if t < limit else 0
    elif rule != "none":
        raise ValueError(f"unknown id rule {rule!r}")
    key = call.weight["key"]
    return np.asarray(weights.rows(key, t, t + 1, F), dtype=F).reshape(-1)


def readback(call, inputs, ctx, weights, external):
    return vector(operands(call.params, inputs)[0]).copy()


def memset(call, inputs, ctx, weights, external):
    F = tensor_dtype()
    return np.array([call.params["value"]], dtype=F)


KERNELS = {
    "kv_write": kv_write,
    "kv_read": kv_read,
    "state_read": state_read,
    "embed_row": embed_row,
    "readback": readback,
    "memset": memset,
}

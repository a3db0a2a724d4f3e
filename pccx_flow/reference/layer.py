"""One decoder layer of the reference decode (spec 000 §4.A-§4.E), both semantics.

`decoder_layer` maps the four AltUp streams ``xs`` ``[4, D]`` of one position to the next
layer's ``xs``, reading and writing the KV cache. The code follows the specification's
steps in order; the places where ``semantics="gemma3n"`` (the published Gemma 3n
reference) differs are marked with the number of the difference in gemma3n-semantics.md.

Precision (as in `pccx_flow.reference.functions`): the ``trace`` tensors and every result
of a function or a matrix product are float32; the arithmetic that forms one from others is
done in float64 and rounded once.
"""

from __future__ import annotations

import math

import numpy as np

from pccx_flow.model.config import (
    Gemma3nConfig,
    is_global_layer,
    is_sparse_layer,
    kv_source_layer,
    owns_kv,
    rope_theta,
)
from pccx_flow.model.tensors import layer_tensors
from pccx_flow.precision import tensor_dtype
from pccx_flow.reference.functions import (
    gaussian_topk_gate,
    gelu_tanh,
    gqa_attention,
    rms_norm,
    rope_interleaved,
    rope_split_half,
)
from pccx_flow.reference.streaming import matvec, vector

F64 = np.float64
INV_SQRT2 = 1.0 / math.sqrt(2.0)


def _record(trace: dict | None, layer: int, name: str, value) -> None:
    if trace is not None:
        trace[f"L{layer}.{name}"] = np.array(value, copy=True)


def decoder_layer(
    ckpt,
    layer: int,
    xs: np.ndarray,
    pli: np.ndarray,
    position: int,
    cache,
    semantics: str,
    trace: dict | None = None,
) -> np.ndarray:
    """Run layer `layer` on ``xs`` ``[4, D]`` at `position`; return the new ``xs``.

    `pli` is this layer's row of ``pli_all`` (spec §3). Layers that own a KV slot write
    row `position` of ``cache.k[layer]`` / ``cache.v[layer]``; every layer attends over the
    rows ``0..position`` of its source slot (spec §4.B-4), limited to the sliding window on
    local layers under ``gemma3n``.
    """
    cfg: Gemma3nConfig = ckpt.config
    gemma = semantics == "gemma3n"
    key = {t.spec_name: t.key for t in layer_tensors(cfg, layer)}
    eps = cfg.rms_eps
    D = cfg.hidden
    _record(trace, layer, "xs_in", xs)

    # --- 4.A AltUp router and prediction -------------------------------------------------
    altup_rn = vector(ckpt, key["altup_rn"])
    router = vector(ckpt, key["altup_router"])  # [D, 4]
    x_n = rms_norm(xs[0], altup_rn, eps).astype(F64) / D
    modalities = np.tanh(x_n @ router.astype(F64)).astype(tensor_dtype())
    coef_mat = (vector(ckpt, key["altup_pred"]).astype(F64) @ modalities).reshape(
        cfg.altup_streams, cfg.altup_streams
    )
    xs_pred = (xs + coef_mat @ xs.astype(F64)).astype(tensor_dtype())
    _record(trace, layer, "modalities", modalities)
    _record(trace, layer, "xs_pred", xs_pred)

    # --- 4.B attention: Q/K/V, QK-norm, RoPE, KV cache, GQA, W_o ---------------------------
    x_input = xs_pred[0]
    x_norm = rms_norm(x_input, vector(ckpt, key["input_ln"]), eps)
    _record(trace, layer, "x_input", x_input)
    _record(trace, layer, "x_norm", x_norm)

    theta = rope_theta(cfg, layer)
    rope = rope_split_half if gemma else rope_interleaved  # difference 4
    q = matvec(ckpt, key["W_q"], x_norm).reshape(cfg.n_q_heads, cfg.head_dim)
    q = rms_norm(q, vector(ckpt, key["gamma_q"]), eps)
    q_rope = rope(q, position, theta)
    _record(trace, layer, "q_rope", q_rope)

    if owns_kv(cfg, layer):
        k = matvec(ckpt, key["W_k"], x_norm).reshape(cfg.n_kv_heads, cfg.head_dim)
        k = rms_norm(k, vector(ckpt, key["gamma_k"]), eps)
        k_rope = rope(k, position, theta)
        v = matvec(ckpt, key["W_v"], x_norm).reshape(cfg.n_kv_heads, cfg.head_dim)
        if gemma:
            v = rms_norm(v, None, eps)  # difference 2: weightless V norm per KV head
        # float16 storage under pccx, float32 under gemma3n (difference 5): the cache's dtype.
        cache.k[layer, position] = k_rope.reshape(-1)
        cache.v[layer, position] = v.reshape(-1)
        _record(trace, layer, "k_rope", k_rope)
        _record(trace, layer, "v", v)

    source = kv_source_layer(cfg, layer)
    start = 0
    if gemma and not is_global_layer(cfg, layer):  # difference 6: sliding window
        start = max(0, position - cfg.sliding_window + 1)
    shape = (position + 1 - start, cfg.n_kv_heads, cfg.head_dim)
    target_k = cache.k[source, start : position + 1].astype(tensor_dtype()).reshape(shape)
    target_v = cache.v[source, start : position + 1].astype(tensor_dtype()).reshape(shape)
    attn_raw = gqa_attention(q_rope, target_k, target_v)
    attn_proj = matvec(ckpt, key["W_o"], attn_raw)
    _record(trace, layer, "kv_source", source)
    _record(trace, layer, "kv_start", start)
    _record(trace, layer, "attn_raw", attn_raw)

    # --- 4.C LAuReL (reads x_norm) and the attention residual ------------------------------
    laurel_mid = matvec(ckpt, key["laurel_left"], x_norm)
    laurel_x = matvec(ckpt, key["laurel_right"], laurel_mid)
    laurel_out = x_norm + rms_norm(laurel_x, vector(ckpt, key["laurel_norm"]), eps)
    attn_output = rms_norm(attn_proj, vector(ckpt, key["post_attn_ln"]), eps) + x_input
    x_attn = ((attn_output.astype(F64) + laurel_out) * INV_SQRT2).astype(tensor_dtype())
    _record(trace, layer, "laurel_in", x_norm)
    _record(trace, layer, "laurel_out", laurel_out)
    _record(trace, layer, "attn_output", attn_output)
    _record(trace, layer, "x_attn", x_attn)

    # --- 4.D FFN with the Gaussian top-k gate on the first layers ---------------------------
    x_n2 = rms_norm(x_attn, vector(ckpt, key["pre_ffn_ln"]), eps)
    gate_raw = matvec(ckpt, key["W_gate"], x_n2)
    up_out = matvec(ckpt, key["W_up"], x_n2)
    _record(trace, layer, "gate_raw", gate_raw)
    _record(trace, layer, "up_out", up_out)
    if is_sparse_layer(cfg, layer):
        gate_raw = gaussian_topk_gate(gate_raw, cfg.sparse_z)  # population std, both semantics
    hidden = gelu_tanh(gate_raw) * up_out
    mlp_out = matvec(ckpt, key["W_down"], hidden)
    outputs = rms_norm(mlp_out, vector(ckpt, key["post_ffn_ln"]), eps) + x_attn
    _record(trace, layer, "hidden", hidden)
    _record(trace, layer, "outputs", outputs)

    # --- 4.E AltUp correction and PLE mixing into rows 1..3 --------------------------------
    altup_scale = vector(ckpt, key["altup_scale"])
    # difference 3: the reference corrects with the unscaled outputs and scales afterwards.
    activated = outputs if gemma else (outputs * altup_scale).astype(tensor_dtype())
    innovation = activated.astype(F64) - xs_pred[0]
    x_n3 = rms_norm(activated, altup_rn, eps).astype(F64) / D
    mod_corr = np.tanh(x_n3 @ router.astype(F64))
    corr_coefs = vector(ckpt, key["altup_corr"]).astype(F64) @ mod_corr + 1.0
    xs_new = (xs_pred + corr_coefs[:, np.newaxis] * innovation[np.newaxis, :]).astype(
        tensor_dtype()
    )
    _record(trace, layer, "activated", activated)
    _record(trace, layer, "xs_before_ple", xs_new)

    ple_in = (xs_new[0] * altup_scale).astype(tensor_dtype()) if gemma else activated
    gate_ple = gelu_tanh(matvec(ckpt, key["W_ple_gate"], ple_in)).astype(F64) * pli
    mapped = rms_norm(
        gate_ple @ vector(ckpt, key["W_ple_proj"]).astype(F64),
        vector(ckpt, key["ple_post_ln"]),
        eps,
    )
    xs_new[1:] += mapped
    _record(trace, layer, "ple_mapped", mapped)
    _record(trace, layer, "xs_after_ple", xs_new)
    return xs_new

"""The core functions of spec 000 §0, written once in NumPy for the reference decode.

Every function is a direct transcription of the formula it names, so a reader can hold it
next to the specification. Where the published Gemma 3n reference (``semantics="gemma3n"``)
computes the same thing differently, the function takes the variant as an argument rather
than hiding it behind a flag elsewhere.

Precision: a function takes float32 (or float64) arrays, evaluates its formula in float64 and
returns the result rounded once to float32 (to `pccx_flow.precision.tensor_dtype`, which is
float64 only when a decode is run in float64 to check structure). The tensors of the
specification are float32; the arithmetic between them is not what the specification is about,
and doing it in float64 keeps the oracle's own rounding error to one float32 rounding per
tensor instead of one per elementary operation and per term of a sum. Measured on ``tiny`` over
24 steps under ``gemma3n`` semantics (float32 cache): the logits are within 4.3e-6 on average
(8.4e-6 at most) of the same decode done entirely in float64, against 5.9e-6 (9.6e-6) when
every operation rounded to float32. What remains is the rounding of the tensors themselves,
amplified by the model; it cannot be removed in float32.
"""

from __future__ import annotations

import math

import numpy as np

from pccx_flow.precision import tensor_dtype

F64 = np.float64


def rms_norm(x: np.ndarray, gamma: np.ndarray | None, eps: float = 1e-6) -> np.ndarray:
    """RMSNorm over the last axis: ``x / sqrt(mean(x²) + eps) * gamma`` (spec §0).

    Gamma multiplies as it is (not ``1 + gamma``). ``gamma=None`` is the weightless norm the
    published reference applies to V.
    """
    x = np.asarray(x, dtype=F64)
    ms = np.mean(np.square(x), axis=-1, keepdims=True)
    out = x / np.sqrt(ms + eps)
    if gamma is not None:
        out = out * np.asarray(gamma, dtype=F64)
    return out.astype(tensor_dtype())


_GELU_C = math.sqrt(2.0 / math.pi)


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """GELU in its tanh form: ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x³)))`` (spec §0)."""
    x = np.asarray(x, dtype=F64)
    inner = _GELU_C * (x + 0.044715 * x * x * x)
    return (0.5 * x * (1.0 + np.tanh(inner))).astype(tensor_dtype())


def rope_angles(position: int, theta: float, head_dim: int) -> tuple[np.ndarray, np.ndarray]:
    """cos and sin of ``position * ω_i`` with ``ω_i = θ^(-2i/d_head)``, i = 0..d_head/2-1.

    In float64 (positions up to 8191 times ω_0 = 1 would lose digits in float32).
    """
    i = np.arange(head_dim // 2, dtype=F64)
    omega = theta ** (-2.0 * i / head_dim)
    angle = position * omega
    return np.cos(angle), np.sin(angle)


def rope_interleaved(x: np.ndarray, position: int, theta: float) -> np.ndarray:
    """Specification RoPE (§0): element 2i rotates with element 2i+1 by ``position * ω_i``.

    ``x`` is ``[heads, head_dim]``.
    """
    x = np.asarray(x, dtype=F64)
    cos, sin = rope_angles(position, theta, x.shape[-1])
    even, odd = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = even * cos - odd * sin
    out[..., 1::2] = even * sin + odd * cos
    return out.astype(tensor_dtype())


def rope_split_half(x: np.ndarray, position: int, theta: float) -> np.ndarray:
    """Published-reference RoPE (``rotate_half``): element i rotates with element i + d/2.

    Same frequencies as `rope_interleaved`; only the pairing differs. ``x`` is
    ``[heads, head_dim]``.
    """
    x = np.asarray(x, dtype=F64)
    half = x.shape[-1] // 2
    cos, sin = rope_angles(position, theta, x.shape[-1])
    first, second = x[..., :half], x[..., half:]
    out = np.empty_like(x)
    out[..., :half] = first * cos - second * sin
    out[..., half:] = second * cos + first * sin
    return out.astype(tensor_dtype())


def gqa_attention(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Grouped-query attention of one query position over ``L`` cached positions.

    ``q`` is ``[n_q_heads, d]``, ``k`` and ``v`` are ``[L, n_kv_heads, d]``; query head h
    reads KV head ``h // (n_q_heads / n_kv_heads)`` (spec §0: Q_g = Q[4g:4g+4]). Scores are
    ``Q · Kᵀ`` with **no** 1/sqrt(d_head) scaling and no softcap: spec 001 §1 and the
    published reference both say so, although the §0 GQA formula still shows the division.
    Softmax is the numerically stable one (subtract the row max, spec 001's CVO sequence).
    Returns ``[n_q_heads * d]`` (the heads concatenated, spec §0 "flatten").
    """
    q = np.asarray(q, dtype=F64)
    k = np.asarray(k, dtype=F64)
    v = np.asarray(v, dtype=F64)
    n_q, d = q.shape
    n_kv = k.shape[1]
    group = n_q // n_kv
    out = np.empty((n_q, d), dtype=F64)
    for g in range(n_kv):
        qg = q[g * group : (g + 1) * group]  # [group, d]
        scores = qg @ k[:, g, :].T  # [group, L]
        scores = scores - scores.max(axis=-1, keepdims=True)
        e = np.exp(scores)
        probs = e / e.sum(axis=-1, keepdims=True)
        out[g * group : (g + 1) * group] = probs @ v[:, g, :]
    return out.reshape(-1).astype(tensor_dtype())


def gaussian_topk_gate(gate_raw: np.ndarray, z: float) -> np.ndarray:
    """Sparse gate of spec 002 §1: ``max(gate_raw - (mean + z·std), 0)``.

    "Std" is the population standard deviation (ddof = 0) in both semantics: spec 002 §4
    maps the variance to ``CVO_SCALE (1/16384)``, a division by N, and pccx's own runtime
    (``sw/runtime/gemma`` in pccxai/pccx-FPGA-NPU-LLM-kv260) uses ``np.std``, as does the
    published Gemma 3n.
    """
    g = np.asarray(gate_raw, dtype=F64)
    mean = np.mean(g)
    std = np.std(g)  # two-pass: mean of the squared deviations, divided by N
    cutoff = mean + std * z
    return np.maximum(g - cutoff, 0.0).astype(tensor_dtype())


def softcap(x: np.ndarray, cap: float) -> np.ndarray:
    """Final-logit soft-capping ``cap · tanh(x / cap)`` (spec §5 step 3)."""
    x = np.asarray(x, dtype=F64)
    return (cap * np.tanh(x / cap)).astype(tensor_dtype())

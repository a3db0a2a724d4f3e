"""HOST kernels: the steps pccx v002 has no instruction for, run on the host CPU.

Element-wise arithmetic of two vectors, tanh, the RoPE phases and pair rotation, the AltUp
mixing, the sparse-gate scalars, the softcap and the PLE write into the shadow rows
(pccx-v002.md §4, "No instruction exists for"). Each follows its entry in
`pccx_flow.graph.kernel_specs.KERNELS`; everything is float32 except the RoPE phases,
which are formed in float64 and rounded once.
"""

from __future__ import annotations

import math

import numpy as np

from pccx_flow.execute.operands import operands, scalar, vector
from pccx_flow.execute.weight_views import tensor_view
from pccx_flow.precision import tensor_dtype


def _ops(call, inputs) -> list[np.ndarray]:
    return [vector(o) for o in operands(call.params, inputs)]


def square(call, inputs, ctx, weights, external):
    x = _ops(call, inputs)[0]
    return x * x


def mean_eps(call, inputs, ctx, weights, external):
    """RMSNorm scalar: sum(partials) * inv_n + eps."""
    F = tensor_dtype()
    s = np.sum(_ops(call, inputs)[0], dtype=F)
    p = call.params
    return np.array([s * F(p["inv_n"]) + F(p["eps"])], dtype=F)


def mul_weight(call, inputs, ctx, weights, external):
    """x * w[r0:r1] * scale (a norm gamma or altup_scale, optionally scaled by 1/D)."""
    F = tensor_dtype()
    x = _ops(call, inputs)[0]
    r0, r1 = (int(v) for v in call.weight["rows"])
    w = tensor_view(weights, call.weight["key"]).data[r0:r1]
    y = x * w
    scale = call.params.get("scale", 1.0)
    if scale != 1.0:
        y = y * F(scale)
    return y.astype(F, copy=False)


def add(call, inputs, ctx, weights, external):
    a, b = _ops(call, inputs)
    return a + b


def sub(call, inputs, ctx, weights, external):
    a, b = _ops(call, inputs)
    return a - b


def mul(call, inputs, ctx, weights, external):
    a, b = _ops(call, inputs)
    return a * b


def add_slice(call, inputs, ctx, weights, external):
    a, b = _ops(call, inputs)
    o = int(call.params["offset"])
    return a + b[o : o + a.shape[0]]


def add_const(call, inputs, ctx, weights, external):
    F = tensor_dtype()
    return _ops(call, inputs)[0] + F(call.params["value"])


def max_const(call, inputs, ctx, weights, external):
    F = tensor_dtype()
    return np.maximum(_ops(call, inputs)[0], F(call.params["value"]))


def tanh(call, inputs, ctx, weights, external):
    return np.tanh(_ops(call, inputs)[0])


def softcap(call, inputs, ctx, weights, external):
    F = tensor_dtype()
    cap = F(call.params["cap"])
    return (cap * np.tanh(_ops(call, inputs)[0] / cap)).astype(F, copy=False)


def sum_(call, inputs, ctx, weights, external):
    F = tensor_dtype()
    return np.array([np.sum(_ops(call, inputs)[0], dtype=F)], dtype=F)


def attn_combine(call, inputs, ctx, weights, external):
    """Split-K softmax·V: sum_t w_t o_t / sum_t w_t l_t with w_t = exp(m_t - max m)."""
    F = tensor_dtype()
    m, sums, parts = _ops(call, inputs)
    w = np.exp(m - np.max(m)).astype(F, copy=False)
    o = parts.reshape(len(m), -1)
    num = np.sum(w[:, None] * o, axis=0, dtype=F)
    return (num / np.sum(w * sums, dtype=F)).astype(F, copy=False)


def sub_square(call, inputs, ctx, weights, external):
    x, m = _ops(call, inputs)
    d = x - m[0]
    return d * d


def sub_relu(call, inputs, ctx, weights, external):
    F = tensor_dtype()
    x, c = _ops(call, inputs)
    return np.maximum(x - c[0], F(0.0))


def cutoff(call, inputs, ctx, weights, external):
    F = tensor_dtype()
    mean, std = _ops(call, inputs)
    return np.array([mean[0] + F(call.params["z"]) * std[0]], dtype=F)


def mag_ratio(call, inputs, ctx, weights, external):
    F = tensor_dtype()
    target, mag = _ops(call, inputs)
    floor = float(call.params.get("floor", 0.0))
    denom = np.maximum(mag[0], F(floor)) if floor else mag[0]
    return np.array([target[0] / denom], dtype=F)


def rope_phase(call, inputs, ctx, weights, external):
    """Phases p * theta^(-2j/d), range-reduced to [-pi, pi), formed in float64."""
    F = tensor_dtype()
    theta = float(scalar(_ops(call, inputs)[0]))
    p = call.params
    d = int(p["head_dim"])
    j = np.arange(d // 2, dtype=np.float64)
    phi = int(p["position"]) * theta ** (-2.0 * j / d)
    phi = np.mod(phi + math.pi, 2.0 * math.pi) - math.pi
    return phi.astype(F)


def rope_combine(call, inputs, ctx, weights, external):
    """Rotate one head by the phases: interleaved (spec) or split-half (gemma3n) pairs."""
    x, sin, cos = (vector(v) for v in inputs)
    y = np.empty_like(x)
    if call.params["pairing"] == "interleaved":
        even, odd = x[0::2], x[1::2]
        y[0::2] = even * cos - odd * sin
        y[1::2] = even * sin + odd * cos
    elif call.params["pairing"] == "split_half":
        h = x.shape[0] // 2
        first, second = x[:h], x[h:]
        y[:h] = first * cos - second * sin
        y[h:] = second * cos + first * sin
    else:
        raise ValueError(f"unknown RoPE pairing {call.params['pairing']!r}")
    return y


def altup_mix(call, inputs, ctx, weights, external):
    """Row k of the AltUp prediction: x_k + sum_j C[k, j] x_j with C row-major [S, S]."""
    ops = _ops(call, inputs)
    s = int(call.params["n_streams"])
    k = int(call.params["row"])
    coef = ops[0].reshape(s, s)
    xs = ops[1:]
    y = xs[k].copy()
    for j in range(s):
        y += coef[k, j] * xs[j]
    return y


def altup_correct(call, inputs, ctx, weights, external):
    corr, pred, innovation = _ops(call, inputs)
    return pred + corr[int(call.params["row"])] * innovation


def mean_streams(call, inputs, ctx, weights, external):
    F = tensor_dtype()
    ops = _ops(call, inputs)
    total = ops[0].copy()
    for o in ops[1:]:
        total += o
    return (total / F(len(ops))).astype(F, copy=False)


def ple_write(call, inputs, ctx, weights, external):
    """Shadow rows only: each listed row + mapped; row 0 is never touched."""
    ops = _ops(call, inputs)
    rows = [int(r) for r in call.params["rows"]]
    if 0 in rows:
        raise ValueError("PLE must not write stream row 0 (spec 003 §2.1)")
    mapped = ops[0]
    return tuple(r + mapped for r in ops[1:])


KERNELS = {
    "square": square,
    "mean_eps": mean_eps,
    "mul_weight": mul_weight,
    "add": add,
    "sub": sub,
    "mul": mul,
    "add_slice": add_slice,
    "add_const": add_const,
    "max_const": max_const,
    "tanh": tanh,
    "softcap": softcap,
    "sum": sum_,
    "attn_combine": attn_combine,
    "sub_square": sub_square,
    "sub_relu": sub_relu,
    "cutoff": cutoff,
    "mag_ratio": mag_ratio,
    "rope_phase": rope_phase,
    "rope_combine": rope_combine,
    "altup_mix": altup_mix,
    "altup_correct": altup_correct,
    "mean_streams": mean_streams,
    "ple_write": ple_write,
}

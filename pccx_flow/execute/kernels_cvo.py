"""CVO kernels: the SFU functions of pccx v002, one element-wise pass each.

GELU is the specification's tanh form (spec 000 §0), not the RTL's ``x·sigmoid(1.702x)``
approximation: the executor computes what the model means, the cost model accounts for what
the unit does. A CVO node may work on a span ``a:b`` of its first operand (an instruction
takes at most 2,048 elements). Everything is float32 (float64 when a step is checked in
float64, `pccx_flow.precision`).
"""

from __future__ import annotations

import math

import numpy as np

from pccx_flow.execute.operands import apply_span, operands, scalar, vector
from pccx_flow.precision import tensor_dtype

_GELU_C = math.sqrt(2.0 / math.pi)


def _x(call, inputs) -> tuple[np.ndarray, list]:
    ops = operands(call.params, inputs)
    return apply_span(call.params, vector(ops[0])), ops


def gelu_tanh(x: np.ndarray) -> np.ndarray:
    """0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), in the tensor dtype.

    Evaluated as ``x / (1 + exp(-2u))``, the same function (0.5 (1 + tanh(u)) is the logistic
    function of 2u): written with tanh, ``1 + tanh(u)`` cancels for u << 0 and float32 gives
    e.g. -1.6e-7 instead of -1.29e-8 at x = -5.4. -2u is capped at 80, where the result is
    already below 1e-34 |x|, so exp never overflows.
    """
    F = tensor_dtype()
    inner = F(_GELU_C) * (x + F(0.044715) * x * x * x)
    e = np.exp(np.minimum(F(-2.0) * inner, F(80.0)))
    return (x / (F(1.0) + e)).astype(F, copy=False)


def cvo_exp(call, inputs, ctx, weights, external):
    """EXP with sub_emax: exp(x - m[0])."""
    F = tensor_dtype()
    x, ops = _x(call, inputs)
    return np.exp(x - scalar(ops[-1])).astype(F, copy=False)


def cvo_reduce_sum(call, inputs, ctx, weights, external):
    F = tensor_dtype()
    x, _ = _x(call, inputs)
    return np.array([np.sum(x, dtype=F)], dtype=F)


def cvo_scale_const(call, inputs, ctx, weights, external):
    F = tensor_dtype()
    x, _ = _x(call, inputs)
    return (x * F(call.params["scale"])).astype(F, copy=False)


def cvo_scale_by(call, inputs, ctx, weights, external):
    F = tensor_dtype()
    x, ops = _x(call, inputs)
    return (x * scalar(ops[-1])).astype(F, copy=False)


def cvo_scale_recip(call, inputs, ctx, weights, external):
    """SCALE with recip_scale: x / s[0]."""
    F = tensor_dtype()
    x, ops = _x(call, inputs)
    return (x / scalar(ops[-1])).astype(F, copy=False)


def cvo_sqrt(call, inputs, ctx, weights, external):
    F = tensor_dtype()
    x, _ = _x(call, inputs)
    return np.sqrt(x).astype(F, copy=False)


def cvo_recip(call, inputs, ctx, weights, external):
    F = tensor_dtype()
    x, _ = _x(call, inputs)
    return (F(1.0) / x).astype(F, copy=False)


def cvo_gelu(call, inputs, ctx, weights, external):
    x, _ = _x(call, inputs)
    return gelu_tanh(x)


def cvo_sin(call, inputs, ctx, weights, external):
    F = tensor_dtype()
    x, _ = _x(call, inputs)
    return np.sin(x).astype(F, copy=False)


def cvo_cos(call, inputs, ctx, weights, external):
    F = tensor_dtype()
    x, _ = _x(call, inputs)
    return np.cos(x).astype(F, copy=False)


KERNELS = {
    "cvo_exp": cvo_exp,
    "cvo_reduce_sum": cvo_reduce_sum,
    "cvo_scale_const": cvo_scale_const,
    "cvo_scale_by": cvo_scale_by,
    "cvo_scale_recip": cvo_scale_recip,
    "cvo_sqrt": cvo_sqrt,
    "cvo_recip": cvo_recip,
    "cvo_gelu": cvo_gelu,
    "cvo_sin": cvo_sin,
    "cvo_cos": cvo_cos,
}

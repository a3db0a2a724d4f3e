"""Operands of a kernel: inputs grouped by ``params["operands"]``, spans, weight slices.

The graph hands a vector that was produced in row tiles to its reader as several inputs;
``params["operands"] = [n0, n1, ...]`` says operand k is the 1-D concatenation of the next
``nk`` inputs (`pccx_flow.graph.kernel_specs`, "Operands"). Without it, each input is one
operand and is passed through unchanged (so 2-D KV rows stay 2-D).
"""

from __future__ import annotations

import numpy as np

from pccx_flow.precision import tensor_dtype


def operands(params: dict, inputs: list) -> list[np.ndarray]:
    """Group `inputs` into operands as ``params["operands"]`` says (default: one each)."""
    counts = params.get("operands")
    if counts is None:
        return [np.asarray(x) for x in inputs]
    counts = [int(c) for c in counts]
    if sum(counts) != len(inputs):
        raise ValueError(f"operands {counts} do not add up to the {len(inputs)} inputs")
    out, i = [], 0
    for c in counts:
        parts = inputs[i : i + c]
        out.append(np.asarray(parts[0]) if c == 1 else np.concatenate([np.ravel(p) for p in parts]))
        i += c
    return out


def vector(x) -> np.ndarray:
    """A 1-D view in the tensor dtype, float32 by default (copy only when needed)."""
    return np.asarray(x, dtype=tensor_dtype()).reshape(-1)


def scalar(x) -> np.floating:
    """The first element of a ``[1]`` operand in the tensor dtype (a SCALE's scalar operand)."""
    return tensor_dtype()(np.asarray(x).reshape(-1)[0])


def apply_span(params: dict, x: np.ndarray) -> np.ndarray:
    """Elements ``a:b`` of `x` when ``params["span"] = [a, b]``, else `x`."""
    span = params.get("span")
    if span is None:
        return x
    a, b = int(span[0]), int(span[1])
    return x[a:b]


def weight_bounds(weight: dict, shape: tuple[int, ...], layout: str) -> tuple[int, int, int, int]:
    """``(r0, r1, c0, c1)`` of ``y = W x``: rows index outputs, cols index inputs."""
    r0, r1 = (int(v) for v in weight["rows"])
    n_in = shape[1] if layout == "out_in" else shape[0]
    c0, c1 = (int(v) for v in weight.get("cols", (0, n_in)))
    return r0, r1, c0, c1

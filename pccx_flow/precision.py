"""The dtype a decode holds its activations in: float32, as specified, or float64 to check.

The specification's tensors are float32, and that is the default everywhere. The executed
graph and the reference decode round to float32 at different points (one per node against
one per reference function), so in float32 their logits differ by up to ~2e-5: the float32
noise floor of this model (README, "Numerics"). A wrong result smaller than that would hide
in the noise. With ``float64`` both keep every activation in float64 and agree to ~1e-12,
so any difference above that is structural, not rounding. Storage is not changed: weights
stay INT4 or float32 and the KV cache float16 (``pccx``) or float32 (``gemma3n``,
`kv_cache_dtype`), so the float16 downcast on store still happens; the NPU itself computes
in float32.

The dtype lives in a context variable rather than a parameter of every function: the
reference decode sets it around a step, and each executed node sets it from its step
context, so kernels on Dask worker threads and worker processes see the step's choice.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

import numpy as np

from pccx_flow.errors import InputError
from pccx_flow.model.config import check_semantics

PRECISIONS = {"float32": np.float32, "float64": np.float64}
DEFAULT_PRECISION = "float32"

_DTYPE: ContextVar[type[np.floating]] = ContextVar("pccx_flow_tensor_dtype", default=np.float32)


def check_precision(precision: str) -> str:
    """`precision` when it is a known name; `InputError` with the choices otherwise."""
    if precision not in PRECISIONS:
        raise InputError(f"unknown precision {precision!r}; use one of {', '.join(PRECISIONS)}")
    return precision


def tensor_dtype() -> type[np.floating]:
    """The activation dtype of the computation running in this context (float32 default)."""
    return _DTYPE.get()


@contextlib.contextmanager
def computing_in(precision: str) -> Iterator[None]:
    """Run the enclosed code with activations in `precision` (``float32`` or ``float64``)."""
    token = _DTYPE.set(PRECISIONS[check_precision(precision)])
    try:
        yield
    finally:
        _DTYPE.reset(token)


def kv_cache_dtype(semantics: str) -> np.dtype:
    """The KV cache's element type: float16 under the specification, float32 under the
    published reference. Here, not in `pccx_flow.execute`, so that `schedule` and `emit`
    can size a step's DDR image without importing the executor (and Dask)."""
    return np.dtype(np.float16 if check_semantics(semantics) == "pccx" else np.float32)

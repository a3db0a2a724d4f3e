"""Which weight values a decode can use: finite, and no larger than float16 can hold.

A NaN or an infinity in a weight turns every logit it reaches into NaN; a finite but huge
value does the same a few operations later (3e38 squared in an RMS norm is inf), and on the
specification's target the KV cache is float16, whose largest value is 65,504. No trained
Gemma weight comes near that (they are of order 1; INT4 row scales are max|row| / 7), so a
larger magnitude is a damaged or mis-converted checkpoint, and is refused like a NaN, with
the tensor named. For INT4 tensors the bound applies to what dequantisation can make:
``scale * 8`` (the nibbles are -8..7).
"""

from __future__ import annotations

import numpy as np

# The largest float16 value: the KV cache's element type on the specification's target.
MAX_ABS_VALUE = 65504.0
INT4_LEVELS = 8  # |nibble| <= 8
SCAN_ROWS = 1 << 14  # rows per scan step, so a large float32 tensor is not read at once


def value_problem(a: np.ndarray, limit: float = MAX_ABS_VALUE) -> str | None:
    """Why `a` cannot be used (NaN/infinite values, or values beyond +-`limit`), or None."""
    a = np.asarray(a) if not isinstance(a, np.ndarray) else a
    rows = a.reshape(1, -1) if a.ndim < 2 else a
    worst = 0.0
    for start in range(0, rows.shape[0], SCAN_ROWS):
        chunk = np.asarray(rows[start : start + SCAN_ROWS], dtype=np.float64)
        if not np.isfinite(chunk).all():
            return "NaN or infinite values"
        if chunk.size:
            worst = max(worst, float(np.abs(chunk).max()))
    if worst > limit:
        return (
            f"values up to {worst:.3g} in magnitude, beyond the +-{limit:g} a decode can use "
            "(float16's range; real weights are of order 1)"
        )
    return None


def scale_problem(scale: np.ndarray) -> str | None:
    """Why INT4 row `scale`s cannot be used, or None (bound: scale * 8 <= MAX_ABS_VALUE)."""
    return value_problem(scale, MAX_ABS_VALUE / INT4_LEVELS)

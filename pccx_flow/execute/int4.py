"""INT4 matrix-vector products on packed rows, without dequantising whole matrices.

A checkpoint stores an INT4 matrix as packed ``uint8 [rows, cols/2]`` (spec 000 §0: the low
nibble is the even column, the high nibble the odd one, both two's complement) plus one
float32 scale per row. A GEMV tile reads only its own packed rows.

`gemv_int4` unpacks, scales and accumulates in one pass (numba, compiled once per process and
cached on disk) so a 512 x 2048 tile never exists as float32: on E4B that is the difference
between streaming 2.2 GB of packed weights per step and materialising 8.8 GB of floats. When
numba is not installed, `gemv_int4_numpy` does the same per tile with NumPy (slower, same
numbers up to float32 summation order).

Both accumulate each row in float64 and round once, so the result is at least as accurate as
a float32 BLAS product of the dequantised matrix.
"""

from __future__ import annotations

import numpy as np

try:  # numba is optional: the NumPy path below computes the same product.
    import numba
except ImportError:  # pragma: no cover - exercised only where numba is absent
    numba = None


def unpack_int4(packed: np.ndarray) -> np.ndarray:
    """Signed nibbles of packed ``uint8 [rows, cols/2]`` as ``int8 [rows, cols]``."""
    packed = np.asarray(packed, dtype=np.uint8)
    out = np.empty(packed.shape[:-1] + (packed.shape[-1] * 2,), dtype=np.int8)
    # (v ^ 8) - 8 maps the 4-bit two's complement 0..15 to 0..7, -8..-1.
    out[..., 0::2] = ((packed & 0x0F) ^ 8).astype(np.int8) - 8
    out[..., 1::2] = ((packed >> 4) ^ 8).astype(np.int8) - 8
    return out


def dequantize_int4_rows(packed: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Float32 rows ``[rows, cols]`` = signed nibbles x per-row scale (small tiles only)."""
    q = unpack_int4(packed).astype(np.float32)
    q *= np.asarray(scale, dtype=np.float32)[:, None]
    return q


def gemv_int4_numpy(packed: np.ndarray, scale: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``y[r] = scale[r] * sum_c q[r, c] * x[c]`` with NumPy, one tile at a time."""
    q = unpack_int4(packed).astype(np.float64)
    y = q @ np.asarray(x, dtype=np.float64)
    return (y * np.asarray(scale, dtype=np.float64)).astype(np.float32)


if numba is not None:

    @numba.njit(nogil=True, cache=True, fastmath=True, boundscheck=False)
    def _gemv_int4_kernel(packed, scale, x, out):  # pragma: no cover - compiled
        rows, half = packed.shape
        for r in range(rows):
            acc_even = 0.0
            acc_odd = 0.0
            row = packed[r]
            for j in range(half):
                b = np.int32(row[j])
                lo = ((b & 15) ^ 8) - 8
                hi = ((b >> 4) ^ 8) - 8
                acc_even += np.float64(lo) * x[2 * j]
                acc_odd += np.float64(hi) * x[2 * j + 1]
            out[r] = np.float32((acc_even + acc_odd) * scale[r])


def gemv_int4(packed: np.ndarray, scale: np.ndarray, x: np.ndarray) -> np.ndarray:
    """INT4 GEMV over the packed rows of one tile: ``float32 [rows]``.

    `packed` is ``uint8 [rows, cols/2]`` (a memmap slice is fine: only these rows are read),
    `scale` ``float32 [rows]``, `x` ``float32 [cols]``.
    """
    packed = np.ascontiguousarray(packed, dtype=np.uint8)
    x64 = np.ascontiguousarray(x, dtype=np.float64).reshape(-1)
    if x64.shape[0] != packed.shape[1] * 2:
        raise ValueError(f"GEMV input has {x64.shape[0]} elements, tile has {packed.shape[1] * 2}")
    if numba is None:  # pragma: no cover - exercised only where numba is absent
        return gemv_int4_numpy(packed, scale, x64)
    out = np.empty(packed.shape[0], dtype=np.float32)
    _gemv_int4_kernel(packed, np.ascontiguousarray(scale, dtype=np.float64), x64, out)
    return out

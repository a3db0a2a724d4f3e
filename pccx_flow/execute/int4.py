"""INT4 matrix-vector products on packed rows, without dequantising whole matrices.

A checkpoint stores an INT4 matrix as packed ``uint8 [rows, cols/2]`` (spec 000 §0: the low
nibble is the even column, the high nibble the odd one, both two's complement) plus one
float32 scale per row. A GEMV tile reads only its own packed rows.

`gemv_int4` unpacks, scales and accumulates in one pass (numba, compiled once per process and
cached on disk) so a 512 x 2048 tile never exists as float32: on E4B that is the difference
between streaming 2.2 GB of packed weights per step and materialising 8.8 GB of floats. When
numba is not installed, `gemv_int4_numpy` does the same per tile with NumPy (slower, same
numbers up to float32 summation order).

Measured on random packed tiles against a float64 product (2 cores, shared machine, one
BLAS thread, median of 60 calls): on 16384 x 2048, 3.3-4.0 ms, max error 1.9e-6 (1.1e-7 of
max |y|, mean 1.8e-7); a plain float32 row sum was 6-9% faster, max error 2.4e-6 (mean
2.9e-7). On 2048 x 16384 (long rows, like an FFN down projection), 3.5-4.3 ms, max error
3.5e-6 (mean 5.2e-7) against 1.3e-5 (mean 2.0e-6) for the plain float32 sum. Summing every
product in float64 is exact up to the final rounding but took twice as long; 64-byte blocks
took 1.4x as long for about the same error as 256. The NumPy fallback (float64 dequantise
and product) took 120-180 ms.
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


def gemv_int4_numpy(
    packed: np.ndarray, scale: np.ndarray, x: np.ndarray, dtype=np.float32
) -> np.ndarray:
    """``y[r] = scale[r] * sum_c q[r, c] * x[c]`` with NumPy, one tile at a time, summed in
    float64 and returned in `dtype`."""
    q = unpack_int4(packed).astype(np.float64)
    y = q @ np.asarray(x, dtype=np.float64)
    return (y * np.asarray(scale, dtype=np.float64)).astype(dtype)


# Bytes (2 columns each) summed in float32 before joining the float64 row sum. 256 keeps the
# vectorised inner loop long enough that the float64 adds cost 6-9%; 64 cost ~40%.
_BLOCK_BYTES = 256

if numba is not None:

    @numba.njit(nogil=True, cache=True, fastmath=True, boundscheck=False)
    def _gemv_int4_kernel(packed, scale, x_even, x_odd, r0, r1, b0, b1, out):  # pragma: no cover
        # packed is the whole C-contiguous tensor; rows r0:r1 and bytes b0:b1 are the tile.
        # Byte j of a row holds columns 2j (low nibble) and 2j+1 (high nibble); the signed
        # nibbles come from int8 arithmetic shifts, and x arrives split into its even and odd
        # elements, so the inner loop is unit-stride and vectorises (float32 lanes, which
        # fastmath may reassociate). Each block of _BLOCK_BYTES bytes is summed in float32
        # and added to a float64 row sum, so float32 rounding error grows with the block, not
        # with the row length; the row sum is scaled in float64 and rounded once.
        n = b1 - b0
        full = n - n % _BLOCK_BYTES
        for r in range(r0, r1):
            row = packed[r, b0:b1]
            acc = 0.0
            for j0 in range(0, full, _BLOCK_BYTES):
                part = np.float32(0.0)
                for i in range(_BLOCK_BYTES):
                    b = np.int8(row[j0 + i])
                    lo = np.int8(b << 4) >> 4
                    hi = b >> 4
                    part += np.float32(lo) * x_even[j0 + i] + np.float32(hi) * x_odd[j0 + i]
                acc += np.float64(part)
            part = np.float32(0.0)
            for j in range(full, n):
                b = np.int8(row[j])
                lo = np.int8(b << 4) >> 4
                hi = b >> 4
                part += np.float32(lo) * x_even[j] + np.float32(hi) * x_odd[j]
            acc += np.float64(part)
            out[r - r0] = np.float32(acc * np.float64(scale[r]))


def gemv_int4_tile(
    packed: np.ndarray,
    scale: np.ndarray,
    x: np.ndarray,
    rows: tuple[int, int],
    cols: tuple[int, int],
) -> np.ndarray:
    """INT4 GEMV of the tile ``rows x cols`` of a whole packed tensor: ``float32 [r1-r0]``.

    `packed` is the whole ``uint8 [R, C/2]`` tensor (memory-mapped is fine: only the tile's
    bytes are touched, and nothing is copied), `scale` its ``float32 [R]`` row scales, `x`
    ``float32 [c1-c0]`` with ``c0``, ``c1`` even.
    """
    r0, r1 = rows
    c0, c1 = cols
    x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    if x.shape[0] != c1 - c0 or c0 % 2 or c1 % 2:
        raise ValueError(f"GEMV input has {x.shape[0]} elements for tile columns {c0}:{c1}")
    if numba is None or not packed.flags.c_contiguous:  # pragma: no cover - fallback
        return gemv_int4_numpy(packed[r0:r1, c0 // 2 : c1 // 2], scale[r0:r1], x)
    out = np.empty(r1 - r0, dtype=np.float32)
    x_even = np.ascontiguousarray(x[0::2])
    x_odd = np.ascontiguousarray(x[1::2])
    _gemv_int4_kernel(packed, scale, x_even, x_odd, r0, r1, c0 // 2, c1 // 2, out)
    return out


def gemv_int4(packed: np.ndarray, scale: np.ndarray, x: np.ndarray) -> np.ndarray:
    """INT4 GEMV over all rows of `packed` (``uint8 [rows, cols/2]``): ``float32 [rows]``."""
    packed = np.ascontiguousarray(packed, dtype=np.uint8)
    scale = np.ascontiguousarray(scale, dtype=np.float32)
    return gemv_int4_tile(packed, scale, x, (0, packed.shape[0]), (0, 2 * packed.shape[1]))

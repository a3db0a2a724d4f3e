"""INT4 weights as the specification stores them: two signed nibbles per byte, one scale per row.

Spec 000 §0 unpacks one byte into two weights::

    w0 = b & 0x0F;  w0 -= 16 if w0 > 7      (even column, low nibble)
    w1 = b >> 4;    w1 -= 16 if w1 > 7      (odd column, high nibble)
    Output = [w0, w1] * Scale

Unpacking goes through a 256-entry table built by exactly that rule, so every byte is decoded
the way the specification writes it and a whole tile unpacks in one gather. Quantisation is
symmetric per row (scale = max|w| / 7), the form the pccx runtime stores.

>>> q = np.array([[-8, 7, 0, -1]], dtype=np.int8)
>>> pack_int4(q)
array([[120, 240]], dtype=uint8)
>>> unpack_int4(pack_int4(q))
array([[-8,  7,  0, -1]], dtype=int8)
"""

from __future__ import annotations

import numpy as np

from pccx_flow.errors import TensorFormatError

INT4_MIN = -8
INT4_MAX = 7


def _nibble(value: int) -> int:
    """Spec §0 sign rule for one 4-bit field: values above 7 are negative (two's complement)."""
    return value - 16 if value > 7 else value


def _build_unpack_table() -> np.ndarray:
    table = np.empty((256, 2), dtype=np.int8)
    for b in range(256):
        table[b, 0] = _nibble(b & 0x0F)
        table[b, 1] = _nibble(b >> 4)
    table.setflags(write=False)
    return table


# UNPACK_TABLE[b] = (w0, w1) for byte b, decoded by the spec §0 rule; the float32 copy lets
# dequantisation gather floats directly (np.take is ~6x faster than fancy indexing here).
UNPACK_TABLE = _build_unpack_table()
UNPACK_TABLE_F32 = UNPACK_TABLE.astype(np.float32)
UNPACK_TABLE_F32.setflags(write=False)
UNPACK_TABLE_F64 = UNPACK_TABLE.astype(np.float64)
UNPACK_TABLE_F64.setflags(write=False)


def pack_int4(q: np.ndarray) -> np.ndarray:
    """Pack int8 values in -8..7 into bytes: column 2i in the low nibble, 2i+1 in the high one.

    Works on any leading shape; the last axis must have even length.
    """
    q = np.asarray(q)
    if q.shape[-1] % 2:
        raise TensorFormatError(f"pack_int4: last axis has odd length {q.shape[-1]}; need even")
    if q.size and (q.min() < INT4_MIN or q.max() > INT4_MAX):
        raise TensorFormatError(
            f"pack_int4: values must lie in {INT4_MIN}..{INT4_MAX}, got {q.min()}..{q.max()}"
        )
    nib = q.astype(np.int8, copy=False).view(np.uint8) & np.uint8(0x0F)
    return nib[..., 0::2] | (nib[..., 1::2] << np.uint8(4))


def unpack_int4(packed: np.ndarray) -> np.ndarray:
    """Unpack bytes ``[..., n]`` into int8 weights ``[..., 2n]`` by the spec §0 rule."""
    packed = np.asarray(packed)
    if packed.dtype != np.uint8:
        raise TensorFormatError(f"unpack_int4: packed weights must be uint8, got {packed.dtype}")
    out = np.take(UNPACK_TABLE, packed, axis=0)  # [..., n, 2]
    return out.reshape(*packed.shape[:-1], 2 * packed.shape[-1])


def quantize_rows(w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric per-row INT4: scale = max|w| / 7, q = clip(rint(w / scale), -8, 7).

    All-zero rows (and rows whose max/7 underflows to 0) get scale 1.0, so quantisation never
    divides by zero; such rows quantise to 0.
    Returns ``(packed uint8 [rows, cols/2], scale float32 [rows])``.
    """
    w = np.asarray(w, dtype=np.float32)
    if w.ndim != 2:
        raise TensorFormatError(f"quantize_rows: need a 2-D matrix, got shape {w.shape}")
    if not np.isfinite(w).all():
        raise TensorFormatError("quantize_rows: the matrix holds NaN or infinite values")
    absmax = np.max(np.abs(w), axis=1) if w.shape[1] else np.zeros(w.shape[0], np.float32)
    scale = (absmax / np.float32(INT4_MAX)).astype(np.float32)
    scale[scale == 0] = 1.0  # all-zero rows, and rows so tiny that max/7 underflows
    q = np.clip(np.rint(w / scale[:, None]), INT4_MIN, INT4_MAX).astype(np.int8)
    return pack_int4(q), scale


def dequantize_rows(packed: np.ndarray, scale: np.ndarray, dtype=np.float32) -> np.ndarray:
    """``[rows, cols]`` = unpacked weights times their row's scale (spec §0 Output), float32.

    ``dtype=np.float64`` gives the products exactly (a 4-bit integer times a float32 scale
    fits in float64's 53-bit significand); in float32 each product is rounded once.
    """
    dtype = np.dtype(dtype)
    if dtype not in (np.float32, np.float64):
        raise TensorFormatError(f"dequantize_rows: dtype must be float32 or float64, not {dtype}")
    packed = np.asarray(packed)
    scale = np.asarray(scale, dtype=dtype)
    if packed.ndim != 2 or scale.shape != (packed.shape[0],):
        raise TensorFormatError(
            f"dequantize_rows: need packed [rows, n] and scale [rows], got {packed.shape} "
            f"and {scale.shape}"
        )
    if packed.dtype != np.uint8:
        raise TensorFormatError(
            f"dequantize_rows: packed weights must be uint8, got {packed.dtype}"
        )
    table = UNPACK_TABLE_F32 if dtype == np.float32 else UNPACK_TABLE_F64
    w = np.take(table, packed, axis=0).reshape(packed.shape[0], 2 * packed.shape[1])
    w *= scale[:, None]
    return w

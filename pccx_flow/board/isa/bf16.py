"""BF16 storage: the upper 16 bits of a float32, as the as-built NPU keeps activations in L2.

NumPy has no bfloat16 dtype, so values are carried as float32 arrays holding exactly
representable BF16 numbers, and converted to and from their 16-bit patterns at the edges
(L2 words, the host I/O area, golden vectors). Rounding from float32 is to nearest, ties to
even (what a host writing BF16 does); NaN stays NaN.

>>> to_bits(np.array([1.0, -2.0, 1.00390625], dtype=np.float32)).tolist()
[16256, 49152, 16256]
>>> from_bits(np.array([0x3F80, 0x4049], dtype=np.uint16)).tolist()
[1.0, 3.140625]
>>> float(round_bf16(np.float32(3.14159)))
3.140625
"""

from __future__ import annotations

import numpy as np


def to_bits(values) -> np.ndarray:
    """The BF16 bit patterns (uint16) of `values`, rounded to nearest even from float32."""
    x = np.ascontiguousarray(np.asarray(values, dtype=np.float32))
    u = x.view(np.uint32)
    rounded = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16))
    nan = np.isnan(x)
    out = rounded.astype(np.uint16)
    if nan.any():
        out[nan] = ((u[nan] >> np.uint32(16)) | np.uint32(0x40)).astype(np.uint16)
    return out


def from_bits(bits) -> np.ndarray:
    """float32 values of BF16 bit patterns."""
    b = np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)
    return b.view(np.float32)


def round_bf16(values) -> np.ndarray:
    """`values` rounded to BF16 and returned as float32 (shape kept)."""
    x = np.asarray(values, dtype=np.float32)
    return from_bits(to_bits(x.reshape(-1))).reshape(x.shape)


def to_wire(values) -> bytes:
    """Little-endian BF16 bytes of `values`, as a DataMover moves them."""
    return to_bits(np.asarray(values).reshape(-1)).astype("<u2").tobytes()


def from_wire(raw: bytes) -> np.ndarray:
    """float32 values of little-endian BF16 bytes."""
    return from_bits(np.frombuffer(raw, dtype="<u2"))

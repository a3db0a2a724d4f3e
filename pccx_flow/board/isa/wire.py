"""How a tensor's values lie in bytes: in L2 words, the host I/O area and the DataMover.

A tensor the program places is described by its dtype (float32, float16, or BF16 on the
as-built target) and its element offset in its first 128-bit word (0, or 7 for a scalar on
the as-built target: `pccx_flow.board.isa.target.Target.scalar_element`). `pack` lays values out
as the words hold them (zeros before the offset and after the last value, up to whole words
when asked), `unpack` reads them back. Sidecar entries name a tensor's place as
``[where, bytes or words, elements, dtype]`` plus the offset when it is not 0; `entry_fields`
splits such an entry.

>>> raw = pack([1.5], "bfloat16", offset=7, nbytes=16)
>>> len(raw), unpack(raw, 1, "bfloat16", offset=7).tolist()
(16, [1.5])
"""

from __future__ import annotations

import numpy as np

from pccx_flow.board.isa import bf16

WIRE_DTYPES = {"float16": "<f2", "float32": "<f4", "float64": "<f8", "int32": "<i4"}
ELEMENT_BYTES = {"float16": 2, "bfloat16": 2, "float32": 4, "float64": 8, "int32": 4}


def entry_fields(entry: list) -> tuple[int, int, int, str, int]:
    """``(where, size, elements, dtype, element offset)`` of a sidecar location entry."""
    offset = int(entry[4]) if len(entry) > 4 else 0
    return int(entry[0]), int(entry[1]), int(entry[2]), str(entry[3]), offset


def pack(values, dtype: str, *, offset: int = 0, nbytes: int | None = None) -> bytes:
    """`values` as bytes in `dtype`, after `offset` zero elements, zero-padded to `nbytes`."""
    v = np.asarray(values).reshape(-1)
    if dtype == "bfloat16":
        data = bf16.to_wire(v.astype(np.float32))
    else:
        data = np.ascontiguousarray(v, dtype=WIRE_DTYPES[dtype]).tobytes()
    raw = bytes(offset * ELEMENT_BYTES[dtype]) + data
    if nbytes is not None:
        if len(raw) > nbytes:
            raise ValueError(f"{len(raw)} bytes of {dtype} do not fit {nbytes}")
        raw += bytes(nbytes - len(raw))
    return raw


def unpack(raw, elements: int, dtype: str, *, offset: int = 0) -> np.ndarray:
    """`elements` values of `dtype` from `raw`, starting `offset` elements in.

    float16 stays float16, every other dtype comes back as float32 or wider."""
    size = ELEMENT_BYTES[dtype]
    start = offset * size
    chunk = bytes(raw[start : start + elements * size])
    if len(chunk) != elements * size:
        raise ValueError(f"{len(raw)} bytes hold no {elements} {dtype} values at element {offset}")
    if dtype == "bfloat16":
        return bf16.from_wire(chunk)
    return np.frombuffer(chunk, dtype=WIRE_DTYPES[dtype]).copy()


def size_of(elements: int, dtype: str, offset: int = 0) -> int:
    """Bytes from the first word's start to the end of the last value."""
    return (offset + elements) * ELEMENT_BYTES[dtype]

"""A small read-only safetensors reader: header JSON, byte offsets and a memory map.

Why not the `safetensors` package: its NumPy API cannot return BF16 tensors (NumPy has no
bfloat16), Gemma 3n checkpoints are BF16, and importing through torch would load every shard
into RAM. The format is simple enough to read directly: an 8-byte little-endian header
length, a JSON header ``{name: {dtype, shape, data_offsets}}``, then the raw bytes. Tensors are
mapped, never loaded whole, and converted to float32 a row chunk at a time; BF16 is the upper
half of a float32, so widening is a 16-bit shift.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pccx_flow.errors import TensorFormatError

# safetensors dtype -> (numpy storage dtype, bytes per element); BF16 is read as raw uint16.
DTYPES = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": np.dtype("<u2"),
}
MAX_HEADER_BYTES = 100 * 1024 * 1024


@dataclass(frozen=True)
class SafeTensor:
    """One tensor of a safetensors file: where its bytes are and how to read them."""

    file: Path
    name: str
    dtype: str  # safetensors dtype name, e.g. "BF16"
    shape: tuple[int, ...]
    offset: int  # absolute byte offset of the data in `file`

    @property
    def nbytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n * DTYPES[self.dtype].itemsize

    def raw(self) -> np.ndarray:
        """The stored values, memory-mapped read-only (BF16 as uint16 bit patterns)."""
        if self.nbytes == 0:
            return np.zeros(self.shape, DTYPES[self.dtype])
        return np.memmap(
            self.file, DTYPES[self.dtype], mode="r", offset=self.offset, shape=self.shape
        )

    def rows_float32(self, start: int, stop: int) -> np.ndarray:
        """Rows ``start:stop`` (first axis) converted to float32.

        Read with an ordinary file read rather than through the memory map, so that
        converting a multi-GB shard keeps only one chunk resident in this process.
        """
        dtype = DTYPES[self.dtype]
        row = 1
        for d in self.shape[1:]:
            row *= d
        start, stop = max(0, start), min(stop, self.shape[0] if self.shape else 1)
        count = max(0, stop - start) * row
        values = np.fromfile(
            self.file, dtype=dtype, count=count, offset=self.offset + start * row * dtype.itemsize
        )
        return to_float32(values.reshape((count // row if row else 0, *self.shape[1:])), self.dtype)

    def float32(self) -> np.ndarray:
        return to_float32(self.raw(), self.dtype)


def to_float32(values: np.ndarray, dtype: str) -> np.ndarray:
    """Widen stored values to float32; BF16 bit patterns become the upper 16 bits."""
    if dtype == "BF16":
        return (values.astype(np.uint32) << np.uint32(16)).view(np.float32)
    return np.asarray(values, dtype=np.float32).copy()


def read_safetensors_header(path: Path) -> dict[str, SafeTensor]:
    """Parse a safetensors file's header; every tensor is checked to lie inside the file."""
    path = Path(path)
    size = path.stat().st_size
    try:
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                raise ValueError("file shorter than the 8-byte header length")
            (n,) = struct.unpack("<Q", head)
            if n > min(size - 8, MAX_HEADER_BYTES):
                raise ValueError(f"header length {n} does not fit the file")
            header = json.loads(f.read(n).decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise TensorFormatError(
            f"{path.name} is not a safetensors file ({exc}); pass .safetensors shards"
        ) from None
    if not isinstance(header, dict):
        raise TensorFormatError(f"{path.name}: safetensors header is not a JSON object")
    base = 8 + n
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        try:
            dtype = entry["dtype"]
            shape = tuple(int(d) for d in entry["shape"])
            begin, end = (int(x) for x in entry["data_offsets"])
        except (KeyError, TypeError, ValueError):
            raise TensorFormatError(f"{path.name}: malformed header entry for {name}") from None
        if dtype not in DTYPES:
            raise TensorFormatError(
                f"{path.name}: tensor {name} has dtype {dtype}; only "
                f"{', '.join(DTYPES)} can be imported"
            )
        t = SafeTensor(path, name, dtype, shape, base + begin)
        if end - begin != t.nbytes or base + end > size:
            raise TensorFormatError(
                f"{path.name}: tensor {name} needs bytes {base + begin}..{base + end} of a "
                f"{size}-byte file; the file is truncated or damaged"
            )
        out[name] = t
    return out

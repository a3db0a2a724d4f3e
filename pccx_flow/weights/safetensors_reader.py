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
import os
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


def _entry(path: Path, name: str, entry: object) -> tuple[str, tuple[int, ...], int, int]:
    """Check one header entry's types and ranges; returns (dtype, shape, begin, end)."""

    def natural(v: object) -> bool:
        return isinstance(v, int) and not isinstance(v, bool) and v >= 0

    bad = TensorFormatError(
        f"{path.name}: malformed header entry for {str(name)[:80]!r} (needs dtype, a shape of "
        "non-negative integers and data_offsets [begin, end] with 0 <= begin <= end)"
    )
    if not isinstance(entry, dict):
        raise bad
    dtype, shape, offsets = entry.get("dtype"), entry.get("shape"), entry.get("data_offsets")
    if not isinstance(dtype, str) or not isinstance(shape, list) or not isinstance(offsets, list):
        raise bad
    if len(shape) > 8 or not all(natural(d) for d in shape):
        raise bad
    if len(offsets) != 2 or not all(natural(x) for x in offsets) or offsets[0] > offsets[1]:
        raise bad
    return dtype, tuple(shape), offsets[0], offsets[1]


def read_safetensors_header(path: Path) -> dict[str, SafeTensor]:
    """Parse a safetensors file's header; every tensor must lie inside the file, no overlaps.

    The file must be a regular file (opened without blocking, so a FIFO is refused, not
    waited on); the JSON header is bounded in size and nesting; each entry's dtype, shape and
    offsets are checked, and two tensors may not share bytes.
    """
    from pccx_flow.weights.npy import open_regular

    path = Path(path)
    try:
        with open_regular(path, "safetensors shard") as f:
            size = os.fstat(f.fileno()).st_size
            head = f.read(8)
            if len(head) < 8:
                raise ValueError("file shorter than the 8-byte header length")
            (n,) = struct.unpack("<Q", head)
            if n > min(size - 8, MAX_HEADER_BYTES):
                raise ValueError(f"header length {n} does not fit the file")
            header = json.loads(f.read(n).decode("utf-8"))
    except FileNotFoundError:
        raise TensorFormatError(f"shard {path} does not exist; check the path") from None
    except (ValueError, UnicodeDecodeError, RecursionError, OSError) as exc:
        text = " ".join(str(exc).split())[:160] or type(exc).__name__
        raise TensorFormatError(
            f"{path.name} is not a safetensors file ({text}); pass .safetensors shards"
        ) from None
    if not isinstance(header, dict):
        raise TensorFormatError(f"{path.name}: safetensors header is not a JSON object")
    base = 8 + n
    out = {}
    spans = []
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        dtype, shape, begin, end = _entry(path, name, entry)
        if dtype not in DTYPES:
            raise TensorFormatError(
                f"{path.name}: tensor {name} has dtype {dtype[:20]}; only "
                f"{', '.join(DTYPES)} can be imported"
            )
        t = SafeTensor(path, name, dtype, shape, base + begin)
        if end - begin != t.nbytes or base + end > size:
            raise TensorFormatError(
                f"{path.name}: tensor {name} needs bytes {base + begin}..{base + end} of a "
                f"{size}-byte file (its shape needs {t.nbytes}); the file is truncated or damaged"
            )
        out[name] = t
        if end > begin:
            spans.append((begin, end, name))
    spans.sort()
    for (_, end_a, a), (begin_b, _, b) in zip(spans, spans[1:], strict=False):
        if begin_b < end_a:
            raise TensorFormatError(
                f"{path.name}: tensors {a} and {b} overlap in the file; the file is damaged"
            )
    return out

"""Safe `.npy` file access: header checks before mapping, and streamed writing.

A checkpoint file is checked before any byte of data is used: it must be a `.npy` file, its
dtype must not hold Python objects (those are pickles), and its size must match the size its
header announces, so a truncated download fails with a message instead of a short memmap.
Writing goes header-first then chunk by chunk through an ordinary file, so writing a
multi-GB tensor needs only one chunk of memory (a `w+` memmap would keep every written page
resident in this process). A writer only creates new files and fsyncs them when closed.
Reading opens only regular files, without blocking, so a FIFO in place of a tensor is named
instead of hanging the reader.
"""

from __future__ import annotations

import functools
import io
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pccx_flow import files
from pccx_flow.errors import TensorFormatError


@dataclass(frozen=True)
class NpyHeader:
    """What a `.npy` header says about its array."""

    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool
    data_offset: int

    @property
    def data_bytes(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n * self.dtype.itemsize


def open_regular(path: Path, what: str):
    """Open `path` for reading only if it is a regular file (a FIFO or device is refused).

    `pccx_flow.files.open_regular` with this module's messages. `FileNotFoundError` passes
    through so callers can report a missing tensor their way.
    """
    try:
        return files.open_regular(path)
    except FileNotFoundError:
        raise
    except files.NotRegularFile:
        raise TensorFormatError(
            f"{what}: {path.name} is not a regular file (a FIFO, device or folder); "
            "replace it with the .npy file"
        ) from None
    except OSError as exc:
        raise TensorFormatError(
            f"{what}: cannot open {path.name} ({exc.strerror or exc}); check the file"
        ) from None


MAGIC_LEN = 8  # b"\x93NUMPY" + major + minor version bytes
MAX_HEADER_BYTES = 10_000  # numpy's own default limit (np.load's max_header_size)


@functools.lru_cache(maxsize=4096)
def _parse_header(head: bytes) -> tuple[tuple, bool, np.dtype]:
    """numpy's parse of a whole `.npy` header, memoised by its bytes.

    Parsing costs ~0.2 ms (an `ast.literal_eval`); E4B's ~1,200 files share a few dozen
    distinct headers (every layer's tensors have the same shapes), so opening a checkpoint
    parses each distinct header once.
    """
    f = io.BytesIO(head)
    version = np.lib.format.read_magic(f)
    if version == (1, 0):
        return np.lib.format.read_array_header_1_0(f)
    if version in ((2, 0), (3, 0)):
        return np.lib.format.read_array_header_2_0(f)
    raise ValueError(f"unsupported .npy version {version}")


def read_header(path: Path, what: str) -> NpyHeader:
    """Read and check the header of `path`; `what` names the tensor in error messages.

    Only the header is read: the file size is compared with the size the header announces,
    so a truncated file is named without reading any data.
    """
    with open_regular(path, what) as f:
        try:
            prefix = f.read(MAGIC_LEN)
            if len(prefix) < MAGIC_LEN or prefix[:6] != b"\x93NUMPY":
                raise ValueError("no .npy magic string at the start")
            size_len = 2 if prefix[6] == 1 else 4
            raw_len = f.read(size_len)
            if len(raw_len) < size_len:
                raise ValueError("file ends inside the header length")
            n = int.from_bytes(raw_len, "little")
            if n > MAX_HEADER_BYTES:
                raise ValueError(f"header of {n} bytes; numpy headers are at most a few kB")
            text = f.read(n)
            if len(text) < n:
                raise ValueError("file ends inside the header")
            shape, fortran, dtype = _parse_header(prefix + raw_len + text)
            offset = MAGIC_LEN + size_len + n
        except Exception as exc:  # noqa: BLE001 - numpy's parser of untrusted text raises
            # ValueError, SyntaxError, tokenize.TokenError, RecursionError, MemoryError, ...
            text = " ".join(str(exc).split())[:200]
            raise TensorFormatError(
                f"{what}: {path.name} is not a readable .npy file ({text}); rewrite it with "
                "numpy.save"
            ) from None
        actual = os.fstat(f.fileno()).st_size
    if dtype.hasobject:
        raise TensorFormatError(
            f"{what}: {path.name} holds Python objects (a pickle); refused, store plain numbers"
        )
    if dtype.itemsize == 0 or any(int(d) < 0 for d in shape):
        raise TensorFormatError(
            f"{what}: {path.name} has a negative dimension or an empty dtype in its header "
            f"(shape {list(shape)}, dtype {dtype}); rewrite it with numpy.save"
        )
    header = NpyHeader(tuple(int(d) for d in shape), dtype, bool(fortran), offset)
    expected = offset + header.data_bytes
    if actual < expected:
        raise TensorFormatError(
            f"{what}: {path.name} is truncated: expected {expected} bytes, file has {actual}"
        )
    return header


def open_readonly(path: Path, what: str) -> tuple[np.ndarray, NpyHeader]:
    """Check `path` and memory-map it read-only (never unpickles)."""
    header = read_header(path, what)
    if header.data_bytes == 0:
        return np.zeros(header.shape, header.dtype), header
    array = np.load(path, mmap_mode="r", allow_pickle=False)
    return array, header


class NpyWriter:
    """Write one `.npy` file row chunk by row chunk; the chunks must fill the shape exactly."""

    def __init__(self, path: Path, dtype: np.dtype, shape: tuple[int, ...]) -> None:
        self.path = Path(path)
        self.dtype = np.dtype(dtype)
        self.shape = tuple(shape)
        n = 1
        for d in self.shape:
            n *= d
        self._remaining = n * self.dtype.itemsize
        # "x": create a new file, never open an existing one (nor follow a symlink there).
        self._file = open(self.path, "xb")  # noqa: SIM115 - closed in close()
        header = {
            "descr": np.lib.format.dtype_to_descr(self.dtype),
            "fortran_order": False,
            "shape": self.shape,
        }
        np.lib.format.write_array_header_1_0(self._file, header)

    def write(self, chunk: np.ndarray) -> int:
        """Append `chunk` (C order, this file's dtype); returns the bytes written."""
        data = np.ascontiguousarray(chunk, dtype=self.dtype)
        if data.nbytes > self._remaining:
            raise ValueError(f"{self.path.name}: more data than the shape {self.shape} holds")
        self._file.write(data.data)
        self._remaining -= data.nbytes
        return data.nbytes

    def close(self) -> None:
        """Flush the file to disk (fsync) and close it; raise if the shape is not filled."""
        try:
            self._file.flush()
            os.fsync(self._file.fileno())
        finally:
            self._file.close()
        if self._remaining:
            raise ValueError(f"{self.path.name}: {self._remaining} bytes short of {self.shape}")

    def __enter__(self) -> NpyWriter:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is None:
            self.close()
        else:
            self._file.close()


def save_npy(path: Path, array: np.ndarray) -> int:
    """Write a small array in one go through `NpyWriter`; returns bytes of data written."""
    array = np.ascontiguousarray(array)
    with NpyWriter(path, array.dtype, array.shape) as w:
        return w.write(array)

"""Writing a checkpoint directory: output-folder safety, tensor files, manifest last.

Shared by the synthetic writer and the Hugging Face importer so both produce exactly the
layout `checkpoint.open_checkpoint` reads. The manifest is written last (through a temporary
name and an atomic rename), so a directory with a manifest is always complete.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from pccx_flow.errors import TensorFormatError, WeightsError
from pccx_flow.model.config import Gemma3nConfig
from pccx_flow.model.tensors import TensorSpec
from pccx_flow.weights.checkpoint import (
    FORMAT_NAME,
    FORMAT_VERSION,
    MANIFEST_NAME,
    scale_path,
    tensor_path,
)
from pccx_flow.weights.npy import NpyWriter, save_npy


def prepare_output_dir(out: Path | str, *, force: bool) -> Path:
    """Create `out`, or reuse it when empty; a non-empty folder needs ``force=True``.

    With `force`, the old manifest is removed first so the folder never claims to be a
    complete checkpoint while its files are being rewritten; other files are overwritten only
    when a tensor of the same name is written, never deleted.
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise WeightsError(f"output {out} exists and is not a directory; choose another --out")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise WeightsError(
            f"output directory {out} is not empty; choose an empty one or pass --force to "
            "overwrite the checkpoint in it"
        )
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WeightsError(f"cannot create output directory {out}: {exc.strerror}") from None
    (out / MANIFEST_NAME).unlink(missing_ok=True)
    return out


class TensorFileWriter:
    """Writes one tensor in row chunks, packed INT4 (+ scales) or float32 in its logical shape.

    INT4 chunks arrive already packed with their scales; the scales ([rows] float32, at most a
    megabyte) are collected and written when the tensor is closed.
    """

    def __init__(self, out: Path, spec: TensorSpec, storage: str) -> None:
        self.spec = spec
        self.storage = storage
        self._rows_written = 0
        shape = spec.shape
        if storage == "int4":
            if len(shape) != 2 or shape[1] % 2:
                raise TensorFormatError(f"tensor {spec.key} {list(shape)} cannot be stored INT4")
            self._data = NpyWriter(tensor_path(out, spec.key), np.uint8, (shape[0], shape[1] // 2))
            self._scales = np.empty(shape[0], dtype=np.float32)
            self._scale_path = scale_path(out, spec.key)
        else:
            self._data = NpyWriter(tensor_path(out, spec.key), np.float32, shape)
            scale_path(out, spec.key).unlink(missing_ok=True)  # stale scales of an old INT4 form

    def write_int4(self, packed: np.ndarray, scale: np.ndarray) -> int:
        n = packed.shape[0]
        self._scales[self._rows_written : self._rows_written + n] = scale
        self._rows_written += n
        return self._data.write(packed) + 4 * n

    def write_float32(self, chunk: np.ndarray) -> int:
        return self._data.write(chunk)

    def close(self) -> None:
        self._data.close()
        if self.storage == "int4":
            save_npy(self._scale_path, self._scales)


def write_manifest(
    out: Path, config: Gemma3nConfig, mode: str, storages: dict[str, str], specs, extra=None
) -> Path:
    """Write ``manifest.json`` (last step of every writer); `storages` maps key -> storage."""
    shapes = {t.key: list(t.shape) for t in specs}
    manifest = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "mode": mode,
        "preset": config.name,
        "config": config.to_dict(),
        "tensors": {k: {"storage": storages[k], "shape": shapes[k]} for k in storages},
    }
    if extra:
        manifest.update(extra)
    tmp = out / (MANIFEST_NAME + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, out / MANIFEST_NAME)
    return out / MANIFEST_NAME

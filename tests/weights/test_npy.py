"""`.npy` header checks: only regular files, sane headers, sizes that match; never a hang."""

from __future__ import annotations

import io
import os
import shutil
import threading

import numpy as np
import pytest

from pccx_flow.errors import TensorFormatError, WeightsError
from pccx_flow.weights.checkpoint import MANIFEST_NAME, open_checkpoint, tensor_path
from pccx_flow.weights.npy import read_header


def finishes(fn, seconds: float = 10.0):
    """Run `fn` in a daemon thread; return its exception (or None). Fails if it hangs."""
    box = {}

    def target():
        try:
            fn()
        except BaseException as exc:  # noqa: BLE001 - handed back to the test
            box["exc"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(seconds)
    assert not t.is_alive(), f"{fn} hung"
    return box.get("exc")


def npy_bytes(shape, descr="<f4") -> bytes:
    f = io.BytesIO()
    header = {"descr": descr, "fortran_order": False, "shape": shape}
    np.lib.format.write_array_header_1_0(f, header)
    return f.getvalue()


@pytest.fixture
def ckpt_copy(tiny_ckpt_dir, tmp_path):
    return shutil.copytree(tiny_ckpt_dir, tmp_path / "ck")


def test_negative_shape_is_one_line(tmp_path):
    path = tmp_path / "neg.npy"
    path.write_bytes(npy_bytes((-3, 4)) + b"\0" * 64)
    with pytest.raises(TensorFormatError, match=r"negative dimension.*\[-3, 4\]"):
        read_header(path, "tensor x")


def test_absurd_size_is_called_truncated(tmp_path):
    path = tmp_path / "huge.npy"
    path.write_bytes(npy_bytes((1 << 40, 1 << 20)))
    with pytest.raises(TensorFormatError, match="truncated: expected"):
        read_header(path, "tensor x")


def test_fifo_as_a_tensor_file_is_refused_not_waited_on(ckpt_copy):
    path = tensor_path(ckpt_copy, "layers.4.mlp.up_proj.weight")
    path.unlink()
    os.mkfifo(path)
    exc = finishes(lambda: open_checkpoint(ckpt_copy))
    assert isinstance(exc, TensorFormatError)
    assert "not a regular file" in str(exc) and "layers.4.mlp.up_proj" in str(exc)


def test_fifo_or_device_as_the_manifest_is_refused(ckpt_copy):
    manifest = ckpt_copy / MANIFEST_NAME
    manifest.unlink()
    os.mkfifo(manifest)
    exc = finishes(lambda: open_checkpoint(ckpt_copy))
    assert isinstance(exc, WeightsError) and "not a regular file" in str(exc)
    manifest.unlink()
    manifest.symlink_to("/dev/zero")
    exc = finishes(lambda: open_checkpoint(ckpt_copy))
    assert isinstance(exc, WeightsError) and "not a regular file" in str(exc)


def test_manifest_with_a_billion_layers_is_refused_at_once(ckpt_copy):
    import json

    manifest = json.loads((ckpt_copy / MANIFEST_NAME).read_text())
    manifest["config"]["n_layers"] = 1_000_000_000
    (ckpt_copy / MANIFEST_NAME).write_text(json.dumps(manifest))
    exc = finishes(lambda: open_checkpoint(ckpt_copy))
    assert "n_layers = 1000000000 is outside its plausible range 1..1024" in str(exc)

"""Reading a checkpoint back, both storage forms, pickling, and every bad input it must refuse."""

from __future__ import annotations

import json
import pickle
import shutil

import numpy as np
import pytest

from pccx_flow.errors import (
    ConfigError,
    InputError,
    MissingTensorError,
    TensorFormatError,
    WeightsError,
)
from pccx_flow.model.config import get_config
from pccx_flow.model.tensors import KEY_PREFIX
from pccx_flow.weights.checkpoint import MANIFEST_NAME, open_checkpoint, scale_path, tensor_path
from pccx_flow.weights.int4 import dequantize_rows, unpack_int4

GATE = "layers.2.mlp.gate_proj.weight"


@pytest.fixture
def ckpt_copy(tiny_ckpt_dir, tmp_path):
    """A private copy of the tiny checkpoint that a test may damage."""
    return shutil.copytree(tiny_ckpt_dir, tmp_path / "ckpt")


def test_shapes_and_dtypes(tiny_ckpt):
    for key in list(tiny_ckpt.keys()):
        spec = tiny_ckpt.spec(key)
        t = tiny_ckpt.tensor(key)
        assert t.shape == spec.shape and t.dtype == np.float32, key
    assert tiny_ckpt.config == get_config("tiny")


def test_rows_equal_tensor_slice(tiny_ckpt):
    for key in ("embed_tokens.weight", GATE, "altup_projections.1.weight"):
        full = tiny_ckpt.tensor(key)
        np.testing.assert_array_equal(tiny_ckpt.rows(key, 3, 11), full[3:11])
        assert tiny_ckpt.rows(key, 5, 5).shape == (0, full.shape[1])


def test_int4_view_matches_files(tiny_ckpt, tiny_ckpt_dir):
    packed, scale = tiny_ckpt.int4(GATE)
    assert packed.dtype == np.uint8 and packed.shape == (256, 32)
    raw = np.load(tensor_path(tiny_ckpt_dir, GATE), allow_pickle=False)
    raw_scale = np.load(scale_path(tiny_ckpt_dir, GATE), allow_pickle=False)
    np.testing.assert_array_equal(packed, raw)
    # independent dequantisation: spec §0 written out with shifts, not the module's table
    lo = (raw & 0x0F).astype(np.int16)
    hi = (raw >> 4).astype(np.int16)
    lo[lo > 7] -= 16
    hi[hi > 7] -= 16
    q = np.stack([lo, hi], axis=-1).reshape(raw.shape[0], -1)
    np.testing.assert_array_equal(unpack_int4(raw), q)
    np.testing.assert_allclose(tiny_ckpt.tensor(GATE), q * raw_scale[:, None], rtol=1e-6)


def test_full_key_accepted_and_fresh_arrays(tiny_ckpt):
    a = tiny_ckpt.tensor(KEY_PREFIX + "norm.weight")
    a[:] = 0
    assert tiny_ckpt.tensor("norm.weight").any()


def test_shared_arrays_are_read_only(tiny_ckpt):
    assert not tiny_ckpt.float32("norm.weight").flags.writeable
    packed, scale = tiny_ckpt.int4(GATE)
    assert not packed.flags.writeable and not scale.flags.writeable


def test_wrong_accessor_raises(tiny_ckpt):
    with pytest.raises(TensorFormatError, match="stored float32"):
        tiny_ckpt.int4("norm.weight")
    with pytest.raises(TensorFormatError, match="stored INT4"):
        tiny_ckpt.float32(GATE)
    with pytest.raises(MissingTensorError, match="not a tensor"):
        tiny_ckpt.tensor("layers.99.mlp.gate_proj.weight")
    with pytest.raises(InputError, match="out of range"):
        tiny_ckpt.rows("embed_tokens.weight", 500, 513)
    with pytest.raises(TensorFormatError, match="1-D"):
        tiny_ckpt.rows("norm.weight", 0, 1)


def test_pickles_as_path_and_config(tiny_ckpt):
    tiny_ckpt.tensor(GATE)  # opens a memmap
    blob = pickle.dumps(tiny_ckpt)
    assert len(blob) < 2000
    other = pickle.loads(blob)
    assert other.path == tiny_ckpt.path and other.config == tiny_ckpt.config
    np.testing.assert_array_equal(other.rows(GATE, 0, 4), tiny_ckpt.rows(GATE, 0, 4))


def _restate(ckpt_dir, key: str, storage: str) -> None:
    """Make the manifest say what the tensor's file now holds."""
    path = ckpt_dir / MANIFEST_NAME
    manifest = json.loads(path.read_text())
    manifest["tensors"][key]["storage"] = storage
    path.write_text(json.dumps(manifest))


def test_float32_form_of_an_int4_tensor_is_accepted(ckpt_copy):
    ref = open_checkpoint(ckpt_copy).tensor(GATE)
    np.save(tensor_path(ckpt_copy, GATE), ref * 2)
    scale_path(ckpt_copy, GATE).unlink()
    with pytest.raises(TensorFormatError, match="says storage 'int4' but its file holds float32"):
        open_checkpoint(ckpt_copy)  # the manifest still says int4: a lie is refused
    _restate(ckpt_copy, GATE, "float32")
    ck = open_checkpoint(ckpt_copy)
    assert ck.storage(GATE) == "float32"
    np.testing.assert_array_equal(ck.tensor(GATE), ref * 2)
    np.testing.assert_array_equal(ck.rows(GATE, 1, 3), ref[1:3] * 2)


def test_int4_form_of_a_float32_matrix_is_accepted(ckpt_copy):
    from pccx_flow.weights.int4 import quantize_rows

    key = "altup_projections.0.weight"
    w = open_checkpoint(ckpt_copy).tensor(key)
    packed, scale = quantize_rows(w)
    np.save(tensor_path(ckpt_copy, key), packed)
    np.save(scale_path(ckpt_copy, key), scale)
    _restate(ckpt_copy, key, "int4")
    ck = open_checkpoint(ckpt_copy)
    assert ck.storage(key) == "int4"
    np.testing.assert_array_equal(ck.tensor(key), dequantize_rows(packed, scale))


def test_minimal_manifest_takes_a_preset_or_infers_the_config(ckpt_copy, tiny_config):
    (ckpt_copy / "manifest.json").write_text('{"mode": "int4"}')
    ck = open_checkpoint(ckpt_copy, tiny_config)
    assert ck.tensor("norm.weight").shape == (64,) and ck.config_note is None
    inferred = open_checkpoint(ckpt_copy)
    assert inferred.config == tiny_config  # tiny's shapes: tiny's unseen fields too
    assert "as preset tiny" in inferred.config_note and "max_seq=64" in inferred.config_note


def test_config_that_disagrees_with_manifest(tiny_ckpt_dir):
    with pytest.raises(ConfigError, match="hidden"):
        open_checkpoint(tiny_ckpt_dir, get_config("e4b"))


def test_missing_or_bad_manifest(ckpt_copy, tmp_path):
    (ckpt_copy / "manifest.json").write_text("{not json")
    with pytest.raises(WeightsError, match="not valid JSON"):
        open_checkpoint(ckpt_copy)
    (ckpt_copy / "manifest.json").write_text('{"mode": "int8"}')
    with pytest.raises(WeightsError, match="mode"):
        open_checkpoint(ckpt_copy)
    (ckpt_copy / "manifest.json").unlink()
    (ckpt_copy / "norm.weight.npy.tmp").write_bytes(b"")
    with pytest.raises(WeightsError, match="being written"):
        open_checkpoint(ckpt_copy)
    (tmp_path / "empty").mkdir()
    with pytest.raises(WeightsError, match="not a checkpoint"):
        open_checkpoint(tmp_path / "empty")
    with pytest.raises(WeightsError, match="not a directory"):
        open_checkpoint(tmp_path / "nowhere")


def test_missing_tensor_is_named_when_the_checkpoint_is_opened(ckpt_copy):
    tensor_path(ckpt_copy, GATE).unlink()
    with pytest.raises(MissingTensorError, match=f"{GATE}.*missing"):
        open_checkpoint(ckpt_copy)


def test_missing_scales(ckpt_copy):
    scale_path(ckpt_copy, GATE).unlink()
    with pytest.raises(MissingTensorError, match="scales"):
        open_checkpoint(ckpt_copy).int4(GATE)


def test_truncated_file(ckpt_copy):
    path = tensor_path(ckpt_copy, GATE)
    size = path.stat().st_size
    with open(path, "r+b") as f:
        f.truncate(size - 10)
    with pytest.raises(TensorFormatError, match=f"truncated: expected {size} bytes, file has"):
        open_checkpoint(ckpt_copy).rows(GATE, 0, 1)


def test_wrong_shape(ckpt_copy):
    np.save(tensor_path(ckpt_copy, GATE), np.zeros((256, 16), np.uint8))
    with pytest.raises(TensorFormatError, match=r"uint8 \[256, 16\], expected"):
        open_checkpoint(ckpt_copy).tensor(GATE)


def test_wrong_dtype(ckpt_copy):
    good = tensor_path(ckpt_copy, "norm.weight").read_bytes()
    np.save(tensor_path(ckpt_copy, "norm.weight"), np.ones(64, np.float64))
    with pytest.raises(TensorFormatError, match="float64"):
        open_checkpoint(ckpt_copy).tensor("norm.weight")
    tensor_path(ckpt_copy, "norm.weight").write_bytes(good)
    np.save(scale_path(ckpt_copy, GATE), np.ones(256, np.float16))
    with pytest.raises(TensorFormatError, match="scales"):
        open_checkpoint(ckpt_copy).tensor(GATE)


def test_pickle_bearing_files_refused(ckpt_copy):
    np.save(tensor_path(ckpt_copy, "norm.weight"), np.array([{"x": 1}] * 64, dtype=object))
    with pytest.raises(TensorFormatError, match="pickle"):
        open_checkpoint(ckpt_copy).tensor("norm.weight")
    np.save(tensor_path(ckpt_copy, "norm.weight"), np.ones(64, np.float32))
    with open(tensor_path(ckpt_copy, "layers.0.input_layernorm.weight"), "wb") as f:
        pickle.dump(np.ones(64, np.float32), f)
    with pytest.raises(TensorFormatError, match="not a readable .npy"):
        open_checkpoint(ckpt_copy).tensor("layers.0.input_layernorm.weight")


def test_manifest_is_read_again_after_unpickling(ckpt_copy):
    ck = pickle.loads(pickle.dumps(open_checkpoint(ckpt_copy)))
    on_disk = json.loads((ckpt_copy / "manifest.json").read_text())
    assert ck.manifest == on_disk

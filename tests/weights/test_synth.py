"""Synthetic checkpoints: deterministic per seed, every tensor randomised, sensible storage."""

from __future__ import annotations

import filecmp
import json

import numpy as np
import pytest

from pccx_flow.errors import InputError, WeightsError
from pccx_flow.model.tensors import tensor_manifest
from pccx_flow.weights.checkpoint import open_checkpoint
from pccx_flow.weights.synth import write_synthetic_checkpoint


def _files(d):
    return sorted(p.name for p in d.iterdir())


def test_same_seed_is_byte_identical_and_other_seed_differs(tmp_path, tiny_config, tiny_ckpt_dir):
    again = write_synthetic_checkpoint(tiny_config, 0, tmp_path / "a", progress=False)
    assert _files(again) == _files(tiny_ckpt_dir)
    match, mismatch, errors = filecmp.cmpfiles(again, tiny_ckpt_dir, _files(again), shallow=False)
    assert not mismatch and not errors and len(match) == len(_files(again))

    other = write_synthetic_checkpoint(tiny_config, 1, tmp_path / "b", progress=False)
    npy = [n for n in _files(other) if n.endswith(".npy")]
    differing = [n for n in npy if not filecmp.cmp(other / n, again / n, shallow=False)]
    assert differing == npy


def test_every_tensor_randomised(tiny_ckpt):
    for key in list(tiny_ckpt.keys()):
        t = tiny_ckpt.tensor(key)
        assert np.isfinite(t).all(), key
        assert np.unique(t).size > 1, f"{key} is constant"
        spec = tiny_ckpt.spec(key)
        if len(spec.shape) == 1:  # gammas and altup_scale: positive, spread around a centre
            assert t.min() > 0, key
            assert t.std() / t.mean() > 0.1, key


def test_layers_differ_from_each_other(tiny_ckpt):
    a = tiny_ckpt.tensor("layers.0.input_layernorm.weight")
    b = tiny_ckpt.tensor("layers.1.input_layernorm.weight")
    assert not np.array_equal(a, b)


def test_storage_follows_manifest_and_is_int4_exactly_there(tiny_ckpt, tiny_config):
    for spec in tensor_manifest(tiny_config):
        assert tiny_ckpt.storage(spec.key) == spec.storage, spec.key


def test_int4_rows_have_distinct_scales(tiny_ckpt):
    _, scale = tiny_ckpt.int4("layers.0.mlp.gate_proj.weight")
    assert np.unique(scale).size == scale.size


def test_manifest_written(tiny_ckpt_dir, tiny_config):
    m = json.loads((tiny_ckpt_dir / "manifest.json").read_text())
    assert m["format"] == "pccx-split-npy" and m["version"] == 1 and m["mode"] == "int4"
    assert m["preset"] == "tiny" and m["config"] == tiny_config.to_dict()
    assert m["tensors"]["embed_tokens.weight"] == {"storage": "int4", "shape": [512, 64]}
    assert len(m["tensors"]) == len(tensor_manifest(tiny_config))


def test_refuses_non_empty_directory_unless_forced(tmp_path, tiny_config):
    out = tmp_path / "x"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    with pytest.raises(WeightsError, match="not empty.*--force"):
        write_synthetic_checkpoint(tiny_config, 0, out, progress=False)
    write_synthetic_checkpoint(tiny_config, 0, out, progress=False, force=True)
    assert (out / "keep.txt").read_text() == "mine"
    assert open_checkpoint(out).tensor("norm.weight").shape == (64,)


def test_output_that_is_a_file_and_bad_seed(tmp_path, tiny_config):
    f = tmp_path / "f"
    f.write_text("")
    with pytest.raises(WeightsError, match="not a directory"):
        write_synthetic_checkpoint(tiny_config, 0, f, progress=False)
    with pytest.raises(InputError, match="seed"):
        write_synthetic_checkpoint(tiny_config, -1, tmp_path / "y", progress=False)


def test_small_chunks_are_deterministic_and_aligned(tmp_path, tiny_config, monkeypatch):
    from pccx_flow.weights import synth

    monkeypatch.setattr(synth, "CHUNK_ELEMENTS", 200)  # several chunks per matrix
    a = write_synthetic_checkpoint(tiny_config, 5, tmp_path / "a", progress=False)
    b = write_synthetic_checkpoint(tiny_config, 5, tmp_path / "b", progress=False)
    for p in sorted(a.glob("*.npy")):
        assert p.read_bytes() == (b / p.name).read_bytes(), p.name
    ck = open_checkpoint(a)
    _, scale = ck.int4("embed_tokens.weight")  # 512 rows of 64: chunks of 3 rows
    assert np.unique(scale).size == scale.size
    w = ck.tensor("embed_tokens.weight")
    # each row is integer levels in -7..7 times its own row's scale
    q = w / scale[:, None]
    np.testing.assert_allclose(q, np.rint(q), atol=1e-5)
    assert np.abs(np.rint(q)).max() == 7

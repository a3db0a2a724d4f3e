"""verify_checkpoint: one line per problem, optional unused K/V, extra files as notes."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from pccx_flow.errors import ConfigError
from pccx_flow.model.config import get_config
from pccx_flow.weights.checkpoint import scale_path, tensor_path
from pccx_flow.weights.verify import inspect_checkpoint, verify_checkpoint


@pytest.fixture
def ckpt_copy(tiny_ckpt_dir, tmp_path):
    return shutil.copytree(tiny_ckpt_dir, tmp_path / "ckpt")


def test_clean_checkpoint(tiny_ckpt_dir, tiny_config):
    report = inspect_checkpoint(tiny_ckpt_dir)
    assert report.problems == [] and report.notes == []
    assert report.config == tiny_config
    assert report.n_tensors == 24 * 10 + 11
    assert report.n_bytes == sum(p.stat().st_size for p in tiny_ckpt_dir.glob("*.npy"))


def test_each_problem_is_one_line(ckpt_copy):
    tensor_path(ckpt_copy, "layers.1.mlp.up_proj.weight").unlink()  # missing
    np.save(tensor_path(ckpt_copy, "norm.weight"), np.ones(65, np.float32))  # shape
    np.save(tensor_path(ckpt_copy, "layers.0.input_layernorm.weight"), np.ones(64))  # dtype
    with open(tensor_path(ckpt_copy, "layers.2.mlp.down_proj.weight"), "r+b") as f:
        f.truncate(200)  # truncated
    np.save(
        tensor_path(ckpt_copy, "layers.3.input_layernorm.weight"),
        np.array([None] * 64, dtype=object),
    )  # pickle-bearing
    bad = np.ones(64, np.float32)
    bad[3] = np.nan
    np.save(tensor_path(ckpt_copy, "layers.4.input_layernorm.weight"), bad)
    problems = verify_checkpoint(ckpt_copy)
    assert len(problems) == 6
    assert all("\n" not in p for p in problems)
    text = "\n".join(problems)
    for needle in ("up_proj.weight is missing", "float32 [64]", "float64", "truncated", "pickle"):
        assert needle in text
    assert "layers.4.input_layernorm.weight: NaN" in text


def test_unused_kv_weights_are_optional_but_checked_when_present(ckpt_copy):
    for k in ("layers.7.self_attn.k_proj.weight", "layers.7.self_attn.v_proj.weight"):
        tensor_path(ckpt_copy, k).unlink()
        scale_path(ckpt_copy, k).unlink()
    assert verify_checkpoint(ckpt_copy) == []
    np.save(tensor_path(ckpt_copy, "layers.8.self_attn.k_proj.weight"), np.zeros(3, np.uint8))
    assert len(verify_checkpoint(ckpt_copy)) == 1


def test_extra_files_are_notes(ckpt_copy):
    (ckpt_copy / "README.txt").write_text("hi")
    report = inspect_checkpoint(ckpt_copy)
    assert report.problems == []
    assert report.notes == ["unknown file README.txt (not a tensor of tiny; ignored)"]


def test_manifest_problems(ckpt_copy, tiny_config):
    (ckpt_copy / "manifest.json").write_text('{"mode": "int4"}')
    with pytest.raises(ConfigError, match="its tensors have hidden=64 but config 'e4b'"):
        verify_checkpoint(ckpt_copy, get_config("e4b"))  # the shapes contradict the preset
    assert verify_checkpoint(ckpt_copy, tiny_config) == []
    (ckpt_copy / "manifest.json").unlink()
    report = inspect_checkpoint(ckpt_copy)
    assert report.problems == [] and report.config == tiny_config
    assert report.notes[0].startswith("config inferred from tensor shapes")
    tensor_path(ckpt_copy, "embed_tokens.weight").unlink()
    problems = verify_checkpoint(ckpt_copy)
    assert len(problems) == 1 and "pass --preset NAME or --config FILE" in problems[0]


def test_a_manifest_that_lies_about_a_tensor_is_caught(tiny_ckpt_dir, tmp_path):
    import json
    import shutil

    import pytest

    from pccx_flow.errors import TensorFormatError, WeightsError
    from pccx_flow.weights.checkpoint import MANIFEST_NAME, open_checkpoint
    from pccx_flow.weights.verify import verify_checkpoint

    key = "layers.0.mlp.gate_proj.weight"
    for change, said, error in [
        ({"shape": [7, 7]}, "has shape [7, 7] but the config needs", TensorFormatError),
        ({"storage": "float32"}, "says storage 'float32' but its file holds int4",
         TensorFormatError),
        (None, "lists tensor 'layers.99.nope', which config", WeightsError),
    ]:  # fmt: skip
        ck = tmp_path / f"ck{len(said)}"
        shutil.copytree(tiny_ckpt_dir, ck)
        manifest = json.loads((ck / MANIFEST_NAME).read_text())
        if change is None:
            manifest["tensors"]["layers.99.nope"] = {"storage": "int4", "shape": [1, 2]}
        else:
            manifest["tensors"][key].update(change)
        (ck / MANIFEST_NAME).write_text(json.dumps(manifest))
        assert any(said in p for p in verify_checkpoint(ck)), said
        with pytest.raises(error, match=said.replace("[", r"\[").replace("]", r"\]")):
            open_checkpoint(ck)

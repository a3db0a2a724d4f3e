"""`pccx-flow weights ...` through the real dispatcher: exit codes, one-line errors."""

from __future__ import annotations

import json
import pickle
import shutil
import struct

import numpy as np
import pytest

from pccx_flow.cli.main import main
from pccx_flow.errors import ConfigError, TensorFormatError
from pccx_flow.model.config import get_config
from pccx_flow.weights.checkpoint import open_checkpoint, tensor_path


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def assert_one_line_error(code, err):
    assert code != 0
    assert len(err.strip().splitlines()) == 1, err
    assert "Traceback" not in err


def test_synth_then_verify(tmp_path, capsys, tiny_ckpt_dir):
    code, out, err = run(
        capsys, "weights", "synth", "--preset", "tiny", "--seed", "0", "--out", str(tmp_path / "c")
    )
    assert code == 0 and "wrote tiny" in out
    name = tensor_path(tmp_path / "c", "layers.0.mlp.gate_proj.weight").name
    assert (tmp_path / "c" / name).read_bytes() == (tiny_ckpt_dir / name).read_bytes()
    code, out, err = run(capsys, "weights", "verify", str(tmp_path / "c"))
    assert code == 0
    assert out.startswith("ok: 251 tensors, ") and out.strip().endswith("GB, preset tiny")


def test_synth_refuses_non_empty_dir(tmp_path, capsys):
    (tmp_path / "x").write_text("keep")
    code, _, err = run(capsys, "weights", "synth", "--preset", "tiny", "--out", str(tmp_path))
    assert_one_line_error(code, err)
    assert "--force" in err and (tmp_path / "x").read_text() == "keep"


def test_unknown_preset(tmp_path, capsys):
    code, _, err = run(capsys, "weights", "synth", "--preset", "e9b", "--out", str(tmp_path / "c"))
    assert_one_line_error(code, err)
    assert "unknown preset 'e9b'" in err and "e4b, tiny" in err
    with pytest.raises(ConfigError, match="e9b"):
        get_config("e9b")
    code, _, err = run(capsys, "weights", "verify", str(tmp_path), "--preset", "e9b")
    assert_one_line_error(code, err)


def test_verify_reports_problems_with_exit_1(tiny_ckpt_dir, tmp_path, capsys):
    ck = shutil.copytree(tiny_ckpt_dir, tmp_path / "ck")
    tensor_path(ck, "layers.1.mlp.up_proj.weight").unlink()
    np.save(tensor_path(ck, "norm.weight"), np.ones(64, np.float64))
    (ck / "notes.txt").write_text("")
    code, out, err = run(capsys, "weights", "verify", str(ck))
    assert code == 1 and err == ""
    lines = out.strip().splitlines()
    assert lines[0].startswith("note: unknown file notes.txt")
    assert len(lines) == 3
    assert "float64" in lines[1] and "up_proj.weight is missing" in lines[2]  # manifest order


def test_verify_of_a_missing_folder_is_a_usage_error(tmp_path, capsys):
    code, out, err = run(capsys, "weights", "verify", str(tmp_path / "nowhere"))
    assert_one_line_error(code, err)
    assert code == 2 and err.startswith("pccx-flow: error: ") and "is not a folder" in err
    assert out == ""


def test_verify_without_config(tiny_ckpt_dir, tmp_path, capsys):
    ck = shutil.copytree(tiny_ckpt_dir, tmp_path / "ck")
    (ck / "manifest.json").write_text(json.dumps({"mode": "int4"}))
    code, out, _ = run(capsys, "weights", "verify", str(ck))
    note, ok = out.strip().splitlines()
    assert code == 0 and ok.startswith("ok: 251 tensors") and ok.endswith("preset tiny")
    assert note.startswith("note: config inferred from tensor shapes: hidden=64 ffn=256")
    code, out, _ = run(capsys, "weights", "verify", str(ck), "--preset", "tiny")
    assert code == 0 and out.startswith("ok:")


@pytest.mark.parametrize("damage", ["pickle", "truncated", "shape"])
def test_damaged_file_fails_verify_and_read(tiny_ckpt_dir, tmp_path, capsys, damage):
    ck = shutil.copytree(tiny_ckpt_dir, tmp_path / "ck")
    path = tensor_path(ck, "layers.0.mlp.gate_proj.weight")
    if damage == "pickle":
        np.save(path, np.array([object()] * 4, dtype=object))
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[:-1])
    else:
        np.save(path, np.zeros((3, 3), np.uint8))
    code, out, _ = run(capsys, "weights", "verify", str(ck))
    assert code == 1 and len(out.strip().splitlines()) == 1
    with pytest.raises(TensorFormatError):
        open_checkpoint(ck).tensor("layers.0.mlp.gate_proj.weight")


def _write_shard(path, tensors: dict) -> None:
    """Minimal safetensors encoder: {name: (dtype name, array)}."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, arr) in tensors.items():
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {
            "dtype": dtype,
            "shape": list(arr.shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def _tiny_hf_tensors(ckpt) -> dict:
    out = {}
    for key in list(ckpt.keys()):
        spec = ckpt.spec(key)
        x = ckpt.tensor(key)
        out["model." + key] = ("F32", np.ascontiguousarray(x.T if spec.hf_transposed else x))
    return out


@pytest.mark.parametrize("bad", ["missing", "truncated", "shape", "dtype", "pickle", "nowhere"])
def test_import_bad_inputs_are_one_line_errors(tmp_path, capsys, tiny_ckpt, bad):
    tensors = _tiny_hf_tensors(tiny_ckpt)
    shard = tmp_path / "model.safetensors"
    key = "model.layers.3.mlp.up_proj.weight"
    if bad == "missing":
        del tensors[key]
    elif bad == "shape":
        tensors[key] = ("F32", tensors[key][1].reshape(128, 128))
    elif bad == "dtype":
        tensors[key] = ("I32", tensors[key][1].view(np.int32))
    _write_shard(shard, tensors)
    if bad == "truncated":
        shard.write_bytes(shard.read_bytes()[:-4])
    elif bad == "pickle":
        shard.write_bytes(pickle.dumps(tensors))
    src = str(tmp_path / "nowhere") if bad == "nowhere" else str(shard)
    code, _, err = run(
        capsys, "weights", "import", src, "--out", str(tmp_path / "o"), "--preset", "tiny"
    )
    assert_one_line_error(code, err)
    expected = {
        "missing": "layers.3.mlp.up_proj.weight",
        "truncated": "truncated",
        "shape": "[128, 128]",
        "dtype": "I32",
        "pickle": "not a safetensors file",
        "nowhere": "does not exist",
    }[bad]
    assert expected in err
    assert not (tmp_path / "o" / "manifest.json").exists()


def test_import_with_preset(tmp_path, capsys, tiny_ckpt):
    st = pytest.importorskip("safetensors.numpy")
    tensors = {}
    for key in list(tiny_ckpt.keys()):
        spec = tiny_ckpt.spec(key)
        x = tiny_ckpt.tensor(key)
        tensors["model.language_model." + key] = np.ascontiguousarray(
            x.T if spec.hf_transposed else x
        )
    st.save_file(tensors, str(tmp_path / "model.safetensors"))
    code, out, err = run(
        capsys,
        "weights",
        "import",
        str(tmp_path / "model.safetensors"),
        "--out",
        str(tmp_path / "o"),
        "--preset",
        "tiny",
        "--no-quantize",
        "--no-progress",
    )
    assert code == 0, err
    back = open_checkpoint(tmp_path / "o")
    np.testing.assert_array_equal(
        back.tensor("altup_projections.2.weight"), tiny_ckpt.tensor("altup_projections.2.weight")
    )


def test_help_has_examples(capsys):
    for argv in (
        ["weights", "--help"],
        ["weights", "synth", "--help"],
        ["weights", "import", "--help"],
        ["weights", "verify", "--help"],
    ):
        with pytest.raises(SystemExit) as e:
            main(argv)
        assert e.value.code == 0
        assert "examples:" in capsys.readouterr().out

"""Checkpoints as pccx writes them: no manifest, a partial one, configs from files or shapes."""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import replace

import pytest

from pccx_flow.cli.main import main
from pccx_flow.errors import ConfigError, WeightsError
from pccx_flow.model.config import get_config
from pccx_flow.weights.checkpoint import (
    load_config_file,
    open_checkpoint,
    scale_path,
    tensor_path,
)
from pccx_flow.weights.infer import infer_config
from pccx_flow.weights.synth import write_synthetic_checkpoint
from pccx_flow.weights.verify import inspect_checkpoint

# What a pccx export of a small model looks like: the per-layer table as large as the main
# one, and every layer sparse. Neither preset has these shapes.
PCCX_LIKE = replace(get_config("tiny"), name="pccx-like", vocab_per_layer=512, n_sparse_layers=10)


@pytest.fixture(scope="module")
def pccx_export(tmp_path_factory):
    """A split-.npy folder without manifest.json, written for `PCCX_LIKE`."""
    out = tmp_path_factory.mktemp("pccx-export") / "ck"
    write_synthetic_checkpoint(PCCX_LIKE, seed=3, out=out, progress=False)
    (out / "manifest.json").unlink()
    return out


@pytest.fixture
def export_copy(pccx_export, tmp_path):
    return shutil.copytree(pccx_export, tmp_path / "ck")


def _snapshot(directory):
    return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in directory.iterdir()}


def test_shapes_give_every_dimension_and_name_the_assumed_fields(pccx_export):
    inferred = infer_config(pccx_export)
    c = inferred.config
    for field in ("hidden", "ffn", "n_layers", "n_q_heads", "n_kv_heads", "head_dim", "vocab"):
        assert getattr(c, field) == getattr(PCCX_LIKE, field), field
    assert (c.vocab_per_layer, c.ple_dim, c.laurel_rank, c.altup_streams) == (512, 8, 16, 4)
    # not in the shapes: E4B's proportions for 10 layers (KV sharing from 5, 3 sparse)
    assert inferred.assumed == {"first_kv_shared_layer": 5, "n_sparse_layers": 3, "max_seq": 8192}
    line = inferred.describe()
    assert "\n" not in line and "assumed first_kv_shared_layer=5, n_sparse_layers=3" in line
    assert "--config FILE" in line


def test_config_file_sets_what_shapes_cannot_show(pccx_export, tmp_path):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"n_sparse_layers": 10}))
    ck = open_checkpoint(pccx_export, load_config_file(cfg))
    assert ck.config.n_sparse_layers == 10 and ck.config.vocab_per_layer == 512
    assert "n_sparse_layers" not in ck.config_note.split("assumed")[1]
    assert ck.tensor("embed_tokens_per_layer.weight").shape == (512, 80)


def test_a_preset_the_shapes_contradict_is_refused_in_one_line(pccx_export):
    with pytest.raises(ConfigError, match="vocab_per_layer=512 but config 'tiny'") as exc:
        open_checkpoint(pccx_export, get_config("tiny"))
    assert "drop --preset" in str(exc.value) and "\n" not in str(exc.value)
    with pytest.raises(ConfigError, match="hidden"):
        open_checkpoint(pccx_export, {"hidden": 128})  # a field the tensors fix


def test_left_out_kv_weights_show_where_kv_sharing_starts(export_copy):
    for i in range(5, 10):
        for proj in ("k_proj", "v_proj"):
            tensor_path(export_copy, f"layers.{i}.self_attn.{proj}.weight").unlink()
            scale_path(export_copy, f"layers.{i}.self_attn.{proj}.weight").unlink()
    inferred = infer_config(export_copy)
    assert inferred.config.first_kv_shared_layer == 5
    assert "first_kv_shared_layer" not in inferred.assumed


def test_reading_never_writes_into_the_folder(pccx_export):
    before = _snapshot(pccx_export)
    ck = open_checkpoint(pccx_export, {"n_sparse_layers": 10})
    for key in ck.keys()[:20]:
        ck.tensor(key)
    inspect_checkpoint(pccx_export, {"n_sparse_layers": 10})
    assert _snapshot(pccx_export) == before


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"n_sparse_layer": 10}', "unknown config fields n_sparse_layer"),
        ('{"n_sparse_layers": "10"}', "n_sparse_layers must be a int"),
        ('{"n_sparse_layers": true}', "n_sparse_layers must be a int"),
        ('{"rms_eps": [1]}', "rms_eps must be a float"),
        ("[1, 2]", "must be a JSON object"),
        ("{not json", "not valid JSON"),
    ],
)
def test_bad_config_files_are_one_line_errors(tmp_path, text, message):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(text)
    with pytest.raises((ConfigError, WeightsError), match=message):
        load_config_file(cfg)


def test_a_fifo_as_config_file_is_refused_without_blocking(tmp_path):
    fifo = tmp_path / "cfg.json"
    os.mkfifo(fifo)
    with pytest.raises(WeightsError, match="not a regular file"):
        load_config_file(fifo)


def test_unresolvable_folders_say_what_to_pass(export_copy):
    tensor_path(export_copy, "layers.0.mlp.gate_proj.weight").unlink()
    with pytest.raises(WeightsError, match="gate_proj.weight.npy.*pass --preset NAME or --config"):
        open_checkpoint(export_copy)
    (export_copy / "model.language_model.norm.weight.npy.part").write_bytes(b"")
    with pytest.raises(WeightsError, match="still being written"):
        open_checkpoint(export_copy)


def test_run_and_verify_a_manifestless_export_with_a_config_file(pccx_export, tmp_path, capsys):
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"n_sparse_layers": 10}))
    code = main(["weights", "verify", str(pccx_export), "--config", str(cfg)])
    out, _ = capsys.readouterr()
    assert code == 0 and out.splitlines()[-1].startswith("ok: 251 tensors")
    argv = ["run", "--weights", str(pccx_export), "--config", str(cfg), "--steps", "4"]
    # float64: the executed graph and the reference decode must agree to 1e-9 (float32 runs
    # of this checkpoint can differ by 3e-3 where a sparse-gate or float16 KV element flips)
    code = main([*argv, "--check", "--precision", "float64", "--no-progress"])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert err.startswith("note: config inferred from tensor shapes") and "Traceback" not in err
    generated = next(line for line in out.splitlines() if line.startswith("generated ids:"))
    assert len(generated.split(":")[1].split(",")) == 4
    assert "check against the reference decode: OK" in out


def test_run_on_an_unresolvable_folder_is_one_line(export_copy, capsys):
    tensor_path(export_copy, "embed_tokens.weight").unlink()
    code = main(["run", "--weights", str(export_copy), "--steps", "1"])
    _, err = capsys.readouterr()
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert "pass --preset NAME or --config FILE" in err
    code = main(["run", "--synthetic", "tiny", "--config", "cfg.json"])
    _, err = capsys.readouterr()
    assert code == 2 and "--synthetic already names its preset" in err

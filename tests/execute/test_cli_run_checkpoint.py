"""`pccx-flow run`: the checkpoint is judged, and the prompt checked, before any work."""

from __future__ import annotations

import importlib
import shutil

import pytest

from pccx_flow.cli.main import main
from pccx_flow.weights import synth
from pccx_flow.weights.checkpoint import tensor_path


def test_bad_prompt_id_fails_before_the_synthetic_checkpoint_is_written(capsys, monkeypatch):
    def never(*args, **kwargs):
        raise AssertionError("the synthetic checkpoint was written before the prompt check")

    monkeypatch.setattr(synth, "write_synthetic_checkpoint", never)
    rc = main(["run", "--synthetic", "e4b", "--prompt-ids", "999999", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2
    assert (
        err == "pccx-flow: error: token id 999999 out of range: the e4b vocabulary has ids "
        "0..262399\n"
    )


def test_empty_weights_is_named(capsys):
    rc = main(["run", "--weights", "", "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err == (
        "pccx-flow: error: --weights is empty; give a checkpoint folder, e.g. --weights ckpt/tiny\n"
    )


def test_a_truncated_last_layer_tensor_is_named_before_any_step(
    tiny_ckpt_dir, tmp_path, capsys, monkeypatch
):
    generate = importlib.import_module("pccx_flow.execute.generate")
    ck = shutil.copytree(tiny_ckpt_dir, tmp_path / "ck")
    path = tensor_path(ck, "layers.9.mlp.down_proj.weight")
    path.write_bytes(path.read_bytes()[:-1])
    monkeypatch.setattr(generate, "generate", pytest.fail)  # no step may start
    rc = main(["run", "--weights", str(ck), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2
    assert err.count("\n") == 1
    assert "layers.9.mlp.down_proj.weight" in err and "truncated" in err

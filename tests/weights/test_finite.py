"""Non-finite and overflowing weights are a failure naming the tensor, on every path."""

from __future__ import annotations

import shutil

import numpy as np
import pytest

from pccx_flow.cli.main import main
from pccx_flow.errors import TensorFormatError
from pccx_flow.weights.checkpoint import open_checkpoint, scale_path, tensor_path
from pccx_flow.weights.finite import MAX_ABS_VALUE, scale_problem, value_problem
from pccx_flow.weights.verify import verify_checkpoint

GATE = "layers.0.mlp.gate_proj.weight"
NORM = "layers.0.input_layernorm.weight"


def test_value_problems():
    assert value_problem(np.ones((3, 4), np.float32)) is None
    assert value_problem(np.array([1.0, np.nan])) == "NaN or infinite values"
    assert value_problem(np.array(np.inf)) == "NaN or infinite values"
    assert "3e+38" in value_problem(np.array([3e38], np.float32))
    assert value_problem(np.array([MAX_ABS_VALUE])) is None
    assert scale_problem(np.array([MAX_ABS_VALUE / 8])) is None
    assert scale_problem(np.array([MAX_ABS_VALUE / 4])) is not None  # scale * 8 overflows


@pytest.fixture
def damaged(tiny_ckpt_dir, tmp_path):
    out = tmp_path / "ck"
    shutil.copytree(tiny_ckpt_dir, out)
    return out


def _poke(path, index, value) -> None:
    a = np.load(path)
    a.reshape(-1)[index] = value
    np.save(path, a)


@pytest.mark.parametrize(
    ("where", "value", "said"),
    [
        ("scale", np.nan, "scales of " + GATE + ": NaN"),
        ("scale", 1e30, "scales of " + GATE + ": values up to 1e+30"),
        ("norm", np.inf, "tensor " + NORM + ": NaN"),
        ("norm", 3e38, "tensor " + NORM + ": values up to 3e+38"),
    ],
)
def test_verify_and_open_name_the_tensor(damaged, where, value, said):
    path = scale_path(damaged, GATE) if where == "scale" else tensor_path(damaged, NORM)
    _poke(path, 3, value)
    assert any(said in p for p in verify_checkpoint(damaged))
    ck = open_checkpoint(damaged)  # headers only: the values are read on first use
    key = GATE if where == "scale" else NORM
    with pytest.raises(TensorFormatError, match=said.split(": ")[0]):
        ck.tensor(key)


def test_run_emulate_and_emit_golden_fail_naming_the_tensor(damaged, tmp_path, capsys):
    _poke(scale_path(damaged, GATE), 0, np.nan)
    prog = tmp_path / "s.prog"
    assert main(["emit", "--preset", "tiny", "--position", "2", "-o", str(prog)]) == 0
    capsys.readouterr()
    runs = [
        ["run", "--weights", str(damaged), "--steps", "1"],
        ["emulate", str(prog), "--weights", str(damaged)],
        ["emit", "--preset", "tiny", "--position", "2", "-o", str(prog), "--golden",
         str(tmp_path / "gold"), "--weights", str(damaged)],
    ]  # fmt: skip
    for argv in runs:
        assert main(argv) != 0, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"scales of {GATE}: NaN" in err, (argv, err)
    assert not (tmp_path / "gold").exists()


def test_dispatch_fails_on_non_finite_logits(tiny_ckpt_dir, tmp_path, capsys, monkeypatch):
    """Logits that hold NaN (an overflow, or a device fault) are a failed step, not argmax 0."""
    from pccx_flow.board.device import run_step as run_step_module

    prog = tmp_path / "s.prog"
    assert main(["emit", "--preset", "tiny", "--position", "1", "-o", str(prog)]) == 0
    real = run_step_module.step_result

    def poisoned(*args, **kwargs):
        result = real(*args, **kwargs)
        result.logits[5] = np.nan
        return result

    monkeypatch.setattr(run_step_module, "step_result", poisoned)
    capsys.readouterr()
    code = main(["dispatch", str(prog), "--weights", str(tiny_ckpt_dir), "--fake-device"])
    err = capsys.readouterr().err
    assert code == 2 and "the logits read back from" in err and "first at token id 5" in err

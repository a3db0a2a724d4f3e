"""`pccx-flow run`: tokens, per-step CPU times, --check exit codes and one-line errors."""

from __future__ import annotations

import pytest

from pccx_flow.cli.main import main
from pccx_flow.reference.generate import generate as reference_generate


def _generated(out: str) -> list[int]:
    line = next(x for x in out.splitlines() if x.startswith("generated ids:"))
    return [int(t) for t in line.split(":")[1].strip().split(",")]


def test_synthetic_run_with_check_prints_reference_tokens(tiny_ckpt, capsys):
    rc = main(["run", "--synthetic", "tiny", "--prompt-ids", "2,105", "--steps", "2",
               "--check", "--no-progress"])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0
    # The CLI's synthetic checkpoint (seed 0) is the session's tiny checkpoint.
    assert _generated(out) == reference_generate(tiny_ckpt, [2, 105], 2).tokens
    assert "not an NPU estimate" in out and "reference decode: OK" in out
    assert out.count(" same") == 3  # three decode steps, each with the same argmax


def test_float64_check_holds_each_step_to_1e_9(tiny_ckpt_dir, capsys):
    rc = main(["run", "--weights", str(tiny_ckpt_dir), "--prompt-ids", "2,105", "--steps", "2",
               "--check", "--precision", "float64", "--no-progress"])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0
    assert "activations in float64" in out and "OK (tolerance 1e-09" in out
    diffs = [float(line.split()[3]) for line in out.splitlines() if line.endswith("  ok")]
    assert len(diffs) == 3 and max(diffs) <= 1e-9


def test_unknown_precision_is_a_usage_error(tiny_ckpt_dir, capsys):
    with pytest.raises(SystemExit) as info:
        main(["run", "--weights", str(tiny_ckpt_dir), "--precision", "float16"])
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert "invalid choice: 'float16'" in err and "Traceback" not in err


def test_check_failure_exits_one(tiny_ckpt_dir, capsys, monkeypatch):
    import pccx_flow.execute.compare as rules

    monkeypatch.setattr(rules, "step_verdict", lambda *args: False)  # every step disagrees
    rc = main(["run", "--weights", str(tiny_ckpt_dir), "--steps", "1", "--check",
               "--no-progress", "--fuse", "--policy", "critical-path"])  # fmt: skip
    assert rc == 1
    assert "FAILED" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--weights", "/nonexistent/ckpt"], "is not a directory"),
        (["--prompt-ids", "2,x"], "not a comma-separated list"),
        (["--prompt-ids", "600"], "token id 600 out of range"),
        (["--steps", "64", "--prompt-ids", "1,2"], "KV cache holds 64"),
        (["--scheduler", "localhost:8786"], "is not an address"),
        (["--prompt-ids=--5"], "not a comma-separated list"),
        (["--prompt-ids", "²"], "not a comma-separated list"),
        (["--weights", ""], "--weights is empty"),
        (["--semantics", "pccx", "--policy", "no-such-policy"], "unknown policy"),
    ],
)
def test_bad_input_is_one_line_and_exit_two(tiny_ckpt_dir, capsys, args, message):
    base = ["run", "--no-progress", "--steps", "1"]
    if "--weights" not in args:
        base += ["--weights", str(tiny_ckpt_dir)]
    rc = main(base + args)
    err = capsys.readouterr().err
    assert rc == 2
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--temperature", "-1"], "argument --temperature: -1 is out of range; give 0 or"),
        (["--temperature", "1e-320"], "argument --temperature: 1e-320 is out of range"),
        (["--tolerance", "0"], "argument --tolerance: 0 is out of range"),
        (["--steps", "²"], "argument --steps: '²' is not an integer"),
    ],
)
def test_bad_numbers_are_one_usage_line(tiny_ckpt_dir, capsys, args, message):
    with pytest.raises(SystemExit) as info:
        main(["run", "--no-progress", "--weights", str(tiny_ckpt_dir), *args])
    err = capsys.readouterr().err
    assert info.value.code == 2
    assert message in err and "see `pccx-flow run --help`" in err
    assert err.count("\n") == 1


def test_run_on_a_scheduler_address(tiny_ckpt, tiny_ckpt_dir, capsys):
    """--scheduler tcp://...: one client for the run; tokens as the reference's."""
    from distributed import LocalCluster

    with LocalCluster(
        processes=False,
        n_workers=1,
        threads_per_worker=2,
        protocol="tcp",
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",  # None would still serve :8787
        worker_dashboard_address="127.0.0.1:0",
    ) as cluster:
        address = cluster.scheduler_address
        assert address.startswith("tcp://127.0.0.1:")
        rc = main(["run", "--weights", str(tiny_ckpt_dir), "--steps", "2", "--fuse",
                   "--no-progress", "--scheduler", address])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 0 and "(distributed;" in out
    assert _generated(out) == reference_generate(tiny_ckpt, [2], 2).tokens


def test_every_run_option_has_help(capsys):
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    text = capsys.readouterr().out
    assert "gemma3n: the published Gemma 3n" in " ".join(text.split())


def test_a_failed_float32_check_points_at_float64_and_the_tolerance(tiny_ckpt, capsys):
    rc = main(["run", "--synthetic", "tiny", "--prompt-ids", "2", "--steps", "1", "--check",
               "--tolerance", "1e-15", "--no-progress"])  # fmt: skip
    out = capsys.readouterr().out
    assert rc == 1 and "check against the reference decode: FAILED" in out
    hint = out.strip().splitlines()[-1]
    assert "--precision float64" in hint and "--tolerance above" in hint
    largest = float(hint.split("--tolerance above ")[1].split()[0])
    assert largest > 1e-15
    rc = main(["run", "--synthetic", "tiny", "--prompt-ids", "2", "--steps", "1", "--check",
               "--no-progress"])  # fmt: skip
    assert rc == 0 and "--tolerance above" not in capsys.readouterr().out

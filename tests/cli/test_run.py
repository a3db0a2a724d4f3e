"""`pccx-flow run --dashboard --keep-open`: the table first, then the page until Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from pccx_flow.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
KEPT_OPEN = re.compile(
    r"dashboard kept open at (http://127\.0\.0\.1:\d+/pccx-lanes) — Ctrl-C to close"
)


def test_keep_open_without_dashboard_is_a_usage_error(capsys):
    assert cli_main.main(["run", "--synthetic", "tiny", "--keep-open"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "pccx-flow: error: --keep-open keeps the --dashboard page up; add --dashboard or drop it\n"
    )


def test_keep_open_prints_the_table_serves_the_page_and_closes_on_ctrl_c():
    pytest.importorskip("bokeh")
    argv = ["run", "--synthetic", "tiny", "--steps", "1", "--fuse", "--no-progress"]
    proc = subprocess.Popen(
        [sys.executable, "-m", "pccx_flow", *argv, "--dashboard", "--keep-open"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=ENV,
    )
    try:
        lines = []
        deadline = time.monotonic() + 120
        for line in proc.stdout:
            lines.append(line)
            if KEPT_OPEN.search(line) or time.monotonic() > deadline:
                break
        out = "".join(lines)
        found = KEPT_OPEN.search(out)
        assert found, out
        # The run's results come before the line, and the run is over: nothing is pending.
        assert out.index("generated ids: ") < found.start()
        assert re.search(r"^\s+0\s+\d+\.\d+\s+\d+\.\d+$", out, re.M)
        with urllib.request.urlopen(found.group(1), timeout=30) as page:
            assert page.status == 200
            assert "<title>pccx lanes</title>" in page.read().decode()
        time.sleep(1.0)  # still up a while after the run
        assert proc.poll() is None
        proc.send_signal(signal.SIGINT)
        t0 = time.monotonic()
        rest, err = proc.communicate(timeout=20)
        took = time.monotonic() - t0
    finally:
        proc.kill()
    assert proc.returncode == 0, err  # a deliberate close, not an interruption
    assert took < 10
    assert rest == "" and "Traceback" not in err and "interrupted" not in err


def test_backend_emulator_runs_the_program_words_and_passes_the_check(tiny_ckpt_dir, capsys):
    argv = ["run", "--weights", str(tiny_ckpt_dir), "--prompt-ids", "2,7", "--steps", "2",
            "--check", "--backend", "emulator", "--no-progress"]  # fmt: skip
    assert cli_main.main(argv) == 0
    out = capsys.readouterr().out
    assert re.search(r"emulated 3 programs \(critical-path, v002-spec\): \d+-\d+ words", out)
    assert "(pccx v002 emulator, spec numerics; not an NPU estimate), executing the program" in out
    assert "check against the reference decode: OK" in out


def test_backend_emulator_on_the_as_built_target_is_judged_by_the_bf16_rule(tiny_ckpt_dir, capsys):
    argv = ["run", "--weights", str(tiny_ckpt_dir), "--prompt-ids", "2,7", "--steps", "2",
            "--check", "--backend", "emulator", "--policy", "heft", "--profile",
            "v002-as-built", "--no-progress"]  # fmt: skip
    assert cli_main.main(argv) == 0
    out = capsys.readouterr().out
    assert re.search(r"emulated 3 programs \(heft, v002-as-built\)", out)
    assert "check against the reference decode: OK (BF16 in L2" in out


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--backend", "emulator", "--fuse"], "--fuse is an option of the dask backend"),
        (["--numerics", "rtl"], "--numerics is an option of --backend emulator"),
    ],
)
def test_backend_options_that_do_not_mix_are_usage_errors(extra, message, capsys):
    assert cli_main.main(["run", "--synthetic", "tiny", *extra]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pccx-flow: error: " + message) and err.count("\n") == 1

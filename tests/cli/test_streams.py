"""A closed, full or broken stdout/stderr: the command still writes its files and exits cleanly."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
SCHEDULE = [sys.executable, "-m", "pccx_flow", "schedule", "--preset", "tiny", "--layers", "0:1"]


def _run(argv, **fds) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=ENV, timeout=120, check=False, **fds)


def test_closed_stdout_and_stderr_still_write_the_files(tmp_path):
    out = tmp_path / "s.json"
    # close_fds plus pass_fds=() cannot close 1 and 2; a shell can (`>&-`, `2>&-`).
    argv = " ".join(SCHEDULE) + f" --json {out} >&- 2>&-"
    r = _run(["sh", "-c", argv])
    assert r.returncode == 0 and out.is_file() and out.stat().st_size > 0


def test_closed_stderr_keeps_an_error_off_stdout(tmp_path):
    r = _run(["sh", "-c", " ".join(SCHEDULE) + " --policy no-such 2>&-"], capture_output=True)
    assert r.returncode == 2 and r.stdout == b""


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_stderr_loses_the_messages_not_the_work(tmp_path):
    out = tmp_path / "s.json"
    with open("/dev/full", "w") as full:
        r = _run([*SCHEDULE, "--json", str(out)], stdout=subprocess.DEVNULL, stderr=full)
        assert r.returncode == 0 and out.is_file()
        r = _run([*SCHEDULE, "--policy", "no-such"], stdout=subprocess.PIPE, stderr=full)
    assert r.returncode == 2 and r.stdout == b""


def test_a_reader_that_goes_away_is_a_clean_exit():
    r = _run(["sh", "-c", " ".join(SCHEDULE) + " | head -c 1 >/dev/null; exit ${PIPESTATUS:-0}"],
             capture_output=True)  # fmt: skip
    assert r.returncode == 0 and b"Traceback" not in r.stderr

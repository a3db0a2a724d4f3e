"""The command as a user runs it: one line for every error, 130 after Ctrl-C, no noise."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import pytest

from pccx_flow.cli import main as cli_main

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}
COMMAND = [sys.executable, "-m", "pccx_flow"]


def _as_a_terminal_starts_it() -> None:
    """In the child before exec: SIGINT delivered and handled by default, as a shell leaves
    it. A pytest worker's own signal state (handlers, masks) is no state a user's shell has."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _run(*argv: str, stdout=subprocess.PIPE) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*COMMAND, *argv], stdout=stdout, stderr=subprocess.PIPE, text=True, env=ENV, timeout=120
    )


def test_graph_without_an_action_is_one_line(capsys):
    assert cli_main.main(["graph"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        "pccx-flow: error: graph needs an action: export or kernels "
        "(see `pccx-flow graph --help`)\n"
    )


def test_same_file_for_two_outputs_fails_before_work(capsys, tmp_path):
    same = tmp_path / "same.json"
    argv = ["schedule", "--preset", "tiny", "--json", str(same), "--trace", str(same)]
    assert cli_main.main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and not same.exists()
    assert captured.err.startswith("pccx-flow: error: --json and --trace both name")


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_full_stdout_or_output_file_is_one_line():
    with open("/dev/full", "w") as full:
        out = _run("graph", "kernels", stdout=full)
    assert out.returncode == 2
    assert out.stderr == "pccx-flow: error: cannot write the output: No space left on device\n"
    out = _run(
        "graph",
        "export",
        "--preset",
        "tiny",
        "--layers",
        "0:1",
        "-o",
        "/dev/full",
        "--format",
        "json",
    )
    assert out.returncode == 2
    assert out.stderr == "pccx-flow: error: cannot write /dev/full: No space left on device\n"


def test_warnings_are_held_back_behind_an_error_and_shown_after_success(monkeypatch):
    from pccx_flow.errors import InputError

    def command(fail: bool):
        def func(_args):
            warnings.warn("overflow in something", RuntimeWarning, stacklevel=1)
            if fail:
                raise InputError("bad input")
            return 0

        return func

    for fail, code, shown in ((True, 2, 0), (False, 0, 1)):
        parser = cli_main.build_parser()
        args = parser.parse_args(["graph", "kernels"])
        args.func = command(fail)
        monkeypatch.setattr(parser, "parse_args", lambda _argv, a=args: a)
        monkeypatch.setattr(cli_main, "build_parser", lambda p=parser: p)
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            assert cli_main.main([]) == code
        assert len([w for w in seen if issubclass(w.category, RuntimeWarning)]) == shown


def _wait_for_output(proc: subprocess.Popen, text: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    for line in proc.stdout:
        if text in line:
            return
        assert time.monotonic() < deadline, f"no {text!r} within {timeout} s"
    pytest.fail(f"the command ended without printing {text!r}")


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc")
def test_sigint_while_modules_load_is_one_line():
    # `python -m pccx_flow` imports pccx_flow.cli.main first, whose first act is the handler;
    # the subcommand modules load after it. The signal is sent as soon as numpy's extension is
    # mapped, i.e. while the heavy imports are under way.
    proc = subprocess.Popen(
        [*COMMAND, "run", "--synthetic", "tiny", "--steps", "3", "--no-progress"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
        preexec_fn=_as_a_terminal_starts_it,
    )
    try:
        deadline = time.monotonic() + 60
        while "numpy" not in Path(f"/proc/{proc.pid}/maps").read_text():
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.002)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert (proc.returncode, err) == (130, "pccx-flow: interrupted\n")


def test_sigint_during_run_dashboard_is_one_line():
    pytest.importorskip("bokeh")
    argv = ["run", "--synthetic", "tiny", "--dashboard", "--steps", "60", "--no-progress"]
    proc = subprocess.Popen(
        [*COMMAND, *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=ENV,
        preexec_fn=_as_a_terminal_starts_it,
    )
    try:
        _wait_for_output(proc, "dashboard: http://127.0.0.1:")
        time.sleep(2)  # into the decode steps, with the cluster's event loop running
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)  # clean-up is cut short after a few seconds
    finally:
        proc.kill()
    assert (proc.returncode, err) == (130, "pccx-flow: interrupted\n")


@pytest.mark.slow
def test_ctrl_c_of_a_compare_with_workers_is_one_line_once(tmp_path):
    """Ctrl-C in a terminal reaches the whole process group: the command and the Dask
    worker processes it spawned. Only the command says so."""
    journal = tmp_path / "sweep.jsonl"
    argv = ["compare", "--dags", "random:400", "--policies", "all", "--workers", "2",
            "--exact-max-nodes", "0", "--results", str(journal), "--no-progress"]  # fmt: skip
    proc = subprocess.Popen(
        [*COMMAND, *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env=ENV, start_new_session=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while not (journal.exists() and journal.read_text().count("\n") >= 1):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.1)
        os.killpg(proc.pid, signal.SIGINT)  # what the terminal does
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert (proc.returncode, err) == (130, "pccx-flow: interrupted\n")


_ORPHANS = """
import asyncio, gc, sys
from pccx_flow.cli import main
if sys.argv[1] == "quiet":
    main.quiet_orphaned_timeouts()
loop = asyncio.new_event_loop()
for exc in (TimeoutError("Timeout"), ValueError("a real fault")):
    fut = loop.create_future()
    fut.set_exception(exc)
    del fut
    gc.collect()
loop.close()
"""


@pytest.mark.parametrize("quiet", [False, True])
def test_an_orphaned_timeout_of_a_teardown_is_not_printed(quiet):
    """asyncio logs an exception no one retrieved when its future is collected; Dask's
    teardown on a loaded machine leaves such TimeoutErrors behind the command's last line.
    The filter drops those and nothing else (without it both are printed)."""
    mode = "quiet" if quiet else "plain"
    r = subprocess.run([sys.executable, "-c", _ORPHANS, mode], capture_output=True, text=True,
                       timeout=60, env=ENV)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "a real fault" in r.stderr
    assert ("TimeoutError: Timeout" in r.stderr) is not quiet, r.stderr

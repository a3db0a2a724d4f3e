"""`pccx-flow`: one subcommand per use.

Each subcommand lives in its own module `pccx_flow.cli.<name>` that exposes
``register(subparsers) -> None`` (adds its parser and sets ``func``) and whose ``func(args)``
returns an exit code. This module only dispatches and turns `PccxFlowError` into one line on
stderr and a non-zero exit, so no user error ever shows a traceback.
"""

from __future__ import annotations

import os
import signal
import sys
import threading


def _interrupted(_signum=None, _frame=None) -> None:
    """SIGINT: say so once, silence stderr, let clean-up run, and never wait on it for long.

    Stderr is pointed at /dev/null so the tracebacks that threads and event loops (Dask's
    dashboard cluster) print while they are torn down never reach the user; a second SIGINT,
    or clean-up taking more than `_CLEANUP_SECONDS`, ends the process at once with 130.
    """
    global _announced
    if _announced:
        os._exit(130)
    _announced = True
    try:
        if not _quiet:
            os.write(2, b"pccx-flow: interrupted\n")
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)
    except OSError:
        pass
    timer = threading.Timer(_CLEANUP_SECONDS, os._exit, (130,))
    timer.daemon = True
    timer.start()
    raise KeyboardInterrupt


_announced = False
_quiet = False  # a worker process of ours: the user's process says the one line
_CLEANUP_SECONDS = 5.0


# First thing when started as the program: a SIGINT while the modules below load gives the
# same one line. (Imported as a library, nothing is installed until `main` runs.)
# A SIGINT ignored by whoever started us (nohup, a background job) stays ignored.
def _install() -> signal.Handlers | None:
    if threading.current_thread() is not threading.main_thread():
        return None
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        return None
    return signal.signal(signal.SIGINT, _interrupted)


def _started_as_the_program() -> bool:
    """True in the process the user started, and in the worker processes multiprocessing
    (Dask's local cluster) spawns from it, which re-run the program's main module."""
    return os.path.basename(sys.argv[0] if sys.argv else "") in ("pccx-flow", "__main__.py")


def _a_worker_process() -> bool:
    """A process multiprocessing started (a Ctrl-C in a terminal reaches it too): it is
    silenced and cleaned up like the user's process but does not say so a second time.
    A spawned child re-runs the main module before it knows its parent; its interpreter's
    own command line (`sys.orig_argv`) says what it is."""
    import multiprocessing

    spawned = "--multiprocessing-fork" in getattr(sys, "orig_argv", ())
    return spawned or multiprocessing.parent_process() is not None


def quiet_worker_process() -> None:
    """Set up a worker process the command started (`pccx_flow.cluster.interrupt_preload`):
    a Ctrl-C silences its stderr and ends it as it ends the user's process, without a second
    line, however the command was started (``python -m`` children never run this module)."""
    global _quiet
    _quiet = True
    _install()
    quiet_orphaned_timeouts()


if _started_as_the_program():
    _quiet = _a_worker_process()
    _install()

import argparse  # noqa: E402
import errno  # noqa: E402
import importlib  # noqa: E402
import logging  # noqa: E402
import warnings  # noqa: E402

from pccx_flow import __version__  # noqa: E402
from pccx_flow.errors import PccxFlowError  # noqa: E402

# Order is the order of `pccx-flow --help`.
SUBCOMMANDS = (
    "schedule",
    "compare",
    "explore",
    "check",
    "graph",
    "render",
    "run",
    "weights",
    "trace",
    "emit",
    "disasm",
    "emulate",
    "replay",
    "dispatch",
    "doctor",
    "cosim",
    "isa",
)

EPILOG = """examples:
  pccx-flow schedule --policy critical-path           # E4B step on v002-spec, summary table
  pccx-flow schedule --list                           # every scheduling policy
  pccx-flow compare --dags random:50 --plot p.svg     # policies side by side
  pccx-flow check --profile v002-as-built             # graph invariants and lower bounds
  pccx-flow render --layer 3 -o layer3.svg            # one layer of the DAG
  pccx-flow run --synthetic tiny --steps 8 --check    # execute with Dask, compare to reference
  pccx-flow weights synth --preset tiny --seed 0 --out ckpt/
run `pccx-flow COMMAND --help` for the options and examples of each command."""


class OneLineErrorParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, like every other user error."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


# Writes that fail because there is no room (a full disk, /dev/full, a quota, a size limit).
_WRITE_ERRNOS = {errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO}


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="pccx-flow",
        description="Gemma 3N decode steps as pccx v002 instruction DAGs: build, schedule, "
        "bound, render and execute them.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"pccx-flow {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"pccx_flow.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; every way out is an exit code (130 after SIGINT), never a traceback."""
    from pccx_flow.cli.streams import tolerant_streams

    previous = _install()
    quiet_orphaned_timeouts()
    try:
        with tolerant_streams():
            return _main(argv)
    except KeyboardInterrupt:
        if not _announced:
            print("pccx-flow: interrupted", file=sys.stderr)
        return 130
    finally:
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _main(argv: list[str] | None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    # Warnings (numpy's RuntimeWarning, ...) are held back: after an error line they would
    # only be noise, after a success they are shown at the end.
    with warnings.catch_warnings(record=True) as held:
        try:
            code = int(args.func(args) or 0)
            sys.stdout.flush()
        except PccxFlowError as exc:
            print(f"pccx-flow: error: {exc}", file=sys.stderr)
            return 2
        except BrokenPipeError:
            _drop_stdout()
            return 0
        except OSError as exc:
            if exc.errno not in _WRITE_ERRNOS:
                raise
            _drop_stdout()  # it may be stdout that failed: the final flush must not fail again
            print(f"pccx-flow: error: cannot write the output: {exc.strerror}", file=sys.stderr)
            return 2
    for w in held:
        warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    return code


class OrphanedTimeouts(logging.Filter):
    """Drops asyncio's "Future exception was never retrieved" for a `TimeoutError`.

    On a loaded machine Dask's teardown can give up on a close that waits with a timeout
    (a worker's `BatchedSend.close`, which waits on a `tornado.locks.Event` with one:
    distributed/batched.py) after its waiter was cancelled; the timeout then lands on a future
    nobody holds and asyncio logs it when the future is collected, after the command's own
    last line. It says nothing about the command's result. Every other unretrieved exception
    is still logged.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        orphan = record.getMessage().startswith("Future exception was never retrieved")
        return not (orphan and isinstance(exc, TimeoutError))


_ORPHANED_TIMEOUTS = OrphanedTimeouts()


def quiet_orphaned_timeouts() -> None:
    """Install `OrphanedTimeouts` on the asyncio logger (once per process)."""
    logging.getLogger("asyncio").addFilter(_ORPHANED_TIMEOUTS)  # a no-op when already there


def _drop_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    from pccx_flow.cli.streams import point_at_devnull

    point_at_devnull(sys.stdout)


if __name__ == "__main__":
    sys.exit(main())

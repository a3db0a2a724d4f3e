"""Run a third-party policy in a child process, under a time limit.

A plugin is code we did not write: it may call ``os._exit(0)``, ``sys.exit`` at import, raise
a `BaseException` subclass, sleep or spin forever. None of that may take `pccx-flow` down or
hang it, so a plugin is imported, built and run in a forked child. The parent sends nothing
(the child inherits the problem by fork) and receives plain bytes: JSON with the placements
as node indices, lanes and cycles, or one line of error. Nothing the child sends is unpickled.
The parent then rebuilds the `Schedule` and validates it itself.

A child that dies, sends nothing or runs past its time limit becomes a one-line `PolicyError`
naming the plugin. Built-in policies are our own code and run in-process (no fork cost).
`start_child` alone forks a job and leaves the reading to the caller: the step's bounds are
computed so beside the policy (`pccx_flow.schedule.bounds_beside`).
"""

from __future__ import annotations

import json
import math
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

from pccx_flow.errors import PolicyError

# Seconds a plugin may take to import and build (for `schedule --list` and the early check).
LOAD_TIMEOUT = 20.0

# Default time limit of a plugin run: at least MIN_TIMEOUT, plus SECONDS_PER_NODE per node
# (the built-in policies take well under 1 ms per node on the E4B step).
MIN_TIMEOUT = 30.0
SECONDS_PER_NODE = 0.01

# The largest answer a child may send (an E4B schedule is a few MB of JSON).
MAX_REPLY_BYTES = 512 * 1024 * 1024

# Message tags: progress count, JSON result, a finished one-line error, an exception raised.
_PROGRESS, _RESULT, _FAILED, _RAISED = b"P", b"R", b"F", b"E"
RESULT_TAG = _RESULT  # what `start_child`'s reader sees before a result's JSON


def default_timeout(nodes: int) -> float:
    """The default time limit (seconds) of a plugin scheduling `nodes` nodes."""
    return max(MIN_TIMEOUT, SECONDS_PER_NODE * nodes)


def check_timeout(seconds: float | None) -> float | None:
    """`seconds` if it is a usable time limit (positive, finite), else a `PolicyError`."""
    if seconds is None:
        return None
    if not (isinstance(seconds, int | float) and math.isfinite(seconds) and 0 < seconds <= 1e6):
        raise PolicyError(f"policy time limit {seconds!r}: give a number of seconds in (0, 1e6]")
    return float(seconds)


def _context() -> multiprocessing.context.BaseContext:
    # fork: the child has the problem already and starts in milliseconds.
    return multiprocessing.get_context("fork")


def _send(conn, tag: bytes, payload: bytes = b"") -> None:
    conn.send_bytes(tag + payload)


def _child_main(conn, job: Callable[[Callable[[int], None]], Any]) -> None:
    """Run `job` and send its JSON-able result or one line of error; never return normally."""
    code = 0
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent reports it and stops us
        placed = 0

        def progress(n: int) -> None:
            nonlocal placed
            placed += n
            _send(conn, _PROGRESS, str(placed).encode())

        result = job(progress)
        if isinstance(result, Iterator):  # parts, each sent as soon as it is made
            for part in result:
                _send(conn, _RESULT, json.dumps(part).encode())
        else:
            _send(conn, _RESULT, json.dumps(result).encode())
    except PolicyError as exc:
        _send(conn, _FAILED, str(exc).encode(errors="replace"))
    except BaseException as exc:  # noqa: BLE001 - anything the plugin throws ends here
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        _send(conn, _RAISED, text.encode(errors="replace"))
        code = 1
    finally:
        conn.close()
        os._exit(code)  # no atexit handlers, no parent finalizers run twice


def _one_line(text: str, limit: int = 240) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def start_child(job: Callable[[Callable[[int], None]], Any]) -> tuple[Any, Any]:
    """Fork a child that runs ``job(progress)``; ``(reader, process)``: the end of the pipe
    its messages come on (tagged bytes, `_child_main`) and the process, for the caller to
    read, then kill and join. A job that returns an iterator sends each of its items as
    a result of its own, as soon as it is made."""
    ctx = _context()
    reader, writer = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child_main, args=(writer, job), daemon=True)
    child.start()
    writer.close()  # the child holds the only write end: EOF means it is gone
    return reader, child


def run_in_child(
    job: Callable[[Callable[[int], None]], Any],
    *,
    label: str,
    timeout: float,
    on_progress: Callable[[int], None] | None = None,
) -> Any:
    """``job(progress)`` in a forked child; its JSON-decoded result, or a `PolicyError`.

    `job` reports progress by calling ``progress(n)`` with newly placed nodes; the parent
    passes the running count on to `on_progress`.
    """
    reader, child = start_child(job)
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise PolicyError(
                    f"policy {label} did not finish within {timeout:g} s and was stopped; "
                    "fix the plugin or raise --policy-timeout"
                )
            if not reader.poll(min(left, 0.5)):
                continue
            try:
                message = reader.recv_bytes(MAX_REPLY_BYTES)
            except (EOFError, OSError):
                child.join(1.0)
                code = child.exitcode
                raise PolicyError(
                    f"policy {label} ended its process (exit code {code}) without a result; "
                    "a policy must return from schedule(), not exit"
                ) from None
            tag, payload = message[:1], message[1:]
            if tag == _PROGRESS:
                if on_progress is not None:
                    on_progress(int(payload))
            elif tag == _RESULT:
                return json.loads(payload)
            elif tag == _FAILED:
                raise PolicyError(_one_line(payload.decode(errors="replace")))
            elif tag == _RAISED:
                text = _one_line(payload.decode(errors="replace"))
                raise PolicyError(f"policy {label} raised {text}")
            else:
                raise PolicyError(f"policy {label} sent an unreadable reply")
    finally:
        reader.close()
        if child.is_alive():
            child.kill()
        child.join(5.0)

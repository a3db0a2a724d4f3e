"""Standard streams that may be closed, full or broken: the command still runs and exits cleanly.

``pccx-flow schedule ... >&-`` starts Python with no stdout at all (``sys.stdout`` is None),
``2>/dev/full`` makes every diagnostic line fail, and a reader that went away breaks the
pipe. None of these is a reason to stop writing the files a command was asked for, or to
print a traceback. So before a command runs:

- a closed descriptor 0, 1 or 2 is reopened on ``/dev/null`` (otherwise the next file the
  command opens would get that number, and a child such as Graphviz's ``dot`` would write
  its output into it), and a missing ``sys.stdout``/``sys.stderr`` gets a stream on it;
- stderr is wrapped so that a failing write is dropped: diagnostics that cannot be delivered
  are lost, the work goes on. (A failing stdout still ends the command: that is its output;
  `pccx_flow.cli.main` turns it into an exit code.)
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager


def reopen_closed_descriptors() -> None:
    """Point each closed descriptor of 0, 1, 2 at ``/dev/null``."""
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            try:
                null = os.open(os.devnull, os.O_RDWR)
            except OSError:
                return
            if null != fd:
                os.dup2(null, fd)
                os.close(null)


def point_at_devnull(stream) -> None:
    """Point `stream`'s descriptor at /dev/null, so what is still buffered in it cannot fail
    again when the interpreter flushes it at exit (a stream without one is left as it is)."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, stream.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


class TolerantStream:
    """A text stream whose writes and flushes never raise: a failure silences it."""

    def __init__(self, stream) -> None:
        self._stream = stream
        self.failed = False

    def write(self, text: str) -> int:
        if not self.failed:
            try:
                return self._stream.write(text)
            except (OSError, ValueError):
                self._fail()
        return len(text)

    def flush(self) -> None:
        if not self.failed:
            try:
                self._stream.flush()
            except (OSError, ValueError):
                self._fail()

    def _fail(self) -> None:
        """Silence the stream, and point its descriptor at /dev/null so that what is still
        buffered cannot fail again when the interpreter flushes it at exit."""
        self.failed = True
        point_at_devnull(self._stream)

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextmanager
def tolerant_streams() -> Iterator[None]:
    """Run a command with usable stdout/stderr whatever state they were started in."""
    reopen_closed_descriptors()
    saved = sys.stdout, sys.stderr
    if sys.stdout is None:
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (lives to exit)
    base_err = sys.stderr
    if base_err is None:
        base_err = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 (lives to exit)
    sys.stderr = TolerantStream(base_err)
    try:
        yield
    finally:
        try:
            sys.stderr.flush()
        finally:
            if saved[0] is not None:
                sys.stdout = saved[0]
            sys.stderr = saved[1] if saved[1] is not None else base_err

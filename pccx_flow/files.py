"""Opening user files safely: regular files only, and never blocked by a FIFO.

Checkpoint tensors, manifests, configs, safetensors shards and hardware profiles are all
named by users. A FIFO put where a file belongs would block an ordinary ``open`` forever,
and a link to ``/dev/zero`` would read until memory runs out, so every reader opens with
``O_NONBLOCK`` and checks the type with ``fstat`` on the open descriptor (no gap between
the check and the use). Callers turn the two failures into their own one-line errors.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO


class NotRegularFile(OSError):
    """The path names a FIFO, a device, a folder or another non-regular file."""


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(path: str | Path) -> str | None:
    """What `path` is when it exists and is not a regular file ("a FIFO (named pipe)", "a
    character device", ...), for messages that say so; None for a regular or missing one."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    return next((what for test, what in _KINDS if test(mode)), None)


def open_regular(path: str | Path) -> BinaryIO:
    """Open `path` for binary reading if it is a regular file; `NotRegularFile` otherwise.

    Any other `OSError` of the open (missing file, permissions) passes through unchanged.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise NotRegularFile(f"{path} is not a regular file")
    return os.fdopen(fd, "rb")

"""Writing every output file so that a kill, a full disk or a second writer never half-writes it.

One rule for every file pccx-flow makes (checkpoints follow the same rule for whole folders,
see `pccx_flow.weights.writer`): the content goes to a new temporary file in the same folder,
is flushed and fsynced, and only then renamed over the target, so the target is at every
moment either the complete old file or the complete new one. A rename inside one folder is
atomic on every POSIX file system; a temporary in another folder (``/tmp``) could sit on
another file system, where the rename would be a copy.

Temporaries are named ``.pccx-part-<pid>-<random>.<target name>``: hidden, ending in the
target's own name (so writers that pick the format from the suffix, such as Matplotlib's
``savefig``, still do) and carrying the writer's pid. A temporary whose process is gone was
left by a kill; any later write into the same folder removes it (`remove_stale`).

A set of files that belong together (a program's words and sidecar) is written as temporaries
first and renamed one after another at the end (`replacing_set`), so a kill can only fall in
the short window between renames; readers of such sets check a content hash that ties the
files together (`pccx_flow.board.program.files`).
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import secrets
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

PART_TAG = "pccx-part"
_PART = re.compile(r"\." + PART_TAG + r"-([0-9]+)-[0-9a-f]+\.")


_CLEANED: set[Path] = set()


def temp_path(path: Path) -> Path:
    """A new temporary name beside `path` carrying this process's pid."""
    return path.parent / f".{PART_TAG}-{os.getpid()}-{secrets.token_hex(4)}.{path.name}"


def pid_alive(pid: int) -> bool:
    """Whether a process `pid` exists (a process of another user counts as alive)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OverflowError:
        return False
    return True


def remove_stale(folder: Path) -> list[Path]:
    """Delete the temporaries in `folder` whose writer process no longer exists.

    Temporaries of this process and of running ones are kept (they may be in the middle of a
    write). Returns what was removed; errors (a read-only folder) are ignored, since a stale
    temporary is clutter, never a wrong result.
    """
    removed: list[Path] = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        m = _PART.match(name)
        if m is None:
            continue
        pid = int(m.group(1))
        if pid == os.getpid() or pid_alive(pid):
            continue
        p = Path(folder) / name
        try:
            if p.is_symlink() or not p.is_dir():
                p.unlink()
                removed.append(p)
        except OSError:
            pass
    return removed


def fsync_path(path: Path) -> None:
    """Flush a written file (or folder) to disk; file systems that cannot are let be."""
    flags = os.O_RDONLY | (getattr(os, "O_DIRECTORY", 0) if path.is_dir() else 0)
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            raise
    finally:
        os.close(fd)


def _keep_mode(tmp: Path, target: Path) -> None:
    """Give the new file the permission bits of the file it replaces (a shared 0644 stays)."""
    try:
        st = os.stat(target, follow_symlinks=False)
    except OSError:
        return
    if stat.S_ISREG(st.st_mode):
        os.chmod(tmp, stat.S_IMODE(st.st_mode))


def _finish(tmp: Path, target: Path) -> None:
    if not tmp.exists():
        raise FileNotFoundError(errno.ENOENT, "the writer produced no file", str(target))
    fsync_path(tmp)
    _keep_mode(tmp, target)


def _target(path: Path) -> Path | None:
    """Where the new file goes: `path`, or the file a symlink at `path` points to; None when
    that is not a regular file (``/dev/null``, ``/dev/stdout``, a FIFO), which is written
    directly: renaming over it would replace a device or a pipe with a plain file."""
    real = Path(os.path.realpath(path))
    try:
        st = os.stat(real)
    except FileNotFoundError:
        return real
    except OSError:
        return None
    return real if stat.S_ISREG(st.st_mode) else None


@contextmanager
def folder_lock(folder: Path) -> Iterator[None]:
    """An exclusive lock on `folder` (flock on the folder itself: no lock file to leave), for
    writers of a set of files that must not interleave their renames with another's."""
    fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock (and the kernel does so if the process is killed)


@contextmanager
def replacing_set(paths: list[Path]) -> Iterator[list[Path]]:
    """Yield one temporary per target; when the body returns, put them all in place.

    Every temporary is fsynced before the first rename, and the renames follow in the order
    of `paths`, so put last the file that vouches for the others (a sidecar with their
    hash). On any exception (a full disk, Ctrl-C) the temporaries are deleted and every
    target is left as it was. A symlink is followed (the file it names is replaced, the
    link stays); a target that is not a regular file (``/dev/null``, a FIFO) is yielded
    itself and written in place.
    """
    targets = [_target(Path(p)) for p in paths]
    if any(t is None for t in targets):
        yield [Path(p) for p in paths]
        return
    paths = targets
    for folder in {p.parent for p in paths} - _CLEANED:
        remove_stale(folder)
        _CLEANED.add(folder)  # once per folder and process: golden folders hold 10^4 files
    temps = [temp_path(p) for p in paths]
    try:
        yield temps
        for tmp, target in zip(temps, paths, strict=True):
            _finish(tmp, target)
        for tmp, target in zip(temps, paths, strict=True):
            os.replace(tmp, target)
    except BaseException:
        for tmp in temps:
            with suppress(OSError):
                tmp.unlink()
        raise
    for folder in {p.parent for p in paths}:
        with suppress(OSError):
            fsync_path(folder)


@contextmanager
def replacing(path: Path | str) -> Iterator[Path]:
    """Yield a temporary path to write `path`'s new content to; rename it in place after.

    For writers that take a file name (``savefig``, Graphviz); `write_bytes` and
    `write_text` cover the rest.
    """
    with replacing_set([Path(path)]) as (tmp,):
        yield tmp


def write_temp(tmp: Path, data: bytes) -> None:
    """Write `data` to a path `replacing_set` yielded: a new temporary (created, never
    opened through an existing name), or the device or pipe itself."""
    flags = os.O_WRONLY | getattr(os, "O_CLOEXEC", 0)
    if tmp.name.startswith(f".{PART_TAG}-"):
        flags |= os.O_CREAT | os.O_EXCL
    fd = os.open(tmp, flags, 0o666)
    with os.fdopen(fd, "wb") as f:
        f.write(data)


def write_bytes(path: Path | str, data: bytes) -> None:
    """Replace `path` with `data`, atomically (old content or new, never a mix)."""
    with replacing(path) as tmp:
        write_temp(tmp, data)


def write_text(path: Path | str, text: str, encoding: str = "utf-8") -> None:
    """Replace `path` with `text`, atomically (old content or new, never a mix)."""
    write_bytes(path, text.encode(encoding))

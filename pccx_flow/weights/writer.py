"""Writing a checkpoint directory so that a kill, an error or a full disk never loses one.

Shared by the synthetic writer and the Hugging Face importer so both produce exactly the
layout `checkpoint.open_checkpoint` reads. A writer never touches the target folder while it
works: `staged_checkpoint` gives it a new sibling folder ``.<name>.pccx-tmp-<pid>``, every
tensor chunk is checked (finite values, shape, dtype) as it is written, the finished folder
is fsynced and its headers checked again, and only then is it swapped with the target:

1. ``renameat2(RENAME_EXCHANGE)`` swaps the two folders in one step where the file system
   supports it (Linux ext4, xfs, btrfs, tmpfs); the old checkpoint then sits under the temp
   name and is deleted;
2. elsewhere, old -> ``.<name>.pccx-old-<pid>``, new -> target, delete the backup (restored
   if the second rename fails).

So at every moment the target folder is either the complete old checkpoint or the complete
new one (with the two-rename fallback, a kill between the renames leaves the target absent
and the old one complete under the backup name). The next write to the same target cleans up
such leftovers: a temp folder is deleted (the target is complete, or never existed); a backup
is deleted only when the target is a complete checkpoint, restored when the target is
missing, and otherwise reported and kept. Files are created new (never opened through an
existing name or a symlink), and nothing is written outside the temp folder and the target.
"""

from __future__ import annotations

import ctypes
import errno
import json
import os
import re
import shutil
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from pccx_flow.atomic import pid_alive
from pccx_flow.errors import PccxFlowError, TensorFormatError, WeightsError
from pccx_flow.model.config import Gemma3nConfig
from pccx_flow.model.tensors import KEY_PREFIX, TensorSpec
from pccx_flow.weights.checkpoint import (
    FORMAT_NAME,
    FORMAT_VERSION,
    MANIFEST_NAME,
    PARTIAL_SUFFIXES,
    scale_path,
    tensor_path,
)
from pccx_flow.weights.npy import NpyWriter, save_npy

TMP_TAG = "pccx-tmp"
OLD_TAG = "pccx-old"


def sibling(out: Path, tag: str, pid: int | None = None) -> Path:
    """The hidden sibling folder ``.<name>.<tag>-<pid>`` a write of `out` uses."""
    return out.parent / f".{out.name}.{tag}-{os.getpid() if pid is None else pid}"


def _is_checkpoint_file(name: str) -> bool:
    return (
        name == MANIFEST_NAME
        or name.endswith(PARTIAL_SUFFIXES)
        or (name.startswith(KEY_PREFIX) and name.endswith(".npy"))
    )


def check_output_dir(out: Path | str, *, force: bool) -> Path:
    """Refuse an output that cannot be replaced safely; touches nothing.

    `out` may be absent, an empty folder, or (with `force`) a folder of files: `force`
    replaces the checkpoint in it, and files that are not part of a checkpoint are carried
    over into the new folder (`carry_other_files`). A subfolder inside `out` cannot be
    carried safely, so it is refused rather than deleted; a symlink as `out` is refused too.
    """
    out = Path(os.path.abspath(out))  # "ck/", "." and "a/../ck" name the folder itself
    if not out.name:
        raise WeightsError(f"output {out} is a file system root; give a checkpoint folder")
    if out.is_symlink():
        raise WeightsError(
            f"output {out} is a symlink; give the folder it points to, so nothing is written "
            "through a link"
        )
    if out.exists() and not out.is_dir():
        raise WeightsError(f"output {out} exists and is not a directory; choose another --out")
    if out.is_dir():
        entries = sorted(out.iterdir())
        if entries and not force:
            raise WeightsError(
                f"output directory {out} is not empty; choose an empty one or pass --force to "
                "replace the checkpoint in it"
            )
        folders = [p for p in entries if p.is_dir() and not p.is_symlink()]
        if folders:
            raise WeightsError(
                f"output directory {out} holds the folder {folders[0].name!r}; --force replaces "
                "the checkpoint folder as a whole, so move it away or choose another --out"
            )
    return out


def carry_other_files(old: Path, new: Path) -> None:
    """Hard-link the files of `old` that are not checkpoint files into `new` (old untouched).

    So `--force` into a folder that also holds, say, notes or a README keeps them, as it
    always did; a symlink is carried as the link itself, never followed.
    """
    if not old.is_dir():
        return
    for p in old.iterdir():
        if _is_checkpoint_file(p.name) or (p.is_dir() and not p.is_symlink()):
            continue
        try:
            os.link(p, new / p.name, follow_symlinks=False)
        except OSError:
            if p.is_symlink():
                os.symlink(os.readlink(p), new / p.name)
            else:
                shutil.copy2(p, new / p.name)


def _pid_alive(pid: int) -> bool:
    """A live writer other than this process (this one's leftovers are stale to itself)."""
    return pid != os.getpid() and pid_alive(pid)


def _is_complete(folder: Path) -> bool:
    return folder.is_dir() and not folder.is_symlink() and (folder / MANIFEST_NAME).is_file()


def _remove(path: Path) -> None:
    """Delete a leftover folder (or just the link, if it is a symlink)."""
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
    else:
        shutil.rmtree(path)


def recover_leftovers(out: Path) -> list[str]:
    """Clean up what an interrupted write of `out` left behind; returns notes for the user.

    A backup of a complete old checkpoint is never deleted unless the target is a complete
    checkpoint: with the target missing it is renamed back; otherwise it is reported.
    Leftovers of a writer that is still running are refused with a one-line error.
    """
    notes: list[str] = []
    if not out.parent.is_dir():
        return notes
    pattern = re.compile(re.escape(f".{out.name}.") + f"({TMP_TAG}|{OLD_TAG})-([0-9]+)$")
    found = sorted(
        (m.group(1), int(m.group(2)), p)
        for p in out.parent.iterdir()
        if (m := pattern.match(p.name))
    )
    for _, pid, p in found:
        if _pid_alive(pid):
            raise WeightsError(
                f"another pccx-flow (pid {pid}) is writing {out} ({p.name}); wait for it, or "
                f"remove {p} if no such process is running"
            )
    for tag, _, p in sorted(found, key=lambda t: t[0] != OLD_TAG):  # backups first
        if tag == OLD_TAG:
            if _is_complete(out):
                _remove(p)
                notes.append(f"removed {p.name}, the old copy left by an interrupted write")
            elif not os.path.lexists(out) and _is_complete(p):
                os.rename(p, out)
                notes.append(f"restored {out} from {p.name} (a write was interrupted)")
            else:
                raise WeightsError(
                    f"{p} may be the only complete copy of the checkpoint at {out}; check both "
                    "with `pccx-flow weights verify`, keep the good one as "
                    f"{out.name}, and delete the other"
                )
        else:
            _remove(p)
            notes.append(f"removed {p.name}, left unfinished by an interrupted write")
    return notes


def remove_stale_temps(folder: Path) -> list[str]:
    """Delete the temp folders ``.<any name>.pccx-tmp-<pid>`` in `folder` whose writer is
    gone, whatever checkpoint they were for (an E4B one holds gigabytes); returns notes.

    A temp folder never holds the only copy of anything (the target is complete, or never
    existed), so it is safe to delete; backups (``pccx-old``) are left to `recover_leftovers`
    of their own target, which knows whether they are the only complete copy."""
    notes: list[str] = []
    pattern = re.compile(r"\..+\." + TMP_TAG + r"-([0-9]+)$")
    try:
        entries = list(folder.iterdir())
    except OSError:
        return notes
    for p in entries:
        m = pattern.match(p.name)
        if m is None or _pid_alive(int(m.group(1))) or int(m.group(1)) == os.getpid():
            continue
        try:
            _remove(p)
        except OSError:
            continue
        notes.append(f"removed {p.name}, left unfinished by an interrupted write")
    return notes


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    except OSError as exc:  # some file systems cannot fsync a directory
        if exc.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def exchange(a: Path, b: Path) -> bool:
    """Swap two paths atomically with Linux ``renameat2``; False when not supported."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):
        return False
    renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p]
    renameat2.argtypes += [ctypes.c_uint]
    rc = renameat2(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if rc == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.ENOSYS, errno.EINVAL, errno.ENOTSUP, errno.EPERM):
        return False
    raise OSError(err, os.strerror(err), str(b))


def swap_into_place(new: Path, out: Path) -> None:
    """Make the finished folder `new` the checkpoint at `out`; the old one is deleted after."""
    if not os.path.lexists(out):
        os.rename(new, out)
    elif exchange(new, out):
        shutil.rmtree(new, ignore_errors=True)  # `new` now holds the old checkpoint
    else:
        backup = sibling(out, OLD_TAG)
        os.rename(out, backup)
        try:
            os.rename(new, out)
        except BaseException:
            os.rename(backup, out)
            raise
        shutil.rmtree(backup, ignore_errors=True)
    _fsync_dir(out.parent)


def _note(message: str) -> None:
    print(f"note: {message}", file=sys.stderr)


@contextmanager
def staged_checkpoint(
    out: Path | str, *, force: bool, config: Gemma3nConfig | None = None
) -> Iterator[Path]:
    """Yield a new sibling temp folder to write a checkpoint into; swap it in when done.

    On a normal exit the folder must hold a complete checkpoint (manifest last): its files
    and the folder are fsynced, every tensor header is checked against `config` (or the
    manifest's), and the folder replaces `out`. On any exception (a bad tensor, a full disk,
    Ctrl-C) the temp folder is deleted and `out` is left exactly as it was.
    """
    from pccx_flow.weights.checkpoint import open_checkpoint

    try:
        out = check_output_dir(out, force=force)
        for note in recover_leftovers(out) + remove_stale_temps(out.parent):
            _note(note)
        out = check_output_dir(out, force=force)  # a restored backup is judged like any folder
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = sibling(out, TMP_TAG)
        tmp.mkdir()
    except OSError as exc:
        raise WeightsError(
            f"cannot create output directory {out}: {exc.strerror or exc}; check the path and "
            "its permissions"
        ) from None
    try:
        carry_other_files(out, tmp)
        yield tmp
        open_checkpoint(tmp, config)  # every header against the config, before the swap
        _fsync_dir(tmp)
        swap_into_place(tmp, out)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        kept = f"{out} is unchanged" if os.path.lexists(out) else "nothing was written"
        raise WeightsError(
            f"cannot write the checkpoint to {out}: {exc.strerror or exc} ({kept})"
        ) from None
    except PccxFlowError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        if os.path.lexists(out):
            raise type(exc)(f"{exc} ({out} is unchanged)") from None
        raise
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


class TensorFileWriter:
    """Writes one tensor in row chunks, packed INT4 (+ scales) or float32 in its logical shape.

    INT4 chunks arrive already packed with their scales; the scales ([rows] float32, at most a
    megabyte) are collected and written when the tensor is closed.
    """

    def __init__(self, out: Path, spec: TensorSpec, storage: str) -> None:
        self.spec = spec
        self.storage = storage
        self._rows_written = 0
        shape = spec.shape
        if storage == "int4":
            if len(shape) != 2 or shape[1] % 2:
                raise TensorFormatError(f"tensor {spec.key} {list(shape)} cannot be stored INT4")
            self._data = NpyWriter(tensor_path(out, spec.key), np.uint8, (shape[0], shape[1] // 2))
            self._scales = np.empty(shape[0], dtype=np.float32)
            self._scale_path = scale_path(out, spec.key)
        else:
            self._data = NpyWriter(tensor_path(out, spec.key), np.float32, shape)

    def write_int4(self, packed: np.ndarray, scale: np.ndarray) -> int:
        n = packed.shape[0]
        if not np.isfinite(scale).all():
            raise TensorFormatError(f"tensor {self.spec.key}: NaN or infinite row scales")
        self._scales[self._rows_written : self._rows_written + n] = scale
        self._rows_written += n
        return self._data.write(packed) + 4 * n

    def write_float32(self, chunk: np.ndarray) -> int:
        if not np.isfinite(chunk).all():
            raise TensorFormatError(f"tensor {self.spec.key}: NaN or infinite values")
        return self._data.write(chunk)

    def close(self) -> None:
        self._data.close()
        if self.storage == "int4":
            save_npy(self._scale_path, self._scales)


def write_manifest(
    out: Path, config: Gemma3nConfig, mode: str, storages: dict[str, str], specs, extra=None
) -> Path:
    """Write ``manifest.json`` (last step of every writer); `storages` maps key -> storage."""
    shapes = {t.key: list(t.shape) for t in specs}
    manifest = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "mode": mode,
        "preset": config.name,
        "config": config.to_dict(),
        "tensors": {k: {"storage": storages[k], "shape": shapes[k]} for k in storages},
    }
    if extra:
        manifest.update(extra)
    tmp = out / (MANIFEST_NAME + ".tmp")
    with open(tmp, "x", encoding="utf-8") as f:
        f.write(json.dumps(manifest, indent=1) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, out / MANIFEST_NAME)
    return out / MANIFEST_NAME

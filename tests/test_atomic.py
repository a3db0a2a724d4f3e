"""One writing rule for every output: the old file or the new one, never a part of either."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from pccx_flow import atomic


def _leftovers(folder) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith(f".{atomic.PART_TAG}-")]


def test_write_replaces_and_keeps_the_mode(tmp_path):
    out = tmp_path / "a.json"
    out.write_text("old")
    os.chmod(out, 0o640)
    atomic.write_text(out, "new")
    assert out.read_text() == "new"
    assert oct(out.stat().st_mode & 0o777) == oct(0o640)
    assert _leftovers(tmp_path) == []


def test_a_failing_writer_leaves_the_old_file_and_no_temporary(tmp_path):
    out = tmp_path / "g.svg"
    out.write_text("old picture")
    with pytest.raises(RuntimeError), atomic.replacing(out) as tmp:
        assert tmp.parent == tmp_path and tmp.name.endswith(".g.svg")  # suffix kept
        tmp.write_text("half a pic")
        raise RuntimeError("disk full half-way")
    assert out.read_text() == "old picture"
    assert _leftovers(tmp_path) == []


def test_a_writer_that_writes_nothing_is_an_error_not_an_empty_file(tmp_path):
    out = tmp_path / "x.png"
    with pytest.raises(FileNotFoundError), atomic.replacing(out):
        pass
    assert not out.exists()


def test_a_symlink_stays_and_the_file_it_names_is_replaced(tmp_path):
    real = tmp_path / "real.json"
    real.write_text("old")
    link = tmp_path / "out.json"
    link.symlink_to(real)
    atomic.write_text(link, "new")
    assert link.is_symlink() and real.read_text() == "new"


def test_devices_and_pipes_are_written_in_place_never_replaced(tmp_path):
    atomic.write_text(os.devnull, "discarded")
    assert Path(os.devnull).is_char_device()
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    reader = subprocess.Popen(["cat", str(fifo)], stdout=subprocess.PIPE)
    atomic.write_text(fifo, "through the pipe")
    assert reader.communicate(timeout=30)[0] == b"through the pipe"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)


def test_a_set_is_renamed_only_when_every_member_is_complete(tmp_path):
    a, b = tmp_path / "p.prog", tmp_path / "p.json"
    a.write_text("old a")
    b.write_text("old b")
    with pytest.raises(OSError), atomic.replacing_set([a, b]) as (ta, tb):
        ta.write_text("new a")
        raise OSError(28, "No space left on device")
    assert (a.read_text(), b.read_text()) == ("old a", "old b")
    with atomic.replacing_set([a, b]) as (ta, tb):
        ta.write_text("new a")
        tb.write_text("new b")
    assert (a.read_text(), b.read_text()) == ("new a", "new b")
    assert _leftovers(tmp_path) == []


def test_stale_temporaries_of_dead_processes_are_removed_by_any_later_write(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    dead_pid = int(dead.stdout)
    stale = tmp_path / f".{atomic.PART_TAG}-{dead_pid}-0badf00d.old.svg"
    stale.write_text("left by a kill")
    alive = tmp_path / f".{atomic.PART_TAG}-{os.getppid()}-00000000.busy.svg"
    alive.write_text("another writer, still running")
    unrelated = tmp_path / ".pccx-partial-notes"
    unrelated.write_text("not ours")
    atomic.write_text(tmp_path / "other.json", "{}")  # a write of another file in the folder
    assert not stale.exists()
    assert alive.exists() and unrelated.exists()

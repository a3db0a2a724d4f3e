"""Checkpoint writes through a sibling temp folder: the old checkpoint survives anything.

Every test writes a real `tiny` checkpoint and judges the folder with `verify_checkpoint`
and byte comparisons against checkpoints written independently in fresh folders (the
oracle), never with the writer's own bookkeeping.
"""

from __future__ import annotations

import errno
import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from pccx_flow.errors import TensorFormatError, WeightsError
from pccx_flow.model.config import get_config
from pccx_flow.weights import writer
from pccx_flow.weights.checkpoint import MANIFEST_NAME, open_checkpoint, tensor_path
from pccx_flow.weights.npy import NpyWriter
from pccx_flow.weights.synth import write_synthetic_checkpoint
from pccx_flow.weights.verify import verify_checkpoint
from pccx_flow.weights.writer import OLD_TAG, TMP_TAG, recover_leftovers, sibling

KEY = "layers.2.mlp.gate_proj.weight"


def digest(folder: Path) -> dict[str, str]:
    """{file name: sha256} of every file in a folder."""
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.iterdir())
        if p.is_file()
    }


def leftovers(out: Path) -> list[str]:
    return sorted(p.name for p in out.parent.iterdir() if p.name.startswith(f".{out.name}."))


def dead_pid() -> int:
    """The pid of a process that has exited (and been reaped)."""
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


@pytest.fixture(scope="module")
def oracle(tmp_path_factory, tiny_config) -> dict[int, Path]:
    """The tiny checkpoints of seeds 0 and 1, each written into a fresh folder."""
    base = tmp_path_factory.mktemp("oracle")
    return {s: write_synthetic_checkpoint(tiny_config, s, base / f"s{s}", progress=False)
            for s in (0, 1)}  # fmt: skip


@pytest.fixture(scope="module")
def seeds(oracle) -> dict[int, dict[str, str]]:
    """Digests of the tiny checkpoints of seeds 0 and 1."""
    return {s: digest(folder) for s, folder in oracle.items()}


@pytest.fixture
def old(tmp_path, oracle, seeds) -> Path:
    """A complete seed-0 checkpoint that the test then overwrites: a copy of the seed-0
    oracle (the same bytes a fresh write gives, without writing the tensors again)."""
    out = shutil.copytree(oracle[0], tmp_path / "ck")
    assert digest(out) == seeds[0]
    return out


def test_force_replaces_the_checkpoint_and_leaves_nothing_behind(old, seeds, tiny_config):
    write_synthetic_checkpoint(tiny_config, 1, old, progress=False, force=True)
    assert digest(old) == seeds[1]
    assert leftovers(old) == []


def test_two_rename_fallback_when_exchange_is_unsupported(old, seeds, tiny_config, monkeypatch):
    monkeypatch.setattr(writer, "exchange", lambda a, b: False)
    write_synthetic_checkpoint(tiny_config, 1, old, progress=False, force=True)
    assert digest(old) == seeds[1]
    assert leftovers(old) == []


def test_full_disk_half_way_leaves_the_old_checkpoint(old, seeds, tiny_config, monkeypatch):
    calls = {"n": 0}
    real_write = NpyWriter.write

    def write(self, chunk):
        calls["n"] += 1
        if calls["n"] == 150:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(self, chunk)

    monkeypatch.setattr(NpyWriter, "write", write)
    with pytest.raises(WeightsError, match="No space left on device.*unchanged"):
        write_synthetic_checkpoint(tiny_config, 1, old, progress=False, force=True)
    assert calls["n"] == 150
    assert digest(old) == seeds[0]
    assert leftovers(old) == []


def test_nan_tensor_is_refused_before_the_old_checkpoint_is_touched(old, seeds, tiny_config):
    from pccx_flow.weights import synth

    real = synth._float_chunk

    def poisoned(rng, config, spec, rows):
        chunk = real(rng, config, spec, rows)
        if spec.key == "layers.9.post_feedforward_layernorm.weight":
            chunk[0] = np.nan
        return chunk

    synth._float_chunk = poisoned
    try:
        with pytest.raises(TensorFormatError, match="NaN"):
            write_synthetic_checkpoint(tiny_config, 1, old, progress=False, force=True)
    finally:
        synth._float_chunk = real
    assert digest(old) == seeds[0]
    assert leftovers(old) == []


def test_a_symlinked_tensor_file_is_never_written_through(old, tmp_path, tiny_config, seeds):
    victim = tmp_path / "victim.npy"
    victim.write_bytes(b"keep me")
    tensor_path(old, KEY).unlink()
    tensor_path(old, KEY).symlink_to(victim)
    write_synthetic_checkpoint(tiny_config, 1, old, progress=False, force=True)
    assert victim.read_bytes() == b"keep me"
    assert not tensor_path(old, KEY).is_symlink()
    assert digest(old) == seeds[1]


def test_other_files_are_kept_and_subfolders_or_symlinked_outputs_refused(old, tiny_config):
    (old / "notes.txt").write_text("mine")
    write_synthetic_checkpoint(tiny_config, 1, old, progress=False, force=True)
    assert (old / "notes.txt").read_text() == "mine"
    (old / "sub").mkdir()
    with pytest.raises(WeightsError, match="folder 'sub'"):
        write_synthetic_checkpoint(tiny_config, 0, old, progress=False, force=True)
    link = old.parent / "link"
    link.symlink_to(old)
    with pytest.raises(WeightsError, match="symlink"):
        write_synthetic_checkpoint(tiny_config, 0, link, progress=False, force=True)
    assert verify_checkpoint(old) == []


def test_a_leftover_temp_folder_is_removed_by_the_next_write(old, seeds, tiny_config, capsys):
    junk = sibling(old, TMP_TAG, dead_pid())
    junk.mkdir()
    (junk / "model.language_model.norm.weight.npy").write_bytes(b"half")
    write_synthetic_checkpoint(tiny_config, 1, old, progress=False, force=True)
    assert leftovers(old) == []
    assert digest(old) == seeds[1]
    assert "left unfinished by an interrupted write" in capsys.readouterr().err


def test_a_backup_whose_target_is_missing_is_restored(old, seeds):
    backup = sibling(old, OLD_TAG, dead_pid())
    os.rename(old, backup)  # killed between "old -> backup" and "new -> target"
    notes = recover_leftovers(old)
    assert notes and "restored" in notes[0]
    assert digest(old) == seeds[0]
    assert leftovers(old) == []


def test_a_backup_next_to_an_incomplete_target_is_reported_not_deleted(old):
    backup = sibling(old, OLD_TAG, dead_pid())
    os.rename(old, backup)
    old.mkdir()
    (old / "stray.npy").write_bytes(b"x")
    with pytest.raises(WeightsError, match="only complete copy"):
        recover_leftovers(old)
    assert (backup / MANIFEST_NAME).is_file()


def test_a_running_writer_is_not_disturbed(old, tiny_config):
    busy = sibling(old, TMP_TAG, os.getppid())  # a live process that is not this one
    busy.mkdir()
    with pytest.raises(WeightsError, match="another pccx-flow"):
        write_synthetic_checkpoint(tiny_config, 1, old, progress=False, force=True)
    assert busy.is_dir()


def _synth_command(argv: list[str]) -> None:
    """`pccx-flow ARGV` in a process of its own, as `python -m pccx_flow` runs it."""
    from pccx_flow.cli.main import main

    sys.exit(main(argv))


@pytest.mark.slow
def test_killed_at_random_moments_the_folder_is_always_old_or_new(old, seeds, tiny_config):
    """>= 10 kills of `weights synth --force` (SIGKILL, SIGTERM or SIGINT) at random moments.

    Each kill lands at a random moment of the writing phase (after the process has created
    its temp folder; the seconds of Python start-up before it write nothing). After each kill
    the target must verify and be byte-identical to the complete seed-0 or seed-1
    checkpoint; the next run is asked for the other seed.

    Each command is a process of its own that receives the signal and runs the CLI's `main`;
    they are forked from a multiprocessing fork server that has imported the CLI's modules
    once, so the interpreter start-up and imports, which the kills never land in, are paid
    once instead of once a command.
    """
    import multiprocessing

    from pccx_flow.cli.main import SUBCOMMANDS

    rng = random.Random(11)
    ctx = multiprocessing.get_context("forkserver")
    # main builds its parser from every subcommand module: all loaded before the forks.
    ctx.set_forkserver_preload(
        ["pccx_flow.cli.main", *(f"pccx_flow.cli.{name}" for name in SUBCOMMANDS), __name__]
    )

    def start(seed):
        argv = ["weights", "synth", "--preset", "tiny"]
        argv += ["--seed", str(seed), "--out", str(old), "--force", "--no-progress"]
        proc = ctx.Process(target=_synth_command, args=(argv,))
        proc.start()
        deadline = time.monotonic() + 120
        while not sibling(old, TMP_TAG, proc.pid).exists() and proc.exitcode is None:
            assert time.monotonic() < deadline, "synth never started writing"
            time.sleep(0.002)
        return proc, time.monotonic()

    proc, began = start(1)
    proc.join()
    assert proc.exitcode == 0
    # How long the writing phase takes here, at most: the first run's, then the shortest
    # time within which a run was seen to have finished (the sleep it outlasted). The first
    # run can be several times slower than the rest (cold caches on a loaded runner), and
    # kills timed from it alone would land after most runs had finished.
    writing = time.monotonic() - began
    current, kills, tries = 1, 0, 0
    while kills < 10 and tries < 30:
        tries += 1
        proc, began = start(1 - current)
        time.sleep(rng.uniform(0.0, 1.1) * writing)
        finished = proc.exitcode is not None
        if not finished:
            os.kill(proc.pid, rng.choice([signal.SIGKILL, signal.SIGTERM, signal.SIGINT]))
            kills += 1
        proc.join()
        if finished:
            writing = min(writing, time.monotonic() - began)
        assert verify_checkpoint(old) == []
        now = digest(old)
        assert now in (seeds[0], seeds[1])
        current = 0 if now == seeds[0] else 1
    assert kills >= 10
    write_synthetic_checkpoint(tiny_config, 0, old, progress=False, force=True)
    assert digest(old) == seeds[0]
    assert leftovers(old) == []
    assert open_checkpoint(old).config == tiny_config


def test_stale_temp_folders_of_other_targets_are_removed_by_any_write(old, tmp_path, seeds):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    stale = sibling(old.parent / "another-ck", TMP_TAG, int(dead.stdout))
    stale.mkdir()
    (stale / "big.npy").write_bytes(b"\0" * 64)
    backup = old.parent / f".another-ck.{OLD_TAG}-{int(dead.stdout)}"
    backup.mkdir()  # may be the only copy of another checkpoint: never touched from here
    write_synthetic_checkpoint(get_config("tiny"), 1, old, progress=False, force=True)
    assert not stale.exists() and backup.exists()

"""Shared fixtures: one synthetic tiny checkpoint per test session."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest

from pccx_flow.model.config import get_config

# The suite's own processes run many commands in-process, each building graphs, problems
# and programs whose objects stay alive until it returns; with Python's default
# thresholds the cyclic collector rescans them (and the session's fixtures) over and over.
# Rarer collections: ~15 % less CPU on the in-process tests for ~0.2 GiB more per worker.
GC_THRESHOLDS = (10_000, 50, 100)


def pytest_configure(config):
    gc.set_threshold(*GC_THRESHOLDS)


@pytest.fixture(scope="session")
def tiny_config():
    return get_config("tiny")


@pytest.fixture(scope="session")
def tiny_ckpt_dir(tmp_path_factory) -> Path:
    """A deterministic synthetic `tiny` checkpoint (INT4 + float32, pccx split-.npy layout)."""
    from pccx_flow.weights.synth import write_synthetic_checkpoint

    out = tmp_path_factory.mktemp("tiny-ckpt")
    write_synthetic_checkpoint(get_config("tiny"), seed=0, out=out, progress=False)
    return out


@pytest.fixture(scope="session")
def tiny_ckpt(tiny_ckpt_dir):
    """The synthetic `tiny` checkpoint, opened (memory-mapped)."""
    from pccx_flow.weights.checkpoint import open_checkpoint

    return open_checkpoint(tiny_ckpt_dir)

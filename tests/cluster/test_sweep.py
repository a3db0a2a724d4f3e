"""A cluster of (fake) boards: programs spread over three NPU worker processes, and nothing
lost when a worker is killed mid-run and another's device fails.

The oracle is the emulator run in this process on the same words (bit for bit, as the fake
device promises), and the reference decode's argmax through `emulate_against_reference`.
"""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from pccx_flow.board.emulator.check import default_tokens, emulate_against_reference
from pccx_flow.board.emulator.emulate import emulate
from pccx_flow.cluster.device_steps import device_workers
from pccx_flow.cluster.local import fake_device_cluster
from pccx_flow.cluster.sweep import dispatch_sweep
from tests.board.conftest import lowered

POSITIONS = range(4)


@pytest.fixture(scope="module")
def three_boards():
    with fake_device_cluster(3) as (cluster, client):
        yield cluster, client


@pytest.fixture(scope="module")
def programs():
    return [(f"p{p}", lowered("v002-spec", "critical-path", position=p)[3]) for p in POSITIONS]


def _expected(program, ckpt, tokens):
    from pccx_flow.board.emulator.check import reference_prefix

    k, v, _ = reference_prefix(program, ckpt, tokens)
    return emulate(program, ckpt, k, v, tokens[-1])[0]


def _break_device(dask_worker=None, path="/nonexistent/uio9"):
    """Make this worker's device a UIO device that does not exist (every open fails)."""
    from pccx_flow.board.device.session import DeviceSpec

    dask_worker.plugins["pccx-npu"].spec = DeviceSpec("uio", None, path)


def test_a_killed_worker_and_a_failing_device_lose_no_result(three_boards, programs,
                                                             tiny_ckpt, tiny_ckpt_dir):  # fmt: skip
    """One worker's device fails on every open; another worker is killed mid-sweep."""
    _, client = three_boards
    workers = device_workers(client)
    assert len(workers) == 3
    broken = workers[0]
    client.run(_break_device, workers=[broken])
    pids = client.run(os.getpid)
    killed: list[str] = []

    def kill_a_busy_worker(name, res):
        if killed:
            return
        busy = [w for w, keys in client.processing().items()
                if keys and w in pids and w != broken]  # fmt: skip
        if busy:
            killed.append(busy[0])
            os.kill(pids[busy[0]], signal.SIGKILL)

    vocab = tiny_ckpt.config.vocab
    work = [(n, p, default_tokens(p.meta["position"] + 1, vocab)) for n, p in programs]
    out = dispatch_sweep(client, work, str(tiny_ckpt_dir), lowered("v002-spec", "heft")[2],
                         workers=workers, attempts=3, on_result=kill_a_busy_worker)  # fmt: skip
    assert killed, "no worker was busy after the first result"
    assert out.errors == {}
    assert sorted(out.results) == [n for n, _ in programs]
    assert all(r["worker"] != broken for r in out.results.values())
    for name, program in programs:
        tokens = default_tokens(program.meta["position"] + 1, vocab)
        np.testing.assert_array_equal(out.results[name]["logits"],
                                      _expected(program, tiny_ckpt, tokens))  # fmt: skip
        assert emulate_against_reference(program, tiny_ckpt, tokens)["argmax_same"]
    # both losses are reported: the killed worker's task ran again elsewhere, and the broken
    # device's program ran on another worker
    assert any("died while running it" in line for line in out.losses), out.losses
    assert sum(r["worker_losses"] for r in out.results.values()) >= 1
    lost = [line for line in out.losses if broken in line]
    assert lost and all("/nonexistent/uio9" in line for line in lost), out.losses

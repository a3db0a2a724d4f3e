"""Benchmark: what a Dask task costs when it waits for the one before, and what that means
for `run --backend device`.

1. A chain of N trivial tasks, each depending on the one before, on the in-process cluster
   `run --dashboard` uses (`pccx_flow.dashboard.cluster.loopback_cluster`), plain and with
   the ``npu`` resource and worker restriction device tasks carry: seconds per task.
2. One `tiny` decode step on the fake device, grouped one task per model layer (the
   default) and one task per batch or host step (``--device-tasks batch``): wall seconds
   per step (median of the steps after the first) and the task count.

Wall times are this machine's. Writes ``benchmarks/results/device_tasks.json``.

    python benchmarks/bench_device_tasks.py
"""

from __future__ import annotations

import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

from measure import write_result

CHAIN = 2000


def chain_seconds(restricted: bool) -> float:
    import dask
    from dask.task_spec import Task, TaskRef

    from pccx_flow.dashboard.cluster import loopback_cluster

    def step(i, _before=None):
        return i

    with loopback_cluster(resources={"npu": 1}) as (_, client):
        (worker,) = client.scheduler_info()["workers"]
        dsk = {"t0": Task("t0", step, 0)}
        for i in range(1, CHAIN):
            dsk[f"t{i}"] = Task(f"t{i}", step, i, TaskRef(f"t{i - 1}"))
        pinned = {"resources": {"npu": 1}, "workers": [worker], "allow_other_workers": False}
        t0 = time.perf_counter()
        with dask.annotate(**(pinned if restricted else {})):
            client.get(dsk, f"t{CHAIN - 1}", sync=True)
        return time.perf_counter() - t0


def device_steps(per: str, steps: int = 3) -> dict:
    from pccx_flow.board.emulator.backend import emulator_graphs
    from pccx_flow.cluster.device_steps import DeviceSteps
    from pccx_flow.cluster.local import device_cluster
    from pccx_flow.cluster.npu_worker import NpuWorker
    from pccx_flow.execute.generate import generate
    from pccx_flow.hardware.profile import load_profile
    from pccx_flow.model.config import get_config
    from pccx_flow.weights.checkpoint import open_checkpoint
    from pccx_flow.weights.synth import write_synthetic_checkpoint

    profile = load_profile("v002-spec")
    with tempfile.TemporaryDirectory() as folder:
        write_synthetic_checkpoint(get_config("tiny"), 0, Path(folder), progress=False)
        ckpt = open_checkpoint(folder)
        graphs = emulator_graphs(ckpt.config, "pccx", "critical-path", profile)
        with device_cluster(NpuWorker("fake")) as (_, client, worker):
            run = DeviceSteps(client, folder, profile, worker, per=per)
            result = generate(ckpt, [2], steps, policy="critical-path", client=client,
                              graph_for_position=graphs, run_step=run)  # fmt: skip
    return {"per": per, "tokens": result.tokens, "step_seconds": result.step_seconds,
            "median_after_first": statistics.median(result.step_seconds[1:])}  # fmt: skip


def main() -> int:
    rows = {}
    for restricted in (False, True):
        s = chain_seconds(restricted)
        key = "restricted" if restricted else "plain"
        rows[key] = {"seconds": s, "ms_per_task": 1e3 * s / CHAIN}
        print(f"chain of {CHAIN} dependent tasks ({key}): {s:.1f} s, "
              f"{1e3 * s / CHAIN:.1f} ms per task")  # fmt: skip
    for per in ("layer", "batch"):
        r = device_steps(per)
        rows[f"device_{per}"] = r
        print(f"tiny step on the fake device, one task per {per}: "
              f"{r['median_after_first']:.1f} s per step (median of steps 2-3), "
              f"tokens {r['tokens']}")  # fmt: skip
    write_result("device_tasks", {"benchmark": "device_tasks", "chain": CHAIN,
                                  "machine": platform.platform(), **rows})  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

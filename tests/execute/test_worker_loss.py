"""A worker process killed while a decode step runs does not change the step's result.

Two single-thread worker processes on a loopback `LocalCluster` run one decode step of the
``tiny`` preset, one task per node. A scheduler plugin watches the step's tasks finish; when
half of them are in memory it kills, with SIGKILL, the worker that alone holds the most of
those results. The kill happens inside the scheduler's own transition handler, so at that
moment the scheduler has seen exactly that many results and none of the rest: no sleeps, no
race with the step finishing first. The scheduler must then recompute the lost results on
the surviving (and the restarted) worker.

The test fails unless the kill happened mid-step (some but not all tasks done, the victim
holding results only it had), the scheduler computed some tasks a second time (and only
tasks the victim held or was running), the victim's process is gone, and the step's logits
and K/V rows equal a threaded run of the same step bit for bit and agree with the reference
decode as every other executed step must.
"""

from __future__ import annotations

import concurrent.futures
import copy
import os
import signal
from collections import Counter

import numpy as np
import pytest
from distributed.diagnostics.plugin import SchedulerPlugin

from pccx_flow.execute.executor import execute_step
from pccx_flow.graph.build import build_decode_graph
from pccx_flow.reference.decode import decode_step, new_kv_cache

from .test_execute_tiny import TOKENS, _assert_step, _state_at

SEMANTICS = "gemma3n"
POSITION = 2  # a step that reads KV rows of earlier positions
STEP_TIMEOUT_S = 60  # a recovery that hangs fails the test instead of hanging it


class KillMidStep(SchedulerPlugin):
    """Kills the worker that alone holds the most results once `fraction` of a step is done.

    Counts, per key of the graph submitted after registration, how often the scheduler saw
    it computed (``processing -> memory``). The kill runs inside that transition, on the
    scheduler's event loop, and records what the scheduler knew at that moment.
    """

    name = "pccx-test-kill-mid-step"

    def __init__(self, pids: dict[str, int], fraction: float = 0.5):
        self.pids = pids  # worker address -> process id
        self.fraction = fraction
        self.scheduler = None
        self.wanted: set = set()
        self.computed: Counter = Counter()
        self.kill: dict | None = None

    async def start(self, scheduler):
        self.scheduler = scheduler

    def update_graph(self, scheduler, *, keys, **kwargs):
        self.wanted |= set(keys)

    def transition(self, key, start, finish, *args, **kwargs):
        if key not in self.wanted or (start, finish) != ("processing", "memory"):
            return
        self.computed[key] += 1
        if self.kill is not None or len(self.computed) < self.fraction * len(self.wanted):
            return
        held = {}
        for ws in self.scheduler.workers.values():
            held[ws.address] = {
                "sole": {ts.key for ts in ws.has_what if ts.who_has == {ws}} & self.wanted,
                "any": {ts.key for ts in ws.has_what} & self.wanted,
                "processing": {ts.key for ts in ws.processing} & self.wanted,
            }
        victim = max(sorted(held), key=lambda a: len(held[a]["sole"]))
        self.kill = {
            "victim": victim,
            "pid": self.pids[victim],
            "done": len(self.computed),
            "wanted": len(self.wanted),
            **held[victim],
        }
        os.kill(self.pids[victim], signal.SIGKILL)

    def report(self) -> dict:
        return {"kill": self.kill, "computed": dict(self.computed), "wanted": len(self.wanted)}


@pytest.fixture(scope="module")
def reference(tiny_ckpt):
    """Reference logits of TOKENS up to POSITION and the KV cache after them."""
    cache = new_kv_cache(tiny_ckpt.config, SEMANTICS)
    logits = [
        decode_step(tiny_ckpt, t, p, cache, semantics=SEMANTICS)
        for p, t in enumerate(TOKENS[: POSITION + 1])
    ]
    return {SEMANTICS: {"logits": logits, "cache": cache}}


@pytest.fixture
def client():
    """Two single-thread worker processes (with nannies), everything on 127.0.0.1."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",  # loopback, any free port (None still binds :8787)
        worker_dashboard_address="127.0.0.1:0",
    )
    try:
        client = Client(cluster, set_as_default=False)
        try:
            yield client
        finally:
            client.close()
    finally:
        cluster.close()


@pytest.mark.slow
def test_worker_killed_mid_step_leaves_the_step_unchanged(
    tiny_ckpt, tiny_config, reference, client
):
    graph = build_decode_graph(tiny_config, semantics=SEMANTICS, position=POSITION)
    start = _state_at(tiny_ckpt, reference, SEMANTICS, POSITION)
    threaded = execute_step(graph, tiny_ckpt, copy.deepcopy(start))

    client.wait_for_workers(2)
    pids = client.run(os.getpid)
    assert len(set(pids.values())) == 2  # two worker processes, not threads of one
    client.register_plugin(KillMidStep(pids))

    state = copy.deepcopy(start)
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        run = pool.submit(execute_step, graph, tiny_ckpt, state, client=client)
        killed = run.result(timeout=STEP_TIMEOUT_S)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    seen = client.run_on_scheduler(
        lambda dask_scheduler: dask_scheduler.plugins[KillMidStep.name].report()
    )

    # The kill happened mid-step, on a worker holding results nobody else had.
    kill = seen["kill"]
    assert kill is not None, "the plugin never killed a worker"
    assert seen["wanted"] == graph.number_of_nodes()
    assert 0 < kill["done"] < kill["wanted"], kill["done"]
    assert kill["sole"], "the killed worker held no result of its own"
    assert kill["pid"] not in client.run(os.getpid).values()
    # ... and the scheduler recomputed what was lost with it: some tasks ran twice, and
    # only tasks the killed worker held or was running.
    twice = {k for k, n in seen["computed"].items() if n > 1}
    assert twice, f"no task was computed twice although {len(kill['sole'])} results were lost"
    assert twice <= kill["any"] | kill["processing"], twice - kill["any"] - kill["processing"]
    assert len(seen["computed"]) == seen["wanted"]  # every task finished at least once

    # Same kernels on the same inputs: recovery does not change a single bit.
    np.testing.assert_array_equal(killed.logits, threaded.logits)
    for layer, (k, v) in threaded.kv_rows.items():
        np.testing.assert_array_equal(killed.kv_rows[layer][0], k)
        np.testing.assert_array_equal(killed.kv_rows[layer][1], v)
    assert state.position == POSITION + 1
    _assert_step(reference, SEMANTICS, POSITION, killed.logits, state)

"""Clusters of device workers on this machine, on loopback only.

- `device_cluster`: one in-process worker that owns one device (the fake one, or this
  board's UIO device when pccx-flow runs on the KV260 itself), with the lanes page on the
  scheduler: ``run --backend device`` without ``--scheduler``;
- `fake_device_cluster`: N worker processes with a fake device each, as N boards would be
  (``dispatch --fake-cluster N``, tests): every process is its own host, so killing one
  loses its device as unplugging a board would.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from pccx_flow.cluster import NPU_RESOURCE
from pccx_flow.cluster.npu_worker import NpuWorker

PRELOAD = "pccx_flow.cluster.npu_worker"


@contextlib.contextmanager
def device_cluster(plugin: NpuWorker) -> Iterator[tuple[Any, Any, str]]:
    """``(cluster, client, device worker address)``: one in-process worker owning the
    device of `plugin`, the lanes page on the scheduler, dashboards on 127.0.0.1."""
    from pccx_flow.dashboard.cluster import loopback_cluster

    with loopback_cluster(resources={NPU_RESOURCE: 1}) as (cluster, client):
        client.register_plugin(plugin, name=plugin.name)
        (address,) = client.scheduler_info()["workers"]
        yield cluster, client, address


@contextlib.contextmanager
def fake_device_cluster(n_workers: int, *, page: bool = False) -> Iterator[tuple[Any, Any]]:
    """``(cluster, client)``: `n_workers` local worker processes, one thread and one fake
    device each (the worker preload), the scheduler and dashboards on 127.0.0.1."""
    import dask
    from distributed import Client, LocalCluster

    from pccx_flow.dashboard.cluster import SILENCE_BELOW

    scheduler_kwargs = {"preload": ["pccx_flow.dashboard.preload"]} if page else {}
    with dask.config.set({"distributed.dashboard.link": "http://127.0.0.1:{port}/status"}):
        cluster = LocalCluster(
            n_workers=n_workers,
            threads_per_worker=1,
            processes=True,
            host="127.0.0.1",
            dashboard_address="127.0.0.1:0",
            worker_dashboard_address="127.0.0.1:0",
            resources={NPU_RESOURCE: 1},
            preload=[PRELOAD, "pccx_flow.cluster.interrupt_preload"],
            preload_argv=[["--npu", "fake"], []],
            scheduler_kwargs=scheduler_kwargs,
            silence_logs=SILENCE_BELOW,
        )
        client = Client(cluster, set_as_default=False)
        try:
            client.wait_for_workers(n_workers, timeout=120)
            yield cluster, client
        finally:
            client.close()
            cluster.close()

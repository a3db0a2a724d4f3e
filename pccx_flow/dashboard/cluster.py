"""The in-process Dask cluster whose scheduler serves the pccx lanes page, on loopback only."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from typing import Any

PRELOAD = "pccx_flow.dashboard.preload"
# Dask's log level for the local clusters of the command line: its errors still print.
SILENCE_BELOW = logging.ERROR


@contextlib.contextmanager
def loopback_cluster(
    preload: Sequence[str] = (PRELOAD,), **worker_kwargs: Any
) -> Iterator[tuple[Any, Any]]:
    """``(LocalCluster, Client)`` for `run --dashboard` / `--report`, tests and benchmarks.

    In-process workers talk over the inproc transport (no socket); the only listening servers
    are the dashboards, bound to 127.0.0.1 on free ports. The dashboard link is formatted
    with 127.0.0.1 while the cluster lives (Dask reads that setting when the link is asked
    for, so it is held for the whole block). The scheduler runs `preload` (the lanes page by
    default; ``()`` for none). `worker_kwargs` go to the worker (e.g. ``resources``). Both
    are closed when the block ends. Dask's own log lines below ERROR are not printed: the
    step runs in this process and holds the GIL, so on a loaded machine the scheduler's
    "event loop was unresponsive" warnings would otherwise land among the command's output
    (`SILENCE_BELOW`).
    """
    import dask
    from distributed import Client, LocalCluster

    with dask.config.set({"distributed.dashboard.link": "http://127.0.0.1:{port}/status"}):
        cluster = LocalCluster(
            processes=False,
            n_workers=1,
            threads_per_worker=2,
            dashboard_address="127.0.0.1:0",
            worker_dashboard_address="127.0.0.1:0",
            scheduler_kwargs={"preload": list(preload)} if preload else {},
            silence_logs=SILENCE_BELOW,
            **worker_kwargs,
        )
        client = Client(cluster, set_as_default=False)
        try:
            yield cluster, client
        finally:
            client.close()
            cluster.close()

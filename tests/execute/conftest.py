"""Session-scoped in-process Dask cluster for the executor tests (loopback only)."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def local_client():
    """A `distributed` client on an in-process LocalCluster (inproc transport, no dashboard)."""
    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        processes=False,
        n_workers=1,
        threads_per_worker=2,
        dashboard_address="127.0.0.1:0",  # None would still serve :8787
        worker_dashboard_address="127.0.0.1:0",
    )
    client = Client(cluster, set_as_default=False)
    yield client
    client.close()
    cluster.close()

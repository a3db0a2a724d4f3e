"""The command line's in-process cluster: Dask's warnings kept off the command's output."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# As in a `pccx-flow` process: no logging set up but Dask's own stderr handlers.
_SCRIPT = """
import logging
from pccx_flow.dashboard.cluster import loopback_cluster
log = logging.getLogger("distributed.core")
with loopback_cluster(preload=()) as (cluster, client):
    assert cluster.scheduler_address.startswith("inproc://")
    log.warning("pccx test: event loop was unresponsive")
    log.error("pccx test: a real error")
log.warning("pccx test: after the cluster")
"""


def test_dask_prints_only_errors_while_the_cluster_lives():
    """A loaded machine makes the scheduler warn that its event loop was unresponsive (the
    step holds the GIL in this process); such lines must not land among a command's
    output. Errors still print, and Dask's handlers get their levels back after."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    r = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True,
                       timeout=120, env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert "a real error" in r.stderr and "after the cluster" in r.stderr, r.stderr
    assert "unresponsive" not in r.stderr, r.stderr

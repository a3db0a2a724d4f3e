"""Dask worker preload: a Ctrl-C reaches the worker processes too, and only the user's
process says so.

A terminal sends SIGINT to the whole process group, so `compare --workers N`'s worker
processes get it as well; without this each printed its own line or a KeyboardInterrupt
traceback. ``LocalCluster(..., preload=[__name__])`` runs `dask_setup` in each worker.
"""

from __future__ import annotations


def dask_setup(worker) -> None:  # noqa: ARG001 - the preload signature
    """Install the quiet interrupt handler in this worker process (its main thread)."""
    from pccx_flow.cli.main import quiet_worker_process

    quiet_worker_process()

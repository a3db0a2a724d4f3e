"""Run a sweep's instances in parallel with Dask, journalling each result as it lands.

Each instance is one task (`run.run_instance`), so a 15k-node decode step and a 10-node
random DAG are scheduled side by side on different workers. By default the workers are local
processes (a process each, one thread each, since scheduling is pure Python and holds the
GIL), with every server (the dashboard too, on a free port) bound to 127.0.0.1;
``scheduler="tcp://..."`` uses any running cluster instead, and ``workers=0`` runs
everything in this process (no Dask).

The journal is JSON lines, one record per finished instance, appended and flushed as each
arrives. A sweep started again with the same journal skips every instance already in it
(with all the policies asked for), so an interrupted sweep resumes where it stopped; a last
line cut off by the interruption is ignored and recomputed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from pccx_flow.errors import InputError


def read_journal(path: Path | None, policies: Iterable[str]) -> dict[str, dict]:
    """Finished records by instance key (those that cover every policy in `policies`)."""
    if path is None or not path.exists():
        return {}
    if not path.is_file():
        raise InputError(f"journal {path} is not a regular file; give a .jsonl file name")
    wanted = set(policies)
    done: dict[str, dict] = {}
    with path.open(encoding="utf-8") as f:
        for line in f:
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # a line cut off by an interrupted sweep: recompute that instance
            if isinstance(rec, dict) and "key" in rec and wanted <= set(rec.get("results", {})):
                done[rec["key"]] = rec
    return done


def _end_cut_line(path: Path | None) -> None:
    """End a last line an interruption cut off, so the next record starts on its own line."""
    if path is None or not path.exists() or path.stat().st_size == 0:
        return
    with path.open("rb+") as f:
        f.seek(-1, 2)
        if f.read(1) != b"\n":
            f.write(b"\n")


def _append(path: Path | None, record: dict) -> None:
    if path is None:
        return
    with path.open("a", encoding="utf-8") as f:
        f.write(json.dumps(record, default=str) + "\n")
        f.flush()


def run_sweep(
    instances: list[dict],
    policies: list[str],
    *,
    journal: Path | None = None,
    scheduler: str | None = None,
    workers: int = 2,
    progress: bool = True,
    task_options: dict[str, Any] | None = None,
    on_record: Callable[[dict], None] | None = None,
) -> list[dict]:
    """Every instance's record, in the order of `instances` (journalled ones are reused)."""
    from tqdm import tqdm

    from pccx_flow.compare.run import run_instance

    opts = dict(task_options or {})
    done = read_journal(journal, policies)
    _end_cut_line(journal)
    todo = [d for d in instances if d["key"] not in done]
    records = dict(done)
    bar = tqdm(
        total=len(instances), initial=len(instances) - len(todo), desc="compare", unit="inst",
        file=sys.stderr, disable=not progress, dynamic_ncols=True,
    )  # fmt: skip

    def landed(rec: dict) -> None:
        records[rec["key"]] = rec
        _append(journal, rec)
        bar.update()
        if on_record is not None:
            on_record(rec)

    try:
        if todo and (workers == 0 and scheduler is None):
            for desc in todo:
                landed(run_instance(desc, policies, **opts))
        elif todo:
            _run_dask(todo, policies, opts, scheduler, workers, landed)
    finally:
        bar.close()
    return [records[d["key"]] for d in instances if d["key"] in records]


def _run_dask(todo, policies, opts, scheduler, workers, landed) -> None:
    from pccx_flow.compare.run import run_instance

    # the biggest instances first, so a decode step does not start last and run alone
    todo = sorted(todo, key=lambda d: d["kind"] != "decode")
    run_on_dask(
        run_instance,
        [((d, policies), f"compare-{d['key']}") for d in todo],
        opts,
        scheduler=scheduler,
        workers=workers,
        landed=landed,
    )


def run_on_dask(
    fn: Callable[..., dict],
    tasks: list[tuple[tuple, str]],
    kwargs: dict[str, Any],
    *,
    scheduler: str | None,
    workers: int,
    landed: Callable[[dict], None],
) -> None:
    """Run ``fn(*args, **kwargs)`` for each ``(args, key)`` of `tasks` on Dask, handing each
    result to `landed` as it arrives (in any order).

    The cluster is local worker processes (one thread each: scheduling holds the GIL), every
    server bound to 127.0.0.1, or the running one at `scheduler`. `compare` and `explore`
    share it, so both sweep the same way. A `PccxFlowError` raised by a task ends the run in
    one line naming the task; a task that must not stop the run returns its error instead.
    """
    import dask
    from distributed import Client, LocalCluster, as_completed

    cluster = None
    if scheduler:
        from pccx_flow.execute.executor import connect_scheduler

        client = connect_scheduler(scheduler)
    else:
        with dask.config.set({"distributed.worker.daemon": False}):
            cluster = LocalCluster(
                n_workers=max(1, workers), threads_per_worker=1, processes=True,
                host="127.0.0.1", dashboard_address="127.0.0.1:0", silence_logs=40,
                preload=["pccx_flow.cluster.interrupt_preload"],
            )  # fmt: skip
        client = Client(cluster, set_as_default=False)
    try:
        futures = [client.submit(fn, *args, key=key, pure=False, **kwargs) for args, key in tasks]
        for fut in as_completed(futures, loop=client.loop):
            try:
                landed(fut.result())
            except Exception as exc:  # a worker lost, a bad instance: name it, keep the rest
                from pccx_flow.errors import PccxFlowError

                if not isinstance(exc, PccxFlowError):
                    raise
                raise InputError(f"instance {fut.key}: {exc}") from None
    finally:
        client.close()
        if cluster is not None:
            cluster.close()

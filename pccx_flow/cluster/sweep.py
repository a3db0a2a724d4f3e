"""Independent programs spread over every device of a cluster, nothing lost when one goes.

Each program (a decode step at some position, a bring-up prefix, another policy's step) is
one Dask task (`pccx_flow.cluster.npu_worker.dispatch_program`) asking for the worker
resource ``npu``, so the scheduler hands it to whichever device worker is free and runs one
task per device at a time. Two kinds of loss are handled, and both are reported:

- a worker that dies (its process killed, its board powered off) takes its running task
  with it; the scheduler runs that task again on another device worker by itself (up to
  ``distributed.scheduler.allowed-failures`` times); the task's ``suspicious`` count says
  how often that happened, summed over the program's attempts (a task rerun after its
  worker died may land on a failing device and be submitted again under a new key);
- a device that fails while its worker lives (a timeout, a DMA error, a device that
  disappeared) raises a `BoardError` naming the worker; the task is submitted again,
  restricted to the other device workers, up to `attempts` times in all.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pccx_flow.cluster import NPU_RESOURCE
from pccx_flow.cluster.npu_worker import dispatch_program, failed_worker
from pccx_flow.errors import BoardError

_SWEEPS = itertools.count()


@dataclass
class SweepResult:
    """Per program: its result (or None), where it ran, and what was lost on the way."""

    results: dict[str, dict | None] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    losses: list[str] = field(default_factory=list)  # one line per worker or device lost


def _suspicious(key: str, dask_scheduler=None) -> int:
    ts = dask_scheduler.tasks.get(key)
    return 0 if ts is None else int(ts.suspicious)


def dispatch_sweep(
    client,
    programs: Sequence[tuple[str, Any, list[int]]],
    weights_path: str,
    profile,
    *,
    workers: Sequence[str],
    attempts: int = 2,
    timeout: float | None = None,
    config=None,
    on_result: Callable[[str, dict], None] | None = None,
) -> SweepResult:
    """Run every ``(name, program, tokens)`` once on some device worker of `workers`
    (`config`: the checkpoint's, as the client opened it)."""
    from distributed import as_completed

    out = SweepResult()
    run = next(_SWEEPS)
    tries: dict[str, int] = {}
    failed_on: dict[str, set[str]] = {}
    by_name = {name: (program, tokens) for name, program, tokens in programs}

    def submit(name: str):
        tries[name] = tries.get(name, 0) + 1
        program, tokens = by_name[name]
        allowed = [w for w in workers if w not in failed_on.get(name, set())]
        return client.submit(
            dispatch_program, program, weights_path, tokens, profile, timeout, config,
            key=f"npu-dispatch-{name}-{run}-{tries[name]}", resources={NPU_RESOURCE: 1},
            workers=allowed or list(workers), allow_other_workers=False, pure=False,
        )  # fmt: skip

    pending = {submit(name): name for name in by_name}
    # workers that died under each program, over all its attempts: a task whose worker died
    # can run again on a device that then fails, and be resubmitted under a new key
    died: dict[str, int] = {}
    queue = as_completed(list(pending), loop=client.loop)
    for fut in queue:
        name = pending.pop(fut)
        try:
            res = fut.result()
        except BoardError as exc:
            died[name] = died.get(name, 0) + client.run_on_scheduler(_suspicious, fut.key)
            out.losses.append(f"{name}: {exc}")
            worker = failed_worker(str(exc))
            if worker:
                failed_on.setdefault(name, set()).add(worker)
            if tries[name] < attempts:
                again = submit(name)
                pending[again] = name
                queue.add(again)
            else:
                out.results[name], out.errors[name] = None, str(exc)
                if died.get(name):
                    out.losses.append(f"{name}: {died[name]} worker(s) died while running it")
            continue
        except Exception as exc:  # noqa: BLE001 - e.g. KilledWorker after too many losses
            out.results[name], out.errors[name] = None, f"{type(exc).__name__}: {exc}"
            continue
        lost = died.get(name, 0) + client.run_on_scheduler(_suspicious, fut.key)
        if lost:
            out.losses.append(
                f"{name}: {lost} worker(s) died while running it; it ran again on {res['worker']}"
            )
        res["worker_losses"] = lost
        out.results[name] = res
        if on_result is not None:
            on_result(name, res)
    return out

"""The device as a generation backend: each decode step a chain of Dask tasks on the NPU's worker.

`pccx-flow run --backend device` generates tokens on a device (a board or the fake one)
through Dask. Per position the decode graph is scheduled by the L2-aware timeline and
lowered to a program (as ``emit`` does; cached per position, policy and profile), then run
as a Dask graph on the worker that owns the device (`pccx_flow.cluster.npu_worker`):

    open (buffers, DDR image, device) -> piece 0 -> piece 1 -> ... -> close (logits, KV rows)

one task per batch or host step, each depending on the one before, because the program
orders them and a batch may start only on an idle device. Every task asks for the worker
resource ``npu`` and names the device's worker, so it runs there and nowhere else; the
tasks carry the lanes page's annotations (``npu`` for batches, ``host`` for host steps).
A piece that fails releases the step on the device and ends the run with its one-line
error. After each step the device's times and the plan go to the lanes page
(`pccx_flow.cluster.device_view`).
"""

from __future__ import annotations

import contextlib
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import dask
import numpy as np

from pccx_flow.cluster import NPU_RESOURCE
from pccx_flow.cluster.npu_worker import close_step, drop_step, open_step, run_pieces
from pccx_flow.errors import BoardError, InputError
from pccx_flow.execute.runtime import StepContext
from pccx_flow.execute.state import DecodeState, commit_step

_RUNS = itertools.count()


def device_workers(client) -> list[str]:
    """Addresses of the cluster's workers that advertise the ``npu`` resource."""
    workers = client.scheduler_info(n_workers=-1).get("workers", {})
    return sorted(a for a, w in workers.items() if (w.get("resources") or {}).get(NPU_RESOURCE))


def need_device_worker(client, where: str) -> str:
    """The first device worker, or an `InputError` saying how to start one."""
    found = device_workers(client)
    if not found:
        raise InputError(
            f"no worker of the cluster at {where} owns an NPU; start one with `dask worker "
            f"{where} --resources npu=1 --preload pccx_flow.cluster.npu_worker --npu fake` "
            "(or --npu /dev/uioN on a board)"
        )
    return found[0]


GROUPINGS = ("layer", "batch")


def group_pieces(program, steps: list, graph, per: str = "layer") -> list[list[int]]:
    """Program steps (indices into `steps`) grouped into tasks: ``batch`` one task per batch
    or host step (fences ride with the step before); ``layer`` the consecutive steps of one
    model layer per task. A dependent Dask task costs ~6 ms here on an in-process cluster
    (the scheduler batches its messages to a worker every 5 ms), and a tiny step has ~2,500
    batches and host steps, so per-batch tasks add ~13 s per step
    (`benchmarks/bench_device_tasks.py`); per layer, a few dozen
    tasks. The times recorded per batch are the same either way."""
    from pccx_flow.board.device.dispatch import Batch

    if per not in GROUPINGS:
        raise InputError(f"unknown task grouping {per!r}; use {' or '.join(GROUPINGS)}")
    groups: list[list[int]] = []
    last_layer = object()
    for i, step in enumerate(steps):
        if isinstance(step, Batch):
            node = program.nodes[step.first]
        elif step.get("kind") == "host":
            node = step.get("node")
        else:  # a fence: no work of its own
            if groups:
                groups[-1].append(i)
            else:
                groups.append([i])
            continue
        layer = (graph.nodes[node].get("layer") if node in graph else None) if node else None
        if per == "batch" or not groups or layer != last_layer:
            groups.append([i])
        else:
            groups[-1].append(i)
        last_layer = layer
    return groups


def piece_graph(tag: str, program, steps: list, groups: list[list[int]], graph,
                open_args: tuple) -> tuple[dict, str, dict]:  # fmt: skip
    """The step's task graph, its final key, and each key's lanes-page annotations."""
    from dask.task_spec import Task, TaskRef

    from pccx_flow.board.device.dispatch import Batch

    first = f"npu-open-{tag}"
    dsk = {first: Task(first, open_step, tag, *open_args)}
    ann = {first: _annotation("npu", "open", None, None)}
    prev = first
    for k, group in enumerate(groups):
        batches = [steps[i] for i in group if isinstance(steps[i], Batch)]
        if batches:
            node = program.nodes[batches[0].first]
            lane, op = "npu", "batch" if len(batches) == 1 else f"{len(batches)} batches"
        else:
            node = next((steps[i].get("node") for i in group if steps[i].get("node")), None)
            lane, op = "host", "host"
        layer = graph.nodes[node].get("layer") if node in graph else None
        key = f"{lane}-pieces-{k}-{tag}"
        dsk[key] = Task(key, run_pieces, tag, list(group), TaskRef(prev))
        ann[key] = _annotation(lane, op, node, layer)
        prev = key
    last = f"npu-close-{tag}"
    dsk[last] = Task(last, close_step, tag, TaskRef(prev))
    ann[last] = _annotation("npu", "close", None, None)
    return dsk, last, ann


def _annotation(lane: str, op: str, node, layer) -> dict:
    return {"lane_class": lane, "lane": lane, "node": None if node is None else str(node),
            "layer": layer, "block": None, "op": op, "kernel": "device"}  # fmt: skip


@dataclass
class DeviceSteps:
    """A step function for `generate`: lower the step, run its pieces on the device worker.

    `on_view(view)` receives each step's planned-vs-device payload (`device_view`)."""

    client: Any
    weights_path: str
    profile: Any
    worker: str
    timeout: float | None = None
    per: str = "layer"  # task grouping, `group_pieces`
    on_view: Callable[[dict], None] | None = None
    programs: dict = field(default_factory=dict)
    summaries: list[dict] = field(default_factory=list)
    views: list[dict] = field(default_factory=list)
    reports: list[dict] = field(default_factory=list)

    def program_for(self, graph, schedule, config, position: int):
        """The step's program, lowered once per (position, policy, profile)."""
        from pccx_flow.board.program.lower import lower

        key = (position, schedule.policy, self.profile.name)
        if key not in self.programs:
            self.programs[key] = lower(graph, schedule, self.profile, config)
        return self.programs[key]

    def __call__(self, graph, schedule, state: DecodeState, precision: str) -> np.ndarray:
        from pccx_flow.board.device.dispatch import plan
        from pccx_flow.board.device.fake_timing import issue_model_for
        from pccx_flow.board.device.regmap import board_registers
        from pccx_flow.cluster.device_view import device_view, source_label

        if precision != "float32":
            raise InputError("the device computes float32 (BF16 in L2 as built); drop --precision")
        program = self.program_for(graph, schedule, state.config, state.position)
        self.summaries.append(program.summary)
        steps = plan(program, board_registers(self.profile).max_batch)
        ctx = StepContext(state.config, state.semantics, state.position, state.token_id)
        tag = f"p{state.position}-{next(_RUNS):06x}"
        # the caches as they are: `get` is synchronous, so nothing changes them while the
        # step runs, and the open task only reads them into the DDR image
        open_args = (program, self.weights_path, state.k_cache, state.v_cache, ctx,
                     self.profile, self.timeout)  # fmt: skip
        groups = group_pieces(program, steps, graph, self.per)
        dsk, last, ann = piece_graph(tag, program, steps, groups, graph, open_args)
        names = next(iter(ann.values())).keys()
        pinned = {"resources": {NPU_RESOURCE: 1}, "workers": [self.worker],
                  "allow_other_workers": False}  # fmt: skip
        try:
            with dask.annotate(**pinned, **{n: (lambda k, n=n: ann[k][n]) for n in names}):
                out = self.client.get(dsk, last, sync=True)
        except BaseException:
            # release the step on the device; a worker that is gone took it with it
            with contextlib.suppress(Exception):
                self.client.run(drop_step, tag, workers=[self.worker])
            raise
        if out["logits"] is None:
            raise BoardError("the device step read no logits back; re-emit the program")
        commit_step(state, out["kv_rows"])
        self.reports.append(out["report"])
        source = source_label(out["records"], self.profile.name, issue_model_for(program))
        view = device_view(program, schedule, out["records"], core_hz=float(self.profile.core_hz),
                           step=len(self.views) + 1, source=source)  # fmt: skip
        self.views.append(view)
        if self.on_view is not None:
            self.on_view(view)
        return out["logits"]

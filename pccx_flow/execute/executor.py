"""Execute one decode step: the scheduled nodes compute the logits, on Dask or in a loop.

`execute` turns the decode graph into a Dask graph (one task per node, see `dask_graph`),
runs it on the local threaded scheduler by default or on a `distributed` cluster when given
a client or an address, then commits the step's new K/V rows into the decode state and
returns the logits. `run_sequential` calls the same kernels in topological order without
Dask, to measure what Dask costs.

>>> logits = execute(graph, ckpt, state)                       # doctest: +SKIP
>>> logits = execute(graph, ckpt, state, scheduler="tcp://127.0.0.1:8786")  # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dask
import networkx as nx
import numpy as np
from dask.system import CPU_COUNT

from pccx_flow.errors import ExecutionError, InputError
from pccx_flow.execute import kernels as kernel_module
from pccx_flow.execute.dask_graph import DaskStep, build_dask_graph, build_fused_dask_graph
from pccx_flow.execute.loop import run_calls_in_order
from pccx_flow.execute.plan import NodeCall, plan_graph
from pccx_flow.execute.runtime import StepContext, WeightsRef
from pccx_flow.execute.state import DecodeState, commit_step
from pccx_flow.precision import DEFAULT_PRECISION, check_precision

_RUN_COUNTER = itertools.count()

# Ready tasks handed to a worker thread per dispatch on the threaded scheduler (dask's
# ``chunksize``; a ``chunksize`` in the dask config wins). With one task per node, batching
# two saves dispatches (one E4B step here: 1 -> 2.1 s, 2 -> 1.7 s, 4 -> 1.65 s; loop 0.86 s).
# Fused tasks are few and large: a batch of two would keep the second thread idle while the
# first runs both, so they go one at a time.
THREADED_CHUNKSIZE = 2
FUSED_CHUNKSIZE = 1


@dataclass
class StepOutputs:
    """What one executed step produced: logits, the new KV rows, and every node's outputs."""

    logits: np.ndarray
    kv_rows: dict[int, tuple[np.ndarray, np.ndarray]]
    node_outputs: dict[str, tuple]


def check_graph_matches_state(graph: nx.DiGraph, state: DecodeState) -> None:
    """Raise `InputError` when the graph was built for another position, model or semantics."""
    meta = graph.graph
    if meta.get("position") is not None and meta["position"] != state.position:
        raise InputError(
            f"graph was built for position {meta['position']} but the decode state is at "
            f"position {state.position}; build the graph for the state's position"
        )
    if meta.get("semantics") is not None and meta["semantics"] != state.semantics:
        raise InputError(
            f"graph uses semantics {meta['semantics']!r} but the decode state {state.semantics!r}"
        )
    layers = meta.get("layers")
    if layers is not None and list(layers) != [0, state.config.n_layers]:
        raise InputError(
            f"graph covers layers {layers[0]}..{layers[1] - 1} only; execute needs the whole "
            "step (build it without layers=)"
        )
    if meta.get("config") is not None and meta["config"] != state.config.name:
        raise InputError(
            f"graph was built for config {meta['config']!r} but the state is {state.config.name!r}"
        )


def as_weights_ref(weights: Any) -> WeightsRef:
    """Wrap an opened checkpoint or a checkpoint directory (a `WeightsRef` passes through)."""
    if isinstance(weights, WeightsRef):
        return weights
    if isinstance(weights, str | Path):
        from pccx_flow.weights.checkpoint import open_checkpoint

        return WeightsRef(open_checkpoint(weights))
    return WeightsRef(weights)


def prepare(
    graph: nx.DiGraph,
    state: DecodeState,
    calls: dict[str, NodeCall] | None = None,
    precision: str = DEFAULT_PRECISION,
):
    """Plan, step context and external values of a step: what every runner needs."""
    check_graph_matches_state(graph, state)
    calls = plan_graph(graph) if calls is None else calls
    ctx = StepContext(
        config=state.config,
        semantics=state.semantics,
        position=state.position,
        token_id=state.token_id,
        precision=check_precision(precision),
    )
    externals = kernel_module.step_externals(calls, state)
    return calls, ctx, externals


def _finish(state: DecodeState, calls, results: dict[str, tuple], commit: bool) -> StepOutputs:
    logits = kernel_module.step_logits(calls, results)
    kv_rows = kernel_module.step_kv_rows(calls, results)
    if commit:
        commit_step(state, kv_rows)
    return StepOutputs(logits=logits, kv_rows=kv_rows, node_outputs=results)


# A refused or silent address fails within this many seconds; a scheduler that answers
# gets `WORKERS_WAIT_S` for its first worker to join.
CONNECT_TIMEOUT_S = 2.0
WORKERS_WAIT_S = 15.0


def _client_for(client: Any, scheduler: Any, connect_timeout: float = CONNECT_TIMEOUT_S):
    """A distributed client from `client` or an address in `scheduler`, or None."""
    if client is not None:
        return client, False
    if isinstance(scheduler, str) and "://" in scheduler:
        return connect_scheduler(scheduler, connect_timeout), True
    return None, False


def connect_scheduler(address: str, limit_s: float = CONNECT_TIMEOUT_S):
    """Connect to the Dask scheduler at `address`, or fail with one line within `limit_s`.

    `Client(timeout=...)` bounds the TCP connect but not the handshake: a peer that accepts
    and then says nothing (an HTTP server) hangs it, one that answers garbage fails deep in
    the protocol, and the half-built client then times out again when it is collected. So
    the address is first asked for its identity over a bare comm, under an overall limit and
    in a thread of its own (the caller may already run an event loop); only a peer that says
    it is a Dask scheduler gets a `Client`.
    """
    from distributed import Client
    from distributed.comm import connect

    async def identity() -> Any:
        comm = await connect(address, timeout=f"{limit_s}s")
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    box: dict[str, Any] = {}

    def ask() -> None:
        try:
            box["identity"] = asyncio.run(asyncio.wait_for(identity(), limit_s))
        except BaseException as exc:  # noqa: BLE001 - reported below as one line
            box["error"] = exc

    asker = threading.Thread(target=ask, name="pccx-scheduler-probe", daemon=True)
    asker.start()
    asker.join(limit_s + 1)
    ident = box.get("identity")
    if not (isinstance(ident, dict) and ident.get("type") == "Scheduler"):
        err = box.get("error")
        why = (
            "it is not a Dask scheduler"
            if "identity" in box
            else (type(err).__name__ if err else f"no answer in {limit_s:g} s")
        )
        raise InputError(
            f"cannot reach a Dask scheduler at {address} ({why}); "
            "start one with `dask scheduler --host 127.0.0.1` or omit --scheduler"
        )
    try:
        client = Client(address, timeout=f"{limit_s}s", set_as_default=False)
    except (OSError, TimeoutError) as exc:
        raise InputError(
            f"cannot connect a client to the Dask scheduler at {address} ({type(exc).__name__})"
        ) from None
    try:  # a scheduler without workers would accept the step and never run it
        client.wait_for_workers(1, timeout=max(limit_s, WORKERS_WAIT_S))
    except TimeoutError:
        client.close()
        raise InputError(
            f"the Dask scheduler at {address} has no workers after "
            f"{max(limit_s, WORKERS_WAIT_S):g} s; "
            f"start one with `dask worker {address}`"
        ) from None
    return client


def _annotations(step: DaskStep) -> dict:
    """`dask.annotate` arguments: one callable of the key per annotation the step's tasks
    carry (lane_class, node, layer, ...; lane and priority too when it was scheduled)."""
    ann = step.annotations
    names = next(iter(ann.values())).keys() if ann else ("lane_class",)
    return {name: (lambda k, name=name: ann[k][name]) for name in names}


@contextlib.contextmanager
def connect(client: Any = None, scheduler: Any = None, connect_timeout: float = CONNECT_TIMEOUT_S):
    """The distributed client to run on (given, or connected to the address in `scheduler`
    and closed on exit), or None for the local schedulers."""
    dist, owned = _client_for(client, scheduler, connect_timeout)
    try:
        yield dist
    finally:
        if owned:
            dist.close()


def worker_count(client: Any, scheduler: Any) -> int:
    """How many tasks can run at once: the cluster's threads, the local thread pool's size
    (a ``pool`` or ``num_workers`` in the dask config, else the CPU count), or 1 for the
    synchronous scheduler. A cluster whose workers have not joined yet counts as the CPU
    count, not 1, so a step is not fused into a single task by accident."""
    if client is not None:
        return sum(client.nthreads().values()) or CPU_COUNT
    if scheduler in ("sync", "synchronous"):
        return 1
    pool = dask.config.get("pool", None)
    if pool is not None and getattr(pool, "_max_workers", None):
        return int(pool._max_workers)
    return int(dask.config.get("num_workers", None) or CPU_COUNT)


def step_priorities(step: DaskStep) -> dict[str, int]:
    """Task key -> priority, when the step was built with a schedule (else empty)."""
    return {k: a["priority"] for k, a in step.annotations.items() if "priority" in a}


def follow_priorities(prio: dict[str, int]) -> tuple:
    """A local-scheduler callback that makes Dask run ready tasks in priority order (`prio`:
    task key -> priority, as `step_priorities` gives).

    `dask.local` keeps its ready tasks in a stack ordered by `dask.order` and ignores
    annotations. After the state is set up and after every finished task, this sorts the
    stack so the highest priority is taken next: the schedule's order wherever dependencies
    allow (with one thread, exactly the schedule's order). Returned in the form
    `dask.local.get_async` takes per call, ``(start, start_state, pretask, posttask,
    finish)``, so it applies to this step only (a `dask.callbacks.Callback` used as a
    context manager would be registered for every scheduler running in the process).
    """

    def order_ready(state: dict) -> None:
        state["ready"].sort(key=lambda key: prio.get(key, 0))  # popped from the end

    def start_state(dsk, state) -> None:
        order_ready(state)

    def posttask(key, result, dsk, state, worker_id) -> None:
        order_ready(state)

    return (None, start_state, None, posttask, None)


def run_dask_step(
    step: DaskStep,
    keys: list[str],
    *,
    client: Any = None,
    scheduler: Any = None,
    chunksize: int = THREADED_CHUNKSIZE,
) -> list:
    """Compute `keys` of a Dask step on the chosen scheduler; returns their values in order.

    `chunksize` applies to the threaded scheduler only."""
    with connect(client, scheduler) as dist:
        if dist is not None:
            with dask.annotate(**_annotations(step)):
                return dist.get(step.dsk, keys, sync=True)
    prio = step_priorities(step)
    callbacks = [follow_priorities(prio)] if prio else None
    if scheduler in (None, "threads", "threaded"):
        chunksize = dask.config.get("chunksize", chunksize)
        return dask.threaded.get(step.dsk, keys, chunksize=chunksize, callbacks=callbacks)
    if scheduler in ("sync", "synchronous"):
        return dask.get(step.dsk, keys, callbacks=callbacks)
    raise InputError(
        f"unknown scheduler {scheduler!r}; use threads, sync or a tcp://host:port address"
    )


def execute_step(
    graph: nx.DiGraph,
    weights: Any,
    state: DecodeState,
    *,
    schedule: Any = None,
    client: Any = None,
    scheduler: Any = None,
    commit: bool = True,
    calls: dict[str, NodeCall] | None = None,
    kernels: str = "default",
    fuse: bool = False,
    fuse_grain: float | None = None,
    precision: str = DEFAULT_PRECISION,
) -> StepOutputs:
    """Like `execute` but returns every node's outputs and the KV rows as well.

    `fuse_grain` overrides what a fused task is charged (seconds; see
    `pccx_flow.execute.fuse`), for measuring how the grouping's grain matters."""
    calls, ctx, externals = prepare(graph, state, calls, precision)
    tag = f"s{state.position}"
    if client is not None or (isinstance(scheduler, str) and "://" in scheduler):
        # A long-lived cluster may still know keys of an earlier run of the same position.
        tag += f"-{next(_RUN_COUNTER):08x}"
    with connect(client, scheduler) as dist:
        common = dict(
            kernels=kernels,
            ctx=ctx,
            weights=as_weights_ref(weights),
            externals=externals,
            step_tag=tag,
            schedule=schedule,
        )
        if fuse:
            workers = worker_count(dist, scheduler)
            step = build_fused_dask_graph(graph, calls, workers=workers, grain=fuse_grain, **common)
            results = {}
            keys = list(step.dsk)
            kw = dict(client=dist, scheduler=scheduler, chunksize=FUSED_CHUNKSIZE)
            for group in run_dask_step(step, keys, **kw):
                results.update(group)
        else:
            step = build_dask_graph(graph, calls, **common)
            nodes = list(calls)
            values = run_dask_step(step, step.keys_for(nodes), client=dist, scheduler=scheduler)
            results = dict(zip(nodes, values, strict=True))
    return _finish(state, calls, results, commit)


def execute(
    graph: nx.DiGraph,
    weights: Any,
    state: DecodeState,
    *,
    schedule: Any = None,
    client: Any = None,
    scheduler: Any = None,
    commit: bool = True,
    fuse: bool = False,
    precision: str = DEFAULT_PRECISION,
) -> np.ndarray:
    """Run one decode step of `graph` with Dask and return its logits (``[vocab]``, float32
    unless `precision` says float64).

    `weights` is an opened checkpoint (or its directory). The step runs on
    `dask.threaded.get` unless `client` (a `distributed.Client`) or `scheduler` (``"sync"``
    or an address like ``tcp://127.0.0.1:8786``) says otherwise; on distributed, workers
    open the checkpoint from its path themselves. With a `schedule`, tasks carry its lanes
    and its order as priorities, which distributed and the local schedulers alike follow
    wherever dependencies allow (`follow_priorities`). After the step the new K/V rows
    are committed into `state` and its position advances by one (unless
    ``commit=False``). A failing kernel raises
    `ExecutionError` naming the node. ``fuse=True`` runs the nodes as fewer, larger tasks
    shaped for the number of threads or workers that will run them
    (`pccx_flow.execute.fuse`): same kernels, same bits. ``precision="float64"`` keeps every
    activation in float64 (logits too) to check the graph's structure against a float64
    reference decode without float32 noise (`pccx_flow.precision`).
    """
    return execute_step(
        graph,
        weights,
        state,
        schedule=schedule,
        client=client,
        scheduler=scheduler,
        commit=commit,
        fuse=fuse,
        precision=precision,
    ).logits


def run_sequential(
    graph: nx.DiGraph,
    weights: Any,
    state: DecodeState,
    *,
    commit: bool = True,
    calls: dict[str, NodeCall] | None = None,
    kernels: str = "default",
    precision: str = DEFAULT_PRECISION,
) -> np.ndarray:
    """The same kernels as `execute`, called one after another in topological order."""
    calls, ctx, externals = prepare(graph, state, calls, precision)
    results = run_calls_in_order(
        calls, kernels=kernels, ctx=ctx, weights=as_weights_ref(weights), externals=externals
    )
    return _finish(state, calls, results, commit).logits


__all__ = ["ExecutionError", "StepOutputs", "execute", "execute_step", "run_sequential"]

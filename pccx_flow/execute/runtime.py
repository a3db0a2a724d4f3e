"""Calling one node's kernel: the single function every runner (Dask or loop) executes.

`run_node` gathers the node's inputs from its producers' outputs, calls the kernel named by
the node, checks the outputs against the shapes the node declares, and turns any failure into
an `ExecutionError` that names the node and the kernel in one line. Runners only decide
*when* and *where* `run_node` is called.

Weights travel as a `WeightsRef`: inside one process it is the opened checkpoint itself; when
pickled (a task shipped to a `distributed` worker process) it reduces to the checkpoint path
and the worker opens the checkpoint once and keeps it, so arrays never cross the wire.
"""

from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pccx_flow.errors import ExecutionError
from pccx_flow.execute.kernels import kernel_table
from pccx_flow.execute.plan import NodeCall
from pccx_flow.model.config import Gemma3nConfig
from pccx_flow.precision import DEFAULT_PRECISION, computing_in

_NO_SCOPE = contextlib.nullcontext()


@dataclass(frozen=True)
class StepContext:
    """The scalars of the step every kernel may read: token, position, semantics, config, and
    the activation precision (`pccx_flow.precision`)."""

    config: Gemma3nConfig
    semantics: str
    position: int
    token_id: int
    precision: str = DEFAULT_PRECISION

    def __dask_tokenize__(self) -> tuple:
        # one per task of a step: not the whole config walked each time (`NodeCall`'s note)
        return ("StepContext", hash(self.config), self.semantics, self.position, self.token_id,
                self.precision)  # fmt: skip


_OPEN_LOCK = threading.Lock()
_OPENED: dict[str, Any] = {}


def _open_cached(path: str, config=None):
    """The checkpoint at `path`, opened once per process (used on worker processes)."""
    with _OPEN_LOCK:
        ckpt = _OPENED.get(path)
        if ckpt is None:
            from pccx_flow.weights.checkpoint import open_checkpoint

            ckpt = _OPENED[path] = open_checkpoint(path, config)
        return ckpt


def _weights_from_path(path: str, config=None) -> WeightsRef:
    return WeightsRef(_open_cached(path, config), path)


class WeightsRef:
    """An opened checkpoint that pickles as its path (so workers load weights themselves)."""

    def __init__(self, checkpoint: Any, path: str | Path | None = None):
        self.checkpoint = checkpoint
        if path is None:
            path = getattr(checkpoint, "path", None) or getattr(checkpoint, "root", None)
        self.path = None if path is None else str(path)

    def __dask_tokenize__(self) -> tuple:
        # else Dask pickles it (path and config) for every task that reads weights
        return ("WeightsRef", self.path if self.path is not None else id(self.checkpoint))

    def __reduce__(self):
        if self.path is None:
            return (WeightsRef, (self.checkpoint, None))
        return (_weights_from_path, (self.path, getattr(self.checkpoint, "config", None)))


def _one_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())


def gather_inputs(call: NodeCall, produced: tuple) -> list:
    """The node's inputs in declared order; None for inputs taken from the step context."""
    return [None if src is None else produced[src[0]][src[1]] for src in call.sources]


def run_node(
    call: NodeCall,
    kernels: str,
    ctx: StepContext,
    weights: WeightsRef,
    external: dict | None,
    *produced: tuple,
) -> tuple:
    """Run one node: its kernel on its gathered inputs; returns its outputs as a tuple."""
    table = kernel_table(kernels)  # by name: the task ships only the name
    try:
        kernel = table[call.kernel]
    except KeyError:
        raise ExecutionError(
            f"node {call.node}: no kernel named {call.kernel!r} in the {kernels!r} kernel table"
        ) from None
    # Kernels read the activation dtype from the context; set it only when it is not the
    # default, so the float32 path costs nothing.
    scope = computing_in(ctx.precision) if ctx.precision != DEFAULT_PRECISION else _NO_SCOPE
    try:
        with scope:
            outputs = kernel(call, gather_inputs(call, produced), ctx, weights.checkpoint, external)
    except ExecutionError:
        raise
    except Exception as exc:
        raise ExecutionError(
            f"node {call.node} (kernel {call.kernel}) failed: {_one_line(exc)}"
        ) from exc
    if not isinstance(outputs, tuple):
        outputs = (outputs,)
    if len(outputs) != len(call.output_names):
        raise ExecutionError(
            f"node {call.node} (kernel {call.kernel}) returned {len(outputs)} outputs, "
            f"the node declares {len(call.output_names)}"
        )
    for name, out, shape in zip(call.output_names, outputs, call.output_shapes, strict=True):
        if tuple(np.shape(out)) != shape:
            raise ExecutionError(
                f"node {call.node} (kernel {call.kernel}) wrote {name} with shape "
                f"{tuple(np.shape(out))}, the node declares {shape}"
            )
        if _not_finite(out):
            raise ExecutionError(
                f"node {call.node} (kernel {call.kernel}) wrote NaN or infinite values to "
                f"{name}; the inputs or weights overflow (check the checkpoint with "
                "`pccx-flow weights verify`)"
            )
    return outputs


def _not_finite(out) -> bool:
    """A floating output holding NaN or +-inf (every later node would carry it to the logits)."""
    a = np.asarray(out) if not isinstance(out, np.ndarray) else out
    return a.dtype.kind == "f" and not np.isfinite(a).all()


def run_group(
    calls: tuple[NodeCall, ...],
    kernels: str,
    ctx: StepContext,
    weights: WeightsRef,
    externals: dict,
    *group_results: dict,
) -> dict[str, tuple]:
    """Run a fused group's nodes in order; returns every member's outputs by node id.

    `group_results` are the outputs of the groups this one depends on (dicts node -> outputs).
    Each member still goes through `run_node`, so errors name the member node.
    """
    available: dict[str, tuple] = {}
    for res in group_results:
        available.update(res)
    local: dict[str, tuple] = {}
    for call in calls:
        produced = [available[p] for p in call.producers]
        out = run_node(call, kernels, ctx, weights, externals.get(call.node), *produced)
        available[call.node] = local[call.node] = out
    return local

"""The kernel tables: kernel name -> NumPy function, and what a step needs from the state.

Every kernel has one signature::

    kernel(call: NodeCall, inputs: list[np.ndarray | None], ctx: StepContext,
           weights: Checkpoint, external: dict | None) -> np.ndarray | tuple[np.ndarray, ...]

``inputs`` follow the node's declared ``inputs`` (None for one not produced in the step),
the return value follows its declared ``outputs``. Kernels are grouped by kind in
``kernels_*`` modules; this module only collects them into the ``default`` table, which is
what a task names (a short string ships to a worker, a table of functions would not).

Two kinds of value cross the step boundary, and both are described here so every runner
handles them the same way:

- values from the state into the step (`step_externals`): the token id and position are in
  `StepContext`; KV rows of earlier positions are handed to each KV-read node as
  ``external = {"rows": cache[layer][a:p]}``;
- values from the step into the state (`step_kv_rows`, `step_logits`): the KV-write nodes'
  outputs, committed after the step, and the logits.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from pccx_flow.errors import ExecutionError

Kernel = Callable[..., object]

_TABLES: dict[str, dict[str, Kernel]] = {}


def register_table(name: str, table: dict[str, Kernel]) -> None:
    """Make a kernel table available by name (the ``default`` table is built on first use)."""
    _TABLES[name] = table


def kernel_table(name: str = "default") -> dict[str, Kernel]:
    """The kernel table called `name`."""
    if name == "default" and name not in _TABLES:
        _TABLES[name] = _default_table()
    try:
        return _TABLES[name]
    except KeyError:
        raise ExecutionError(f"no kernel table named {name!r}") from None


def _default_table() -> dict[str, Kernel]:
    from pccx_flow.execute import kernels_cvo, kernels_gemv, kernels_host, kernels_mem

    table: dict[str, Kernel] = {}
    for module in (kernels_gemv, kernels_cvo, kernels_host, kernels_mem):
        overlap = set(table) & set(module.KERNELS)
        if overlap:
            raise RuntimeError(f"kernel names defined twice: {sorted(overlap)}")
        table.update(module.KERNELS)
    return table


def step_externals(calls: dict, state) -> dict[str, dict]:
    """Per node, the values it takes from the decode state (only KV reads need any)."""
    from pccx_flow.execute.kernels_mem import kv_read_externals

    out: dict[str, dict] = {}
    for node, call in calls.items():
        ext = kv_read_externals(call, state)
        if ext is not None:
            out[node] = ext
    return out


def step_kv_rows(calls: dict, results: dict[str, tuple]) -> dict[int, tuple]:
    """The new K and V row of every cache layer, from the KV-write nodes' outputs."""
    from pccx_flow.execute.kernels_mem import kv_write_rows

    return kv_write_rows(calls, results)


def step_logits(calls: dict, results: dict[str, tuple], name: str = "logits") -> np.ndarray:
    """The step's output tensor called `name` (the read-back logits)."""
    for node, call in calls.items():
        if name in call.output_names:
            return np.asarray(results[node][call.output_names.index(name)])
    raise ExecutionError(f"the decode graph writes no tensor named {name!r}")

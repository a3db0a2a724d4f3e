"""The plain sequential runner: the same kernel calls as the Dask graph, in topological order.

It exists to measure what Dask costs (``benchmarks/bench_execute.py`` reports dask / loop) and
as the simplest possible runner to reason about: no threads, no task objects, one call per
node. `plan_graph` already lists the calls in a topological order.
"""

from __future__ import annotations

from pccx_flow.execute.plan import NodeCall
from pccx_flow.execute.runtime import StepContext, WeightsRef, run_node


def run_calls_in_order(
    calls: dict[str, NodeCall],
    *,
    kernels: str,
    ctx: StepContext,
    weights: WeightsRef,
    externals: dict[str, dict],
) -> dict[str, tuple]:
    """Outputs of every node, calling `run_node` once per node in the order of `calls`."""
    results: dict[str, tuple] = {}
    for node, call in calls.items():
        produced = [results[p] for p in call.producers]
        results[node] = run_node(call, kernels, ctx, weights, externals.get(node), *produced)
    return results

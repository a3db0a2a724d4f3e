"""One instance of a sweep: every policy, the lower bounds and (when small) the optimum.

`run_instance` is what a Dask worker runs. It returns one plain record (the journal line):
the instance's size, every lower bound and the largest, per policy the makespan and the wall
time to schedule *and validate* it, and the exact solver's result when the instance has at
most `exact_max_nodes` nodes and OR-Tools is installed. Ratios are left to `summary`, which
sees every policy of an instance at once.
"""

from __future__ import annotations

import time
from typing import Any

from pccx_flow.errors import PccxFlowError


def instance_bounds(problem: Any, profile: Any) -> dict[str, int]:
    """Every lower bound `schedule` reports for the same problem (`step_bounds`): so a
    decode step within L2 is measured against its capacity and residency bounds too."""
    from pccx_flow.schedule.metrics import step_bounds

    return dict(step_bounds(problem, profile)["bounds_cycles"])


def run_instance(
    desc: dict,
    policies: list[str],
    *,
    exact_max_nodes: int = 40,
    exact_seconds: float = 5.0,
    seed: int = 0,
) -> dict:
    """Schedule one instance with every policy; never raises for a policy's own failure."""
    from pccx_flow.compare.instances import build_problem
    from pccx_flow.schedule.metrics import estimate_label
    from pccx_flow.schedule.registry import make_policy, run_on_problem

    t0 = time.perf_counter()
    problem, profile = build_problem(desc)
    build_s = time.perf_counter() - t0
    bounds = instance_bounds(problem, profile)
    largest = max(bounds, key=lambda k: bounds[k])
    record: dict[str, Any] = {
        **desc,
        "nodes": len(problem),
        "edges": problem.graph.number_of_edges() + len(problem.order_edges),
        "lanes": len(problem.lanes),
        "pool_counts": dict(problem.pools),
        "has_comm": problem.has_comm,
        "build_seconds": build_s,
        "bounds": bounds,
        "largest_bound": largest,
        "largest_bound_cycles": bounds[largest],
        "estimate": estimate_label(profile) if profile is not None else None,
        "results": {},
    }
    best = None
    for name in policies:
        try:
            policy = make_policy(name, seed=seed)
            t = time.perf_counter()
            schedule = run_on_problem(policy, problem, label=name, profile=desc["key"])
            secs = time.perf_counter() - t
        except PccxFlowError as exc:
            record["results"][name] = {"error": str(exc)}
            continue
        record["results"][name] = {"makespan": schedule.makespan, "seconds": secs}
        if best is None or schedule.makespan < best.makespan:
            best = schedule
    record["exact"] = _exact(problem, best, exact_max_nodes, exact_seconds)
    return record


def _exact(problem: Any, best: Any, max_nodes: int, seconds: float) -> dict:
    from pccx_flow.compare.exact import ExactPolicy, ortools_available, solve_exact
    from pccx_flow.schedule.registry import run_on_problem

    if len(problem) > max_nodes:
        return {"status": "skipped", "reason": f"over {max_nodes} nodes"}
    if not ortools_available():
        return {"status": "skipped", "reason": "ortools not installed (pip install ortools)"}
    hint = {n: (s.lane, s.start) for n, s in best.slots.items()} if best else None
    res = solve_exact(problem, upper=best.makespan if best else None, hint=hint, seconds=seconds)
    placement = res.pop("placement", None)
    if placement is not None:  # the solver's schedule must pass the validator too
        checked = run_on_problem(ExactPolicy(placement), problem, label="exact", profile="exact")
        res["makespan"] = checked.makespan
    return res

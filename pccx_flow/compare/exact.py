"""The optimal makespan of a small problem, with OR-Tools CP-SAT (optional extra ``ortools``).

The model is the scheduling problem itself, written from its rules (not from any policy):

- each node picks exactly one lane that can run it (a boolean per (node, lane)) and gets an
  optional interval of that lane's cost on it; a lane runs one interval at a time
  (``AddNoOverlap`` per lane);
- a node's start is at least each predecessor's end, plus the edge's comm cost when the two
  chose different lanes (one implication per pair of lanes the two can use);
- each pool with k instances is a cumulative resource of capacity k over the intervals of
  the nodes that hold it. Capacity k with unit demands is the same as handing out k named
  instances: intervals that never overlap more than k at once can always be coloured with k
  colours (interval graphs are perfect), which is what the validator checks afterwards;
- each capacity (L2) is a cumulative resource of its size in bytes over one interval per
  hold, from the holding node's start to the latest finish of it and its readers (the
  validator's occupancy rule), so a problem within L2 has its own optimum.

The best heuristic schedule seeds the search (hint and horizon), so the solver only has to
improve on it and prove the rest. `solve_exact` returns the status (``optimal`` when proven),
the makespan found, CP-SAT's proven lower bound, and the schedule as ``{node: (lane, start)}``
so it can pass through the same validator as every policy.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from pccx_flow.schedule.problem import SchedulingProblem

EXACT_MAX_NODES = 40


def ortools_available() -> bool:
    try:
        from ortools.sat.python import cp_model  # noqa: F401
    except ImportError:
        return False
    return True


def solve_exact(
    problem: SchedulingProblem,
    *,
    upper: int | None = None,
    hint: dict[Any, tuple[str, int]] | None = None,
    seconds: float = 10.0,
    workers: int = 1,
    parameters: Mapping[str, Any] | None = None,
    energy: bool = False,
) -> dict:
    """Solve `problem` to optimality within `seconds` of wall time (or report how far it got).

    `parameters` sets further CP-SAT parameters by name (``{"linearization_level": 2}``, or
    ``{"subsolvers": [...]}`` for a list field), after the ones set here. `energy` adds one
    redundant constraint per pool, count x makespan >= the work of the nodes that hold it
    (the pool bound of `pccx_flow.bounds`): every schedule meets it, and CP-SAT's linear
    relaxation does not find it from the cumulative (on a one-layer cut of the E4B step it
    proved 0.96 M cycles without it, against a pool bound of 2.92 M)."""
    from ortools.sat.python import cp_model

    t0 = time.perf_counter()
    m = cp_model.CpModel()
    order = problem.order
    if upper is None:  # everything in a row on its cheapest lane, plus every comm
        upper = sum(problem.min_cost(n) for n in order) + sum(
            max((problem.comm(u, v, a, b) for a in problem.lanes_for(u)
                 for b in problem.lanes_for(v)), default=0)
            for u in order for v in problem.succs[u]
        )  # fmt: skip
    start, end, use, dur = {}, {}, {}, {}
    by_lane: dict[str, list] = {ln.name: [] for ln in problem.lanes}
    for n in order:
        start[n] = m.NewIntVar(0, upper, f"s_{n}")
        end[n] = m.NewIntVar(0, upper, f"e_{n}")
        row = problem.costs[n]
        lo, hi = min(row.values()), max(row.values())
        dur[n] = m.NewIntVar(lo, hi, f"d_{n}")
        use[n] = {}
        for lane, c in row.items():
            x = m.NewBoolVar(f"x_{n}_{lane}")
            use[n][lane] = x
            # the interval owns no end variable: with `end[n]` shared by the optional
            # intervals of every lane, OR-Tools 9.15 proved a wrong optimum (126 for a
            # fork-join DAG whose valid 124 a policy found; 135 without presolve)
            iv = m.NewOptionalFixedSizeIntervalVar(start[n], c, x, f"i_{n}_{lane}")
            if c > 0:  # a node of no time occupies no lane time: the validator lets it sit
                by_lane[lane].append(iv)  # inside another's slot; CP-SAT's NoOverlap did not
            m.Add(end[n] == start[n] + c).OnlyEnforceIf(x)
            m.Add(dur[n] == c).OnlyEnforceIf(x)
        m.AddExactlyOne(use[n].values())
    for ivs in by_lane.values():
        if len(ivs) > 1:
            m.AddNoOverlap(ivs)
    for u in order:
        for v in problem.succs[u]:
            m.Add(start[v] >= end[u])
            if not problem.has_comm:
                continue
            for a, xa in use[u].items():
                for b, xb in use[v].items():
                    c = problem.comm(u, v, a, b)
                    if c > 0:
                        m.Add(start[v] >= end[u] + c).OnlyEnforceIf([xa, xb])
    for pool, count in problem.pools.items():
        users = [n for n in order if pool in problem.resources[n]]
        if len(users) > count:
            ivs = [m.NewIntervalVar(start[n], dur[n], end[n], f"p_{pool}_{n}") for n in users]
            m.AddCumulative(ivs, [1] * len(ivs), count)
    for cap, size in problem.capacities.items():
        ivs, demands = [], []
        for k, hold in enumerate(problem.holds):
            nbytes = dict(hold.row).get(cap, 0)
            if not nbytes:
                continue
            n = hold.node
            free = m.NewIntVar(0, upper, f"free_{cap}_{k}")
            m.AddMaxEquality(free, [end[n], *(end[r] for r in hold.readers)])
            length = m.NewIntVar(0, upper, f"len_{cap}_{k}")
            ivs.append(m.NewIntervalVar(start[n], length, free, f"h_{cap}_{k}"))
            demands.append(nbytes)
        if ivs:
            m.AddCumulative(ivs, demands, size)
    makespan = m.NewIntVar(0, upper, "makespan")
    m.AddMaxEquality(makespan, [end[n] for n in order])
    if energy:  # redundant: k instances of a pool do at most k x makespan of its users' work
        for pool, count in problem.pools.items():
            users = [n for n in order if pool in problem.resources[n]]
            if users:
                m.Add(count * makespan >= sum(dur[n] for n in users))
    m.Minimize(makespan)
    if hint:
        for n, (lane, s) in hint.items():
            m.AddHint(start[n], s)
            for ln, x in use[n].items():
                m.AddHint(x, ln == lane)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = seconds
    solver.parameters.num_search_workers = workers
    solver.parameters.random_seed = 0
    for field, value in (parameters or {}).items():
        if isinstance(value, (list, tuple)):
            getattr(solver.parameters, field).extend(value)
        else:
            setattr(solver.parameters, field, value)
    status = _solve(solver, m)
    out: dict[str, Any] = {"seconds": time.perf_counter() - t0, "nodes": len(order)}
    if status == cp_model.OPTIMAL:
        out["status"] = "optimal"
    elif status == cp_model.FEASIBLE:
        out["status"] = "feasible"
    elif status == cp_model.INFEASIBLE:  # only when `upper` is below the optimum
        out["status"] = "infeasible"
    else:
        out["status"] = "unknown"
    proven = status in (cp_model.OPTIMAL, cp_model.FEASIBLE)
    out["lower_bound"] = int(round(solver.BestObjectiveBound())) if proven else None
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        out["makespan"] = int(solver.Value(makespan))
        chosen = {n: next(ln for ln, x in use[n].items() if solver.Value(x)) for n in order}
        out["placement"] = {n: (chosen[n], int(solver.Value(start[n]))) for n in order}
    return out


def _solve(solver, model) -> int:
    """`solver.solve(model)`, so that Ctrl-C interrupts the command, not just the search.

    CP-SAT's own SIGINT handler (``catch_sigint_signal``) only stops the search and returns
    its best so far: a sweep then ran on, journalled the cut solve as unproven and exited 0.
    With that handler off, the solve runs in a thread (it releases the GIL) while the main
    thread waits in Python, where SIGINT raises KeyboardInterrupt; the search is stopped and
    the interrupt goes on up to the command's one-line handler (exit 130)."""
    import threading

    solver.parameters.catch_sigint_signal = False
    if threading.current_thread() is not threading.main_thread():
        return solver.solve(model)  # a Dask worker's thread: no SIGINT arrives here
    out: list = []
    failed: list[BaseException] = []
    done = threading.Event()

    began = threading.Event()

    def run() -> None:
        began.set()
        try:
            out.append(solver.solve(model))
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            failed.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=run, name="cp-sat", daemon=True)
    try:
        # started inside the try: a Ctrl-C that lands while `start` waits for the thread
        # (a loaded machine) must stop the search too
        thread.start()
        while not done.wait(0.1):  # an Event, not Thread.join: a join cut by Ctrl-C
            pass  # may later return at once with the thread still running
    except KeyboardInterrupt:
        # Stop the search and wait for the solver to return and its thread to end, however
        # long a loaded machine takes: exiting with the C++ search still running aborts the
        # process ("terminate called without an active exception"). The stop is repeated,
        # since one sent before the solve began is not seen by it. The command's handler
        # still ends the process after its clean-up time, and a second Ctrl-C at once.
        # (a Ctrl-C inside `start` may come just before the thread was launched: then it
        # never begins, and 5 s without a sign of it is taken to mean that)
        if began.wait(5.0):
            solver.stop_search()
            while not done.wait(0.1):
                solver.stop_search()
            thread.join()
        raise
    if failed:
        raise failed[0]
    return out[0]


class ExactPolicy:
    """The solver's schedule as a policy result, so it goes through `run_on_problem`'s
    validator like any heuristic (an invalid model would fail there, not flatter a gap)."""

    name = "exact"

    def __init__(self, placement: dict) -> None:
        self.placement = placement

    def schedule(self, problem: SchedulingProblem, timeline: Any) -> dict:
        # in start order: pool instances are then handed out first-free, which colours
        # intervals optimally (any other order can need more instances than exist)
        return dict(sorted(self.placement.items(), key=lambda kv: (kv[1][1], problem.index[kv[0]])))

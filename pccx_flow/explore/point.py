"""One design point: build its profile and step, schedule it, bound it, measure it.

`evaluate` is what a Dask worker runs. It never raises for the point's own failure: the
record then carries ``error`` (one line) and the sweep goes on. What it returns depends only
on the profile and the step (`step_key`), so it is what the cache stores; `derive` adds what
depends on the acceptance model and drafting cost, which never changes the schedule.

Timing (all model estimates on the point's profile, never measurements):

- ``makespan_cycles``: the best schedule of the chosen policies, within L2 unless
  ``memory`` is off (as ``pccx-flow schedule`` does by default);
- ``step_cycles``: the makespan, or the DDR bandwidth bound when that is larger — the
  schedule does not model DDR as a resource (`pccx_flow.bounds`), so a design with many
  ports but the board's DDR would otherwise be credited with bandwidth it does not have;
- ``tok_s`` (`derive`): expected tokens per step over (step time + drafting time).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections import defaultdict
from typing import Any

from pccx_flow.collector import collector_paused
from pccx_flow.errors import InputError, PccxFlowError, PolicyError

# Bump when what a point record means changes, so old cache entries are not reused.
RECORD_VERSION = 13  # 2: capacity_chain counts tiles until freed; 3: KV read-ahead lead 3;
# 4: every layer streams its first KV tiles early, the tile with the new row second;
# 5: critical-path fills lane gaps, V tile 1 after K tile 0's scores in two-tile layers,
# chain bounds count the chains around pool work and walk the GEMV lanes on as-built;
# 6: critical-path's levels weigh the GEMV lanes' stalls; 7: a layer's last V tile double
# buffered; 8: so is V tile 1 of a two-tile KV-sharing layer; 9: KV tiles and new rows
# per KV head; 10: chain bounds count the chains of the users between a gap's two nodes,
# the holds kept beside a layer's first KV tiles and the users after its last read;
# 11: the stream read-ahead rule with KV tile slots, reads admitted in program order;
# 12: the KV tiles' slot grid under the planned long-lived regions (a --replay program's
# addresses, and so its fences, may differ); 13: chain bounds pair a node with ancestors
# up to 3 edges up, not 4 (`chains.POOL_CHAIN_HOPS`: E4B's the same, other designs' may be
# lower)
DDR_BOUND = "bandwidth:ddr"


def step_key(profile_dict: dict, step: dict, policies: list[str], memory: bool,
             preset: str, replay: str | None = None, seed: int = 0) -> str:  # fmt: skip
    """Hex SHA-256 of everything a point's record depends on (canonical JSON)."""
    from pccx_flow import __version__

    blob = json.dumps(
        {"v": RECORD_VERSION, "pccx_flow": __version__, "profile": profile_dict, "step": step,
         "policies": sorted(policies), "memory": memory, "preset": preset,
         **({"replay": replay} if replay else {}), **({"seed": seed} if seed else {})},
        sort_keys=True, separators=(",", ":"), default=str,
    )  # fmt: skip
    return hashlib.sha256(blob.encode()).hexdigest()


def evaluate(task: dict) -> dict:
    """The record of one point (module docstring); ``task`` is plain data (see `run`)."""
    t0 = time.perf_counter()
    record: dict[str, Any] = {"key": task["key"], "point": task["point"]}
    # ~10^5 long-lived dicts per point (`pccx_flow.collector`); one collection after it,
    # since a worker goes on to the next point
    with collector_paused(collect_after=True):
        try:
            record.update(_evaluate(task))
        except PccxFlowError as exc:
            record["error"] = " ".join(str(exc).split())
        except (MemoryError, RecursionError, ValueError, ZeroDivisionError, KeyError) as exc:
            record["error"] = f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:300]
            record["transient"] = True  # not cached: a later run tries it again
    record["wall_seconds"] = round(time.perf_counter() - t0, 3)
    return record


def _evaluate(task: dict) -> dict:
    from pccx_flow.explore.step import build_point_graph
    from pccx_flow.hardware.profile import load_profile_with
    from pccx_flow.model.config import check_position, get_config
    from pccx_flow.schedule.metrics import estimate_label, memory_metrics, step_bounds
    from pccx_flow.schedule.problem import problem_from_graph
    from pccx_flow.schedule.registry import make_policy, run_on_problem

    profile = load_profile_with(task["base_profile"], task["overrides"], task.get("name"))
    config = get_config(task["preset"])
    step = task["step"]
    check_position(config, step["position"])
    # a lowered program (--replay) is made from the graph: that point gets its own
    graph = build_point_graph(config, step, profile, reuse=task.get("replay") is None)
    problem = problem_from_graph(graph, profile, memory=task["memory"])
    best, per_policy, failed = None, {}, {}
    for name in task["policies"]:
        try:
            schedule = run_on_problem(make_policy(name, seed=task.get("seed", 0)), problem,
                                      label=name, profile=profile.name)  # fmt: skip
        except PccxFlowError as exc:  # another policy may still place it
            failed[name] = " ".join(str(exc).split())
            continue
        per_policy[name] = schedule.makespan
        if best is None or schedule.makespan < best.makespan:
            best = schedule
    if best is None:
        raise PolicyError(next(iter(failed.values())))
    replay = _replay(task.get("replay"), graph, best, profile, config, step, task["memory"])
    sb = step_bounds(problem, profile)
    bounds = sb["bounds_cycles"]
    span = best.makespan
    ddr = bounds.get(DDR_BOUND, 0)
    mem = memory_metrics(best, problem)
    return {
        "profile": profile.name,
        "estimate": estimate_label(profile),
        "core_hz": float(profile.core_hz),
        "nodes": len(problem),
        "policy": best.policy,
        "makespan_by_policy": per_policy,
        "policy_errors": failed,
        "makespan_cycles": span,
        "step_cycles": max(span, ddr),
        "ddr_limited": ddr > span,
        "bounds_cycles": bounds,
        "binding_bound": sb["largest_bound"],
        "binding_bound_cycles": bounds[sb["largest_bound"]],
        "lane_utilisation": _class_utilisation(best, span),
        "port_utilisation": _port_utilisation(best, problem, span),
        "l2_peak_bytes": mem.get("l2_peak_bytes"),
        "l2_bytes": mem.get("l2_bytes"),
        "verify_columns": step["spec_k"] + 1,
        **({"replay": replay} if replay is not None else {}),
    }


PLAIN_STEP = {"spec_k": 0, "weight_bits": 4, "kv_bits": 16, "sparse_down": 0.0}


def _replay(model: str | None, graph, schedule, profile, config, step: dict,
            memory: bool) -> dict | None:  # fmt: skip
    """Lower the scheduled step and replay its program under issue `model` (None: skip).

    Only the plain decode step has a lowering: a verify step, or stored sizes and sparse
    skipping that exist only as costs (`pccx_flow.explore.step`), are refused in one line,
    as is a step scheduled without the L2 limit (a program must fit L2)."""
    if model is None:
        return None
    odd = {k: step[k] for k, v in PLAIN_STEP.items() if step[k] != v}
    if odd or not memory:
        what = ", ".join(f"{k}={v}" for k, v in odd.items()) or "no L2 limit"
        raise InputError(f"--replay lowers the plain decode step only, not one with {what}")
    from pccx_flow.board.program.lower import lower
    from pccx_flow.board.timing.replay import replay_all, summary

    program = lower(graph, schedule, profile, config)
    s = summary(replay_all(program, profile, (model,), "fences")[model])
    return {"model": model, "makespan_cycles": s["makespan_cycles"],
            "tok_s": s["tokens_per_second"], "biggest_cost": s["biggest_cost"]}  # fmt: skip


def _class_utilisation(schedule: Any, span: int) -> dict[str, float]:
    """Busy share of the makespan per lane class (mean over its lanes)."""
    busy: dict[str, int] = defaultdict(int)
    count: dict[str, int] = defaultdict(int)
    cls_of = {lane.name: lane.lane_class for lane in schedule.lanes}
    for lane in schedule.lanes:
        count[lane.lane_class] += 1
    for s in schedule.slots.values():
        busy[cls_of[s.lane]] += s.finish - s.start
    return {c: round(busy[c] / (n * span), 4) if span else 0.0 for c, n in count.items()}


def _port_utilisation(schedule: Any, problem: Any, span: int) -> dict[str, float]:
    """Busy share of the makespan of each pool (weight ports), and of the GEMM array's."""
    from pccx_flow.schedule.metrics import pool_occupancy

    out = {}
    for pool, cycles in pool_occupancy(schedule, problem).items():
        n = problem.pools[pool]
        out[pool] = round(sum(k * c for k, c in cycles.items()) / (n * span), 4) if span else 0.0
    return out


def derive(record: dict, after: dict) -> dict:
    """`record` plus tokens per step, step seconds and tok/s under `after` (alpha, draft_us).

    ``makespan_tok_s`` is what ``pccx-flow schedule`` prints for the same step (one token per
    makespan); ``tok_s`` is the estimate a design is judged by (module docstring)."""
    from pccx_flow.explore.step import tokens_per_step

    if "error" in record:
        return dict(record)
    k = record["verify_columns"] - 1
    tokens = tokens_per_step(k, after["alpha"])
    seconds = record["step_cycles"] / record["core_hz"] + k * after["draft_us"] * 1e-6
    return {
        **record,
        "tokens_per_step": tokens,
        "step_seconds": seconds,
        "makespan_tok_s": record["core_hz"] / record["makespan_cycles"],
        "tok_s": tokens / seconds,
        "bound_tok_s": tokens * record["core_hz"] / record["binding_bound_cycles"],
        **({"replay_tok_s": record["replay"]["tok_s"]} if "replay" in record else {}),
    }

"""Study: KV reads issued as far ahead as L2 allows, against the fixed read-ahead rules.

`schedule` issues each layer's KV tile reads by fixed order-only edges
(`pccx_flow.schedule.memory.kv_prefetch_edges`): at most two K tiles and one V tile of a
stream in flight, the tile that takes the new row read second. This study drops the edges
inside a layer (``within_layer=False``: every tile waits only for the previous layer's
attention) and lets the policy decide instead: its list is the same (critical-path's or
heft's priorities and lane choice), but a ready KV read is held back while the bytes that
placed nodes keep for readers not placed yet (`Timeline.held_open`), the read's own and a
reserve would exceed L2; it is taken again once a placement frees room, or when nothing
else is ready. Every schedule goes through the validator. Each is then lowered to a
program (`pccx_flow.board.program.lower`, as `emit` does): the L2 capacity of the problem
counts bytes, the program needs each operand in one contiguous region, so a schedule can
fit L2 and still not lower. A third mode keeps one rule inside the layer
(``new_row_tile_early``): the tile read with the new row is read second, before the other
tiles of its kind, so its region is placed before they fill L2.

Makespans are model estimates on the named profile, against the largest bound `schedule`
reports (the bounds walk data edges only: the same for every mode's problem).

    python benchmarks/bench_read_ahead.py
    python benchmarks/bench_read_ahead.py --positions 2047 --profiles v002-as-built

Writes benchmarks/results/read_ahead.json.
"""

from __future__ import annotations

import argparse
import heapq
import os
import platform
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from measure import write_result  # noqa: E402

from pccx_flow.board.isa.target import row_align_for, target_of  # noqa: E402
from pccx_flow.board.program.alloc import AllocationError  # noqa: E402
from pccx_flow.board.program.lower import lower  # noqa: E402
from pccx_flow.collector import collector_paused  # noqa: E402
from pccx_flow.errors import ScheduleError  # noqa: E402
from pccx_flow.graph.build import build_decode_graph  # noqa: E402
from pccx_flow.hardware.profile import load_profile  # noqa: E402
from pccx_flow.model.config import get_config  # noqa: E402
from pccx_flow.schedule.metrics import step_bounds  # noqa: E402
from pccx_flow.schedule.policies.base import upward_rank  # noqa: E402
from pccx_flow.schedule.policies.critical_path import stall_levels  # noqa: E402
from pccx_flow.schedule.problem import problem_from_graph  # noqa: E402
from pccx_flow.schedule.registry import make_policy  # noqa: E402
from pccx_flow.schedule.timeline import Timeline  # noqa: E402
from pccx_flow.schedule.validate import validate_schedule  # noqa: E402

POLICIES = {  # name: (priority, what the lane is chosen by), as the policy itself does
    "critical-path": (stall_levels, "start"),
    "heft": (upward_rank, "finish"),
}
RESERVES_KIB = (64, 256)
EARLY_RESERVES_KIB = (256, 768)  # with the new row's tile read second


def space_allowing(problem, policy: str, reserve: int) -> Timeline:
    """`policy`'s list schedule with each KV read held back until L2 has room for it and
    `reserve` more beside the bytes held for readers not placed yet (module doc)."""
    priority_of, by = POLICIES[policy]
    priority, index = priority_of(problem), problem.index
    timeline = Timeline(problem)
    graph = problem.graph
    reads = {n for n in problem.order if graph.nodes[n].get("kernel") == "kv_read"}

    def admitted(n) -> bool:
        return all(
            timeline.held_open(cap) + nbytes + reserve <= problem.capacities[cap]
            for cap, nbytes in problem.demands.get(n, {}).items()
        )

    heap = [(-priority[n], index[n], n) for n in timeline.initial_ready()]
    heapq.heapify(heap)
    held: list = []
    while heap or held:
        if heap:
            _, _, node = heapq.heappop(heap)
            if node in reads and not admitted(node):
                held.append(node)
                continue
        else:  # nothing else is ready: the first held read goes anyway
            node = held.pop(0)
        lane = timeline.best_lane(node, insertion=True, by=by)[0]
        timeline.place(node, lane, insertion=True)
        for s in timeline.released(node):
            heapq.heappush(heap, (-priority[s], index[s], s))
        if held:
            now = [n for n in held if admitted(n)]
            for n in now:
                heapq.heappush(heap, (-priority[n], index[n], n))
            held = [n for n in held if n not in now]
    return timeline


def lowers(graph, schedule, profile) -> str | None:
    """None when the schedule lowers to a program, else the allocator's one line."""
    try:
        lower(graph, schedule, profile, get_config("e4b"), target=target_of(profile).name)
    except AllocationError as exc:
        return str(exc)
    return None


def bench_point(profile_name: str, position: int) -> list[dict]:
    profile = load_profile(profile_name)
    align = row_align_for(target_of(profile))
    with collector_paused(collect_after=True):
        graph = build_decode_graph("e4b", position=position, profile=profile, row_align=align)
        fixed = problem_from_graph(graph, profile, memory=True)
        free = problem_from_graph(graph, profile, memory=True, read_ahead={"within_layer": False})
        early = problem_from_graph(
            graph, profile, memory=True,
            read_ahead={"within_layer": False, "new_row_tile_early": True},
        )  # fmt: skip
        bounds = step_bounds(fixed, profile)
        largest = bounds["bounds_cycles"][bounds["largest_bound"]]
        rows = []
        for policy in POLICIES:
            cases = [("fixed", None, fixed)]
            cases += [(f"space, reserve {k} KiB", k, free) for k in RESERVES_KIB]
            cases += [(f"space, new-row tile second, reserve {k} KiB", k, early)
                      for k in EARLY_RESERVES_KIB]  # fmt: skip
            for mode, reserve, problem in cases:
                t0 = time.perf_counter()
                row = {"profile": profile_name, "position": position, "policy": policy,
                       "mode": mode, "largest_bound": bounds["largest_bound"],
                       "largest_bound_cycles": largest}  # fmt: skip
                try:
                    if reserve is None:
                        timeline = Timeline(problem)
                        make_policy(policy).schedule(problem, timeline)
                    else:
                        timeline = space_allowing(problem, policy, reserve * 1024)
                    schedule = timeline.to_schedule(policy, profile_name)
                    validate_schedule(schedule, problem)
                except ScheduleError as exc:
                    row["error"] = str(exc)
                    rows.append(row)
                    continue
                row["makespan_cycles"] = schedule.makespan
                row["gap_to_largest_bound"] = schedule.makespan / largest - 1
                row["schedule_seconds"] = time.perf_counter() - t0
                row["lower_error"] = lowers(graph, schedule, profile)
                rows.append(row)
                done = row["lower_error"] or "lowers"
                print(f"{profile_name} {position} {policy:<13} {mode:<44} "
                      f"{row['gap_to_largest_bound']:+.2%}  {done[:70]}", flush=True)  # fmt: skip
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, nargs="+", default=[1023, 2047, 4095, 8191])
    parser.add_argument("--profiles", nargs="+", default=["v002-spec", "v002-as-built"])
    args = parser.parse_args()
    rows = []
    for profile in args.profiles:
        for position in args.positions:
            rows += bench_point(profile, position)
    out = write_result(
        "read_ahead",
        {"machine": platform.machine(), "python": platform.python_version(), "rows": rows},
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark: the KV read-ahead rule `schedule` uses against the fixed rules and variants.

`schedule` reads each stream's KV tiles (a layer's tiles of one KV head) one after another
and has the timeline hold each back until L2 has room for it and a reserve, with at most
as many tiles in L2 as it holds less one (`pccx_flow.schedule.readahead.kv_stream_edges`,
`problem.admit`, ``READ_AHEAD_RESERVE`` = 256 KiB, `default_tile_slots`: six on E4B). The
fixed rules (`kv_prefetch_edges`: at most two K tiles and one V tile of a stream in
flight, whatever L2 holds) and the stream rule without tile slots run beside it, for every
policy. Positions 700 and 1400 have a short last tile (188 and 376 rows and the new row),
where the stream rule's programs did not lower without the slots.

Every policy runs as `schedule` runs it (`run_on_problem`: the validator checks L2); a
policy that deadlocks on memory is recorded. Each schedule is then lowered to a program
(`pccx_flow.board.program.lower`, as `emit` does): the problem's L2 counts bytes, the
program needs each operand in one contiguous region, so a schedule can fit L2 and still
not lower.

Makespans are model estimates on the named profile, against the largest bound `schedule`
reports (the bounds walk data edges only: the same for every mode's problem).

    python benchmarks/bench_read_ahead.py
    python benchmarks/bench_read_ahead.py --positions 2047 --profiles v002-as-built
    python benchmarks/bench_read_ahead.py --name read_ahead_lowering \
        --positions 520 568 616 664 712 760 808 856 904 952 1000 1100 1400 2047 4095 8191 \
        --policies critical-path heft
        # where programs lower (below 2047 most positions have a short last tile)
    python benchmarks/bench_read_ahead.py --positions 1023 --reserves 512 --tile-slots 5
        # other reserves and numbers of tile slots beside the default

Writes benchmarks/results/read_ahead.json (or `--name`'s).
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from measure import write_result  # noqa: E402

from pccx_flow.board.isa.target import row_align_for, target_of  # noqa: E402
from pccx_flow.board.program.alloc import AllocationError  # noqa: E402
from pccx_flow.board.program.lower import lower  # noqa: E402
from pccx_flow.collector import collector_paused  # noqa: E402
from pccx_flow.errors import PccxFlowError  # noqa: E402
from pccx_flow.graph.build import build_decode_graph  # noqa: E402
from pccx_flow.hardware.profile import load_profile  # noqa: E402
from pccx_flow.model.config import get_config  # noqa: E402
from pccx_flow.schedule.metrics import step_bounds  # noqa: E402
from pccx_flow.schedule.problem import problem_from_graph  # noqa: E402
from pccx_flow.schedule.registry import make_policy, run_on_problem  # noqa: E402

POLICIES = ["critical-path", "heft", "etf", "dls", "lookahead", "min-min", "cpop", "random",
            "program-order"]  # fmt: skip


def lowers(graph, schedule, profile) -> str | None:
    """None when the schedule lowers to a program, else the allocator's one line."""
    try:
        lower(graph, schedule, profile, get_config("e4b"), target=target_of(profile).name)
    except AllocationError as exc:
        return str(exc)
    return None


def bench_point(
    profile_name: str, position: int, policies: list[str], reserves: tuple[int, ...] = (),
    tile_slots: tuple[int, ...] = (),
) -> list[dict]:
    profile = load_profile(profile_name)
    align = row_align_for(target_of(profile))
    with collector_paused(collect_after=True):
        graph = build_decode_graph("e4b", position=position, profile=profile, row_align=align)
        modes = [("fixed", {"rule": "fixed"}), ("stream (schedule)", None),
                 ("stream, no tile slots", {"rule": "stream", "tile_slots": 0})]
        modes += [(f"stream, reserve {k} KiB", {"rule": "stream", "reserve_bytes": k * 1024})
                  for k in reserves]  # fmt: skip
        modes += [(f"stream, {n} tile slots", {"rule": "stream", "tile_slots": n})
                  for n in tile_slots]  # fmt: skip
        problems = {
            mode: problem_from_graph(graph, profile, memory=True, read_ahead=rule)
            for mode, rule in modes
        }
        bounds = step_bounds(problems["stream (schedule)"], profile)
        largest = bounds["bounds_cycles"][bounds["largest_bound"]]
        rows = []
        for policy in policies:
            for mode, problem in problems.items():
                row = {"profile": profile_name, "position": position, "policy": policy,
                       "mode": mode, "largest_bound": bounds["largest_bound"],
                       "largest_bound_cycles": largest}  # fmt: skip
                t0 = time.perf_counter()
                try:
                    schedule = run_on_problem(
                        make_policy(policy), problem, label=policy, profile=profile_name
                    )
                except PccxFlowError as exc:
                    row["error"] = str(exc)
                    rows.append(row)
                    print(f"{profile_name} {position} {policy:<13} {mode:<44} "
                          f"{str(exc)[:70]}", flush=True)  # fmt: skip
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
    parser.add_argument("--positions", type=int, nargs="+",
                        default=[700, 1023, 1400, 2047, 4095, 8191])  # fmt: skip
    parser.add_argument("--profiles", nargs="+", default=["v002-spec", "v002-as-built"])
    parser.add_argument("--policies", nargs="+", default=POLICIES)
    parser.add_argument("--reserves", type=int, nargs="+", default=[], metavar="KIB",
                        help="other reserves of the stream rule to run beside its own")  # fmt: skip
    parser.add_argument("--tile-slots", type=int, nargs="+", default=[], metavar="N",
                        help="stream rule with at most N KV tiles in L2 at once")  # fmt: skip
    parser.add_argument("--name", default="read_ahead",
                        help="writes results/NAME.json")  # fmt: skip
    args = parser.parse_args()
    rows = []
    for profile in args.profiles:
        for position in args.positions:
            rows += bench_point(profile, position, args.policies, tuple(args.reserves),
                                tuple(args.tile_slots))  # fmt: skip
    command = " ".join(["python benchmarks/bench_read_ahead.py", *sys.argv[1:]])
    out = write_result(
        args.name,
        {"command": command, "machine": platform.machine(),
         "python": platform.python_version(), "rows": rows},
    )  # fmt: skip
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

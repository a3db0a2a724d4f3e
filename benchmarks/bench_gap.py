"""How close schedules come to the largest provable bound, over the context length.

For each (profile, position): build the E4B step, its problem within L2 (as `schedule`
makes it) and without, and every bound `schedule` reports (`step_bounds`: graph bounds,
pool_chain, capacity_chain, residency). Then for each policy, within L2 and without, the
makespan and its gap to the largest bound of the *limited* problem (the hardware problem;
the unlimited schedule is a different problem, reported for scale) and to the unlimited
problem's own largest bound. ``NAME+improve`` is NAME then forward-backward improvement
(`pccx_flow.schedule.improve`). Wall seconds of each stage are recorded too (graph, problem,
bounds, each schedule with its validation): this machine's, under whatever else runs.

Makespans and tok/s are model estimates on the named profile, never measured on a board.

    python benchmarks/bench_gap.py                         # 0, 1023, 2047, 4095, 8191
    python benchmarks/bench_gap.py --positions 2047 --keep # add rows to the existing file
    python benchmarks/bench_gap.py --read-ahead rule=fixed early_max_tiles=2 \
        --positions 2047 4095 8191 --policies heft dls lookahead critical-path
        # another KV read-ahead rule (`readahead.read_ahead_of`'s keywords), into
        # gap_read_ahead.json: here the fixed rules as they were before every layer streamed
        # its first tiles in early; a study, not what `schedule` makes

Writes benchmarks/results/gap.json (after each position, so a long run keeps its rows).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from pccx_flow import atomic  # noqa: E402
from pccx_flow.collector import collector_paused  # noqa: E402
from pccx_flow.errors import PccxFlowError  # noqa: E402
from pccx_flow.graph.build import build_decode_graph  # noqa: E402
from pccx_flow.hardware.profile import load_profile  # noqa: E402
from pccx_flow.schedule.metrics import step_bounds  # noqa: E402
from pccx_flow.schedule.problem import problem_from_graph  # noqa: E402
from pccx_flow.schedule.registry import make_policy, run_on_problem  # noqa: E402

HERE = Path(__file__).resolve().parent
POLICIES = [
    "critical-path", "heft", "dls", "lookahead", "etf", "critical-path+improve", "heft+improve"
]


def bench_point(
    profile_name: str, position: int, policies: list[str], read_ahead: dict | None = None
) -> dict:
    # the cyclic collector paused, as `schedule` runs the step (`pccx_flow.collector`)
    with collector_paused(collect_after=True):
        return _bench_point(profile_name, position, policies, read_ahead)


def _bench_point(
    profile_name: str, position: int, policies: list[str], read_ahead: dict | None
) -> dict:
    profile = load_profile(profile_name)
    t = time.perf_counter()
    graph = build_decode_graph("e4b", position=position, profile=profile)
    graph_s = time.perf_counter() - t
    row: dict = {"profile": profile.name, "position": position, "nodes": len(graph)}
    if read_ahead:
        row["read_ahead"] = read_ahead
    row["seconds"] = {"graph": graph_s}
    problems = {}
    for memory in (True, False):
        t = time.perf_counter()
        rule = read_ahead if memory else None
        problems[memory] = problem_from_graph(graph, profile, memory=memory, read_ahead=rule)
        row["seconds"][f"problem_{'l2' if memory else 'unlimited'}"] = time.perf_counter() - t
    t = time.perf_counter()
    limited = step_bounds(problems[True], profile)
    row["seconds"]["bounds_l2"] = time.perf_counter() - t
    unlimited = step_bounds(problems[False], profile)
    row["bounds_l2"] = limited["bounds_cycles"]
    row["largest_bound_l2"] = limited["largest_bound"]
    row["bounds_unlimited"] = unlimited["bounds_cycles"]
    row["largest_bound_unlimited"] = unlimited["largest_bound"]
    largest_l2 = limited["bounds_cycles"][limited["largest_bound"]]
    largest_free = unlimited["bounds_cycles"][unlimited["largest_bound"]]
    row["results"] = {}
    for name in policies:
        for memory in (True, False):
            key = f"{name}/{'l2' if memory else 'unlimited'}"
            t = time.perf_counter()
            try:
                s = run_on_problem(make_policy(name), problems[memory], label=name,
                                   profile=profile.name)  # fmt: skip
            except PccxFlowError as exc:
                row["results"][key] = {"error": str(exc), "seconds": time.perf_counter() - t}
                continue
            own = largest_l2 if memory else largest_free
            row["results"][key] = {
                "makespan_cycles": s.makespan,
                "seconds": time.perf_counter() - t,
                "gap_to_own_bound": s.makespan / own - 1,
                "gap_to_hardware_bound": s.makespan / largest_l2 - 1,
                "tokens_per_second_estimate": profile.core_hz / s.makespan,
            }
            print(f"  {profile.name} p={position} {key}: {s.makespan:,} "
                  f"({s.makespan / own - 1:+.2%} vs its bound, "
                  f"{row['results'][key]['seconds']:.1f} s)", file=sys.stderr)  # fmt: skip
    return row


def write(out: Path, rows: list[dict]) -> None:
    payload = {
        "benchmark": "gap",
        "note": "makespans, bounds and tok/s are model estimates on the named profile, never "
        "measured on a board; gap_to_hardware_bound compares with the largest bound of the "
        "problem within L2 (the hardware's), gap_to_own_bound with the bound of the problem "
        "the schedule was made for",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "rows": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic.write_text(out, json.dumps(payload, indent=1) + "\n")


def format_table(rows: list[dict], policies: list[str]) -> str:
    lines = [f"{'profile':<14}{'pos':>5}  {'largest bound (L2)':<30}"
             + "".join(f"{p:>24}" for p in policies)]  # fmt: skip
    for r in rows:
        cells = []
        for p in policies:
            res = r["results"].get(f"{p}/l2", {})
            cells.append(f"{res['gap_to_own_bound']:+.2%}" if "makespan_cycles" in res else "—")
        bound = f"{r['largest_bound_l2']} {r['bounds_l2'][r['largest_bound_l2']] / 1e6:.1f}M"
        lines.append(f"{r['profile']:<14}{r['position']:>5}  {bound:<30}"
                     + "".join(f"{c:>24}" for c in cells))  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, nargs="+", default=[0, 1023, 2047, 4095, 8191])
    parser.add_argument("--profiles", nargs="+", default=["v002-spec", "v002-as-built"])
    parser.add_argument("--policies", nargs="+", default=POLICIES)
    parser.add_argument("--out", type=Path, help="default: results/gap.json, or "
                        "results/gap_read_ahead.json with --read-ahead")  # fmt: skip
    parser.add_argument("--read-ahead", nargs="+", default=[], metavar="KEY=N",
                        help="read-ahead rule and keywords for the problem within L2 "
                        "(pccx_flow.schedule.readahead.read_ahead_of)")  # fmt: skip
    parser.add_argument(
        "--keep", action="store_true",
        help="keep the rows of other (profile, position) pairs already in --out",
    )  # fmt: skip
    args = parser.parse_args(argv)
    read_ahead = {k: int(v) if v.lstrip("-").isdigit() else v
                  for k, v in (a.split("=", 1) for a in args.read_ahead)}  # fmt: skip
    if args.out is None:
        args.out = HERE / "results" / ("gap_read_ahead.json" if read_ahead else "gap.json")
    rows: list[dict] = []
    if args.keep and args.out.exists():
        rows = json.loads(args.out.read_text())["rows"]
    for p in args.profiles:
        for pos in args.positions:
            rows = [r for r in rows if (r["profile"], r["position"]) != (p, pos)]
            rows.append(bench_point(p, pos, args.policies, read_ahead or None))
            rows.sort(key=lambda r: (r["profile"] != "v002-spec", r["profile"], r["position"]))
            write(args.out, rows)
    print(format_table(rows, args.policies))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

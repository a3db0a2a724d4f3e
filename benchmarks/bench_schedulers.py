"""Every built-in scheduling policy on the E4B decode step, on both built-in profiles.

For each (profile, policy): the wall and CPU time to schedule and validate (medians of
--repeat runs; the graph and the problem are built once, outside the timing), the makespan,
its gap to the largest lower bound (`pccx_flow.bounds`), the implied tok/s (a model estimate
on that profile, not a measurement) and the rank by makespan, with the ratio to the
program-order baseline.

Schedules keep L2 (and, on v002-as-built, the SFU's 256 KiB reach) within the profile
(`problem_from_graph(..., memory=True)`); each policy is also run once without that
constraint, and the change in makespan is reported.

Targets checked (and reported, never tuned away):
- ``critical-path`` schedules E4B in < 1 s;
- ``critical-path`` is within 5 % of the largest lower bound on v002-spec;
- no informed policy (everything but program-order and random) is worse than program-order.

    python benchmarks/bench_schedulers.py                 # both profiles, 3 repeats
    python benchmarks/bench_schedulers.py --repeat 1 --profiles v002-spec

Writes benchmarks/results/schedulers.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from pccx_flow.graph.build import build_decode_graph  # noqa: E402
from pccx_flow.hardware.profile import load_profile  # noqa: E402
from pccx_flow.schedule.metrics import estimate_label, schedule_metrics  # noqa: E402
from pccx_flow.schedule.problem import problem_from_graph  # noqa: E402
from pccx_flow.schedule.registry import (  # noqa: E402
    BUILTIN_POLICIES,
    make_policy,
    run_on_problem,
)

HERE = Path(__file__).resolve().parent
UNINFORMED = ("program-order", "random")
POSITION = 1023


def bench_profile(profile_name: str, repeat: int) -> dict:
    profile = load_profile(profile_name)
    t0 = time.perf_counter()
    graph = build_decode_graph("e4b", position=POSITION, profile=profile)
    problem = problem_from_graph(graph, profile, memory=True)
    build_s = time.perf_counter() - t0
    free = problem_from_graph(graph, profile)
    rows = []
    for name in BUILTIN_POLICIES:
        times, cpu = [], []
        for _ in range(repeat):
            policy = make_policy(name, seed=0)
            t, c = time.perf_counter(), time.process_time()
            schedule = run_on_problem(policy, problem, label=name, profile=profile.name)
            times.append(time.perf_counter() - t)  # includes the validator
            cpu.append(time.process_time() - c)
        m = schedule_metrics(schedule, problem, profile)
        unbound = run_on_problem(make_policy(name, seed=0), free, label=name, profile="")
        rows.append(
            {
                "policy": name,
                "schedule_seconds_median": statistics.median(times),
                "schedule_seconds_all": times,
                "schedule_cpu_seconds_median": statistics.median(cpu),
                "makespan_cycles": schedule.makespan,
                "makespan_ms_estimate": m["makespan_us"] / 1000,
                "tokens_per_second_estimate": m["tokens_per_second"],
                "reference_bound": m["reference_bound"],
                "reference_bound_cycles": m["reference_bound_cycles"],
                "gap_to_reference_bound": m["gap_to_reference_bound"],
                "largest_bound": m["largest_bound"],
                "largest_bound_cycles": m["largest_bound_cycles"],
                "gap_to_largest_bound": m["gap_to_largest_bound"],
                "schedule_length_ratio": m["schedule_length_ratio"],
                "laurel_overlap_mean": m["laurel_overlap"]["mean"],
                "ple_slack_min_cycles": m["ple_slack"]["min"],
                "pool_occupancy_cycles": m["pool_occupancy"],
                "l2_bytes": m["l2_bytes"],
                "l2_peak_bytes": m["l2_peak_bytes"],
                "l2_mean_bytes": m["l2_mean_bytes"],
                "l2_reach_peak_bytes": m.get("l2_reach_peak_bytes"),
                "memory_wait_cycles": m["memory_wait_cycles"],
                "makespan_cycles_without_memory": unbound.makespan,
                "change_vs_without_memory": schedule.makespan / unbound.makespan - 1.0,
            }
        )
        print(f"  {profile_name} {name}: {statistics.median(times):.2f} s", file=sys.stderr)
    base = next(r["makespan_cycles"] for r in rows if r["policy"] == "program-order")
    for rank, row in enumerate(sorted(rows, key=lambda r: r["makespan_cycles"]), start=1):
        row["rank"] = rank
        row["vs_program_order"] = row["makespan_cycles"] / base
    return {
        "profile": profile.name,
        "estimate": estimate_label(profile),
        "nodes": graph.number_of_nodes(),
        "edges": graph.number_of_edges(),
        "graph_and_problem_seconds": build_s,
        "policies": rows,
    }


def check_targets(results: list[dict]) -> list[dict]:
    out = []
    for res in results:
        by = {r["policy"]: r for r in res["policies"]}
        cp = by["critical-path"]
        out.append(
            {
                "target": f"critical-path schedules E4B in < 1 s ({res['profile']})",
                "value": f"{cp['schedule_seconds_median']:.2f} s",
                "met": cp["schedule_seconds_median"] < 1.0,
            }
        )
        if res["profile"] == "v002-spec":
            out.append(
                {
                    "target": "critical-path within 5 % of the largest pccx_flow.bounds bound "
                    "(v002-spec)",
                    "value": f"{100 * cp['gap_to_reference_bound']:+.2f} % over "
                    f"{cp['reference_bound']}",
                    "met": cp["gap_to_reference_bound"] <= 0.05,
                }
            )
            out.append(
                {
                    "target": "critical-path within 5 % of the largest bound including "
                    "pool_chain (v002-spec)",
                    "value": f"{100 * cp['gap_to_largest_bound']:+.2f} % over "
                    f"{cp['largest_bound']}",
                    "met": cp["gap_to_largest_bound"] <= 0.05,
                }
            )
        worse = [
            r["policy"]
            for r in res["policies"]
            if r["policy"] not in UNINFORMED and r["vs_program_order"] > 1.0
        ]
        out.append(
            {
                "target": f"no informed policy worse than program-order ({res['profile']})",
                "value": ", ".join(worse) or "none worse",
                "met": not worse,
            }
        )
    return out


def print_table(res: dict) -> None:
    print(
        f"\nE4B decode step, position {POSITION}: {res['nodes']:,} nodes, {res['edges']:,} edges;"
        f" makespan and tok/s are a {res['estimate']}"
    )
    print(
        f"{'policy':<14}{'wall s':>7}{'cpu s':>6}{'makespan cyc':>14}{'tok/s':>7}{'gap ref':>8}"
        f"{'gap all':>8}{'rank':>5}{'vs PO':>7}"
    )
    for r in sorted(res["policies"], key=lambda r: r["rank"]):
        print(
            f"{r['policy']:<14}{r['schedule_seconds_median']:>7.2f}"
            f"{r['schedule_cpu_seconds_median']:>6.2f}{r['makespan_cycles']:>14,}"
            f"{r['tokens_per_second_estimate']:>7.2f}{100 * r['gap_to_reference_bound']:>7.1f}%"
            f"{100 * r['gap_to_largest_bound']:>7.1f}%{r['rank']:>5}{r['vs_program_order']:>7.3f}"
        )
    first = res["policies"][0]
    print(
        f"gap ref: to the largest pccx_flow.bounds bound, {first['reference_bound']} = "
        f"{first['reference_bound_cycles']:,} cycles"
    )
    print(
        f"gap all: to the largest bound including pool_chain, {first['largest_bound']} = "
        f"{first['largest_bound_cycles']:,} cycles"
    )
    cp = next(r for r in res["policies"] if r["policy"] == "critical-path")
    for pool, cycles in cp["pool_occupancy_cycles"].items():
        span = cp["makespan_cycles"]
        shares = ", ".join(f"{k} busy {100 * v / span:.1f} %" for k, v in cycles.items())
        print(f"critical-path, {pool} instances: {shares} of the makespan")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profiles", nargs="+", default=["v002-spec", "v002-as-built"])
    parser.add_argument("--out", type=Path, default=HERE / "results" / "schedulers.json")
    args = parser.parse_args(argv)
    load_before = os.getloadavg()
    results = [bench_profile(p, args.repeat) for p in args.profiles]
    for res in results:
        print_table(res)
    targets = check_targets(results)
    print("\ntargets")
    for t in targets:
        print(f"  [{'met' if t['met'] else 'MISSED'}] {t['target']}: {t['value']}")
    print(
        "wall and cpu seconds are medians of the policy run plus the validator on this machine "
        f"(load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
    )
    payload = {
        "benchmark": "schedulers",
        "note": "wall times measured on this machine; makespans and tok/s are model "
        "estimates on the named profile, never measured on a board",
        "repeat": args.repeat,
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
        },
        "results": results,
        "targets": targets,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=1) + "\n")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Benchmark: lowering the E4B decode step to a pccx v002 program (target < 5 s).

Builds the E4B graph, schedules it with critical-path on the L2-aware timeline (as `emit`
does), then times `lower` (median of `--runs`) at positions 1023 and 8191 on both profiles,
v002-as-built once for the spec target and once for the as-built target
(`pccx_flow.board.isa.target`: the RTL's reading of the words). A step that does not fit L2 is
recorded with the allocator's one-line reason (and the time until it stopped) instead of a
summary.
Counts are properties of the program; nothing here is an NPU timing. Writes
``benchmarks/results/lower.json``.

    python benchmarks/bench_lower.py
    python benchmarks/bench_lower.py --runs 1
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

from measure import peak_rss_mib, write_result

CASES = tuple(
    (position, profile, target)
    for position in (1023, 8191)
    for profile, target in (
        ("v002-spec", "spec"), ("v002-as-built", "spec"), ("v002-as-built", "as-built")
    )
)  # fmt: skip


def one(position: int, profile_name: str, runs: int, target: str = "spec") -> dict:
    from pccx_flow.board.isa.target import get_target, row_align_for
    from pccx_flow.board.program.alloc import AllocationError
    from pccx_flow.board.program.lower import live_demand_peak, lower
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.hardware.profile import load_profile
    from pccx_flow.model.config import get_config
    from pccx_flow.schedule import run_policy
    from pccx_flow.schedule.problem import problem_from_graph

    profile = load_profile(profile_name)
    config = get_config("e4b")
    align = row_align_for(get_target(target))
    graph = build_decode_graph(
        config, semantics="pccx", position=position, profile=profile, row_align=align
    )
    schedule = run_policy(problem_from_graph(graph, profile, memory=True), profile, "critical-path")
    peak, peak_node = live_demand_peak(graph, schedule)
    times, summary, error = [], None, None
    for _ in range(runs):
        t0 = time.perf_counter()
        try:
            summary = lower(graph, schedule, profile, config, target=target).summary
        except AllocationError as exc:
            error = str(exc)
        times.append(time.perf_counter() - t0)
    return {
        "position": position,
        "profile": profile_name,
        "target": target,
        "policy": "critical-path",
        "nodes": graph.number_of_nodes(),
        "lower_seconds_median": statistics.median(times),
        "live_demand_peak_bytes": peak,
        "live_demand_peak_node": peak_node,
        "l2_bytes": profile.memory.l2_bytes,
        "fits": error is None,
        "error": error,
        "summary": summary,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    cases = []
    for position, profile, target in CASES:
        r = one(position, profile, args.runs, target)
        cases.append(r)
        state = "fits" if r["fits"] else "does NOT fit"
        secs = r["lower_seconds_median"]
        print(f"E4B pos {position} {profile} target {target}: lowered in {secs:.2f} s, {state}")
        peak, where = r["live_demand_peak_bytes"], r["live_demand_peak_node"]
        print(f"  live demand peak {peak:,} B at {where}")
        if r["error"]:
            print("  " + r["error"])
        else:
            print(f"  {r['summary']}")
    out = write_result(
        "lower",
        {"machine": platform.platform(), "peak_rss_mb": peak_rss_mib(), "cases": cases},
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

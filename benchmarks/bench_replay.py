"""Benchmark: the decode step's program replayed under the three issue models, both profiles.

For each case (preset, position, profile, target; policy critical-path, as `emit` makes it:
v002-spec with the spec target, v002-as-built with the spec and with the as-built target,
`pccx_flow.board.isa.target`) builds and
list-schedules the step with the L2 limit, lowers it, then replays the program under the
``spec``, ``rtl`` and ``decoupled`` issue models (`pccx_flow.board.timing.replay`), with the host
polling at fences and, again, after every batch as `dispatch` does, and the program lowered
without DONE markers under ``spec`` and ``rtl``. Records the list
schedule's makespan and, per model, makespan, tok/s, the biggest cost, the split of the
makespan and the issue-path counts. Every cycle count and tok/s is a MODEL ESTIMATE on the
named profile (no pccx board has been timed); wall times are this machine's. A step that does
not lower (L2 allocation) is recorded with the allocator's one-line reason. Writes
``benchmarks/results/replay.json``.

    python benchmarks/bench_replay.py                    # E4B at 1023 and tiny at 63
    python benchmarks/bench_replay.py --preset tiny      # tiny only (quick)
"""

from __future__ import annotations

import argparse
import platform
import time

from measure import peak_rss_mib, write_result

# (profile, target): the as-built profile once read the spec's way, once the RTL's
CASES = (("v002-spec", "spec"), ("v002-as-built", "spec"), ("v002-as-built", "as-built"))
POSITIONS = {"e4b": 1023, "tiny": 63}


def one(preset: str, position: int, profile_name: str, target: str) -> dict:
    from pccx_flow.board.isa.target import get_target, row_align_for
    from pccx_flow.board.program.lower import lower
    from pccx_flow.board.timing.replay import replay_all, summary
    from pccx_flow.errors import PccxFlowError
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.hardware.profile import load_profile
    from pccx_flow.model.config import get_config
    from pccx_flow.schedule.problem import problem_from_graph
    from pccx_flow.schedule.registry import run_policy

    profile = load_profile(profile_name)
    config = get_config(preset)
    case = {
        "preset": preset,
        "position": position,
        "profile": profile_name,
        "target": target,
        "policy": "critical-path",
        "estimate": f"model estimate, profile {profile_name}",
    }
    align = row_align_for(get_target(target))
    graph = build_decode_graph(
        config, semantics="pccx", position=position, profile=profile, row_align=align
    )
    problem = problem_from_graph(graph, profile, memory=True)
    schedule = run_policy(problem, profile, "critical-path")
    hz = float(profile.core_hz)
    case["list_schedule"] = {
        "makespan_cycles": schedule.makespan,
        "tokens_per_second": hz / schedule.makespan,
    }
    try:
        program = lower(graph, schedule, profile, config, target=target)
    except PccxFlowError as exc:
        case["error"] = str(exc)
        return case
    case["program"] = {k: program.summary[k] for k in ("words", "batches", "fences", "host_steps")}
    # nodes the lowering issued later than scheduled, for a hole in L2
    case["program"]["deferred"] = program.summary.get("deferred", [])
    t0 = time.perf_counter()
    replays = replay_all(program, profile)
    case["replay_seconds"] = time.perf_counter() - t0
    case["models"] = {m: summary(r) for m, r in replays.items()}
    # the same program with the host waiting for DONE after every batch, as dispatch does
    waits = replay_all(program, profile, host_waits="every-batch")
    case["models_dispatch_waits"] = {m: summary(r) for m, r in waits.items()}
    # what the DONE markers cost and do: the same schedule lowered without them
    bare = lower(graph, schedule, profile, config, done_markers=False, target=target)
    case["models_without_done_markers"] = {
        m: summary(r) for m, r in replay_all(bare, profile, ("spec", "rtl")).items()
    }
    for group in ("models", "models_dispatch_waits", "models_without_done_markers"):
        for s in case[group].values():
            s["vs_list_schedule"] = s["makespan_cycles"] / schedule.makespan
    return case


def report(c: dict) -> dict:
    """Print one case's lines; return it."""
    ls = c["list_schedule"]
    head = (
        f"{c['preset']} pos {c['position']} {c['profile']}, target {c.get('target', 'spec')}"
        f" ({c['estimate']})"
    )
    print(f"{head}: list schedule {ls['makespan_cycles']:,} cycles")
    if "error" in c:
        print(f"  does not lower: {c['error']}")
        return c
    for m, s in c["models"].items():
        print(f"  {m:<10} {s['makespan_cycles']:>14,} cycles ({s['vs_list_schedule']:.2f} x list)"
              f" {s['tokens_per_second']:.2f} tok/s, biggest cost {s['biggest_cost']}")  # fmt: skip
    for m, s in c["models_dispatch_waits"].items():
        print(f"  {m:<10} {s['tokens_per_second']:.2f} tok/s with a DONE wait after every batch")
    bare = c["models_without_done_markers"]
    rtl = bare["rtl"]["counters"]
    print(f"  without DONE markers: spec {bare['spec']['tokens_per_second']:.2f} tok/s, rtl"
          f" {bare['rtl']['tokens_per_second']:.2f} tok/s; {rtl.get('blind_fences', 0):,} of"
          f" {rtl.get('fences', 0):,} fences blind to DONE under rtl")  # fmt: skip
    return c


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", choices=sorted(POSITIONS), action="append",
                    help="preset(s) to run (default: e4b and tiny)")  # fmt: skip
    args = ap.parse_args()
    presets = args.preset or ["e4b", "tiny"]
    cases = []
    for preset in presets:
        for profile, target in CASES:
            cases.append(report(one(preset, POSITIONS[preset], profile, target)))
    name = "replay" if set(presets) == set(POSITIONS) else "replay-" + "-".join(presets)
    out = write_result(
        name, {"machine": platform.platform(), "peak_rss_mb": peak_rss_mib(), "cases": cases}
    )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

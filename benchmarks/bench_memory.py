"""Every built-in policy on the E4B step with L2 as a constraint, over the context length.

For each (profile, position, policy): schedule the step with `problem_from_graph(...,
memory=True)` (L2 and, on v002-as-built, the SFU's 256 KiB reach as capacities; KV reads
per key tile, issued just ahead of use), validate it (the validator recomputes occupancy),
and record whether it fits, the L2 peak and mean, the cycles nodes waited for memory and
the makespan, and whether its program lowers (the allocator places it in L2)
(`bench_schedulers.py` compares makespans with and without the constraint at
position 1023; here, to keep the run short, only the constrained schedule is made). A policy
whose order cannot fit is recorded with the one-line error it raised. Makespans are model
estimates on the named profile, never measured on a board. Position 700 has a short last
KV tile (188 rows and the new row), which the L2 allocator places differently from the
nearly whole ones at 1023, 4095 and 8191.

    python benchmarks/bench_memory.py                         # 0, 700, 1023, 4095, 8191
    python benchmarks/bench_memory.py --positions 1023 --profiles v002-spec
    python benchmarks/bench_memory.py --no-lower  # schedules only, no programs

Writes benchmarks/results/memory.json.
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

from pccx_flow.errors import PccxFlowError  # noqa: E402
from pccx_flow.graph.build import build_decode_graph  # noqa: E402
from pccx_flow.hardware.profile import load_profile  # noqa: E402
from pccx_flow.model.config import get_config  # noqa: E402
from pccx_flow.schedule.metrics import memory_metrics  # noqa: E402
from pccx_flow.schedule.problem import problem_from_graph  # noqa: E402
from pccx_flow.schedule.registry import BUILTIN_POLICIES, make_policy, run_on_problem  # noqa: E402

HERE = Path(__file__).resolve().parent


def lower_row(graph, schedule, profile) -> dict:
    """Whether the schedule lowers to a program (L2 placement by `board.lower`), and its
    summary: the allocator must also find contiguous room, which the schedule alone does not
    promise."""
    from pccx_flow.board.program.lower import lower

    t = time.perf_counter()
    try:
        program = lower(graph, schedule, profile, get_config("e4b"))
    except PccxFlowError as exc:
        return {"lowers": False, "lower_error": str(exc), "lower_seconds": time.perf_counter() - t}
    s = program.summary
    return {
        "lowers": True,
        "lower_seconds": time.perf_counter() - t,
        # nodes issued later than scheduled, for a hole in L2 (`lower`)
        "program_deferred": s.get("deferred", []),
        "program_words": s["words"],
        "program_fences": s["fences"],
        "program_l2_peak_bytes": s["l2_peak_bytes"],
        "program_l2_fragmentation": s["l2_fragmentation"],
    }


def bench(
    profile_name: str, position: int, done=lambda rows: None, lower: bool = False
) -> list[dict]:
    profile = load_profile(profile_name)
    graph = build_decode_graph("e4b", position=position, profile=profile)
    bound = problem_from_graph(graph, profile, memory=True)
    rows = []
    for name in BUILTIN_POLICIES:
        row: dict = {"profile": profile.name, "position": position, "policy": name}
        row["nodes"] = graph.number_of_nodes()
        t = time.perf_counter()
        try:
            s = run_on_problem(make_policy(name, seed=0), bound, label=name, profile=profile.name)
        except PccxFlowError as exc:
            row.update(fits=False, error=str(exc), seconds=time.perf_counter() - t)
        else:
            row.update(fits=True, seconds=time.perf_counter() - t, makespan_cycles=s.makespan)
            row["tokens_per_second_estimate"] = profile.core_hz / s.makespan
            row.update(memory_metrics(s, bound))
            if lower:
                row.update(lower_row(graph, s, profile))
        print(
            f"  {profile.name} p={position} {name}: "
            + (f"fits, {row['seconds']:.2f} s" if row["fits"] else "DOES NOT FIT")
            + ({True: ", lowers", False: ", DOES NOT LOWER"}.get(row.get("lowers"), ""))
            + (f" ({len(row['program_deferred'])} issued later)" if row.get("program_deferred")
               else ""),
            file=sys.stderr,
        )
        rows.append(row)
        done(rows)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--positions", type=int, nargs="+", default=[0, 700, 1023, 4095, 8191])
    parser.add_argument("--profiles", nargs="+", default=["v002-spec", "v002-as-built"])
    parser.add_argument("--out", type=Path, default=HERE / "results" / "memory.json")
    parser.add_argument(
        "--no-lower", dest="lower", action="store_false",
        help="do not lower each fitting schedule to a program (faster)",
    )  # fmt: skip
    args = parser.parse_args(argv)
    rows: list[dict] = []
    for p in args.profiles:
        for pos in args.positions:
            # written after each policy, so a long run keeps what it has done
            rows += bench(
                p, pos, lambda new, rows=rows: write(args.out, rows + new), lower=args.lower
            )
    print(f"{'profile':<14}{'pos':>5} {'policy':<14}{'fits':>5}{'L2 peak KiB':>12}"
          f"{'wait Mcyc':>10}{'tok/s':>7}")  # fmt: skip
    for r in rows:
        if r["fits"]:
            print(
                f"{r['profile']:<14}{r['position']:>5} {r['policy']:<14}{'yes':>5}"
                f"{r['l2_peak_bytes'] / 1024:>12,.0f}{r['memory_wait_cycles'] / 1e6:>10,.1f}"
                f"{r['tokens_per_second_estimate']:>7.2f}"
            )
        else:
            print(f"{r['profile']:<14}{r['position']:>5} {r['policy']:<14}{'NO':>5}  {r['error']}")
    write(args.out, rows)
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def write(out: Path, rows: list[dict]) -> None:
    payload = {
        "benchmark": "memory",
        "note": "makespans and tok/s are model estimates on the named profile, never "
        "measured on a board; 'fits' means the schedule passed the validator, which "
        "recomputes L2 (and SFU reach) occupancy from the schedule",
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "rows": rows,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(payload, indent=1) + "\n")


if __name__ == "__main__":
    raise SystemExit(main())

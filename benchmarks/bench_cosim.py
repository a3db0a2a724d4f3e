"""Benchmark: `pccx-flow cosim` against a pccx-v002 checkout (needs one; skips without).

For the tiny step (v002-spec and v002-as-built) and E4B layers 0-1 at position 1023, emits the
program, co-simulates it through the controller RTL under Verilator and records the build
(cold: a fresh cache folder; then warm), the simulated cycles, cycles per second, the fields
checked, mismatches, re-issues and the issue-gap tables of the calibrated `rtl` model. Wall
times are this machine's; cycles are the RTL's (controller only).
Writes ``benchmarks/results/cosim.json``.

    PCCX_V002_RTL=~/src/pccx-v002 PCCX_VERILATOR=~/venv/bin/verilator \\
        python benchmarks/bench_cosim.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

from measure import write_result

CASES = (
    ("tiny", "v002-spec", "critical-path", 3, None),
    ("tiny", "v002-as-built", "heft", 3, None),
    ("e4b", "v002-spec", "critical-path", 1023, (0, 2)),
)


def program_for(preset, profile_name, policy, position, layers):
    from pccx_flow.board.isa.target import row_align_for, target_of
    from pccx_flow.board.program.lower import lower
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.hardware.profile import load_profile
    from pccx_flow.model.config import get_config
    from pccx_flow.schedule.problem import problem_from_graph
    from pccx_flow.schedule.registry import run_policy

    profile, config = load_profile(profile_name), get_config(preset)
    extra = {} if layers is None else {"layers": tuple(layers)}
    graph = build_decode_graph(config, position=position, profile=profile,
                               row_align=row_align_for(target_of(profile)), **extra)  # fmt: skip
    schedule = run_policy(problem_from_graph(graph, profile, memory=True), profile, policy)
    return lower(graph, schedule, profile, config), profile


def main() -> int:
    rtl = os.environ.get("PCCX_V002_RTL")
    if not rtl:
        print("set PCCX_V002_RTL to a pccx-v002 checkout; nothing measured", file=sys.stderr)
        return 0
    from pccx_flow.cosim.rtl_files import find_verilator
    from pccx_flow.cosim.run import cosim

    verilator = find_verilator(None)
    rows = []
    with tempfile.TemporaryDirectory() as cache:
        os.environ["XDG_CACHE_HOME"] = cache  # a cold build first
        for preset, profile_name, policy, position, layers in CASES:
            program, profile = program_for(preset, profile_name, policy, position, layers)
            t0 = time.perf_counter()
            rep = cosim(program, profile, Path(rtl), verilator)
            row = {
                "case": f"{preset} pos {position} {policy} {profile_name}"
                + (f" layers {layers[0]}:{layers[1]}" if layers else ""),
                "build_seconds": rep.model.build_seconds, "cached": rep.model.cached,
                "wall_seconds": time.perf_counter() - t0, "writes": rep.writes,
                "cycles": rep.cycles, "sim_seconds": rep.sim_seconds,
                "cycles_per_second": rep.cycles / rep.sim_seconds,
                "words": len(rep.match.issued), "fields": rep.match.fields_checked,
                "mismatch": rep.match.mismatch, "reissues": rep.match.reissues,
                "gaps": rep.gaps, "controller_bound": rep.bound_gaps, "held": rep.issue_gaps,
                "verilator": f"{rep.model.version[0]}.{rep.model.version[1]}",
            }  # fmt: skip
            rows.append(row)
            build = "cached" if row["cached"] else f"{row['build_seconds']:.1f} s"
            print(f"{row['case']}: {row['words']} words, {row['fields']} fields, mismatch "
                  f"{row['mismatch']}; {row['cycles']:,} cycles in {row['sim_seconds']:.2f} s "
                  f"({row['cycles_per_second'] / 1e6:.2f} M/s); build "
                  f"{build}; "
                  f"controller-bound gap {row['controller_bound']}")  # fmt: skip
    write_result("cosim", {"cases": rows})
    return 0


if __name__ == "__main__":
    sys.exit(main())

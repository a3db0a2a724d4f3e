"""Benchmark: drawing E4B decode-step pictures - seconds per render and output size.

Cases (position 1023, v002-spec costs, min-cost critical path bold as `pccx-flow render
--profile v002-spec` draws it):

- the whole step collapsed by block, to SVG (target from the project brief: < 10 s);
- the whole step collapsed by layer;
- one full E4B layer (layer 7) with every instruction, and with tiles folded;
- the Gantt chart of the `critical-path` schedule of the whole step, as SVG and HTML.

The graph, its bounds and the schedule are built once, outside the timed part; each case
times building the picture plus Graphviz's layout (`dot` runs as a child process and its
time is included) `--runs` times and reports the median. These are wall times of this
machine's CPU and Graphviz, not NPU estimates. Prints a table and writes
``benchmarks/results/render.json``.

    python benchmarks/bench_render.py            # 3 runs per case
    python benchmarks/bench_render.py --runs 1
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULT = HERE / "results" / "render.json"
POSITION = 1023
TARGET_SECONDS = 10.0  # whole step by block, to SVG


def _dot_version() -> str:
    try:
        proc = subprocess.run(["dot", "-V"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return "missing"
    return (proc.stderr or proc.stdout).strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per case (default: 3)")
    args = parser.parse_args(argv)

    from pccx_flow.bounds import lower_bounds
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.hardware.profile import load_profile
    from pccx_flow.render.dag import build_dag_picture, layer_view, write_dag
    from pccx_flow.render.gantt import write_gantt
    from pccx_flow.schedule.metrics import schedule_metrics
    from pccx_flow.schedule.problem import problem_from_graph
    from pccx_flow.schedule.registry import make_policy, run_on_problem

    profile = load_profile("v002-spec")
    t0 = time.perf_counter()
    step = build_decode_graph("e4b", position=POSITION, profile=profile)
    step_path = lower_bounds(step, profile).critical_path
    layer = build_decode_graph("e4b", position=POSITION, profile=profile, layers=(7, 8))
    layer_path = lower_bounds(layer, profile).critical_path
    problem = problem_from_graph(step, profile)
    schedule = run_on_problem(
        make_policy("critical-path"), problem, label="critical-path", profile=profile.name
    )
    metrics = schedule_metrics(schedule, problem, profile)
    setup = time.perf_counter() - t0

    def dag(graph, path, level):
        def draw(out: Path) -> dict:
            picture = build_dag_picture(graph, level=level, critical_path=path)
            write_dag(picture, out)
            return {"nodes_drawn": picture.nodes, "edges_drawn": picture.edges}

        return draw

    def gantt(out: Path) -> dict:
        write_gantt(schedule, step, out, metrics=metrics, profile=profile)
        return {"slots": len(schedule.slots)}

    cases = [
        ("whole step, blocks", "svg", dag(step, step_path, "blocks")),
        ("whole step, layers", "svg", dag(step, step_path, "layers")),
        ("layer 7, every node", "svg", dag(layer_view(layer, (7, 8)), layer_path, "none")),
        ("layer 7, tiles folded", "svg", dag(layer_view(layer, (7, 8)), layer_path, "tiles")),
        ("Gantt, whole step", "svg", gantt),
        ("Gantt, whole step", "html", gantt),
    ]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for i, (name, fmt, draw) in enumerate(cases):
            out = Path(tmp) / f"case{i}.{fmt}"
            seconds, facts = [], {}
            for _ in range(args.runs):
                t = time.perf_counter()
                facts = draw(out)
                seconds.append(time.perf_counter() - t)
            rows.append(
                {
                    "case": name,
                    "format": fmt,
                    "seconds": seconds,
                    "median_seconds": statistics.median(seconds),
                    "bytes": out.stat().st_size,
                    **facts,
                }
            )

    print(
        f"E4B decode-step pictures at position {POSITION}, v002-spec "
        f"(median of {args.runs} runs; CPU wall time, not NPU estimates)"
    )
    print(f"graph {step.number_of_nodes():,} nodes; setup (build, bounds, schedule) {setup:.1f} s")
    print(f"{'case':<24} {'fmt':<5} {'seconds':>8} {'nodes':>6} {'size KB':>8}")
    for r in rows:
        drawn = r.get("nodes_drawn", r.get("slots", 0))
        print(
            f"{r['case']:<24} {r['format']:<5} {r['median_seconds']:>8.2f} {drawn:>6} "
            f"{r['bytes'] / 1024:>8.0f}"
        )
    blocks = rows[0]["median_seconds"]
    verdict = "meets" if blocks < TARGET_SECONDS else "misses"
    print(f"whole step by block: {blocks:.2f} s, {verdict} the < {TARGET_SECONDS:g} s target")

    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(
        json.dumps(
            {
                "benchmark": "render",
                "position": POSITION,
                "profile": profile.name,
                "runs": args.runs,
                "targets": {"whole_step_blocks_svg_seconds": TARGET_SECONDS},
                "machine": {"python": platform.python_version(), "graphviz": _dot_version()},
                "graph_nodes": step.number_of_nodes(),
                "setup_seconds": setup,
                "cases": rows,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {RESULT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

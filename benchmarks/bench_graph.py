"""Benchmark: building the full E4B decode-step DAG at position 1023 - time, memory, size.

For each case (pccx semantics without and with the v002-spec cost annotation, and gemma3n
for comparison) a fresh child process imports pccx-flow, then builds the graph `--runs`
times and reports the median wall time, the tracemalloc peak of one more build (Python
allocations of the build alone) and the process's peak resident set (``VmHWM``) with the
resident set before the first build, so the build's own share is visible.

Targets (from the project brief): < 1 s and < 300 MB per build. The byte totals are the
graph's own accounting: GEMV weight bytes as stored (dense) and with the sparse W_down
estimate of layers 0-9 (``sparse_weight_bytes``), and KV cache bytes moved by MEMCPY.
These are properties of the graph, not NPU timings. Prints a table and writes
``benchmarks/results/graph.json``.

    python benchmarks/bench_graph.py              # 5 runs per case
    python benchmarks/bench_graph.py --runs 3
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

from measure import status_kb

HERE = Path(__file__).resolve().parent
RESULT = HERE / "results" / "graph.json"
POSITION = 1023
CASES = (("pccx", None), ("pccx", "v002-spec"), ("gemma3n", None))


def _byte_totals(graph) -> dict:
    dense = sparse = kv = 0
    for _, a in graph.nodes(data=True):
        if a["op"] == "GEMV":
            dense += a["weight_bytes"]
            sparse += a["params"].get("sparse_weight_bytes", a["weight_bytes"])
        if a["kernel"] in ("kv_read", "kv_write"):
            kv += a["act_bytes"]
    return {"weight_bytes_dense": dense, "weight_bytes_sparse_down": sparse, "kv_bytes": kv}


def child(semantics: str, profile_name: str | None, runs: int) -> dict:
    """Build the graph `runs` times in this process and measure."""
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.hardware.profile import load_profile

    profile = load_profile(profile_name) if profile_name else None
    rss_before = status_kb("VmRSS") / 1024
    times = []
    graph = None
    for _ in range(runs):
        graph = None  # drop the previous graph before timing the next build
        t0 = time.perf_counter()
        graph = build_decode_graph("e4b", semantics=semantics, position=POSITION, profile=profile)
        times.append(time.perf_counter() - t0)
    nodes, edges = graph.number_of_nodes(), graph.number_of_edges()
    totals = _byte_totals(graph)
    graph = None
    tracemalloc.start()
    build_decode_graph("e4b", semantics=semantics, position=POSITION, profile=profile)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return {
        "semantics": semantics,
        "profile": profile_name,
        "nodes": nodes,
        "edges": edges,
        "seconds": times,
        "median_seconds": statistics.median(times),
        "tracemalloc_peak_mb": peak / 2**20,
        "rss_before_mb": rss_before,
        "peak_rss_mb": status_kb("VmHWM") / 1024,
        **totals,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5, help="builds per case (default: 5)")
    parser.add_argument(
        "--child", nargs=2, metavar=("SEMANTICS", "PROFILE"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.child:
        sem, prof = args.child
        print(json.dumps(child(sem, None if prof == "-" else prof, args.runs)))
        return 0
    rows = []
    for sem, prof in CASES:
        out = subprocess.run(
            [sys.executable, __file__, "--runs", str(args.runs), "--child", sem, prof or "-"],
            check=True,
            capture_output=True,
            text=True,
        )
        rows.append(json.loads(out.stdout.strip().splitlines()[-1]))
    header = (
        f"{'case':<22}{'nodes':>8}{'edges':>8}{'median s':>10}{'tracemalloc MB':>16}"
        f"{'peak RSS MB':>13}{'RSS before':>12}"
    )
    print(f"E4B decode-step graph build at position {POSITION} (median of {args.runs} runs)")
    print(header)
    for r in rows:
        case = f"{r['semantics']}" + (f" + {r['profile']}" if r["profile"] else "")
        print(
            f"{case:<22}{r['nodes']:>8}{r['edges']:>8}{r['median_seconds']:>10.3f}"
            f"{r['tracemalloc_peak_mb']:>16.1f}{r['peak_rss_mb']:>13.1f}{r['rss_before_mb']:>12.1f}"
        )
    p = rows[0]
    print(
        f"pccx weight bytes streamed per step: {p['weight_bytes_dense'] / 1e9:.3f} GB dense, "
        f"{p['weight_bytes_sparse_down'] / 1e9:.3f} GB if the sparse W_down of layers 0-9 "
        f"skipped its masked inputs; KV bytes moved: {p['kv_bytes'] / 1e6:.1f} MB"
    )
    RESULT.parent.mkdir(parents=True, exist_ok=True)
    RESULT.write_text(
        json.dumps(
            {
                "benchmark": "graph",
                "position": POSITION,
                "runs": args.runs,
                "targets": {"seconds": 1.0, "memory_mb": 300},
                "machine": {"python": platform.python_version(), "cpu": platform.processor()},
                "cases": rows,
            },
            indent=2,
        )
    )
    print(f"wrote {RESULT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

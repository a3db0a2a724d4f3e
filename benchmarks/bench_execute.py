"""One E4B decode step on this CPU: Dask threaded vs the plain loop vs the reference decode.

Each mode runs in its own child process (so its peak RSS is its own) and decodes the same
step (position 0, token 2, fresh cache) once to warm up (numba compile, page cache) and then
`--repeats` times; the table shows the median seconds per step and the child's peak RSS.
``dask / loop`` is the overhead ratio of Dask (one task per node; ``dask-fused``: the nodes
grouped into fewer tasks shaped for the thread count, see `pccx_flow.execute.fuse`) over
calling the same kernels in a plain loop. A Dask child times the plain loop next to each of
its steps, in alternating order, after a garbage collection, and the ratio is the median of
those pairs (with their range), so a machine that slows down for a while (this one is
shared) slows both sides of a pair alike. A Dask step includes building,
ordering and running its task graph (and, fused, computing the groups); the graph and its
plan are built once, outside the timed step, for every mode alike. The fused child also
sweeps the fusion grain (what a task is charged; `GRAINS`) to show how the task count
matters.
The loop child also times every kernel kind, to show what dominates a step.

All times are CPU wall times of this machine, not NPU estimates.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_execute.py            # /work/ckpt/e4b-seed0
    python benchmarks/bench_execute.py --weights DIR --repeats 7

Writes benchmarks/results/execute.json.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

from measure import peak_rss_mib, write_result

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")

DEFAULT_WEIGHTS = "/work/ckpt/e4b-seed0"
MODES = ("dask", "dask-fused", "loop", "reference")
TOKEN, POSITION = 2, 0
GRAINS = (1e-4, 1e-3, 3e-3, 1e-2)  # fusion grains swept by the dask-fused child (seconds)


def _seconds(fn) -> float:
    gc.collect()  # no collection of an earlier run's garbage inside the timed call
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _paired(dask_step, loop, repeats: int) -> tuple[list[float], list[float]]:
    """Seconds of `dask_step` and its ratio to `loop`, timed in pairs in alternating order
    (Dask first, then the loop first), so neither side always runs second."""
    times, ratios = [], []
    for i in range(repeats):
        if i % 2 == 0:
            d = _seconds(dask_step)
            lo = _seconds(loop)
        else:
            lo = _seconds(loop)
            d = _seconds(dask_step)
        times.append(d)
        ratios.append(d / lo)
    return times, ratios


def _spread(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def _grain_point(graph, calls, step, loop, grain: float, repeats: int) -> dict:
    """Fused Dask at one fusion grain: tasks, seconds and paired ratios to the loop."""
    from pccx_flow.execute import executor
    from pccx_flow.execute.fuse import fusion_groups

    tasks = len(fusion_groups(graph, list(calls), executor.worker_count(None, None), grain))
    times, ratios = _paired(lambda: step(grain), loop, repeats)
    return {
        "grain_s": grain,
        "tasks": tasks,
        "median_s": statistics.median(times),
        "paired_over_loop": statistics.median(ratios),
        "paired_over_loop_spread": _spread(ratios),
    }


def child(mode: str, weights: str, repeats: int, semantics: str) -> dict:
    """Run one mode in this process; returns seconds per repeat and facts about the step."""
    import numpy as np

    from pccx_flow.weights.checkpoint import open_checkpoint

    ckpt = open_checkpoint(weights)
    cfg = ckpt.config
    out: dict = {"mode": mode}
    paired_loop = None
    if mode == "reference":
        from pccx_flow.reference.decode import decode_step, new_kv_cache

        cache = new_kv_cache(cfg, semantics)

        def step():
            return decode_step(ckpt, TOKEN, POSITION, cache, semantics=semantics)

    else:
        from pccx_flow.execute import executor, runtime
        from pccx_flow.execute.plan import plan_graph
        from pccx_flow.execute.state import new_decode_state
        from pccx_flow.graph.build import build_decode_graph

        t0 = time.perf_counter()
        graph = build_decode_graph(cfg, semantics=semantics, position=POSITION)
        out["graph_build_s"] = time.perf_counter() - t0
        t0 = time.perf_counter()
        calls = plan_graph(graph)
        out["plan_s"] = time.perf_counter() - t0
        out["nodes"] = graph.number_of_nodes()
        out["edges"] = graph.number_of_edges()
        state = new_decode_state(cfg, semantics, token_id=TOKEN, position=POSITION)
        if mode in ("dask", "dask-fused"):
            fuse = mode == "dask-fused"
            out["tasks"] = len(calls)
            if fuse:
                from pccx_flow.execute.fuse import GRAIN_SECONDS, fusion_groups

                workers = executor.worker_count(None, None)
                t0 = time.perf_counter()
                out["tasks"] = len(fusion_groups(graph, list(calls), workers))
                out["fusion_s"] = time.perf_counter() - t0
                out["threads"] = workers
                out["default_grain_s"] = GRAIN_SECONDS

            def step(grain=None):
                return executor.execute_step(
                    graph, ckpt, state, commit=False, calls=calls, fuse=fuse, fuse_grain=grain
                ).logits

            def loop():
                return executor.run_sequential(graph, ckpt, state, commit=False, calls=calls)

            paired_loop = loop
        else:
            per_kernel: dict[str, float] = defaultdict(float)
            real_run_node = runtime.run_node

            def timed_run_node(call, *args):
                t = time.perf_counter()
                try:
                    return real_run_node(call, *args)
                finally:
                    per_kernel[call.kernel] += time.perf_counter() - t

            def step():
                per_kernel.clear()
                return executor.run_sequential(graph, ckpt, state, commit=False, calls=calls)

            import pccx_flow.execute.loop as loop_module

            loop_module.run_node = timed_run_node
            out["per_kernel_s"] = per_kernel

    logits = step()  # warm-up: numba compile, page cache (every later step gives the same)
    if paired_loop is not None:  # each Dask step paired with a loop run on the same machine
        times, ratios = _paired(step, paired_loop, repeats)
        out["paired_over_loop"] = statistics.median(ratios)
        out["paired_over_loop_spread"] = _spread(ratios)
    else:
        times = [_seconds(step) for _ in range(repeats)]
    out["seconds"] = times
    out["median_s"] = statistics.median(times)
    if mode == "dask-fused":
        out["grains"] = [_grain_point(graph, calls, step, paired_loop, g, repeats) for g in GRAINS]
    out["peak_rss_mib"] = peak_rss_mib()
    out["argmax"] = int(np.argmax(logits))
    out["logits_head"] = [float(v) for v in np.asarray(logits[:4])]
    if "per_kernel_s" in out:
        out["per_kernel_s"] = dict(sorted(out["per_kernel_s"].items(), key=lambda kv: -kv[1]))
    np.save(f"/tmp/bench_execute_{mode}_{os.getpid()}.npy", logits, allow_pickle=False)
    out["logits_file"] = f"/tmp/bench_execute_{mode}_{os.getpid()}.npy"
    return out


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--weights", default=DEFAULT_WEIGHTS)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--semantics", default="pccx")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(child(args.child, args.weights, args.repeats, args.semantics)))
        return 0
    if not (Path(args.weights) / "manifest.json").is_file():
        print(f"no complete checkpoint at {args.weights} (manifest.json missing)", file=sys.stderr)
        return 2
    import numpy as np

    results = {}
    for mode in args.modes.split(","):
        cmd = [sys.executable, __file__, "--child", mode, "--weights", args.weights]
        cmd += ["--repeats", str(args.repeats), "--semantics", args.semantics]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode:
            print(proc.stderr, file=sys.stderr)
            return 1
        results[mode] = json.loads(proc.stdout.strip().splitlines()[-1])
    logits = {m: np.load(r.pop("logits_file"), allow_pickle=False) for m, r in results.items()}
    summary = {
        "weights": args.weights,
        "semantics": args.semantics,
        "position": POSITION,
        "cpu_count": os.cpu_count(),
        "note": "CPU wall times on this machine; not NPU estimates",
        "modes": results,
    }
    for m in ("dask", "dask-fused"):
        if m in results:
            summary[f"{m}_over_loop"] = results[m]["paired_over_loop"]
    if "reference" in logits:
        ref = logits["reference"].astype(np.float64)
        for m in logits:
            if m != "reference":
                summary[f"{m}_max_abs_diff_vs_reference"] = float(np.abs(logits[m] - ref).max())
    print(f"E4B decode step ({args.semantics}, position {POSITION}) on {os.cpu_count()} cores,")
    print(f"median of {args.repeats} after one warm-up; CPU times, not NPU estimates")
    print(f"{'mode':<10} {'s/step':>8} {'tasks':>7} {'peak RSS MiB':>13}")
    for m, r in results.items():
        print(f"{m:<10} {r['median_s']:8.3f} {r.get('tasks', '-'):>7} {r['peak_rss_mib']:13.0f}")
    for m in ("dask", "dask-fused"):
        if f"{m}_over_loop" in summary:
            spread = results[m]["paired_over_loop_spread"]
            print(
                f"{m} / loop ratio (median of paired runs): {summary[f'{m}_over_loop']:.2f}"
                f" (range {spread['min']:.2f}-{spread['max']:.2f})"
            )
    for point in results.get("dask-fused", {}).get("grains", []):
        print(
            f"  fusion grain {point['grain_s'] * 1e3:g} ms: {point['tasks']} tasks, "
            f"{point['median_s']:.3f} s/step, {point['paired_over_loop']:.2f}x the loop "
            f"(range {point['paired_over_loop_spread']['min']:.2f}-"
            f"{point['paired_over_loop_spread']['max']:.2f})"
        )
    for k, v in summary.items():
        if k.endswith("_vs_reference"):
            print(f"{k}: {v:.2e}")
    if "loop" in results:
        top = list(results["loop"]["per_kernel_s"].items())[:6]
        print("loop time by kernel: " + ", ".join(f"{k} {v:.3f}s" for k, v in top))
        print(
            f"nodes {results['loop']['nodes']}, graph build {results['loop']['graph_build_s']:.2f}"
            f" s, plan {results['loop']['plan_s']:.2f} s"
        )
    print(f"wrote {write_result('execute', summary)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""Checkpoint I/O on this machine: synthetic E4B write, verify, and INT4 reads.

Each run writes ``pccx-flow weights synth --preset <preset>`` into a fresh temporary folder
in a child process (its wall time and its own peak RSS, via ``os.wait4``), then times, in
another child, ``weights verify`` and two reads the decode does all the time: dequantising
one whole FFN matrix and fetching one embedding row. The table shows medians over
``--runs``; the temporary checkpoints are deleted. All times are CPU wall times of this
machine, not NPU estimates.

    OPENBLAS_NUM_THREADS=1 python benchmarks/bench_weights.py            # e4b, 3 runs
    python benchmarks/bench_weights.py --preset tiny --runs 5

Writes benchmarks/results/weights.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

HERE = Path(__file__).resolve().parent

# Runs in the read child: prints one JSON line of timings.
READ_SCRIPT = """
import json, sys, time
from pccx_flow.weights.checkpoint import open_checkpoint
from pccx_flow.weights.verify import inspect_checkpoint
path = sys.argv[1]
t = time.perf_counter(); report = inspect_checkpoint(path); verify_s = time.perf_counter() - t
assert not report.problems, report.problems
ck = open_checkpoint(path)
key = "layers.0.mlp.gate_proj.weight"
t = time.perf_counter(); w = ck.tensor(key); deq_s = time.perf_counter() - t
stride = ck.config.vocab // 64
t = time.perf_counter()
for tok in range(0, 64):
    ck.rows("embed_tokens.weight", tok * stride, tok * stride + 1)
row_s = (time.perf_counter() - t) / 64
print(json.dumps({"verify_s": verify_s, "dequant_s": deq_s, "dequant_values": int(w.size),
                  "embed_row_s": row_s, "bytes": report.n_bytes, "tensors": report.n_tensors}))
"""


def run_measured(argv: list[str]) -> tuple[float, float, str]:
    """Run `argv` and reap it with os.wait4, so the peak RSS is that child's alone."""
    with tempfile.TemporaryFile(mode="w+") as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.DEVNULL)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - start
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            sys.exit(f"child failed ({proc.returncode}): {' '.join(argv)}")
        out.seek(0)
        return wall, usage.ru_maxrss / 1024.0, out.read()  # ru_maxrss is KiB on Linux


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="e4b")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tmp-dir", default=None, help="where the temporary checkpoints go")
    parser.add_argument("--out", default=str(HERE / "results" / "weights.json"))
    args = parser.parse_args()

    rows = []
    for run in range(args.runs):
        folder = Path(tempfile.mkdtemp(prefix="bench-weights-", dir=args.tmp_dir))
        try:
            synth = [sys.executable, "-m", "pccx_flow.cli.main", "weights", "synth"]
            synth += ["--preset", args.preset, "--seed", str(run), "--out", str(folder)]
            wall, rss, _ = run_measured([*synth, "--force", "--no-progress"])
            _, read_rss, out = run_measured([sys.executable, "-c", READ_SCRIPT, str(folder)])
            read = json.loads(out)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        rows.append(
            {"synth_s": wall, "synth_peak_rss_mib": rss, "read_peak_rss_mib": read_rss, **read}
        )
        print(
            f"run {run + 1}/{args.runs}: synth {wall:.1f} s, peak RSS {rss:.0f} MiB",
            file=sys.stderr,
        )

    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    gb = med["bytes"] / 1e9
    table = [
        ("synth wall", f"{med['synth_s']:.1f} s", f"{gb / med['synth_s']:.3f} GB/s written"),
        ("synth peak RSS", f"{med['synth_peak_rss_mib']:.0f} MiB", "child process"),
        ("verify", f"{med['verify_s']:.2f} s", f"{med['tensors']:.0f} tensors, {gb:.2f} GB"),
        (
            "dequantise gate_proj",
            f"{med['dequant_s'] * 1e3:.0f} ms",
            f"{med['dequant_values'] / med['dequant_s'] / 1e6:.0f} M values/s",
        ),
        ("embedding row fetch", f"{med['embed_row_s'] * 1e6:.0f} us", "one row, dequantised"),
        ("read peak RSS", f"{med['read_peak_rss_mib']:.0f} MiB", "verify + reads child"),
    ]
    print(f"\nweights benchmark: preset {args.preset}, median of {args.runs} run(s), CPU wall time")
    for name, value, note in table:
        print(f"  {name:<22}{value:>12}   {note}")

    result = {
        "benchmark": "weights",
        "preset": args.preset,
        "runs": args.runs,
        "median": med,
        "per_run": rows,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
        "note": "CPU wall time on this machine; no NPU involved",
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

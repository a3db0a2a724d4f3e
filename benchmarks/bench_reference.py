"""Benchmark: one E4B reference decode step (NumPy, on this CPU) - wall time and peak memory.

Each run is a fresh child process that opens the checkpoint, runs one `decode_step` at
position 0 and reports its wall time, its peak resident set (``VmHWM``, which also counts
the checkpoint's memory-mapped pages it touched) and its peak anonymous memory (sampled
every 20 ms: the arrays the decode itself allocates), and whether the logits are finite.
If they are not, the child reruns the step with a trace and names the first intermediate
that is not finite, so a blow-up in the synthetic weights is located, not hidden.

These are CPU timings of the reference oracle, not NPU estimates. Prints a table of medians
and writes ``benchmarks/results/reference.json``.

    python benchmarks/bench_reference.py                        # /work/ckpt/e4b-seed0, 3 runs
    python benchmarks/bench_reference.py --ckpt ckpt/ --runs 1 --semantics gemma3n
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

from measure import status_kb

HERE = Path(__file__).resolve().parent
DEFAULT_CKPT = Path("/work/ckpt/e4b-seed0")
RESULT = HERE / "results" / "reference.json"


class _AnonPeak:
    """Samples RssAnon in a thread: the kernel keeps no peak of anonymous memory."""

    def __init__(self, interval: float = 0.02) -> None:
        self.peak_kb = status_kb("RssAnon")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(interval,), daemon=True)

    def _run(self, interval: float) -> None:
        while not self._stop.wait(interval):
            self.peak_kb = max(self.peak_kb, status_kb("RssAnon"))

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self.peak_kb = max(self.peak_kb, status_kb("RssAnon"))


def _first_non_finite(trace: dict) -> str | None:
    import numpy as np

    for name, value in trace.items():  # insertion order = computation order
        arr = np.asarray(value)
        if arr.dtype.kind == "f" and not np.isfinite(arr).all():
            return name
    return None


def child(ckpt_dir: str, semantics: str, token: int) -> dict:
    """One measured decode step in this process; returns the measurements."""
    import numpy as np

    from pccx_flow.reference.decode import decode_step, new_kv_cache
    from pccx_flow.weights.checkpoint import open_checkpoint

    ckpt = open_checkpoint(ckpt_dir)
    cache = new_kv_cache(ckpt.config, semantics)
    with _AnonPeak() as anon:
        t0 = time.perf_counter()
        logits = decode_step(ckpt, token, 0, cache, semantics=semantics)
        seconds = time.perf_counter() - t0
    finite = bool(np.isfinite(logits).all())
    out = {
        "seconds": seconds,
        "peak_rss_mb": status_kb("VmHWM") / 1024,
        "peak_anon_mb": anon.peak_kb / 1024,
        "finite": finite,
        "max_abs_logit": float(np.nanmax(np.abs(logits))) if not np.isnan(logits).all() else None,
        "argmax": int(np.nanargmax(logits)) if not np.isnan(logits).all() else None,
        "config": ckpt.config.name,
        "first_non_finite": None,
    }
    if not finite:
        trace: dict = {}
        decode_step(
            ckpt, token, 0, new_kv_cache(ckpt.config, semantics), semantics=semantics, trace=trace
        )
        out["first_non_finite"] = _first_non_finite(trace)
    return out


def _wait_for(ckpt: Path, wait: float) -> None:
    deadline = time.monotonic() + wait
    while not (ckpt / "manifest.json").is_file():
        if time.monotonic() >= deadline:
            sys.exit(
                f"bench_reference: {ckpt}/manifest.json not found; write the checkpoint "
                "with `pccx-flow weights synth --preset e4b` or pass --ckpt"
            )
        time.sleep(5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ckpt", type=Path, default=DEFAULT_CKPT, help="checkpoint directory")
    parser.add_argument("--runs", type=int, default=3, help="child processes (median reported)")
    parser.add_argument("--semantics", default="pccx", choices=("pccx", "gemma3n"))
    parser.add_argument("--token", type=int, default=2, help="token id decoded at position 0")
    parser.add_argument(
        "--wait", type=float, default=0.0, help="seconds to wait for the checkpoint's manifest.json"
    )
    parser.add_argument("--out", type=Path, default=RESULT, help="JSON result file")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.child:
        print(json.dumps(child(str(args.ckpt), args.semantics, args.token)))
        return 0

    _wait_for(args.ckpt, args.wait)
    env = dict(os.environ)
    env.setdefault("OPENBLAS_NUM_THREADS", "1")
    cmd = [
        sys.executable,
        __file__,
        "--child",
        "--ckpt",
        str(args.ckpt),
        "--semantics",
        args.semantics,
        "--token",
        str(args.token),
    ]
    runs = []
    for i in range(args.runs):
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        if proc.returncode:
            sys.stderr.write(proc.stderr)
            return proc.returncode
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        print(f"run {i + 1}/{args.runs}: {runs[-1]['seconds']:.1f} s", file=sys.stderr)

    med = {
        k: statistics.median(r[k] for r in runs) for k in ("seconds", "peak_rss_mb", "peak_anon_mb")
    }
    result = {
        "benchmark": "reference",
        "what": "one reference decode step at position 0 (NumPy on this CPU, not an NPU estimate)",
        "checkpoint": str(args.ckpt),
        "config": runs[0]["config"],
        "semantics": args.semantics,
        "token": args.token,
        "runs": runs,
        "median": med,
        "all_finite": all(r["finite"] for r in runs),
        "first_non_finite": next(
            (r["first_non_finite"] for r in runs if r["first_non_finite"]), None
        ),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "OPENBLAS_NUM_THREADS": env["OPENBLAS_NUM_THREADS"],
        },
        "command": " ".join([Path(sys.executable).name, *sys.argv]),
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")

    print(
        f"reference decode step, {result['config']} / {args.semantics}, "
        f"median of {args.runs} run(s) (CPU, NumPy)"
    )
    print(
        f"{'seconds':>10} {'peak RSS MB':>12} {'peak anon MB':>13} {'finite':>7} "
        f"{'max|logit|':>11} {'argmax':>7}"
    )
    r0 = runs[0]
    print(
        f"{med['seconds']:>10.2f} {med['peak_rss_mb']:>12.0f} {med['peak_anon_mb']:>13.0f} "
        f"{str(result['all_finite']):>7} {r0['max_abs_logit'] or float('nan'):>11.3f} "
        f"{str(r0['argmax']):>7}"
    )
    if result["first_non_finite"]:
        print(f"first non-finite intermediate: {result['first_non_finite']}")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

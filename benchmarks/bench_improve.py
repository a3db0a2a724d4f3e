"""Forward-backward improvement on compare's random DAGs, against the CP-SAT optimum.

Runs `pccx-flow compare --dags random:COUNT` (seed 0, in this process) with heft and
lookahead, each alone, with ``+improve`` (deterministic justification) and with
``+improve:50`` (50 seeded, perturbed rounds), and records per policy the mean and worst
ratio to the optimum CP-SAT proves on the small instances, the mean ratio to the best
policy, and the median wall time per DAG (schedule + validation, this machine's).

Target (issue: schedules close to a provable bound): the best policy <= 1.05x the optimum
on average.

    python benchmarks/bench_improve.py              # 60 DAGs, ~1-2 min
    python benchmarks/bench_improve.py --count 200

Writes benchmarks/results/improve.json.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from pccx_flow.cli.main import main as cli  # noqa: E402

HERE = Path(__file__).resolve().parent
POLICIES = ["heft", "lookahead", "heft+improve", "lookahead+improve", "heft+improve:50",
            "lookahead+improve:50"]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=60)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "improve.json")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "compare.json"
        t = time.perf_counter()
        with contextlib.redirect_stdout(io.StringIO()) as table:
            code = cli(["compare", "--dags", f"random:{args.count}", "--policies",
                        ",".join(POLICIES), "--workers", "0", "--no-progress",
                        "--json", str(out)])  # fmt: skip
        wall = time.perf_counter() - t
        if code != 0:
            print(f"compare failed with exit code {code}", file=sys.stderr)
            return code
        summary = json.loads(out.read_text())["summary"]["random"]
    keep = ("mean_ratio", "worst_ratio", "mean_ratio_to_optimum", "worst_ratio_to_optimum",
            "median_seconds")  # fmt: skip
    payload = {
        "benchmark": "improve",
        "count": args.count,
        "proven_optimal": summary["optimal"],
        "wall_seconds": wall,
        "policies": {p: {k: summary["policies"][p][k] for k in keep} for p in POLICIES},
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count()},
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(payload, indent=1) + "\n")
    print(table.getvalue(), end="")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

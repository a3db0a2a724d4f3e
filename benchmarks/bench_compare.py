"""The default `pccx-flow compare` sweep, timed end to end on this machine.

All built-in policies; the E4B decode step on v002-spec and v002-as-built at positions 0,
1023, 4095 and 8191 (8 instances, ~15k nodes each); 200 seeded random DAGs (five families,
8-500 nodes, heterogeneous lanes, comm, a shared pool), the <= 40-node ones also solved with
CP-SAT (5 s limit each) when ortools is installed. Two local Dask worker processes.

Target: the sweep finishes in minutes (< 10 min) on this 2-core machine.

    python benchmarks/bench_compare.py        # writes benchmarks/results/compare.json
                                              # and graphs/compare.svg
    python benchmarks/bench_compare.py --journal /tmp/c.jsonl   # resumable; the wall time
                                              # is then only that of the last run

Decode-step makespans are model estimates on the named profiles; no board has been timed.
"""

from __future__ import annotations

import argparse
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
TARGET_S = 600.0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--journal", type=Path, help="resume from / append to this journal")
    args = parser.parse_args(argv)
    out = HERE / "results" / "compare.json"
    plot = HERE.parent / "graphs" / "compare.svg"
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        full = Path(tmp) / "compare-full.json"
        journal = args.journal or Path(tmp) / "compare-full.jsonl"
        t0 = time.perf_counter()
        rc = cli(["compare", "--json", str(full), "--plot", str(plot), "--no-progress",
                  "--results", str(journal)])  # fmt: skip
        wall = time.perf_counter() - t0
        if rc:
            return rc
        data = json.loads(full.read_text())
    payload = {
        "benchmark": "compare",
        "note": data["note"],
        "command": "pccx-flow compare (defaults: --policies all --profiles "
        "v002-spec,v002-as-built --positions 0,1023,4095,8191 --dags decode,random:200)",
        "wall_seconds": wall,
        "resumed_from_journal": args.journal is not None,
        "instances": len(data["instances"]),
        "machine": {
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_before": load_before,
            "load_average_after": os.getloadavg(),
        },
        "summary": data["summary"],
        "target": {
            "target": f"default compare sweep in < {TARGET_S / 60:.0f} min",
            "value": f"{wall / 60:.1f} min",
            "met": wall < TARGET_S,
        },
    }
    out.write_text(json.dumps(payload, indent=1) + "\n")
    print(f"\nwrote {out} and {plot}; sweep took {wall:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Run every benchmark script in this folder, one after another, and collect their JSON.

The scripts are run in separate processes (so peak-RSS numbers do not mix) and in a fixed
order; each writes `benchmarks/results/<name>.json`. Pass script names to run only some:

    python benchmarks/run_all.py                 # all of them
    python benchmarks/run_all.py graph schedulers
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ORDER = (
    "graph", "schedulers", "memory", "compare", "render", "weights", "reference", "execute",
    "float64", "dashboard", "lower", "replay", "explore", "speed",
)  # fmt: skip


def main(argv: list[str]) -> int:
    names = argv or [n for n in ORDER if (HERE / f"bench_{n}.py").exists()]
    failed = []
    for name in names:
        script = HERE / f"bench_{name}.py"
        if not script.exists():
            print(f"no benchmark named {name!r} ({script.name} is missing)", file=sys.stderr)
            return 2
        print(f"== {script.name}", flush=True)
        t0 = time.perf_counter()
        rc = subprocess.call([sys.executable, str(script)])
        print(f"== {script.name}: exit {rc} after {time.perf_counter() - t0:.1f} s\n", flush=True)
        if rc:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

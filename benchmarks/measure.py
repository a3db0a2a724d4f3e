"""Helpers the benchmark scripts share: process memory readings, writing a result file and
reading what a fresh interpreter printed.

Not a benchmark itself (`run_all.py` runs only ``bench_*.py``); the scripts import it from
their own folder, which Python puts first on the path when it runs a script.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def status_kb(field: str) -> int:
    """A ``/proc/self/status`` field in KiB (``VmRSS``, ``VmHWM``, ``RssAnon``), 0 if absent."""
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def peak_rss_mib() -> float:
    """This process's peak resident set so far, in MiB (``ru_maxrss`` is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def write_result(name: str, data: dict) -> Path:
    """Write `data` as ``benchmarks/results/<name>.json``; returns the path."""
    out = RESULTS / f"{name}.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(data, indent=2) + "\n")
    return out


def write_and_show(out: Path, data: dict, table: str) -> None:
    """Write `data` to `out` (JSON), print `table` and, on stderr, where it went: the
    end of a comparison script (`bench_speed_against.py`, `bench_instructions.py`)."""
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(data, indent=1) + "\n")
    print(table)
    print(f"wrote {out}", file=sys.stderr)


def last_line_of(argv: list[str], what: str, env: Mapping[str, str] | None = None) -> str:
    """The last line `argv` (a fresh interpreter, run from this folder) prints on stdout; a
    one-line `SystemExit` naming `what` when it fails or prints nothing."""
    done = subprocess.run(argv, env=env, cwd=RESULTS.parent, capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        raise SystemExit(f"{what} failed (exit {done.returncode}): {last}")
    return lines[-1]


def compiled_modules() -> list[str]:
    """The modules of this process's `pccx_flow` imported as Cython extensions
    (`pccx_flow.compiled`); none in a package from before them."""
    try:
        from pccx_flow.compiled import running_compiled
    except ImportError:
        return []
    return running_compiled()

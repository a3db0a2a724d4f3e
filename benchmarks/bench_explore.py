"""`pccx-flow explore` throughput: E4B design points per second, fresh and from the cache.

By default a small Latin-hypercube sweep over the parameters of graphs/explore-e4b.toml
(16 E4B points at a 1,024-token context, critical-path, two local Dask workers) runs into an
empty cache, then again from that cache. ``--sweep FILE --cache DIR`` times any sweep instead
(the README's 520-point one, say); with a warm cache only the missing points are evaluated,
and the points/s printed counts those alone.

    python benchmarks/bench_explore.py                  # writes benchmarks/results/explore.json
    python benchmarks/bench_explore.py --points 40 --workers 2
    python benchmarks/bench_explore.py --sweep graphs/explore-e4b.toml --cache DIR

Target: a 500-point E4B sweep finishes in minutes on this 2-core machine, i.e. at least
0.5 points/s (about 17 min for 500). The machine is shared, so the load average before and
after is recorded beside the number. tok/s inside the records are model estimates.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from measure import write_result  # noqa: E402

from pccx_flow.explore.cache import Cache  # noqa: E402
from pccx_flow.explore.run import make_tasks, run_points  # noqa: E402
from pccx_flow.explore.sweep import read_sweep, sample  # noqa: E402

HERE = Path(__file__).resolve().parent
SWEEP = HERE.parent / "graphs" / "explore-e4b.toml"
TARGET_POINTS_PER_S = 0.5


def _timed(tasks, cache, workers):
    t0 = time.perf_counter()
    fresh = []
    recs = run_points(tasks, cache, workers=workers, progress=sys.stderr.isatty(),
                      on_record=fresh.append)  # fmt: skip
    return recs, len(fresh), time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweep", type=Path, default=SWEEP, help="sweep file (default: E4B)")
    parser.add_argument("--points", type=int, default=16, help="LHS points (default: 16)")
    parser.add_argument("--workers", type=int, default=2, help="Dask workers (default: 2)")
    parser.add_argument("--cache", type=Path, help="cache folder (default: a fresh one)")
    args = parser.parse_args(argv)
    sweep = read_sweep(args.sweep)
    if args.sweep == SWEEP:
        sweep.points = args.points
    tasks = make_tasks(sample(sweep), sweep.profile, sweep.preset, sweep.policies, sweep.memory)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        cache = Cache(args.cache or Path(tmp) / "cache")
        recs, n_fresh, wall = _timed(tasks, cache, args.workers)
        _, n_again, wall_cached = _timed(tasks, cache, args.workers)
    failed = sum("error" in r for r in recs)
    rate = n_fresh / wall if n_fresh else None
    payload = {
        "benchmark": "explore",
        "note": "points per second of wall time on this shared machine; the tok/s in the "
        "records are model estimates on v002-spec with each point's changes",
        "sweep": str(args.sweep.relative_to(HERE.parent) if args.sweep.is_absolute()
                     and HERE.parent in args.sweep.parents else args.sweep),  # fmt: skip
        "preset": sweep.preset, "policies": sweep.policies, "workers": args.workers,
        "points": len(tasks), "evaluated": n_fresh, "failed": failed,
        "wall_seconds": wall, "points_per_second": rate,
        "cached_wall_seconds": wall_cached, "cached_evaluated": n_again,
        "cached_points_per_second": len(tasks) / wall_cached if wall_cached else None,
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                    "load_average_before": load_before, "load_average_after": os.getloadavg()},
        "target": {"target": f">= {TARGET_POINTS_PER_S} E4B points/s (500 points in minutes)",
                   "value": f"{rate:.3f} points/s" if rate else "nothing evaluated",
                   "met": bool(rate and rate >= TARGET_POINTS_PER_S)},
    }  # fmt: skip
    out = write_result("explore", payload)
    print(f"{len(tasks)} points, {n_fresh} evaluated in {wall:.1f} s "
          f"({rate or 0:.3f} points/s, {failed} failed); from the cache in {wall_cached:.2f} s; "
          f"wrote {out}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())

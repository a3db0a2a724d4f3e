"""The long-context step's stages, this checkout against a git revision, process by process.

`bench_speed.py` times each stage in one process, and this machine's speed drifts between
processes by more than most changes to one stage. To compare two code bases whole, this
runs `bench_speed.one_run` (the step as `schedule` runs it, then graph, problem, bounds,
`heft`, validation, `critical-path` and metrics) in fresh processes that alternate between
this checkout and revision REV (exported with ``git archive``, put first on PYTHONPATH),
the order flipped every pair so a drift reaches both alike, and takes the ratio of each
stage pair by pair. Each process times `--steps` steps and reports their medians; the
package each one ran is checked to be the tree it was given. Wall times are this
machine's; no NPU time is measured.

    python benchmarks/bench_speed_against.py 629e918                 # v002-spec, 6 pairs
    python benchmarks/bench_speed_against.py HEAD~3 --profile v002-as-built --pairs 4
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from measure import compiled_modules, last_line_of, write_and_show

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


def one_process(profile: str, position: int, steps: int) -> dict:
    """Median seconds per stage over `steps` steps in this process (the child's job)."""
    from bench_speed import STAGES, one_run

    import pccx_flow

    runs = [one_run(profile, position) for _ in range(steps)]
    medians = {s: statistics.median(r[s] for r in runs) for s in STAGES}
    return {"package": str(Path(pccx_flow.__file__).resolve().parent), "seconds": medians,
            "compiled": compiled_modules()}  # fmt: skip


def export(rev: str, into: Path) -> str:
    """Write revision `rev`'s package under `into`; returns its full commit hash."""
    found = subprocess.run(["git", "rev-parse", "--verify", "--quiet", f"{rev}^{{commit}}"],
                           cwd=ROOT, capture_output=True, text=True)  # fmt: skip
    if found.returncode != 0:
        raise SystemExit(f"{rev!r} is not a commit of this checkout; give one, e.g. HEAD~1")
    commit = found.stdout.strip()
    archive = subprocess.run(["git", "archive", commit, "pccx_flow"], cwd=ROOT,
                             capture_output=True)  # fmt: skip
    if archive.returncode != 0:
        raise SystemExit(f"{rev} has no pccx_flow package to compare against")
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return commit


def run_in(tree: Path, profile: str, position: int, steps: int) -> dict:
    """`one_process` in a fresh interpreter whose `pccx_flow` is the one under `tree` (the
    tree alone on PYTHONPATH: a path given before could hold another copy). This checkout
    runs the modules it has compiled (`pccx_flow.compiled`; an exported revision has none):
    with ``PCCX_FLOW_PURE_PYTHON=1`` both sides run from source."""
    env = {**os.environ, "PYTHONPATH": str(tree), "OPENBLAS_NUM_THREADS": "1"}
    argv = [sys.executable, __file__, "--child", "--profile", profile,
            "--position", str(position), "--steps", str(steps)]  # fmt: skip
    out = json.loads(last_line_of(argv, f"a step under {tree}", env))
    if Path(out["package"]) != (tree / "pccx_flow").resolve():
        raise SystemExit(f"the child ran {out['package']}, not {tree / 'pccx_flow'}")
    return out


def compare(rev: str, profile: str, position: int, pairs: int, steps: int) -> dict:
    """Each stage's seconds on both sides and its ratio (this checkout over REV) per pair."""
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="pccx-flow-rev-") as tmp:
        then_tree = Path(tmp)
        commit = export(rev, then_tree)
        now, then = [], []
        compiled: dict[str, list[str]] = {}  # the modules each side ran compiled
        for i in range(pairs):
            order = [("now", ROOT), ("then", then_tree)]
            for side, tree in order if i % 2 == 0 else order[::-1]:
                ran = run_in(tree, profile, position, steps)
                seconds = ran["seconds"]
                (now if side == "now" else then).append(seconds)
                compiled[side] = ran["compiled"]
                print(f"  pair {i + 1}/{pairs} {side:<4} as schedule "
                      f"{seconds['as schedule']:.3f} s", file=sys.stderr)  # fmt: skip
    stages = list(now[0])
    out = {}
    for s in stages:
        ratios = [a[s] / b[s] for a, b in zip(now, then, strict=True)]
        out[s] = {
            "now_median": statistics.median(a[s] for a in now),
            "then_median": statistics.median(b[s] for b in then),
            "ratio_median": statistics.median(ratios),
            "ratio_min": min(ratios),
            "ratio_max": max(ratios),
        }
    return {
        "revision": rev,
        "commit": commit,
        "profile": profile,
        "position": position,
        "pairs": pairs,
        "steps_per_process": steps,
        "stages": out,
        "compiled": compiled,
        "load_average_before": load_before,
        "load_average_after": os.getloadavg(),
        "note": "wall seconds on this shared machine; ratio = this checkout / the revision",
    }


def format_result(r: dict) -> str:
    lines = [
        f"E4B step at position {r['position']} on {r['profile']}: this checkout against "
        f"{r['revision']} ({r['commit'][:7]}), {r['pairs']} pairs of processes, each the "
        f"median of {r['steps_per_process']} steps (wall s)",
        f"  {'stage':<14}{'now':>9}{'then':>9}{'ratio':>8}  range",
    ]
    for s, x in r["stages"].items():
        lines.append(
            f"  {s:<14}{x['now_median']:9.3f}{x['then_median']:9.3f}{x['ratio_median']:7.2f}x"
            f"  {x['ratio_min']:.2f}-{x['ratio_max']:.2f}x"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("revision", nargs="?", help="git revision to compare against")
    parser.add_argument("--profile", default="v002-spec")
    parser.add_argument("--position", type=int, default=8191)
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--steps", type=int, default=3, help="steps timed per process")
    parser.add_argument(
        "--out", type=Path, help="result file (default results/speed_against_PROFILE.json)"
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(one_process(args.profile, args.position, max(1, args.steps))))
        return 0
    if not args.revision:
        parser.error("give the git revision to compare against, e.g. HEAD~1")
    result = compare(args.revision, args.profile, args.position, max(1, args.pairs),
                     max(1, args.steps))  # fmt: skip
    out = args.out or HERE / "results" / f"speed_against_{args.profile}.json"
    write_and_show(out, result, format_result(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

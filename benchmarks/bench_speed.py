"""The long-context step's wall time by stage, as medians over repeated runs in one process.

`bench_gap.py` times each stage once per point, beside everything else it runs; on a
noisy machine one run says little. This builds the E4B step at one position per profile
and times, `--runs` times each: the step as `schedule` runs it (*as schedule*: the graph,
then the problem, the policy and the metrics with the bounds in a child forked before the
problem is built, which builds the hardware problem, `step_problem_and_bounds`; with a
package from before it, `bench_speed_against.py`, the child builds the same problem,
`problem_and_bounds_beside`, or, before that, is forked once the problem is built:
`bounds_beside`) in a fresh interpreter, as `schedule` runs in a new process; then, in
this one, each stage on its own: building the graph, the problem within L2, the bounds
`schedule` prints (`step_bounds`), `heft` with its validation (and that validation timed
again alone, *validate*: `heft` less it is the policy alone), `critical-path` (the
default policy) with its validation, and the schedule's other metrics (`schedule_metrics`
given the bounds, after `heft`'s validation as in `schedule`: the occupancy the
validation computed is reused). The cyclic collector is paused during each part as
`schedule` pauses it, and what a run made is collected before the next. *in turn* adds
graph, problem, bounds, heft and metrics. The profiles' runs alternate, so the `heft`
ratio is taken pair by pair while the machine's speed drifts (target: `heft` on
`v002-as-built` within 1.5x of its `v002-spec` time).

Between processes this machine's speed drifts by tens of percent, more than most changes
to one pass. `--chains-against REV` compares the bounds' chain pass (`chain_bounds`, the
costly part of `step_bounds`) with the `pccx_flow/schedule/chains.py` of git revision REV,
loaded beside this one: the two run alternately in one process on the same problem, must
give the same bounds, and their ratio is taken pair by pair (only for a revision whose
chains.py runs on today's package; since the capacity pass and the nearest-user chains
moved to `capacity.py` and `nearest.py`, a revision's chains.py that imports them runs
today's on both sides). `--timeline-against REV` does the same for the timeline every
policy places on (`pccx_flow/schedule/timeline.py`): `heft` and `critical-path` alone, each
on a `Timeline` of this checkout and one of REV, alternated on one problem, the same
schedules required. To compare two code bases whole, stage by stage, process by process,
use `bench_speed_against.py REV`; for a count that does not drift, `bench_instructions.py
REV`. `--chains-against` and `--timeline-against` load REV's source beside this checkout's
modules, compiled where it built them (`pccx_flow.compiled`): with ``PCCX_FLOW_PURE_PYTHON=1``
both are source. Wall times are this machine's; no NPU time is measured.

    python benchmarks/bench_speed.py                       # position 8191, 5 runs
    python benchmarks/bench_speed.py --position 1023 --runs 7
    python benchmarks/bench_speed.py --runs 7 --chains-against HEAD~1
    python benchmarks/bench_speed.py --runs 12 --timeline-against e8120dd
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from measure import compiled_modules, last_line_of  # noqa: E402

from pccx_flow import atomic  # noqa: E402
from pccx_flow.collector import collector_paused  # noqa: E402
from pccx_flow.graph.build import build_decode_graph  # noqa: E402
from pccx_flow.hardware.profile import load_profile  # noqa: E402
from pccx_flow.schedule import chains  # noqa: E402
from pccx_flow.schedule.bounds_beside import bounds_beside  # noqa: E402
from pccx_flow.schedule.metrics import schedule_metrics, step_bounds  # noqa: E402
from pccx_flow.schedule.problem import problem_from_graph  # noqa: E402
from pccx_flow.schedule.registry import make_policy, run_on_problem  # noqa: E402
from pccx_flow.schedule.timeline import Timeline  # noqa: E402
from pccx_flow.schedule.validate import validate_schedule  # noqa: E402

try:  # not in a package from before them (`bench_speed_against.py` runs those too)
    from pccx_flow.schedule.bounds_beside import problem_and_bounds_beside
except ImportError:
    problem_and_bounds_beside = None
try:
    from pccx_flow.schedule.bounds_beside import step_problem_and_bounds
except ImportError:
    step_problem_and_bounds = None

HERE = Path(__file__).resolve().parent
PROFILES = ("v002-spec", "v002-as-built")
STAGES = ("graph", "problem", "bounds", "heft", "validate", "critical-path", "metrics",
          "as schedule")  # fmt: skip
HEADS = {"critical-path": "crit-path"}  # the table's column names where a stage's is long


def _timed(fn, *args, **kwargs):
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t


def _spread(values: list[float]) -> tuple[float, float, float]:
    """(median, min, max) of `values`."""
    return statistics.median(values), min(values), max(values)


def one_run(profile_name: str, position: int) -> dict[str, float]:
    """Seconds of each stage for one build of the step (`STAGES`), the cyclic collector
    paused as in `schedule`, and everything each part made collected before the next."""
    as_s = as_schedule_fresh(profile_name, position)
    profile = load_profile(profile_name)
    with collector_paused(collect_after=True):
        graph, g_s = _timed(build_decode_graph, "e4b", position=position, profile=profile)
        problem, p_s = _timed(problem_from_graph, graph, profile, memory=True)
        bounds, b_s = _timed(step_bounds, problem, profile)
        policy = make_policy("heft")
        schedule, h_s = _timed(run_on_problem, policy, problem, label="heft",
                               profile=profile.name)  # fmt: skip
        _, v_s = _timed(validate_schedule, schedule, problem)
        # right after a validation of the schedule, as `schedule` asks for them
        _, m_s = _timed(schedule_metrics, schedule, problem, profile, bounds=bounds)
        _, c_s = _timed(run_on_problem, make_policy("critical-path"), problem,
                        label="critical-path", profile=profile.name)  # fmt: skip
    del graph, problem, schedule
    gc.collect()
    return dict(zip(STAGES, (g_s, p_s, b_s, h_s, v_s, c_s, m_s, as_s), strict=True))


def as_schedule_fresh(profile_name: str, position: int) -> float:
    """Seconds of the step as `schedule` runs it (`_as_schedule`), in a fresh interpreter
    with this one's environment (its PYTHONPATH names the package). In a process that
    built and freed a step before, the new problem's objects land in pages that were
    there before the bounds' child was forked, and the first write to such a page copies
    it; a new process's problem gets pages of its own (`problem_and_bounds_beside`: 0.96x
    of the step in fresh processes, 1.00x in used ones, against building it first)."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--as-schedule", profile_name,
            "--position", str(position)]  # fmt: skip
    return float(last_line_of(argv, "the step as schedule runs it"))


def _as_schedule(profile, position: int) -> None:
    """The graph, then the problem, `heft` and its metrics with the bounds computed beside
    them, as `schedule` runs the step (the metrics ask for the bounds last)."""
    graph = build_decode_graph("e4b", position=position, profile=profile)
    if step_problem_and_bounds is not None:
        beside = step_problem_and_bounds(graph, profile)
    else:
        beside = problem_then_bounds(
            lambda: problem_from_graph(graph, profile, memory=True), profile, nodes=len(graph)
        )
    with beside as (problem, bounds):
        schedule = run_on_problem(make_policy("heft"), problem, label="heft",
                                  profile=profile.name)  # fmt: skip
        schedule_metrics(schedule, problem, profile, bounds=bounds)


@contextmanager
def _built_then_beside(build, profile, *, nodes: int):
    """What a package from before `problem_and_bounds_beside` ran: the problem built, then
    the bounds' child forked (`bounds_beside`)."""
    problem = build()
    with bounds_beside(problem, profile) as bounds:
        yield problem, bounds


problem_then_bounds = problem_and_bounds_beside or _built_then_beside


def measure(position: int, runs: int) -> dict:
    seconds: dict[str, dict[str, list[float]]] = {p: {s: [] for s in STAGES} for p in PROFILES}
    for _ in range(runs):
        for p in PROFILES:  # alternated: a drift of the machine reaches both alike
            for stage, s in one_run(p, position).items():
                seconds[p][stage].append(s)
    as_built, spec = seconds["v002-as-built"]["heft"], seconds["v002-spec"]["heft"]
    ratio = _spread([a / s for a, s in zip(as_built, spec, strict=True)])
    return {
        "position": position,
        "runs": runs,
        "seconds": seconds,
        "median": {
            p: {s: statistics.median(v) for s, v in by.items()} for p, by in seconds.items()
        },
        "heft_as_built_over_spec": dict(zip(("median", "min", "max"), ratio, strict=True)),
        "load_average": os.getloadavg(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "compiled": compiled_modules(),
    }


def module_of(rev: str, path_in_repo: str, name: str):
    """The module at `path_in_repo` in git revision `rev`, loaded under `name`."""
    root = HERE.parent
    source = subprocess.run(
        ["git", "show", f"{rev}:{path_in_repo}"],
        cwd=root, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.py"
        path.write_text(source)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module  # its dataclasses look their module up
        spec.loader.exec_module(module)
    return module


def chains_of(rev: str):
    """The chains module of git revision `rev`, loaded under another name."""
    return module_of(rev, "pccx_flow/schedule/chains.py", "chains_then")


def chains_against(rev: str, position: int, runs: int) -> dict:
    """Per profile: `chain_bounds` (both variants, as `step_bounds` asks) of this checkout
    and of `rev`, alternated `runs` times; the bounds must agree."""
    then = chains_of(rev)
    out = {}
    with collector_paused(collect_after=True):
        for p in PROFILES:
            profile = load_profile(p)
            graph = build_decode_graph("e4b", position=position, profile=profile)
            problem = problem_from_graph(graph, profile, memory=True)
            now_s, then_s = [], []
            for _ in range(runs):
                a, t_then = _timed(then.chain_bounds, problem, capacity=True)
                b, t_now = _timed(chains.chain_bounds, problem, capacity=True)
                if a != b:
                    raise SystemExit(f"{p}: the bounds differ from {rev}'s: {b} against {a}")
                then_s.append(t_then)
                now_s.append(t_now)
            ratio = _spread([n / t for n, t in zip(now_s, then_s, strict=True)])
            out[p] = {
                "now_median": statistics.median(now_s),
                "then_median": statistics.median(then_s),
                **dict(zip(("ratio_median", "ratio_min", "ratio_max"), ratio, strict=True)),
            }
    return {"revision": rev, "position": position, "runs": runs, "profiles": out}


def _placed_on(timeline_class, policy: str, problem):
    """A timeline of `timeline_class` with every node placed by `policy`."""
    timeline = timeline_class(problem)
    make_policy(policy).schedule(problem, timeline)
    return timeline


def timeline_against(rev: str, position: int, runs: int) -> dict:
    """Per profile and policy (`heft`, `critical-path`): the policy alone on a `Timeline`
    of this checkout and on one of `rev` (its timeline.py beside today's package), run
    alternately `runs` times on one problem, the order flipped each time; the schedules
    must agree."""
    then = module_of(rev, "pccx_flow/schedule/timeline.py", "timeline_then")
    out: dict[str, dict] = {}
    with collector_paused(collect_after=True):
        for p in PROFILES:
            profile = load_profile(p)
            graph = build_decode_graph("e4b", position=position, profile=profile)
            problem = problem_from_graph(graph, profile, memory=True)
            del graph
            for name in ("heft", "critical-path"):
                seconds: dict[str, list[float]] = {"now": [], "then": []}
                sides = [("now", Timeline), ("then", then.Timeline)]
                for i in range(runs):
                    placed = {}
                    for side, timeline_class in sides if i % 2 == 0 else sides[::-1]:
                        timeline, s = _timed(_placed_on, timeline_class, name, problem)
                        seconds[side].append(s)
                        placed[side] = (timeline.slots, timeline.memory_wait)
                        del timeline
                    if placed["now"] != placed["then"]:
                        raise SystemExit(f"{p} {name}: the schedule differs from {rev}'s")
                    del placed
                    gc.collect()
                ratio = _spread([n / t for n, t in zip(seconds["now"], seconds["then"],
                                                       strict=True)])  # fmt: skip
                out[f"{p} {name}"] = {
                    "now_median": statistics.median(seconds["now"]),
                    "then_median": statistics.median(seconds["then"]),
                    **dict(zip(("ratio_median", "ratio_min", "ratio_max"), ratio, strict=True)),
                }
            del problem
            gc.collect()
    return {"revision": rev, "position": position, "runs": runs, "profiles": out}


def format_against(r: dict, what: str = "chain_bounds", same: str = "same bounds") -> str:
    lines = [
        f"{what} at position {r['position']}, this checkout against {r['revision']}, "
        f"alternated {r['runs']} times in one process ({same}):"
    ]
    for p, x in r["profiles"].items():
        lines.append(
            f"  {p:<28} {x['now_median']:.3f} s against {x['then_median']:.3f} s: "
            f"{x['ratio_median']:.2f}x ({x['ratio_min']:.2f}-{x['ratio_max']:.2f}x)"
        )
    return "\n".join(lines)


def format_result(r: dict) -> str:
    lines = [f"E4B step at position {r['position']}: median of {r['runs']} runs (wall s)"]
    alone = STAGES[:-1]  # each stage on its own; the last is the step as schedule runs it
    head = "".join(f"{HEADS.get(s, s):>10}" for s in alone)
    lines.append(f"  {'profile':<14}{head}{'in turn':>10}{'as schedule':>13}")
    for p, by in r["median"].items():
        in_turn = by["graph"] + by["problem"] + by["bounds"] + by["heft"] + by["metrics"]
        row = "".join(f"{by[s]:10.3f}" for s in alone)
        lines.append(f"  {p:<14}{row}{in_turn:10.3f}{by['as schedule']:13.3f}")
    h = r["heft_as_built_over_spec"]
    lines.append(
        f"  heft v002-as-built / v002-spec, pair by pair: {h['median']:.2f}x "
        f"({h['min']:.2f}-{h['max']:.2f}x; target <= 1.5x)"
    )
    return "\n".join(lines)


def _write_against(out: Path, name: str, result: dict, table: str) -> None:
    """Write a comparison's `result` and print its `table`: to `name` beside the stage
    table when `out` is that table's default (``speed.json``), else to `out`."""
    path = out.with_name(name) if out.name == "speed.json" else out
    atomic.write_text(path, json.dumps(result, indent=1) + "\n")
    print(table)
    print(f"wrote {path}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--position", type=int, default=8191)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--out", type=Path, default=HERE / "results" / "speed.json")
    parser.add_argument(
        "--chains-against", metavar="REV",
        help="compare chain_bounds with git revision REV's, alternated in one process",
    )  # fmt: skip
    parser.add_argument(
        "--timeline-against", metavar="REV",
        help="time heft and critical-path on this checkout's Timeline and on REV's, "
        "alternated in one process",
    )  # fmt: skip
    parser.add_argument("--as-schedule", metavar="PROFILE", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.as_schedule:  # as_schedule_fresh's child: one step, its seconds on stdout
        profile = load_profile(args.as_schedule)
        with collector_paused():
            _, seconds = _timed(_as_schedule, profile, args.position)
        print(seconds)
        return 0
    if args.chains_against:
        against = chains_against(args.chains_against, args.position, max(1, args.runs))
        _write_against(args.out, "speed_chains.json", against, format_against(against))
        return 0
    if args.timeline_against:
        against = timeline_against(args.timeline_against, args.position, max(1, args.runs))
        table = format_against(against, "the policy alone", "same schedules")
        _write_against(args.out, "speed_timeline.json", against, table)
        return 0
    result = measure(args.position, max(1, args.runs))
    atomic.write_text(args.out, json.dumps(result, indent=1) + "\n")
    print(format_result(result))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

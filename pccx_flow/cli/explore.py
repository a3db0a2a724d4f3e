"""`pccx-flow explore`: sweep hardware and step parameters toward a target tok/s."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pccx_flow.cli.common import (
    check_distinct_outputs,
    check_output_path,
    check_scheduler_address,
    count,
    int_in,
    writing,
)
from pccx_flow.errors import InputError

DEFAULT_CURVE = "0,1023,2047,4095,8191"

EPILOG = f"""examples:
  pccx-flow explore --set weight_ports=2,4,8 --set gemv_lanes=4,8
  pccx-flow explore sweeps/to-20.toml --plot explore.svg --json explore.json
  pccx-flow explore --set spec_k=0,2,4 --set alpha=0.6,0.8 --policies heft
  pccx-flow explore --set core_mhz=300:600 --sampling lhs --points 50 --seed 1
  pccx-flow explore --params                      # every parameter, its unit and cost
  pccx-flow explore --set gemv_lanes=4,8 --replay rtl   # + replay of each lowered program
  pccx-flow explore sweep.toml --scheduler tcp://127.0.0.1:8786

A sweep is a small TOML file ([sweep] and [params]; docs/explore.md) and/or --set
key=a,b,c (values) or key=lo:hi (a range, for lhs or random sampling); --set replaces
the file's entry of the same key. Each point builds, schedules (best of --policies, within
L2) and bounds its decode step. Points run in parallel with Dask and are cached in --cache
by a hash of profile and step, so a killed sweep resumes. After the sweep, the base design
and the cheapest design reaching each of 5, 10 and 20 tok/s are run along --curve
positions (default {DEFAULT_CURVE}), naming the binding bound at each. Every tok/s is a
model estimate on the named profile; no pccx board has been timed."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "explore",
        help="sweep hardware and step parameters: what reaches 5, 10, 20 tok/s",
        description="Design sweeps of the pccx v002 decode step (grid, Latin hypercube or\n"
        "random), in parallel with Dask: Pareto front of tok/s against cost, the smallest\n"
        "changes reaching 5/10/20 tok/s, context-length curves (model estimates).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("sweep", nargs="?", type=Path, help="sweep file (.toml)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUES",
                   help="sweep KEY over a,b,c or lo:hi (repeatable)")  # fmt: skip
    p.add_argument("--params", action="store_true", help="list the parameters and exit")
    p.add_argument("--profile", metavar="NAME|FILE", help="base profile (default: v002-spec)")
    p.add_argument("--preset", help="model preset (default: e4b)")
    p.add_argument("--sampling", choices=("grid", "lhs", "random"), help="default: grid")
    p.add_argument("--points", type=int_in(1, 100_000), metavar="N",
                   help="points for lhs/random sampling")  # fmt: skip
    p.add_argument("--seed", type=count, help="sampling and random-policy seed (default: 0)")
    p.add_argument("--policies", metavar="LIST",
                   help="best of these per point (default: heft,critical-path)")  # fmt: skip
    p.add_argument("--no-memory", action="store_true",
                   help="schedule without the L2 limit (default: within L2)")  # fmt: skip
    p.add_argument("--curve", default=DEFAULT_CURVE, metavar="POSITIONS|none",
                   help="context positions of the curves (default: %(default)s)")  # fmt: skip
    p.add_argument("--replay", choices=("spec", "rtl", "decoupled"), metavar="MODEL",
                   help="also lower each plain decode step and replay its program under issue "
                   "model spec, rtl or decoupled (host-step and fence costs of a real program)")
    p.add_argument("--no-prune", action="store_true",
                   help="show the sampled designs in the table as they are, without trying "
                   "each change back at the base value")  # fmt: skip
    p.add_argument("--workers", type=int_in(0, 256), default=2, metavar="N",
                   help="local Dask worker processes (0: this process; default: 2)")  # fmt: skip
    p.add_argument("--scheduler", metavar="tcp://HOST:PORT",
                   help="use a running Dask scheduler instead of local workers")  # fmt: skip
    p.add_argument("--cache", type=Path, default=Path(".pccx-explore-cache"), metavar="DIR",
                   help="point records, one JSON file each (default: %(default)s)")  # fmt: skip
    p.add_argument("--no-cache", action="store_true", help="neither read nor write the cache")
    p.add_argument("--json", type=Path, metavar="OUT", help="write every record as JSON")
    p.add_argument("--csv", type=Path, metavar="OUT", help="write one CSV row per point")
    p.add_argument("--plot", type=Path, metavar="OUT.svg", help="Pareto and context plots")
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.set_defaults(func=run)


def _sweep_from_args(args: argparse.Namespace):
    from pccx_flow.explore.sweep import Sweep, check_sweep, merge_axes, parse_set, read_sweep

    sweep = read_sweep(args.sweep) if args.sweep is not None else Sweep(axes=[])
    sweep.axes = merge_axes(sweep.axes, parse_set(args.set))
    for key in ("profile", "preset", "sampling", "points", "seed"):
        value = getattr(args, key)
        if value is not None:
            setattr(sweep, key, value)
    if args.policies is not None:
        sweep.policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    if args.no_memory:
        sweep.memory = False
    check_sweep(sweep, "explore")
    return sweep


def _positions(text: str, max_seq: int) -> list[int]:
    if text.strip().lower() == "none":
        return []
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"--curve {text!r}: give positions like 0,1023,8191, or none") from None
    if not values or any(not 0 <= v < max_seq for v in values):
        raise InputError(f"--curve {text!r}: positions must be 0..{max_seq - 1} for this preset")
    return sorted(set(values))


def run(args: argparse.Namespace) -> int:
    from pccx_flow.explore.params import PARAMS

    if args.params:
        for p in PARAMS.values():
            where = p.field or "decode step" if p.name not in ("alpha", "draft_us") else "tok/s"
            cost = f"{p.cost_per:g} per {p.cost_step:g}" if p.cost_per else "0"
            print(f"{p.name:<13} {p.unit or '-':<15} {where:<38} cost {cost:<11} {p.doc}")
        print("(any other profile field may be swept as section.field)")
        return 0
    check_scheduler_address(args.scheduler)
    outputs = {"--json": args.json, "--csv": args.csv, "--plot": args.plot}
    check_distinct_outputs(outputs)
    from pccx_flow.explore.plots import PLOT_FORMATS

    for out, suffixes in ((args.json, None), (args.csv, None), (args.plot, PLOT_FORMATS)):
        if out is not None:
            check_output_path(out, suffixes)
    sweep = _sweep_from_args(args)
    if not sweep.axes:
        raise InputError("nothing to sweep: give a sweep file or --set KEY=a,b,c")
    from pccx_flow.explore.analysis import smallest_changes, with_cost
    from pccx_flow.explore.cache import Cache
    from pccx_flow.explore.params import base_value
    from pccx_flow.explore.run import describe, make_tasks, run_points
    from pccx_flow.explore.sweep import sample
    from pccx_flow.hardware.profile import load_profile
    from pccx_flow.model.config import get_config
    from pccx_flow.schedule.registry import make_policy

    base = load_profile(sweep.profile)
    config = get_config(sweep.preset)
    curve = _positions(args.curve, config.max_seq)
    for name in sweep.policies:
        make_policy(name, seed=sweep.seed)  # an unknown policy: one line now, not per point
    points = sample(sweep)
    names = [a.name for a in sweep.axes]
    # The base design: the profile as it is, and the sweep's fixed values (a parameter the
    # sweep holds at one value is part of the setting, not a change).
    base_point = {n: base_value(n, base) for n in names}
    if "position" in base_point:
        base_point["position"] = min(base_point["position"], config.max_seq - 1)
    for a in sweep.axes:
        if len(a.values) == 1:
            base_point[a.name] = a.values[0]
    cache = Cache(None if args.no_cache else args.cache)
    opts = {"scheduler": args.scheduler, "workers": args.workers,
            "progress": not args.no_progress and sys.stderr.isatty()}  # fmt: skip
    tasks = make_tasks([base_point, *points], sweep.profile, sweep.preset, sweep.policies,
                       sweep.memory, args.replay, sweep.seed)  # fmt: skip
    fresh: list[dict] = []
    t0 = time.perf_counter()
    records = with_cost(run_points(tasks, cache, on_record=fresh.append, **opts), base)
    wall = time.perf_counter() - t0
    base_record, records = records[0], records[1:]
    table = smallest_changes([base_record, *records], base_point=base_point)
    if not args.no_prune:
        from pccx_flow.explore.analysis import changes
        from pccx_flow.explore.prune import prune

        def evaluate_many(pts: list[dict]) -> list[dict]:
            more = make_tasks(pts, sweep.profile, sweep.preset, sweep.policies, sweep.memory,
                              args.replay, sweep.seed)  # fmt: skip
            return with_cost(run_points(more, cache, **opts), base)

        rows = [row for row in table
                if row["record"] is not None and changes(row["record"]["point"], base_point)]
        for row, rec in zip(rows, prune([(row["target"], row["record"]) for row in rows],
                                        base_point, base, evaluate_many), strict=True):
            row["sampled"], row["record"], row["best_tok_s"] = row["record"], rec, rec["tok_s"]
        # the pruned designs are points too: on the front, in the plot and the files
        known = {r["key"] for r in records}
        records += [r for r in (row["record"] for row in rows) if r["key"] not in known]
    fixed = {a.name: a.values[0] for a in sweep.axes if len(a.values) == 1}
    curves: dict[str, list[dict]] = {}
    if curve:
        designs = {"base": base_point}
        for row in table:
            if row["record"] is not None:
                designs.setdefault(f"{row['target']:g} tok/s", row["record"]["point"])
        seen: dict[str, str] = {}
        curve_tasks, labels = [], []
        for label, point in designs.items():
            key = describe({k: v for k, v in point.items() if k != "position"})
            if key in seen:
                continue
            seen[key] = label
            for pos in curve:
                curve_tasks.append({**point, "position": pos})
                labels.append(label)
        recs = run_points(make_tasks(curve_tasks, sweep.profile, sweep.preset, sweep.policies,
                                     sweep.memory, args.replay, sweep.seed),
                          cache, **opts)  # fmt: skip
        for label, rec in zip(labels, recs, strict=True):
            curves.setdefault(label, []).append(rec)
    result = {
        "profile": base.name, "preset": sweep.preset, "sampling": sweep.sampling,
        "seed": sweep.seed, "policies": sweep.policies, "memory": sweep.memory,
        "axes": [a.__dict__ for a in sweep.axes], "records": records, "sampled": len(points),
        "base_point": base_point, "base_record": base_record, "fixed": fixed,
        "smallest_changes": table, "curves": curves,
        "timing": {"points": len(tasks), "evaluated": len(fresh), "wall_seconds": wall},
    }  # fmt: skip
    from pccx_flow.explore.report import format_summary, to_csv, to_json

    print(format_summary(result))
    if args.json is not None:
        with writing(args.json):
            to_json(result, args.json)
        print(f"wrote {args.json}", file=sys.stderr)
    if args.csv is not None:
        with writing(args.csv):
            to_csv(result, args.csv)
        print(f"wrote {args.csv}", file=sys.stderr)
    if args.plot is not None:
        from pccx_flow.explore.plots import write_plots

        title = (f"pccx-flow explore, {sweep.preset} on {base.name} + changes: "
                 "model estimates, not measurements")  # fmt: skip
        with writing(args.plot):
            write_plots([base_record, *records], curves, args.plot, title=title)
        print(f"wrote {args.plot}", file=sys.stderr)
    if all("error" in r for r in [base_record, *records]):
        print("pccx-flow: error: every point of the sweep failed (see each point's error "
              "above)", file=sys.stderr)  # fmt: skip
        return 1
    return 0

"""`pccx-flow compare`: every policy over decode steps, random DAG families and user DAGs."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pccx_flow import atomic
from pccx_flow.cli.common import (
    add_read_ahead_arg,
    check_output_path,
    parse_layers,
    read_ahead_from_args,
    writing,
)
from pccx_flow.errors import InputError

EPILOG = """examples:
  pccx-flow compare                                   # the default sweep (a few minutes)
  pccx-flow compare --dags random:50 --policies heft,cpop,dls --workers 0
  pccx-flow compare --dags random:60 --policies heft,lookahead+improve:50  # + improvement
  pccx-flow compare --dags decode --profiles v002-spec --positions 1023
  pccx-flow compare --dags file:my.json,file:other.graphml --json out.json
  pccx-flow compare --json out.json --plot out.svg    # journal in out.jsonl: re-run resumes
  pccx-flow compare --scheduler tcp://127.0.0.1:8786  # on a running Dask cluster

Per instance: each policy's makespan, its ratio to the best policy, to the largest lower
bound and (instances up to --exact-max-nodes nodes, with `pip install ortools`) to the
optimum CP-SAT proves; and the wall time to schedule and validate. Decode-step makespans are
model estimates on the named profile; no pccx board has been timed. Random DAGs
(layered, fork_join, series_parallel, in_tree, out_tree) are seeded: the same --seed gives
the same instances everywhere. DAG file format: pccx_flow/schedule/dagfile.py."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "compare",
        help="compare scheduling policies over decode steps and random or user DAGs",
        description="Schedule many instances with many policies (in parallel with Dask) and\n"
        "summarise: ratio to the best policy, to the lower bounds, to the optimum where\n"
        "it is proven, wins and scheduling time; tables, JSON and plots.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--policies",
        default="all",
        metavar="LIST",
        help="comma-separated policy names, or all (default: all built-ins)",
    )
    p.add_argument(
        "--dags",
        default="decode,random:200",
        metavar="LIST",
        help="decode, random:COUNT, file:PATH, comma-separated (default: %(default)s)",
    )
    p.add_argument(
        "--profiles",
        default="v002-spec,v002-as-built",
        metavar="LIST",
        help="hardware profiles for decode steps (default: %(default)s)",
    )
    p.add_argument(
        "--positions",
        default="0,1023,4095,8191",
        metavar="LIST",
        help="decode positions (default: %(default)s)",
    )
    p.add_argument("--preset", default="e4b", help="decode model preset (default: e4b)")
    p.add_argument("--semantics", default="pccx", help="pccx or gemma3n (default: pccx)")
    p.add_argument("--layers", metavar="A:B", help="decode layers A..B-1 only (default: all)")
    p.add_argument(
        "--tile-rows",
        type=int,
        default=512,
        metavar="N",
        help="most GEMV output rows and keys per tile, in whole 16-byte L2 words (default: 512)",
    )
    p.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the random instances and the random policy (default: 0)",
    )
    p.add_argument("--no-pools", action="store_true", help="random DAGs without shared pools")
    p.add_argument(
        "--memory",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="decode steps within the profile's L2 (and SFU reach), as `schedule` and `emit` "
        "schedule them (default); --no-memory compares them without that limit",
    )
    add_read_ahead_arg(p)
    p.add_argument(
        "--exact-max-nodes",
        type=int,
        default=40,
        metavar="N",
        help="solve instances up to N nodes exactly with CP-SAT (0: never; default: 40)",
    )
    p.add_argument(
        "--exact-seconds",
        type=float,
        default=5.0,
        metavar="S",
        help="CP-SAT time limit per instance (default: 5)",
    )
    p.add_argument(
        "--workers",
        type=int,
        default=2,
        metavar="N",
        help="local Dask worker processes (0: no Dask, this process; default: 2)",
    )
    p.add_argument(
        "--scheduler",
        metavar="tcp://HOST:PORT",
        help="use a running Dask scheduler instead of local workers",
    )
    p.add_argument("--json", type=Path, metavar="OUT", help="write records and summary as JSON")
    p.add_argument(
        "--results",
        type=Path,
        metavar="FILE.jsonl",
        help="journal, one line per instance; an existing one is resumed "
        "(default: OUT.jsonl beside --json)",
    )
    p.add_argument(
        "--plot",
        type=Path,
        metavar="OUT.svg",
        help="performance profile and time-vs-size plots (svg, png or pdf)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.set_defaults(func=run)


def _ints(text: str, flag: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(f"{flag} {text!r}: give comma-separated integers, e.g. 0,1023") from None


def _names(text: str) -> list[str]:
    return [x.strip() for x in text.split(",") if x.strip()]


def build_instances(args: argparse.Namespace) -> list[dict]:
    """Every instance the options ask for, checked before anything slow starts."""
    from pccx_flow.compare.instances import decode_instance, parse_dags

    out = []
    read_ahead = (read_ahead_from_args(args) or {}).get("rule")  # None: the default
    for kind, items in parse_dags(args.dags, seed=args.seed, pools=not args.no_pools):
        if kind != "decode":
            out += items
            continue
        from pccx_flow.hardware.profile import load_profile
        from pccx_flow.model.config import check_position, check_semantics, get_config

        config = get_config(args.preset)
        check_semantics(args.semantics)
        layers = parse_layers(args.layers, config.n_layers)
        if args.tile_rows < 1:
            raise InputError(f"--tile-rows {args.tile_rows}: give a positive number of rows")
        positions = _ints(args.positions, "--positions")
        for pos in positions:
            check_position(config, pos)
        profiles = _names(args.profiles)
        if not profiles or not positions:
            raise InputError("decode steps need at least one --profiles and one --positions")
        for prof in profiles:
            load_profile(prof)  # fail fast on a bad name or file
            for pos in positions:
                out.append(decode_instance(
                    prof, pos, preset=args.preset, semantics=args.semantics, layers=layers,
                    tile_rows=args.tile_rows, memory=args.memory, read_ahead=read_ahead,
                ))  # fmt: skip
    for item in out:
        if item["kind"] == "dag":
            from pccx_flow.schedule.dagfile import load_dag

            load_dag(item["path"])  # a bad file fails here, with one line
    return out


def run(args: argparse.Namespace) -> int:
    from pccx_flow.compare.plots import PLOT_FORMATS
    from pccx_flow.schedule.registry import BUILTIN_POLICIES, make_policy

    policies = list(BUILTIN_POLICIES) if args.policies == "all" else _names(args.policies)
    if not policies:
        raise InputError("--policies is empty; give names or all")
    for name in policies:
        make_policy(name, seed=args.seed)  # unknown names fail here
    if args.workers < 0:
        raise InputError("--workers must be 0 or more")
    if args.exact_seconds <= 0:
        raise InputError("--exact-seconds must be positive")
    if args.json is not None:
        check_output_path(args.json)
    if args.plot is not None:
        check_output_path(args.plot, PLOT_FORMATS)
    journal = args.results
    if journal is None and args.json is not None:
        journal = args.json.with_suffix(".jsonl")
    if journal is not None:
        check_output_path(journal)
    instances = build_instances(args)

    from pccx_flow.compare.exact import ortools_available
    from pccx_flow.compare.summary import format_tables, instance_rows, summarize
    from pccx_flow.compare.sweep import run_sweep

    if args.exact_max_nodes > 0 and not ortools_available():
        print("pccx-flow: note: ortools is not installed, so no optimum is computed "
              "(pip install ortools)", file=sys.stderr)  # fmt: skip
    t0 = time.perf_counter()
    show = sys.stderr.isatty() and not args.no_progress
    records = run_sweep(
        instances, policies, journal=journal, scheduler=args.scheduler, workers=args.workers,
        progress=show,
        task_options={"exact_max_nodes": args.exact_max_nodes,
                      "exact_seconds": args.exact_seconds, "seed": args.seed},
    )  # fmt: skip
    wall = time.perf_counter() - t0
    summary = summarize(records, policies)
    print(format_tables(summary), end="")
    print(f"({len(records)} instances x {len(policies)} policies in {wall:.1f} s of wall time)")

    profiles = sorted({r["profile"] for r in records if r.get("profile")})
    if args.json is not None:
        import json

        payload = {
            "note": "decode-step makespans are model estimates on the named profiles "
            f"({', '.join(profiles) or 'none'}); no pccx board has been timed; seconds are "
            "wall time on this machine to schedule and validate",
            "policies": policies,
            "summary": summary,
            "instances": records,
            "wall_seconds": wall,
        }
        with writing(args.json):
            atomic.write_text(args.json, json.dumps(payload, indent=1, default=str) + "\n")
        print(f"wrote {args.json}" + (f" (journal {journal})" if journal else ""),
              file=sys.stderr)  # fmt: skip
    if args.plot is not None:
        from pccx_flow.compare.plots import write_plots

        kinds = sorted({r["kind"] for r in records})
        title = f"{len(records)} instances ({', '.join(kinds)})"
        if profiles:
            title += f"; decode makespans are model estimates on {', '.join(profiles)}"
        with writing(args.plot):
            write_plots(instance_rows(records), policies, args.plot, title=title)
        print(f"wrote {args.plot}", file=sys.stderr)
    return 0

"""`pccx-flow schedule`: schedule one decode step on a hardware profile and summarise it."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pccx_flow.cli.common import (
    DEFAULT_POSITION,
    add_policy_timeout_arg,
    add_read_ahead_arg,
    add_step_args,
    check_distinct_outputs,
    check_output_path,
    read_ahead_from_args,
    seed,
    step_from_args,
    writing,
)

EPILOG = f"""examples:
  pccx-flow schedule                                  # E4B, v002-spec, critical-path
  pccx-flow schedule --policy heft --profile v002-as-built
  pccx-flow schedule --policy critical-path+improve   # + forward-backward improvement
  pccx-flow schedule --list                           # every policy, one line each
  pccx-flow schedule --preset tiny --policy random --seed 3
  pccx-flow schedule --layers 0:5 --json step.json --trace step.trace.json
  pccx-flow schedule --gantt step.svg                 # Gantt chart (svg, png or html)
  pccx-flow schedule --pccx step.pccx                 # pccx-lab trace of the schedule
  pccx-flow schedule --no-memory                      # without the L2 limit, to compare
  pccx-flow schedule --read-ahead fixed               # KV reads by the fixed rules
  pccx-flow schedule --preset tiny --issue all        # + timing replay of its program
  pccx-flow schedule --policy mypkg.sched:MyPolicy    # a policy class on sys.path
  pccx-flow schedule --dag my.json --policy heft      # your own DAG (JSON or GraphML)

The default position is {DEFAULT_POSITION} (a 1,024-token context), or the preset's last
KV position when its cache is shorter (tiny: 63). Every time and tok/s printed is a model
estimate on the named profile; no pccx board has been timed. --trace writes Chrome trace
JSON (open it in https://ui.perfetto.dev or chrome://tracing), one track per lane.
--dag takes a DAG with its own lanes, costs, comm and pools (format: pccx_flow/schedule/
dagfile.py); its costs are printed in the file's own units and --profile is not used."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "schedule",
        help="schedule one decode step onto the NPU lanes and summarise it",
        description="Build the decode-step DAG, schedule it with a list-scheduling policy,\n"
        "validate the schedule and print makespan, bounds, utilisation, LAuReL overlap and\n"
        "PLE slack (all model estimates).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "--policy",
        default="critical-path",
        metavar="NAME",
        help="policy name, plugin entry point or module:Class; NAME+improve runs NAME, "
        "then forward-backward improvement (NAME+improve:R: R randomised rounds, seeded "
        "by --seed) (default: %(default)s)",
    )
    p.add_argument("--list", action="store_true", help="list every policy and exit")
    p.add_argument(
        "--profile",
        default="v002-spec",
        metavar="NAME|FILE",
        help="hardware profile name or TOML file (default: %(default)s)",
    )
    add_step_args(p)
    p.add_argument(
        "--dag", type=Path, metavar="FILE", help="schedule this DAG file (.json or .graphml)"
    )
    p.add_argument("--seed", type=seed, default=0, help="seed for the random policy")
    add_policy_timeout_arg(p)
    p.add_argument("--json", type=Path, metavar="OUT", help="write schedule + metrics as JSON")
    p.add_argument("--trace", type=Path, metavar="OUT.json", help="write Chrome trace JSON")
    p.add_argument("--gantt", type=Path, metavar="OUT.svg|png|html", help="draw a Gantt chart")
    p.add_argument(
        "--pccx", type=Path, metavar="OUT.pccx", help="write a pccx-lab .pccx trace (flatbuf)"
    )
    p.add_argument(
        "--memory",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep resident tensors within the profile's L2 (and SFU reach), as a program "
        "must (default); --no-memory schedules without that limit, to see what it costs",
    )
    add_read_ahead_arg(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    from pccx_flow.cli.replay import add_issue_arg

    add_issue_arg(p, default=None)  # lower the step and replay it (see `pccx-flow replay`)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pccx_flow.schedule.registry import (
        DEFAULT_POLICY,
        IMPROVE_SUFFIX,
        list_policies,
        prepare_policy,
    )
    from pccx_flow.schedule.report import format_policy_list

    if args.list:
        print(format_policy_list(list_policies(), DEFAULT_POLICY))
        print(f"(any of them as NAME{IMPROVE_SUFFIX}: its schedule, then forward-backward "
              "improvement)")  # fmt: skip
        return 0

    from pccx_flow.collector import collector_paused
    from pccx_flow.hardware.profile import load_profile
    from pccx_flow.render.gantt import GANTT_FORMATS

    if args.dag is not None:
        return run_dag(args)
    step = step_from_args(args)
    config = step.config
    args.position = step.position
    outputs = {
        "--json": args.json,
        "--trace": args.trace,
        "--gantt": args.gantt,
        "--pccx": args.pccx,
    }
    check_distinct_outputs(outputs)
    for out, suffixes in (
        (args.json, None),
        (args.trace, None),
        (args.gantt, GANTT_FORMATS),
        (args.pccx, None),
    ):
        if out is not None:
            check_output_path(out, suffixes)
    profile = load_profile(args.profile)
    from pccx_flow.board.isa.target import target_of
    from pccx_flow.board.program.ddr import check_ddr_capacity, step_kv_dtype

    check_ddr_capacity(config, profile, step_kv_dtype(step.semantics, target_of(profile, None)))
    # fail fast, before the graph (a plugin is loaded in a child process)
    policy = prepare_policy(args.policy, seed=args.seed, timeout=args.policy_timeout)
    # The step's objects live until the command ends, so the collector stays off until
    # _step_command has returned and freed them: back on among ~10^6 live objects, its
    # first pass scanned them all (~0.3 s at position 8191).
    with collector_paused():
        return _step_command(args, step, profile, policy)


def _step_command(args: argparse.Namespace, step, profile, policy) -> int:
    """`schedule` of a decode step once its arguments are checked: schedule, print, write."""
    from pccx_flow.schedule.report import format_summary

    config, layers = step.config, step.layers
    graph, problem, schedule, metrics = _schedule_step(args, step, profile, policy)
    context = {
        "preset": args.preset,
        "semantics": args.semantics,
        "position": args.position,
        "layers": f"{layers[0]}:{layers[1]}" if layers else f"0:{config.n_layers}",
        "partial": layers is not None and layers != (0, config.n_layers),
    }
    if context["partial"]:  # a few layers are not a token: no token rate anywhere
        metrics["tokens_per_second"] = metrics["largest_bound_tokens_per_second"] = None
    print(format_summary(metrics, context))
    print(f"(scheduled in {metrics['wall_seconds']['schedule']:.2f} s of wall time on this "
          "machine)")  # fmt: skip
    if args.issue is not None:
        from pccx_flow.cli.replay import print_step_replay

        whole = not context["partial"]
        print_step_replay(graph, schedule, profile, config, args.issue, args.memory, whole)

    if args.json is not None:
        with writing(args.json):
            schedule.to_json(args.json, metrics=metrics, context=context)
        print(f"wrote {args.json}", file=sys.stderr)
    if args.trace is not None:
        from pccx_flow.schedule.trace import write_chrome_trace

        with writing(args.trace):
            write_chrome_trace(schedule, args.trace, graph, profile.core_hz,
                               counters=_trace_counters(schedule, problem, profile),
                               critical=metrics["critical_path"]["nodes"])  # fmt: skip
        print(f"wrote {args.trace} (Chrome trace, open in Perfetto)", file=sys.stderr)
    if args.pccx is not None:
        from pccx_flow.traces.pccx_file import write_pccx
        from pccx_flow.traces.timeline import timeline_from_schedule

        with writing(args.pccx):
            write_pccx(timeline_from_schedule(schedule, graph, profile.core_hz), args.pccx)
        print(f"wrote {args.pccx} (pccx-lab trace, model estimate)", file=sys.stderr)
    if args.gantt is not None:
        from pccx_flow.render.gantt import OccupancyRow, write_gantt

        with writing(args.gantt):
            rows = []
            if problem.capacities:
                from pccx_flow.schedule.memory import l2_occupancy

                kib = [(t, b / 1024) for t, b in l2_occupancy(schedule, problem)]
                rows.append(OccupancyRow("L2", kib, problem.capacities["l2"] / 1024, "KiB"))
            write_gantt(
                schedule, graph, args.gantt, metrics=metrics, profile=profile, occupancy=rows
            )
        print(f"wrote {args.gantt}", file=sys.stderr)
    return 0


def _trace_counters(schedule, problem, profile) -> dict:
    """The Perfetto counter tracks: busy instances of each pool (the weight ports), and the
    bytes L2 holds when the schedule kept to it."""
    from pccx_flow.schedule.metrics import pool_busy

    out = {f"{pool} busy": series for pool, series in pool_busy(schedule, profile.pools).items()}
    if problem.capacities:
        from pccx_flow.schedule.memory import l2_occupancy

        out["L2 bytes"] = l2_occupancy(schedule, problem)
    return out


def _schedule_step(args: argparse.Namespace, step, profile, policy) -> tuple:
    """Build, schedule and measure the step: ``(graph, problem, schedule, metrics)``."""
    from tqdm import tqdm  # here, not at the top: every command builds this parser

    from pccx_flow.schedule.bounds_beside import step_problem_and_bounds
    from pccx_flow.schedule.metrics import schedule_metrics
    from pccx_flow.schedule.registry import run_on_problem

    t0 = time.perf_counter()
    graph = step.build(profile)
    read_ahead = read_ahead_from_args(args)

    show = sys.stderr.isatty() and not args.no_progress
    # the bounds in a second process, which builds the hardware problem (the same bounds,
    # less to build) while this one builds the problem and the policy runs (forked before
    # the bar's thread)
    with step_problem_and_bounds(
        graph, profile, memory=args.memory, read_ahead=read_ahead
    ) as (problem, bounds):
        t1 = time.perf_counter()
        with tqdm(
            total=len(problem), desc=args.policy, unit="node", file=sys.stderr,
            disable=not show, leave=False,
        ) as bar:  # fmt: skip
            schedule = run_on_problem(
                policy, problem, label=args.policy, profile=profile.name,
                on_place=(lambda _slot: bar.update()) if show else None,
            )  # fmt: skip
        t2 = time.perf_counter()
        # the schedule's own metrics first: the bounds arrive meanwhile
        metrics = schedule_metrics(schedule, problem, profile, bounds=bounds)
    metrics["wall_seconds"] = {"build": t1 - t0, "schedule": t2 - t1}
    return graph, problem, schedule, metrics


def run_dag(args: argparse.Namespace) -> int:
    """`schedule --dag FILE`: a user's DAG with its own lanes; no profile, no decode context."""
    from pccx_flow.schedule.dagfile import load_dag
    from pccx_flow.schedule.metrics import schedule_metrics
    from pccx_flow.schedule.registry import make_policy, run_on_problem
    from pccx_flow.schedule.report import format_summary

    policy = make_policy(args.policy, seed=args.seed)
    for out, what in ((args.trace, "--trace"), (args.gantt, "--gantt")):
        if out is not None:
            from pccx_flow.errors import InputError

            raise InputError(f"{what} draws decode steps only; drop it when using --dag")
    if args.json is not None:
        check_output_path(args.json)
    problem = load_dag(args.dag)
    t0 = time.perf_counter()
    schedule = run_on_problem(policy, problem, label=args.policy, profile=problem.name)
    t1 = time.perf_counter()
    metrics = schedule_metrics(schedule, problem)
    metrics["wall_seconds"] = {"schedule": t1 - t0}
    context = {"dag": str(args.dag)}
    print(format_summary(metrics, context))
    print(f"(costs in the file's own units; scheduled in {t1 - t0:.3f} s of wall time)")
    if args.json is not None:
        with writing(args.json):
            schedule.to_json(args.json, metrics=metrics, context=context)
        print(f"wrote {args.json}", file=sys.stderr)
    return 0

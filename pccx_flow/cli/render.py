"""`pccx-flow render`: a Graphviz picture of one decode step's DAG."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pccx_flow.cli.common import (
    add_policy_timeout_arg,
    add_step_args,
    check_output_path,
    count,
    parse_layers,
    positive,
    seconds,
    step_from_args,
    writing,
)
from pccx_flow.errors import InputError, RenderError

# Graphviz lays out 440 nodes in under a second and 1,300 in about 15 s on this kind of
# machine; the whole E4B step with tiles folded (4,400 nodes) did not finish in 250 s.
# Refusing early beats a silent wait of minutes.
MAX_LAYOUT_NODES = 1500

EPILOG = """examples:
  pccx-flow render --preset tiny --layer 3 -o tiny3.svg          # one tiny layer, every node
  pccx-flow render --layer 7 -o layer7.svg                       # one E4B layer, tiles folded
  pccx-flow render --collapse blocks -o step-blocks.svg          # whole E4B step, one node/block
  pccx-flow render --layer 7 --profile v002-as-built -o l7.png   # costs of another profile
  pccx-flow render --layers 0:2 --policy critical-path -o s.svg  # lane @ start cycle labels
  pccx-flow render --layers 0:5 -o step.dot                      # DOT source, no Graphviz needed

--collapse picks how much is folded: none (every instruction), tiles (GEMV tiles of one
matrix become one node), macros (tiles, and each RMSNorm, softmax, RoPE sin/cos and sparse
gate becomes one node), blocks (one node per block of a layer), layers (one node per layer).
The default picks the finest level that stays readable and the output says which. Nodes
show their output shape and, costed on --profile (default v002-spec), the bytes they move
and their cycles. SVG, PNG and PDF need Graphviz's `dot`; .dot writes the source only. The
critical path is drawn bold: with --policy the schedule's, otherwise the min-cost critical
path on the profile. Cycles are model estimates."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "render",
        help="draw the decode-step DAG with Graphviz (svg, png, pdf or dot)",
        description="Build the decode-step DAG and draw it: one cluster per layer and block, "
        "nodes coloured by lane class and shaped by op, the critical path bold.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "-o",
        "--output",
        type=Path,
        required=True,
        metavar="OUT.svg|png|pdf|dot",
        help="picture to write; the suffix picks the format",
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--layers", default=None, metavar="A:B", help="only decoder layers A..B-1 (default: all)"
    )
    which.add_argument("--layer", type=count, default=None, metavar="N", help="only layer N")
    p.add_argument(
        "--collapse",
        default="auto",
        choices=("auto", "none", "tiles", "macros", "blocks", "layers"),
        help="how much to fold (default: auto, the finest readable level)",
    )
    p.add_argument(
        "--policy",
        default=None,
        metavar="NAME",
        help="schedule with this policy and label nodes with lane @ start cycle",
    )
    p.add_argument(
        "--profile",
        default=None,
        metavar="NAME|FILE",
        help="hardware profile for bytes, cycles and the critical path (default: v002-spec)",
    )
    add_step_args(p, layers=False)
    p.add_argument(
        "--timeout",
        type=seconds,
        default=120.0,
        metavar="S",
        help="stop Graphviz after S seconds (default: %(default)s)",
    )
    p.add_argument(
        "--max-nodes",
        type=positive,
        default=MAX_LAYOUT_NODES,
        metavar="N",
        help="refuse to lay out more nodes than this (default: %(default)s; .dot is never refused)",
    )
    add_policy_timeout_arg(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.set_defaults(func=run)


def layer_range(layers: str | None, layer: int | None, n_layers: int) -> tuple[int, int] | None:
    """``--layers A:B`` or ``--layer N`` as a half-open (first, stop), or None for all."""
    if layer is not None:
        if not 0 <= layer < n_layers:
            raise InputError(
                f"--layer {layer}: the preset has layers 0..{n_layers - 1}; pick one of those"
            )
        return layer, layer + 1
    return parse_layers(layers, n_layers)


def _check_output(out: Path) -> None:
    from pccx_flow.render.dag import OUTPUT_FORMATS

    fmt = out.suffix.lower().lstrip(".")
    if fmt not in OUTPUT_FORMATS:
        raise RenderError(
            f"cannot tell the picture format from {out.name!r}: end the output name with "
            + ", ".join(f".{f}" for f in OUTPUT_FORMATS)
        )
    check_output_path(out)
    if fmt != "dot":
        from pccx_flow.render.dot import find_layout_program

        find_layout_program("dot")  # fail before the (slow) graph build


def run(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from pccx_flow.render.dag import build_dag_picture, layer_view, write_dag

    step = step_from_args(args)
    config = step.config
    args.position = step.position
    span = layer_range(args.layers, args.layer, config.n_layers)
    _check_output(args.output)
    from pccx_flow.hardware.profile import load_profile

    profile = load_profile(args.profile or "v002-spec")
    policy = None
    if args.policy is not None:
        from pccx_flow.schedule.registry import prepare_policy

        # fail fast, before the graph (a plugin is loaded in a child process)
        policy = prepare_policy(args.policy, timeout=args.policy_timeout)

    stages = ["build graph"] + (["schedule"] if policy else []) + ["draw"]
    show = not args.no_progress and sys.stderr.isatty()
    bar = tqdm(total=len(stages), desc="render", unit="stage", file=sys.stderr, disable=not show)

    bar.set_postfix_str(stages[0])
    graph = step.build(profile, layers=span)
    bar.update()
    schedule = None
    if policy is not None:
        from pccx_flow.schedule.metrics import schedule_critical_path
        from pccx_flow.schedule.problem import problem_from_graph
        from pccx_flow.schedule.registry import run_on_problem

        bar.set_postfix_str("schedule")
        problem = problem_from_graph(graph, profile)
        schedule = run_on_problem(policy, problem, label=args.policy, profile=profile.name)
        critical = schedule_critical_path(schedule, problem)["nodes"]
        note = (
            f"bold: critical path of the {args.policy} schedule, makespan "
            f"{schedule.makespan:,} cycles on {profile.name} (model estimate)"
        )
        bar.update()
    else:
        from pccx_flow.bounds import lower_bounds

        bounds = lower_bounds(graph, profile)
        critical = bounds.critical_path
        note = (
            f"bold: min-cost critical path, {bounds.critical_path_cycles:,} cycles on "
            f"{profile.name} (model estimate)"
        )

    bar.set_postfix_str("draw")
    shown = layer_view(graph, span) if span else graph
    picture = build_dag_picture(
        shown,
        level=args.collapse,
        critical_path=critical,
        critical_note=note,
        schedule=schedule,
        title=_title(config.name, args, span),
    )
    if picture.nodes > args.max_nodes and args.output.suffix.lower() != ".dot":
        raise RenderError(
            f"{picture.nodes} nodes at collapse level {picture.level} is more than Graphviz "
            f"lays out in reasonable time (--max-nodes {args.max_nodes}): collapse more "
            "(--collapse blocks or layers), pick fewer --layers, or raise --max-nodes"
        )
    with writing(args.output):
        write_dag(picture, args.output, timeout=args.timeout)
    bar.update()
    bar.close()

    how = "picked automatically" if picture.level_picked else "as asked"
    print(
        f"wrote {args.output}: {picture.nodes} nodes, {picture.edges} edges, "
        f"collapse level {picture.level} ({how})",
        file=sys.stderr,
    )
    if picture.omitted:
        print(
            f"left out {len(picture.omitted)} fan-out node(s): {', '.join(picture.omitted[:5])}",
            file=sys.stderr,
        )
    return 0


def _title(preset: str, args: argparse.Namespace, span: tuple[int, int] | None) -> str:
    if span is None:
        where = "whole step"
    elif span[1] - span[0] == 1:
        where = f"layer {span[0]}"
    else:
        where = f"layers {span[0]}..{span[1] - 1}"
    return f"{preset} decode step ({where}), semantics {args.semantics}, position {args.position}"

"""`pccx-flow check`: build (or load) a decode-step DAG, check its invariants, show its bounds."""

from __future__ import annotations

import argparse
from pathlib import Path

from pccx_flow.cli.common import DEFAULT_POSITION, STEP_DEFAULTS, add_step_args, step_from_args
from pccx_flow.cli.graph import phase_bar
from pccx_flow.errors import InputError

EPILOG = f"""examples:
  pccx-flow check                              # E4B, pccx semantics, position {DEFAULT_POSITION}
  pccx-flow check --preset tiny --position 3
  pccx-flow check --semantics gemma3n --profile v002-as-built
  pccx-flow check --layers 20:25                    # a cut graph: layers 20..24 only
  pccx-flow check --graph step.json                 # a graph exported earlier

Prints "ok", each invariant it verified with its evidence (e.g. "LAuReL ∥ attention: no path
between them in any of 35 layers"), node counts per op kind and edge counts by the op that
writes them, then the
physical lower bounds of the step on the profile (default v002-spec). Every time and tok/s
there is a model estimate on that profile; none has been measured on a board. Exits 2 with
one line naming the broken invariant otherwise."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "check",
        help="check the decode-step DAG's invariants and print its lower bounds",
        description="Build the decode-step DAG (or load one), check every invariant "
        "(acyclic, LAuReL parallel to attention, PLE only into shadow rows, KV sharing, "
        "sparse layers, RoPE θ cycle, lanes that can run each op) and print the bounds.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_step_args(p)
    p.add_argument(
        "--profile",
        default="v002-spec",
        metavar="NAME|FILE",
        help="hardware profile for the lower bounds (default: v002-spec)",
    )
    p.add_argument(
        "--graph",
        type=Path,
        default=None,
        metavar="FILE",
        help="check a graph file (.json or .graphml) instead of building one",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    p.set_defaults(func=run)


def count_table(graph) -> str:
    """Nodes per op kind and edges by the op of the node that writes them."""
    from pccx_flow.graph.nodes import OPS
    from pccx_flow.graph.select import count_by, edge_count_by_source

    nodes = count_by(graph, "op")
    edges = edge_count_by_source(graph, "op")
    lines = [f"{'op':<8}{'nodes':>8}{'edges out':>11}"]
    for op in OPS:
        if nodes.get(op):
            lines.append(f"{op:<8}{nodes[op]:>8}{edges.get(op, 0):>11}")
    lines.append(f"{'total':<8}{graph.number_of_nodes():>8}{graph.number_of_edges():>11}")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    from pccx_flow.collector import collector_paused
    from pccx_flow.graph.check import check_graph
    from pccx_flow.hardware.profile import load_profile
    from pccx_flow.schedule.metrics import step_bounds
    from pccx_flow.schedule.problem import problem_from_graph

    profile = load_profile(args.profile)
    # the step's objects live until the command ends (`pccx_flow.collector`)
    with collector_paused(), phase_bar(3, args.no_progress) as bar:
        if args.graph is not None:
            from pccx_flow.graph.export import read_graph

            given = [
                f"--{name.replace('_', '-')}"
                for name, default in STEP_DEFAULTS.items()
                if getattr(args, name) != default
            ]
            if given:
                raise InputError(
                    f"--graph reads a finished graph, so {', '.join(given)} would be ignored; "
                    "drop them or drop --graph"
                )

            bar.set_description(f"reading {args.graph}")
            graph = read_graph(args.graph)
            what = str(args.graph)
        else:
            bar.set_description("building the graph")
            graph = step_from_args(args).build()
            what = "built graph"
        bar.update()
        bar.set_description("checking invariants")
        proofs = check_graph(graph)
        bar.update()
        bar.set_description("computing lower bounds")
        # on the problem `schedule` computes its bounds on (the hardware problem within L2,
        # `bounds_beside.step_problem_and_bounds`), so both name the same binding bound
        bounds = step_bounds(
            problem_from_graph(graph, profile, memory=True, hardware=True), profile
        )
        bar.update()
    g = graph.graph
    a, b = g.get("layers", [0, None])
    print(
        f"ok: {what}, preset {g.get('config')}, semantics {g.get('semantics')}, position "
        f"{g.get('position')}, layers {a}..{b - 1 if b else '?'}, tile_rows {g.get('tile_rows')}"
    )
    print("invariants verified on this graph:")
    for name, evidence in proofs:
        print(f"  ok  {name:<20}{evidence}")
    print()
    print(count_table(graph))
    print()
    print(format_bound_table(bounds, profile))
    return 0


def format_bound_table(bounds: dict, profile) -> str:
    """Every lower bound, largest first, with the estimate label said once."""
    from pccx_flow.bounds import tokens_per_second
    from pccx_flow.hardware.cost import cycles_to_seconds

    cycles = bounds["bounds_cycles"]
    lines = [
        f"lower bounds of one decode step on {profile.name} ({profile.core_hz / 1e6:g} MHz "
        f"core); every time here is a model estimate on that profile",
        f"  {'bound':<28}{'cycles':>14}{'ms/token':>11}{'tok/s max':>11}",
    ]
    for name in sorted(cycles, key=lambda k: -cycles[k]):
        c = cycles[name]
        ms = f"{cycles_to_seconds(c, profile) * 1e3:.3f}" if c > 0 else "-"
        tps = f"{tokens_per_second(c, profile):,.2f}" if c > 0 else "-"
        mark = "  <- largest (binding)" if name == bounds["largest_bound"] else ""
        lines.append(f"  {name[:28]:<28}{c:>14,}{ms:>11}{tps:>14}{mark}")
    return "\n".join(lines)

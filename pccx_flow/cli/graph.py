"""`pccx-flow graph`: export a decode-step DAG to a file, or show the kernel contract."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pccx_flow.cli.common import add_step_args, check_output_path, step_from_args, writing
from pccx_flow.errors import InputError

EXPORT_EXAMPLES = """\
  pccx-flow graph export -o step.json                          # E4B step at position 1023
  pccx-flow graph export --preset tiny --position 3 -o t.graphml
  pccx-flow graph export --layers 0:5 --semantics gemma3n -o first5.json
  pccx-flow graph export --profile v002-spec -o costed.json    # nodes carry model cycles"""
KERNELS_EXAMPLES = """\
  pccx-flow graph kernels                                      # every kernel's math
  pccx-flow graph kernels attn_scores                          # one kernel"""
FORMATS = """\
JSON is networkx node-link data; GraphML stores every attribute as JSON text. Both read back
exactly with pccx_flow.graph.export.read_graph. Cycles from --profile are model estimates."""
EPILOG = f"examples:\n{EXPORT_EXAMPLES}\n{KERNELS_EXAMPLES}\n\n{FORMATS}"
EXPORT_EPILOG = f"examples:\n{EXPORT_EXAMPLES}\n\n{FORMATS}"
KERNELS_EPILOG = f"examples:\n{KERNELS_EXAMPLES}"


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "graph",
        help="export the decode-step DAG (json, graphml) or show the kernel contract",
        description="Work with the decode-step DAG as data.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="graph_command", metavar="ACTION")
    ex = sub.add_parser(
        "export",
        help="write the DAG as node-link JSON or GraphML",
        description="Build one decode step and write it to a file.",
        epilog=EXPORT_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ex.add_argument("-o", "--output", type=Path, required=True, metavar="OUT.json|OUT.graphml")
    ex.add_argument(
        "--format", choices=("json", "graphml"), default=None, help="default: from the suffix"
    )
    ex.add_argument(
        "--profile",
        default=None,
        metavar="NAME|FILE",
        help="annotate model-estimate cycles from this hardware profile (e.g. v002-spec)",
    )
    add_step_args(ex)
    ex.add_argument("--no-progress", action="store_true", help="no progress bar on stderr")
    ex.set_defaults(func=run_export)
    kn = sub.add_parser(
        "kernels",
        help="print what each node kernel computes",
        description="The kernel contract between the graph and the executor.",
        epilog=KERNELS_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    kn.add_argument("name", nargs="?", default=None, help="one kernel (default: all)")
    kn.set_defaults(func=run_kernels)
    p.set_defaults(func=_no_action)


def _no_action(_args: argparse.Namespace) -> int:
    raise InputError("graph needs an action: export or kernels (see `pccx-flow graph --help`)")


def phase_bar(total: int, disabled: bool):
    """A progress bar over a few named phases, on stderr, only on a terminal."""
    from tqdm import tqdm

    return tqdm(
        total=total,
        file=sys.stderr,
        disable=disabled or not sys.stderr.isatty(),
        bar_format="{desc}: {n}/{total} phases |{bar}| {elapsed}",
        leave=False,
    )


def run_export(args: argparse.Namespace) -> int:
    from pccx_flow.graph.export import graph_format, write_graph

    fmt = graph_format(args.output, args.format)
    check_output_path(args.output)
    profile = None
    if args.profile:
        from pccx_flow.hardware.profile import load_profile

        profile = load_profile(args.profile)
    with phase_bar(2, args.no_progress) as bar:
        bar.set_description("building the graph")
        graph = step_from_args(args).build(profile)
        bar.update()
        bar.set_description(f"writing {fmt}")
        with writing(args.output):
            write_graph(graph, args.output, fmt)
        bar.update()
    print(
        f"wrote {args.output} ({fmt}): {graph.number_of_nodes()} nodes, "
        f"{graph.number_of_edges()} edges, {graph.graph['config']} {graph.graph['semantics']} "
        f"position {graph.graph['position']}"
    )
    return 0


def run_kernels(args: argparse.Namespace) -> int:
    from pccx_flow.graph.kernel_specs import KERNEL_OPS, KERNELS

    names = sorted(KERNELS) if args.name is None else [args.name]
    for name in names:
        if name not in KERNELS:
            raise InputError(
                f"unknown kernel {name!r}; run `pccx-flow graph kernels` to list all of them"
            )
        print(f"{name} [{KERNEL_OPS[name]}]")
        for line in KERNELS[name].splitlines():
            print(f"    {line}")
    return 0

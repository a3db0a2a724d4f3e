"""`pccx-flow trace`: compare two timelines (.pccx or Chrome trace JSON)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from pccx_flow import atomic
from pccx_flow.cli.common import check_output_path, writing

EPILOG = """examples:
  pccx-flow schedule --pccx a.pccx && pccx-flow schedule --policy heft --pccx b.pccx
  pccx-flow trace diff a.pccx b.pccx                 # makespans, busy time, first divergence
  pccx-flow trace diff step.trace.json b.pccx --json diff.json

A and B are pccx-lab .pccx files (flatbuf payload) or Chrome trace JSON as written by
`schedule --trace`. Events are matched by node name when both carry names. Cycles in files
written by pccx-flow are model estimates; the files say which profile they came from."""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "trace",
        help="compare two timelines (.pccx or Chrome trace JSON)",
        description="Compare two timelines of a step: makespan, busy cycles per lane and the "
        "first event where they part ways.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="trace_command", metavar="ACTION", required=True)
    d = sub.add_parser(
        "diff",
        help="compare timeline A with timeline B",
        description="Compare timeline A with timeline B.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d.add_argument("a", type=Path, metavar="A", help=".pccx or Chrome trace JSON")
    d.add_argument("b", type=Path, metavar="B", help=".pccx or Chrome trace JSON")
    d.add_argument("--json", type=Path, metavar="OUT", help="write the comparison as JSON")
    d.set_defaults(func=run_diff)


def run_diff(args: argparse.Namespace) -> int:
    from pccx_flow.traces.diff import diff_timelines, format_diff, read_timeline

    if args.json is not None:
        check_output_path(args.json)
    result = diff_timelines(read_timeline(args.a), read_timeline(args.b))
    print(format_diff(result))
    if args.json is not None:
        with writing(args.json):
            atomic.write_text(args.json, json.dumps(result, indent=1) + "\n")
    return 0

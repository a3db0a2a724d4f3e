"""`pccx-flow disasm`: list a program's words with their fields and nodes."""

from __future__ import annotations

import argparse
from pathlib import Path

EPILOG = """examples:
  pccx-flow disasm step.prog               # index, word, opcode, fields, node
  pccx-flow disasm step.json | grep GEMV   # the sidecar's path works too"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "disasm",
        help="list a pccx v002 program: index, word, opcode, fields, node",
        description="Read a program written by `pccx-flow emit` (words + .json sidecar), check\n"
        "it (length, checksum, every word legal) and print one line per word, with fences and\n"
        "host steps where they occur.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("program", type=Path, metavar="FILE", help="program words, .memh or .json")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pccx_flow.board.program.files import check_words, listing, read_program

    program = read_program(args.program)
    check_words(program)
    print(listing(program))
    return 0

"""`pccx-flow isa`: print the pccx v002 instruction tables, or write them as a C header."""

from __future__ import annotations

import argparse
from pathlib import Path

EPILOG = """examples:
  pccx-flow isa                            # field tables + known disagreements between sources
  pccx-flow isa --c-header pccx_isa.h      # the same tables as #defines for a board driver"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "isa",
        help="print the pccx v002 instruction set (or write it as a C header)",
        description="Print every opcode's field table, the CVO function codes and flags, and\n"
        "the known disagreements between pccx's own sources. Encoder, decoder, disassembler\n"
        "and the C header all come from the same table.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--c-header", type=Path, metavar="OUT.h", help="write a C header and exit")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pccx_flow.board.isa import c_header, format_table
    from pccx_flow.cli.common import check_output_path

    if args.c_header is not None:
        check_output_path(args.c_header)
        args.c_header.write_text(c_header(), encoding="ascii")
        print(f"wrote {args.c_header}")
        return 0
    print(format_table())
    return 0

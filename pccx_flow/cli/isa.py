"""`pccx-flow isa`: print the pccx v002 instruction tables, or write them as a C header."""

from __future__ import annotations

import argparse
from pathlib import Path

from pccx_flow import atomic

EPILOG = """examples:
  pccx-flow isa                            # field tables + known disagreements between sources
  pccx-flow isa --targets                  # how the spec and the as-built RTL read each word
  pccx-flow isa --c-header pccx_isa.h      # the same tables as #defines for a board driver

A word means the same fields on both targets; what the hardware does with them differs
(CVO element addresses and BF16 data as built, ...): --targets lists every such rule with the
RTL file and signal it comes from, and what the RTL cannot do at all."""


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
    p.add_argument(
        "--targets",
        action="store_true",
        help="print only the targets' readings of a word (spec vs the RTL as built)",
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pccx_flow.board.isa import c_header, format_table
    from pccx_flow.board.isa.rtl_rules import rules_table
    from pccx_flow.cli.common import check_output_path

    if args.c_header is not None:
        check_output_path(args.c_header)
        atomic.write_text(args.c_header, c_header(), encoding="ascii")
        print(f"wrote {args.c_header}")
        return 0
    if args.targets:
        print(rules_table())
        return 0
    print(format_table())
    print()
    print(rules_table())
    return 0

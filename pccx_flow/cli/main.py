"""`pccx-flow`: one subcommand per use.

Each subcommand lives in its own module `pccx_flow.cli.<name>` that exposes
``register(subparsers) -> None`` (adds its parser and sets ``func``) and whose ``func(args)``
returns an exit code. This module only dispatches and turns `PccxFlowError` into one line on
stderr and a non-zero exit, so no user error ever shows a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from pccx_flow import __version__
from pccx_flow.errors import PccxFlowError

# Order is the order of `pccx-flow --help`.
SUBCOMMANDS = (
    "schedule",
    "check",
    "graph",
    "render",
    "run",
    "weights",
    "trace",
    "emit",
    "disasm",
    "emulate",
    "isa",
)

EPILOG = """examples:
  pccx-flow schedule --policy critical-path           # E4B step on v002-spec, summary table
  pccx-flow schedule --list                           # every scheduling policy
  pccx-flow check --profile v002-as-built             # graph invariants and lower bounds
  pccx-flow render --layer 3 -o layer3.svg            # one layer of the DAG
  pccx-flow run --synthetic tiny --steps 8 --check    # execute with Dask, compare to reference
  pccx-flow weights synth --preset tiny --seed 0 --out ckpt/
run `pccx-flow COMMAND --help` for the options and examples of each command."""


class OneLineErrorParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line, like every other user error."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(
        prog="pccx-flow",
        description="Gemma 3N decode steps as pccx v002 instruction DAGs: build, schedule, "
        "bound, render and execute them.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"pccx-flow {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in SUBCOMMANDS:
        importlib.import_module(f"pccx_flow.cli.{name}").register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except PccxFlowError as exc:
        print(f"pccx-flow: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pccx-flow: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())

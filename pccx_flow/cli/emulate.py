"""`pccx-flow emulate`: run a program's words on the emulated board, check against the reference."""

from __future__ import annotations

import argparse
from pathlib import Path

EPILOG = """examples:
  pccx-flow weights synth --preset tiny --seed 0 --out ckpt/
  pccx-flow emit --preset tiny --position 5 -o step.prog
  pccx-flow emulate step.prog --weights ckpt/                      # spec math, float32
  pccx-flow emulate step.prog --weights ckpt/ --precision float64   # the 1e-9 check
  pccx-flow emulate step.prog --weights ckpt/ --numerics rtl        # the RTL's approximations
                                  # (as-built programs: the SFU's own BF16 arithmetic)
  pccx-flow emit --preset tiny --profile v002-as-built -o ab.prog   # as-built target
  pccx-flow emulate ab.prog --weights ckpt/                         # BF16 in L2, RTL reading

The positions before the program's are decoded by the reference (from --tokens, default a
fixed sequence), which also gives the expected logits and KV rows of the step; the emulator
runs the words from the same earlier KV rows, reading them as the program's target does
(`pccx-flow isa`). A spec-target program agrees within 1e-4 (float32) or 1e-9 (float64); an
as-built one keeps activations and KV rows in BF16 and agrees when logits and new KV rows are
within 10 % of their largest magnitude and its token within that of the reference's best.
Exit 1 when the step disagrees."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "emulate",
        help="execute a pccx v002 program's words and compare with the reference decode",
        description="Decode and execute every word of a program (never the graph) on an\n"
        "emulated L2, constant cache, DDR image and host; print the logits' agreement with\n"
        "the reference decode, and with --numerics rtl the drift the RTL's arithmetic adds.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("program", type=Path, metavar="PROGRAM", help="program file from emit")
    p.add_argument("--weights", type=Path, required=True, metavar="DIR", help="checkpoint folder")
    p.add_argument(
        "--numerics",
        choices=("spec", "rtl"),
        default="spec",
        help="spec: the specification's math; rtl: the RTL's approximations (on an as-built"
        " program the SFU's own BF16 arithmetic, bit for bit)",
    )
    p.add_argument(
        "--precision",
        choices=("float32", "float64"),
        default="float32",
        help="activation precision (default: %(default)s)",
    )
    p.add_argument("--tokens", metavar="T0,T1,...", help="token ids of positions 0..P")
    p.add_argument("--profile", metavar="NAME", help="refuse a program lowered for another profile")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pccx_flow.board.emulator.check import (
        check_program_matches,
        default_tokens,
        emulate_against_reference,
    )
    from pccx_flow.board.emulator.emulate import RTL_APPROXIMATIONS
    from pccx_flow.board.program.files import check_words, read_program
    from pccx_flow.errors import InputError
    from pccx_flow.weights.checkpoint import open_checkpoint

    program = read_program(args.program)
    check_words(program)
    weights = open_checkpoint(args.weights)
    check_program_matches(program, weights, args.profile)
    position = program.meta["position"]
    if args.tokens:
        try:
            tokens = [int(t) for t in args.tokens.split(",")]
        except ValueError:
            raise InputError(f"--tokens {args.tokens!r}: give comma-separated integers") from None
        bad = [t for t in tokens if not 0 <= t < weights.config.vocab]
        if bad:
            raise InputError(f"--tokens: {bad[0]} is not a token id of {weights.config.name}")
    else:
        tokens = default_tokens(position + 1, weights.config.vocab)
    r = emulate_against_reference(
        program, weights, tokens, precision=args.precision, numerics="spec"
    )
    from pccx_flow.errors import ExecutionError
    from pccx_flow.logits import check_logits

    check_logits(r["logits"], "of the emulated step (spec numerics)", ExecutionError)
    words = sum(1 for role in program.roles if role != "kick")
    target = program.meta.get("target", "spec")
    print(
        f"emulated {words} words and {program.summary['host_steps']} host steps of "
        f"{program.meta['config']} position {position} ({args.precision}, spec numerics, "
        f"target {target})"
    )
    if program.meta.get("l2_dtype") == "bfloat16":
        kv = f"KV rows within {r['kv_error']:.2%} of their scale (BF16)"
    else:
        kv = f"{r['kv_flips']} float16 rounding flips"
    print(
        f"  vs reference decode: max |logit diff| {r['max_abs_diff']:.3g} (tolerance "
        f"{r['tolerance']:.3g}), argmax {'same' if r['argmax_same'] else 'DIFFERENT'}, "
        f"{r['kv_layers']} KV layers, {kv} -> {'agrees' if r['ok'] else 'DISAGREES'}"
    )
    if args.numerics == "rtl":
        import numpy as np

        rtl = emulate_against_reference(
            program, weights, tokens, precision=args.precision, numerics="rtl"
        )
        logits = rtl["logits"].astype(np.float64)
        drift = float(np.max(np.abs(logits - r["logits"])))
        print(
            f"  rtl numerics: max |logit drift| vs spec numerics {drift:.3g} per step, vs "
            f"reference {rtl['max_abs_diff']:.3g}, argmax {rtl['argmax']} "
            f"({'same' if rtl['argmax'] == r['argmax'] else 'changed'})"
        )
        if target == "as-built":
            cap = weights.config.final_softcap
            capped = int(np.sum(np.abs(logits) >= 0.999 * cap))
            bad = int(np.sum(~np.isfinite(logits)))
            print(
                "    EXP, SQRT, RECIP, GELU, SCALE, REDUCE_SUM: the as-built SFU's own BF16"
                " arithmetic (CVO_sfu_unit.sv, bit for bit; GELU paired with its own x);"
                f" {capped} of {logits.size} logits at the softcap, {bad} not finite"
            )
            print("    SIN, COS: the CORDIC input saturates at +-4 rad (pccx-v002.md §4)")
        else:
            for func, what in RTL_APPROXIMATIONS.items():
                print(f"    {func}: {what}")
    return 0 if r["ok"] else 1

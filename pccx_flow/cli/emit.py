"""`pccx-flow emit`: lower one scheduled decode step to a pccx v002 program and write it."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from pccx_flow.board.isa.target import TARGETS
from pccx_flow.cli.common import (
    add_read_ahead_arg,
    add_step_args,
    check_output_path,
    read_ahead_from_args,
    step_from_args,
    writing,
)
from pccx_flow.errors import InputError

EPILOG = """examples:
  pccx-flow emit --preset tiny -o step.prog                # tiny step, critical-path, v002-spec
  pccx-flow emit --policy critical-path --profile v002-spec -o step.prog
  pccx-flow emit --preset tiny --profile v002-as-built --policy heft -o asbuilt.prog
  pccx-flow emit --preset tiny --profile v002-as-built --target spec -o s.prog  # spec reading
  pccx-flow emit --preset tiny --read-ahead fixed -o f.prog  # KV reads by the fixed rules
  pccx-flow disasm step.prog | less                         # the listing
  pccx-flow emit --preset tiny --position 5 -o s.prog --golden gold/ --weights ckpt/
  pccx-flow emit --preset tiny --bisect bring-up/ --weights ckpt/   # growing prefixes

Writes OUT (little-endian 64-bit words, kick markers between batches), OUT's .memh and a
.json sidecar (batches, fences, host steps, L2 map, slot log, DDR layout, node of each word).
The three are written whole and renamed into place together (the sidecar last, with the
SHA-256 of the other two and of itself), so a full disk leaves the old program, a kill the
old or the new one (or, in the instant between two renames, a mixed set that every reader
refuses in one line), and concurrent emits to one path follow one another. emit replaces
only a program it made
under the same name: any other file at OUT, OUT.memh or OUT.json (or the sidecar of another
program, such as step.json of step.bin) is refused unless --force.
Host steps reach L2 only through MEMCPY words (copies out before, copies in after them), and
every batch ends with a CVO so that today's RTL raises DONE (see --no-done-markers).
A schedule whose live tensors exceed L2 (or the CVO reach) fails with one line naming the
tensor, the instruction and the peak demand.

The target is how the hardware reads the words (`pccx-flow isa` lists every rule with its RTL
source): spec (word addresses, float32 in L2) or as-built (the RTL: CVO element addresses,
BF16 in L2, CVOs of <= 2,048 results and each the last word of its batch, the GEMV input
length in the fmap-shape slot shape_ptr names). The profile's [program] target is the
default; v002-as-built names as-built."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "emit",
        help="lower a scheduled decode step to a pccx v002 program (.prog/.memh/.json)",
        description="Build and schedule one decode step, then lower it to instruction words:\n"
        "L2 and constant-slot allocation, DDR image layout, batches of <= 8 words, fences\n"
        "and host steps. Prints a summary of the program.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--policy", default="critical-path", metavar="NAME",
                   help="scheduling policy (default: %(default)s)")  # fmt: skip
    p.add_argument("--profile", default="v002-spec", metavar="NAME|FILE",
                   help="hardware profile name or TOML file (default: %(default)s)")  # fmt: skip
    add_step_args(p)
    p.add_argument("--seed", type=int, default=0, help="seed for the random policy")
    add_read_ahead_arg(p)
    p.add_argument(
        "--target",
        choices=TARGETS,
        help="how the hardware reads the words: spec or as-built (default: the profile's"
        " [program] target; v002-spec: spec, v002-as-built: as-built)",
    )
    p.add_argument("-o", "--out", type=Path, metavar="OUT", help="program file to write")
    p.add_argument(
        "--force",
        action="store_true",
        help="replace OUT, OUT.memh and OUT.json even when they are not a program emit made"
        " under this name (default: refuse)",
    )
    p.add_argument(
        "--golden",
        type=Path,
        metavar="DIR",
        help="write per-instruction expected L2 words (.memh) there; needs --weights",
    )
    p.add_argument(
        "--bisect",
        type=Path,
        metavar="DIR",
        help="write growing prefixes in the order the program reaches them (MEMSET only,"
        " +MEMCPY, +CVO, +GEMV, layer 0, the step), each with its golden L2 words and an"
        " index.json, for board bring-up; needs --weights",
    )
    p.add_argument("--weights", type=Path, metavar="DIR", help="checkpoint for --golden/--bisect")
    p.add_argument(
        "--done-markers",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="end every batch whose last word is not a CVO with a one-element CVO, because"
        " today's RTL raises DONE only when a CVO completes (default: on; --no-done-markers"
        " for a bitstream that raises DONE at every batch's end)",
    )
    p.set_defaults(func=run)


def format_summary(summary: dict, meta: dict) -> str:
    s = summary
    ops = ", ".join(f"{k} {v}" for k, v in s["by_opcode"].items())
    reasons = ", ".join(f"{k} {v}" for k, v in s["fence_reasons"].items())
    kv = {"bfloat16": "BF16", "float32": "float32"}.get(meta.get("ddr_kv_dtype"), "float16")
    return "\n".join(
        [
            f"program: {meta['config']} step, position {meta['position']}, {meta['semantics']} "
            f"semantics, policy {meta['policy']}, profile {meta['profile']}",
            f"  target         {target_line(meta)}",
            f"  instructions   {s['instructions']} ({ops}) + {s['slot_memsets']} slot MEMSETs",
            f"  words          {s['words']} in {s['batches']} batches (<= 8 words + kick;"
            f" {s['done_markers']} words are DONE markers)",
            f"  fences         {s['fences']} ({reasons})",
            f"  host steps     {s['host_steps']}, with {s['host_copies_out']} MEMCPY copies"
            f" L2->host and {s['host_copies_in']} host->L2 ({s['host_io_bytes']:,} B host I/O"
            " area)",
            f"  L2 peak        {s['l2_peak_bytes']:,} B live of {s['l2_bytes']:,} B "
            f"(fragmentation at the peak {s['l2_fragmentation']:.1%}: 1 - largest hole / free)",
            f"  CVO window     {s['cvo_window_peak_bytes']:,} B used of {s['cvo_reach_bytes']:,} B "
            "reach",
            f"  split operands {s['split_operands']} (multi-part operands not contiguous in L2: "
            "need a host gather)",
            f"  accm copies    {s['accm_copies']} (accm GEMVs whose accumulator is read elsewhere)",
            f"  const slots    {s['slots_used']} of 64 used, {s['slot_hits']} reuses, "
            f"{s['slot_evictions']} evictions",
            f"  DDR image      {s['ddr_image_bytes']:,} B (weights + {kv} KV cache)",
            *_deferred_lines(s.get("deferred", ())),
        ]
    )


def _deferred_lines(nodes) -> list[str]:
    """Nodes the lowering issued later than the schedule, to find a hole in L2 (none: no
    line). Programs written before the lowering could do that have no such entry."""
    if not nodes:
        return []
    what = "1 node" if len(nodes) == 1 else f"{len(nodes)} nodes, each"
    return [
        f"  issued later   {what} just before its first reader, for a hole in L2 (the timing",
        f"                 differs from the schedule's there): {', '.join(nodes)}",
    ]


def target_line(meta: dict) -> str:
    """How the program's words are read: its target, L2 element type and command FIFO."""
    target = meta.get("target", "spec")
    what = (
        "the RTL's reading: BF16 in L2, CVO element addresses"
        if target == "as-built"
        else "the specification's: float32 in L2, word addresses"
    )
    return f"{target} ({what}; command FIFO {meta.get('command_fifo', 'ideal')})"


def run(args: argparse.Namespace) -> int:
    from pccx_flow.board.program.files import write_program
    from pccx_flow.board.program.lower import lower
    from pccx_flow.hardware.profile import load_profile
    from pccx_flow.schedule.registry import make_policy, run_policy

    step = step_from_args(args)
    if step.layers and step.layers[0] > 0:  # what lower() refuses, before the schedule
        a, b = step.layers
        raise InputError(
            f"--layers {a}:{b} starts after layer 0: the step's inputs would enter from the "
            f"decode state, which a program has no words to load; emit --layers 0:{b}"
        )
    make_policy(args.policy, seed=args.seed)  # fail fast, before the graph is built
    profile = load_profile(args.profile)
    if args.out is not None:
        from pccx_flow.board.program.files import check_overwrite

        check_output_path(args.out)
        if not args.force:
            check_overwrite(args.out)  # again, under a lock, when the files are written
    for flag in ("golden", "bisect"):
        if getattr(args, flag) is not None and args.weights is None:
            raise InputError(f"--{flag} runs the emulator: give the checkpoint with --weights DIR")
    weights = None
    if args.weights is not None:
        from pccx_flow.weights.checkpoint import open_checkpoint

        weights = open_checkpoint(args.weights)
        if weights.config.name != step.config.name:
            raise InputError(
                f"--weights holds a {weights.config.name!r} checkpoint but the step is "
                f"{step.config.name!r}; pass --preset {weights.config.name}"
            )
    from pccx_flow.board.isa.target import row_align_for, target_of
    from pccx_flow.schedule.problem import problem_from_graph
    from pccx_flow.schedule.readahead import DEFAULT_READ_AHEAD

    target = target_of(profile, args.target)
    from pccx_flow.board.program.ddr import check_ddr_capacity, step_kv_dtype

    check_ddr_capacity(step.config, profile, step_kv_dtype(step.semantics, target))
    from pccx_flow.collector import collector_paused

    with collector_paused():  # the step's objects live until it is lowered (pccx_flow.collector)
        graph = step.build(profile, row_align=row_align_for(target))
        # The L2-aware timeline: a schedule whose live tensors fit the profile's L2 and SFU
        # reach, so the allocator below can place it.
        problem = problem_from_graph(
            graph, profile, memory=True, read_ahead=read_ahead_from_args(args)
        )
        schedule = run_policy(problem, profile, args.policy, seed=args.seed)
        t0 = time.perf_counter()
        program = lower(
            graph, schedule, profile, step.config, done_markers=args.done_markers,
            target=target.name, on_retry=lambda line: print(line, file=sys.stderr),
        )  # fmt: skip
    program.meta["seed"] = args.seed  # so a replay can rebuild the same list schedule
    program.meta["read_ahead"] = args.read_ahead or DEFAULT_READ_AHEAD  # and its KV read rule
    t1 = time.perf_counter()
    print(format_summary(program.summary, program.meta))
    from pccx_flow.board.device.run_step import readback_offset

    print(
        f"  act. buffer    {readback_offset(program):,} B for dispatch (logits, host I/O area,"
        " staging of strided weight tiles)"
    )
    print(f"(lowered in {t1 - t0:.2f} s of wall time on this machine)")
    if args.out is not None:
        with writing(args.out):
            paths = write_program(program, args.out, force=args.force)
        print("wrote " + ", ".join(str(p) for p in paths.values()))
    if args.golden is not None:
        from pccx_flow.board.emulator.check import default_tokens, emulate_against_reference
        from pccx_flow.board.emulator.golden import write_golden

        record: dict = {}
        tokens = default_tokens(program.meta["position"] + 1, weights.config.vocab)
        r = emulate_against_reference(program, weights, tokens, record=record)
        from pccx_flow.errors import ExecutionError
        from pccx_flow.logits import check_logits

        check_logits(r["logits"], "of the emulated step", ExecutionError)
        with writing(args.golden / "index.json"):
            n = write_golden(program, record, args.golden)
        verdict = "agrees with" if r["ok"] else "DISAGREES with"
        print(
            f"wrote golden L2 writes of {n} instructions to {args.golden} (emulator, spec "
            f"float32 math, target {target.name}; {verdict} the reference decode, max |logit"
            f" diff| {r['max_abs_diff']:.3g})"
        )
    if args.bisect is not None:
        from pccx_flow.board.emulator.bisect import format_table, write_bisect

        with writing(args.bisect / "index.json"):
            rows = write_bisect(program, weights, args.bisect)
        print(format_table(rows))
        print(f"wrote {len(rows)} programs with golden L2 words and index.json to {args.bisect}")
    return 0

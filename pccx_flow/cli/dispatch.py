"""`pccx-flow dispatch`: run a program's decode step on a KV260's NPU (or the fake device)."""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from pccx_flow.cli.common import float_in, int_in
from pccx_flow.errors import BoardError, InputError

EPILOG = """examples:
  pccx-flow weights synth --preset tiny --seed 0 --out ckpt/
  pccx-flow emit --preset tiny --position 5 -o step.prog
  pccx-flow dispatch step.prog --weights ckpt/ --fake-device          # rehearsal, no board
  pccx-flow dispatch step.prog --weights ckpt/ --fake-device --check-golden gold/
  pccx-flow emit --preset tiny --bisect bring-up/ --weights ckpt/
  sudo pccx-flow dispatch bring-up/1-memcpy.prog --weights ckpt/    # on a KV260
  sudo pccx-flow dispatch step.prog --weights ckpt/ --check-golden gold/
  pccx-flow dispatch p0.prog p1.prog p2.prog --weights ckpt/ --fake-cluster 3
  pccx-flow dispatch p*.prog --weights ckpt/ --scheduler tcp://127.0.0.1:8786   # NPU workers

On a board: finds the NPU's /dev/uioN by UIO name (or --device), maps its register window
with the profile's register map, allocates the DDR image and the activation buffer from
u-dma-buf devices (--buffers), loads the weights and the KV cache of the earlier positions
(decoded by the reference from --tokens), then writes each batch (<= 8 words) and its kick,
pushes each word's DataMover commands and polls status with the profile's timeout, and runs
the host steps between batches on the tensors MEMCPY words copied out of L2 (their results
go back by MEMCPY). Prints argmax, top-k and a summary.
No board was available to test this: see README, "Running on a KV260".

--fake-device is a test and rehearsal aid, NOT a board: a memory-mapped file stands in for
the register window, file-backed buffers for u-dma-buf, and a device thread runs the
emulator on each kick, so the logits equal `pccx-flow emulate`'s bit for bit. --fake-fault
injects a fault (never-done, dma-error, disappear, silent: at kick N with @N, default the
first kick with DataMover commands; corrupt@I: a wrong L2 value after instruction I; a
fault the run cannot reach is refused), and
DONE comes only from batches with a CVO, as from today's RTL (--fake-done-rule every-batch:
from every batch, to rehearse a program emitted with --no-done-markers).
Exit 0 on success; a fault prints one line naming batch, instruction and node, exit 2.

Several programs (or --scheduler / --fake-cluster) run as one Dask task each on whichever
NPU worker is free (worker resource npu=1). A worker that dies takes its task with it and
the scheduler runs it again on another; a device that fails is reported and its program
run again on another worker (--attempts). Prints one line per program and every loss;
exit 2 when a program could not be run."""

FAULTS = ("never-done", "dma-error", "disappear", "silent", "corrupt")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "dispatch",
        help="run a program on a KV260's NPU over UIO (or on the fake device)",
        description="Run one decode step of an emitted program on the NPU: DDR image in\n"
        "physically contiguous buffers, DataMover commands, batches and kicks, status polls\n"
        "with timeouts, host steps between batches; print argmax and top-k.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "program",
        type=Path,
        nargs="+",
        metavar="PROGRAM",
        help="program file from emit (several: spread over a cluster's NPU workers)",
    )
    p.add_argument("--weights", type=Path, required=True, metavar="DIR", help="checkpoint folder")
    p.add_argument(
        "--device",
        type=Path,
        metavar="/dev/uioN",
        help="the NPU's UIO device (default: found by the name 'fabric')",
    )
    p.add_argument(
        "--profile",
        metavar="NAME|FILE",
        help="hardware profile with the register map (default: the program's)",
    )
    p.add_argument(
        "--token",
        type=int_in(0, 1 << 31),
        metavar="ID",
        help="token id at the program's position (default: a fixed sequence)",
    )
    p.add_argument(
        "--tokens",
        metavar="T0,T1,...",
        help="token ids of positions 0..P (the earlier ones fill the KV cache)",
    )
    p.add_argument(
        "--top-k",
        type=int_in(1, 1 << 20),
        default=5,
        metavar="K",
        help="how many top logits to print (default: %(default)s)",
    )
    p.add_argument(
        "--timeout",
        type=float_in(1e-3, 3600.0),
        metavar="SECONDS",
        help="status poll timeout (default: the profile's)",
    )
    p.add_argument(
        "--buffers",
        default="udmabuf0,udmabuf1",
        metavar="DEV,DEV",
        help="u-dma-buf devices for the DDR image and the activations (default: %(default)s)",
    )
    p.add_argument(
        "--check-golden",
        type=Path,
        metavar="DIR",
        help="after each batch read L2 back (MEMCPY L2->host batches) and compare it with"
        " emit --golden's words; names the first divergent instruction",
    )
    c = p.add_argument_group("a cluster of boards (several programs, one task each)")
    c.add_argument(
        "--scheduler",
        metavar="ADDR",
        help="run the programs on the NPU workers of this Dask cluster (workers started with "
        "--resources npu=1 --preload pccx_flow.cluster.npu_worker)",
    )
    c.add_argument(
        "--fake-cluster",
        type=int_in(1, 64),
        metavar="N",
        help="start N local worker processes with a fake NPU each and run the programs there",
    )
    c.add_argument(
        "--attempts",
        type=int_in(1, 10),
        default=2,
        metavar="K",
        help="runs of a program whose device fails before it is given up (default: 2)",
    )
    g = p.add_argument_group("rehearsal without a board (test aids, not a board run)")
    g.add_argument(
        "--fake-device",
        action="store_true",
        help="run against the fake NPU (register file + emulator), not a board",
    )
    g.add_argument(
        "--fake-fault",
        metavar="KIND[@N]",
        help=f"inject a fault into the fake device: {', '.join(FAULTS)}",
    )
    g.add_argument(
        "--fake-done-rule",
        choices=("cvo", "every-batch"),
        help="when the fake device raises DONE (default cvo: only for a batch with a CVO, as"
        " today's RTL; every-batch: as a bitstream that raises DONE at batch end)",
    )
    p.set_defaults(func=run)


def _tokens(args, position: int, vocab: int) -> list[int]:
    from pccx_flow.board.emulator.check import default_tokens

    if args.tokens:
        try:
            tokens = [int(t) for t in args.tokens.split(",")]
        except ValueError:
            raise InputError(f"--tokens {args.tokens!r}: give comma-separated integers") from None
        if len(tokens) != position + 1:
            raise InputError(
                f"--tokens: the program is for position {position}, give {position + 1} ids"
            )
    else:
        tokens = default_tokens(position + 1, vocab)
    if args.token is not None:
        tokens[-1] = args.token
    bad = [t for t in tokens if not 0 <= t < vocab]
    if bad:
        raise InputError(f"token {bad[0]} is not a token id of a {vocab}-token vocabulary")
    return tokens


def _parse_fault(text: str | None) -> tuple[str, int | None] | None:
    if text is None:
        return None
    kind, _, at = text.partition("@")
    if kind not in FAULTS or (at and not at.isdigit()) or (kind == "corrupt" and not at):
        raise InputError(
            f"--fake-fault {text!r}: give one of {', '.join(FAULTS)}, optionally @N (a kick"
            " number; corrupt needs @I, an instruction index)"
        )
    return kind, int(at) if at else None


def _check_buffers_first(args, program) -> None:
    """The DDR image (its size is in the sidecar) must end below 4 GiB where it will be
    allocated: checked before the weights load and the KV prefix is decoded (minutes for E4B),
    with the fake device's file buffers or the u-dma-buf devices' sysfs entries."""
    from pccx_flow.board.device.cma import UdmabufSource, check_plan, file_addresses

    sizes = [("image", int(program.ddr["total_bytes"]))]
    if args.fake_device:
        check_plan(sizes, file_addresses(sizes))
    else:
        UdmabufSource([d for d in args.buffers.split(",") if d]).precheck(sizes)


def _check_fault(kind: str, at: int | None, program, batches: int) -> None:
    """A fault the fake device could not inject is refused now, never skipped silently: a kick
    number past the program's batches, or `corrupt@I` on a word that writes no L2 value."""
    from pccx_flow.board.isa import KICK_MARKER, decode

    if kind != "corrupt":
        if at is not None and at >= batches:
            raise InputError(
                f"--fake-fault {kind}@{at}: the program has {batches} kicks (0..{batches - 1});"
                " give a kick number below that"
            )
        return
    words = program.words
    if at >= len(words) or words[at] == KICK_MARKER or program.roles[at] == "done":
        raise InputError(
            f"--fake-fault corrupt@{at}: not an instruction of the program (words 0.."
            f"{len(words) - 1}, kick and DONE markers excluded)"
        )
    ins = decode(words[at])
    if ins.op == "MEMSET" or (ins.op == "MEMCPY" and ins.fields["to_device"] == 1):
        raise InputError(
            f"--fake-fault corrupt@{at}: instruction {at} ({ins.op}, node {program.nodes[at]})"
            " writes no L2 value; pick a GEMV, CVO or MEMCPY host->L2"
        )


def _no_cvo_batches(program) -> list[int]:
    from pccx_flow.board.device.dispatch import Batch, plan
    from pccx_flow.board.isa import decode

    out = []
    for b in plan(program, 1 << 30):
        if isinstance(b, Batch) and not any(decode(w).op == "CVO" for w in b.words):
            out.append(b.index)
    return out


def run(args: argparse.Namespace) -> int:
    from pccx_flow.board.device.regmap import board_registers
    from pccx_flow.board.emulator.check import check_program_matches, reference_prefix
    from pccx_flow.board.isa.target import check_program_target
    from pccx_flow.board.program.files import check_words, read_program
    from pccx_flow.execute.runtime import StepContext
    from pccx_flow.hardware.profile import load_profile
    from pccx_flow.weights.checkpoint import open_checkpoint

    if args.scheduler or args.fake_cluster or len(args.program) > 1:
        from pccx_flow.cli.dispatch_sweep import run_sweep

        return run_sweep(args)
    args.program = args.program[0]
    if args.fake_device and args.device is not None:
        raise InputError("give --device or --fake-device, not both")
    if not args.fake_device and (args.fake_fault or args.fake_done_rule):
        raise InputError("--fake-fault and --fake-done-rule need --fake-device")
    fault = _parse_fault(args.fake_fault)
    program = read_program(args.program)
    check_words(program)
    _check_buffers_first(args, program)
    profile = load_profile(args.profile or program.meta["profile"])
    weights = open_checkpoint(args.weights)
    check_program_matches(program, weights, profile.name)
    check_program_target(
        program.meta.get("target", "spec"),
        profile.program.target,
        f"a device with profile {profile.name}",
    )
    regs = board_registers(profile)
    position = program.meta["position"]
    tokens = _tokens(args, position, weights.config.vocab)
    golden = None
    if args.check_golden is not None:
        from pccx_flow.board.device.golden_check import read_golden

        golden = read_golden(args.check_golden)
    no_done = _no_cvo_batches(program)
    if not args.fake_device and no_done:
        print(
            f"pccx-flow: warning: {len(no_done)} of the program's batches (first: batch"
            f" {no_done[0]}) have no CVO; today's RTL raises DONE only when a CVO completes,"
            " so they will time out unless the bitstream raises DONE at batch end (re-emit"
            " without --no-done-markers)",
            file=sys.stderr,
        )
    k_past, v_past, _ = reference_prefix(program, weights, tokens)
    ctx = StepContext(weights.config, program.meta["semantics"], position, tokens[-1], "float32")
    if args.fake_device:
        with tempfile.TemporaryDirectory(prefix="pccx-flow-fake-") as folder:
            return _run_fake(
                args,
                program,
                regs,
                weights,
                k_past,
                v_past,
                ctx,
                tokens,
                fault,
                golden,
                Path(folder),
            )
    return _run_board(args, program, regs, weights, k_past, v_past, ctx, tokens, golden)


def _run_board(args, program, regs, weights, k_past, v_past, ctx, tokens, golden) -> int:
    from pccx_flow.board.device.cma import UdmabufSource
    from pccx_flow.board.device.readback import readback_bytes
    from pccx_flow.board.device.run_step import host_buffers
    from pccx_flow.board.device.uio import open_npu

    npu = open_npu(regs, args.device)
    source = UdmabufSource([d for d in args.buffers.split(",") if d])
    buffers = host_buffers(program, source, weights, k_past, v_past, readback_bytes(golden))
    result = _run_and_close(args, program, npu, buffers, weights, ctx, tokens, golden)
    _print_result(args, program, result, str(npu.window.path), golden is not None)
    return 0


def _run_and_close(args, program, npu, buffers, weights, ctx, tokens, golden):
    """Run the step on `npu` (host steps on this host, --check-golden between batches), then
    close the register window and the buffers whatever happens."""
    from pccx_flow.board.device.host_side import HostSide
    from pccx_flow.board.device.run_step import run_step

    try:
        return run_step(
            program,
            npu,
            buffers,
            tokens[-1],
            host=HostSide(program, buffers["act"], weights, ctx),
            timeout=args.timeout,
            progress=_check_progress(args, program, golden, npu, buffers),
        )
    finally:
        npu.window.close()
        for b in buffers.values():
            b.close()


def _check_progress(args, program, golden, npu, buffers):
    """The per-batch callback: the progress line, and with --check-golden the L2 check, whose
    ranges are read back by MEMCPY L2->host batches of their own (the board's only way)."""
    show = _progress()
    if golden is None:
        return show
    from pccx_flow.board.device.readback import golden_batch_check

    check, _ = golden_batch_check(program, npu, buffers["act"], golden, args.timeout)

    def progress(done: int, total: int) -> None:
        line = check(done)
        if line is not None:
            raise BoardError(f"--check-golden: {line}")
        if show is not None:
            show(done, total)

    return progress


def _run_fake(
    args, program, regs, weights, k_past, v_past, ctx, tokens, fault, golden, folder: Path
) -> int:
    from pccx_flow.board.device.cma import FileSource
    from pccx_flow.board.device.dispatch import Batch, plan
    from pccx_flow.board.device.readback import readback_bytes
    from pccx_flow.board.device.run_step import host_buffers
    from pccx_flow.board.device.session import open_fake
    from pccx_flow.board.device.transfers import batch_transfers

    source = FileSource(folder / "buffers")
    buffers = host_buffers(program, source, weights, k_past, v_past, readback_bytes(golden))
    batches = [b for b in plan(program, 1 << 30) if isinstance(b, Batch)]
    rule = args.fake_done_rule or "cvo"
    dev, model = open_fake(
        program, buffers, regs, weights.config, folder, timeout=args.timeout, done_rule=rule
    )
    if fault is not None:
        kind, at = fault
        _check_fault(kind, at, program, len(batches))
        if kind == "corrupt":
            model.corrupt_at = at
            model.em.record = {}
        else:
            if at is None:  # the first kick that pushes DataMover commands
                at = next(
                    (
                        b.index
                        for b in batches
                        if batch_transfers(program, b.first, len(b.words), tokens[-1], 0)[0]
                    ),
                    0,
                )
            if kind == "never-done":
                dev.never_done(at)
            elif kind == "dma-error":
                b = batches[min(at, len(batches) - 1)]
                ts, _ = batch_transfers(program, b.first, len(b.words), tokens[-1], 0)
                dev.dma_error(ts[0].page if ts else next(iter(regs.pages)), at, 0b0010)
            else:
                dev.disappear(at, "remove" if kind == "disappear" else "silent")
    with dev:
        npu = dev.open(by_name=True)
        try:
            result = _run_and_close(args, program, npu, buffers, weights, ctx, tokens, golden)
        except BoardError as exc:
            seen = f" (fake device: {dev.faults[0]})" if dev.faults else ""
            raise BoardError(f"{exc}{seen}") from None
    if fault is not None and fault[0] == "corrupt" and not model.corrupted:
        raise InputError(
            f"--fake-fault corrupt@{fault[1]}: instruction {fault[1]} wrote no L2 value in this"
            " run, so nothing was corrupted; pick an instruction that writes L2"
        )
    where = "the fake device (emulator behind a register file; not a board)"
    _print_result(args, program, result, where, golden is not None)
    return 0


def _progress():
    """Batch progress on stderr for long programs (when stderr is a terminal)."""
    if not sys.stderr.isatty():
        return None

    def show(done: int, total: int) -> None:
        if done == total or done % 50 == 0:
            end = "\n" if done == total else "\r"
            print(f"  batch {done}/{total}", end=end, file=sys.stderr, flush=True)

    return show


def _print_result(args, program, result, where: str, golden_checked: bool | None) -> None:
    import numpy as np

    r, meta = result.report, program.meta
    logits = result.logits
    print(
        f"dispatched {meta['config']} position {meta['position']} ({meta['policy']},"
        f" {meta['profile']}) to {where}"
    )
    print(
        f"  {r.batches} batches, {r.words} words, {r.host_steps} host steps, {r.fences} fences,"
        f" {r.descriptors} DataMover commands, {r.polls} status polls; {r.seconds:.2f} s wall"
        " time of this host (not an NPU time)"
    )
    if logits is None:
        print(
            f"  no logits: the program ({meta.get('bisect', 'a part of a step')}) reads none back"
        )
    else:
        from pccx_flow.errors import BoardError
        from pccx_flow.logits import check_logits

        check_logits(logits, f"read back from {where}", BoardError)
        top = np.argsort(-logits, kind="stable")[: args.top_k]
        print(
            f"  argmax {int(top[0])}; top-{args.top_k}: "
            + ", ".join(f"{int(t)} ({float(logits[t]):.4g})" for t in top)
        )
    print(f"  KV rows written for {len(result.kv_rows)} cache layers")
    if golden_checked:
        print(
            f"  L2 matched the golden words after every one of {r.batches} batches (read back"
            " by MEMCPY L2->host batches between them)"
        )

"""`pccx-flow doctor`: the board bring-up ladder, stopping at the first rung that fails."""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

from pccx_flow.cli.common import float_in, int_in
from pccx_flow.errors import InputError

EPILOG = """examples:
  pccx-flow doctor --fake-device                      # a healthy fake board: all 7 rungs
  pccx-flow doctor --fake-device acp-no-status        # a fault: stops at rung 5, says why
  pccx-flow doctor --fake-device hp-interr --json     # the same as JSON
  sudo pccx-flow doctor                               # on a KV260 (UIO name 'fabric')
  sudo pccx-flow doctor --uio pccx-npu --bitstream /lib/firmware/xilinx/pccx_npu_bd/X.bit.bin

Rungs: 1 environment (UIO node, map, permissions, u-dma-buf buffers, bitstream sha256),
2 AXI-Lite window (status word, FIFO levels), 3 frontend alive (MEMSET and its DONE),
4 HP weight DataMovers (one command, then a burst; status words decoded per Xilinx PG022),
5 ACP DataMovers by MEMCPY (statuses, the pattern read back; HP vs ACP), 6 L2 round trip
(MEMCPY host->L2->host, a MEMSET, a CVO), 7 one layer of a tiny step (emit --bisect's
layer0) with golden L2 words checked after every batch.

--fake-device is a rehearsal aid, NOT a board: a register file with a device thread, fake
u-dma-buf buffers, and the emulator behind it for rung 7. Its faults reproduce failures
seen on a KV260 in pccx's bring-up record: {faults}.
The CCI-400 (secure-world) registers are never touched; rung 5 says how to check them.
Exit 0 when every rung passes, 1 when one fails (the report says which and why), 2 on bad
input. On the fake board, its temporary folder is shown as <fake board>."""


def register(subparsers: argparse._SubParsersAction) -> None:
    from pccx_flow.board.device.fake_bench import FAULTS

    p = subparsers.add_parser(
        "doctor",
        help="board bring-up ladder: environment .. one layer with golden vectors",
        description="Check a KV260 running pccx v002 rung by rung, from the UIO device to one\n"
        "layer of a decode step, and stop at the first rung that fails with the evidence,\n"
        "the likely causes and the next thing to try.",
        epilog=EPILOG.format(faults=", ".join(f"{k} (rung {v[0]})" for k, v in FAULTS.items())),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = p.add_mutually_exclusive_group()
    where.add_argument(
        "--fake-device",
        nargs="*",
        metavar="FAULT",
        help="climb a fake board (not a board), with these faults (none: a healthy one)",
    )
    where.add_argument(
        "--uio",
        metavar="NAME",
        help="the NPU's UIO device name, or part of it (default: 'fabric')",
    )
    p.add_argument(
        "--profile",
        default="v002-as-built",
        metavar="NAME|FILE",
        help="hardware profile with the register map (default: %(default)s)",
    )
    p.add_argument(
        "--buffers",
        default="udmabuf0,udmabuf1",
        metavar="DEV,DEV",
        help="u-dma-buf devices for the DDR image and the activations (default: %(default)s)",
    )
    p.add_argument("--bitstream", type=Path, metavar="FILE", help="print this file's sha256")
    p.add_argument(
        "--weights",
        type=Path,
        metavar="DIR",
        help="tiny checkpoint for rung 7 (default: a synthetic one, seed 0)",
    )
    p.add_argument(
        "--position",
        type=int_in(0, 1 << 20),
        default=1,
        metavar="P",
        help="decode position of rung 7's step (default: %(default)s)",
    )
    p.add_argument(
        "--timeout",
        type=float_in(1e-3, 3600.0),
        default=1.0,
        metavar="SECONDS",
        help="wait for each DONE or status word (default: %(default)s)",
    )
    p.add_argument("--json", action="store_true", help="print the rungs as JSON")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pccx_flow.board.device.doctor import RUNGS, Bench, climb, format_report
    from pccx_flow.board.device.fake_bench import FakeBoard, check_faults
    from pccx_flow.board.device.regmap import board_registers
    from pccx_flow.hardware.profile import load_profile

    profile = load_profile(args.profile)
    regs = board_registers(profile)
    buffers = tuple(d for d in args.buffers.split(",") if d)
    if len(buffers) != 2:
        raise InputError(f"--buffers {args.buffers!r}: give two u-dma-buf devices, DEV,DEV")
    common = dict(regs=regs, profile=profile, buffers=buffers, bitstream=args.bitstream,
                  timeout=args.timeout, weights=args.weights, position=args.position)  # fmt: skip
    if args.fake_device is not None:
        check_faults(args.fake_device)
        with tempfile.TemporaryDirectory(prefix="pccx-flow-doctor-") as d, FakeBoard(
            Path(d), regs, args.fake_device, answer_timeout=max(args.timeout, 2.0)
        ) as board:
            bench = Bench(**common, sysfs_root=board.sysfs_root, dev_root=board.dev_root,
                          udmabuf_sysfs=board.udmabuf_sysfs, bus=board.device.bus,
                          load_model=board.load_model)  # fmt: skip
            rungs = climb(bench)
            _shorten(rungs, d)
        where = "a fake board (a register file and the emulator; not a board)"
        if args.fake_device:
            where += f" with fault {', '.join(args.fake_device)}"
    else:
        bench = Bench(**common, uio_name=args.uio or "fabric")
        rungs = climb(bench)
        where = "this board"
    ok = len(rungs) == len(RUNGS) and rungs[-1].passed
    if args.json:
        print(json.dumps({"device": where, "passed": ok,
                          "rungs": [r.to_json() for r in rungs]}, indent=1))  # fmt: skip
    else:
        print(f"pccx-flow doctor on {where}, profile {profile.name}")
        print(format_report(rungs))
    return 0 if ok else 1


def _shorten(rungs, folder: str) -> None:
    """The fake board's temporary folder as ``<fake board>``, so reports compare run to run."""
    for r in rungs:
        r.evidence = [e.replace(folder, "<fake board>") for e in r.evidence]

"""One decode step on a device, opened once and run one program step at a time.

`run_step` runs a whole program in one call. A Dask task per batch (`pccx_flow.cluster`)
needs the same walk cut into pieces that live between tasks on the worker that owns the
device: `StepSession` allocates the buffers and loads the DDR image, opens the device (a
board's UIO window, or a fake device of its own in a folder), then runs program step `i`
on request and records how long each took, and `close` reads the logits and KV rows back
and releases everything.

What a step "took" is what the host can know. On a board: the wall time from the kick to
the DONE it polled (the register map has no cycle counter). On the fake device: the
modelled cycles of `pccx_flow.board.device.fake_timing` (a model estimate; the emulator's
wall time here says nothing about the NPU), with each word's modelled interval. Host steps
are timed by this host's clock either way.
"""

from __future__ import annotations

import shutil
import uuid
from dataclasses import dataclass
from pathlib import Path

from pccx_flow.board.device.dispatch import Batch, Dispatcher
from pccx_flow.board.device.host_side import HostSide
from pccx_flow.board.device.regmap import BoardRegisters, board_registers
from pccx_flow.board.device.run_step import (
    StepResult,
    batch_descriptors,
    check_transfers,
    host_buffers,
    step_result,
)
from pccx_flow.errors import InputError

DEVICE_KINDS = ("fake", "uio")
FAKE_DONE_RULES = ("cvo", "every-batch")


@dataclass(frozen=True)
class DeviceSpec:
    """The device a host (a Dask worker) owns: a fake one in `folder`, or a board's UIO
    device (`device`: ``/dev/uioN``, None to find it by name) with its u-dma-buf buffers."""

    kind: str = "fake"
    folder: str | None = None
    device: str | None = None
    buffers: tuple[str, ...] = ("udmabuf0", "udmabuf1")
    done_rule: str = "cvo"  # fake: DONE only from batches with a CVO, as today's RTL

    def __post_init__(self) -> None:
        if self.kind not in DEVICE_KINDS:
            raise InputError(f"device kind {self.kind!r}: use one of {', '.join(DEVICE_KINDS)}")
        if self.kind == "fake" and not self.folder:
            raise InputError("a fake device needs a folder for its register file and buffers")
        if self.done_rule not in FAKE_DONE_RULES:
            raise InputError(f"fake DONE rule {self.done_rule!r}: use cvo or every-batch")

    @property
    def label(self) -> str:
        if self.kind == "fake":
            return "fake device (emulator behind a register file; not a board)"
        return f"board {self.device or '(UIO found by name)'}"


def open_fake(program, buffers, regs: BoardRegisters, config, folder: Path, *,
              timeout: float | None = None, done_rule: str = "cvo"):  # fmt: skip
    """A started fake device in `folder` whose model runs `program` on `buffers`; returns
    ``(device, model)``. The caller stops the device (``with device:`` or ``stop()``)."""
    from pccx_flow.board.device.device_model import DeviceModel
    from pccx_flow.board.device.fake_device import FakeDevice
    from pccx_flow.board.isa import decode

    model = DeviceModel(program, buffers, config)
    # a silent fake is given up on like a poll (not sooner than 2 s: a loaded CI machine)
    answer = regs.poll_timeout_seconds if timeout is None else timeout
    dev = FakeDevice(folder, regs, answer_timeout=max(answer, 2.0))
    model.attach(dev)
    if done_rule == "cvo":
        dev.done_when = lambda words: any(decode(w).op == "CVO" for w in words)
    return dev, model


class StepSession:
    """A program's step on a device, run piece by piece (see the module docstring)."""

    def __init__(self, spec: DeviceSpec, program, weights, k_past, v_past, ctx, profile,
                 timeout: float | None = None):  # fmt: skip
        self.spec, self.program = spec, program
        self.profile = profile
        regs = board_registers(profile)
        check_transfers(program, ctx.token_id, regs.max_batch)
        self.device = None
        self.buffers: dict = {}
        self.cycles = None
        self.folder: Path | None = None  # a fake device's own folder, removed on release
        try:
            if spec.kind == "fake":
                from pccx_flow.board.device.cma import FileSource
                from pccx_flow.board.device.fake_timing import batch_cycles

                self.folder = folder = Path(spec.folder) / f"step-{uuid.uuid4().hex[:12]}"
                self.buffers = host_buffers(
                    program, FileSource(folder / "buffers"), weights, k_past, v_past
                )
                self.device, _ = open_fake(program, self.buffers, regs, weights.config, folder,
                                           timeout=timeout, done_rule=spec.done_rule)  # fmt: skip
                self.device.start()
                npu = self.device.open(by_name=True)
                self.cycles = batch_cycles(program, profile)
            else:
                from pccx_flow.board.device.cma import UdmabufSource
                from pccx_flow.board.device.uio import open_npu

                npu = open_npu(regs, spec.device)
                self.buffers = host_buffers(
                    program, UdmabufSource(list(spec.buffers)), weights, k_past, v_past
                )
            self.npu = npu
            self.host = HostSide(program, self.buffers["act"], weights, ctx)
            self.dispatcher = Dispatcher(
                program, npu, run_host_step=self.host.run,
                descriptors=batch_descriptors(program, self.buffers, ctx.token_id),
                timeout=timeout,
            )  # fmt: skip
            self.dispatcher.start()
        except BaseException:
            self.release()
            raise
        self.records: list[dict] = []

    @property
    def steps(self) -> list:
        return self.dispatcher.steps

    def run(self, index: int) -> dict:
        """Run program step `index` (in order); what it took, as plain data."""
        step = self.dispatcher.steps[index]
        wall = self.dispatcher.run(step)
        if isinstance(step, Batch):
            rec = {"step": index, "kind": "batch", "batch": step.index, "wall_s": wall,
                   "first": step.first, "last": step.last}  # fmt: skip
            if self.cycles is not None:
                c = self.cycles[step.index]
                hz = float(self.profile.core_hz)
                rec["device_s"] = c.cycles / hz
                rec["source"] = "modelled"
                rec["words"] = [(i, node, lane, a / hz, b / hz) for i, node, lane, a, b in c.words]
            else:
                rec["device_s"] = wall
                rec["source"] = "kick-to-done"
        else:
            rec = {"step": index, "kind": step.get("kind"), "wall_s": wall,
                   "node": step.get("node")}  # fmt: skip
        self.records.append(rec)
        return rec

    def close(self) -> StepResult:
        """The step's logits and KV rows; releases the device and the buffers."""
        try:
            report = self.dispatcher.finish()
            return step_result(self.program, self.buffers, self.host, report)
        finally:
            self.release()

    def release(self) -> None:
        """Close the register window, the buffers and a fake device (safe to repeat)."""
        npu = getattr(self, "npu", None)
        if npu is not None:
            npu.window.close()
            self.npu = None
        for b in self.buffers.values():
            b.close()
        self.buffers = {}
        if self.device is not None:
            self.device.stop()
            self.device = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None

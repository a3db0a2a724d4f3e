"""One decode step on an NPU: buffers, the DDR image, DataMover commands, batches, results.

`host_buffers` allocates the two physically contiguous buffers a step needs from a
`pccx_flow.board.device.cma.BufferSource` and loads the DDR image (weights and the KV cache of the
earlier positions) into the first; the second (the activation buffer) holds the runs of
logits the NPU writes back, the host I/O area through which host steps and L2 exchange
tensors, and the staging area for gathered weight tiles. `run_step` then walks the program
with `pccx_flow.board.device.dispatch.dispatch`, pushing before each batch the DataMover commands of
its words (`pccx_flow.board.device.transfers`) and running each host step with
`pccx_flow.board.device.host_side.HostSide`; the logits are what the last host steps (soft-capping)
leave in host memory, the step's KV rows are read from the image's cache.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from pccx_flow.board.device.cma import Buffer, BufferSource
from pccx_flow.board.device.ddr_image import kv_values, load_image
from pccx_flow.board.device.dispatch import Batch, Descriptor, DispatchReport, dispatch, plan
from pccx_flow.board.device.host_side import HostSide
from pccx_flow.board.device.transfers import (
    batch_transfers,
    check_fifo_depth,
    gather_into,
    host_io_base,
    host_io_bytes,
    staging_bytes,
)
from pccx_flow.board.device.uio import Npu
from pccx_flow.board.program.ddr import join_kv_layers
from pccx_flow.graph.blocks_final import LOGITS


@dataclass
class StepResult:
    """The logits, the new KV row of each cache layer, and what the dispatch did."""

    logits: np.ndarray | None  # None for a program that reads no logits back
    kv_rows: dict[int, tuple[np.ndarray, np.ndarray]]
    report: DispatchReport


def _staging_base(program) -> int:
    return host_io_base(program) + host_io_bytes(program)


def readback_offset(program) -> int:
    """Where the L2 read-back area (`pccx_flow.board.device.readback`) starts in the
    activation buffer."""
    end = _staging_base(program) + staging_bytes(program)
    return -(-end // 64) * 64


def host_buffers(program, source: BufferSource, weights, k_past, v_past,
                 readback_bytes: int = 0) -> dict[str, Buffer]:  # fmt: skip
    """Allocate the image and activation buffers and load the DDR image.

    `readback_bytes` adds an L2 read-back area at the activation buffer's end."""
    layout = program.ddr
    image = source.allocate("image", layout["total_bytes"])
    load_image(layout, weights, image.view(0, image.size), k_past, v_past)
    act = source.allocate("act", readback_offset(program) + readback_bytes)
    return {"image": image, "act": act}


def check_transfers(program, token_id: int, max_batch: int) -> int:
    """Every batch's commands fit the 8-deep command FIFOs; the number of commands."""
    n = 0
    for step in plan(program, max_batch):
        if isinstance(step, Batch):
            ts, _ = batch_transfers(program, step.first, len(step.words), token_id, 0)
            check_fifo_depth(ts, step.index, program.nodes)
            n += len(ts)
    return n


def batch_descriptors(program, buffers: dict[str, Buffer], token_id: int):
    """The `dispatch` callback giving a batch's DataMover commands (gathered weight tiles are
    copied into the staging area first)."""
    image, act = buffers["image"], buffers["act"]
    base = _staging_base(program)

    def descriptors(batch: Batch) -> list[Descriptor]:
        ts, _ = batch_transfers(program, batch.first, len(batch.words), token_id, base)
        for t in ts:
            if t.gather is not None:
                gather_into(image, act, t)
        return [Descriptor(t.page, t.command(buffers), t.word_index) for t in ts]

    return descriptors


def step_result(program, buffers: dict[str, Buffer], host: HostSide | None,
                report: DispatchReport) -> StepResult:  # fmt: skip
    """The logits the host steps left in host memory and the KV rows the step wrote."""
    found = None if host is None else host.memory.get(LOGITS)
    logits = None if found is None else np.asarray(found, dtype=np.float32)
    image = buffers["image"]
    rows: dict[int, dict[str, dict[int, np.ndarray]]] = {}
    for s in program.streams.values():
        if s.get("kind") == "kv_write":
            kv = s["kv"]
            raw = image.view(s["ddr_offset"], s["ddr_bytes"])
            parts = rows.setdefault(kv["layer"], {}).setdefault(kv["kind"], {})
            parts[kv["head"]] = kv_values(program.ddr, raw)
    return StepResult(logits, join_kv_layers(rows, program.ddr), report)


def run_step(
    program,
    npu: Npu,
    buffers: dict[str, Buffer],
    token_id: int,
    *,
    host: HostSide | None,
    timeout: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> StepResult:
    """Dispatch the program's batches and host steps; read the logits and KV rows back.

    `host` runs the host steps (None for a program without any, such as an ``emit
    --bisect`` prefix); the logits are taken from its memory.
    """
    check_transfers(program, token_id, npu.regs.max_batch)
    report = dispatch(
        program,
        npu,
        run_host_step=None if host is None else host.run,
        descriptors=batch_descriptors(program, buffers, token_id),
        timeout=timeout,
        progress=progress,
    )
    return step_result(program, buffers, host, report)

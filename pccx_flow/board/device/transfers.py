"""The DataMover transfers each word needs: which page, which buffer bytes, in what order.

Read from the word's sidecar stream (`pccx_flow.board.program.files`): a GEMV tile's weight rows
(and, for INT4, its row scales), a MEMCPY's KV rows, embedding row or logits. Pages:

- ``hp2``: GEMV weight runs; ``hp3``: the INT4 row scales of the same tile (the two GEMV
  weight ports of the profile, so a batch of 8 GEMVs needs at most 8 commands on each);
- ``acp_in``: host -> L2 (KV rows, the embedding row, host-step results from the host I/O
  area); ``acp_out``: L2 -> host (the new KV row into the DDR image's cache, the logits and
  the tensors host steps read into the activation buffer).

The activation buffer holds, in order: the logits runs, the host I/O area (one place per
tensor copied between L2 and a host step, `host_io_base`) and the staging area.

A DataMover command moves one contiguous run (< 8 MiB). A tile whose rows are not contiguous
in the image (a column block of an ``[in, out]`` float32 matrix, a column split of an INT4
one) would need one command per row, more than the 8-deep command FIFO holds, so the host
gathers it into the activation buffer's staging area before the batch (`gather`) and the
command points there. Addresses are (buffer, offset) here; `Transfer.phys` makes them
physical once the buffers exist.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from pccx_flow.board.device import regmap
from pccx_flow.board.device.cma import Buffer
from pccx_flow.errors import BoardError

MAX_RUN = (1 << 23) - 1  # the DataMover's 23-bit byte count
STAGING_ALIGN = 64
LOGITS_OFFSET = 0  # the logits runs start the activation buffer


@dataclass(frozen=True)
class Transfer:
    """One DataMover command for word `word_index`."""

    page: str
    buffer: str  # "image" (the DDR image) or "act" (activations and staging)
    offset: int
    nbytes: int
    word_index: int
    what: str  # weights, scales, kv_read, embed, embed_scale, kv_write, logits
    gather: tuple[int, int, int, int] | None = None  # (image offset, run, runs, stride)

    def phys(self, buffers: dict[str, Buffer]) -> int:
        return buffers[self.buffer].phys + self.offset

    def command(self, buffers: dict[str, Buffer]) -> int:
        return regmap.encode_command(
            addr=self.phys(buffers), length_bytes=self.nbytes, tag=self.word_index & 0xF
        )


def _split(t: Transfer) -> list[Transfer]:
    """A run longer than the 23-bit byte count as several commands."""
    if t.nbytes <= MAX_RUN or t.gather is not None:
        return [t]
    out, off, left = [], t.offset, t.nbytes
    while left:
        n = min(left, MAX_RUN - MAX_RUN % 64)
        out.append(Transfer(t.page, t.buffer, off, n, t.word_index, t.what))
        off, left = off + n, left - n
    return out


def embed_row(stream: dict, token_id: int) -> int:
    """The embedding row the host points the stream at (the lowering's ``id_rule``)."""
    e = stream["embed"]
    t = int(token_id)
    if e["id_rule"] == "clip":
        t = min(t, e["id_limit"] - 1)
    elif e["id_rule"] == "zero_if_oob":
        t = t if t < e["id_limit"] else 0
    return t


def word_transfers(program, index: int, token_id: int, staging: int) -> tuple[list[Transfer], int]:
    """The transfers of word `index`; `staging` is the next free staging offset (returned)."""
    s = program.streams.get(index)
    if not s:
        return [], staging
    out: list[Transfer] = []
    if "weight" in s:
        w = s["weight"]
        total = w["run_bytes"] * w["runs"]
        if w["runs"] == 1 or w["run_bytes"] == w["stride"]:
            out.append(Transfer("hp2", "image", w["offset"], total, index, "weights"))
        else:
            gather = (w["offset"], w["run_bytes"], w["runs"], w["stride"])
            out.append(Transfer("hp2", "act", staging, total, index, "weights", gather))
            staging += -(-total // STAGING_ALIGN) * STAGING_ALIGN
        if "scale_offset" in w:
            out.append(
                Transfer("hp3", "image", w["scale_offset"], w["scale_bytes"], index, "scales")
            )
    elif s.get("kind") == "kv_read":
        out.append(Transfer("acp_in", "image", s["ddr_offset"], s["ddr_bytes"], index, "kv_read"))
    elif s.get("kind") == "kv_write":
        out.append(Transfer("acp_out", "image", s["ddr_offset"], s["ddr_bytes"], index, "kv_write"))
    elif s.get("kind") == "embed_fetch":
        key = s["embed"]["key"]
        e = program.ddr["tensors"][key]
        rows, cols = e["shape"]
        t = embed_row(s, token_id)
        if e["storage"] == "int4":
            out.append(
                Transfer("acp_in", "image", e["offset"] + t * cols // 2, cols // 2, index, "embed")
            )
            out.append(
                Transfer("acp_in", "image", e["scale_offset"] + 4 * t, 4, index, "embed_scale")
            )
        else:
            out.append(Transfer("acp_in", "image", e["offset"] + 4 * t * cols, 4 * cols, index,
                                "embed"))  # fmt: skip
    elif s.get("kind") in ("host_read", "host_write"):
        page = "acp_out" if s["kind"] == "host_read" else "acp_in"
        offset = host_io_base(program) + s["host_offset"]
        out.append(Transfer(page, "act", offset, s["bytes"], index, s["kind"]))
    elif s.get("kind") == "logits_readback":
        offset = logits_runs(program)[index][0]
        out.append(Transfer("acp_out", "act", offset, s["bytes"], index, "logits"))
    return [p for t in out for p in _split(t)], staging


def logits_runs(program) -> dict[int, tuple[int, int, str]]:
    """Per logits read-back word: (offset in the activation buffer, bytes, host tensor name).

    The logits leave L2 in runs (one MEMCPY each); the runs lie one after the other from
    `LOGITS_OFFSET`, in word order, each 64-byte aligned.
    """
    cached = getattr(program, "_logits_runs", None)  # computed once per program object
    if cached is not None:
        return cached
    runs, offset = {}, LOGITS_OFFSET
    for i in sorted(program.streams):
        s = program.streams[i]
        if s.get("kind") == "logits_readback":
            runs[i] = (offset, s["bytes"], s.get("host_tensor", ""))
            offset += -(-s["bytes"] // STAGING_ALIGN) * STAGING_ALIGN
    with contextlib.suppress(AttributeError):  # a frozen program: recomputed each time
        program._logits_runs = runs
    return runs


def logits_bytes(program) -> int:
    """The activation buffer's logits area (0 for a part of a step: `emit --bisect`)."""
    runs = logits_runs(program)
    if not runs:
        return 0
    offset, nbytes, _ = runs[max(runs)]
    return offset + -(-nbytes // STAGING_ALIGN) * STAGING_ALIGN - LOGITS_OFFSET


def host_io_base(program) -> int:
    """Where the host I/O area starts in the activation buffer (after the logits runs)."""
    return LOGITS_OFFSET + logits_bytes(program)


def host_io_bytes(program) -> int:
    """Size of the host I/O area (0 for a program from before host copies existed)."""
    return int(program.meta.get("host_io_bytes", 0))


def batch_transfers(program, first: int, words: int, token_id: int, staging_base: int):
    """The transfers of the words ``first .. first + words - 1`` of one batch, in order."""
    out: list[Transfer] = []
    staging = staging_base
    for i in range(first, first + words):
        ts, staging = word_transfers(program, i, token_id, staging)
        out.extend(ts)
    return out, staging - staging_base


def staging_bytes(program) -> int:
    """The largest staging area one batch needs (the activation buffer holds it after logits)."""
    peak, start = 0, 0
    for step in program.steps:
        if step["kind"] != "batch":
            continue
        start = step.get("start", start)
        _, used = batch_transfers(program, start, step["end"] - 1 - start, 0, 0)
        peak = max(peak, used)
        start = step["end"]
    return peak


def check_fifo_depth(transfers: list[Transfer], batch_index: int, nodes) -> None:
    """More than `regmap.FIFO_DEPTH` commands on one page in one batch is a one-line error."""
    count: dict[str, int] = {}
    for t in transfers:
        count[t.page] = count.get(t.page, 0) + 1
        if count[t.page] > regmap.FIFO_DEPTH:
            raise BoardError(
                f"batch {batch_index} (instruction {t.word_index}, node {nodes[t.word_index]}):"
                f" needs more than {regmap.FIFO_DEPTH} DataMover commands on page {t.page};"
                " re-emit with smaller batches"
            )


def gather_into(image: Buffer, act: Buffer, t: Transfer) -> None:
    """Copy a strided tile from the image into its staging place (the host's part)."""
    off, run, runs, stride = t.gather
    dst = act.view(t.offset, t.nbytes)
    src = image.view(off, (runs - 1) * stride + run)
    for r in range(runs):
        dst[r * run : (r + 1) * run] = src[r * stride : r * stride + run]

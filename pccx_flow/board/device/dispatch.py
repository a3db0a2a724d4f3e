"""Run a lowered program on an NPU: batches of at most 8 words and a kick, host steps between.

What the host can do on pccx v002 is narrow (``pccx-v002.md`` §5): write 64-bit words into an
8-deep command FIFO that has no level register, write the kick, read a status word whose BUSY
and DONE bits are all the feedback there is, and program the DataMover pages. The hardware
checks no hazards and has no completion IDs. So `dispatch` takes the one safe order: before
each batch the device must be idle, after each kick it waits for DONE (with the profile's
timeout), then checks the status ERROR bit and every DataMover page's sticky errors and pops
the statuses of the commands it pushed. A fence in the program is thereby always honoured.

Any failure (a timeout, a sticky DMA error, an ERROR bit, a batch deeper than the FIFO, a
device that disappears) is one line naming the batch, the instruction and its graph node, and
leaves the device reset as far as the register map allows (`Npu.reset`).

The program is anything shaped like `DispatchProgram` (the lowered ``Program`` of
`pccx_flow.board.program.files` is): the words in issue order with a kick marker ending each batch,
the graph node of each word, and the steps (batches, fences, host steps) in order.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from pccx_flow.board.device import regmap
from pccx_flow.board.device.uio import DeviceGone, Npu
from pccx_flow.errors import BoardError


class DispatchProgram(Protocol):
    """What `dispatch` needs of a program.

    ``words``: 64-bit words in issue order; each batch ends with `regmap.KICK_WORD`.
    ``nodes``: the graph node of each word (None for a kick marker).
    ``steps``: in order, ``{"kind": "batch", "start": i, "end": j}`` (``words[i:j]``, the kick
    last; ``start`` defaults to the previous batch's end), ``{"kind": "fence"}`` and
    ``{"kind": "host", "node": ..., ...}``. These are the fields and step dicts of the lowered
    ``Program`` (``pccx_flow/board/program/files.py``); read-only here, so any sequence will do.
    """

    @property
    def words(self) -> Sequence[int]: ...

    @property
    def nodes(self) -> Sequence[str | None]: ...

    @property
    def steps(self) -> Sequence[dict]: ...


@dataclass(frozen=True)
class Batch:
    """One batch: its index, the positions of its instruction words and the words."""

    index: int
    first: int  # index in program.words of its first word
    words: tuple[int, ...]  # without the kick marker

    @property
    def last(self) -> int:
        return self.first + len(self.words) - 1


@dataclass(frozen=True)
class Descriptor:
    """A DataMover command to push on `page` before a batch, for the word `word_index`."""

    page: str
    command: int  # 72-bit, see `regmap.encode_command`
    word_index: int


@dataclass
class DispatchReport:
    """What a dispatch did (counts; the seconds are wall time of this host, not the NPU)."""

    batches: int = 0
    words: int = 0
    host_steps: int = 0
    fences: int = 0
    descriptors: int = 0
    polls: int = 0
    pacing_words: int = 0  # kick-marker words written after instructions (reissue FIFO)
    seconds: float = 0.0
    # per batch, wall seconds of this host from the kick to DONE seen (poll granularity)
    batch_seconds: list[float] = field(default_factory=list)


HostStep = Callable[[dict], None]
Descriptors = Callable[[Batch], list[Descriptor]]


def plan(program: DispatchProgram, max_batch: int) -> list[Batch | dict]:
    """The program's steps with batches as `Batch`; malformed batches are one-line errors."""
    out: list[Batch | dict] = []
    prev_end, index = 0, 0
    for step in program.steps:
        if step.get("kind") != "batch":
            out.append(step)
            continue
        start, end = step.get("start", prev_end), step["end"]
        if not 0 <= start < end <= len(program.words):
            raise BoardError(f"batch {index}: words [{start}, {end}) outside the program")
        if program.words[end - 1] != regmap.KICK_WORD:
            raise BoardError(
                f"batch {index}: word {end - 1} ({program.nodes[end - 1]}) is not the kick"
                " marker that must end a batch; re-emit the program"
            )
        words = tuple(program.words[start : end - 1])
        for k, w in enumerate(words):
            if w == regmap.KICK_WORD:
                raise BoardError(f"batch {index}: kick marker at word {start + k} inside the batch")
        if len(words) > max_batch:
            i = start + max_batch
            raise BoardError(
                f"batch {index} (instruction {i}, node {program.nodes[i]}): {len(words)} words"
                f" overflow the {max_batch}-deep command FIFO (the RTL drops word {max_batch + 1}"
                " without a sign); nothing was written to the device"
            )
        out.append(Batch(index, start, words))
        prev_end, index = end, index + 1
    return out


def dispatch(
    program: DispatchProgram,
    npu: Npu,
    *,
    run_host_step: HostStep | None = None,
    descriptors: Descriptors | None = None,
    timeout: float | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> DispatchReport:
    """Run `program` on `npu` batch by batch (see the module docstring).

    `run_host_step` runs each host step (it gets the step's dict); `descriptors` gives the
    DataMover commands to push before a batch; `timeout` overrides the profile's poll
    timeout; `progress(done, total)` is called after each batch.
    """
    d = Dispatcher(program, npu, run_host_step=run_host_step, descriptors=descriptors,
                   timeout=timeout, progress=progress)  # fmt: skip
    d.start()
    for step in d.steps:
        d.run(step)
    return d.finish()


class Dispatcher:
    """`dispatch` one program step at a time, so each can be a task of its own (a Dask task
    per batch on the worker that owns the device, `pccx_flow.cluster`). `start` once, `run`
    every step of `steps` in order, `finish` for the report."""

    def __init__(self, program: DispatchProgram, npu: Npu, *, run_host_step=None,
                 descriptors=None, timeout=None, progress=None):  # fmt: skip
        self.program, self.npu = program, npu
        self.steps = plan(program, npu.regs.max_batch)
        n_host = sum(1 for s in self.steps if isinstance(s, dict) and s.get("kind") == "host")
        if n_host and run_host_step is None:
            raise BoardError(
                f"the program has {n_host} host steps; pass run_host_step to run them"
            )
        self.run_host_step, self.descriptors = run_host_step, descriptors
        self.timeout, self.progress = timeout, progress
        self.total = sum(1 for s in self.steps if isinstance(s, Batch))
        self.report = DispatchReport()
        self.t0 = time.perf_counter()

    def start(self) -> None:
        self.t0 = time.perf_counter()
        _guard(self.npu, None, self.program, lambda: _start_clean(self.npu))

    def run(self, step: Batch | dict) -> float:
        """Run one step; returns its wall seconds on this host (a batch: kick to DONE)."""
        report = self.report
        if isinstance(step, Batch):
            npu, descriptors, timeout = self.npu, self.descriptors, self.timeout
            _guard(
                npu, step, self.program,
                lambda: run_batch(npu, step, descriptors, timeout, report),
            )  # fmt: skip
            report.batches += 1
            report.words += len(step.words)
            if self.progress is not None:
                self.progress(report.batches, self.total)
            return report.batch_seconds[-1]
        kind = step.get("kind")
        if kind == "fence":
            report.fences += 1  # every batch already waited for DONE
            return 0.0
        if kind == "host":
            t = time.perf_counter()
            self.run_host_step(step)
            report.host_steps += 1
            return time.perf_counter() - t
        raise BoardError(f"unknown program step kind {kind!r}; re-emit")

    def finish(self) -> DispatchReport:
        self.report.polls = self.npu.polls
        self.report.seconds = time.perf_counter() - self.t0
        return self.report


def _start_clean(npu: Npu) -> None:
    left = npu.reset()
    if left:
        raise BoardError(f"device not clean before the first batch: {'; '.join(left)}")


def run_batch(
    npu: Npu,
    batch: Batch,
    descriptors: Descriptors | None,
    timeout: float | None,
    report: DispatchReport,
) -> None:
    npu.wait_idle(timeout)
    pushed = descriptors(batch) if descriptors is not None else []
    for d in pushed:
        npu.push_command(d.page, d.command)
    report.descriptors += len(pushed)
    pace = npu.regs.command_fifo == "reissue"
    for k, word in enumerate(batch.words):
        npu.write_instruction(word)
        if pace and k + 1 < len(batch.words):
            # the public AXIL_CMD_IN decodes the last word written again every cycle until
            # the next write (IF_queue push_en/pop_en never clear): end that at once with a
            # word the decoder drops (opcode 0x8); the kick ends the last word's
            npu.write_instruction(regmap.KICK_WORD)
            report.pacing_words += 1
    kicked = time.perf_counter()
    npu.kick()
    status = npu.wait_done(timeout)
    report.batch_seconds.append(time.perf_counter() - kicked)
    if status & npu.regs.error_mask:
        raise BoardError(f"the NPU set its ERROR bit (status {status:#010x})")
    for page in npu.regs.pages:
        sticky = regmap.sticky_errors(npu.flags(page))
        if sticky:
            users = [d for d in pushed if d.page == page]
            raise _AtWord(
                users[0].word_index if users else None,
                f"sticky DMA error {sticky:#x} on DataMover page {page}",
            )
    for d in pushed:
        word = npu.pop_status(d.page)
        want = regmap.COMMAND_FIELDS[0].get(d.command)
        if word is None:
            raise _AtWord(d.word_index, f"no DataMover status on page {d.page} after DONE")
        got = regmap.decode_status(word)
        if got.tag != want or not got.okay:
            raise _AtWord(
                d.word_index,
                f"DataMover page {d.page} status {word:#04x} (tag {got.tag}, expected {want};"
                f" errors: {', '.join(got.errors) or 'none'}, okay={got.okay})",
            )


class _AtWord(BoardError):
    """A batch failure that can be pinned on one word of the batch."""

    def __init__(self, word_index: int | None, message: str):
        super().__init__(message)
        self.word_index = word_index


def _guard(
    npu: Npu, batch: Batch | None, program: DispatchProgram, action: Callable[[], None]
) -> None:
    """Run `action`; turn any board failure into one line naming where, after a reset."""
    try:
        action()
    except BoardError as exc:
        if batch is None:
            where = "before the first batch"
        else:
            i = getattr(exc, "word_index", None)
            i = batch.last if i is None else i
            roles = getattr(program, "roles", None)
            if roles is not None and roles[i] == "done" and i > batch.first:
                i -= 1  # a DONE marker (`lower`) does no work: name the batch's last real word
            where = f"batch {batch.index} (instruction {i}, node {program.nodes[i]})"
        raise BoardError(f"{where}: {exc}; {_reset_note(npu)}") from None


def _reset_note(npu: Npu) -> str:
    if not npu.window.alive():
        return "the device is gone, nothing to reset: reload the bitstream and check dmesg"
    try:
        left = npu.reset()
    except DeviceGone as exc:
        return f"the device could not be reset ({exc})"
    if left:
        return f"device reset except: {', '.join(left)}"
    return "device reset (DataMover statuses drained, sticky errors cleared)"

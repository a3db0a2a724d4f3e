"""Cycle-approximate timing replay of an emitted program under one issue model.

The replay walks the program's steps in order on one host thread, as a driver would
(pccx-v002.md §5), and lets an issue model (`issue`) decide when the device starts each
instruction:

- a **batch**: the host writes each instruction word over AXI-Lite (``issue.
  word_write_axi_clocks`` each) into the 8-deep command FIFO (``registers.max_batch``) —
  waiting for room when the FIFO is still full of earlier words (on the as-built RTL a word
  written into a full FIFO is dropped; the replay counts these waits) — then writes the kick
  (``issue.kick_write_axi_clocks``); the batch's words reach the device at the kick;
- a **fence**: the host polls the status word (``issue.poll_read_axi_clocks`` per read, back to
  back) until every instruction written so far has completed; the fence ends with the first
  poll issued after that. Under ``rtl`` DONE comes only from CVO completion (pccx-v002.md §5):
  a fence whose last-completing instruction is not a CVO cannot see completion on the as-built
  hardware (the host would wait for the poll timeout, ``registers.poll_timeout_seconds``, or
  read a stale DONE); the replay charges it as if completion were visible and counts it as
  ``blind_fences``. Under ``spec`` and ``decoupled`` the status reflects every engine (the
  proposal's completion collector);
- a **host step**: the host runs it (the scheduler's host cost); it starts when the host gets
  there, or later if an NPU result it reads is still being written (counted as
  ``host_hazards``: the program lacks a fence there).

The host's costs are the same under all three models, so the models differ only in how the
device issues. Durations are the scheduler's cost functions applied to the sizes in the words
(`footprint`). Every cycle count is a model estimate on the named profile: pccx has never
timed an instruction on a board.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field

from pccx_flow.board.program.files import Program, ProgramFileError
from pccx_flow.board.timing.footprint import (
    Footprint,
    footprints,
    host_step_cycles,
    host_step_regions,
)
from pccx_flow.board.timing.hazards import Hazards
from pccx_flow.board.timing.issue import MODELS, RTL_WRITE_TO_DECODE, Placed, make_model
from pccx_flow.errors import InputError, ProfileError
from pccx_flow.hardware.cost import axi_to_core
from pccx_flow.hardware.profile import Profile
from pccx_flow.traces.timeline import API_CALL, BARRIER_SYNC, UNKNOWN, Event, Timeline

HOST_LANE = "host0"  # host steps, named as the list schedule names its host lane
HOST_IO_LANE = "host-io"  # the host's register writes and status polls


@dataclass(frozen=True)
class HostEvent:
    """One interval of the host thread: writing a batch, polling a fence or a host step."""

    kind: str  # "batch", "fence", "host"
    name: str
    start: int
    finish: int


@dataclass
class Replay:
    """The timing of one program under one issue model (cycles, model estimate)."""

    model: str
    profile: str
    core_hz: float
    meta: dict
    placed: list[Placed] = field(default_factory=list)
    host: list[HostEvent] = field(default_factory=list)
    # every register write of the host: (cycle it starts, "instruction" | "pacing" | "kick",
    # word index or None), as `dispatch` makes them (what `pccx-flow cosim` drives)
    writes: list[tuple[int, str, int | None]] = field(default_factory=list)
    counters: dict = field(default_factory=dict)

    @property
    def makespan(self) -> int:
        return max([e.finish for e in self.host] + [p.finish for p in self.placed], default=0)

    @property
    def label(self) -> str:
        return f"model estimate, profile {self.profile}"


def _core(axi_clocks: int, profile: Profile) -> int:
    return math.ceil(axi_to_core(axi_clocks, profile))


def check_replayable(program: Program, profile: Profile) -> None:
    """Fail with one line when the profile or the program cannot be replayed."""
    if profile.issue is None:
        raise ProfileError(
            f"profile {profile.name} has no [issue] table (host write, kick and poll costs); "
            "add one (see the built-in v002-spec.toml) or use a built-in profile"
        )
    if not program.steps:
        raise ProgramFileError("the program has no steps (no batches); re-run emit")


HOST_WAITS = ("fences", "every-batch")


def replay(
    program: Program,
    profile: Profile,
    model: str,
    fps: list[Footprint | None] | None = None,
    host_waits: str = "fences",
) -> Replay:
    """Replay `program` on `profile` under issue model `model` (see the module docstring).

    `host_waits`: ``fences`` — the host polls for DONE only at the program's fences (a driver
    that trusts the FIFO's depth); ``every-batch`` — it waits for DONE after every batch, as
    `pccx_flow.board.device.dispatch` does (the command FIFO has no level register, and on the
    as-built RTL a word the decoder takes while a uop is in flight overwrites it).
    """
    if model not in MODELS:
        raise InputError(f"unknown issue model {model!r}; use one of {', '.join(MODELS)}")
    if host_waits not in HOST_WAITS:
        raise InputError(f"unknown host wait rule {host_waits!r}; use {' or '.join(HOST_WAITS)}")
    check_replayable(program, profile)
    if fps is None:
        fps = footprints(program, profile)
    iss = profile.issue
    write_c = _core(iss.word_write_axi_clocks, profile)
    kick_c = _core(iss.kick_write_axi_clocks, profile)
    poll_c = _core(iss.poll_read_axi_clocks, profile)
    fifo_depth = profile.registers.max_batch
    pace = getattr(profile.program, "command_fifo", "ideal") == "reissue"
    dev = make_model(model, profile)
    hz = Hazards()
    out = Replay(model, profile.name, float(profile.core_hz),
                 {**program.meta, "host_waits": host_waits})  # fmt: skip
    c: dict = defaultdict(int)
    leave: list[int] = []  # when each instruction word left the command FIFO, in order
    t = 0  # the host thread's clock
    since_fence: list[Placed] = []
    latest = 0  # the last finish of any instruction placed so far
    batch_no = 0
    for step in program.steps:
        kind = step.get("kind")
        if kind == "batch":
            start, end = int(step["start"]), int(step["end"])
            if not 0 <= start < end <= len(fps) or fps[end - 1] is not None:
                raise ProgramFileError(
                    f"batch {batch_no} (words {start}..{end - 1}) does not end with a kick "
                    "marker; the program is damaged, re-run emit"
                )
            words = [fp for fp in fps[start : end - 1] if fp is not None]
            if len(words) > fifo_depth:
                raise ProgramFileError(
                    f"batch {batch_no} has {len(words)} words but the command FIFO holds "
                    f"{fifo_depth}: the words past {fifo_depth} would be dropped; re-run emit"
                )
            t0 = t
            written = []  # when each word's write starts
            indices = [i for i in range(start, end - 1) if fps[i] is not None]
            for n, _ in enumerate(words):
                k = len(leave)
                room = leave[k - fifo_depth] if k >= fifo_depth else 0
                if room > t:
                    c["fifo_full_waits"] += 1
                    c["fifo_full_cycles"] += room - t
                    t = room
                written.append(t)
                out.writes.append((t, "instruction", indices[n]))
                t += write_c
                c["word_write_cycles"] += write_c
                leave.append(-1)  # placeholder until the word is dispatched
                if pace and n + 1 < len(words):  # a re-issuing FIFO: end the word's repeats
                    out.writes.append((t, "pacing", None))
                    t += write_c
                    c["pacing_write_cycles"] += write_c
            out.writes.append((t, "kick", None))
            t += kick_c
            c["kick_cycles"] += kick_c
            out.host.append(HostEvent("batch", f"batch {batch_no}", t0, t))
            first = len(leave) - len(words)
            for j, fp in enumerate(words):
                ready = hz.ready(
                    reads=fp.reads, writes=fp.writes, slots_read=fp.slots_read,
                    slots_written=fp.slots_written,
                )  # fmt: skip
                # the RTL decodes a word as it is written (calibrated by cosim); the other
                # models release the batch at its kick
                release = written[j] + RTL_WRITE_TO_DECODE if model == "rtl" else t
                p = dev.place(fp, release, ready)
                hz.record(
                    reads=fp.reads, writes=fp.writes, slots_read=fp.slots_read,
                    slots_written=fp.slots_written, finish=p.finish,
                )  # fmt: skip
                leave[first + j] = p.dispatch
                out.placed.append(p)
                since_fence.append(p)
                latest = max(latest, p.finish)
                c["issue_stall_cycles"] += p.issue_stall
                c[f"bound_by_{p.binding}"] += 1
            batch_no += 1
            if host_waits == "every-batch":  # poll until the batch is done, as dispatch does
                t0 = t
                polls = max(0, math.ceil((latest - t0) / poll_c)) + 1
                t = t0 + polls * poll_c
                c["batch_waits"] += 1
                c["polls"] += polls
                c["batch_wait_cycles"] += t - t0
                out.host.append(HostEvent("fence", f"wait after batch {batch_no - 1}", t0, t))
        elif kind == "fence":
            t0 = t
            if host_waits == "fences":
                polls = max(0, math.ceil((latest - t0) / poll_c)) + 1
                t = t0 + polls * poll_c
                c["polls"] += polls
            c["fences"] += 1  # under every-batch the batch before it was already waited for
            c["fence_cycles"] += t - t0
            if model == "rtl" and since_fence:
                last = max(since_fence, key=lambda p: p.finish)
                if last.fp.op != "CVO":
                    c["blind_fences"] += 1
            since_fence = []
            out.host.append(HostEvent("fence", f"fence {c['fences']}: {step.get('reason', '')}",
                                      t0, t))  # fmt: skip
        elif kind == "host":
            reads, writes = host_step_regions(step)
            ready = hz.ready(reads=reads, writes=writes, slots_read=(), slots_written=())
            start = t
            if ready > t:
                c["host_hazards"] += 1
                start = ready
            cycles = host_step_cycles(step, profile)
            t = start + cycles
            hz.record(reads=reads, writes=writes, slots_read=(), slots_written=(), finish=t)
            c["host_steps"] += 1
            c["host_cycles"] += cycles
            out.host.append(HostEvent("host", str(step.get("node", "host")), start, t))
        else:
            raise ProgramFileError(f"step of unknown kind {kind!r}; re-run emit")
    c["instructions"] = len(out.placed)
    c["batches"] = batch_no
    out.counters = dict(c)
    return out


def replay_all(
    program: Program, profile: Profile, models: tuple[str, ...] = MODELS,
    host_waits: str = "fences",
) -> dict[str, Replay]:  # fmt: skip
    """Replay under several models, decoding the words once."""
    check_replayable(program, profile)
    fps = footprints(program, profile)
    return {m: replay(program, profile, m, fps, host_waits) for m in models}


# --- where the time goes ---------------------------------------------------------------------

# When several things happen at once, the wall-clock instant is charged to the first of these.
SLICE_ORDER = ("host step", "host writes", "gemv", "gemm", "dma", "sfu", "ctrl")


def time_slices(r: Replay) -> dict[str, int]:
    """The makespan split by what was running: each cycle goes to the first active activity of
    `SLICE_ORDER`; cycles when nothing runs (the host polling, the issue path waiting) go to
    ``waiting``. The values add up to the makespan."""
    spans: list[tuple[int, int, str]] = [
        (p.start, p.finish, p.fp.engine) for p in r.placed if p.finish > p.start
    ]
    for e in r.host:
        if e.kind in ("host", "batch") and e.finish > e.start:
            spans.append((e.start, e.finish, "host step" if e.kind == "host" else "host writes"))
    rank = {name: i for i, name in enumerate(SLICE_ORDER)}
    points: list[tuple[int, int, int]] = []
    for a, b, what in spans:
        points.append((a, 1, rank[what]))
        points.append((b, -1, rank[what]))
    points.sort()
    active = [0] * len(SLICE_ORDER)
    out = {name: 0 for name in (*SLICE_ORDER, "waiting")}
    prev = 0
    for x, delta, k in points:
        if x > prev:
            top = next((i for i, n in enumerate(active) if n), None)
            out[SLICE_ORDER[top] if top is not None else "waiting"] += x - prev
            prev = x
        active[k] += delta
    out["waiting"] += max(0, r.makespan - prev)
    return {k: v for k, v in out.items() if v}


def engine_busy(r: Replay) -> dict[str, int]:
    """Busy cycles per device lane (one instruction at a time on a lane)."""
    out: dict[str, int] = defaultdict(int)
    for p in r.placed:
        out[p.lane] += p.finish - p.start
    return dict(sorted(out.items()))


def summary(r: Replay) -> dict:
    """Plain data for printing and JSON: makespan, tok/s and where the time goes."""
    ms = r.makespan
    seconds = ms / r.core_hz if r.core_hz else None
    slices = time_slices(r)
    biggest = max(slices, key=slices.__getitem__) if slices else None
    return {
        "model": r.model,
        "profile": r.profile,
        "estimate": r.label,
        "host_waits": r.meta.get("host_waits", "fences"),
        "makespan_cycles": ms,
        "seconds": seconds,
        "tokens_per_second": (1.0 / seconds) if seconds else None,
        "time_slices_cycles": slices,
        "biggest_cost": biggest,
        "engine_busy_cycles": engine_busy(r),
        "counters": r.counters,
    }


# --- traces ----------------------------------------------------------------------------------


def replay_timeline(r: Replay) -> Timeline:
    """The replay as a `Timeline`: one event per instruction on its lane, host steps on
    ``host0``, batch writes and fence polls on ``host-io``."""
    lanes: list[str] = []
    events: list[Event] = []
    for p in r.placed:
        if p.lane not in lanes:
            lanes.append(p.lane)
        events.append(Event(p.lane, p.start, p.finish - p.start, p.fp.kind, p.fp.name))
    order = {cls: i for i, cls in enumerate(("gemv", "gemm", "sfu", "dma", "ctrl"))}
    lanes.sort(key=lambda name: (order.get(name.rstrip("0123456789"), 9), name))
    kinds = {"batch": API_CALL, "fence": BARRIER_SYNC, "host": UNKNOWN}
    for e in r.host:
        lane = HOST_LANE if e.kind == "host" else HOST_IO_LANE
        events.append(Event(lane, e.start, e.finish - e.start, kinds[e.kind], e.name))
    lanes += [HOST_LANE, HOST_IO_LANE]
    source = f"pccx-flow replay, {r.model} issue model ({r.label})"
    return Timeline(lanes, events, r.core_hz, source)

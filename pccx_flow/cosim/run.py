"""One co-simulation end to end: replay, stimulus, build, simulate, compare.

The program is replayed under the calibrated ``rtl`` issue model with the host waiting as
`host_waits` says; its host writes drive the controller RTL; the RTL's decodes are matched
to the words (`pccx_flow.cosim.compare`), and each word's decode cycle is set beside the
model's start. "Controller-bound" words are those whose model start is set by their
release (the write reaching the decoder), not by data, a lane, a weight port or the issue
rule that waits for the previous load-path instruction to complete: there the model claims
to know when the controller issues, and the RTL can check it. Words held by that issue
rule are reported apart: the controller has no completion input, so the RTL decodes them
at once and the wait is the model's assumption of what a correct controller must pay. The
engines are not simulated (the controller level), so where a start depends on an engine's
completion the RTL has nothing to compare.
"""

from __future__ import annotations

import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path

from pccx_flow.board.timing.replay import Replay, replay, replay_timeline
from pccx_flow.cosim.compare import Match, gap_table, match_decodes, parse_log
from pccx_flow.cosim.simulate import Model, build_model, run_model
from pccx_flow.cosim.stimulus import INSTRUCTION, host_writes, stimulus_text
from pccx_flow.traces.timeline import Event, Timeline

CONTROLLER_BOUND = ("release",)


@dataclass
class CosimReport:
    model: Model
    replay: Replay
    match: Match
    writes: int
    cycles: int
    sim_seconds: float
    gaps: dict
    bound_gaps: dict
    issue_gaps: dict  # words held by the model's completion wait
    bound_error: float | None  # median |model - RTL| / RTL cycle on controller-bound words


def cosim(program, profile, rtl: Path, verilator: str, *, host_waits: str = "fences",
          mutate: tuple[int, int] | None = None) -> CosimReport:  # fmt: skip
    """Co-simulate `program` (see the module docstring). `mutate` = (word index, bit) flips
    one bit of one word in what is driven, to show that a wrong word is caught."""
    r = replay(program, profile, "rtl", host_waits=host_waits)
    writes = host_writes(program, profile, r)
    if mutate is not None:
        index, bit = mutate
        writes = [w if w.word != index else type(w)(w.cycle, w.address, w.data ^ (1 << bit),
                                                     w.kind, w.word) for w in writes]  # fmt: skip
    model = build_model(rtl, verilator)
    with tempfile.TemporaryDirectory(prefix="pccx-flow-cosim-") as work:
        text, seconds = run_model(model, stimulus_text(writes), Path(work))
    log = parse_log(text)
    written = {w.word: log.writes[n] for n, w in enumerate(writes)
               if w.kind == INSTRUCTION and n in log.writes}  # fmt: skip
    match = match_decodes(program, log, written)
    starts = {p.fp.index: p.start for p in r.placed}
    bound = {p.fp.index: p.start for p in r.placed if p.binding in CONTROLLER_BOUND}
    held = {p.fp.index: p.start for p in r.placed if p.binding == "issue"}
    errors = [abs(bound[i] - c) / max(c, 1) for i, c in match.issued.items() if i in bound]
    return CosimReport(
        model, r, match, len(log.writes), log.end, seconds, gap_table(match.issued, starts),
        gap_table(match.issued, bound), gap_table(match.issued, held),
        statistics.median(errors) if errors else None,
    )  # fmt: skip


def rtl_timeline(report: CosimReport) -> Timeline:
    """The replay's timeline with each instruction moved to the cycle the RTL decoded it
    (same lanes, names and durations), for `pccx-flow trace diff` against the replay's."""
    base = replay_timeline(report.replay)
    by_name = {p.fp.name: report.match.issued.get(p.fp.index) for p in report.replay.placed}
    events = [
        Event(e.lane, by_name[e.name], e.duration, e.kind, e.name)
        if by_name.get(e.name) is not None else e
        for e in base.events
    ]
    source = "pccx-v002 controller RTL under Verilator: decode cycles (engines not simulated)"
    return Timeline(base.lanes, events, base.clock_hz, source)

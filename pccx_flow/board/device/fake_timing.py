"""How long the fake device says each batch took: the replay's issue model, batch by batch.

A board's host can only time a batch from its kick to the DONE it polls (the register map
has no cycle counter, pccx-v002.md §5). The fake device runs the emulator, whose wall time
on this CPU says nothing about the NPU, so it reports modelled cycles instead: the program
replayed (`pccx_flow.board.timing.replay`) with the host waiting after every batch, as
`dispatch` does, so each batch starts on an idle device at its kick. A batch's cycles are
its last word's finish minus that kick; each word keeps its own modelled interval. Every
number here is a model estimate on the named profile, never a measurement.
"""

from __future__ import annotations

from dataclasses import dataclass

from pccx_flow.board.isa.target import AS_BUILT
from pccx_flow.board.timing.replay import replay


@dataclass(frozen=True)
class BatchCycles:
    """One batch's modelled time: cycles from kick to its last word's finish, and per word
    (word index, node, lane class, start, finish) in cycles after the kick."""

    cycles: int
    words: tuple[tuple[int, str, str, int, int], ...]


def issue_model_for(program) -> str:
    """The issue model that stands for the device: the RTL's for a program made for the RTL
    as built, the specification's otherwise."""
    return "rtl" if program.meta.get("target") == AS_BUILT.name else "spec"


def batch_cycles(program, profile) -> list[BatchCycles]:
    """Per batch of `program`, in order, its modelled cycles on `profile` (see the module
    docstring)."""
    r = replay(program, profile, issue_model_for(program), host_waits="every-batch")
    ends = [int(s["end"]) for s in program.steps if s.get("kind") == "batch"]
    out: list[BatchCycles] = []
    placed = iter(sorted(r.placed, key=lambda p: p.fp.index))
    pending = next(placed, None)
    for end in ends:
        words = []
        release = None
        while pending is not None and pending.fp.index < end:
            p = pending
            release = p.release if release is None else release
            words.append((p.fp.index, p.fp.node, p.fp.engine, p.start - release,
                          p.finish - release))  # fmt: skip
            pending = next(placed, None)
        out.append(BatchCycles(max((w[4] for w in words), default=0), tuple(words)))
    return out

"""The host's writes to the controller, timed by the replay's host timeline.

`dispatch` writes each batch's instruction words to the instruction register (after each
word but the last a kick-marker word when the profile's command FIFO re-issues, which the
decoder drops), then the kick register. The replay (`pccx_flow.board.timing.replay`)
records when the host starts each of those writes: after the earlier writes, the fences'
polls and the host steps, on the program's profile (`Replay.writes`). A write's cycle here
is the earliest the testbench may start it (it also waits for the AXI-Lite handshake of the
write before), in core cycles.
"""

from __future__ import annotations

from dataclasses import dataclass

from pccx_flow.board.isa import KICK_MARKER
from pccx_flow.board.timing.replay import Replay

INSTRUCTION, KICK, PACING = "instruction", "kick", "pacing"


@dataclass(frozen=True)
class Write:
    """One AXI-Lite write: not before `cycle`, to `address`, of `data`; `word` is the
    program's word index for an instruction (None for a kick or a pacing word)."""

    cycle: int
    address: int
    data: int
    kind: str
    word: int | None


def host_writes(program, profile, replay: Replay) -> list[Write]:
    """Every write `dispatch` makes for `program`, at the replay's host times."""
    regs = profile.registers
    out = []
    for cycle, kind, word in replay.writes:
        if kind == INSTRUCTION:
            out.append(Write(cycle, regs.instruction_offset, program.words[word], kind, word))
        elif kind == PACING:
            out.append(Write(cycle, regs.instruction_offset, KICK_MARKER, kind, None))
        else:
            out.append(Write(cycle, regs.kick_offset, KICK_MARKER, KICK, None))
    return out


def stimulus_text(writes: list[Write]) -> str:
    """The testbench's stimulus file: ``cycle address data`` per line (hex address, data)."""
    return "".join(f"{w.cycle} {w.address:x} {w.data:016x}\n" for w in writes)

"""What the RTL decoded against what the program says, and when against the replay.

The testbench's log (`pccx_flow.cosim.harness`) lists every decoded uop (cycle, opcode,
60-bit body). `match_decodes` walks it against the program's instruction words in issue
order: a uop equal to the next word is that word's issue; a uop equal to the word before
is the public `AXIL_CMD_IN` decoding the last word written again (its `IF_queue`
push/pop enables are never cleared, so the word repeats until the next write): counted as
a re-issue, not an error; anything else is the first divergence, named by word index,
graph node and the first field that differs in the program's own decode.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from pccx_flow.board.isa import KICK_MARKER, IsaError, decode

BODY_BITS = 60


@dataclass(frozen=True)
class Decoded:
    cycle: int
    opcode: int
    body: int

    @property
    def word(self) -> int:
        return self.opcode << BODY_BITS | self.body


@dataclass
class SimLog:
    decodes: list[Decoded] = field(default_factory=list)
    writes: dict[int, int] = field(default_factory=dict)  # write number -> cycle taken
    end: int = 0


def parse_log(text: str) -> SimLog:
    """The testbench's output file."""
    log = SimLog()
    for line in text.splitlines():
        parts = line.split()
        if not parts:
            continue
        if parts[0] == "D":
            log.decodes.append(Decoded(int(parts[1]), int(parts[2]), int(parts[3], 16)))
        elif parts[0] == "W":
            log.writes[int(parts[1])] = int(parts[2])
        elif parts[0] == "E":
            log.end = int(parts[1])
    return log


@dataclass
class Match:
    """Per program word (instruction words only, in order): its first decode cycle."""

    issued: dict[int, int] = field(default_factory=dict)  # word index -> cycle
    reissues: int = 0
    fields_checked: int = 0
    mismatch: str | None = None  # the first divergence, one line


def first_field_difference(want: int, got: int) -> str:
    """The first field of `want`'s decode that `got` has differently (or the opcodes)."""
    try:
        a = decode(want)
    except IsaError as exc:
        return f"the program's word does not decode ({exc})"
    try:
        b = decode(got)
    except IsaError:
        return f"opcode: program {a.op}, RTL word {got:#018x} has no known opcode"
    if a.op != b.op:
        return f"opcode: program {a.op}, RTL {b.op}"
    for name, value in a.fields.items():
        if b.fields.get(name) != value:
            return f"{a.op} field {name}: program {value}, RTL {b.fields.get(name)}"
    return f"{a.op}: bits outside the fields differ ({want:#018x} vs {got:#018x})"


def match_decodes(program, log: SimLog, written: dict[int, int] | None = None) -> Match:
    """Walk the RTL's decodes against the program's words (see the module docstring).

    `written` (word index -> the cycle its write was taken) tells a word from the repeats
    of an equal word before it: a uop decoded before a word was written is not that word."""
    words = [i for i, w in enumerate(program.words) if w != KICK_MARKER]
    written = written or {}
    out = Match()
    j = 0
    for d in log.decodes:
        fresh = j < len(words) and d.cycle >= written.get(words[j], -1)
        if fresh and d.word == program.words[words[j]]:
            out.issued[words[j]] = d.cycle
            out.fields_checked += len(decode(d.word).fields) + 1
            j += 1
            continue
        if j > 0 and d.word == program.words[words[j - 1]]:
            out.reissues += 1
            continue
        if j >= len(words):
            out.mismatch = f"a uop after the program's last word: {d.word:#018x} at cycle {d.cycle}"
            return out
        i = words[j]
        diff = first_field_difference(program.words[i], d.word)
        out.mismatch = f"word {i} (node {program.nodes[i]}), cycle {d.cycle}: {diff}"
        return out
    if j < len(words):
        i = words[j]
        out.mismatch = f"word {i} (node {program.nodes[i]}) and {len(words) - j - 1} after it " \
            "were never decoded"  # fmt: skip
    return out


def gap_table(issued: dict[int, int], model_start: dict[int, int]) -> dict:
    """Model start minus RTL decode, per word both have: count, min, median, p90, max."""
    gaps = sorted(model_start[i] - c for i, c in issued.items() if i in model_start)
    if not gaps:
        return {"words": 0}
    p90 = gaps[min(len(gaps) - 1, int(0.9 * len(gaps)))]
    return {"words": len(gaps), "min": gaps[0], "median": statistics.median(gaps), "p90": p90,
            "max": gaps[-1]}  # fmt: skip

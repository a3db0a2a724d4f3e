"""Growing prefixes of a program for board bring-up: MEMSET only, + MEMCPY, + GEMV, + CVO, ...

When a board run goes wrong, the first thing to learn is which kind of instruction the board
gets wrong first. `bisect_programs` cuts a lowered program into prefixes that each stop right
after the first instruction of a kind:

- ``memset``: the MEMSET words before the first other instruction;
- ``memcpy``, ``gemv``, ``cvo``: everything up to and including the first MEMCPY / GEMV / CVO
  (a DONE marker is not the first CVO; a cut batch gets its own marker, as `lower` would);
- ``layer0``: everything up to the last instruction or host step of layer 0 (the schedule may
  interleave other layers' early nodes, which are then included);
- ``step``: the whole program.

A prefix keeps the program's word indices (word ``i`` is the same word in every prefix and
in the full program), closes its last batch with a kick and ends with a fence. Since the
program is in issue order, everything a prefix's instructions read is produced or loaded
within the prefix. `prefix_golden` emulates a prefix (no logits needed) and records, per
instruction, the L2 words it writes (`pccx_flow.board.emulator.golden`).
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass

from pccx_flow import atomic
from pccx_flow.board.emulator.emulate import Emulator
from pccx_flow.board.isa import KICK_MARKER, decode
from pccx_flow.board.program.files import Program
from pccx_flow.board.program.lower import DONE_NODE
from pccx_flow.errors import InputError

STAGES = ("memset", "memcpy", "gemv", "cvo", "layer0", "step")


@dataclass(frozen=True)
class Stage:
    """One prefix: its name, the program and what it holds."""

    name: str
    program: Program
    instructions: int
    batches: int
    host_steps: int


def _ops(program: Program) -> list[str | None]:
    """The opcode of each instruction a node or a host copy issued (None: kick, DONE marker)."""
    return [
        None if w == KICK_MARKER or r == "done" else decode(w).op
        for w, r in zip(program.words, program.roles, strict=True)
    ]


def prefix(program: Program, steps_before: int, last_word: int | None, name: str) -> Program:
    """Steps ``[0, steps_before)``, then (if `last_word`) its batch up to that word, a fence."""
    steps = [dict(s) for s in program.steps[:steps_before]]
    end = 0
    for s in steps:
        if s["kind"] == "batch":
            end = s["end"]
    words = list(program.words[:end])
    nodes, roles = list(program.nodes[:end]), list(program.roles[:end])
    if last_word is not None:
        start = end
        words += program.words[start : last_word + 1]
        nodes += program.nodes[start : last_word + 1]
        roles += program.roles[start : last_word + 1]
        marker = _done_marker(program)
        if marker is not None and decode(words[-1]).op != "CVO":  # DONE must still come
            words.append(marker)
            nodes.append(DONE_NODE)
            roles.append("done")
        words.append(KICK_MARKER)
        nodes.append(None)
        roles.append("kick")
        steps.append({"kind": "batch", "start": start, "end": len(words)})
    steps.append({"kind": "fence"})
    kept = set(range(len(words)))
    ops = Counter(decode(w).op for w, r in zip(words, roles, strict=True) if r == "node")
    summary = {
        **program.summary,
        "instructions": sum(ops.values()),
        "by_opcode": dict(sorted(ops.items())),
        "slot_memsets": sum(1 for r in roles if r == "slot"),
        "words": len(words),
        "batches": sum(1 for s in steps if s["kind"] == "batch"),
        "fences": sum(1 for s in steps if s["kind"] == "fence"),
        "host_steps": sum(1 for s in steps if s["kind"] == "host"),
    }
    return Program(
        words=words,
        nodes=nodes,
        roles=roles,
        steps=steps,
        meta={**program.meta, "bisect": name},
        l2=program.l2,
        slots=program.slots,
        ddr=program.ddr,
        operands={i: v for i, v in program.operands.items() if i in kept},
        streams={i: copy.deepcopy(v) for i, v in program.streams.items() if i in kept},
        summary=summary,
    )


def _done_marker(program: Program) -> int | None:
    """The program's DONE marker word (`pccx_flow.board.program.lower`), None if it has none."""
    return next((w for w, r in zip(program.words, program.roles, strict=True) if r == "done"), None)


def _cut_at_word(program: Program, word: int) -> tuple[int, int]:
    """(steps before the batch holding `word`, `word`)."""
    for k, s in enumerate(program.steps):
        if s["kind"] == "batch" and s["start"] <= word < s["end"]:
            return k, word
    raise InputError(f"word {word} is in no batch of the program")  # pragma: no cover


def bisect_programs(program: Program) -> list[Stage]:
    """The prefixes of `STAGES` that the program has (a kind it lacks is left out)."""
    ops = _ops(program)
    out: list[tuple[str, Program]] = []
    first_other = next((i for i, op in enumerate(ops) if op not in (None, "MEMSET")), None)
    if first_other is None or first_other > 0:
        last = (len(ops) if first_other is None else first_other) - 1
        while last >= 0 and ops[last] is None:
            last -= 1
        if last >= 0:
            out.append(("memset", prefix(program, *_cut_at_word(program, last), "memset")))
    for name, op in (("memcpy", "MEMCPY"), ("gemv", "GEMV"), ("cvo", "CVO")):
        first = next((i for i, o in enumerate(ops) if o == op), None)
        if first is not None:
            out.append((name, prefix(program, *_cut_at_word(program, first), name)))
    layer_steps = [
        k
        for k, s in enumerate(program.steps)
        if (s["kind"] == "host" and s["node"].startswith("L00."))
        or (
            s["kind"] == "batch"
            and any((n or "").startswith("L00.") for n in program.nodes[s["start"] : s["end"]])
        )
    ]
    if layer_steps:
        out.append(("layer0", prefix(program, layer_steps[-1] + 1, None, "layer0")))
    # in the order the program reaches them (a CVO may come before the first GEMV); a stage
    # no longer than the one before it says nothing new
    out.sort(key=lambda np_: len(np_[1].words))
    out.append(("step", program))
    stages, seen = [], -1
    for name, p in out:
        if len(p.words) > seen or name == "step":
            seen = len(p.words)
            stages.append(
                Stage(
                    name,
                    p,
                    sum(1 for r in p.roles if r != "kick"),
                    sum(1 for s in p.steps if s["kind"] == "batch"),
                    sum(1 for s in p.steps if s["kind"] == "host"),
                )
            )
    return stages


def prefix_golden(program: Program, weights, k_past, v_past, token_id: int, ctx) -> dict:
    """Emulate `program` (logits not needed); per word index, the L2 writes it made."""
    em = Emulator(program, weights, k_past, v_past, token_id)
    em.ctx = ctx
    em.record = {}
    em.run(need_logits=False)
    return em.record


def write_bisect(program: Program, weights, folder) -> list[dict]:
    """Write every stage's program files, golden folder and ``index.json`` into `folder`.

    The KV cache before the step is the reference's for the default token sequence (the one
    `emulate` and `dispatch` use when given no tokens). Returns the index rows.
    """
    import json
    from pathlib import Path

    from pccx_flow.board.emulator.check import default_tokens, reference_prefix
    from pccx_flow.board.emulator.golden import write_golden
    from pccx_flow.board.program.files import write_program
    from pccx_flow.execute.runtime import StepContext

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    position = program.meta["position"]
    tokens = default_tokens(position + 1, weights.config.vocab)
    k_past, v_past, _ = reference_prefix(program, weights, tokens)
    ctx = StepContext(weights.config, program.meta["semantics"], position, tokens[-1], "float32")
    rows = []
    for n, stage in enumerate(bisect_programs(program)):
        stem = f"{n}-{stage.name}"
        write_program(stage.program, folder / f"{stem}.prog")
        record = prefix_golden(stage.program, weights, k_past.copy(), v_past.copy(), tokens[-1],
                               ctx)  # fmt: skip
        golden = write_golden(stage.program, record, folder / f"{stem}.golden")
        rows.append(
            {
                "name": stage.name,
                "program": f"{stem}.prog",
                "golden": f"{stem}.golden",
                "instructions": stage.instructions,
                "batches": stage.batches,
                "host_steps": stage.host_steps,
                "golden_instructions": golden,
                "last_word": len(stage.program.words) - 1,
                "target": stage.program.meta.get("target", "spec"),
            }
        )
    index = {"program": program.meta, "tokens": tokens, "stages": rows}
    atomic.write_text(folder / "index.json", json.dumps(index, indent=1) + "\n")
    return rows


def format_table(rows: list[dict]) -> str:
    """The stages as a table: name, instructions, batches, host steps, golden, file."""
    targets = sorted({r.get("target", "spec") for r in rows})
    lines = [
        f"bring-up prefixes for target {', '.join(targets)} (dispatch them on a device whose"
        " profile reads words the same way)",
        f"{'stage':8s} {'instr':>6s} {'batches':>7s} {'host':>5s} {'golden':>6s}  program",
    ]
    for r in rows:
        lines.append(
            f"{r['name']:8s} {r['instructions']:6d} {r['batches']:7d} {r['host_steps']:5d}"
            f" {r['golden_instructions']:6d}  {r['program']}"
        )
    return "\n".join(lines)

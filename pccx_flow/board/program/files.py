"""A lowered program and its files: ``.bin`` words, ``.memh`` and a JSON sidecar.

The word stream is what the host writes to the NPU, in order: instruction words, and after
each batch of at most 8 the kick marker (on the board the kick goes to the kick register, not
the FIFO; in the stream it marks the batch boundary). Everything else the host needs to run
the program is in the sidecar: the sequence of batches, fences (wait for DONE) and host steps,
the node each word came from, the L2 map, the constant-slot log, the DDR image layout and the
weight/KV stream each GEMV or MEMCPY word uses (what the host programs into the DataMover).

Files for ``-o step.prog``: ``step.prog`` (little-endian 64-bit words), ``step.memh`` (one
16-digit hex word per line, as ``$readmemh`` and pccx's smoke testbench read it) and
``step.json`` (the sidecar, which also records the words' count and SHA-256 so a truncated or
corrupted word file is caught).
"""

from __future__ import annotations

import hashlib
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

from pccx_flow.board.isa import KICK_MARKER, IsaError, decode, disassemble
from pccx_flow.errors import PccxFlowError

FORMAT = "pccx-flow-program"
VERSION = 2  # 2: host steps exchange tensors with L2 by MEMCPY words (host I/O area)


class ProgramFileError(PccxFlowError):
    """A program file that is missing, truncated, corrupted or made for something else."""


@dataclass
class Program:
    """Words in issue order (kick markers included) plus everything the host needs to run them.

    ``nodes[i]`` is the graph node word ``i`` came from (None for a kick); ``roles[i]`` says
    why it is there (``node`` = the node's own instruction, ``slot`` = a MEMSET the lowering
    inserted to fill a constant slot, ``kick``).
    """

    words: list[int] = field(default_factory=list)
    nodes: list[str | None] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)
    meta: dict = field(default_factory=dict)
    l2: dict[str, dict] = field(default_factory=dict)
    slots: list[dict] = field(default_factory=list)
    ddr: dict = field(default_factory=dict)
    operands: dict[int, dict] = field(default_factory=dict)
    streams: dict[int, dict] = field(default_factory=dict)
    summary: dict = field(default_factory=dict)

    def to_sidecar(self) -> dict:
        data = words_bytes(self.words)
        return {
            "format": FORMAT,
            "version": VERSION,
            "meta": self.meta,
            "n_words": len(self.words),
            "sha256": hashlib.sha256(data).hexdigest(),
            "nodes": self.nodes,
            "roles": self.roles,
            "steps": self.steps,
            "l2": self.l2,
            "slots": self.slots,
            "ddr": self.ddr,
            "operands": {str(k): v for k, v in self.operands.items()},
            "streams": {str(k): v for k, v in self.streams.items()},
            "summary": self.summary,
        }


def words_bytes(words: list[int]) -> bytes:
    """The words as little-endian 64-bit values."""
    return struct.pack(f"<{len(words)}Q", *words)


def memh_text(words: list[int]) -> str:
    """One 16-digit hex word per line (``$readmemh``)."""
    return "".join(f"{w:016x}\n" for w in words)


def sibling_paths(path: Path) -> dict[str, Path]:
    """The three files of one program, from any one of them."""
    path = Path(path)
    if path.suffix in (".json", ".memh"):
        stem = path.with_suffix("")
        candidates = [stem.with_suffix(".prog"), stem.with_suffix(".bin")]
        words = next((c for c in candidates if c.exists()), candidates[0])
    else:
        words = path
    return {"words": words, "memh": words.with_suffix(".memh"), "json": words.with_suffix(".json")}


def write_program(program: Program, path: Path) -> dict[str, Path]:
    """Write ``path`` (words), its ``.memh`` and its ``.json`` sidecar; return the paths."""
    paths = sibling_paths(path)
    paths["words"].write_bytes(words_bytes(program.words))
    paths["memh"].write_text(memh_text(program.words), encoding="ascii")
    paths["json"].write_text(json.dumps(program.to_sidecar(), indent=1) + "\n", encoding="utf-8")
    return paths


def read_program(path: Path) -> Program:
    """Read a program written by `write_program`; any inconsistency is one-line error."""
    paths = sibling_paths(Path(path))
    for kind in ("words", "json"):
        if not paths[kind].is_file():
            raise ProgramFileError(
                f"{paths[kind]}: no such file; a program is the words file plus its .json "
                "sidecar, written by `pccx-flow emit -o FILE`"
            )
    try:
        side = json.loads(paths["json"].read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ProgramFileError(f"{paths['json']}: not valid JSON ({exc}); re-run emit") from None
    if not isinstance(side, dict) or side.get("format") != FORMAT:
        raise ProgramFileError(f"{paths['json']}: not a pccx-flow program sidecar")
    if side.get("version") != VERSION:
        raise ProgramFileError(
            f"{paths['json']}: program format version {side.get('version')!r}, this pccx-flow "
            f"reads version {VERSION}; re-run emit"
        )
    data = paths["words"].read_bytes()
    if len(data) % 8:
        raise ProgramFileError(
            f"{paths['words']}: {len(data)} bytes is not a whole number of 64-bit words "
            "(truncated?); re-run emit"
        )
    n = len(data) // 8
    if n != side.get("n_words"):
        raise ProgramFileError(
            f"{paths['words']}: {n} words but the sidecar lists {side.get('n_words')} "
            "(truncated or from another emit); re-run emit"
        )
    if hashlib.sha256(data).hexdigest() != side.get("sha256"):
        raise ProgramFileError(
            f"{paths['words']}: words differ from the ones the sidecar was written for "
            "(corrupted or edited); re-run emit"
        )
    words = list(struct.unpack(f"<{n}Q", data))
    return Program(
        words=words,
        nodes=side["nodes"],
        roles=side["roles"],
        steps=side["steps"],
        meta=side["meta"],
        l2=side["l2"],
        slots=side["slots"],
        ddr=side["ddr"],
        operands={int(k): v for k, v in side["operands"].items()},
        streams={int(k): v for k, v in side["streams"].items()},
        summary=side["summary"],
    )


def check_words(program: Program) -> None:
    """Every word decodes, and kick markers sit exactly where the batches end."""
    kicks = {s["end"] - 1 for s in program.steps if s["kind"] == "batch"}
    for i, w in enumerate(program.words):
        node = program.nodes[i] if i < len(program.nodes) else None
        if w == KICK_MARKER:
            if i not in kicks:
                raise ProgramFileError(f"word {i}: kick marker inside a batch")
            continue
        if i in kicks:
            raise ProgramFileError(f"word {i} ({node}): expected the kick marker ending a batch")
        try:
            decode(w)
        except IsaError as exc:
            raise ProgramFileError(f"word {i} ({node}): {exc}") from None


def listing(program: Program) -> str:
    """index, word, disassembly and node of every word, with fences and host steps between."""
    # fences and host steps are printed after the batch that precedes them
    after: dict[int, list[str]] = {}
    last_end = -1
    for s in program.steps:
        if s["kind"] == "batch":
            last_end = s["end"] - 1
        elif s["kind"] == "fence":
            after.setdefault(last_end, []).append("        -- fence: wait for DONE --")
        else:
            after.setdefault(last_end, []).append(
                f"        -- host step {s['func']} ({s['node']}) --"
            )
    lines = list(after.get(-1, []))
    for i, w in enumerate(program.words):
        if w == KICK_MARKER:
            lines.append(f"{i:6d}  {w:016x}  KICK")
        else:
            text = disassemble(w)
            who = program.nodes[i] or ""
            role = "" if program.roles[i] == "node" else f" [{program.roles[i]}]"
            lines.append(f"{i:6d}  {w:016x}  {text}  ; {who}{role}")
        lines.extend(after.get(i, []))
    return "\n".join(lines)

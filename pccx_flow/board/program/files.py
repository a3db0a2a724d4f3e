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

The three files are one set: the sidecar names its words file and records the SHA-256 of the
words, of the ``.memh`` and of its own content, so a set mixed from two emits (a kill between
the renames, two emits to one path) or a sidecar edited by hand is refused with one line. They
are written as temporaries first and renamed into place with the sidecar last
(`pccx_flow.atomic`), under a lock on the folder so that concurrent emits to one path follow
one another. An existing file that is not part of a pccx-flow program of the same name is
never overwritten unless the caller says so (`check_overwrite`).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from pccx_flow import atomic
from pccx_flow.board.isa import KICK_MARKER, IsaError, decode, disassemble
from pccx_flow.board.program.schema import ProgramFileError, check_links, check_sidecar
from pccx_flow.files import NotRegularFile, open_regular

__all__ = ["ProgramFileError"]  # defined with the schema, raised by every reader here

FORMAT = "pccx-flow-program"
# 2: host steps exchange tensors with L2 by MEMCPY words (host I/O area); 3: the KV cache
# is head-major, each KV stream one head's rows
VERSION = 3


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

    def __dask_tokenize__(self) -> tuple:
        # Dask names a submitted graph by a token of every task's arguments; walking every
        # word, step, slot and operand dict cost ~0.6-0.9 s per device step (`run --backend
        # device`) for a name only. The words' hash and the object's identity name it; the
        # task keys it travels with carry the step.
        return ("Program", hashlib.sha256(words_bytes(self.words)).hexdigest(), id(self))

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


# A sidecar larger than this is not one emit wrote (an E4B step's is a few MB).
MAX_SIDECAR_BYTES = 1 << 30


def content_hash(side: dict) -> str:
    """SHA-256 of the sidecar's content without its own hash field (canonical JSON)."""
    rest = {k: v for k, v in side.items() if k != "sidecar_sha256"}
    text = json.dumps(rest, sort_keys=True, separators=(",", ":"), allow_nan=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read_sidecar_text(path: Path) -> str:
    try:
        with open_regular(path) as f:
            data = f.read(MAX_SIDECAR_BYTES + 1)
    except NotRegularFile:
        raise ProgramFileError(f"{path} is not a regular file; give a program's .json") from None
    if len(data) > MAX_SIDECAR_BYTES:
        raise ProgramFileError(f"{path}: larger than {MAX_SIDECAR_BYTES:,} B; not a sidecar")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ProgramFileError(f"{path}: not UTF-8 text ({exc.reason}); re-run emit") from None


def check_overwrite(path: Path) -> None:
    """Refuse (one line) to write a program over files that are not a pccx-flow program of
    that name: a words, ``.memh`` or ``.json`` file with no program sidecar beside it, a
    ``.json`` that is something else, or the sidecar of another program (``-o step.prog``
    beside a ``step.bin`` program would replace its ``.json`` and ``.memh``)."""
    paths = sibling_paths_for_writing(path)
    force = "pass --force to replace it, or choose another -o"
    side_path = paths["json"]
    if not os.path.lexists(side_path):
        for kind in ("words", "memh"):
            if os.path.lexists(paths[kind]):
                raise ProgramFileError(
                    f"{paths[kind]} exists and has no program sidecar {side_path.name} beside "
                    f"it, so emit did not make it; {force}"
                )
        return
    try:
        side = json.loads(_read_sidecar_text(side_path))
    except (OSError, ValueError, ProgramFileError):
        side = None
    if not isinstance(side, dict) or side.get("format") != FORMAT:
        raise ProgramFileError(
            f"{side_path} exists and is not a pccx-flow program sidecar; {force}"
        )
    files = side.get("files")
    owner = files.get("words") if isinstance(files, dict) else None
    if owner is not None and owner != paths["words"].name:
        raise ProgramFileError(
            f"{side_path} is the sidecar of the program {owner!r}, not {paths['words'].name!r}; "
            f"writing would break that program: {force}"
        )


def sibling_paths_for_writing(path: Path) -> dict[str, Path]:
    """The three files a program written to `path` occupies: `path` is the words file."""
    path = Path(path)
    return {"words": path, "memh": path.with_suffix(".memh"), "json": path.with_suffix(".json")}


def write_program(program: Program, path: Path, *, force: bool = False) -> dict[str, Path]:
    """Write ``path`` (words), its ``.memh`` and its ``.json`` sidecar; return the paths.

    All three are complete temporaries before the first is renamed into place, the sidecar
    last; unless `force`, files that are not this program's are refused (`check_overwrite`).
    """
    paths = sibling_paths_for_writing(path)
    if len({paths["words"], paths["memh"], paths["json"]}) < 3:
        raise ProgramFileError(
            f"{path}: the words file needs its own name beside .memh and .json; use e.g. "
            f"{paths['words'].with_suffix('.prog').name}"
        )
    data = words_bytes(program.words)
    memh = memh_text(program.words).encode("ascii")
    side = program.to_sidecar()
    side["files"] = {"words": paths["words"].name, "memh_sha256": hashlib.sha256(memh).hexdigest()}
    side["sidecar_sha256"] = content_hash(side)
    text = (json.dumps(side, indent=1, allow_nan=False) + "\n").encode("utf-8")
    with atomic.folder_lock(paths["words"].parent):
        if not force:
            check_overwrite(paths["words"])
        order = [paths["words"], paths["memh"], paths["json"]]
        with atomic.replacing_set(order) as temps:
            for tmp, content in zip(temps, (data, memh, text), strict=True):
                atomic.write_temp(tmp, content)
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
        side = json.loads(_read_sidecar_text(paths["json"]))
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ProgramFileError(f"{paths['json']}: not valid JSON ({exc}); re-run emit") from None
    if not isinstance(side, dict) or side.get("format") != FORMAT:
        raise ProgramFileError(f"{paths['json']}: not a pccx-flow program sidecar")
    if side.get("version") != VERSION:
        raise ProgramFileError(
            f"{paths['json']}: program format version {side.get('version')!r}, this pccx-flow "
            f"reads version {VERSION}; re-run emit"
        )
    check_set(side, paths)
    try:
        with open_regular(paths["words"]) as f:
            data = f.read()
    except NotRegularFile:
        raise ProgramFileError(f"{paths['words']} is not a regular file") from None
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
    check_sidecar(side, paths["json"])
    check_links(side, words, paths["json"])
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


def check_set(side: dict, paths: dict[str, Path]) -> None:
    """The sidecar is unedited and belongs with these files (one line otherwise)."""
    where = paths["json"]
    mixed = "(an interrupted or concurrent emit, or an edit); re-run emit"
    if not isinstance(side.get("sidecar_sha256"), str) or not isinstance(side.get("files"), dict):
        raise ProgramFileError(
            f"{where}: no content hash (written by an older pccx-flow, or edited); re-run emit"
        )
    try:
        same = content_hash(side) == side["sidecar_sha256"]
    except (TypeError, ValueError):
        same = False
    if not same:
        raise ProgramFileError(f"{where}: its content hash does not match {mixed}")
    owner = side["files"].get("words")
    if owner != paths["words"].name:
        raise ProgramFileError(
            f"{where} is the sidecar of {owner!r}, not of {paths['words'].name}; give that file"
        )
    memh = paths["memh"]
    if os.path.lexists(memh):
        try:
            with open_regular(memh) as f:
                digest = hashlib.sha256(f.read()).hexdigest()
        except (OSError, NotRegularFile):
            digest = None
        if digest != side["files"].get("memh_sha256"):
            raise ProgramFileError(
                f"{memh}: not the .memh of the words the sidecar was written for {mixed}"
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

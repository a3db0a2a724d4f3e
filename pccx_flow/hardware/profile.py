"""Hardware profiles: what a pccx v002 build has, as data loaded from TOML.

A profile lists the lanes (how many units of each class), the shared exclusive resource
pools, the clocks and the per-unit numbers the cost model needs, and the register map a
board backend needs. Profiles are data, not code, because the documentation, the RTL and the
deployed bitstream disagree (``pccx-v002.md``): the two built-ins are ``v002-spec`` (design
intent) and ``v002-as-built`` (what the RTL and the KV260 do today), and a user can load a
TOML file of their own.

Every number in a profile file is written ``{ value = ..., tag = "...", note = "..." }`` where
the tag says where it comes from (`TAGS`): the pccx documentation, the RTL, the board,
arithmetic on those, or an assumption pccx-flow makes because pccx never stated it. A user file
may also write a bare number (its tag is then ``user``), and may start from a built-in with
``extends = "v002-spec"`` in its ``[profile]`` table, overriding only what it changes.

>>> p = load_profile("v002-spec")
>>> p.core_hz, p.lanes["gemv"], p.pools["weight_port"]
(400000000, 4, 2)
>>> p.lane_ids()[:2]
[('gemv0', 'gemv'), ('gemv1', 'gemv')]
>>> p.provenance["sfu.cycles_per_element"].tag
'derived'
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from pccx_flow import files
from pccx_flow.errors import ProfileError
from pccx_flow.graph.nodes import CVO_FUNCS, LANE_CLASSES

TAGS = ("spec", "rtl", "board", "derived", "assumed", "user")

# Value kinds a field may have; the check and the words of the error message.
_KINDS = {
    "int": (lambda v: _is_int(v) and v > 0, "a positive integer"),
    "int0": (lambda v: _is_int(v) and v >= 0, "a non-negative integer"),
    "num": (lambda v: _is_num(v) and v > 0, "a positive finite number"),
    "num0": (lambda v: _is_num(v) and v >= 0, "a non-negative finite number"),
    "intlist0": (
        lambda v: isinstance(v, list) and all(_is_int(x) and x >= 0 for x in v),
        "a list of non-negative integers",
    ),
}

# Plausibility limits, so a typo (a clock in MHz written as Hz, a lane count with extra
# zeros) is refused instead of producing absurd estimates or a scheduler that never ends.
MAX_LANES_PER_CLASS = 32  # the GEMV/GEMM parallel_lane field is 5 bits wide
MIN_CLOCK_HZ, MAX_CLOCK_HZ = 1e6, 10e9

# Plausible range of every other number, so an absurd value (a 1e-300 bandwidth, a 1e300
# overhead) is refused in one line instead of overflowing the cost model later. Integers
# (counts, bytes, cycles, addresses) are at most MAX_INT_FIELD; a number field's range is
# the first of _NUM_RANGES whose suffix ends its name, else _NUM_RANGE. (The [clocks]
# fields have their own check, with MIN_CLOCK_HZ..MAX_CLOCK_HZ.)
MAX_INT_FIELD = 2**40
_NUM_RANGES = (
    ("bytes_per_second", 1e3, 1e15),  # DDR bandwidth
    ("elements_per_second", 1e3, 1e15),  # host throughput
    ("_hz", MIN_CLOCK_HZ, MAX_CLOCK_HZ),  # clocks
    ("_seconds", 0.0, 3600.0),  # overheads and time limits
    ("cycles_per_element", 1e-6, 1e6),
)
_NUM_RANGE = (1e-9, 1e15)

# A profile file is small TOML; anything larger is not a profile (or is /dev/zero).
MAX_PROFILE_BYTES = 1 << 20


def plausible_range(label: str, kind: str) -> tuple[float, float]:
    """The (low, high) a profile field `label` (``section.key``) of `kind` may take."""
    if kind.startswith("int"):
        return (0 if kind in ("int0", "intlist0") else 1), MAX_INT_FIELD
    for suffix, lo, hi in _NUM_RANGES:
        if label.endswith(suffix):
            return lo, hi
    return _NUM_RANGE


# Every section of a profile file and the kind of each of its fields. `lanes`, the CVO
# latency table and the DataMover pages are checked separately (their keys are names).
SCHEMA: dict[str, dict[str, str]] = {
    "clocks": {"core_hz": "num", "axi_hz": "num"},
    "pools": {"weight_port": "int"},
    "gemv": {
        "macs_per_cycle": "int",
        "latency_cycles": "int0",
        "port_bytes_per_axi_clock": "int",
        "max_rows_per_instruction": "int",
    },
    "gemm": {
        "macs_per_cycle": "int",
        "latency_cycles": "int0",
        "ports": "int",
        "port_bytes_per_axi_clock": "int",
    },
    "sfu": {
        "cycles_per_element": "num",
        "reduce_sum_cycles_per_element": "num",
        "max_elements": "int",
        "l2_reach_bytes": "int",
    },
    "dma": {
        "bytes_per_axi_clock": "int",
        "descriptors_in_flight": "int",
        "descriptor_overhead_seconds": "num0",
        "max_descriptor_bytes": "int",
    },
    "ctrl": {"memset_issue_cycles": "int", "words_per_memset": "int"},
    "host": {
        "cores": "int",
        "clock_hz": "num",
        "elements_per_second": "num",
        "op_overhead_seconds": "num0",
    },
    "memory": {
        "ddr_peak_bytes_per_second": "num",
        "ddr_effective_bytes_per_second": "num",
        "ddr_bytes": "int",
        "l2_bytes": "int",
        "l2_ports": "int",
        "l1_entries": "int",
        "l1_lanes": "int",
        "const_cache_slots": "int",
    },
    "registers": {
        "base": "int0",
        "window_bytes": "int",
        "instruction_offset": "int0",
        "kick_offset": "int0",
        "status_offset": "int0",
        "status_offset_alternatives": "intlist0",
        "busy_bit": "int0",
        "done_bit": "int0",
        "max_batch": "int",
        "poll_timeout_seconds": "num",
    },
}
# Tables a profile may leave out (their dataclass field is then None, or for [program] the
# specification's reading).
OPTIONAL_SECTIONS = ("issue", "program")
SCHEMA["issue"] = {
    "word_write_axi_clocks": "int",
    "kick_write_axi_clocks": "int",
    "poll_read_axi_clocks": "int",
    "decode_cycles": "int",
    "decoupled_queue_depth": "int",
}
_NAMED_TABLES = {"sfu": "latency_cycles", "registers": "datamover_pages"}
# [program]: how the hardware reads program words. Its fields are names, not numbers: the
# lowering target (`pccx_flow.board.isa.target`) and how the command FIFO hands words on.
PROGRAM_CHOICES: dict[str, tuple[str, ...]] = {
    "target": ("spec", "as-built"),
    "command_fifo": ("ideal", "paced", "reissue"),
}
_SECTIONS = ("profile", "lanes", *SCHEMA, "program")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_num(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)


@dataclass(frozen=True)
class Provenance:
    """Where one number of a profile comes from (a tag of `TAGS`) and a short note."""

    tag: str
    note: str = ""


@dataclass(frozen=True)
class GemvUnit:
    """One GEMV lane: MAC rate, pipeline latency and the weight port that feeds it."""

    macs_per_cycle: int
    latency_cycles: int
    port_bytes_per_axi_clock: int
    max_rows_per_instruction: int


@dataclass(frozen=True)
class GemmUnit:
    """The GEMM systolic array and its own weight ports (HP0, HP1)."""

    macs_per_cycle: int
    latency_cycles: int
    ports: int
    port_bytes_per_axi_clock: int


@dataclass(frozen=True)
class SfuUnit:
    """The SFU/CVO unit: its L2-fed rate, per-function pipeline latency and limits."""

    cycles_per_element: float
    reduce_sum_cycles_per_element: float
    max_elements: int
    l2_reach_bytes: int
    latency_cycles: dict[str, int]


@dataclass(frozen=True)
class DmaUnit:
    """The ACP activation DMA (host DDR <-> L2 port A)."""

    bytes_per_axi_clock: int
    descriptors_in_flight: int
    descriptor_overhead_seconds: float
    max_descriptor_bytes: int


@dataclass(frozen=True)
class CtrlUnit:
    """The issue path as far as MEMSET is concerned."""

    memset_issue_cycles: int
    words_per_memset: int


@dataclass(frozen=True)
class HostUnit:
    """The host CPU that runs every op without a pccx instruction."""

    cores: int
    clock_hz: float
    elements_per_second: float
    op_overhead_seconds: float


@dataclass(frozen=True)
class Memory:
    """DDR, L2, L1 and constant cache sizes and bandwidths."""

    ddr_peak_bytes_per_second: float
    ddr_effective_bytes_per_second: float
    ddr_bytes: int
    l2_bytes: int
    l2_ports: int
    l1_entries: int
    l1_lanes: int
    const_cache_slots: int


@dataclass(frozen=True)
class IssuePath:
    """What it costs the host to feed the NPU's command path, for the timing replay.

    Optional in a profile file (a profile without ``[issue]`` cannot be replayed): pccx never
    measured any of these, so every built-in value is tagged ``assumed``.
    """

    word_write_axi_clocks: int
    kick_write_axi_clocks: int
    poll_read_axi_clocks: int
    decode_cycles: int
    decoupled_queue_depth: int


@dataclass(frozen=True)
class ProgramReading:
    """How this hardware reads program words (``[program]``, optional).

    ``target``: ``spec`` (the specification's reading) or ``as-built`` (the RTL's; see
    `pccx_flow.board.isa.target`). ``command_fifo``: ``ideal`` (one word decoded per clock as
    written), ``paced`` (each word issued once, at most one per 2 cycles: the deployed
    build's AXIL_CMD_IN) or ``reissue`` (the public AXIL_CMD_IN, which decodes the last
    word again every cycle until the next write).
    """

    target: str = "spec"
    command_fifo: str = "ideal"


@dataclass(frozen=True)
class RegisterMap:
    """The NPU's AXI-Lite window and DataMover helper pages, for a board backend."""

    base: int
    window_bytes: int
    instruction_offset: int
    kick_offset: int
    status_offset: int
    status_offset_alternatives: list[int]
    busy_bit: int
    done_bit: int
    max_batch: int
    poll_timeout_seconds: float
    datamover_pages: dict[str, int]


@dataclass(frozen=True)
class Profile:
    """One pccx v002 hardware profile (see the module docstring)."""

    name: str
    description: str
    source: str
    core_hz: float
    axi_hz: float
    lanes: dict[str, int]  # lane class -> number of lanes, in `LANE_CLASSES` order
    pools: dict[str, int]  # exclusive resource pool -> units
    gemv: GemvUnit
    gemm: GemmUnit
    sfu: SfuUnit
    dma: DmaUnit
    ctrl: CtrlUnit
    host: HostUnit
    memory: Memory
    registers: RegisterMap
    provenance: dict[str, Provenance] = field(default_factory=dict)  # "section.field" -> tag
    issue: IssuePath | None = None  # host-side issue costs ([issue], optional)
    program: ProgramReading = field(default_factory=ProgramReading)  # [program], optional

    def lane_ids(self) -> list[tuple[str, str]]:
        """Every lane as ``(lane_id, lane_class)``, classes in `LANE_CLASSES` order."""
        return [(f"{cls}{i}", cls) for cls, n in self.lanes.items() for i in range(n)]

    def to_dict(self) -> dict:
        """The profile as JSON-compatible plain data (provenance included)."""
        out = asdict(self)
        out["provenance"] = {k: asdict(v) for k, v in self.provenance.items()}
        return out


def list_profiles() -> list[str]:
    """Names of the built-in profiles."""
    folder = resources.files("pccx_flow.hardware") / "profiles"
    return sorted(p.name[: -len(".toml")] for p in folder.iterdir() if p.name.endswith(".toml"))


def load_profile(name_or_path: str | Path) -> Profile:
    """A built-in profile by name, or a user's TOML file by path, checked field by field."""
    raw, where = _read_raw(name_or_path)
    return _build(raw, where)


def load_profile_with(
    name_or_path: str | Path, overrides: dict[str, Any], name: str | None = None
) -> Profile:
    """`load_profile` with some fields replaced, checked as a user's file would be.

    `overrides` maps ``section.field`` (e.g. ``"lanes.gemv"``, ``"memory.l2_bytes"``) to a
    bare value (tagged ``user``). A value out of its plausible range, or a field that does not
    exist, is refused with the same one line as in a profile file, so a design sweep cannot
    schedule an absurd profile. `name` names the result (default: the base's name).
    """
    raw, where = _read_raw(name_or_path)
    for label, value in overrides.items():
        section, dot, key = label.partition(".")
        table = raw.get(section)
        if not dot or not isinstance(table, dict) or key not in table:
            raise ProfileError(
                f"profile {where}: no field {label!r} to set; give section.field of the"
                " profile file, e.g. lanes.gemv or memory.l2_bytes"
            )
        table[key] = value
    if name is not None:
        raw["profile"]["name"] = name
    return _build(raw, f"{where} with {_describe(overrides)}" if overrides else where)


def _describe(overrides: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v!r}" for k, v in overrides.items())


def _builtin_text(name: str) -> str:
    return (resources.files("pccx_flow.hardware") / "profiles" / f"{name}.toml").read_text()


def _read_raw(name_or_path: str | Path) -> tuple[dict, str]:
    """The parsed TOML (with any ``extends`` base merged in) and a label for messages."""
    builtins = list_profiles()
    if isinstance(name_or_path, str) and name_or_path in builtins:
        return tomllib.loads(_builtin_text(name_or_path)), name_or_path
    path = Path(name_or_path)
    looks_like_path = isinstance(name_or_path, Path) or path.suffix == ".toml" or "/" in str(path)
    if not looks_like_path and not path.exists():
        from pccx_flow.suggest import did_you_mean

        hint = did_you_mean(str(name_or_path), builtins)
        raise ProfileError(
            f"unknown hardware profile {str(name_or_path)!r}{hint}; "
            f"built-ins: {', '.join(builtins)},"
            " or give the path of a .toml profile file"
        )
    where = str(path)
    try:
        text = _read_small_text(path)
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise ProfileError(
            f"cannot read profile file {where}: {reason}; check the path and its permissions"
        ) from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(
            f"profile {where}: TOML syntax error: {exc}; fix the file at that line"
        ) from None
    base = raw.get("profile", {}).get("extends") if isinstance(raw.get("profile"), dict) else None
    if base is not None:
        if base not in builtins:
            raise ProfileError(
                f"profile {where}: 'profile.extends' = {base!r} is not a built-in profile;"
                f" use one of {', '.join(builtins)}"
            )
        merged = _merge(tomllib.loads(_builtin_text(base)), raw)
        merged["profile"] = {
            "description": f"{base} with the overrides of {where}",
            "source": where,
            **{k: v for k, v in raw["profile"].items() if k != "extends"},
        }
        raw = merged
    if isinstance(raw.get("profile"), dict):
        raw["profile"].setdefault("source", where)
    return raw, where


def _read_small_text(path: Path) -> str:
    """A regular file's text, refused (one line) if it is a FIFO, a device or too large.

    The file is opened non-blocking so a FIFO cannot hang the open, and checked on the
    open descriptor (no race with a swap after the check); at most MAX_PROFILE_BYTES are read.
    """
    try:
        with files.open_regular(path) as f:
            data = f.read(MAX_PROFILE_BYTES + 1)
    except files.NotRegularFile:
        raise ProfileError(
            f"profile {path} is not a regular file (a FIFO, device or folder); give a .toml file"
        ) from None
    if len(data) > MAX_PROFILE_BYTES:
        raise ProfileError(
            f"profile {path} is larger than {MAX_PROFILE_BYTES // 1024} KiB; a profile is a "
            "small TOML file"
        )
    return data.decode("utf-8")


def _merge(base: dict, over: dict) -> dict:
    """`base` with the tables of `over` merged in; a field's value replaces the base's whole."""
    out = dict(base)
    for key, value in over.items():
        old = out.get(key)
        if isinstance(old, dict) and isinstance(value, dict) and "value" not in old:
            out[key] = _merge(old, value)
        else:
            out[key] = value
    return out


class _Reader:
    """Pulls checked values out of the raw TOML and records their provenance."""

    def __init__(self, raw: dict, where: str):
        self.raw = raw
        self.where = where
        self.provenance: dict[str, Provenance] = {}

    def fail(self, what: str) -> ProfileError:
        return ProfileError(f"profile {self.where}: {what}")

    def table(self, name: str, parent: dict | None = None, label: str | None = None) -> dict:
        holder = self.raw if parent is None else parent
        label = label or name
        if name not in holder:
            raise self.fail(f"missing table [{label}]; add it (see the built-in v002-spec.toml)")
        value = holder[name]
        if not isinstance(value, dict):
            raise self.fail(f"[{label}] must be a table, got {type(value).__name__}")
        return value

    def value(self, table: dict, key: str, label: str, kind: str) -> Any:
        if key not in table:
            raise self.fail(f"missing field '{label}'; add it with a value and a provenance tag")
        entry = table[key]
        if isinstance(entry, dict):
            unknown = set(entry) - {"value", "tag", "note"}
            if unknown:
                raise self.fail(
                    f"field '{label}' has unknown keys {sorted(unknown)};"
                    " a field is {{ value = ..., tag = ..., note = ... }}"
                )
            if "value" not in entry:
                raise self.fail(
                    f"field '{label}' has no 'value'; write {{ value = ..., tag = ... }}"
                )
            tag, note = entry.get("tag", "user"), entry.get("note", "")
            if tag not in TAGS:
                raise self.fail(f"field '{label}' has tag {tag!r}; use one of {', '.join(TAGS)}")
            if not isinstance(note, str):
                raise self.fail(f"field '{label}' note must be a string")
            value = entry["value"]
        else:
            value, tag, note = entry, "user", ""
        check, words = _KINDS[kind]
        if not check(value):
            raise self.fail(
                f"field '{label}' must be {words}, got {value!r} ({type(value).__name__})"
            )
        lo, hi = plausible_range(label, kind)
        values = value if isinstance(value, list) else [value]
        if not label.startswith("clocks.") and any(not lo <= v <= hi for v in values):
            lo_text = "0" if kind == "num0" else f"{lo:g}"
            raise self.fail(
                f"field '{label}' = {value!r} is not plausible; give a value in {lo_text}..{hi:g}"
            )
        self.provenance[label] = Provenance(tag, note)
        return value

    def section(self, name: str) -> dict[str, Any]:
        table = self.table(name)
        fields = SCHEMA[name]
        named = _NAMED_TABLES.get(name)
        unknown = set(table) - set(fields) - ({named} if named else set())
        if unknown:
            raise self.fail(
                f"unknown field '{name}.{sorted(unknown)[0]}'; [{name}] has"
                f" {', '.join(sorted(fields) + ([named] if named else []))}"
            )
        return {k: self.value(table, k, f"{name}.{k}", kind) for k, kind in fields.items()}

    def named(self, section: str, sub: str, kind: str, keys: tuple[str, ...] | None) -> dict:
        label = f"{section}.{sub}"
        table = self.table(sub, self.table(section), label)
        if keys is not None:
            unknown = set(table) - set(keys)
            if unknown:
                raise self.fail(
                    f"unknown key '{label}.{sorted(unknown)[0]}'; use {', '.join(keys)}"
                )
        names = keys if keys is not None else tuple(table)
        return {k: self.value(table, k, f"{label}.{k}", kind) for k in names}


def _build(raw: dict, where: str) -> Profile:
    r = _Reader(raw, where)
    unknown = set(raw) - set(_SECTIONS)
    if unknown:
        first = sorted(unknown)[0]
        if first in ("name", "description", "source", "extends"):
            raise r.fail(f"'{first}' belongs in the [profile] table; move it below [profile]")
        raise r.fail(f"unknown table [{first}]; a profile has {', '.join(_SECTIONS)}")
    head = r.table("profile")
    for key in ("name", "description", "source"):
        if not isinstance(head.get(key), str) or not head[key].strip():
            raise r.fail(f"missing field 'profile.{key}'; add a non-empty string")
    extra = set(head) - {"name", "description", "source", "extends"}
    if extra:
        raise r.fail(
            f"unknown field 'profile.{sorted(extra)[0]}'; [profile] has name,"
            " description, source, extends"
        )

    lanes_raw = r.table("lanes")
    unknown = [k for k in lanes_raw if k not in LANE_CLASSES]
    if unknown:
        raise r.fail(
            f"unknown lane class 'lanes.{unknown[0]}'; lane classes are {', '.join(LANE_CLASSES)}"
        )
    if not lanes_raw:
        raise r.fail("[lanes] is empty; give at least one lane class a count")
    lanes = {c: r.value(lanes_raw, c, f"lanes.{c}", "int") for c in LANE_CLASSES if c in lanes_raw}
    for cls, n in lanes.items():
        if n > MAX_LANES_PER_CLASS:
            raise r.fail(
                f"field 'lanes.{cls}' = {n} is more lanes than the ISA can address "
                f"(parallel_lane is 5 bits: at most {MAX_LANES_PER_CLASS})"
            )

    pools = r.section("pools")
    for pool, n in pools.items():
        if n > MAX_LANES_PER_CLASS:
            raise r.fail(
                f"field 'pools.{pool}' = {n} is not a plausible number of shared units "
                f"(at most {MAX_LANES_PER_CLASS})"
            )

    clocks = r.section("clocks")
    for key, hz in clocks.items():
        if not MIN_CLOCK_HZ <= hz <= MAX_CLOCK_HZ:
            raise r.fail(
                f"field 'clocks.{key}' = {hz:g} Hz is not a plausible FPGA clock; give a value "
                f"between {MIN_CLOCK_HZ:g} and {MAX_CLOCK_HZ:g} Hz (e.g. 400e6)"
            )
    sfu = r.section("sfu")
    sfu["latency_cycles"] = r.named("sfu", "latency_cycles", "int0", CVO_FUNCS)
    regs = r.section("registers")
    regs["datamover_pages"] = r.named("registers", "datamover_pages", "int0", None)
    for key in ("instruction_offset", "kick_offset", "status_offset"):
        if regs[key] + 4 > regs["window_bytes"]:
            raise r.fail(
                f"field 'registers.{key}' = {regs[key]:#x} lies outside the"
                f" {regs['window_bytes']:#x}-byte register window; fix the offset or the window"
            )
    if regs["busy_bit"] > 31 or regs["done_bit"] > 31 or regs["busy_bit"] == regs["done_bit"]:
        raise r.fail(
            "fields 'registers.busy_bit' and 'registers.done_bit' must be two different bits"
            " of the 32-bit status word (0..31)"
        )
    issue = IssuePath(**r.section("issue")) if "issue" in raw else None
    program = _program_reading(r, raw)
    return Profile(
        name=head["name"],
        description=head["description"],
        source=head["source"],
        core_hz=clocks["core_hz"],
        axi_hz=clocks["axi_hz"],
        lanes=lanes,
        pools=pools,
        gemv=GemvUnit(**r.section("gemv")),
        gemm=GemmUnit(**r.section("gemm")),
        sfu=SfuUnit(**sfu),
        dma=DmaUnit(**r.section("dma")),
        ctrl=CtrlUnit(**r.section("ctrl")),
        host=HostUnit(**r.section("host")),
        memory=Memory(**r.section("memory")),
        registers=RegisterMap(**regs),
        provenance=dict(r.provenance),
        issue=issue,
        program=program,
    )


def _program_reading(r: _Reader, raw: dict) -> ProgramReading:
    """The [program] table: each field one of `PROGRAM_CHOICES` (spec defaults if absent)."""
    if "program" not in raw:
        return ProgramReading()
    table = r.table("program")
    unknown = set(table) - set(PROGRAM_CHOICES)
    if unknown:
        raise r.fail(
            f"unknown field 'program.{sorted(unknown)[0]}'; [program] has "
            f"{', '.join(PROGRAM_CHOICES)}"
        )
    values = {}
    for key, choices in PROGRAM_CHOICES.items():
        if key not in table:
            continue
        entry = table[key]
        if isinstance(entry, dict) and set(entry) - {"value", "tag", "note"}:
            raise r.fail(
                f"field 'program.{key}' has unknown keys "
                f"{sorted(set(entry) - {'value', 'tag', 'note'})}; a field is "
                "{ value = ..., tag = ..., note = ... }"
            )
        value, tag, note = (
            (entry.get("value"), entry.get("tag", "user"), entry.get("note", ""))
            if isinstance(entry, dict)
            else (entry, "user", "")
        )
        if value not in choices:
            raise r.fail(
                f"field 'program.{key}' = {value!r} is not one of {', '.join(choices)}"
            )
        if tag not in TAGS:
            raise r.fail(f"field 'program.{key}' has tag {tag!r}; use one of {', '.join(TAGS)}")
        r.provenance[f"program.{key}"] = Provenance(tag, str(note))
        values[key] = value
    return ProgramReading(**values)

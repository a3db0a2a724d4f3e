"""The pccx v002 instruction set as data: one field table per opcode.

Encoding and decoding are derived from `FORMATS` (and disassembly, the text table and the C
header in `pccx_flow.board.isa.listing`), so they cannot disagree with each other. The tables
follow the current RTL package
(`pccxai/pccx-v002` ``LLM/rtl/packages/isa/isa_pkg.sv``), the board repository's
``docs/ISA_QUICK_REFERENCE.md`` and ``/work/shared/pccx-v002.md`` §4; where pccx's own sources
disagree, `DISAGREEMENTS` lists what is known and which reading pccx-flow follows.

A word is 64 bits: opcode in [63:60], a 60-bit body whose layout depends on the opcode.

>>> w = encode("CVO", func=CVO_FUNCS["SCALE"], src=0x100, dst=0x200, length=64, flags=0b01000)
>>> decode(w).fields["length"]
64
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pccx_flow.errors import PccxFlowError

WORD_BITS = 64
OPCODE_HI, OPCODE_LO = 63, 60

# Written to the kick register (or placed in a word stream) to end a batch. Its opcode
# nibble 0x8 is a reserved opcode, so the decoder never takes it for an instruction.
KICK_MARKER = 0x8000_0000_0000_0000

# 128-bit L2 words: every 17-bit L2 address counts these.
L2_WORD_BYTES = 16
ADDR_BITS = 17


class IsaError(PccxFlowError):
    """A word that is not a legal pccx v002 instruction, or a field value that does not fit."""


@dataclass(frozen=True)
class Field:
    """One bit field of an instruction body: inclusive bit range [hi:lo] of the 64-bit word.

    ``bits`` names single-bit flags inside a flag field (bit index within the field);
    ``enum`` names the values of an enumerated field; ``reserved`` fields must be zero.
    """

    name: str
    hi: int
    lo: int
    meaning: str
    enum: dict[str, int] = field(default_factory=dict)
    bits: dict[str, int] = field(default_factory=dict)
    reserved: bool = False
    address: bool = False

    @property
    def width(self) -> int:
        return self.hi - self.lo + 1

    @property
    def mask(self) -> int:
        return (1 << self.width) - 1


@dataclass(frozen=True)
class Format:
    """The layout of one opcode: its 4-bit value and its body fields, most significant first."""

    name: str
    opcode: int
    fields: tuple[Field, ...]
    meaning: str

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise IsaError(f"{self.name} has no field {name!r}; fields: {self.field_names()}")

    def field_names(self) -> str:
        return ", ".join(f.name for f in self.fields)


# CVO function codes, bits [59:56] of a CVO word (isa_pkg.sv cvo_func_e).
CVO_FUNCS = {
    "EXP": 0x0,
    "SQRT": 0x1,
    "GELU": 0x2,
    "SIN": 0x3,
    "COS": 0x4,
    "REDUCE_SUM": 0x5,
    "SCALE": 0x6,
    "RECIP": 0x7,
}

# GEMV / GEMM flags_t (6 bits): bit 5 findemax, bit 4 accm, bit 3 w_scale.
MAC_FLAGS = {"findemax": 5, "accm": 4, "w_scale": 3}
# cvo_flags_t (5 bits): bit 4 sub_emax, bit 3 recip_scale, bit 2 accm.
CVO_FLAGS = {"sub_emax": 4, "recip_scale": 3, "accm": 2}
MEMSET_CACHES = {"fmap_shape": 0, "weight_shape": 1}
DEVICES = {"npu": 0, "host": 1}
ASYNC = {"sync": 0, "async": 1}


def _mac_format(name: str, opcode: int, meaning: str) -> Format:
    return Format(
        name,
        opcode,
        (
            Field("dest", 59, 43, "destination L2 word address", address=True),
            Field("src", 42, 26, "source (activation) L2 word address", address=True),
            Field("flags", 25, 20, "findemax / accm / w_scale", bits=MAC_FLAGS),
            Field("size_ptr", 19, 14, "constant-cache slot of the size descriptor"),
            Field("shape_ptr", 13, 8, "constant-cache slot of the shape descriptor"),
            Field("parallel_lane", 7, 3, "number of GEMV/GEMM lanes used"),
            Field("reserved", 2, 0, "must be zero", reserved=True),
        ),
        meaning,
    )


FORMATS: dict[str, Format] = {
    "GEMV": _mac_format("GEMV", 0x0, "INT4 weight rows x activation vector (weights from DDR)"),
    "GEMM": _mac_format("GEMM", 0x1, "systolic-array matrix multiply, same body as GEMV"),
    "MEMCPY": Format(
        "MEMCPY",
        0x2,
        (
            Field("from_device", 59, 59, "source side", enum=DEVICES),
            Field("to_device", 58, 58, "destination side", enum=DEVICES),
            Field("dest", 57, 41, "destination L2 word address", address=True),
            Field("src", 40, 24, "source L2 word address", address=True),
            Field("aux", 23, 7, "host-side offset (128-bit words)"),
            Field("shape_ptr", 6, 1, "constant-cache slot holding the length"),
            Field("async", 0, 0, "0 sync, 1 fire-and-forget", enum=ASYNC),
        ),
        "DMA between host DDR and L2 (ACP port)",
    ),
    "MEMSET": Format(
        "MEMSET",
        0x3,
        (
            Field("dest_cache", 59, 58, "which descriptor cache", enum=MEMSET_CACHES),
            Field("slot", 57, 52, "constant-cache slot (6-bit pointer)"),
            Field("a", 51, 36, "value a (16 bits)"),
            Field("b", 35, 20, "value b (16 bits)"),
            Field("c", 19, 4, "value c (16 bits)"),
            Field("reserved", 3, 0, "must be zero", reserved=True),
        ),
        "write one constant-cache slot (shapes, sizes, scalars)",
    ),
    "CVO": Format(
        "CVO",
        0x4,
        (
            Field("func", 59, 56, "CVO function", enum=CVO_FUNCS),
            Field("src", 55, 39, "source L2 address", address=True),
            Field("dst", 38, 22, "destination L2 address", address=True),
            Field("length", 21, 6, "elements (16 bits)"),
            Field("flags", 5, 1, "sub_emax / recip_scale / accm", bits=CVO_FLAGS),
            Field("async", 0, 0, "0 sync, 1 fire-and-forget", enum=ASYNC),
        ),
        "SFU vector op: EXP SQRT GELU SIN COS REDUCE_SUM SCALE RECIP",
    ),
}

BY_OPCODE: dict[int, Format] = {f.opcode: f for f in FORMATS.values()}


# MEMCPY length: the fmap shape slot its shape_ptr names holds (X, Y, Z) and the copy moves
# ceil(X*Y*Z / 8) 128-bit words, X*Y*Z taken to its low 20 bits (eight BF16 elements per
# word; `pccxai/pccx-v002` LLM/rtl/core/memory/mem_dispatcher.sv, LOAD pipeline s1-s7).
MEMCPY_ELEMENTS_PER_WORD = 8


def memcpy_length_fields(words: int) -> tuple[int, int, int]:
    """The (X, Y, Z) of a shape slot that makes a MEMCPY move exactly `words` L2 words."""
    if not 0 < words < 1 << ADDR_BITS:
        raise IsaError(f"a MEMCPY of {words} L2 words does not fit the 17-bit L2 address space")
    if words <= 0xFFFF:
        return MEMCPY_ELEMENTS_PER_WORD, words, 1
    # X*Y may be any element count that rounds up to `words` (below 2**20, so X >= 16)
    top = words * MEMCPY_ELEMENTS_PER_WORD
    for elements in range(top, top - MEMCPY_ELEMENTS_PER_WORD, -1):
        for x in range(16, math.isqrt(elements) + 1):
            if elements % x == 0 and elements // x <= 0xFFFF:
                return x, elements // x, 1
    raise IsaError(f"no 16-bit shape (X, Y, 1) gives a MEMCPY of {words} words")


def fmap_shape_fields(elements: int) -> tuple[int, int, int]:
    """The (X, Y, Z) of an fmap-shape slot with X*Y*Z = `elements` exactly (< 2**20).

    The RTL's L2 load keeps the low 20 bits of X*Y*Z (`memcpy_length_words`); a GEMV on the
    as-built target takes its input length in BF16 elements from such a slot.

    >>> fmap_shape_fields(2048), fmap_shape_fields(70000)
    ((2048, 1, 1), (2, 35000, 1))
    """
    if not 0 < elements < 1 << 20:
        raise IsaError(f"{elements} elements do not fit a 20-bit X*Y*Z load length")
    if elements <= 0xFFFF:
        return elements, 1, 1
    for x in range(2, math.isqrt(elements) + 1):
        if elements % x == 0 and elements // x <= 0xFFFF:
            return x, elements // x, 1
    raise IsaError(f"no 16-bit shape (X, Y, 1) multiplies to {elements} elements")


def memcpy_length_words(x: int, y: int, z: int) -> int:
    """L2 words a MEMCPY moves for shape slot (X, Y, Z), as the RTL computes it."""
    elements = (x * y * z) & ((1 << 20) - 1)
    return -(-elements // MEMCPY_ELEMENTS_PER_WORD)


def _check_value(fmt: Format, f: Field, value: int) -> int:
    if isinstance(value, str):
        if value not in f.enum:
            raise IsaError(f"{fmt.name}.{f.name}={value!r} is not one of {sorted(f.enum)}")
        value = f.enum[value]
    value = int(value)
    if value < 0 or value > f.mask:
        raise IsaError(
            f"{fmt.name}.{f.name}={value:#x} does not fit in {f.width} bits (max {f.mask:#x})"
        )
    if f.reserved and value:
        raise IsaError(f"{fmt.name}.{f.name} is reserved and must be zero, got {value:#x}")
    return value


def encode(op: str, **values: int | str) -> int:
    """The 64-bit word of one instruction; missing fields are zero; bad values raise IsaError."""
    if op not in FORMATS:
        raise IsaError(f"unknown opcode {op!r}; known: {', '.join(FORMATS)}")
    fmt = FORMATS[op]
    names = {f.name for f in fmt.fields}
    unknown = sorted(set(values) - names)
    if unknown:
        raise IsaError(f"{op} has no field {unknown[0]!r}; fields: {fmt.field_names()}")
    word = fmt.opcode << OPCODE_LO
    for f in fmt.fields:
        word |= _check_value(fmt, f, values.get(f.name, 0)) << f.lo
    return word


def flag_bits(f: Field, names: dict[str, int] | list[str] | tuple[str, ...]) -> int:
    """The value of flag field `f` with the named flags set (a dict of name -> 0/1 or a list)."""
    items = names.items() if isinstance(names, dict) else ((n, 1) for n in names)
    value = 0
    for name, on in items:
        if name not in f.bits:
            raise IsaError(f"flag {name!r} is not one of {sorted(f.bits)} in {f.name}")
        if on:
            value |= 1 << f.bits[name]
    return value


@dataclass(frozen=True)
class Instruction:
    """A decoded word: its opcode name and every field value (reserved fields included)."""

    op: str
    fields: dict[str, int]
    word: int


def decode(word: int) -> Instruction:
    """Split a word into its fields; reserved opcodes and non-zero reserved bits raise IsaError."""
    if not 0 <= word < 1 << WORD_BITS:
        raise IsaError(f"word {word:#x} is not a 64-bit value")
    opcode = word >> OPCODE_LO
    fmt = BY_OPCODE.get(opcode)
    if fmt is None:
        raise IsaError(f"word {word:#018x} has reserved opcode {opcode:#x}")
    fields = {f.name: (word >> f.lo) & f.mask for f in fmt.fields}
    for f in fmt.fields:
        if f.reserved and fields[f.name]:
            raise IsaError(f"word {word:#018x}: {fmt.name}.{f.name} bits are not zero")
        if f.enum and fields[f.name] not in f.enum.values():
            raise IsaError(
                f"word {word:#018x}: {fmt.name}.{f.name}={fields[f.name]} is not a defined value"
            )
    return Instruction(fmt.name, fields, word)

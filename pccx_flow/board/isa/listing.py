"""The instruction set as text: one-line disassembly, the field table, a C header, and where
pccx's own sources disagree about the ISA. All of it is derived from the field tables of
`pccx_flow.board.isa.fields`.

>>> from pccx_flow.board.isa.fields import encode
>>> disassemble(encode("CVO", func=6, src=0x100, dst=0x200, length=64, flags=0b01000))
'CVO func=SCALE src=0x00100 dst=0x00200 length=64 flags=recip_scale async=sync'
"""

from __future__ import annotations

from dataclasses import dataclass

from pccx_flow.board.isa.fields import (
    FORMATS,
    KICK_MARKER,
    L2_WORD_BYTES,
    OPCODE_HI,
    OPCODE_LO,
    Field,
    decode,
)


@dataclass(frozen=True)
class Disagreement:
    """Two pccx sources that say different things about the ISA, and what pccx-flow does."""

    topic: str
    sources: str
    followed: str


DISAGREEMENTS: tuple[Disagreement, ...] = (
    Disagreement(
        "MEMSET low bits",
        "isa_pkg.sv: a/b/c typed 16-bit values and a 4-bit reserved [3:0]; legacy isa_x64.svh: "
        "no a/b/c types and a 1-bit reserved",
        "isa_pkg.sv (4-bit reserved, must be zero) on both profiles",
    ),
    Disagreement(
        "CVO opcode",
        "isa_pkg.sv, ISA_QUICK_REFERENCE.md, generate_smoke_program.py, uCA_v1_api.h: CVO = 0x4; "
        "legacy isa_x64.svh opcode_e has no CVO",
        "CVO = 0x4",
    ),
    Disagreement(
        "MEMCPY direction in the C driver",
        "uCA_v1_api.c takes an 8-bit route (from nibble, to nibble) and keeps bit 0 of each: "
        "UCA_ROUTE_HOST_TO_L2 (0x01) encodes from_device=0 to_device=1, which isa_pkg.sv reads as "
        "NPU->host; generate_smoke_program.py encodes host->L2 as from_device=1 to_device=0; "
        "routes "
        "0x12/0x13/0x21/0x31/0x41 collapse onto the same two bits",
        "isa_pkg.sv enums (FROM_HOST=1, TO_HOST=1), as the smoke program",
    ),
    Disagreement(
        "two word formats on one FIFO",
        "sw/runtime/isa.py defines coarse host commands with an 8-bit opcode in [63:56] "
        "(RESET_KV_CACHE 0x01 .. NEXT_TOKEN 0x04); read as a 4-bit [63:60] opcode every one of "
        "them is a GEMV",
        "the per-instruction ISA of isa_pkg.sv; the runtime's command words are not emitted",
    ),
    Disagreement(
        "CVO address unit",
        "pccx-v002.md §4 calls CVO src/dst element addresses; GEMV/GEMM/MEMCPY addresses are "
        "128-bit L2 words; the RTL's CVO bridge takes BF16 element addresses "
        "(mem_CVO_stream_bridge.sv: src_addr >> 3), so it reaches only the first 256 KiB",
        "per target (`isa --targets`): word addresses on the spec target, BF16 element "
        "addresses on the as-built target",
    ),
    Disagreement(
        "reserved opcodes",
        "RTL decoder drops opcodes 0x5-0xF silently (the kick marker has opcode 0x8)",
        "pccx-flow rejects them as illegal words, except the exact kick marker between batches",
    ),
    Disagreement(
        "parallel_lane",
        "uCA_v1_api.h: 'active lanes, 5-bit, 1-4'; the as-built RTL wires only GEMV lanes A, B",
        "a lane count; lowering writes 1 (one tile per instruction)",
    ),
)


def _show(f: Field, value: int) -> str:
    if f.enum:
        names = {v: k for k, v in f.enum.items()}
        return names.get(value, str(value))
    if f.bits:
        on = [n for n, b in sorted(f.bits.items(), key=lambda kv: -kv[1]) if value >> b & 1]
        rest = value & ~sum(1 << b for b in f.bits.values())
        if rest:
            on.append(f"{rest:#x}")
        return "|".join(on) if on else "0"
    if f.address:
        return f"{value:#07x}"
    return str(value)


def disassemble(word: int) -> str:
    """One line: opcode and every non-reserved field, names for enums and flags."""
    ins = decode(word)
    fmt = FORMATS[ins.op]
    parts = [f"{f.name}={_show(f, ins.fields[f.name])}" for f in fmt.fields if not f.reserved]
    return f"{ins.op} " + " ".join(parts)


def format_table() -> str:
    """The ISA as a text table, then the known disagreements between pccx sources."""
    lines = [
        f"pccx v002 ISA: 64-bit words, opcode [{OPCODE_HI}:{OPCODE_LO}], "
        f"kick marker {KICK_MARKER:#018x}"
    ]
    for fmt in FORMATS.values():
        lines.append("")
        lines.append(f"{fmt.name} (opcode {fmt.opcode:#x}): {fmt.meaning}")
        for f in fmt.fields:
            rng = f"[{f.hi}]" if f.hi == f.lo else f"[{f.hi}:{f.lo}]"
            extra = ""
            if f.enum:
                extra = "  " + ", ".join(f"{k}={v}" for k, v in f.enum.items())
            if f.bits:
                extra = "  " + ", ".join(f"bit {b} {n}" for n, b in f.bits.items())
            lines.append(f"  {rng:<9} {f.name:<14} {f.width:>2} bits  {f.meaning}{extra}")
    lines.append("")
    lines.append("Known disagreements between pccx sources (and what pccx-flow follows):")
    for d in DISAGREEMENTS:
        lines.append(f"  - {d.topic}: {d.sources}. Follows: {d.followed}.")
    return "\n".join(lines)


def c_header() -> str:
    """The same tables as a C header for a board driver: opcodes, shifts, widths, masks, codes."""
    out = [
        "/* pccx v002 instruction set, generated by `pccx-flow isa --c-header` from",
        " * pccx_flow/board/isa (one table for encoder, decoder, disassembler and driver).",
        " * Do not edit: regenerate. */",
        "#ifndef PCCX_V002_ISA_H",
        "#define PCCX_V002_ISA_H",
        "",
        "#include <stdint.h>",
        "",
        f"#define PCCX_OPCODE_SHIFT {OPCODE_LO}",
        "#define PCCX_OPCODE_MASK 0xFULL",
        f"#define PCCX_KICK_MARKER 0x{KICK_MARKER:016x}ULL",
        f"#define PCCX_L2_WORD_BYTES {L2_WORD_BYTES}",
    ]
    for fmt in FORMATS.values():
        out.append("")
        out.append(f"/* {fmt.name}: {fmt.meaning} */")
        out.append(f"#define PCCX_OP_{fmt.name} 0x{fmt.opcode:x}")
        for f in fmt.fields:
            p = f"PCCX_{fmt.name}_{f.name.upper()}"
            out.append(f"#define {p}_SHIFT {f.lo}")
            out.append(f"#define {p}_WIDTH {f.width}")
            out.append(f"#define {p}_MASK 0x{f.mask:x}ULL")
            for n, v in f.enum.items():
                out.append(f"#define {p}_{n.upper()} 0x{v:x}")
            for n, b in f.bits.items():
                out.append(f"#define {p}_{n.upper()} (1u << {b})")
    out += [
        "",
        "/* Place `value` into field FIELD of an instruction, e.g.",
        " *   PCCX_FIELD(PCCX_CVO_LENGTH, 64) | PCCX_FIELD(PCCX_CVO_FUNC, PCCX_CVO_FUNC_EXP) */",
        "#define PCCX_FIELD(F, value) ((((uint64_t)(value)) & F##_MASK) << F##_SHIFT)",
        "#define PCCX_OPCODE(op) (((uint64_t)(op)) << PCCX_OPCODE_SHIFT)",
        "",
        "#endif /* PCCX_V002_ISA_H */",
        "",
    ]
    return "\n".join(out)

"""The pccx v002 instruction set and how a target's hardware reads it.

Owns: the field tables with encoding and decoding (`fields`, re-exported here), their text
forms (`listing`: disassembly, the table, the C header, pccx's source disagreements), the
targets (`target`: the spec's reading and the RTL's, `rtl_rules`: the RTL evidence for each
rule and what the RTL cannot do), BF16 (`bf16`) and how tensors lie in bytes (`wire`).
Imports nothing from the other rooms of `pccx_flow.board`.
"""

from pccx_flow.board.isa.fields import (
    ADDR_BITS,
    ASYNC,
    BY_OPCODE,
    CVO_FLAGS,
    CVO_FUNCS,
    DEVICES,
    FORMATS,
    KICK_MARKER,
    L2_WORD_BYTES,
    MAC_FLAGS,
    MEMCPY_ELEMENTS_PER_WORD,
    MEMSET_CACHES,
    OPCODE_HI,
    OPCODE_LO,
    WORD_BITS,
    Field,
    Format,
    Instruction,
    IsaError,
    decode,
    encode,
    flag_bits,
    fmap_shape_fields,
    memcpy_length_fields,
    memcpy_length_words,
)
from pccx_flow.board.isa.listing import (
    DISAGREEMENTS,
    Disagreement,
    c_header,
    disassemble,
    format_table,
)

__all__ = [
    "ADDR_BITS", "ASYNC", "BY_OPCODE", "CVO_FLAGS", "CVO_FUNCS", "DEVICES", "DISAGREEMENTS",
    "FORMATS", "KICK_MARKER", "L2_WORD_BYTES", "MAC_FLAGS", "MEMCPY_ELEMENTS_PER_WORD",
    "MEMSET_CACHES", "OPCODE_HI", "OPCODE_LO", "WORD_BITS", "Disagreement", "Field", "Format",
    "Instruction", "IsaError", "c_header", "decode", "disassemble", "encode", "flag_bits",
    "fmap_shape_fields", "format_table", "memcpy_length_fields", "memcpy_length_words",
]  # fmt: skip

"""The ISA tables: encode/decode identity, pccx's own bit-exact vectors, header, CLI."""

from __future__ import annotations

import shutil
import subprocess

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pccx_flow.board.isa import (
    CVO_FUNCS,
    FORMATS,
    KICK_MARKER,
    IsaError,
    c_header,
    decode,
    disassemble,
    encode,
    flag_bits,
    memcpy_length_fields,
    memcpy_length_words,
)
from pccx_flow.cli.main import main


@st.composite
def instructions(draw):
    op = draw(st.sampled_from(sorted(FORMATS)))
    values = {}
    for f in FORMATS[op].fields:
        if f.reserved:
            continue
        if f.enum:
            values[f.name] = draw(st.sampled_from(sorted(f.enum.values())))
        else:
            values[f.name] = draw(st.integers(0, f.mask))
    return op, values


@given(instructions())
def test_encode_decode_is_identity_on_every_field(case):
    op, values = case
    word = encode(op, **values)
    ins = decode(word)
    assert ins.op == op
    for name, value in values.items():
        assert ins.fields[name] == value
    assert encode(ins.op, **{k: v for k, v in ins.fields.items() if k != "reserved"}) == word


def test_fields_tile_the_body_without_gaps_or_overlap():
    for fmt in FORMATS.values():
        covered = 0
        for f in fmt.fields:
            bits = ((1 << f.width) - 1) << f.lo
            assert covered & bits == 0, (fmt.name, f.name)
            covered |= bits
        assert covered == (1 << 60) - 1, fmt.name


# tools/v002/generate_smoke_program.py (pccxai/pccx-FPGA-NPU-LLM-kv260), preset
# tiny-shape-lookup: the field values of its seven instructions and the words it prints.
SMOKE = [
    ("MEMSET", dict(dest_cache=0, slot=3, a=1, b=1, c=9), 0x3030001000100090),
    ("MEMSET", dict(dest_cache=0, slot=9, a=4, b=4, c=4), 0x3090004000400040),
    (
        "MEMCPY",
        dict(from_device=1, to_device=0, dest=100, src=0, aux=0, shape_ptr=3, async_=0),
        0x2800C80000000006,
    ),
    (
        "GEMM",
        dict(dest=512, src=300, flags=0b001000, size_ptr=1, shape_ptr=3, parallel_lane=4),
        0x10100004B0804320,
    ),
    (
        "GEMV",
        dict(dest=768, src=400, flags=0b010000, size_ptr=2, shape_ptr=9, parallel_lane=4),
        0x0018000641008920,
    ),
    ("CVO", dict(func=5, src=768, dst=896, length=64, flags=0, async_=0), 0x45018000E0001000),
    (
        "MEMCPY",
        dict(from_device=0, to_device=1, dest=0, src=896, aux=0, shape_ptr=3, async_=0),
        0x2400000380000006,
    ),
]

# sw/driver/uCA_v1_api.c (same repository): words its builders issue for these calls
# (captured by linking the driver against a HAL stub that prints each issued word).
DRIVER = [
    # uca_gemv(0x1ABCD, 0x01234, W_SCALE|ACCM, 5, 7, 4)
    (
        "GEMV",
        dict(dest=0x1ABCD, src=0x01234, flags=0b011000, size_ptr=5, shape_ptr=7, parallel_lane=4),
        0x0D5E6848D1814720,
    ),
    # uca_gemm(0x00200, 0x1FFFF, FINDEMAX, 63, 1, 1)
    (
        "GEMM",
        dict(dest=0x200, src=0x1FFFF, flags=0b100000, size_ptr=63, shape_ptr=1, parallel_lane=1),
        0x101007FFFE0FC108,
    ),
    # uca_cvo(SCALE, 0x100, 0x200, 2048, RECIP_SCALE, 1)
    (
        "CVO",
        dict(func=6, src=0x100, dst=0x200, length=2048, flags=0b01000, async_=1),
        0x4600800080020011,
    ),
    # uca_cvo(EXP, 0x1FFFF, 0, 0xFFFF, SUB_EMAX, 0)
    (
        "CVO",
        dict(func=0, src=0x1FFFF, dst=0, length=0xFFFF, flags=0b10000, async_=0),
        0x40FFFF80003FFFE0,
    ),
    # uca_memcpy(UCA_ROUTE_L2_TO_HOST=0x10, 0, 0x380, 9, 1): from_device=1, to_device=0
    (
        "MEMCPY",
        dict(from_device=1, to_device=0, dest=0, src=0x380, aux=0, shape_ptr=9, async_=1),
        0x2800000380000013,
    ),
    # uca_memset(1, 42, 0x1234, 0xBEEF, 0xFFFF)
    ("MEMSET", dict(dest_cache=1, slot=42, a=0x1234, b=0xBEEF, c=0xFFFF), 0x36A1234BEEFFFFF0),
]


def _fields(values: dict) -> dict:
    return {("async" if k == "async_" else k): v for k, v in values.items()}


@pytest.mark.parametrize("op,values,word", SMOKE + DRIVER)
def test_words_match_pccx_bit_for_bit(op, values, word):
    assert encode(op, **_fields(values)) == word
    got = decode(word).fields
    for name, value in _fields(values).items():
        assert got[name] == value


def test_flag_names_give_pccx_flag_values():
    # uCA_v1_api.h: UCA_FLAG_FINDEMAX 1<<5, ACCM 1<<4, W_SCALE 1<<3; CVO SUB_EMAX 1<<4,
    # RECIP_SCALE 1<<3, ACCM 1<<2.
    mac = FORMATS["GEMV"].field("flags")
    cvo = FORMATS["CVO"].field("flags")
    assert flag_bits(mac, ["findemax"]) == 1 << 5
    assert flag_bits(mac, {"accm": 1, "w_scale": 1}) == (1 << 4) | (1 << 3)
    assert flag_bits(cvo, ["sub_emax", "recip_scale", "accm"]) == 0b11100
    with pytest.raises(IsaError):
        flag_bits(cvo, ["w_scale"])


def test_cvo_codes_match_the_smoke_program():
    # generate_smoke_program.py CVO_FUNC
    assert CVO_FUNCS == {
        "EXP": 0,
        "SQRT": 1,
        "GELU": 2,
        "SIN": 3,
        "COS": 4,
        "REDUCE_SUM": 5,
        "SCALE": 6,
        "RECIP": 7,
    }


def test_bad_values_and_words_are_refused():
    with pytest.raises(IsaError, match="does not fit in 17 bits"):
        encode("GEMV", dest=1 << 17)
    with pytest.raises(IsaError, match="reserved"):
        encode("MEMSET", reserved=1)
    with pytest.raises(IsaError, match="no field"):
        encode("CVO", dest=1)
    with pytest.raises(IsaError, match="reserved opcode 0x8"):
        decode(KICK_MARKER)
    with pytest.raises(IsaError, match="reserved opcode 0x5"):
        decode(0x5 << 60)
    with pytest.raises(IsaError, match="bits are not zero"):
        decode(encode("GEMV") | 1)
    with pytest.raises(IsaError, match="not a defined value"):
        decode(encode("CVO") | (0xF << 56))


def test_disassembly_names_fields():
    assert disassemble(0x45018000E0001000) == (
        "CVO func=REDUCE_SUM src=0x00300 dst=0x00380 length=64 flags=0 async=sync"
    )
    assert "flags=accm" in disassemble(0x0018000641008920)


@pytest.mark.skipif(shutil.which("cc") is None, reason="no C compiler")
def test_c_header_builds_the_same_words(tmp_path):
    (tmp_path / "pccx_isa.h").write_text(c_header())
    (tmp_path / "t.c").write_text(
        '#include <stdio.h>\n#include "pccx_isa.h"\nint main(void){\n'
        "uint64_t w = PCCX_OPCODE(PCCX_OP_CVO)"
        " | PCCX_FIELD(PCCX_CVO_FUNC, PCCX_CVO_FUNC_REDUCE_SUM)"
        " | PCCX_FIELD(PCCX_CVO_SRC, 768) | PCCX_FIELD(PCCX_CVO_DST, 896)"
        " | PCCX_FIELD(PCCX_CVO_LENGTH, 64);\n"
        "uint64_t m = PCCX_OPCODE(PCCX_OP_MEMSET) | PCCX_FIELD(PCCX_MEMSET_SLOT, 42)"
        " | PCCX_FIELD(PCCX_MEMSET_DEST_CACHE, PCCX_MEMSET_DEST_CACHE_WEIGHT_SHAPE)"
        " | PCCX_FIELD(PCCX_MEMSET_A, 0x1234) | PCCX_FIELD(PCCX_MEMSET_B, 0xBEEF)"
        " | PCCX_FIELD(PCCX_MEMSET_C, 0xFFFF);\n"
        'printf("%016llx %016llx\\n", (unsigned long long)w, (unsigned long long)m);'
        " return 0; }\n"
    )
    subprocess.run(
        ["cc", "-Wall", "-Werror", "-o", str(tmp_path / "t"), str(tmp_path / "t.c")], check=True
    )
    out = subprocess.run([str(tmp_path / "t")], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["45018000e0001000", "36a1234beefffff0"]


def test_isa_command_prints_table_and_disagreements(capsys, tmp_path):
    assert main(["isa"]) == 0
    out = capsys.readouterr().out
    assert "[59:43]" in out and "REDUCE_SUM=5" in out
    assert "MEMCPY direction in the C driver" in out
    header = tmp_path / "isa.h"
    assert main(["isa", "--c-header", str(header)]) == 0
    assert "#define PCCX_OP_CVO 0x4" in header.read_text()
    assert main(["isa", "--c-header", str(tmp_path / "nope" / "x.h")]) == 2
    assert "pccx-flow: error:" in capsys.readouterr().err


@pytest.mark.parametrize("module", ["fields", "listing", "target", "bf16", "wire"])
def test_docstring_examples_run(module):
    import doctest
    import importlib

    result = doctest.testmod(importlib.import_module(f"pccx_flow.board.isa.{module}"))
    assert result.attempted > 0 and result.failed == 0


def test_memcpy_length_follows_the_rtl_rule_for_every_l2_size():
    # mem_dispatcher.sv (pccxai/pccx-v002): words = ceil((X*Y*Z)[19:0] / 8), so (8, n, 1)
    # moves n words and a zero Z moves nothing
    assert memcpy_length_words(8, 100, 1) == 100
    assert memcpy_length_words(100, 1, 1) == 13  # rounds up
    assert memcpy_length_words(8, 100, 0) == 0
    assert memcpy_length_words(1 << 10, 1 << 10, 1) == 0  # only the low 20 bits count
    for words in range(1, 1 << 17):
        fields = memcpy_length_fields(words)
        assert max(fields) <= 0xFFFF and memcpy_length_words(*fields) == words, words
    for words in (0, 1 << 17):
        with pytest.raises(IsaError, match="17-bit L2 address space"):
            memcpy_length_fields(words)

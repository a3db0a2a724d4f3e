"""The targets' readings of a word, the profile field that picks one, BF16 and byte layouts."""

from __future__ import annotations

import numpy as np
import pytest

from pccx_flow.board.isa import bf16, wire
from pccx_flow.board.isa.rtl_rules import GAPS, RULES, rules_table
from pccx_flow.board.isa.target import (
    AS_BUILT,
    SPEC,
    TargetError,
    check_program_target,
    get_target,
    row_align_for,
    target_of,
)
from pccx_flow.errors import ProfileError
from pccx_flow.hardware.profile import load_profile


def test_as_built_cvo_fields_are_bf16_element_addresses():
    assert AS_BUILT.cvo_field(3) == 24 and AS_BUILT.cvo_word(24) == 3
    # the bridge drops the low 3 bits: a field inside a word streams from the word's start
    assert AS_BUILT.cvo_word(24 + 7) == 3
    assert SPEC.cvo_field(3) == 3 and SPEC.cvo_word(3) == 3
    # 17 bits of elements reach 16,384 words (256 KiB); of words, all 131,072
    assert AS_BUILT.cvo_reach_words * 16 == 256 * 1024 and SPEC.cvo_reach_words == 1 << 17
    assert (AS_BUILT.element_bytes, SPEC.element_bytes) == (2, 4)


def test_lengths_cover_whole_words_and_sums_are_exact():
    assert AS_BUILT.cvo_length("EXP", 5) == 8
    assert AS_BUILT.cvo_length("EXP", 16) == 16
    assert AS_BUILT.cvo_length("RECIP", 1, offset=7) == 8  # a sum in element 7
    assert AS_BUILT.cvo_length("REDUCE_SUM", 5) == 5
    assert AS_BUILT.cvo_length("REDUCE_SUM", 1, offset=7) == 8
    assert SPEC.cvo_length("EXP", 5) == 5
    with pytest.raises(TargetError):
        AS_BUILT.cvo_length("EXP", 3, offset=7)  # values would spill past the word


def test_cvos_beyond_the_result_fifo_are_split_into_whole_word_pieces():
    assert AS_BUILT.cvo_pieces("EXP", 5000) == [(0, 2048), (2048, 2048), (4096, 904)]
    assert AS_BUILT.cvo_pieces("EXP", 2043) == [(0, 2048)]  # padded, still one piece
    assert AS_BUILT.cvo_pieces("REDUCE_SUM", 16384) == [(0, 16384)]  # one result
    assert SPEC.cvo_pieces("EXP", 5000) == [(0, 5000)]
    assert all(length <= 2048 and start % 8 == 0 for start, length in
               AS_BUILT.cvo_pieces("GELU", 10_000))  # fmt: skip


def test_every_rule_and_gap_names_its_rtl_source():
    assert {r.topic for r in RULES} >= {"CVO addresses", "CVO result cap", "command FIFO"}
    for r in RULES:
        assert ".sv" in r.source, r.topic
    for g in GAPS:
        assert ".sv" in g.rtl, g.topic
    text = rules_table()
    assert "mem_CVO_stream_bridge.sv" in text and max(map(len, text.splitlines())) <= 96


def test_profiles_choose_the_target_and_a_user_file_can_set_it(tmp_path):
    assert target_of(load_profile("v002-spec")) is SPEC
    asb = load_profile("v002-as-built")
    assert target_of(asb) is AS_BUILT and asb.program.command_fifo == "paced"
    assert asb.provenance["program.target"].tag == "rtl"
    assert target_of(asb, "spec") is SPEC
    assert row_align_for(AS_BUILT) == 8 and row_align_for(SPEC) == 1
    f = tmp_path / "mine.toml"
    f.write_text(
        '[profile]\nextends = "v002-spec"\nname = "mine"\n\n'
        '[program]\ntarget = "as-built"\ncommand_fifo = "reissue"\n'
    )
    mine = load_profile(f)
    assert (mine.program.target, mine.program.command_fifo) == ("as-built", "reissue")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ('[program]\ntarget = "rtl"\n', r"'program.target' = 'rtl' is not one of spec, as-built"),
        ('[program]\nfifo = "paced"\n', r"unknown field 'program.fifo'"),
        ('[program]\ntarget = { value = "spec", tag = "maybe" }\n', r"tag 'maybe'"),
    ],
)
def test_a_malformed_program_table_is_one_line(tmp_path, body, message):
    f = tmp_path / "bad.toml"
    f.write_text('[profile]\nextends = "v002-spec"\nname = "bad"\n\n' + body)
    with pytest.raises(ProfileError, match=message) as err:
        load_profile(f)
    assert "\n" not in str(err.value)


def test_unknown_target_and_a_program_for_another_target_are_refused():
    with pytest.raises(TargetError, match="unknown target 'rtl'"):
        get_target("rtl")
    with pytest.raises(TargetError, match="emitted for target 'spec'.*--target as-built"):
        check_program_target("spec", "as-built", "a device with profile v002-as-built")
    check_program_target("as-built", "as-built", "x")


def test_bf16_rounds_to_nearest_even_and_keeps_nan():
    x = np.array([1.0, 1.00390625, 1.01171875, -2.5, np.inf, np.nan, 0.0], dtype=np.float32)
    bits = bf16.to_bits(x)
    # 1 + 2**-8 is a tie: down to even (0x3F80); 1 + 3*2**-8 ties up to 0x3F82
    assert bits[:5].tolist() == [0x3F80, 0x3F80, 0x3F82, 0xC020, 0x7F80]
    assert np.isnan(bf16.from_bits(bits[5:6]))[0] and bits[6] == 0
    r = bf16.round_bf16(np.float32(np.pi))
    assert float(r) == 3.140625 and bf16.round_bf16(r) == r  # idempotent


def test_wire_layout_puts_values_after_their_element_offset():
    raw = wire.pack([2.0], "bfloat16", offset=7, nbytes=16)
    assert raw[:14] == bytes(14) and raw[14:] == bytes.fromhex("0040")
    assert wire.unpack(raw, 1, "bfloat16", offset=7).tolist() == [2.0]
    f32 = wire.pack(np.arange(3, dtype=np.float32), "float32")
    assert wire.unpack(f32, 3, "float32").tolist() == [0.0, 1.0, 2.0]
    assert wire.entry_fields([10, 2, 1, "bfloat16", 7]) == (10, 2, 1, "bfloat16", 7)
    assert wire.entry_fields([10, 2, 4, "float32"])[4] == 0
    with pytest.raises(ValueError):
        wire.pack(np.ones(9), "bfloat16", nbytes=16)

"""The register map and the DataMover command/status layouts, bit for bit.

Vectors come from the board repository pccxai/pccx-FPGA-NPU-LLM-kv260 (file named at each).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pccx_flow.board.device import regmap
from pccx_flow.board.device.regmap import (
    board_registers,
    command_from_registers,
    command_registers,
    decode_command,
    decode_status,
    encode_command,
    encode_status,
)
from pccx_flow.errors import BoardError
from pccx_flow.hardware.profile import load_profile


def test_command_vector_from_pccx_runtime_test():
    # sw/runtime/npu/tests/test_npu_dispatch.py test_datamover_command_word_packing:
    # addr=0x12345678, tag=0xA, length_bytes=0x40, eof=True ->
    # (0xA << 68) | (0x12345678 << 32) | (1 << 30) | (1 << 23) | 0x40
    word = encode_command(addr=0x12345678, tag=0xA, length_bytes=0x40, eof=True)
    assert word == 0xA0_1234_5678_4080_0040
    # test_datamover_issue_command_writes_three_words_then_push: CMD_LO, CMD_HI, CMD_EXT
    # are word & 0xFFFF_FFFF, (word >> 32) & 0xFFFF_FFFF, (word >> 64)
    assert command_registers(word) == (0x4080_0040, 0x1234_5678, 0xA0)


def test_command_without_eof_and_largest_length():
    # sw/runtime/npu/README.md: eof[30], type[23]=1, btt[22:0]; dma.py BTT_MASK = 2**23 - 1
    assert encode_command(addr=0, length_bytes=0x40, eof=False) == (1 << 23) | 0x40
    top = encode_command(addr=0xFFFF_FFFF, tag=0xF, length_bytes=(1 << 23) - 1)
    assert top == (0xF << 68) | (0xFFFF_FFFF << 32) | (1 << 30) | (1 << 23) | 0x7F_FFFF


@given(
    addr=st.integers(0, 2**32 - 1),
    tag=st.integers(0, 15),
    length=st.integers(1, 2**23 - 1),
    eof=st.booleans(),
)
def test_command_roundtrip(addr, tag, length, eof):
    word = encode_command(addr=addr, tag=tag, length_bytes=length, eof=eof)
    assert word < 1 << 72
    assert command_from_registers(*command_registers(word)) == word
    got = decode_command(word)
    assert (got.addr, got.tag, got.length_bytes, got.eof) == (addr, tag, length, eof)


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"addr": 0, "length_bytes": 0}, "outside 1 .."),
        ({"addr": 0, "length_bytes": 1 << 23}, "outside 1 .."),
        ({"addr": 1 << 32, "length_bytes": 1}, "addr"),
        ({"addr": 0, "length_bytes": 1, "tag": 16}, "tag"),
    ],
)
def test_command_out_of_range_is_one_line(kwargs, words):
    with pytest.raises(BoardError, match=words) as info:
        encode_command(**kwargs)
    assert "\n" not in str(info.value)


def test_decode_refuses_wrong_constant_bits():
    good = encode_command(addr=0x1000, length_bytes=16)
    with pytest.raises(BoardError, match="type is 0"):
        decode_command(good & ~(1 << 23))
    with pytest.raises(BoardError, match="reserved"):
        decode_command(good | 1 << 64)
    with pytest.raises(BoardError, match="byte count 0"):
        decode_command(good & ~0x7F_FFFF)


def test_status_word_is_pg022_layout():
    # Xilinx PG022 status word: bit7 OKAY, bit6 SLVERR, bit5 DECERR, bit4 INTERR, [3:0] TAG
    assert encode_status(tag=0xA) == 0x8A
    assert encode_status(tag=3, okay=False, slverr=True) == 0x43
    assert encode_status(tag=0, okay=False, decerr=True, interr=True) == 0x30
    s = decode_status(0x45)
    assert (s.tag, s.okay, s.errors) == (5, False, ["slverr"])
    assert "dma.py" in regmap.STATUS_DISAGREEMENT


def test_flags_bits():
    # sw/runtime/npu/dma.py FLAG_CMD_EMPTY..FLAG_STS_FULL = bits 0..3;
    # hw/scripts/post_deploy_smoke.py: bits[7:4] = sticky errors
    assert (regmap.FLAG_CMD_EMPTY, regmap.FLAG_CMD_FULL) == (1, 2)
    assert (regmap.FLAG_STS_EMPTY, regmap.FLAG_STS_FULL) == (4, 8)
    assert regmap.sticky_errors(0x55) == 0x5
    assert regmap.sticky_errors(0x0F) == 0


def test_page_registers():
    # sw/runtime/npu/dma.py CMD_LO=0x000 ... ERR_W1C=0x020
    assert regmap.PAGE_REGISTERS == {
        "CMD_LO": 0x000,
        "CMD_HI": 0x004,
        "CMD_EXT": 0x008,
        "CMD_PUSH": 0x00C,
        "STS_POP": 0x010,
        "FLAGS": 0x014,
        "CMD_LVL": 0x018,
        "STS_LVL": 0x01C,
        "ERR_W1C": 0x020,
    }


@pytest.mark.parametrize("name", ["v002-spec", "v002-as-built"])
def test_board_registers_from_profiles(name):
    regs = board_registers(load_profile(name))
    # sw/runtime/npu/address_map.py: CMDSTS_HP0..ACP_RESULT at NPU base + 0x1000 .. 0x6000
    assert regs.pages == {
        "hp0": 0x1000,
        "hp1": 0x2000,
        "hp2": 0x3000,
        "hp3": 0x4000,
        "acp_in": 0x5000,
        "acp_out": 0x6000,
    }
    # sw/runtime/uio.py ADDR_INST = 0x000, ADDR_KICK = 0x008; npu_driver.h REG_STATUS 0x010
    assert (regs.instruction, regs.kick, regs.status) == (0x000, 0x008, 0x010)
    # npu_driver.h: BUSY bit 0, DONE bit 1, ERROR bit 2; FIFO depth 8 (uio.py submit_program)
    assert (regs.busy_mask, regs.done_mask, regs.error_mask, regs.max_batch) == (1, 2, 4, 8)
    assert 0x004 in regs.status_alternatives  # address_map.py AXIL_STAT_OUT
    assert regs.page_register("hp2", "FLAGS") == 0x3014


def test_page_outside_window_is_refused(tmp_path):
    path = tmp_path / "far.toml"
    path.write_text(
        '[profile]\nname = "far"\nextends = "v002-spec"\n'
        "[registers.datamover_pages]\nfar = 0xB000_0000\n"
    )
    with pytest.raises(BoardError, match="DataMover page far at 0xb0000000 lies outside"):
        board_registers(load_profile(path))


def test_unknown_page_is_one_line():
    regs = board_registers(load_profile("v002-spec"))
    with pytest.raises(BoardError, match="unknown DataMover page 'hp9'"):
        regs.page_register("hp9", "FLAGS")

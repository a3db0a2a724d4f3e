"""The fake board of `doctor`: its u-dma-buf tree, its probe NPU and its fault names."""

from __future__ import annotations

import pytest

from pccx_flow.board.device import regmap
from pccx_flow.board.device.cma import UdmabufSource
from pccx_flow.board.device.fake_bench import FAULTS, UDMABUFS, FakeBoard, check_faults
from pccx_flow.board.isa import encode, memcpy_length_fields
from pccx_flow.errors import InputError
from pccx_flow.hardware.profile import load_profile

REGS = regmap.board_registers(load_profile("v002-as-built"))
DONE = encode("CVO", func="REDUCE_SUM", src=0, dst=0, length=1)


def test_unknown_faults_are_one_line_naming_the_known_ones():
    check_faults(list(FAULTS))
    with pytest.raises(InputError, match="'melted': not a fault of the fake board.*acp-no-status"):
        check_faults(["never-done", "melted"])


def test_the_u_dma_buf_tree_is_found_and_mapped_as_on_a_board(tmp_path):
    with FakeBoard(tmp_path, REGS) as board:
        src = UdmabufSource(["udmabuf1"], board.udmabuf_sysfs, board.dev_root)
        buf = src.allocate("probe", 4096)
        assert buf.phys == UDMABUFS[1][1]
        buf.close()
    with FakeBoard(tmp_path / "none", REGS, ["no-udmabuf"]) as board:
        assert not board.udmabuf_sysfs.exists() and board.memory == []


def test_the_probe_npu_moves_bytes_host_to_l2_and_back_as_the_acp_commands_point(tmp_path):
    with FakeBoard(tmp_path, REGS) as board:
        npu = board.device.open(by_name=True)
        mem = board.memory[1]
        mem.view(0, 32)[:] = bytes(range(32))
        x, y, z = memcpy_length_fields(2)
        words = [
            encode("MEMSET", dest_cache="fmap_shape", slot=5, a=x, b=y, c=z),
            encode("MEMCPY", from_device="host", to_device="npu", dest=9, src=0, aux=0,
                   shape_ptr=5),
            encode("MEMCPY", from_device="npu", to_device="host", dest=0, src=9, aux=0,
                   shape_ptr=5),
            DONE,
        ]  # fmt: skip
        npu.push_command("acp_in", regmap.encode_command(addr=mem.phys, length_bytes=32))
        npu.push_command("acp_out", regmap.encode_command(addr=mem.phys + 64, length_bytes=32))
        for w in words:
            npu.write_instruction(w)
        npu.kick()
        assert npu.wait_done(timeout=5.0) & REGS.done_mask
        assert bytes(mem.view(64, 32)) == bytes(range(32))
        assert bytes(board.probe.l2[9 * 16 : 11 * 16]) == bytes(range(32))
        npu.window.close()

"""The fake device: what it does with words, kicks and DataMover commands, and its faults."""

from __future__ import annotations

import pytest

from pccx_flow.board.device import regmap
from pccx_flow.board.device.fake_device import FakeDevice
from pccx_flow.board.device.uio import BoardTimeout, DeviceGone
from pccx_flow.hardware.profile import load_profile

REGS = regmap.board_registers(load_profile("v002-spec"))
MEMSET = 0x3000_0000_0000_0000  # opcode 0x3 in [63:60] (pccx-v002.md §4)


@pytest.fixture
def device(tmp_path):
    got: list[list[int]] = []
    dev = FakeDevice(tmp_path, REGS, got.append, answer_timeout=5.0).start()
    npu = dev.open(by_name=True)
    yield dev, npu, got
    npu.window.close()
    dev.stop()


def test_batches_reach_on_batch_in_order(device):
    dev, npu, got = device
    assert npu.status() & REGS.done_mask == 0
    for batch in ([MEMSET | 1, MEMSET | 2], [MEMSET | 3]):
        for w in batch:
            npu.write_instruction(w)
        npu.kick()
        assert npu.wait_done(timeout=5.0) & REGS.done_mask
    assert got == [[MEMSET | 1, MEMSET | 2], [MEMSET | 3]]
    assert dev.batches == got and dev.faults == []


def test_ninth_word_is_dropped_and_reported(device):
    dev, npu, got = device
    for i in range(9):
        npu.write_instruction(MEMSET | i)
    npu.kick()
    status = npu.wait_done(timeout=5.0)
    print(dev.faults[0])
    assert got == [[MEMSET | i for i in range(8)]]
    assert dev.dropped == [MEMSET | 8]
    assert status & REGS.error_mask
    assert dev.faults == [
        "command FIFO overflow: word 9 of batch 0 (0x3000000000000008) dropped (depth 8)"
    ]
    npu.write_instruction(MEMSET)  # the next batch starts clean
    npu.kick()
    assert not npu.wait_done(timeout=5.0) & REGS.error_mask


def test_datamover_command_staging_and_status(device):
    dev, npu, _ = device
    cmd = regmap.encode_command(addr=0x7000_0000, tag=0x5, length_bytes=4096)
    assert npu.flags("hp2") & regmap.FLAG_CMD_EMPTY
    npu.push_command("hp2", cmd)
    # the writes are posted: the next read waits until the device took them
    assert npu.window.read32(REGS.page_register("hp2", "CMD_LVL")) == 1
    assert dev.pages["hp2"].log == [cmd]  # the 72 bits staged through CMD_LO/HI/EXT
    assert npu.pop_status("hp2") is None  # nothing completed yet
    npu.write_instruction(MEMSET)
    npu.kick()
    npu.wait_done(timeout=5.0)
    assert npu.status_level("hp2") == 1
    assert npu.pop_status("hp2") == regmap.encode_status(tag=0x5)  # 0x85
    assert npu.flags("hp2") & regmap.FLAG_STS_EMPTY


def test_command_fifo_full_flag(device):
    _, npu, _ = device
    cmd = regmap.encode_command(addr=0x1000, length_bytes=16)
    for _ in range(regmap.FIFO_DEPTH):
        npu.push_command("acp_in", cmd)
    assert npu.flags("acp_in") & regmap.FLAG_CMD_FULL
    with pytest.raises(Exception, match="command FIFO full"):
        npu.push_command("acp_in", cmd)


def test_sticky_dma_error_until_cleared(device):
    dev, npu, _ = device
    dev.dma_error("hp3", at_batch=0, bits=0b0100)
    npu.push_command("hp3", regmap.encode_command(addr=0x1000, tag=2, length_bytes=16))
    npu.write_instruction(MEMSET)
    npu.kick()
    npu.wait_done(timeout=5.0)
    assert regmap.sticky_errors(npu.flags("hp3")) == 0b0100
    status = regmap.decode_status(npu.pop_status("hp3"))
    assert (status.tag, status.okay, status.errors) == (2, False, ["slverr"])
    assert regmap.sticky_errors(npu.flags("hp3")) == 0b0100  # sticky: popping keeps it
    npu.clear_errors("hp3")
    assert regmap.sticky_errors(npu.flags("hp3")) == 0


def test_never_done(device):
    dev, npu, _ = device
    dev.never_done(at_batch=0)
    npu.write_instruction(MEMSET)
    npu.kick()
    with pytest.raises(BoardTimeout):
        npu.wait_done(timeout=0.05)
    assert npu.status() & REGS.busy_mask


def test_device_that_stops_answering(device):
    dev, npu, _ = device
    dev.disappear(at_batch=0, how="silent")
    dev.bus.answer_timeout = 0.2
    npu.kick()  # taken; the device stops answering while it runs the batch
    npu.write_instruction(MEMSET)  # posted: the host goes on
    gone = f"did not answer a register read at {REGS.status:#x} within 0.2 s"
    with pytest.raises(DeviceGone, match=gone):
        npu.status()  # the first read after a posted write waits for the device
    with pytest.raises(DeviceGone, match="did not answer a register write at 0x"):
        npu.kick()  # a kick always waits


def test_device_file_removed(device):
    dev, npu, _ = device
    dev.disappear(at_batch=0, how="remove")
    npu.kick()
    with pytest.raises(DeviceGone, match="disappeared"):
        npu.wait_done(timeout=5.0)


def test_model_failure_is_the_error_bit(tmp_path):
    def broken(words):
        raise ValueError("illegal word")

    with FakeDevice(tmp_path, REGS, broken) as dev:
        npu = dev.open()
        npu.write_instruction(0xF000_0000_0000_0000)
        npu.kick()
        assert npu.wait_done(timeout=5.0) & REGS.error_mask
        assert dev.faults == ["batch 0: on_batch raised ValueError: illegal word"]
        npu.window.close()


def test_probe_reads_idle_then_sticky(device):
    dev, npu, _ = device
    assert npu.probe()[1:] == [f"{p:8s} FLAGS=0x05 idle (sticky errors 0x0)" for p in REGS.pages]
    dev.dma_error("hp0", at_batch=0, bits=0b1000)
    npu.push_command("hp0", regmap.encode_command(addr=0x1000, length_bytes=16))
    npu.kick()
    npu.wait_done(timeout=5.0)
    assert npu.probe()[1] == "hp0      FLAGS=0x81 NOT idle (sticky errors 0x8)"
    assert npu.probe()[0] == "status 0x00000002 at 0x010"


def _one_command_batch(npu, page: str, tag: int) -> None:
    npu.push_command(page, regmap.encode_command(addr=0x4000_0000, length_bytes=64, tag=tag))
    npu.write_instruction(MEMSET)
    npu.kick()
    npu.wait_done(timeout=5.0)


def test_a_silent_channel_takes_commands_and_never_answers(device):
    dev, npu, _ = device
    dev.dm_answer("acp_in", lambda _tag: [])
    _one_command_batch(npu, "acp_in", 3)
    _one_command_batch(npu, "hp2", 4)
    assert npu.pop_status("acp_in") is None
    assert npu.window.read32(REGS.page_register("acp_in", "CMD_LVL")) == 0
    assert npu.pop_status("hp2") == regmap.encode_status(tag=4)


def test_a_channel_can_answer_with_other_status_words(device):
    dev, npu, _ = device
    dev.dm_answer("hp0", lambda tag: [0x10 | tag, 0x80])
    _one_command_batch(npu, "hp0", 5)
    assert [npu.pop_status("hp0"), npu.pop_status("hp0"), npu.pop_status("hp0")] == [
        0x15, 0x80, None
    ]  # fmt: skip


def test_a_stuck_command_fifo_is_full_from_the_start_and_never_drains(device):
    dev, npu, _ = device
    dev.stuck_commands("hp3")
    flags = npu.flags("hp3")
    assert flags & regmap.FLAG_CMD_FULL and not flags & regmap.FLAG_CMD_EMPTY
    with pytest.raises(regmap.BoardError, match="command FIFO full"):
        npu.push_command("hp3", regmap.encode_command(addr=0, length_bytes=1))
    npu.write_instruction(MEMSET)
    npu.kick()
    npu.wait_done(timeout=5.0)
    assert npu.window.read32(REGS.page_register("hp3", "CMD_LVL")) == regmap.FIFO_DEPTH
    assert npu.pop_status("hp3") is None


def test_a_write_to_a_stopped_device_is_device_gone(tmp_path):
    with FakeDevice(tmp_path, REGS) as dev:
        npu = dev.open()
        npu.write_instruction(MEMSET)
    with pytest.raises(DeviceGone, match="is stopped"):
        npu.write_instruction(MEMSET)  # one line for the host, not the mmap's ValueError

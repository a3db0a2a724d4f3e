"""The whole dispatch path (UIO window, status polls, DataMover pages) against the fake device.

The program is hand-built from raw 64-bit words laid out as pccx-v002.md §4 describes:
MEMSET = opcode 0x3 [63:60], dest_cache [59:58], slot [57:52], a [51:36], b [35:20], c [19:4];
CVO = opcode 0x4, function [59:56], src [55:39], dst [38:22], length [21:6], flags [5:1].
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from pccx_flow.board.device import regmap
from pccx_flow.board.device.device_model import program_model
from pccx_flow.board.device.dispatch import Descriptor, dispatch, plan
from pccx_flow.board.device.fake_device import FakeDevice
from pccx_flow.errors import BoardError
from pccx_flow.hardware.profile import load_profile

REGS = regmap.board_registers(load_profile("v002-spec"))
KICK = regmap.KICK_WORD
TIMEOUT = 0.5  # for waits that must fail; generous so a loaded CI machine does not flake


def memset(slot: int, a: int, b: int = 0, c: int = 0) -> int:
    return 0x3 << 60 | slot << 52 | a << 36 | b << 20 | c << 4


def cvo(func: int, src: int, dst: int, length: int) -> int:
    return 0x4 << 60 | func << 56 | src << 39 | dst << 22 | length << 6


@dataclass
class Prog:
    """A program shaped like the lowered Program: words with kicks, nodes, steps."""

    words: list[int] = field(default_factory=list)
    nodes: list[str | None] = field(default_factory=list)
    steps: list[dict] = field(default_factory=list)

    def batch(self, *pairs: tuple[int, str]) -> Prog:
        start = len(self.words)
        for word, node in pairs:
            self.words.append(word)
            self.nodes.append(node)
        self.words.append(KICK)
        self.nodes.append(None)
        self.steps.append({"kind": "batch", "start": start, "end": len(self.words)})
        return self

    def host(self, node: str) -> Prog:
        self.steps.append({"kind": "host", "node": node, "func": "add"})
        return self

    def fence(self) -> Prog:
        self.steps.append({"kind": "fence"})
        return self


def tiny_program() -> Prog:
    # MEMSET slot 1 = 1/N as in an RMSNorm, and MEMSET words mixed with CVO EXP/REDUCE_SUM
    # (function 0x0 / 0x5) and SCALE (0x6): a softmax-like sequence.
    full = [(memset(k, k + 1), f"L0.const{k}") for k in range(6)]
    full += [(cvo(0x0, 0x10, 0x20, 64), "L0.softmax.exp"), (cvo(0x5, 0x20, 0x30, 64), "L0.sum")]
    return (
        Prog()
        .batch((memset(1, 0x3C00), "L0.rms.inv_n"), (memset(2, 64, 1), "L0.rms.shape"))
        .host("L0.rms.square")
        .batch(*full)  # exactly 8 words: a full FIFO
        .fence()
        .batch((cvo(0x6, 0x30, 0x40, 64), "L0.softmax.scale"))
        .host("L0.residual_add")
    )


@pytest.fixture
def board(tmp_path):
    events: list[tuple] = []
    dev = FakeDevice(
        tmp_path, REGS, lambda ws: events.append(("npu", ws)), answer_timeout=5.0
    ).start()
    npu = dev.open(by_name=True)
    yield dev, npu, events
    npu.window.close()
    dev.stop()


def _batches(prog: Prog) -> list[list[int]]:
    return [list(b.words) for b in plan(prog, REGS.max_batch) if not isinstance(b, dict)]


def test_raw_words_match_their_layout():
    # MEMSET dest_cache=0 slot=1 a=1 b=64 c=0, and CVO EXP src=0x10 dst=0x20 length=64
    assert memset(1, 1, 64) == 0x3010_0010_0400_0000
    assert cvo(0x0, 0x10, 0x20, 64) == 0x4000_0800_0800_1000


def test_dispatch_delivers_every_batch_in_order(board):
    dev, npu, events = board
    prog = tiny_program()
    report = dispatch(
        prog, npu, run_host_step=lambda s: events.append(("host", s["node"])), timeout=5.0
    )
    expected = _batches(prog)
    assert [len(b) for b in expected] == [2, 8, 1]
    assert dev.batches == expected
    assert events == [
        ("npu", expected[0]),
        ("host", "L0.rms.square"),
        ("npu", expected[1]),
        ("npu", expected[2]),
        ("host", "L0.residual_add"),
    ]
    assert (report.batches, report.words, report.host_steps, report.fences) == (3, 11, 2, 1)
    assert report.polls >= 3 and dev.faults == []


def test_dispatch_pushes_descriptors_and_checks_their_status(board):
    dev, npu, _ = board
    prog = tiny_program()
    cmd = regmap.encode_command(addr=0x7000_0000, tag=3, length_bytes=2048)

    def weights(batch):
        return [Descriptor("hp2", cmd, batch.first)] if batch.index == 1 else []

    report = dispatch(prog, npu, run_host_step=lambda s: None, descriptors=weights, timeout=5.0)
    assert dev.pages["hp2"].log == [cmd] and report.descriptors == 1
    assert npu.pop_status("hp2") is None  # dispatch popped the status it was owed


def test_fault_done_never_comes(board):
    dev, npu, _ = board
    dev.never_done(at_batch=1)
    with pytest.raises(BoardError) as info:
        dispatch(tiny_program(), npu, run_host_step=lambda s: None, timeout=TIMEOUT)
    msg = str(info.value)
    print(msg)
    assert "\n" not in msg
    assert msg.startswith("batch 1 (instruction 10, node L0.sum): DONE not seen within 0.5 s")
    assert "core BUSY (no soft reset: reload the bitstream)" in msg
    assert len(dev.batches) == 2


def test_fault_sticky_dma_error(board):
    dev, npu, _ = board
    dev.dma_error("hp3", at_batch=1, bits=0b0010)
    prog = tiny_program()
    cmd = regmap.encode_command(addr=0x7000_0000, tag=7, length_bytes=512)

    def weights(batch):
        return [Descriptor("hp3", cmd, batch.first + 6)] if batch.index == 1 else []

    with pytest.raises(BoardError) as info:
        dispatch(prog, npu, run_host_step=lambda s: None, descriptors=weights, timeout=5.0)
    msg = str(info.value)
    print(msg)
    assert "\n" not in msg
    assert msg.startswith(
        "batch 1 (instruction 9, node L0.softmax.exp): sticky DMA error 0x2 on DataMover"
        " page hp3; device reset"
    )
    # left reset: sticky bits cleared and the failed status drained
    assert regmap.sticky_errors(npu.flags("hp3")) == 0 and npu.pop_status("hp3") is None
    assert len(dev.batches) == 2


def test_fault_ninth_word_in_a_batch(board):
    dev, npu, _ = board
    prog = Prog().batch(*[(memset(k, k), f"n{k}") for k in range(9)])
    with pytest.raises(BoardError) as info:
        dispatch(prog, npu, timeout=TIMEOUT)
    msg = str(info.value)
    print(msg)
    assert "\n" not in msg
    assert msg.startswith("batch 0 (instruction 8, node n8): 9 words overflow the 8-deep")
    assert dev.batches == [] and dev.fifo == []  # nothing was written


def test_fault_error_bit(tmp_path):
    def broken(words):
        raise ValueError("illegal word")

    with FakeDevice(tmp_path, REGS, broken) as dev:
        npu = dev.open()
        with pytest.raises(BoardError) as info:
            dispatch(tiny_program(), npu, run_host_step=lambda s: None, timeout=5.0)
        npu.window.close()
    msg = str(info.value)
    print(msg)
    assert msg.startswith("batch 0 (instruction 1, node L0.rms.shape): the NPU set its ERROR bit")


def test_fault_device_removed(board):
    dev, npu, _ = board
    dev.disappear(at_batch=2, how="remove")
    with pytest.raises(BoardError) as info:
        dispatch(tiny_program(), npu, run_host_step=lambda s: None, timeout=5.0)
    msg = str(info.value)
    print(msg)
    assert "\n" not in msg
    assert msg.startswith("batch 2 (instruction 12, node L0.softmax.scale): device")
    assert "disappeared while waiting for DONE" in msg and "the device is gone" in msg


def test_fault_device_stops_answering(board):
    dev, npu, _ = board
    dev.disappear(at_batch=0, how="silent")
    dev.bus.answer_timeout = 0.2
    with pytest.raises(BoardError) as info:
        dispatch(tiny_program(), npu, run_host_step=lambda s: None, timeout=TIMEOUT)
    msg = str(info.value)
    print(msg)
    assert "\n" not in msg
    assert msg.startswith("batch 0 (instruction 1, node L0.rms.shape): DONE not seen")
    assert "the device could not be reset" in msg


def test_host_steps_need_a_runner(board):
    _, npu, _ = board
    with pytest.raises(BoardError, match="2 host steps; pass run_host_step"):
        dispatch(tiny_program(), npu)


def test_batch_without_its_kick_is_refused():
    prog = Prog(words=[memset(0, 1)], nodes=["n0"], steps=[{"kind": "batch", "end": 1}])
    with pytest.raises(BoardError, match=r"word 0 \(n0\) is not the kick marker"):
        plan(prog, 8)


def test_start_defaults_to_previous_end():
    prog = tiny_program()
    for step in prog.steps:
        step.pop("start", None)
    assert _batches(prog) == _batches(tiny_program())


def test_program_model_gets_each_word_with_its_index(tmp_path):
    prog = tiny_program()
    seen: list[tuple[int, int]] = []
    with FakeDevice(tmp_path, REGS, program_model(prog, lambda i, w: seen.append((i, w)))) as dev:
        npu = dev.open()
        dispatch(prog, npu, run_host_step=lambda s: None, timeout=5.0)
        npu.window.close()
    indices = [i for i, w in enumerate(prog.words) if w != KICK]
    assert seen == [(i, prog.words[i]) for i in indices] and dev.faults == []


def test_program_model_refuses_a_word_the_program_does_not_have(tmp_path):
    prog = tiny_program()
    other = tiny_program()
    other.words[1] = memset(9, 9)
    with FakeDevice(tmp_path, REGS, program_model(prog, lambda i, w: None)) as dev:
        npu = dev.open()
        with pytest.raises(BoardError, match="the NPU set its ERROR bit"):
            dispatch(other, npu, run_host_step=lambda s: None, timeout=5.0)
        npu.window.close()
    assert dev.faults == [
        "batch 0: on_batch raised BoardError: batch 0: word 1 differs from"
        " the program's (2 words received, 2 expected)"
    ]

"""L2 read-back through MEMCPY L2->host batches, on the fake device (the board's code path)."""

from __future__ import annotations

import dataclasses
from collections import Counter

import numpy as np
import pytest

from pccx_flow.board.device.cma import FileSource
from pccx_flow.board.device.device_model import DeviceModel
from pccx_flow.board.device.fake_device import FakeDevice
from pccx_flow.board.device.host_side import HostSide
from pccx_flow.board.device.readback import READBACK_SLOT, MemcpyReadBack, readback_batch
from pccx_flow.board.device.regmap import board_registers
from pccx_flow.board.device.run_step import host_buffers, readback_offset, run_step
from pccx_flow.board.emulator.check import default_tokens, reference_prefix
from pccx_flow.board.emulator.emulate import emulate
from pccx_flow.board.isa import decode, memcpy_length_words
from pccx_flow.errors import BoardError
from pccx_flow.execute.runtime import StepContext
from tests.board.conftest import lowered


def test_a_readback_batch_borrows_one_slot_and_puts_back_what_the_program_had():
    _, _, _, program = lowered("v002-spec", "critical-path", position=2)
    words = [decode(w) for w in readback_batch(program, 0x40, 3, after_word=10)]
    # the DONE marker last: on the RTL as built a MEMSET after it would raise DONE at once
    assert [w.op for w in words] == ["MEMSET", "MEMCPY", "CVO"]
    f = words[1].fields
    assert (f["from_device"], f["to_device"], f["src"], f["shape_ptr"]) == (0, 1, 0x40, 63)
    m = words[0].fields
    assert memcpy_length_words(m["a"], m["b"], m["c"]) == 3
    # a program that set slot 63 before word 10 gets its value back after the copy
    log = [*program.slots, {"word": 5, "slot": READBACK_SLOT, "value": [7, 8, 9],
                            "cache": "weight_shape", "meaning": "test"}]  # fmt: skip
    words = [decode(w) for w in readback_batch(
        dataclasses.replace(program, slots=log), 0x40, 3, after_word=10)]  # fmt: skip
    restore = words[-2].fields
    assert [w.op for w in words] == ["MEMSET", "MEMCPY", "MEMSET", "CVO"]
    assert (restore["slot"], restore["a"], restore["c"]) == (63, 7, 9)
    unmarked = dataclasses.replace(program, roles=["node"] * len(program.roles))
    with pytest.raises(BoardError, match="needs a program with DONE markers"):
        readback_batch(unmarked, 0x40, 3, after_word=10)


@pytest.mark.parametrize("case", [("v002-spec", "critical-path"), ("v002-as-built", "heft")])
def test_reading_every_written_range_back_between_batches_changes_nothing(
    tiny_ckpt, tmp_path, case
):
    _, _, profile, program = lowered(*case, position=2)
    tokens = default_tokens(3, tiny_ckpt.config.vocab)
    k, v, _ = reference_prefix(program, tiny_ckpt, tokens)
    ctx = StepContext(tiny_ckpt.config, "pccx", 2, tokens[-1], "float32")
    record: dict = {}
    want_logits, _ = emulate(program, tiny_ckpt, k.copy(), v.copy(), tokens[-1], ctx=ctx,
                             record=record)  # fmt: skip
    buffers = host_buffers(program, FileSource(tmp_path / "b"), tiny_ckpt, k, v, 1 << 16)
    model = DeviceModel(program, buffers, tiny_ckpt.config)
    dev = FakeDevice(tmp_path, board_registers(profile), answer_timeout=5.0)
    model.attach(dev)
    batch_last = [s["end"] - 2 for s in program.steps if s["kind"] == "batch"]
    checked = []
    with dev:
        npu = dev.open(by_name=True)
        # borrow the slot the program's words point at most, so putting it back matters
        slot = Counter(
            decode(w).fields.get(k)
            for w, r in zip(program.words, program.roles, strict=True)
            if r == "node"
            for k in ("shape_ptr", "size_ptr")
            if k in decode(w).fields
        ).most_common(1)[0][0]
        reader = MemcpyReadBack(
            npu, program, buffers["act"], readback_offset(program), 5.0, slot=slot
        )

        def progress(done, total):  # read back what the batch's last word wrote
            reader.after_word = last = batch_last[done - 1]
            for addr, _dtype, raw in record.get(last, []):
                got = reader.read_l2(addr, "float32", len(raw))
                assert got == raw, (last, addr)
                checked.append(last)

        r = run_step(program, npu, buffers, tokens[-1], timeout=5.0, progress=progress,
                     host=HostSide(program, buffers["act"], tiny_ckpt, ctx))  # fmt: skip
        npu.window.close()
    assert dev.faults == [] and len(checked) > 50
    assert reader.batches == model.foreign_batches == len(checked)
    assert np.array_equal(r.logits, want_logits)  # the borrowed slot was put back each time

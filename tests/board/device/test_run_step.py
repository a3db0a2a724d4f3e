"""The whole dispatch path on the fake device, with the emulator as the device's model.

The oracle for the bit-for-bit check is `emulate()` run directly on the checkpoint and the
reference's KV prefix: the dispatch path must reach the same float32 logits and float16 KV
rows although its data went through the DDR image, the DataMover commands and the register
window.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from pccx_flow.board.device.cma import FileSource
from pccx_flow.board.device.device_model import DeviceModel
from pccx_flow.board.device.fake_device import FakeDevice
from pccx_flow.board.device.host_side import HostSide
from pccx_flow.board.device.regmap import board_registers
from pccx_flow.board.device.run_step import host_buffers, run_step
from pccx_flow.board.emulator.check import default_tokens, reference_prefix
from pccx_flow.board.emulator.emulate import emulate
from pccx_flow.errors import BoardError
from pccx_flow.execute.runtime import StepContext
from tests.board.conftest import lowered


def _setup(program, ckpt, tmp_path, profile):
    pos = program.meta["position"]
    tokens = default_tokens(pos + 1, ckpt.config.vocab)
    k, v, _ = reference_prefix(program, ckpt, tokens)
    ctx = StepContext(ckpt.config, program.meta["semantics"], pos, tokens[-1], "float32")
    buffers = host_buffers(program, FileSource(tmp_path / "buf"), ckpt, k, v)
    model = DeviceModel(program, buffers, ckpt.config)
    dev = FakeDevice(tmp_path, board_registers(profile), answer_timeout=5.0)
    model.attach(dev)
    host = HostSide(program, buffers["act"], ckpt, ctx)
    return tokens, k, v, ctx, buffers, host, dev


@pytest.mark.parametrize("position", [2, 9])
@pytest.mark.parametrize("case", [("v002-spec", "critical-path"), ("v002-as-built", "heft")])
def test_dispatch_on_the_fake_device_equals_emulate_bit_for_bit(
    tiny_ckpt, tmp_path, case, position
):
    _, _, profile, program = lowered(*case, position=position)
    tokens, k, v, ctx, buffers, host, dev = _setup(program, tiny_ckpt, tmp_path, profile)
    want_logits, want_rows = emulate(program, tiny_ckpt, k.copy(), v.copy(), tokens[-1], ctx=ctx)
    with dev:
        npu = dev.open(by_name=True)
        r = run_step(
            program,
            npu,
            buffers,
            tokens[-1],
            host=host,
            timeout=5.0,
        )
        npu.window.close()
    assert dev.faults == []
    assert r.logits.dtype == np.float32 and np.array_equal(r.logits, want_logits)
    assert sorted(r.kv_rows) == sorted(want_rows) and len(want_rows) > 0
    for layer, (k_row, v_row) in want_rows.items():
        assert np.array_equal(r.kv_rows[layer][0], k_row)
        assert np.array_equal(r.kv_rows[layer][1], v_row)
    assert r.report.batches == sum(1 for s in program.steps if s["kind"] == "batch")
    assert r.report.descriptors > 0


def test_a_wrong_weight_command_is_the_devices_error(tiny_ckpt, tmp_path):
    # The host works from a sidecar whose first GEMV tile is off by one float: its command
    # points at the wrong bytes of the image, and the device model (which works from the
    # right sidecar) refuses it, which the fake device shows as its ERROR bit.
    _, _, profile, program = lowered("v002-spec", "critical-path", position=2)
    tokens, k, v, ctx, buffers, host, dev = _setup(program, tiny_ckpt, tmp_path, profile)
    host_program = copy.deepcopy(program)
    first_gemv = min(i for i, s in program.streams.items() if "weight" in s)
    host_program.streams[first_gemv]["weight"]["offset"] += 4
    with dev:
        npu = dev.open(by_name=True)
        with pytest.raises(BoardError, match=r"batch \d+ .*ERROR bit"):
            run_step(
                host_program,
                npu,
                buffers,
                tokens[-1],
                host=host,
                timeout=5.0,
            )
        npu.window.close()
    assert any(f"word {first_gemv}" in f and "wrong bytes" in f for f in dev.faults)

"""A step run piece by piece on the fake device computes what the emulator computes.

The oracle for the numbers is the emulator run on the same words (`emulate`, which the
reference decode checks elsewhere); for the times, the footprints' own cycle costs: a batch
on an idle device takes at least its longest word and at most all its words back to back
plus their issue latency.
"""

from __future__ import annotations

import numpy as np
import pytest

from pccx_flow.board.device.dispatch import Batch
from pccx_flow.board.device.fake_timing import batch_cycles, issue_model_for
from pccx_flow.board.device.session import DeviceSpec, StepSession
from pccx_flow.board.emulator.check import default_tokens, reference_prefix
from pccx_flow.board.emulator.emulate import emulate
from pccx_flow.board.timing.footprint import footprints
from pccx_flow.errors import InputError
from pccx_flow.execute.runtime import StepContext

from ..conftest import lowered


@pytest.mark.parametrize("profile", ["v002-as-built"])  # spec: tests/board/device/test_run_step
def test_a_session_run_piece_by_piece_matches_the_emulator(profile, tiny_ckpt, tmp_path):
    program = lowered(profile, "heft", position=3)[3]
    prof = lowered(profile, "heft", position=3)[2]
    tokens = default_tokens(4, tiny_ckpt.config.vocab)
    k, v, _ = reference_prefix(program, tiny_ckpt, tokens)
    want_logits, want_rows = emulate(program, tiny_ckpt, k.copy(), v.copy(), tokens[-1])
    ctx = StepContext(tiny_ckpt.config, "pccx", 3, tokens[-1], "float32")
    session = StepSession(DeviceSpec("fake", str(tmp_path)), program, tiny_ckpt, k, v, ctx, prof)
    records = [session.run(i) for i in range(len(session.steps))]
    result = session.close()
    assert list(tmp_path.iterdir()) == []  # the step's folder went with the session
    np.testing.assert_array_equal(result.logits, want_logits)
    for layer, (k_row, v_row) in want_rows.items():
        np.testing.assert_array_equal(result.kv_rows[layer][0], k_row)
        np.testing.assert_array_equal(result.kv_rows[layer][1], v_row)
    batches = [r for r in records if r["kind"] == "batch"]
    assert len(batches) == sum(1 for s in session.steps if isinstance(s, Batch)) > 0
    assert {r["source"] for r in batches} == {"modelled"}
    assert len(result.report.batch_seconds) == len(batches)


@pytest.mark.parametrize("profile", ["v002-spec", "v002-as-built"])
def test_modelled_batch_cycles_lie_between_the_longest_word_and_all_words(profile):
    _, _, prof, program = lowered(profile, "critical-path", position=2)
    fps = footprints(program, prof)
    issue = {"v002-spec": "spec", "v002-as-built": "rtl"}[profile]
    assert issue_model_for(program) == issue
    cycles = batch_cycles(program, prof)
    batches = [s for s in program.steps if s["kind"] == "batch"]
    assert len(cycles) == len(batches)
    slack = 64  # decode and issue latency per word, far above any profile's
    for step, c in zip(batches, cycles, strict=True):
        words = [fp for fp in fps[step["start"] : step["end"] - 1] if fp is not None]
        assert [w[0] for w in c.words] == [fp.index for fp in words]
        assert max(fp.cycles for fp in words) <= c.cycles
        assert c.cycles <= sum(fp.cycles + slack for fp in words)
        assert all(0 <= a <= b <= c.cycles for _, _, _, a, b in c.words)


def test_a_device_spec_names_what_is_wrong():
    with pytest.raises(InputError, match="device kind 'usb'"):
        DeviceSpec("usb")
    with pytest.raises(InputError, match="needs a folder"):
        DeviceSpec("fake")

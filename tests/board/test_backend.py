"""Generation on the emulator backend against the reference generation loop (the oracle)."""

from __future__ import annotations

import numpy as np
import pytest

from pccx_flow.board.backend import EmulatorSteps, emulator_graphs
from pccx_flow.execute.generate import generate
from pccx_flow.hardware.profile import load_profile
from pccx_flow.precision import computing_in
from pccx_flow.reference.generate import generate as reference_generate


@pytest.mark.parametrize(
    ("profile_name", "policy", "semantics"),
    [("v002-spec", "critical-path", "pccx"), ("v002-as-built", "heft", "gemma3n")],
)
def test_emulated_generation_follows_the_reference(tiny_ckpt, profile_name, policy, semantics):
    """Three prompt tokens and three generated ones: every step's logits from the program's
    words agree with the reference decode in float64, and the tokens are the same."""
    profile = load_profile(profile_name)
    steps = EmulatorSteps(tiny_ckpt, profile)
    with computing_in("float64"):
        got = generate(
            tiny_ckpt, [2, 40, 7], 3, semantics=semantics, precision="float64",
            graph_for_position=emulator_graphs(tiny_ckpt.config, semantics, policy, profile),
            run_step=steps,
        )  # fmt: skip
        want = reference_generate(
            tiny_ckpt, [2, 40, 7], 3, semantics=semantics, precision="float64"
        )
    assert got.tokens == want.tokens
    assert len(got.logits) == len(want.logits) == 5
    for ours, theirs in zip(got.logits, want.logits, strict=True):
        assert np.max(np.abs(np.asarray(ours, np.float64) - theirs)) <= 1e-9
    assert len(steps.summaries) == 5 and all(s["fences"] > 0 for s in steps.summaries)

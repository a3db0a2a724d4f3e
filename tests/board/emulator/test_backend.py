"""Generation on the emulator backend against the reference generation loop (the oracle)."""

from __future__ import annotations

import numpy as np
import pytest

from pccx_flow.board.emulator.backend import EmulatorSteps, emulator_graphs
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
    words (spec target: float32 in L2) agree with the reference decode in float64, and the
    tokens are the same."""
    profile = load_profile(profile_name)
    steps = EmulatorSteps(tiny_ckpt, profile, target="spec")
    graphs = emulator_graphs(tiny_ckpt.config, semantics, policy, profile, target="spec")
    with computing_in("float64"):
        got = generate(
            tiny_ckpt, [2, 40, 7], 3, semantics=semantics, precision="float64",
            graph_for_position=graphs, run_step=steps,
        )  # fmt: skip
        want = reference_generate(
            tiny_ckpt, [2, 40, 7], 3, semantics=semantics, precision="float64"
        )
    assert got.tokens == want.tokens
    assert len(got.logits) == len(want.logits) == 5
    for ours, theirs in zip(got.logits, want.logits, strict=True):
        assert np.max(np.abs(np.asarray(ours, np.float64) - theirs)) <= 1e-9
    assert len(steps.summaries) == 5 and all(s["fences"] > 0 for s in steps.summaries)


@pytest.mark.parametrize("semantics", ["pccx", "gemma3n"])
def test_as_built_generation_keeps_the_reference_tokens(tiny_ckpt, semantics):
    """The as-built target (BF16 in L2, the RTL's reading of every word) generates the
    reference's tokens, and each step's logits stay within the BF16 rule of
    `pccx_flow.execute.compare.bf16_step_verdict` (10 % of the largest |logit|)."""
    profile = load_profile("v002-as-built")
    steps = EmulatorSteps(tiny_ckpt, profile)
    got = generate(
        tiny_ckpt, [2, 40, 7], 3, semantics=semantics,
        graph_for_position=emulator_graphs(tiny_ckpt.config, semantics, "heft", profile),
        run_step=steps,
    )  # fmt: skip
    want = reference_generate(tiny_ckpt, [2, 40, 7], 3, semantics=semantics)
    assert got.tokens == want.tokens
    for ours, theirs in zip(got.logits, want.logits, strict=True):
        diff = np.max(np.abs(np.asarray(ours, np.float64) - theirs))
        assert 1e-4 < diff <= 0.10 * np.max(np.abs(theirs))  # BF16: above float32 noise
    assert all(s["batches"] > 0 for s in steps.summaries)

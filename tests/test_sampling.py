"""Host-side sampling of spec §6 on hand-made logits."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pccx_flow.errors import InputError
from pccx_flow.sampling import (
    apply_repetition_penalty,
    sample_next_token,
    softmax_probs,
    top_p_keep,
)


def test_penalty_multiplies_negatives_and_divides_non_negatives_once_per_token():
    logits = np.array([-2.0, -1.0, 0.0, 1.0, 2.0, 3.0], dtype=np.float32)
    out = apply_repetition_penalty(logits, [0, 1, 2, 3, 3, 3, 1], penalty=1.15)
    want = [-2.0 * 1.15, -1.0 * 1.15, 0.0, 1.0 / 1.15, 2.0, 3.0]
    np.testing.assert_allclose(out, want, rtol=1e-6)
    assert out.dtype == np.float32
    np.testing.assert_array_equal(logits, [-2.0, -1.0, 0.0, 1.0, 2.0, 3.0])  # input untouched


def test_penalty_one_and_empty_history_change_nothing():
    logits = np.array([-1.0, 0.5, 2.0])
    np.testing.assert_array_equal(apply_repetition_penalty(logits, [0, 1, 2], 1.0), logits)
    np.testing.assert_array_equal(apply_repetition_penalty(logits, []), logits)


def test_greedy_is_argmax_after_the_penalty():
    logits = np.array([5.0, 4.9, -3.0], dtype=np.float32)
    assert sample_next_token(logits, repetition_penalty=1.15) == 0
    # 5.0 / 1.15 = 4.35 < 4.9: the penalty flips the choice
    assert sample_next_token(logits, history=[0], repetition_penalty=1.15) == 1
    # ties: the lowest id, as numpy's argmax
    assert sample_next_token(np.array([1.0, 3.0, 3.0]), repetition_penalty=1.0) == 1


def test_greedy_makes_no_random_draw():
    rng = np.random.default_rng(7)
    twin = np.random.default_rng(7)
    sample_next_token(np.array([0.1, 0.2]), temperature=0.0, rng=rng)
    assert rng.random() == twin.random()


@pytest.mark.parametrize(
    "top_p,kept",
    [
        (0.9, [0, 1, 2]),
        (0.8, [0, 1]),
        (0.81, [0, 1, 2]),
        (0.5, [0]),
        (1.0, [0, 1, 2, 3]),
        (0.01, [0]),
    ],
)
def test_top_p_keeps_tokens_whose_preceding_mass_is_below_p(top_p, kept):
    # most probable first: 0.5, 0.3, 0.15, 0.05 at ids 2, 0, 3, 1
    probs = np.array([0.3, 0.05, 0.5, 0.15])
    order = [2, 0, 3, 1]
    assert list(top_p_keep(probs, top_p)) == [order[i] for i in kept]


def test_softmax_is_stable_for_large_logits_and_temperature_scales():
    probs = softmax_probs(np.array([1000.0, 1000.0 + math.log(3.0)]), 1.0)
    np.testing.assert_allclose(probs, [0.25, 0.75])
    hot = softmax_probs(np.array([0.0, math.log(3.0)]), 2.0)
    np.testing.assert_allclose(hot, [1 / (1 + math.sqrt(3)), math.sqrt(3) / (1 + math.sqrt(3))])


def test_sampling_draws_only_from_the_top_p_set_in_proportion():
    probs = np.array([0.3, 0.05, 0.5, 0.15])
    logits = np.log(probs)
    rng = np.random.default_rng(0)
    draws = [
        sample_next_token(logits, temperature=1.0, top_p=0.9, repetition_penalty=1.0, rng=rng)
        for _ in range(4000)
    ]
    counts = np.bincount(draws, minlength=4) / len(draws)
    assert counts[1] == 0  # 0.05 is outside the 0.9 nucleus
    np.testing.assert_allclose(counts[[2, 0, 3]], np.array([0.5, 0.3, 0.15]) / 0.95, atol=0.03)


def test_one_draw_per_sampled_token_and_seeded_determinism():
    logits = np.random.default_rng(3).normal(size=50).astype(np.float32)
    rng, twin = np.random.default_rng(11), np.random.default_rng(11)
    first = [sample_next_token(logits, temperature=0.7, rng=rng) for _ in range(20)]
    again = [sample_next_token(logits, temperature=0.7, rng=twin) for _ in range(20)]
    assert first == again
    assert len(set(first)) > 1
    rng, twin = np.random.default_rng(5), np.random.default_rng(5)
    sample_next_token(logits, temperature=1.0, rng=rng)
    twin.random()
    assert rng.random() == twin.random()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"temperature": -0.1},
        {"temperature": float("nan")},
        {"temperature": float("inf")},
        {"temperature": "hot"},
        {"top_p": 0.0},
        {"top_p": 1.5},
        {"top_p": -1},
        {"repetition_penalty": 0.0},
        {"repetition_penalty": -1.15},
        {"history": [5]},
        {"history": [-1]},
        {"temperature": 0.5},  # no rng
    ],
)
def test_bad_options_are_input_errors(kwargs):
    with pytest.raises(InputError):
        sample_next_token(np.array([0.0, 1.0, 2.0]), **kwargs)


def test_bad_logits_are_input_errors():
    with pytest.raises(InputError, match="NaN"):
        sample_next_token(np.array([0.0, np.nan]))
    with pytest.raises(InputError, match="1-D"):
        sample_next_token(np.zeros((2, 2)))


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    weights=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=40).filter(lambda w: sum(w) > 0),
    top_p=st.floats(0.001, 1.0),
)
def test_top_p_keep_is_the_smallest_most_probable_prefix_reaching_p(weights, top_p):
    probs = np.array(weights) / np.sum(weights)
    kept = top_p_keep(probs, top_p)
    assert kept.size >= 1
    # the kept tokens are at least as probable as every dropped one
    dropped = np.setdiff1d(np.arange(probs.size), kept)
    if dropped.size:
        assert probs[kept].min() >= probs[dropped].max()
        # dropping happened only because the kept mass had already reached p
        assert probs[kept].sum() >= top_p - 1e-12
    # every kept token was needed: the mass before the last one is still below p
    assert probs[kept].sum() - probs[kept[-1]] < top_p + 1e-12

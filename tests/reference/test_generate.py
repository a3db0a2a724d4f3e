"""The generation loop contract (positions, history, draws) on the tiny checkpoint."""

from __future__ import annotations

import numpy as np
import pytest

import pccx_flow.reference.generate as generate_module
from pccx_flow.errors import ConfigError, InputError
from pccx_flow.reference.decode import decode_step, new_kv_cache
from pccx_flow.reference.generate import generate
from pccx_flow.sampling import apply_repetition_penalty

PROMPT = [2, 40, 311]


def test_greedy_generation_follows_the_documented_loop(tiny_ckpt, tiny_config):
    steps = 4
    result = generate(tiny_ckpt, PROMPT, steps, semantics="gemma3n")
    assert len(result.tokens) == steps
    assert len(result.logits) == len(PROMPT) + steps - 1

    # the loop written out by hand: prompt at positions 0..n-1, then each generated token
    cache = new_kv_cache(tiny_config, "gemma3n")
    fed = PROMPT + result.tokens[:-1]
    for position, token in enumerate(fed):
        logits = decode_step(tiny_ckpt, token, position, cache, semantics="gemma3n")
        np.testing.assert_array_equal(result.logits[position], logits)
    # each generated token is the argmax of the penalised logits, history = prompt + so far
    for j, token in enumerate(result.tokens):
        logits = result.logits[len(PROMPT) - 1 + j]
        history = PROMPT + result.tokens[:j]
        assert token == int(np.argmax(apply_repetition_penalty(logits, history, 1.15)))


def test_penalty_changes_what_greedy_generation_repeats(tiny_ckpt):
    plain = generate(tiny_ckpt, [5], 6, repetition_penalty=1.0)
    strong = generate(tiny_ckpt, [5], 6, repetition_penalty=50.0)
    assert len(set(strong.tokens + [5])) == 7  # a huge penalty forbids any repeat
    np.testing.assert_array_equal(plain.logits[0], strong.logits[0])


_REAL_DEFAULT_RNG = np.random.default_rng


class _CountingRng:
    def __init__(self, seed):
        self.inner = _REAL_DEFAULT_RNG(seed)
        self.draws = 0

    def random(self):
        self.draws += 1
        return self.inner.random()


@pytest.mark.parametrize("temperature,draws", [(0.0, 0), (0.8, 3)])
def test_one_draw_per_generated_token_only_when_sampling(
    tiny_ckpt, monkeypatch, temperature, draws
):
    made = []

    def fake_default_rng(seed):
        made.append(_CountingRng(seed))
        return made[-1]

    monkeypatch.setattr(generate_module.np.random, "default_rng", fake_default_rng)
    generate(tiny_ckpt, PROMPT, 3, temperature=temperature)
    assert len(made) == 1 and made[0].draws == draws


def test_sampled_generation_is_seeded(tiny_ckpt):
    a = generate(tiny_ckpt, PROMPT, 5, temperature=1.0, top_p=1.0, seed=1)
    b = generate(tiny_ckpt, PROMPT, 5, temperature=1.0, top_p=1.0, seed=1)
    assert a.tokens == b.tokens
    others = {
        tuple(generate(tiny_ckpt, PROMPT, 5, temperature=1.0, top_p=1.0, seed=s).tokens)
        for s in (2, 3, 4)
    }
    assert others != {tuple(a.tokens)}


def test_generation_may_fill_the_cache_exactly(tiny_ckpt, tiny_config):
    # n + steps - 1 == max_seq positions are allowed; one more is refused up front
    prompt = [1] * (tiny_config.max_seq - 1)
    assert len(generate(tiny_ckpt, prompt, 2).tokens) == 2
    with pytest.raises(InputError, match="positions"):
        generate(tiny_ckpt, prompt, 3)


@pytest.mark.parametrize(
    "prompt,steps,kwargs,error",
    [
        ([], 2, {}, InputError),
        ([1, 512], 2, {}, InputError),
        ([1], 0, {}, InputError),
        ([1], 2.5, {}, InputError),
        ([1], 2, {"temperature": -1.0}, InputError),
        ([1], 2, {"semantics": "hf"}, ConfigError),
    ],
)
def test_bad_arguments_are_typed_errors(tiny_ckpt, prompt, steps, kwargs, error):
    with pytest.raises(error):
        generate(tiny_ckpt, prompt, steps, **kwargs)

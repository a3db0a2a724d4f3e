"""Autoregressive generation with the reference decode step and the spec §6 sampler.

The loop below is the contract the executor's generation loop must match token for token:

1. A fresh KV cache in the storage dtype of the semantics.
2. The prompt tokens are fed one per decode step at positions ``0 .. n-1``.
3. The logits after the last prompt token give generated token 0; each generated token is
   then fed at the next position (``n, n+1, ...``) and its logits give the next one. The
   last generated token is not fed, so there are ``n + steps - 1`` decode steps and
   ``GenerationResult.logits`` holds one logits array per decode step, in order (the first
   ``n - 1`` belong to prompt positions and are not sampled from).
4. Every generated token is chosen by `pccx_flow.sampling.sample_next_token` with the
   repetition penalty over the history = prompt + tokens generated so far.
5. ``rng = numpy.random.default_rng(seed)`` is created once; exactly one draw is made per
   generated token when ``temperature > 0`` and none when ``temperature == 0``.
6. The loop stops after `steps` generated tokens. If the positions would run past the KV
   cache (``n + steps - 1 > max_seq``) it raises `InputError` before decoding anything.
"""

from __future__ import annotations

import operator
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np

from pccx_flow.errors import InputError
from pccx_flow.model.config import check_semantics
from pccx_flow.precision import DEFAULT_PRECISION, check_precision
from pccx_flow.reference.decode import check_token_id, decode_step, new_kv_cache
from pccx_flow.sampling import (
    DEFAULT_PENALTY,
    DEFAULT_TOP_P,
    check_sampling_options,
    sample_next_token,
)


@dataclass
class GenerationResult:
    """Generated token ids (prompt excluded) and the logits of every decode step."""

    tokens: list[int] = field(default_factory=list)
    logits: list[np.ndarray] = field(default_factory=list)


def _check_steps(steps) -> int:
    try:
        n = operator.index(steps)
    except TypeError:
        raise InputError(f"steps must be an integer, got {steps!r}") from None
    if n < 1:
        raise InputError(f"steps must be >= 1 (tokens to generate), got {n}")
    return n


def generate(
    ckpt,
    prompt_ids: Sequence[int],
    steps: int,
    *,
    semantics: str = "pccx",
    temperature: float = 0.0,
    top_p: float = DEFAULT_TOP_P,
    repetition_penalty: float = DEFAULT_PENALTY,
    seed: int = 0,
    progress: bool = False,
    precision: str = DEFAULT_PRECISION,
) -> GenerationResult:
    """Generate `steps` tokens after `prompt_ids` with the reference decode (see module doc);
    `precision` as in `decode_step`."""
    semantics = check_semantics(semantics)
    precision = check_precision(precision)
    cfg = ckpt.config
    prompt = [check_token_id(cfg, t) for t in prompt_ids]
    if not prompt:
        raise InputError("the prompt is empty; give at least one token id")
    steps = _check_steps(steps)
    check_sampling_options(temperature, top_p, repetition_penalty)
    n_positions = len(prompt) + steps - 1
    if n_positions > cfg.max_seq:
        raise InputError(
            f"{len(prompt)} prompt tokens + {steps} steps need {n_positions} positions but the "
            f"{cfg.name} KV cache holds {cfg.max_seq}; shorten the prompt or generate fewer steps"
        )

    rng = np.random.default_rng(seed)
    cache = new_kv_cache(cfg, semantics)
    history = list(prompt)
    result = GenerationResult()
    bar = _progress_bar(n_positions, enabled=progress)
    try:
        token = prompt[0]
        for position in range(n_positions):
            logits = decode_step(
                ckpt, token, position, cache, semantics=semantics, precision=precision
            )
            result.logits.append(logits)
            bar.update(1)
            if position + 1 < len(prompt):
                token = prompt[position + 1]
                continue
            token = sample_next_token(
                logits,
                history=history,
                temperature=temperature,
                top_p=top_p,
                repetition_penalty=repetition_penalty,
                rng=rng,
            )
            result.tokens.append(token)
            history.append(token)
    finally:
        bar.close()
    return result


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass


def _progress_bar(total: int, enabled: bool):
    """A tqdm bar on stderr when asked for and stderr is a terminal; else a no-op."""
    if not enabled or not sys.stderr.isatty():
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, desc="decode", unit="step", file=sys.stderr)

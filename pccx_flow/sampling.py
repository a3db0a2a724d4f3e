"""Host-side token selection after the NPU returns soft-capped logits (spec 000 §6).

Shared by the reference generation loop and the executor's loop, so both pick the same
token from the same logits. Three steps, in the specification's order:

1. repetition penalty ρ on every distinct token already seen (prompt and generated):
   negative logits are multiplied by ρ, non-negative ones divided by ρ;
2. ``T = 0``: the argmax (lowest id on ties);
3. ``T > 0``: a stable softmax of ``logits / T``, then top-p: sort by probability
   (descending), keep each token whose cumulative probability *before* it is ``< p``,
   renormalise, and make one draw from the caller's ``numpy.random.Generator``.

>>> import numpy as np
>>> sample_next_token(np.array([1.0, 3.0, 2.0]), history=[1], repetition_penalty=2.0)
2
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from pccx_flow.errors import InputError

DEFAULT_TOP_P = 0.9
DEFAULT_PENALTY = 1.15


def _check_logits(logits) -> np.ndarray:
    arr = np.asarray(logits)
    if arr.ndim != 1 or arr.size == 0:
        raise InputError(f"logits must be a non-empty 1-D array, got shape {arr.shape}")
    if np.isnan(arr).any():
        raise InputError("logits contain NaN; the decode step that produced them diverged")
    return arr


def _check_penalty(penalty) -> None:
    if not (isinstance(penalty, int | float) and math.isfinite(penalty) and penalty > 0):
        raise InputError(f"repetition penalty must be a positive number, got {penalty!r}")


def check_sampling_options(temperature, top_p, repetition_penalty) -> None:
    """Raise `InputError` for a temperature that is not a finite number >= 0, a `top_p`
    outside ``(0, 1]`` or a repetition penalty that is not a positive number."""
    if not (isinstance(temperature, int | float) and math.isfinite(temperature)):
        raise InputError(f"temperature must be a finite number >= 0, got {temperature!r}")
    if temperature < 0:
        raise InputError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    if not (isinstance(top_p, int | float) and 0 < top_p <= 1):
        raise InputError(f"top_p must be in (0, 1], got {top_p!r}")
    _check_penalty(repetition_penalty)


def apply_repetition_penalty(
    logits: np.ndarray, history: Iterable[int], penalty: float = DEFAULT_PENALTY
) -> np.ndarray:
    """Return a copy of `logits` with the spec §6 penalty applied once per distinct token.

    A token that appears several times in `history` is still penalised once. ``penalty=1``
    leaves the logits unchanged.
    """
    arr = _check_logits(logits)
    _check_penalty(penalty)
    out = arr.astype(np.result_type(arr.dtype, np.float32), copy=True)
    ids = np.unique(np.fromiter((int(t) for t in history), dtype=np.int64))
    if ids.size and (ids[0] < 0 or ids[-1] >= out.size):
        bad = ids[0] if ids[0] < 0 else ids[-1]
        raise InputError(f"history token id {bad} out of range 0..{out.size - 1}")
    vals = out[ids]
    out[ids] = np.where(vals < 0, vals * penalty, vals / penalty)
    return out


def top_p_keep(probs: np.ndarray, top_p: float) -> np.ndarray:
    """Token ids kept by the spec §6 top-p rule, most probable first.

    ``sorted_idx = argsort(probs)[::-1]``; keep position i when
    ``cumsum(probs[sorted_idx])[i] - probs[sorted_idx[i]] < top_p``. The sort is stable, so
    among equal probabilities the higher id comes first (the reversal of a stable ascending
    sort), the same on every run.
    """
    sorted_idx = np.argsort(probs, kind="stable")[::-1]
    sorted_p = probs[sorted_idx]
    before = np.cumsum(sorted_p) - sorted_p
    return sorted_idx[before < top_p]


def softmax_probs(logits: np.ndarray, temperature: float) -> np.ndarray:
    """Stable softmax of ``logits / T`` in float64 (spec §6 "Logits_safe")."""
    scaled = np.asarray(logits, dtype=np.float64) / temperature
    safe = scaled - scaled.max()
    e = np.exp(safe)
    return e / e.sum()


def sample_next_token(
    logits: np.ndarray,
    *,
    history: Iterable[int] = (),
    temperature: float = 0.0,
    top_p: float = DEFAULT_TOP_P,
    repetition_penalty: float = DEFAULT_PENALTY,
    rng: np.random.Generator | None = None,
) -> int:
    """Pick the next token from one step's logits (spec §6).

    ``temperature == 0``: argmax after the penalty, no random draw. ``temperature > 0``:
    exactly one ``rng.random()`` draw, mapped through the cumulative distribution of the
    renormalised top-p set (in most-probable-first order). Raises `InputError` for a
    negative or non-finite temperature, a `top_p` outside ``(0, 1]``, or ``temperature > 0``
    without an `rng`.
    """
    check_sampling_options(temperature, top_p, repetition_penalty)
    penalised = apply_repetition_penalty(logits, history, repetition_penalty)
    if temperature == 0:
        return int(np.argmax(penalised))
    if rng is None:
        raise InputError(
            "temperature > 0 needs a random generator: pass rng=np.random.default_rng(seed)"
        )
    probs = softmax_probs(penalised, temperature)
    kept = top_p_keep(probs, top_p)
    p = probs[kept] / probs[kept].sum()
    cdf = np.cumsum(p)
    u = rng.random()
    pick = min(int(np.searchsorted(cdf, u * cdf[-1], side="right")), kept.size - 1)
    return int(kept[pick])

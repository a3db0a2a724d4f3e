"""Judging an executed step against another implementation of the same step.

Two correct float32 implementations of a decode step differ by rounding (~1e-7 relative per
operation). Under the specification the new K/V rows are then stored as float16, and a value
that lies within that tiny difference of a float16 rounding boundary rounds to neighbouring
float16 numbers in the two implementations: a *rounding flip*, one float16 ulp (~5e-4
relative) apart. Attention then reads slightly different rows and the logits of the same
step can move by ~1e-4 although neither implementation is wrong. Measured on ``tiny`` with
the same earlier KV rows: 13 of 3,840 new KV elements flipped over 24 steps, and one of the
24 steps exceeded 1e-4 (1.3e-4), with the numba or a float64 GEMV alike. With the reference
computing in float64 between its float32 tensors (24 other steps, README "Numerics"): 4
elements flipped on 4 steps, none above 2.1e-5, where the float32 reference had 10 on 6
steps and two above 1e-4 (2.7e-4).

`kv_rounding` counts flips and, more importantly, elements further apart than rounding and
float32 drift explain. `step_verdict` applies the rule the CLI's ``--check`` uses.

On E4B (35 layers, synthetic weights) float32 drift grows through the layers of one step:
stream outputs differ by 3e-7 (layer 0) to ~1e-4 (layers 25-34) relative, logits by
1e-4..2.5e-4 under gemma3n and, with float16 flips in the KV rows of all 20 cache layers,
2.6e-3..5.3e-3 under pccx semantics, with the same argmax (positions 0-2 from the
reference's rows, README "Numerics": 8.1e-5..1.7e-4 and 7.6e-4..1.9e-2). The 1e-4 / 1e-3
logit rule holds on ``tiny``; on E4B it reports those steps as failed.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LOGIT_TOLERANCE = 1e-4  # max |logit difference| of a step whose KV rows agree exactly
FLIP_LOGIT_TOLERANCE = 1e-3  # ... of a step whose float16 KV rows contain rounding flips
# In float64 (`pccx_flow.precision`) the executed graph and the reference agree to ~1e-13 on
# tiny (measured: at most 7e-14 over 24 steps); 1e-9 leaves room for longer models and still
# sits orders of magnitude below anything structural.
FLOAT64_LOGIT_TOLERANCE = 1e-9


@dataclass(frozen=True)
class KVRounding:
    flips: int  # float16 elements that differ (each by rounding the other way, at least)
    beyond: int  # elements further apart than rounding and float32 drift explain


# A structural mistake (wrong norm, pairing, cache slot) moves K/V by O(1) of the row's scale;
# float32 drift between two implementations after 35 layers is ~1e-4 of it (measured on E4B).
KV_ROW_TOLERANCE = 1e-3


# BF16 storage (the as-built target, `pccx_flow.board.isa.target`): every value an instruction
# stores keeps 8 significant bits, a relative rounding of up to 2**-9 (0.2 %), and a tiny
# step stores each activation 20-40 times along its longest chain (10 layers of norms,
# projections, attention and the FFN). Against the float32 reference the errors add up to a
# few percent of the values' scale. Measured (`benchmarks/bench_as_built.py`, 64 tiny steps:
# positions 0-15, both semantics, two policies; and E4B at position 0): logits within
# 0.9-3.1 % of the largest |logit| (E4B 3.4 %), new KV rows within 5.6 % of each row's
# largest |element| (E4B 4.3 %), the same argmax on 62 of 64 tiny steps; the two others
# picked the reference's second token, 0.016 below its best (a near tie, 0.15 % of the
# scale). 10 % of the scale keeps about twice the measured worst and stays an order of
# magnitude below what a structural mistake (a wrong operand, address or layout) moves,
# which is O(1) of the scale; it cannot see approximation-level changes (GELU's form moves
# tiny logits by ~2 %): those the spec target checks, to 1e-9 in float64.
BF16_RELATIVE_TOLERANCE = 0.10


def kv_relative_error(ours: np.ndarray, theirs: np.ndarray) -> float:
    """Largest |ours - theirs| over the row's largest |theirs| (the BF16 yardstick)."""
    a = np.asarray(ours, dtype=np.float64)
    b = np.asarray(theirs, dtype=np.float64)
    scale = float(np.max(np.abs(b), initial=0.0))
    with np.errstate(invalid="ignore"):
        worst = float(np.max(np.abs(a - b), initial=0.0))
    if not np.isfinite(worst):
        return float("inf")
    return worst / scale if scale else (0.0 if worst == 0 else float("inf"))


def bf16_step_verdict(
    max_abs_diff: float,
    logit_scale: float,
    chosen_gap: float,
    kv_error: float,
    tolerance: float = BF16_RELATIVE_TOLERANCE,
) -> bool:
    """True when a step stored in BF16 agrees with the reference: logits within `tolerance`
    of the reference's largest |logit|, new KV rows within `tolerance` of their largest
    |element|, and the token it picks no further below the reference's best logit than that
    (`chosen_gap`: the reference's best logit minus its logit of our argmax, 0 when the
    argmax is the same); `BF16_RELATIVE_TOLERANCE` says why."""
    limit = tolerance * logit_scale
    return bool(max_abs_diff <= limit and chosen_gap <= limit and kv_error <= tolerance)


def bf16_judgement(logits, want, kv_pairs) -> tuple[bool, float, float, float]:
    """The BF16 rule applied to one step: ``(ok, kv_error, logit_scale, chosen_gap)``.

    `logits` are ours, `want` the reference's, `kv_pairs` the (ours, theirs) new KV rows;
    `kv_error` is the largest `kv_relative_error` of them. The one place the rule's inputs
    are derived, for `run --check` and the emulator's check alike."""
    want = np.asarray(want, dtype=np.float64)
    diff = float(np.max(np.abs(np.asarray(logits, dtype=np.float64) - want)))
    kv_error = max((kv_relative_error(a, b) for a, b in kv_pairs), default=0.0)
    scale = float(np.max(np.abs(want)))
    chosen_gap = float(np.max(want) - want[int(np.argmax(logits))])
    return bf16_step_verdict(diff, scale, chosen_gap, kv_error), kv_error, scale, chosen_gap


def kv_rounding(ours: np.ndarray, theirs: np.ndarray) -> KVRounding:
    """Compare two new KV rows stored in the cache dtype.

    An element is *beyond* when it differs by more than one float16 ulp of its own value plus
    `KV_ROW_TOLERANCE` times the row's largest magnitude (near-zero elements have tiny
    float16 ulps, so the row scale is the yardstick). Under float16 storage, differing
    elements are counted as flips; float32 rows (gemma3n semantics) have none.
    """
    a = np.asarray(ours)
    b = np.asarray(theirs)
    with np.errstate(invalid="ignore", over="ignore"):  # NaN/inf rows are judged, not warned
        diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
        ulp = np.spacing(np.maximum(np.abs(a), np.abs(b)).astype(np.float16)).astype(np.float64)
    scale = float(np.max(np.abs(b.astype(np.float64)), initial=0.0))
    beyond = int((diff > ulp + KV_ROW_TOLERANCE * scale).sum())
    flips = int((diff > 0).sum()) if a.dtype == np.float16 and b.dtype == np.float16 else 0
    return KVRounding(flips=flips, beyond=beyond)


def step_verdict(
    max_abs_diff: float, argmax_same: bool, kv: KVRounding, tolerance: float = LOGIT_TOLERANCE
) -> bool:
    """True when a step agrees: same argmax, no KV element beyond rounding, and logits within
    `tolerance` (ten times that when the step's float16 KV rows had rounding flips; with the
    default 1e-4 that is `FLIP_LOGIT_TOLERANCE`)."""
    if not argmax_same or kv.beyond:
        return False
    limit = FLIP_LOGIT_TOLERANCE / LOGIT_TOLERANCE * tolerance if kv.flips else tolerance
    return max_abs_diff <= limit

"""Judging an executed step against another implementation of the same step.

Two correct float32 implementations of a decode step differ by rounding (~1e-7 relative per
operation). Under the specification the new K/V rows are then stored as float16, and a value
that lies within that tiny difference of a float16 rounding boundary rounds to neighbouring
float16 numbers in the two implementations: a *rounding flip*, one float16 ulp (~5e-4
relative) apart. Attention then reads slightly different rows and the logits of the same
step can move by ~1e-4 although neither implementation is wrong. Measured on ``tiny`` with
the same earlier KV rows: 13 of 3,840 new KV elements flipped over 24 steps, and one of the
24 steps exceeded 1e-4 (1.3e-4), with the numba or a float64 GEMV alike.

`kv_rounding` counts flips and, more importantly, elements that differ by *more* than one
float16 ulp, which no rounding explains. `step_verdict` applies the rule the CLI's
``--check`` uses.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LOGIT_TOLERANCE = 1e-4  # max |logit difference| of a step whose KV rows agree exactly
FLIP_LOGIT_TOLERANCE = 1e-3  # ... of a step whose float16 KV rows contain rounding flips


@dataclass(frozen=True)
class KVRounding:
    flips: int  # float16 elements exactly one ulp apart
    beyond: int  # elements further apart than one float16 ulp (or any float32 difference > tol)


def kv_rounding(ours: np.ndarray, theirs: np.ndarray, *, f32_tol: float = 1e-4) -> KVRounding:
    """Compare two new KV rows stored in the cache dtype.

    float16: equal elements are fine, one-ulp neighbours are flips, anything else is beyond.
    float32 (gemma3n semantics): no rounding to a coarse grid happens, so elements must agree
    to `f32_tol` absolute; none count as flips.
    """
    a = np.asarray(ours)
    b = np.asarray(theirs)
    if a.dtype == np.float16 and b.dtype == np.float16:
        ia = a.view(np.int16).astype(np.int32)
        ib = b.view(np.int16).astype(np.int32)
        # Map the sign-magnitude float16 bit patterns onto a monotonic integer line.
        ia = np.where(ia < 0, -32768 - ia, ia)
        ib = np.where(ib < 0, -32768 - ib, ib)
        steps = np.abs(ia - ib)
        return KVRounding(flips=int((steps == 1).sum()), beyond=int((steps > 1).sum()))
    diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
    return KVRounding(flips=0, beyond=int((diff > f32_tol).sum()))


def step_verdict(max_abs_diff: float, argmax_same: bool, kv: KVRounding) -> bool:
    """True when a step agrees: same argmax, no KV element beyond rounding, and logits within
    `LOGIT_TOLERANCE` (or `FLIP_LOGIT_TOLERANCE` when the step's KV rows had rounding flips)."""
    if not argmax_same or kv.beyond:
        return False
    limit = FLIP_LOGIT_TOLERANCE if kv.flips else LOGIT_TOLERANCE
    return max_abs_diff <= limit

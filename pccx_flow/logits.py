"""Logits that hold NaN or infinity are a failed step, never a token.

`argmax` of a NaN vector is 0 and its top-k prints ``nan``: a run that showed them and exited
0 reported success. Weights are checked when first read (`pccx_flow.weights.finite`), so a
NaN here came from the arithmetic (an overflow) or from the device; either way the step
failed, and the message says which tensor (the logits) and how many values.
"""

from __future__ import annotations

import numpy as np

from pccx_flow.errors import PccxFlowError


def check_logits(logits, where: str, error: type[PccxFlowError]) -> None:
    """Raise `error` naming `where` when `logits` hold NaN or infinite values."""
    a = np.asarray(logits, dtype=np.float64)
    bad = int(np.sum(~np.isfinite(a)))
    if bad:
        first = int(np.flatnonzero(~np.isfinite(a))[0])
        raise error(
            f"the logits {where} hold {bad} NaN or infinite values of {a.size} (first at "
            f"token id {first}); the step failed (check the weights with `pccx-flow weights "
            "verify`)"
        )

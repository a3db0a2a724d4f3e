"""Emulate one program step against the reference decode (the oracle), with its KV prefix.

The prefix (positions before the program's) is decoded by the reference, which also gives
the step's expected logits and KV rows; the emulator then runs the program's words from the
same earlier KV rows. Used by `pccx-flow emulate` and the tests.
"""

from __future__ import annotations

import numpy as np

from pccx_flow.board.emulator.emulate import emulate
from pccx_flow.board.program.files import Program
from pccx_flow.errors import InputError
from pccx_flow.execute.compare import (
    BF16_RELATIVE_TOLERANCE,
    FLOAT64_LOGIT_TOLERANCE,
    LOGIT_TOLERANCE,
    KVRounding,
    bf16_judgement,
    kv_rounding,
    step_verdict,
)
from pccx_flow.execute.runtime import StepContext
from pccx_flow.precision import computing_in
from pccx_flow.reference.decode import decode_step, new_kv_cache


def default_tokens(n: int, vocab: int) -> list[int]:
    """A deterministic token sequence (the same for every run)."""
    return [(7 * i + 3) % vocab for i in range(n)]


def check_program_matches(program: Program, weights, profile_name: str | None = None) -> None:
    """One line when the program was made for another model config or hardware profile."""
    meta = program.meta
    if meta["config"] != weights.config.name:
        raise InputError(
            f"the program is for config {meta['config']!r} but the weights are "
            f"{weights.config.name!r}; emit the program for the same preset"
        )
    if profile_name is not None and meta["profile"] != profile_name:
        raise InputError(
            f"the program was lowered for profile {meta['profile']!r}, not {profile_name!r}; "
            "emit it again with --profile"
        )


def reference_prefix(program: Program, weights, tokens: list[int], precision: str = "float32"):
    """The KV cache before the program's position: ``(k_past, v_past, cache)``.

    The reference decodes ``tokens[:-1]`` at positions ``0 .. P-1``; `k_past`, `v_past` are
    copies of its cache (what the DDR image holds before the step), `cache` the live one.
    """
    semantics = program.meta["semantics"]
    cache = new_kv_cache(weights.config, semantics)
    with computing_in(precision):
        for p, t in enumerate(tokens[:-1]):
            decode_step(weights, t, p, cache, semantics=semantics, precision=precision)
    return cache.k.copy(), cache.v.copy(), cache


def emulate_against_reference(
    program: Program,
    weights,
    tokens: list[int],
    *,
    precision: str = "float32",
    numerics: str = "spec",
    record: dict | None = None,
) -> dict:
    """Emulate the program's step after a reference prefix; compare with the reference."""
    meta = program.meta
    position, semantics = meta["position"], meta["semantics"]
    if len(tokens) != position + 1:
        raise InputError(f"need {position + 1} tokens for position {position}, got {len(tokens)}")
    config = weights.config
    with computing_in(precision):
        k_past, v_past, cache = reference_prefix(program, weights, tokens, precision)
        want = decode_step(weights, tokens[-1], position, cache, semantics=semantics,
                           precision=precision)  # fmt: skip
        ctx = StepContext(config, semantics, position, tokens[-1], precision)
        logits, rows = emulate(
            program, weights, k_past, v_past, tokens[-1],
            numerics=numerics, ctx=ctx, record=record,
        )  # fmt: skip
    diff = float(np.max(np.abs(logits.astype(np.float64) - want.astype(np.float64))))
    flips = beyond = unequal = 0
    pairs = [(ours, theirs[layer, position]) for layer, (k, v) in rows.items()
             for ours, theirs in ((k, cache.k), (v, cache.v))]  # fmt: skip
    for ours, theirs in pairs:
        r = kv_rounding(ours, theirs)
        flips += r.flips
        beyond += r.beyond
        unequal += int(not np.array_equal(ours, theirs))
    same = int(np.argmax(logits)) == int(np.argmax(want))
    bf16_ok, kv_error, scale, chosen_gap = bf16_judgement(logits, want, pairs)
    if meta.get("l2_dtype") == "bfloat16":  # the as-built target stores BF16
        tol = BF16_RELATIVE_TOLERANCE * scale
        ok = bf16_ok
    elif precision == "float64":  # both sides exact between storage roundings: rows identical
        tol = FLOAT64_LOGIT_TOLERANCE
        ok = diff <= tol and same and unequal == 0
    else:  # the rule of `run --check`
        tol = LOGIT_TOLERANCE
        ok = step_verdict(diff, same, KVRounding(flips=flips, beyond=beyond), tol)
    return {
        "position": position,
        "max_abs_diff": diff,
        "argmax": int(np.argmax(logits)),
        "argmax_same": same,
        "kv_layers": len(rows),
        "kv_flips": flips,
        "kv_beyond": beyond,
        "kv_error": kv_error,
        "logit_scale": scale,
        "chosen_gap": chosen_gap,
        "tolerance": tol,
        "ok": bool(ok),
        "logits": logits,
    }

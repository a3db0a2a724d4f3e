"""Drop the changes a design does not need: the "smallest changes" of the table.

A sampled design that reaches a target usually carries changes that do nothing for it (Latin
hypercube sampling moves every parameter at once): more GEMV weight ports on a design whose
weights all stream through the GEMM array, say. `prune` tries each change in turn, costliest
first, set back to the base design's value, keeps the design without it when that design
still reaches the target, and returns the evaluated records. Each try is a real point,
scheduled and bounded like the others (through `evaluate_many`, so cached and on Dask), so
every number in the table is a point that was run, not an interpolation. It is greedy and
makes one pass: a kept change was needed when it was tried (with the changes not tried yet
still in place), so after a later change is dropped an earlier kept one may have become
unneeded; the result is neither proven minimal nor the cheapest design overall.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pccx_flow.explore.params import PARAMS


def _order(point: dict, base_point: dict, base: Any) -> list[str]:
    """The changed parameters of `point`, costliest first, then the free ones."""
    from pccx_flow.explore.params import design_cost

    changed = [k for k, v in point.items() if base_point.get(k) != v and k in base_point]
    return sorted(changed, key=lambda k: (-design_cost({k: point[k]}, base),
                                          k not in PARAMS, k))  # fmt: skip


def prune(
    designs: list[tuple[float, dict]],
    base_point: dict,
    base: Any,
    evaluate_many: Callable[[list[dict]], list[dict]],
) -> list[dict]:
    """For each ``(target tok/s, record)``, the record of its design with the unneeded
    changes dropped (module docstring). Designs advance together, one try each per round,
    so each round is one batch of points."""
    state = [{"target": t, "record": r, "todo": _order(r["point"], base_point, base)}
             for t, r in designs]  # fmt: skip
    while any(s["todo"] for s in state):
        batch = []
        for s in state:
            if s["todo"]:
                name = s["todo"].pop(0)
                batch.append((s, {**s["record"]["point"], name: base_point[name]}))
        for (s, _), rec in zip(batch, evaluate_many([p for _, p in batch]), strict=True):
            if "error" not in rec and rec["tok_s"] >= s["target"]:
                s["record"] = rec
    return [s["record"] for s in state]

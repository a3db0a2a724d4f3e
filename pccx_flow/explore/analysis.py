"""What a person wants from a sweep's records: the Pareto front, the smallest changes that
reach a rate, and where along the context a design's bottleneck moves.

Plain functions over the derived point records (`pccx_flow.explore.point.derive`); every
tok/s in them is a model estimate on the profile the record names.
"""

from __future__ import annotations

from typing import Any

from pccx_flow.explore.params import design_cost

TARGETS = (5.0, 10.0, 20.0)


def with_cost(records: list[dict], base: Any) -> list[dict]:
    """Each record with ``cost`` (`design_cost` of its point against profile `base`)."""
    return [{**r, "cost": design_cost(r["point"], base)} for r in records]


def ok(records: list[dict]) -> list[dict]:
    """The records that did not fail."""
    return [r for r in records if "error" not in r]


def pareto_front(records: list[dict]) -> list[dict]:
    """Records no other beats on both lower cost and higher tok/s, by rising cost.

    Among equal cost only the fastest is kept; a record is on the front when it is faster
    than every cheaper one.
    """
    front: list[dict] = []
    best = float("-inf")
    for r in sorted(ok(records), key=lambda r: (r["cost"], -r["tok_s"])):
        if r["tok_s"] > best:
            front.append(r)
            best = r["tok_s"]
    return front


def smallest_changes(
    records: list[dict], targets=TARGETS, base_point: dict | None = None
) -> list[dict]:
    """Per target tok/s, the cheapest record reaching it (on a tie the one with the fewest
    parameters changed from `base_point`, then the fastest), or a row saying none did and
    the best reached."""
    rows = []
    good = ok(records)
    base_point = base_point or {}
    for target in targets:
        reach = [r for r in good if r["tok_s"] >= target]
        if not reach:
            top = max(good, key=lambda r: r["tok_s"], default=None)
            rows.append({"target": target, "record": None,
                         "best_tok_s": top["tok_s"] if top else None})  # fmt: skip
            continue
        r = min(reach, key=lambda r: (r["cost"], len(changes(r["point"], base_point)),
                                      -r["tok_s"]))  # fmt: skip
        rows.append({"target": target, "record": r, "best_tok_s": r["tok_s"]})
    return rows


def changes(point: dict, base_point: dict) -> dict:
    """The entries of `point` that differ from `base_point` (the base design's values)."""
    return {k: v for k, v in point.items() if base_point.get(k) != v}


def context_curve(records: list[dict]) -> list[dict]:
    """One design's records along the context, by position: tok/s and the binding bound.

    ``crossover`` marks the first position whose binding bound differs from the one before
    (where, say, KV traffic overtakes the weight stream)."""
    rows = sorted(ok(records), key=lambda r: r["point"].get("position", 0))
    out, prev = [], None
    for r in rows:
        out.append({"position": r["point"].get("position"), "tok_s": r["tok_s"],
                    "binding_bound": r["binding_bound"],
                    "crossover": prev is not None and r["binding_bound"] != prev})  # fmt: skip
        prev = r["binding_bound"]
    return out


def binding_counts(records: list[dict]) -> dict[str, int]:
    """How many records each bound binds, most first."""
    counts: dict[str, int] = {}
    for r in ok(records):
        counts[r["binding_bound"]] = counts.get(r["binding_bound"], 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1]))

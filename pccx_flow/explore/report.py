"""A sweep's results as a terminal summary, JSON and CSV.

Every tok/s is labelled a model estimate on the profile named beside it; no pccx board has
ever been timed.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from pccx_flow.explore.analysis import binding_counts, changes, ok, pareto_front
from pccx_flow.explore.run import describe

CSV_FIELDS = ("tok_s", "makespan_tok_s", "bound_tok_s", "tokens_per_step", "binding_bound",
              "cost", "policy", "makespan_cycles", "step_cycles", "ddr_limited",
              "l2_peak_bytes", "profile", "error")  # fmt: skip


def _rate(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}"


def _count(result: dict[str, Any]) -> str:
    n = result.get("sampled", len(result["records"]))
    extra = len(result["records"]) - n
    return f"{n} points" + (f" + {extra} pruned designs" if extra else "")


def format_summary(result: dict[str, Any]) -> str:
    """The terminal summary of `result` (what `cli.explore` builds; see `to_json`)."""
    recs = result["records"]
    good = ok(recs)
    base_point = result["base_point"]
    lines = [
        f"explore: {_count(result)} ({result['sampling']}, seed {result['seed']}) on "
        f"{result['profile']}, preset {result['preset']}; best of {', '.join(result['policies'])}"
        f"{', within L2' if result['memory'] else ', L2 not limited'}",
        f"every tok/s is a model estimate on profile {result['profile']} with the point's "
        "changes; cost in units of docs/explore.md",
    ]
    timing = result.get("timing")
    if timing:
        n, secs = timing["evaluated"], timing["wall_seconds"]
        rate = f", {n / secs:.2f} points/s" if n and secs > 0 else ""
        lines.append(f"evaluated {n} of {timing['points']} points (with the base design; the "
                     f"rest from the cache) in {secs:.1f} s of wall time on this machine{rate}")
    base = result.get("base_record")
    fixed = result.get("fixed") or {}
    setting = f"{result['profile']} as it is" + (f", {describe(fixed)}" if fixed else "")
    if base is not None and "error" not in base:
        lines.append(f"base design ({setting}): {_rate(base['tok_s'])} tok/s, "
                     f"bound {base['binding_bound']}")  # fmt: skip
    elif base is not None:
        lines.append(f"base design ({setting}) failed: {base['error']}")
    failed = [r for r in recs if "error" in r]
    if failed:
        lines.append(f"failed: {len(failed)} of {len(recs)} points; first: "
                     f"{describe(failed[0]['point'])}: {failed[0]['error']}")  # fmt: skip
    if good:
        counts = binding_counts(good)
        lines.append("binding bound: " + ", ".join(f"{b} {n}" for b, n in counts.items()))
        best = max(good, key=lambda r: r["tok_s"])
        lines.append(f"fastest: {_rate(best['tok_s'])} tok/s with "
                     f"{describe(changes(best['point'], base_point))}")  # fmt: skip
    lines += ["", "smallest changes reaching a rate:"]
    lines.append(f"  {'target':>6}  {'tok/s':>6}  {'cost':>5}  {'binding bound':<24}  changes")
    for row in result["smallest_changes"]:
        r = row["record"]
        if r is None:
            lines.append(f"  {row['target']:>6g}  not reached; best "
                         f"{_rate(row['best_tok_s'])} tok/s")  # fmt: skip
            continue
        ch = describe(changes(r["point"], base_point))
        ch = "none (the base design)" if ch == "base" else ch
        lines.append(f"  {row['target']:>6g}  {r['tok_s']:>6.2f}  {r['cost']:>5.1f}  "
                     f"{r['binding_bound']:<24}  {ch}")  # fmt: skip
    front = pareto_front([*([base] if base is not None else []), *good])
    if front:
        lines += ["", f"Pareto front ({len(front)} points, tok/s vs cost):"]
        for r in front[-12:]:
            ch = describe(changes(r["point"], base_point))
            lines.append(f"  {r['cost']:>6.1f}  {r['tok_s']:>6.2f}  {r['binding_bound']:<24}  "
                         f"{'none (the base design)' if ch == 'base' else ch}")  # fmt: skip
    for label, rows in result.get("curves", {}).items():
        lines += ["", f"context length, {label}:"]
        for r in sorted(rows, key=lambda r: r["point"].get("position", 0)):
            pos = r["point"].get("position", 0)
            if "error" in r:
                lines.append(f"  {pos + 1:>6} tokens: failed: {r['error']}")
            else:
                lines.append(f"  {pos + 1:>6} tokens: {r['tok_s']:>6.2f} tok/s  "
                             f"bound {r['binding_bound']}")  # fmt: skip
    return "\n".join(lines)


def to_json(result: dict[str, Any], path: Path) -> None:
    """Everything: the sweep, every record, the front, the table and the curves."""
    base = result.get("base_record")
    front = {r["key"] for r in pareto_front(ok([*([base] if base else []), *result["records"]]))}
    out = {
        "estimate": f"model estimates on profile {result['profile']} with each point's changes",
        "sweep": {
            k: result[k]
            for k in ("profile", "preset", "sampling", "seed", "policies", "memory", "axes")
        },  # fmt: skip
        "base_point": result["base_point"],
        "base_record": base,
        "points": [{**r, "pareto": r["key"] in front} for r in result["records"]],
        "smallest_changes": [
            {
                "target": row["target"],
                "best_tok_s": row["best_tok_s"],
                "point": row["record"]["point"] if row["record"] else None,
                "changes": changes(row["record"]["point"], result["base_point"])
                if row["record"]
                else None,
                "sampled_point": row["sampled"]["point"] if row.get("sampled") else None,
            }
            for row in result["smallest_changes"]
        ],  # fmt: skip
        "curves": result.get("curves", {}),
    }
    path.write_text(json.dumps(out, indent=1, sort_keys=True, default=str) + "\n")


def to_csv(result: dict[str, Any], path: Path) -> None:
    """One row per point: its parameters, then `CSV_FIELDS` and the utilisations."""
    recs = result["records"]
    params = list(dict.fromkeys(k for r in recs for k in r["point"]))
    util = sorted(
        {f"util_{k}" for r in ok(recs) for k in r["lane_utilisation"]}
        | {f"port_{k}" for r in ok(recs) for k in r["port_utilisation"]}
    )
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow([*params, *CSV_FIELDS, *util])
        for r in recs:
            u = {f"util_{k}": v for k, v in r.get("lane_utilisation", {}).items()}
            u.update({f"port_{k}": v for k, v in r.get("port_utilisation", {}).items()})
            w.writerow(
                [
                    *(r["point"].get(p, "") for p in params),
                    *(r.get(k, "") for k in CSV_FIELDS),
                    *(u.get(k, "") for k in util),
                ]
            )

"""Ratios per instance and the per-policy summary of a sweep, as plain data and as tables.

Per instance and policy: the makespan, its ratio to the best policy on that instance (1.0 for
the winner), its ratio to the instance's largest lower bound, its ratio to the optimum when
the exact solver proved one, and the wall time to schedule and validate it. Per policy over a
group of instances (``decode`` steps, ``random`` DAGs, user ``dag`` files): mean, median and
worst ratio to the best, wins (ties count for every tied policy), mean ratio to the largest
bound and to the optimum, and median scheduling time.
"""

from __future__ import annotations

import statistics
from typing import Any


def instance_rows(records: list[dict]) -> list[dict]:
    """One row per (instance, policy) that produced a schedule."""
    rows = []
    for rec in records:
        ok = {p: r for p, r in rec["results"].items() if "makespan" in r}
        if not ok:
            continue
        best = min(r["makespan"] for r in ok.values())
        bound = rec["largest_bound_cycles"]
        ex = rec.get("exact") or {}
        opt = ex.get("makespan") if ex.get("status") == "optimal" else None
        for policy, r in ok.items():
            m = r["makespan"]
            rows.append(
                {
                    "key": rec["key"],
                    "kind": rec["kind"],
                    "profile": rec.get("profile"),
                    "nodes": rec["nodes"],
                    "policy": policy,
                    "makespan": m,
                    "ratio_to_best": m / best if best else 1.0,
                    "ratio_to_bound": m / bound if bound else None,
                    "ratio_to_optimum": m / opt if opt else None,
                    "seconds": r["seconds"],
                }
            )
    return rows


def _mean(xs: list[float]) -> float | None:
    return statistics.fmean(xs) if xs else None


def summarize(records: list[dict], policies: list[str]) -> dict[str, Any]:
    """{group: {"instances": n, "optimal": k, "policies": {policy: stats}, "bounds": ...}}."""
    rows = instance_rows(records)
    groups: dict[str, Any] = {}
    for kind in ("decode", "random", "dag"):
        recs = [r for r in records if r["kind"] == kind]
        if not recs:
            continue
        mine = [r for r in rows if r["kind"] == kind]
        stats = {}
        for p in policies:
            pr = [r for r in mine if r["policy"] == p]
            if not pr:
                continue
            ratios = [r["ratio_to_best"] for r in pr]
            to_opt = [r["ratio_to_optimum"] for r in pr if r["ratio_to_optimum"]]
            stats[p] = {
                "instances": len(pr),
                "mean_ratio": statistics.fmean(ratios),
                "median_ratio": statistics.median(ratios),
                "worst_ratio": max(ratios),
                "wins": sum(x == 1.0 for x in ratios),
                "mean_ratio_to_bound": _mean([r["ratio_to_bound"] for r in pr]),
                "mean_ratio_to_optimum": _mean(to_opt),
                "worst_ratio_to_optimum": max(to_opt) if to_opt else None,
                "optimal_hits": sum(abs(x - 1.0) < 1e-12 for x in to_opt),
                "median_seconds": statistics.median(r["seconds"] for r in pr),
            }
        optimal = [r for r in recs if (r.get("exact") or {}).get("status") == "optimal"]
        bound_gap = {}  # how far below the optimum each bound, and the largest, sit
        for r in optimal:
            opt = r["exact"]["makespan"]
            if opt:
                bound_gap.setdefault("largest", []).append(r["largest_bound_cycles"] / opt)
                by_kind: dict[str, int] = {}  # the strongest bound of each kind
                for name, v in r["bounds"].items():
                    k = name.split(":")[0]
                    by_kind[k] = max(by_kind.get(k, 0), v)
                for k, v in by_kind.items():
                    bound_gap.setdefault(k, []).append(v / opt)
        groups[kind] = {
            "instances": len(recs),
            "profiles": sorted({r["profile"] for r in recs if r.get("profile")}),
            "exact_tried": sum((r.get("exact") or {}).get("status") not in (None, "skipped")
                               for r in recs),
            "optimal": len(optimal),
            "bound_over_optimum": {
                k: {"mean": statistics.fmean(v), "worst": min(v), "n": len(v)}
                for k, v in sorted(bound_gap.items())
            },
            "policies": stats,
        }  # fmt: skip
    return groups


GROUP_TITLE = {
    "decode": "decode steps",
    "random": "random DAGs",
    "dag": "DAG files",
}


def format_tables(summary: dict[str, Any]) -> str:
    """The terminal tables: one per group of instances, policies best mean ratio first."""
    out = []
    for kind, g in summary.items():
        head = f"{GROUP_TITLE[kind]}: {g['instances']} instances"
        if kind == "decode":
            head += (
                f" (makespans are model estimates on profiles {', '.join(g['profiles'])};"
                " no board timed)"
            )
        if g["exact_tried"]:
            head += f"; optimum proven on {g['optimal']} of {g['exact_tried']} small ones"
        out.append(head)
        has_opt = g["optimal"] > 0
        w = max([14, *(len(p) + 2 for p in g["policies"])])
        cols = f"{'policy':<{w}}{'mean':>7}{'median':>7}{'worst':>7}{'wins':>6}{'vs LB':>7}"
        cols += f"{'vs opt':>8}{'opt worst':>10}" if has_opt else ""
        cols += f"{'sched s':>9}"
        out.append(cols)
        order = sorted(g["policies"].items(), key=lambda kv: (kv[1]["mean_ratio"], kv[0]))
        for p, s in order:
            line = (
                f"{p:<{w}}{s['mean_ratio']:>7.3f}{s['median_ratio']:>7.3f}{s['worst_ratio']:>7.3f}"
                f"{s['wins']:>6}{s['mean_ratio_to_bound']:>7.3f}"
            )
            if has_opt:
                mo, wo = s["mean_ratio_to_optimum"], s["worst_ratio_to_optimum"]
                line += f"{mo:>8.3f}{wo:>10.3f}" if mo else f"{'-':>8}{'-':>10}"
            line += f"{s['median_seconds']:>9.4f}"
            out.append(line)
        out.append("mean/median/worst: makespan over the best policy's on each instance;")
        out.append("wins: instances where it is the best (ties count for each tied policy)")
        out.append("vs LB: over the largest lower bound; sched s: median wall time (+ check)")
        if has_opt:
            out.append("vs opt, opt worst: over the optimum CP-SAT proved (mean, worst), where")
            out.append("  it proved one")
        bo = g.get("bound_over_optimum") or {}
        if bo:
            out.append(f"lower bound / optimum (mean, worst) over the {g['optimal']} proven:")
            parts = [f"{k} {v['mean']:.3f}, {v['worst']:.3f}" for k, v in bo.items()]
            for i in range(0, len(parts), 3):
                out.append("  " + ";  ".join(parts[i : i + 3]))
        out.append("")
    return "\n".join(out).rstrip() + "\n"

"""Print the benchmark results in `benchmarks/results/*.json` as markdown tables.

The docs' Benchmarks page (docs/benchmarks.md) holds exactly what this prints between its
markers, so every number there traces back to a file a benchmark wrote:

    python benchmarks/summarize.py                 # print every table
    python benchmarks/summarize.py replay          # one section
    python benchmarks/summarize.py --write         # rewrite the page's tables
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"


def _load(name: str) -> dict | None:
    path = RESULTS / f"{name}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def graph_section(d: dict) -> str:
    rows = [
        [
            c["semantics"] + (f" + {c['profile']} costs" if c["profile"] else ""),
            f"{c['nodes']:,}",
            f"{c['edges']:,}",
            f"{c['median_seconds']:.2f} s",
            f"{c['tracemalloc_peak_mb']:.0f} MB",
            f"{c['peak_rss_mb']:.0f} MB",
        ]
        for c in d["cases"]
    ]
    head = ["E4B graph, position 1023", "nodes", "edges", "build (median)", "traced peak", "RSS"]
    return "**Building the decode DAG** (`bench_graph.py`; target < 1 s, < 300 MB)\n\n" + _table(
        head, rows
    )


def schedulers_section(d: dict) -> str:
    out = [
        "**Scheduling the E4B step** (`bench_schedulers.py`; wall time is this machine's, "
        "makespans are model estimates on the named profile; gaps are to the bandwidth/pool "
        "bound of `pccx_flow.bounds` and to the largest provable bound (`pool_chain`, or "
        "`capacity_chain` where it is larger); every schedule keeps "
        "L2 within the profile, and *vs no L2 limit* is the makespan change that costs)"
    ]
    for r in d["results"]:
        rows = []
        for p in sorted(r["policies"], key=lambda p: p["makespan_cycles"]):
            rows.append(
                [
                    p["policy"],
                    f"{p['schedule_seconds_median']:.2f} s",
                    f"{p['makespan_cycles']:,}",
                    f"{p['tokens_per_second_estimate']:.2f}",
                    f"+{100 * p['gap_to_reference_bound']:.1f} %",
                    f"+{100 * p['gap_to_largest_bound']:.1f} %",
                    f"{p['vs_program_order']:.3f}",
                ]
            )
            if "l2_peak_bytes" in p:
                rows[-1] += [
                    f"{p['l2_peak_bytes'] / 2**20:.2f} MiB",
                    f"{100 * p['change_vs_without_memory']:+.1f} %",
                ]
        head = [
            f"{r['profile']}",
            "wall",
            "makespan (cycles)",
            "tok/s (estimate)",
            "vs bound",
            "vs largest bound",
            "vs program-order",
        ]
        if any("l2_peak_bytes" in p for p in r["policies"]):
            head += ["L2 peak", "vs no L2 limit"]
        out.append(_table(head, rows))
    return "\n\n".join(out)


def render_section(d: dict) -> str:
    rows = [
        [
            f"{c['case']} ({c['format']})",
            f"{c['median_seconds']:.2f} s",
            str(c.get("nodes_drawn", c.get("slots", ""))),
            f"{c['bytes'] / 1e3:.0f} kB",
        ]
        for c in d["cases"]
    ]
    return "**Rendering** (`bench_render.py`; target: whole step by block < 10 s)\n\n" + _table(
        ["picture", "median", "nodes / slots", "size"], rows
    )


def weights_section(d: dict) -> str:
    m = d["median"]
    rows = [
        [
            "`weights synth --preset e4b` (3.60 GB)",
            f"{m['synth_s']:.0f} s",
            f"{m['synth_peak_rss_mib']:.0f} MiB",
        ],
        ["`weights verify` (851 tensors)", f"{m['verify_s']:.2f} s", ""],
        [
            "dequantise one W_gate (33.5 M values)",
            f"{m['dequant_s']:.2f} s",
            f"{m['read_peak_rss_mib']:.0f} MiB",
        ],
    ]
    return f"**Checkpoints** (`bench_weights.py`, median of {d['runs']})\n\n" + _table(
        ["operation", "seconds", "peak RSS"], rows
    )


def reference_section(d: dict) -> str:
    m = d["median"]
    rows = [
        [
            f"one E4B step, {d['semantics']}, position 0",
            f"{m['seconds']:.1f} s",
            f"{m['peak_rss_mb']:.0f} MB",
            f"{m['peak_anon_mb']:.0f} MB",
            "yes" if d["all_finite"] else "NO",
        ]
    ]
    return (
        f"**Reference decode** (`bench_reference.py`, median of {len(d['runs'])}; RSS includes "
        "the mapped checkpoint pages, 'own' is what the decode allocates)\n\n"
        + _table(["run", "seconds", "peak RSS", "own memory", "finite"], rows)
    )


def _range(d: dict, mode: str) -> str:
    spread = d["modes"].get(mode, {}).get("paired_over_loop_spread")
    return f" ({spread['min']:.2f}-{spread['max']:.2f})" if spread else ""


def execute_section(d: dict) -> str:
    names = {
        "dask": "Dask threaded, one task per node",
        "dask-fused": "Dask threaded, `--fuse`",
        "loop": "same kernels, plain loop",
        "reference": "reference decode",
    }
    rows = []
    for key, label in names.items():
        m = d["modes"].get(key)
        if m:
            tasks = f"{m['tasks']:,}" if "tasks" in m else "-"
            rows.append([label, f"{m['median_s']:.2f} s", tasks, f"{m['peak_rss_mib']:.0f} MiB"])
    fused = d["modes"].get("dask-fused", {})
    same_argmax = len({m["argmax"] for m in d["modes"].values()}) == 1
    ratios = (
        "Dask / loop (median of runs paired with a loop run in the same process, range in "
        f"brackets): {d['dask_over_loop']:.2f}x{_range(d, 'dask')} unfused, "
        f"{d['dask-fused_over_loop']:.2f}x{_range(d, 'dask-fused')} fused"
        + (
            f" ({fused['threads']} threads; grouping the nodes takes "
            f"{fused['fusion_s'] * 1000:.0f} ms of the step)"
            if "fusion_s" in fused
            else ""
        )
        + "; max abs logit difference to the reference: "
        + ", ".join(
            f"{name} {d[f'{key}_max_abs_diff_vs_reference']:.1e}"
            for key, name in (("dask", "unfused"), ("dask-fused", "fused"), ("loop", "loop"))
            if f"{key}_max_abs_diff_vs_reference" in d
        )
        + "; "
        + ("same argmax in every mode." if same_argmax else "ARGMAX DIFFERS between modes.")
    )
    grains = [
        [
            f"{g['grain_s'] * 1e3:g} ms"
            + (" (default)" if g["grain_s"] == fused.get("default_grain_s") else ""),
            f"{g['tasks']:,}",
            f"{g['median_s']:.2f} s",
            f"{g['paired_over_loop']:.2f}x"
            + (
                f" ({g['paired_over_loop_spread']['min']:.2f}-"
                f"{g['paired_over_loop_spread']['max']:.2f})"
                if "paired_over_loop_spread" in g
                else ""
            ),
        ]
        for g in fused.get("grains", [])
    ]
    if grains:
        ratios += (
            "\n\nFused, by fusion grain (what starting a task is charged; each row measured "
            "anew, so the default's row is a second measurement of the fused line above):\n\n"
        )
        ratios += _table(["grain", "tasks", "s/step", "Dask / loop"], grains)
    repeats = len(d["modes"]["loop"]["seconds"]) if "loop" in d["modes"] else "?"
    return (
        f"**Executing one E4B step on this CPU** (`bench_execute.py`, {d['semantics']}, "
        f"position {d['position']}, median of {repeats}; targets ≤ 2 s per step, Dask ≤ 1.2x "
        "the loop)\n\n"
        + _table(["mode", "s/step", "Dask tasks", "peak RSS"], rows)
        + "\n\n"
        + ratios
    )


def float64_section(d: dict) -> str:
    rows = [
        [
            f"`{r['semantics']}`",
            f"{r['max_abs_diff']:.1e}",
            "same" if r["same_argmax"] else "DIFFERS",
            f"{r['kv_elements_differing']}",
            f"{r['executor_s']:.1f} s",
            f"{r['reference_s']:.1f} s",
        ]
        for r in d["runs"]
    ]
    return (
        f"**One E4B step in float64** (`bench_float64.py`, position {d['position']}, executor "
        "fused on the threaded scheduler vs the reference decode, both with "
        '`precision="float64"`; CPU times)\n\n'
        + _table(
            [
                "semantics",
                "max abs logit diff",
                "argmax",
                "new KV elements differing",
                "executor",
                "reference",
            ],
            rows,
        )
    )


def _lowers(r: dict) -> str:
    """A row's *lowers* cell: yes, with the nodes issued later for a hole in L2, or no."""
    later = len(r.get("program_deferred") or ())
    cell = {True: "yes", False: "**no**"}.get(r.get("lowers"), "-")
    return f"{cell} ({later} issued later)" if later else cell


def memory_section(d: dict) -> str:
    rows = []
    for r in d["rows"]:
        if r["fits"]:
            rows.append(
                [r["profile"], str(r["position"]), r["policy"], "yes",
                 f"{r['l2_peak_bytes'] / 2**20:.2f} MiB",
                 "-" if r.get("l2_reach_peak_bytes") is None
                 else f"{r['l2_reach_peak_bytes'] / 1024:.0f} KiB",
                 f"{r['makespan_cycles']:,}", f"{r['tokens_per_second_estimate']:.2f}",
                 _lowers(r)]
            )  # fmt: skip
        else:
            rows.append(
                [r["profile"], str(r["position"]), r["policy"], "**no**", "-", "-", "-", "-",
                 "-"]
            )  # fmt: skip
    head = ["profile", "position", "policy", "fits", "L2 peak", "SFU-reach peak",
            "makespan (cycles)", "tok/s (estimate)", "lowers"]  # fmt: skip
    return (
        "**L2 as a constraint over the context** (`bench_memory.py`; every policy, "
        "validated occupancy; makespans are model estimates; *lowers*: the program's L2 "
        "allocator also placed it, with *issued later* nodes moved to just before their "
        "first reader for a hole in L2)\n\n" + _table(head, rows)
    )


def lower_section(d: dict) -> str:
    rows = []
    for c in d["cases"]:
        s = c["summary"]
        if not c["fits"]:
            rows.append([str(c["position"]), c["profile"], c.get("target", "spec"),
                         _secs(c["lower_seconds_median"]),
                         "**does not fit**", "-", "-", "-", "-", "-"])  # fmt: skip
            continue
        ops = ", ".join(f"{k} {v:,}" for k, v in s["by_opcode"].items())
        rows.append(
            [str(c["position"]), c["profile"], c.get("target", "spec"),
             _secs(c["lower_seconds_median"]),
             f"{s['instructions']:,} ({ops}) + {s['slot_memsets']:,} slot MEMSETs",
             f"{s['batches']:,} ({s.get('done_markers', 0):,})", f"{s['fences']:,}",
             f"{s['host_steps']:,} ({s.get('host_copies_out', 0):,} / "
             f"{s.get('host_copies_in', 0):,}; {s.get('host_io_bytes', 0) / 2**20:.1f} MiB)",
             f"{s['l2_peak_bytes'] / 2**20:.2f} MiB ({s['l2_fragmentation']:.1%})",
             f"{s['slots_used']} ({s['slot_evictions']:,} evictions)"]
        )  # fmt: skip
    head = ["position", "profile", "target", "lower (median)", "instructions",
            "batches (DONE markers)",
            "fences", "host steps (MEMCPY out / in; host I/O area)", "L2 peak (fragmentation)",
            "const slots"]  # fmt: skip
    return (
        "**Lowering the E4B step to a program** (`bench_lower.py`: `critical-path` on the "
        "L2-aware timeline, as `pccx-flow emit`; wall time of `lower` on this CPU; target "
        "< 5 s at position 1023)\n\n" + _table(head, rows)
    )


def dashboard_section(d: dict) -> str:
    rows = [
        [
            m,
            f"{r['median_s']:.2f} s",
            f"{r['overhead']:+.1%}",
            f"{r['overhead_vs_same_viewer']:+.1%}",
            f"{len(r['seconds'])}",
        ]
        for m, r in d["modes"].items()
    ]
    return (
        f"**The pccx lanes page** (`bench_dashboard.py`: `{d['preset']}`, {d['steps']} steps, "
        f"`{d['policy']}`, fused, in-process cluster as `run --dashboard`; wall time of the "
        f"generation on this CPU, median; target: page <= "
        f"{d['target_overhead']:.0%} over the dashboard alone)\n\n"
        + _table(["mode", "median", "vs dashboard", "vs dashboard, same viewer", "runs"], rows)
    )


def _secs(x: float) -> str:
    return f"{x:.2f} s" if x >= 1 else f"{x * 1000:.1f} ms"


def compare_section(d: dict) -> str:
    """Per group of instances: each policy's ratios, wins and scheduling time."""
    m = d["machine"]
    parts = [
        f"**Comparing the policies** (`bench_compare.py`: `pccx-flow compare` with its defaults,"
        f" {d['instances']} instances in {d['wall_seconds'] / 60:.1f} min of wall time on 2 "
        f"local Dask workers, load average {m['load_average_before'][0]:.1f} before; decode "
        "makespans are model estimates on the named profiles)"
    ]
    for kind, g in d["summary"].items():
        title = {"decode": "decode steps", "random": "random DAGs", "dag": "DAG files"}[kind]
        head = f"{title}: {g['instances']} instances"
        if kind == "decode":
            head += f" on {', '.join(g['profiles'])}"
        if g["exact_tried"]:
            head += f"; optimum proven on {g['optimal']} of {g['exact_tried']} with <= 40 nodes"
        rows = []
        for p, s in sorted(g["policies"].items(), key=lambda kv: kv[1]["mean_ratio"]):
            opt = s.get("mean_ratio_to_optimum")
            rows.append(
                [p, f"{s['mean_ratio']:.3f}", f"{s['median_ratio']:.3f}",
                 f"{s['worst_ratio']:.3f}", str(s["wins"]), f"{s['mean_ratio_to_bound']:.3f}",
                 f"{opt:.3f}" if opt else "-", _secs(s["median_seconds"])]
            )  # fmt: skip
        parts.append(head)
        parts.append(
            _table(
                [
                    "policy",
                    "mean vs best",
                    "median",
                    "worst",
                    "wins",
                    "vs largest bound",
                    "vs optimum",
                    "median time",
                ],
                rows,
            )  # fmt: skip
        )
        bo = g.get("bound_over_optimum") or {}
        if bo:
            parts.append(
                "lower bound / optimum on the proven instances (mean, worst): "
                + "; ".join(f"{k} {v['mean']:.3f}, {v['worst']:.3f}" for k, v in bo.items())
            )
    t = d["target"]
    parts.append(f"[{'met' if t['met'] else 'MISSED'}] {t['target']}: {t['value']}")
    return "\n\n".join(parts)


def replay_section(d: dict) -> str:
    def cell(tok, ratio=None) -> str:
        return f"{tok:.2f}" + (f" ({ratio:.2f}x)" if ratio is not None else "")

    rows, errors = [], []
    for c in d["cases"]:
        step = f"{c['preset']} pos {c['position']}, {c['profile']}, {c.get('target', 'spec')}"
        later = len(c.get("program", {}).get("deferred") or ())
        if later:
            step += f" ({later} node{'s' if later > 1 else ''} issued later for a hole in L2)"
        ls = c["list_schedule"]
        listed = f"{ls['makespan_cycles']:,}, " + cell(ls["tokens_per_second"])
        if "error" in c:
            rows.append([step, listed, "-", "-", "-", "-", "does not lower (below)"])
            errors.append(f"- {step}: {c['error']}")
            continue
        models = c["models"]
        cells = [
            cell(models[m]["tokens_per_second"], models[m]["vs_list_schedule"])
            for m in ("spec", "rtl", "decoupled")
        ]
        biggest = []
        for m in ("spec", "rtl", "decoupled"):
            s = models[m]
            share = s["time_slices_cycles"][s["biggest_cost"]] / s["makespan_cycles"]
            biggest.append(f"{m}: {s['biggest_cost']} {100 * share:.0f} %")
        rtl = models["rtl"]["counters"]
        biggest.append(
            f"rtl issue stalls {rtl.get('issue_stall_cycles', 0):,} cycles, "
            f"{rtl.get('blind_fences', 0):,} of {rtl.get('fences', 0):,} fences blind to DONE"
        )
        waits = c.get("models_dispatch_waits", {})
        dispatch_cell = " / ".join(
            f"{waits[m]['tokens_per_second']:.2f}" for m in ("spec", "rtl") if m in waits
        )
        rows.append([step, listed, *cells, dispatch_cell or "-", "; ".join(biggest)])
    head = [
        "step (critical-path), profile, target",
        "list schedule: cycles, tok/s",
        "spec tok/s (makespan x list)",
        "rtl",
        "decoupled",
        "spec / rtl, DONE wait after every batch (as dispatch)",
        "biggest cost (share of the makespan)",
    ]
    text = (
        "**Timing replay of the emitted program** (`bench_replay.py`; cycles and tok/s are "
        "model estimates on the named profile, no board has been timed: the list schedule "
        "beside the replay of its own program under the three issue models)\n\n"
        + _table(head, rows)
    )
    if errors:
        text += "\n\n" + "\n".join(errors)
    return text


def as_built_section(d: dict) -> str:
    rows = []
    for target in ("spec", "as-built"):
        t = d["tiny"][target]
        rows.append(
            [f"tiny, {t['steps']} steps (positions 0-15, both semantics, two policies)", target,
             f"{t['abs_min']:.3g}-{t['abs_max']:.3g}",
             f"{100 * t['relative_min']:.2f}-{100 * t['relative_max']:.2f} %",
             f"{100 * t['kv_error_max']:.2f} %", f"{t['argmax_same']} of {t['steps']}",
             f"{t['ok']} of {t['steps']}"]
        )  # fmt: skip
    for r in d.get("e4b", []):
        rows.append(
            ["E4B, position 0", r["target"], f"{r['max_abs_diff']:.3g}",
             f"{100 * r['relative']:.2f} %", f"{100 * r['kv_error']:.2f} %",
             "same" if r["argmax_same"] else "different", "yes" if r["ok"] else "no"]
        )  # fmt: skip
    head = ["steps", "target", "max abs logit diff", "of the largest logit",
            "new KV rows, worst (of the row's scale)", "same argmax", "passes its rule"]
    return (
        "**Programs for the RTL as built vs the reference** (`bench_as_built.py`: the "
        "program of each step emulated on `v002-as-built`, read as its target reads words, "
        "float32 math; the spec target is judged by `run --check`'s float32 rule, which "
        "every float32 E4B step fails because float16 KV flips through 35 layers move its "
        "logits by ~1e-3 (README **Numerics**), the as-built target by the BF16 rule; CPU "
        "computations, not NPU times)\n\n" + _table(head, rows)
    )


def _gap_table(d: dict) -> str:
    policies = list(dict.fromkeys(k.rsplit("/", 1)[0] for r in d["rows"] for k in r["results"]))
    rows = []
    for r in d["rows"]:
        bound = r["largest_bound_l2"]
        cells = [r["profile"], str(r["position"]),
                 f"`{bound}` {r['bounds_l2'][bound] / 1e6:.1f} M"]  # fmt: skip
        for p in policies:
            res = r["results"].get(f"{p}/l2", {})
            cells.append(f"{res['gap_to_own_bound']:+.2%}" if "makespan_cycles" in res else "-")
        free = r["results"].get("heft/unlimited", {})
        cells.append(f"{free['gap_to_hardware_bound']:+.2%}" if "makespan_cycles" in free else "-")
        rows.append(cells)
    head = ["profile", "position", "largest bound (within L2)", *policies,
            "heft without L2 limit"]  # fmt: skip
    return _table(head, rows)


def gap_section(d: dict) -> str:
    return (
        "**Schedules against the largest provable bound** (`bench_gap.py`; E4B within L2 "
        "as `schedule` makes it; makespan over the largest bound of that problem, model "
        "estimates; the last column is heft on the problem without the L2 limit, a "
        "different problem, for scale)\n\n" + _gap_table(d)
    )


def gap_read_ahead_section(d: dict) -> str:
    rule = " ".join(f"{k}={v}" for k, v in d["rows"][0].get("read_ahead", {}).items())
    return (
        f"**Another KV read-ahead rule** (`bench_gap.py --read-ahead {rule}`: the fixed "
        "rules as they were before every layer streamed its first KV tiles in during the "
        "previous layer's MLP, when a layer of more than two key tiles waited for its own "
        "attention input (tiles in today's read order); a study, not what `schedule` makes, "
        "see [What the model says](findings.md); columns as above)\n\n" + _gap_table(d)
    )


def read_ahead_section(d: dict) -> str:
    """The stream read-ahead rule against the fixed rules and other reserves
    (`bench_read_ahead.py`)."""
    rows = []
    for r in d["rows"]:
        if "error" in r:
            gap, lowers = "-", "**fails**: " + r["error"][:60]
        else:
            gap = f"{r['gap_to_largest_bound']:+.2%}"
            lowers = "yes" if r["lower_error"] is None else "**no**: " + r["lower_error"][:60]
        rows.append([r["profile"], str(r["position"]), f"`{r['policy']}`", r["mode"], gap,
                     lowers])  # fmt: skip
    head = ["profile", "position", "policy", "KV reads", "vs largest bound", "lowers"]
    return (
        "**KV read-ahead rules** (`bench_read_ahead.py`: *stream (schedule)*, what "
        "`schedule` uses, reads a stream's tiles one after another and the timeline "
        "releases each, in program order, once L2 has room for it and the reserve beside "
        "the bytes held for unplaced readers (`problem.admit`) and a KV tile slot is free "
        "beside one more (six on E4B); *no tile slots*, the same without the slots; "
        "*fixed*, the fixed rules, at most two K tiles and one V tile of a stream in "
        "flight; model estimates; *lowers*: the schedule lowers to a program, else the "
        "allocator's reason; *fails*: the policy deadlocked on memory)"
        "\n\n" + _table(head, rows)
    )


def read_ahead_lowering_section(d: dict) -> str:
    """Where each read-ahead rule's programs lower (`bench_read_ahead.py --name ...`): per
    profile, policy and rule, the positions that do not."""
    cells: dict[tuple, list] = {}
    for r in d["rows"]:
        ok = "error" not in r and r["lower_error"] is None
        cells.setdefault((r["profile"], r["policy"], r["mode"]), []).append((r["position"], ok))
    rows = []
    for (profile, policy, mode), got in cells.items():
        failed = ", ".join(str(pos) for pos, ok in got if not ok) or "-"
        lowered = sum(ok for _, ok in got)
        rows.append([profile, f"`{policy}`", mode, f"{lowered} of {len(got)}", failed])
    positions = sorted({r["position"] for r in d["rows"]})
    head = ["profile", "policy", "KV reads", "programs that lower", "positions that do not"]
    command = d["command"]
    return (
        f"**Where the read-ahead rules' programs lower** (`{command}`; positions "
        f"{', '.join(map(str, positions))}; below 2047 most have a short last KV tile; a "
        "schedule that does not lower fits L2 in bytes, but the allocator finds no "
        "contiguous hole)\n\n" + _table(head, rows)
    )


def improve_section(d: dict) -> str:
    rows = [[f"`{p}`", f"{r['mean_ratio_to_optimum']:.3f}", f"{r['worst_ratio_to_optimum']:.3f}",
             f"{r['mean_ratio']:.3f}", f"{r['median_seconds'] * 1e3:.1f} ms"]
            for p, r in sorted(d["policies"].items(),
                               key=lambda kv: kv[1]["mean_ratio_to_optimum"])]  # fmt: skip
    head = ["policy", "mean vs optimum", "worst vs optimum", "mean vs best policy",
            "median time per DAG"]  # fmt: skip
    return (
        f"**Forward-backward improvement** (`bench_improve.py`; {d['count']} random DAGs of "
        f"`compare`, optimum proven by CP-SAT on {d['proven_optimal']}; target: the best "
        "policy <= 1.05x the optimum on average)\n\n" + _table(head, rows)
    )


def cut_section(d: dict) -> str:
    rows = []
    for r in d["rows"]:
        name, bound = r["largest_bound"], r["bounds"][r["largest_bound"]]
        for k, v in r.get("bounds_inputs_behind_one_node", {}).items():
            if v > bound:
                name, bound = f"{k}†", v
        best = r["best_policy_cycles"]
        ex = r["exact"]
        span, lb = ex.get("makespan"), ex.get("lower_bound")
        secs = f"{ex['seconds']:.0f} s"
        bs = r.get("bound_search")
        if bs:  # the second, bound-searching solve (`BOUND_SOLVER`)
            secs += f" + {bs['seconds']:.0f} s‡"
            if bs.get("makespan") is not None and (span is None or bs["makespan"] < span):
                span = bs["makespan"]
            if bs.get("lower_bound") is not None and (lb is None or bs["lower_bound"] > lb):
                lb = bs["lower_bound"]
        a, b = r["layers"]
        cut = f"{a}" if b == a + 1 else f"{a}-{b - 1}"
        if r.get("dropped_blocks"):
            cut += " without " + ", ".join(r["dropped_blocks"])
        gap = best - bound
        policy_share = (best - span) / gap if span is not None and gap > 0 else None
        bound_share = max(0, lb - bound) / gap if lb is not None and gap > 0 else None
        rows.append([
            r["profile"], str(r["position"]), cut, f"{r['nodes']:,}",
            f"`{name.rstrip('†')}`{'†' * name.endswith('†')} {bound / 1e6:.3f} M",
            f"{r['best_policy'].split('/')[0]} {best / 1e6:.3f} M ({best / bound - 1:+.2%})",
            f"{span / 1e6:.3f} M ({span / bound - 1:+.2%})" if span else ex["status"],
            f"{lb / 1e6:.3f} M ({lb / bound - 1:+.2%})" if lb is not None else "-",
            secs,
            f"{policy_share:.0%}" if policy_share is not None else "-",
            f"{bound_share:.0%}" if bound_share is not None else "-",
        ])  # fmt: skip
    head = ["profile", "position", "layers", "nodes", "largest bound", "best policy",
            "CP-SAT best", "CP-SAT proven bound", "CP-SAT time", "gap: policy's (at least)",
            "gap: bound's (at least)"]  # fmt: skip
    return (
        "**Cuts of the step solved with CP-SAT** (`bench_cut.py`; E4B layers within L2 "
        "without the KV read-ahead edges, the problem the bounds are about; CP-SAT with "
        f"{d['workers']} workers for the wall time shown (this machine's, beside other "
        "work), seeded with the best policy schedule; cycles and percentages over the "
        "largest bound are model estimates on the named profile; *gap* is best policy minus "
        "largest bound, the policy's share is what CP-SAT shortened, the bound's what it "
        "proved above the bound; † the cut with its inputs behind one 0-cycle node, so that "
        "they are not taken for KV reads, a bound of the cut too; "
        + ("‡ a second solve searching for a bound: objective shaving beside the full "
           "linear relaxation; " if any(r.get("bound_search") for r in d["rows"]) else "")
        + "a policy's `l2` schedule is of the problem as `schedule` makes it, with the "
        "stream KV read rule, its `hardware` one of the problem without it)\n\n"
        + _table(head, rows)
    )


SECTIONS = {
    "graph": graph_section,
    "schedulers": schedulers_section,
    "memory": memory_section,
    "gap": gap_section,
    "gap_read_ahead": gap_read_ahead_section,
    "read_ahead": read_ahead_section,
    "read_ahead_lowering": read_ahead_lowering_section,
    "cut": cut_section,
    "improve": improve_section,
    "lower": lower_section,
    "compare": compare_section,
    "render": render_section,
    "weights": weights_section,
    "reference": reference_section,
    "execute": execute_section,
    "float64": float64_section,
    "dashboard": dashboard_section,
    "replay": replay_section,
    "as_built": as_built_section,
}


PAGE = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
BEGIN, END = "<!-- benchmarks:begin -->", "<!-- benchmarks:end -->"


def write_page(text: str, page: Path = PAGE) -> None:
    """Put `text` between the benchmark markers of the docs' Benchmarks page."""
    body = page.read_text(encoding="utf-8")
    head, rest = body.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    page.write_text(f"{head}{BEGIN}\n{text}\n{END}{tail}", encoding="utf-8")


def main(argv: list[str]) -> int:
    write = "--write" in argv
    argv = [a for a in argv if a != "--write"]
    parts = []
    for name in argv or list(SECTIONS):
        data = _load(name)
        if data is None:
            parts.append(f"*(no results/{name}.json yet: run benchmarks/bench_{name}.py)*")
        else:
            parts.append(SECTIONS[name](data))
    text = "\n\n".join(parts)
    if write:
        write_page(text)
        print(f"wrote the tables into {PAGE}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

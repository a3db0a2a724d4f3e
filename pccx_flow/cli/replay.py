"""`pccx-flow replay`: timing replay of an emitted program under the three issue models."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from pccx_flow import atomic
from pccx_flow.cli.common import check_distinct_outputs, check_output_path, writing

ISSUE_CHOICES = ("spec", "rtl", "decoupled", "all")

EPILOG = """examples:
  pccx-flow emit --preset tiny -o step.prog
  pccx-flow replay step.prog                          # all three issue models, list schedule
  pccx-flow replay step.prog --issue rtl --chrome rtl.json --pccx rtl.pccx
  pccx-flow replay step.prog --profile v002-as-built  # the same words, as-built timing
  pccx-flow replay step.prog --host-waits every-batch # the host waiting as dispatch does
  pccx-flow schedule --preset tiny --pccx list.pccx && pccx-flow trace diff list.pccx rtl.pccx

Issue models: spec = independent engines as the documentation intends; rtl = the controller
as built (serial issue, one shared load-path uop register, 8-deep command FIFO, DONE only
from CVO); decoupled = the v002.1 per-engine FIFO proposal. rtl is calibrated on the RTL by
`pccx-flow cosim`: a word is decoded 7 cycles after its write starts (not at the kick);
measured. The wait for the previous load-path instruction to complete is assumed: the
controller has no completion signal to measure it by. The host's word writes, kicks,
polls and host steps cost the same under all three ([issue] and [host] of the profile).
With several models, --chrome/--pccx write one file each, the model's name before the
suffix (rtl.json -> rtl.spec.json, ...). Every time and tok/s is a model estimate on the
named profile; no pccx board has been timed."""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "replay",
        help="timing replay of an emitted program (spec / rtl / decoupled issue)",
        description="Replay the words, batches, fences and host steps of a program written\n"
        "by `pccx-flow emit` on a hardware profile under one or all issue models, and print\n"
        "makespan, tok/s and where the time goes, beside the list schedule of the same step\n"
        "(all model estimates).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("program", type=Path, metavar="PROGRAM", help="program file from emit")
    add_issue_arg(p, default="all")
    p.add_argument(
        "--profile",
        metavar="NAME|FILE",
        help="hardware profile to time it on (default: the one the program was emitted for)",
    )
    p.add_argument("--chrome", type=Path, metavar="OUT.json", help="write Chrome trace JSON")
    p.add_argument("--pccx", type=Path, metavar="OUT.pccx", help="write a pccx-lab .pccx trace")
    p.add_argument("--json", type=Path, metavar="OUT", help="write the summaries as JSON")
    p.add_argument(
        "--host-waits",
        choices=("fences", "every-batch"),
        default="fences",
        help="when the host polls for DONE: at the program's fences (a driver that trusts the"
        " FIFO's depth; default) or after every batch, as `pccx-flow dispatch` does",
    )
    p.add_argument(
        "--list-schedule",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="rebuild and list-schedule the program's step to compare (default: on)",
    )
    p.set_defaults(func=run)


def add_issue_arg(p: argparse.ArgumentParser, default: str | None) -> None:
    p.add_argument(
        "--issue",
        choices=ISSUE_CHOICES,
        default=default,
        metavar="MODEL",
        help="issue model: spec, rtl, decoupled or all"
        + (f" (default: {default})" if default else ""),
    )


def models_of(choice: str) -> tuple[str, ...]:
    from pccx_flow.board.timing.issue import MODELS

    return MODELS if choice == "all" else (choice,)


def per_model_path(path: Path, model: str, several: bool) -> Path:
    return path.with_name(f"{path.stem}.{model}{path.suffix}") if several else path


def program_layers(program) -> tuple[int, int] | None:
    """The layers ``(a, b)`` a program covers, None for a whole step.

    The sidecar's meta records the layer range; programs written before it did are read
    off their node names (``L07.attn...``). Either is compared with the preset's layers.
    """
    from pccx_flow.model.config import get_config

    n = get_config(program.meta["config"]).n_layers
    if program.meta.get("layers"):
        a, b = (int(v) for v in program.meta["layers"])
    else:
        found = {int(x[1:3]) for x in program.nodes if x and x[:1] == "L" and x[1:3].isdigit()}
        if not found:
            return None
        a, b = min(found), max(found) + 1
    return None if (a, b) == (0, n) else (a, b)


def list_schedule_of(meta: dict, profile_name: str, layers: tuple[int, int] | None = None):
    """The list schedule of the step a program was emitted from (as `emit` made it)."""
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.hardware.profile import load_profile
    from pccx_flow.model.config import get_config
    from pccx_flow.schedule.problem import problem_from_graph
    from pccx_flow.schedule.registry import run_policy

    profile = load_profile(profile_name)
    config = get_config(meta["config"])
    graph = build_decode_graph(
        config,
        semantics=meta.get("semantics") or "pccx",
        position=int(meta["position"]),
        profile=profile,
        tile_rows=int(meta.get("tile_rows") or 512),
        layers=layers,
        row_align=int(meta.get("row_align") or 1),
    )
    # the KV read rule emit used (a program without one predates the stream rule: fixed)
    rule = {"rule": meta.get("read_ahead") or "fixed"}
    problem = problem_from_graph(graph, profile, memory=True, read_ahead=rule)
    schedule = run_policy(problem, profile, meta["policy"], seed=int(meta.get("seed") or 0))
    return schedule, graph, profile


def format_report(summaries: dict[str, dict], meta: dict, list_ms: int | None,
                  list_profile: str | None, profile, whole_step: bool = True,
                  host_waits: str = "fences", deferred: Sequence[str] = ()) -> str:  # fmt: skip
    """The replay table: makespan and tok/s per model beside the list schedule, then where
    the time goes and the issue-path counts. A part of a step (some layers) gets no tok/s.
    `deferred`: nodes the program issues later than the list schedule (for a hole in L2,
    `pccx_flow.board.program.lower`), named under it."""
    label = f"model estimate, profile {profile.name}"
    hz = float(profile.core_hz)
    lines = [
        f"replay of {meta.get('config')} step, position {meta.get('position')}, "
        f"{meta.get('semantics')} semantics, policy {meta.get('policy')}, emitted for "
        f"{meta.get('profile')} (target {meta.get('target', 'spec')}); timed on "
        f"{profile.name}; the host polls for DONE "
        + (
            "after every batch (as dispatch does)"
            if host_waits == "every-batch"
            else "at fences only"
        ),
        f"every time and tok/s below is a {label} (no pccx board has been timed)",
    ]
    if list_ms is not None:
        same = list_profile == profile.name
        lines.append(
            f"list schedule ({meta.get('policy')}, {list_profile}): {list_ms:,} cycles = "
            f"{list_ms / hz * 1e3:.3f} ms"
            + (f", {hz / list_ms:.2f} tok/s" if whole_step else "")
            + ("" if same else " (on another profile: compare with care)")
        )
        if deferred:
            n = len(deferred)
            lines.append(
                f"  the program issues {n} node{'s' if n > 1 else ''} later than this schedule "
                f"({'each ' if n > 1 else ''}just before its first reader, for a hole in L2): "
                + ", ".join(deferred)
            )
    lines.append(
        f"{'issue model':<12}{'makespan cycles':>17}{'ms':>10}{'tok/s':>10}"
        f"{'x list':>8}  biggest cost"
    )
    for m, s in summaries.items():
        ms = s["makespan_cycles"]
        ratio = f"{ms / list_ms:.2f}" if list_ms else "-"
        tok = f"{s['tokens_per_second']:.2f}" if whole_step else "-"
        lines.append(
            f"{m:<12}{ms:>17,}{ms / hz * 1e3:>10.3f}{tok:>10}{ratio:>8}  {s['biggest_cost']}"
        )
    cats = list(dict.fromkeys(k for s in summaries.values() for k in s["time_slices_cycles"]))
    lines.append(
        "where the time goes (% of the makespan; each cycle is charged to the first running "
        "of host step, host writes, gemv, gemm, dma, sfu, ctrl, else to waiting)"
    )
    lines.append(f"{'issue model':<12}" + "".join(f"{c:>13}" for c in cats))
    for m, s in summaries.items():
        sl, ms = s["time_slices_cycles"], s["makespan_cycles"] or 1
        lines.append(f"{m:<12}" + "".join(f"{100 * sl.get(c, 0) / ms:>12.1f}%" for c in cats))
    lanes = list(dict.fromkeys(k for s in summaries.values() for k in s["engine_busy_cycles"]))
    lines.append("engine busy, cycles per lane")
    lines.append(f"{'issue model':<12}" + "".join(f"{ln:>13}" for ln in lanes))
    for m, s in summaries.items():
        busy = s["engine_busy_cycles"]
        lines.append(f"{m:<12}" + "".join(f"{busy.get(ln, 0):>13,}" for ln in lanes))
    for m, s in summaries.items():
        c = s["counters"]
        text = (
            f"{m}: issue stalls {c.get('issue_stall_cycles', 0):,} cycles over "
            f"{c.get('bound_by_issue', 0):,} of {c.get('instructions', 0):,} instructions; "
            f"fences {c.get('fences', 0):,} ({c.get('polls', 0):,} polls, "
            f"{c.get('fence_cycles', 0) + c.get('batch_wait_cycles', 0):,} cycles"
            + (f", waits after {c['batch_waits']:,} batches" if c.get("batch_waits") else "")
            + f"); host steps {c.get('host_steps', 0):,} "
            f"({c.get('host_cycles', 0):,} cycles); words+kicks "
            f"{c.get('word_write_cycles', 0) + c.get('kick_cycles', 0):,} cycles"
        )
        if c.get("fifo_full_waits"):
            text += (
                f"; command FIFO full {c['fifo_full_waits']:,} times (the host waited "
                f"{c['fifo_full_cycles']:,} cycles; the as-built FIFO drops a word written "
                "while full)"
            )
        if c.get("blind_fences"):
            timeout = profile.registers.poll_timeout_seconds
            text += (
                f"; {c['blind_fences']:,} of {c.get('fences', 0):,} fences end on a non-CVO "
                f"instruction: DONE (CVO only) never signals them, each would wait the "
                f"{timeout:g} s poll timeout on the board (charged here as if DONE came)"
            )
        if c.get("host_hazards"):
            text += f"; {c['host_hazards']:,} host steps read unfinished NPU results (no fence)"
        lines.append(text)
    return "\n".join(lines)


def replay_report(program, profile, models, list_ms=None, list_profile=None, whole_step=True,
                  host_waits="fences"):  # fmt: skip
    """Replay `program` under `models`; returns (replays, summaries, text)."""
    from pccx_flow.board.timing.replay import replay_all, summary

    replays = replay_all(program, profile, models, host_waits)
    summaries = {m: summary(r) for m, r in replays.items()}
    if not whole_step:  # a few layers are not a token: no token rate anywhere
        for s in summaries.values():
            s["tokens_per_second"] = None
    text = format_report(summaries, program.meta, list_ms, list_profile, profile, whole_step,
                         host_waits, program.summary.get("deferred", ()))  # fmt: skip
    return replays, summaries, text


def print_step_replay(
    graph, schedule, profile, config, issue: str, memory: bool, whole_step: bool = True
) -> None:
    """`schedule --issue`: lower the scheduled step as `emit` does and print the replay."""
    from pccx_flow.board.program.lower import lower
    from pccx_flow.errors import InputError

    if not memory:
        raise InputError("--issue lowers the schedule to a program, which needs --memory")
    program = lower(graph, schedule, profile, config)
    _, _, text = replay_report(
        program, profile, models_of(issue), schedule.makespan, profile.name, whole_step
    )
    print(text)


def run(args: argparse.Namespace) -> int:
    from pccx_flow.board.program.files import read_program
    from pccx_flow.hardware.profile import load_profile

    models = models_of(args.issue)
    several = len(models) > 1
    outs = {"--chrome": args.chrome, "--pccx": args.pccx, "--json": args.json}
    check_distinct_outputs(outs)
    for out in outs.values():
        if out is not None:
            check_output_path(out)
    program = read_program(args.program)
    from pccx_flow.board.program.files import check_words

    check_words(program)
    profile = load_profile(args.profile or program.meta.get("profile") or "v002-spec")
    from pccx_flow.board.timing.replay import check_replayable

    check_replayable(program, profile)
    layers = program_layers(program)
    list_ms = list_profile = None
    if args.list_schedule:
        from pccx_flow.errors import ProfileError

        print("list-scheduling the program's step to compare ...", file=sys.stderr)
        try:
            schedule, _, lprof = list_schedule_of(program.meta, program.meta["profile"], layers)
            list_ms, list_profile = schedule.makespan, lprof.name
        except ProfileError:  # emitted for a profile file: only its name was recorded
            print(
                f"(no list schedule to compare: the program was emitted for profile "
                f"{program.meta['profile']!r}, which is no built-in; use --no-list-schedule)",
                file=sys.stderr,
            )
    replays, summaries, text = replay_report(
        program, profile, models, list_ms, list_profile, layers is None, args.host_waits
    )
    print(text)
    if layers is not None:
        print(f"(layers {layers[0]}:{layers[1]} only: not a whole token, so no tok/s)")
    write_traces(replays, args.chrome, args.pccx, several)
    if args.json is not None:
        with writing(args.json):
            data = {"meta": program.meta, "list_schedule_cycles": list_ms,
                    "list_schedule_profile": list_profile, "replays": summaries}  # fmt: skip
            atomic.write_text(args.json, json.dumps(data, indent=1) + "\n")
        print(f"wrote {args.json}", file=sys.stderr)
    return 0


def write_traces(replays: dict, chrome: Path | None, pccx: Path | None, several: bool) -> None:
    from pccx_flow.board.timing.replay import replay_timeline
    from pccx_flow.traces.chrome import write_timeline_chrome
    from pccx_flow.traces.pccx_file import write_pccx

    for m, r in replays.items():
        timeline = replay_timeline(r)
        if chrome is not None:
            path = per_model_path(chrome, m, several)
            with writing(path):
                write_timeline_chrome(timeline, path)
            print(f"wrote {path} (Chrome trace, {r.model} issue, {r.label})", file=sys.stderr)
        if pccx is not None:
            path = per_model_path(pccx, m, several)
            with writing(path):
                write_pccx(timeline, path)
            print(f"wrote {path} (pccx-lab trace, {r.model} issue, {r.label})", file=sys.stderr)

"""`pccx-flow run`: generate tokens by executing the decode graph with Dask.

Prints the generated token ids and each step's wall time on this CPU (the time Dask took to
execute the step's nodes here; it is not an NPU estimate). With ``--check`` every step is
also decoded by the reference implementation and the logits are compared.
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import tempfile
from pathlib import Path

import numpy as np

from pccx_flow.cli.common import (
    CONFIG_FILE_HELP,
    add_policy_timeout_arg,
    check_scheduler_address,
    checkpoint_config,
    float_in,
    positive,
    seed,
)
from pccx_flow.errors import InputError
from pccx_flow.model.config import PRESETS, SEMANTICS
from pccx_flow.precision import DEFAULT_PRECISION, PRECISIONS

EPILOG = """examples:
  pccx-flow run --synthetic tiny --steps 8 --check
  pccx-flow run --synthetic tiny --semantics gemma3n --prompt-ids 2,105,7 --temperature 0.8 --seed 3
  pccx-flow run --weights ckpt/e4b --steps 2 --policy critical-path
  pccx-flow run --weights pccx-export/ --config cfg.json --steps 4   # no manifest
  pccx-flow run --synthetic tiny --scheduler tcp://127.0.0.1:8786     # an existing cluster
  pccx-flow run --synthetic tiny --dashboard --fuse                     # local cluster + dashboard
  pccx-flow run --synthetic tiny --steps 8 --policy critical-path --fuse --dashboard --keep-open
  pccx-flow run --synthetic tiny --policy heft --report run.html        # performance report
  pccx-flow run --synthetic tiny --steps 8 --check --precision float64  # structure, no fp32 noise
  pccx-flow run --synthetic tiny --steps 4 --check --backend emulator   # run the program words
  pccx-flow run --synthetic tiny --backend emulator --numerics rtl --profile v002-as-built
  pccx-flow run --synthetic tiny --steps 4 --check --backend device --fake-device
  pccx-flow run --synthetic tiny --backend device --fake-device --dashboard --keep-open
  pccx-flow run --weights ckpt/ --backend device --scheduler tcp://127.0.0.1:8786  # NPU workers
  sudo pccx-flow run --weights ckpt/ --backend device --device /dev/uio4           # on a KV260

Times printed are CPU wall times of executing the graph on this machine, not NPU estimates.
--check decodes each step with the reference too, from the same earlier KV rows, and exits
with status 1 when a step's argmax differs, a new KV element differs by more than one
float16 rounding step, or its logits differ by more than 1e-4 (1e-3 on a step whose float16
KV rows rounded differently: such a flip alone moves logits by ~1e-4). It prints the
largest difference and how many steps had float16 flips. On E4B, float32 rounding
differences grow through the 35 layers (README, "Numerics"); pass --tolerance to judge
those. With --precision float64 both sides keep activations in float64 and must agree to
1e-9.

--keep-open prints the run's table, then keeps the dashboard and its pccx lanes page up
until Ctrl-C; that Ctrl-C is the way to close, not an interruption, so the exit status is
still the run's (0, or 1 when --check failed). Ctrl-C during the run itself exits 130.

--backend device runs each step's program on an NPU through Dask: a chain of tasks (one per
model layer's batches and host steps; --device-tasks batch: one per batch) pinned to the
worker that owns the device. --fake-device starts an in-process cluster whose worker owns a
fake device (a rehearsal, not a board); --device runs on this board's UIO device; with
--scheduler the cluster's workers started with `--resources npu=1 --preload
pccx_flow.cluster.npu_worker` own the devices. The lanes page then shows each step's plan
beside the device's times: modelled cycles on the fake device (a model estimate), kick to
DONE on a board."""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "run",
        help="execute decode steps (Dask, or the program emulator) and print the generated tokens",
        description=__doc__.split("\n\n")[1],
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--weights", metavar="DIR", help="a pccx split-.npy checkpoint directory")
    src.add_argument(
        "--synthetic",
        metavar="PRESET",
        help=f"write a synthetic checkpoint of a preset ({', '.join(PRESETS)}) to a temp dir",
    )
    p.add_argument(
        "--preset",
        help=f"with --weights: the checkpoint's config ({', '.join(PRESETS)}) when its manifest "
        "names none (default: the manifest's, else inferred from the tensor shapes)",
    )
    p.add_argument("--config", metavar="FILE", help="with --weights: " + CONFIG_FILE_HELP)
    p.add_argument("--seed-weights", type=seed, default=0, metavar="N", help="synthetic seed")
    p.add_argument(
        "--semantics",
        default="pccx",
        choices=SEMANTICS,
        help="pccx: the specification as written (default); gemma3n: the published Gemma 3n"
        " behaviour, for real Gemma 3n weights (docs/semantics.md lists the differences)",
    )
    p.add_argument("--policy", default=None, help="schedule each step with this policy")
    p.add_argument(
        "--profile", default=None, help="hardware profile for --policy (default: v002-spec)"
    )
    p.add_argument("--prompt-ids", default="2", metavar="IDS", help="comma-separated token ids")
    p.add_argument("--steps", type=positive, default=4, help="tokens to generate (default 4)")
    p.add_argument(
        "--temperature",
        type=float_in(1e-3, 1e3, zero=True),
        default=0.0,
        help="0 = greedy (default), else 0.001..1000",
    )
    p.add_argument("--top-p", type=float_in(1e-6, 1.0), default=0.9, help="1e-6..1 (default 0.9)")
    p.add_argument(
        "--repetition-penalty",
        type=float_in(1e-2, 1e2),
        default=1.15,
        help="0.01..100, 1 = none (default 1.15)",
    )
    p.add_argument("--seed", type=seed, default=0, help="sampling seed (>= 0)")
    p.add_argument("--scheduler", metavar="ADDR", help="run on a distributed scheduler")
    p.add_argument(
        "--connect-timeout",
        type=float_in(0.1, 3600.0),
        default=2.0,
        metavar="S",
        help="with --scheduler: give up on an address that refuses or does not answer after "
        "S seconds (default 2; a scheduler that answers gets 15 s for its first worker)",
    )
    p.add_argument("--check", action="store_true", help="compare every step to the reference")
    p.add_argument(
        "--tolerance",
        type=float_in(1e-15, 1e6),
        default=None,
        help="--check: max |logit difference| per step (default 1e-4, or 1e-9 with "
        "--precision float64; 10x on float16 flips)",
    )
    p.add_argument(
        "--precision",
        default=DEFAULT_PRECISION,
        choices=list(PRECISIONS),
        help="activation dtype of both the executed graph and the --check reference: float32 "
        "as specified (default), or float64 to check the graph's structure without float32 "
        "noise (logits then agree to ~1e-13)",
    )
    p.add_argument(
        "--dashboard",
        action="store_true",
        help="run on an in-process cluster with the Dask dashboard on 127.0.0.1 (the "
        "distributed scheduler costs ~0.6 ms per task: several seconds per step; --fuse helps)",
    )
    p.add_argument(
        "--keep-open",
        action="store_true",
        help="with --dashboard: after the run, print its table and keep the dashboard and the "
        "pccx lanes page up until Ctrl-C (which then exits with the run's status)",
    )
    p.add_argument(
        "--fuse",
        action="store_true",
        help="run the step as a few hundred larger tasks shaped for the available threads "
        "instead of one task per node (same kernels, same numbers; much less Dask overhead)",
    )
    add_policy_timeout_arg(p)
    p.add_argument(
        "--report",
        metavar="OUT.html",
        help="write Dask's performance report of the run (offline HTML) and the pccx lanes "
        "page's data beside it (OUT.lanes.html, linked from the report); runs on an "
        "in-process cluster unless --scheduler is given",
    )
    p.add_argument(
        "--backend",
        default="dask",
        choices=("dask", "emulator", "device"),
        help="dask: execute the decode graph's nodes (default); emulator: lower each step to a "
        "pccx v002 program (--policy, default critical-path, on --profile) and run its words "
        "in the functional emulator; device: run that program on an NPU through Dask tasks "
        "(--fake-device, --device or --scheduler)",
    )
    d = p.add_argument_group("--backend device")
    d.add_argument(
        "--fake-device",
        action="store_true",
        help="an in-process worker owning a fake NPU (the emulator behind a register file; a "
        "rehearsal, not a board)",
    )
    d.add_argument(
        "--device",
        metavar="/dev/uioN|uio",
        help="this board's NPU (uio: found by its UIO name), owned by an in-process worker",
    )
    d.add_argument(
        "--buffers",
        default="udmabuf0,udmabuf1",
        metavar="DEV,DEV",
        help="with --device: u-dma-buf devices for the DDR image and activations",
    )
    d.add_argument(
        "--device-tasks",
        default="layer",
        choices=("layer", "batch"),
        help="one Dask task per model layer's program steps (default) or per batch and host "
        "step (~6 ms of Dask latency each: ~13 s more per tiny step)",
    )
    d.add_argument(
        "--device-timeout",
        type=float_in(0.0, 3600.0),
        default=None,
        metavar="S",
        help="status poll timeout per batch (default: the profile's)",
    )
    p.add_argument(
        "--numerics",
        default=None,
        choices=("spec", "rtl"),
        help="--backend emulator: the specification's float32 math (default) or the RTL's "
        "approximations (GELU as x*sigmoid(1.702x), saturating SIN/COS)",
    )
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=run)


_TOKEN_ID = re.compile(r"[0-9]{1,9}")


def parse_prompt_ids(text: str) -> list[int]:
    """``"2,105,7"`` -> ``[2, 105, 7]``; `InputError` on anything else."""
    parts = [t.strip() for t in text.split(",")]
    # ASCII digits only: str.isdigit() and int() also take "²" or "٣".
    if not text.strip() or any(not _TOKEN_ID.fullmatch(t) for t in parts):
        raise InputError(
            f"--prompt-ids {text!r} is not a comma-separated list of token ids (digits 0-9, "
            "e.g. 2,105,7)"
        )
    return [int(t) for t in parts]


def _check_options(args) -> None:
    from pccx_flow.execute.compare import FLOAT64_LOGIT_TOLERANCE, LOGIT_TOLERANCE

    """The checks between options (each number's range is checked by its argparse type)."""
    if args.tolerance is None:
        float64 = args.precision == "float64"
        args.tolerance = FLOAT64_LOGIT_TOLERANCE if float64 else LOGIT_TOLERANCE
    if args.weights is not None and not args.weights.strip():
        raise InputError("--weights is empty; give a checkpoint folder, e.g. --weights ckpt/tiny")
    if args.profile is not None and args.policy is None and args.backend == "dask":
        # the program backends lower on the profile with their default policy
        raise InputError("--profile only matters with --policy; add --policy NAME or drop it")
    if args.synthetic and (args.preset or args.config):
        raise InputError(
            "--preset and --config describe a --weights checkpoint; --synthetic "
            "already names its preset"
        )
    if args.scheduler and args.dashboard:
        raise InputError("--scheduler and --dashboard exclude each other; choose one")
    if args.backend == "emulator":
        given = {"--scheduler": args.scheduler, "--dashboard": args.dashboard,
                 "--report": args.report, "--fuse": args.fuse}  # fmt: skip
        dask_only = [option for option, value in given.items() if value]
        if dask_only:
            raise InputError(
                f"{dask_only[0]} is an option of the dask backend; drop it or use --backend dask"
            )
        args.policy = args.policy or "critical-path"
    elif args.numerics is not None:
        raise InputError("--numerics is an option of --backend emulator; add it or drop --numerics")
    from pccx_flow.cli.run_device import check_device_options

    check_device_options(args)
    if args.keep_open and not args.dashboard:
        raise InputError("--keep-open keeps the --dashboard page up; add --dashboard or drop it")
    if args.report and Path(args.report).suffix.lower() != ".html":
        raise InputError(f"--report {args.report!r} must end in .html, e.g. --report run.html")
    check_scheduler_address(args.scheduler)


@contextlib.contextmanager
def _checkpoint(args):
    from pccx_flow.execute.generate import check_prompt
    from pccx_flow.weights.checkpoint import open_checkpoint

    if args.weights is not None:
        path = Path(args.weights)
        if not args.weights.strip() or not path.is_dir():
            raise InputError(
                f"--weights {args.weights!r} is not a directory; give a checkpoint folder"
            )
        ckpt = open_checkpoint(path, checkpoint_config(args.preset, args.config))
        if ckpt.config_note:
            print(f"note: {ckpt.config_note}", file=sys.stderr)
        yield ckpt
        return
    from pccx_flow.model.config import get_config
    from pccx_flow.weights.synth import write_synthetic_checkpoint

    config = get_config(args.synthetic)
    check_prompt(config, parse_prompt_ids(args.prompt_ids), args.steps)  # before GBs are written
    with tempfile.TemporaryDirectory(prefix=f"pccx-{config.name}-") as tmp:
        write_synthetic_checkpoint(config, args.seed_weights, Path(tmp), progress=_tty(args))
        yield open_checkpoint(tmp)


def _tty(args) -> bool:
    return not args.no_progress and sys.stderr.isatty()


@contextlib.contextmanager
def _local_cluster(args):
    """An in-process cluster whose scheduler runs the pccx lanes page (for --dashboard and
    --report); prints the dashboard's and the page's addresses with --dashboard."""
    from pccx_flow.dashboard.client import page_url
    from pccx_flow.dashboard.cluster import loopback_cluster

    with loopback_cluster() as (cluster, client):
        if args.dashboard:
            print(f"dashboard: {cluster.dashboard_link}", flush=True)
            print(f"pccx lanes page: {page_url(client)}", flush=True)
        yield client


@contextlib.contextmanager
def _dashboard_client(args):
    """The distributed client of the run (None for the threaded scheduler) and the lanes
    page's plan announcer (None when the scheduler has no page)."""
    from pccx_flow.dashboard.client import PlanAnnouncer, page_available, page_url

    if args.scheduler:
        from pccx_flow.execute.executor import connect

        with connect(None, args.scheduler, args.connect_timeout) as client:
            if page_available(client):
                print(f"pccx lanes page: {page_url(client)}", flush=True)
                yield client, PlanAnnouncer(client)
            else:
                print(
                    f"note: the scheduler at {args.scheduler} has no pccx lanes page (start it "
                    "with --preload pccx_flow.dashboard.preload); running without it",
                    file=sys.stderr,
                    flush=True,
                )
                yield client, None
        return
    if args.backend == "device":
        from pccx_flow.cli.run_device import device_cluster

        with device_cluster(args) as client:
            yield client, PlanAnnouncer(client)
        return
    if not (args.dashboard or args.report):
        yield None, None
        return
    with _local_cluster(args) as client:
        yield client, PlanAnnouncer(client)




@contextlib.contextmanager
def _report(args, client):
    """Dask's performance report of the run (inline resources, offline) with the lanes
    page's data written beside it and linked from it."""
    if not args.report:
        yield
        return
    from distributed import performance_report

    from pccx_flow import atomic
    from pccx_flow.dashboard.client import fetch
    from pccx_flow.dashboard.report import add_lanes_page

    path = Path(args.report)
    draft = atomic.temp_path(path)  # Dask writes in place; the report is renamed in after
    try:
        with client.as_current(), performance_report(filename=str(draft), mode="inline"):
            yield
            snapshot = fetch(client) if _has_page(client) else None
        lanes = add_lanes_page(path, snapshot, draft=draft)
    finally:
        draft.unlink(missing_ok=True)
    also = f" and {lanes} (pccx lanes)" if lanes else ""
    print(f"wrote {path} (Dask performance report){also}", file=sys.stderr)


def _has_page(client) -> bool:
    from pccx_flow.dashboard.client import page_available

    return page_available(client)


class _Checker:
    """Decodes every step with the reference too and records how the two agree.

    Each reference step starts from the executor's own KV rows of earlier positions, so a
    step is judged on what it computes from the same state (free-running, two correct
    implementations drift apart through float16 rounding of the cache). The verdict per step
    is `pccx_flow.execute.compare.step_verdict`.
    """

    def __init__(self, ckpt, semantics: str, tolerance: float, precision: str,
                 bf16: bool = False):  # fmt: skip
        from pccx_flow.reference.decode import new_kv_cache

        self.ckpt = ckpt
        self.semantics = semantics
        self.precision = precision
        self.tolerance = tolerance
        # a program for the as-built target keeps its values in BF16: the BF16 rule
        # (`pccx_flow.execute.compare.bf16_step_verdict`) judges its steps
        self.bf16 = bf16
        self.cache = new_kv_cache(ckpt.config, semantics)
        self.rows: list[tuple] = []  # (position, diff, same, KVRounding, ok)

    def __call__(self, position, token_id, logits, seconds, state):
        from pccx_flow.execute.compare import KVRounding, bf16_judgement, kv_rounding, step_verdict
        from pccx_flow.reference.decode import decode_step

        p = position
        self.cache.k[:, :p] = state.k_cache[:, :p]
        self.cache.v[:, :p] = state.v_cache[:, :p]
        want = decode_step(
            self.ckpt, token_id, p, self.cache, semantics=self.semantics, precision=self.precision
        )
        diff = float(np.max(np.abs(np.asarray(logits, np.float64) - want)))
        same = int(np.argmax(logits)) == int(np.argmax(want))
        k = kv_rounding(state.k_cache[:, p], self.cache.k[:, p])
        v = kv_rounding(state.v_cache[:, p], self.cache.v[:, p])
        kv = KVRounding(k.flips + v.flips, k.beyond + v.beyond)
        if self.bf16:
            ours, theirs = (state.k_cache, state.v_cache), (self.cache.k, self.cache.v)
            pairs = [(a[j, p], b[j, p]) for a, b in zip(ours, theirs, strict=True)
                     for j in range(b.shape[0])]  # fmt: skip
            ok = bf16_judgement(logits, want, pairs)[0]
            kv = KVRounding(0, 0)  # float16 flips are not the yardstick of BF16 rows
        else:
            ok = step_verdict(diff, same, kv, self.tolerance)
        self.rows.append((p, diff, same, kv, ok))

    @property
    def ok(self) -> bool:
        return all(row[-1] for row in self.rows)


def run(args) -> int:
    from pccx_flow.execute.generate import generate

    _check_options(args)
    prompt = parse_prompt_ids(args.prompt_ids)
    policy = args.policy
    if policy is not None:  # fail fast, before any checkpoint is written
        from pccx_flow.schedule.registry import prepare_policy

        policy = prepare_policy(policy, timeout=args.policy_timeout)
    with _checkpoint(args) as ckpt, _dashboard_client(args) as (client, announce):
        checker = None
        if args.check:
            checker = _Checker(ckpt, args.semantics, args.tolerance, args.precision,
                               bf16=_stores_bf16(args))  # fmt: skip
        emulator = _emulator_backend(args, ckpt, policy) if args.backend == "emulator" else {}
        if args.backend == "device":
            from pccx_flow.cli.run_device import device_backend

            emulator = device_backend(args, ckpt, policy, client, announce)
        with _report(args, client):
            result = generate(
                ckpt,
                prompt,
                args.steps,
                semantics=args.semantics,
                temperature=args.temperature,
                top_p=args.top_p,
                repetition_penalty=args.repetition_penalty,
                seed=args.seed,
                policy=policy,
                profile=args.profile,
                client=client,
                scheduler=None if client is not None else args.scheduler,
                progress=_tty(args),
                fuse=args.fuse,
                precision=args.precision,
                on_step=checker,
                on_plan=announce,
                **emulator,
            )
        where = "distributed" if client is not None or bool(args.scheduler) else "dask threaded"
        if args.backend == "emulator":
            where = f"pccx v002 emulator, {args.numerics or 'spec'} numerics"
            print_programs(emulator["run_step"].summaries, args)
        elif args.backend == "device":
            from pccx_flow.cli.run_device import print_device

            print_programs(emulator["run_step"].summaries, args)
            where = print_device(emulator["run_step"])
        code = _print_results(args, prompt, result, checker, where)
        if args.keep_open:
            _keep_open(client)
    return code


def _stores_bf16(args) -> bool:
    """True when a program backend runs programs for a target that keeps BF16 in L2."""
    if args.backend not in ("emulator", "device"):
        return False
    from pccx_flow.board.isa.target import target_of
    from pccx_flow.hardware.profile import load_profile

    return target_of(load_profile(args.profile or "v002-spec")).l2_dtype == "bfloat16"


def _emulator_backend(args, ckpt, policy) -> dict:
    """`generate`'s arguments for the emulator backend: per-position graphs scheduled by the
    L2-aware timeline, and the step function that lowers and emulates them."""
    from pccx_flow.board.emulator.backend import EmulatorSteps, emulator_graphs
    from pccx_flow.hardware.profile import load_profile

    profile = load_profile(args.profile or "v002-spec")
    graphs = emulator_graphs(ckpt.config, args.semantics, policy, profile)
    steps = EmulatorSteps(ckpt, profile, numerics=args.numerics or "spec")
    return {"graph_for_position": graphs, "run_step": steps}






def print_programs(summaries: list[dict], args) -> None:
    """One line on the programs the emulator ran (instruction words, not the graph)."""
    words = [s["words"] for s in summaries]
    fences = [s["fences"] for s in summaries]
    peak = max(s["l2_peak_bytes"] for s in summaries)
    verb = "ran" if args.backend == "device" else "emulated"
    print(
        f"{verb} {len(summaries)} program{'s' if len(summaries) != 1 else ''} "
        f"({args.policy}, {args.profile or 'v002-spec'}): "
        f"{min(words)}-{max(words)} words, {min(fences)}-{max(fences)} fences per step, "
        f"L2 peak {peak:,} B"
    )


def _print_results(args, prompt: list[int], result, checker, where: str) -> int:
    from pccx_flow.execute.compare import BF16_RELATIVE_TOLERANCE

    """The run's table (tokens, per-step times, --check verdicts); returns the exit code."""
    print(f"prompt ids: {','.join(map(str, prompt))}")
    print(f"generated ids: {','.join(map(str, result.tokens))}")
    if args.precision != DEFAULT_PRECISION:
        print(f"activations in {args.precision} (a structure check; the NPU computes float32)")
    print(
        f"per-step wall time on this CPU ({where}; not an NPU estimate), executing the "
        + ("program" if args.backend != "dask" else "graph")
        + " and, before it, building the graph"
        + (" and its schedule:" if args.policy else ":")
    )
    header = "  position  seconds  build s"
    if checker:
        header += "  max|dlogit|  argmax   kv16 flips  verdict"
    print(header)
    for pos, sec in enumerate(result.step_seconds):
        line = f"  {pos:8d}  {sec:7.3f}  {result.build_seconds[pos]:7.3f}"
        if checker:
            _, diff, same, kv, ok = checker.rows[pos]
            line += f"  {diff:11.2e}  {'same' if same else 'DIFFERS':7s}  {kv.flips:10d}"
            line += "  ok" if ok else "  FAILED"
            if kv.beyond:
                line += f" ({kv.beyond} KV elements beyond rounding)"
        print(line)
    if checker:
        verdict = "OK" if checker.ok else "FAILED"
        diffs = [row[1] for row in checker.rows]
        flips = sum(1 for row in checker.rows if row[3].flips)
        if checker.bf16:
            differs = sum(1 for row in checker.rows if not row[2])
            print(
                f"max |dlogit| {max(diffs):.2e} over {len(diffs)} steps; the argmax differs on "
                f"{differs} (accepted where the reference's logit of our token is within the"
                " rule)"
            )
        else:
            print(
                f"max |dlogit| {max(diffs):.2e} over {len(diffs)} steps, above 1e-5 on "
                f"{sum(d > 1e-5 for d in diffs)}; {flips} steps with float16 KV flips"
            )
        if checker.bf16:
            print(
                f"check against the reference decode: {verdict} (BF16 in L2: logits, new KV "
                f"rows and the chosen token within {BF16_RELATIVE_TOLERANCE:.0%} of their scale)"
            )
        else:
            print(
                f"check against the reference decode: {verdict} (tolerance {args.tolerance:g},"
                f" {10 * args.tolerance:g} on steps whose float16 KV rows rounded differently)"
            )
            if not checker.ok and args.precision != "float64":
                print(_float32_hint(max(diffs)))
        return 0 if checker.ok else 1
    return 0


def _float32_hint(largest: float) -> str:
    """What to do when a float32 check fails: on a deep model (E4B's 35 layers) float32
    rounding alone can exceed the default tolerance, which says nothing about the graph."""
    return (
        "  if this is float32 rounding through the layers (likely on e4b): rerun with"
        " --precision float64 to check the graph's structure to 1e-9, or judge float32 with"
        f" --tolerance above {largest:.1e} (docs/numerics.md)"
    )


def _keep_open(client) -> None:
    """Keep the in-process cluster (and so the dashboard) up until Ctrl-C.

    Ctrl-C here is how the user closes the page, so it only ends the wait: the results are
    already printed and the exit status stays the run's. The handler in place before (the
    command's "interrupted" one) is restored before the cluster shuts down, so a Ctrl-C
    during the shutdown is an interruption again (130, cut short after a few seconds).
    """
    import signal
    import threading

    from pccx_flow.dashboard.client import page_url

    closed = threading.Event()
    # the handler first, then the prompt: a Ctrl-C right after the prompt closes the page
    previous = signal.signal(signal.SIGINT, lambda _signum, _frame: closed.set())
    try:
        print(f"dashboard kept open at {page_url(client)} — Ctrl-C to close", flush=True)
        while not closed.wait(0.5):
            pass
    finally:
        signal.signal(signal.SIGINT, previous)

"""`pccx-flow run --backend device`: the device's options, cluster, step function and table.

The generation loop, `--check` and the printed table are `run`'s (`pccx_flow.cli.run`);
this module adds what the device backend needs (`pccx_flow.cluster`).
"""

from __future__ import annotations

import contextlib

from pccx_flow.errors import InputError
from pccx_flow.precision import DEFAULT_PRECISION


def check_device_options(args) -> None:
    """--backend device takes exactly one device source and no Dask-graph options."""
    device_only = {"--fake-device": args.fake_device, "--device": args.device,
                   "--device-tasks batch": args.device_tasks != "layer",
                   "--device-timeout": args.device_timeout is not None}  # fmt: skip
    if args.backend != "device":
        given = [option for option, value in device_only.items() if value]
        if given:
            raise InputError(f"{given[0]} is an option of --backend device; add it or drop it")
        return
    sources = [o for o, v in (("--fake-device", args.fake_device), ("--device", args.device),
                              ("--scheduler", args.scheduler)) if v]  # fmt: skip
    if len(sources) != 1:
        raise InputError(
            "--backend device needs one device: --fake-device, --device /dev/uioN, or "
            "--scheduler ADDR (a cluster with NPU workers)"
            + (f"; got {' and '.join(sources)}" if sources else "")
        )
    if args.fuse:
        raise InputError("--fuse is an option of the dask backend; drop it or use --backend dask")
    if args.precision != DEFAULT_PRECISION:
        raise InputError("the device computes float32 (BF16 in L2 as built); drop --precision")
    args.policy = args.policy or "critical-path"


@contextlib.contextmanager
def device_cluster(args):
    """The in-process cluster whose one worker owns the --fake-device or --device NPU."""
    from pccx_flow.cluster.local import device_cluster
    from pccx_flow.cluster.npu_worker import NpuWorker
    from pccx_flow.dashboard.client import page_url

    if args.fake_device:
        plugin = NpuWorker("fake")
    else:
        device = None if args.device == "uio" else args.device
        plugin = NpuWorker("uio", device, tuple(b for b in args.buffers.split(",") if b))
    with device_cluster(plugin) as (cluster, client, _):
        if args.dashboard:
            print(f"dashboard: {cluster.dashboard_link}", flush=True)
            print(f"pccx lanes page: {page_url(client)}", flush=True)
        yield client


def device_backend(args, ckpt, policy, client, announce) -> dict:
    """`generate`'s arguments for the device backend: the emulator's per-position graphs and
    schedules, and the step function that runs each program on the device worker."""
    from pccx_flow.board.emulator.backend import emulator_graphs
    from pccx_flow.cluster.device_steps import DeviceSteps, need_device_worker
    from pccx_flow.dashboard.client import DeviceAnnouncer
    from pccx_flow.hardware.profile import load_profile

    profile = load_profile(args.profile or "v002-spec")
    worker = need_device_worker(client, args.scheduler or "the in-process cluster")
    steps = DeviceSteps(
        client, str(ckpt.path), profile, worker, timeout=args.device_timeout,
        per=args.device_tasks, on_view=DeviceAnnouncer(client) if announce else None,
    )  # fmt: skip
    graphs = emulator_graphs(ckpt.config, args.semantics, policy, profile)
    return {"graph_for_position": graphs, "run_step": steps}


def print_device(steps) -> str:
    """The device's times per step; returns the run table's 'where'."""
    views = steps.views
    device = steps.reports and views and views[-1]["source"]
    print(f"device times per step ({device}):")
    print("  position  planned ms  batches  on device ms  host steps  host ms  step ms")
    for view, report in zip(views, steps.reports, strict=True):
        print(
            f"  {view['position']:8d}  {view['planned_makespan_s'] * 1e3:10.4f}"
            f"  {report['batches']:7d}  {view['device_s'] * 1e3:12.4f}"
            f"  {report['host_steps']:10d}  {view['host_s'] * 1e3:7.1f}"
            f"  {view['measured_makespan_s'] * 1e3:7.1f}"
        )
    print(f"  (planned: the schedule's makespan, a model estimate on profile {steps.profile.name};"
          " host ms: this host's wall time for the host steps; step ms: batches and host steps"
          " end to end)")  # fmt: skip
    return f"Dask tasks on the NPU worker {steps.worker}"

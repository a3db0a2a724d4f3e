"""`pccx-flow dispatch P1 P2 ...` on a cluster of boards: one Dask task per program.

See `pccx_flow.cluster.sweep` for how work is spread and what happens when a worker or a
device is lost; this module reads the programs, finds the NPU workers (of `--scheduler`, or
of `--fake-cluster N` local processes) and prints one line per program and per loss.
"""

from __future__ import annotations

import argparse
import contextlib
import sys

from pccx_flow.cli.common import check_scheduler_address
from pccx_flow.errors import InputError


def _check(args) -> None:
    if args.scheduler and args.fake_cluster:
        raise InputError("give --scheduler or --fake-cluster, not both")
    if not (args.scheduler or args.fake_cluster):
        raise InputError(
            "several programs run on a cluster: add --fake-cluster N (local fake NPUs) or "
            "--scheduler ADDR (a cluster with NPU workers)"
        )
    single = {"--device": args.device, "--fake-device": args.fake_device,
              "--check-golden": args.check_golden, "--fake-fault": args.fake_fault,
              "--fake-done-rule": args.fake_done_rule, "--token": args.token,
              "--tokens": args.tokens}  # fmt: skip
    given = [o for o, v in single.items() if v]
    if given:
        raise InputError(f"{given[0]} is an option of a single-program dispatch; drop it")
    check_scheduler_address(args.scheduler)


@contextlib.contextmanager
def _cluster(args):
    if args.fake_cluster:
        from pccx_flow.cluster.local import fake_device_cluster

        print(f"starting {args.fake_cluster} local workers with a fake NPU each (not boards)",
              file=sys.stderr, flush=True)  # fmt: skip
        with fake_device_cluster(args.fake_cluster) as (_, client):
            yield client
        return
    from pccx_flow.execute.executor import connect

    with connect(None, args.scheduler, 2.0) as client:
        yield client


def run_sweep(args: argparse.Namespace) -> int:
    from pccx_flow.board.emulator.check import check_program_matches, default_tokens
    from pccx_flow.board.isa.target import check_program_target
    from pccx_flow.board.program.files import check_words, read_program
    from pccx_flow.cluster.device_steps import device_workers, need_device_worker
    from pccx_flow.cluster.sweep import dispatch_sweep
    from pccx_flow.hardware.profile import load_profile
    from pccx_flow.weights.checkpoint import open_checkpoint

    _check(args)
    weights = open_checkpoint(args.weights)
    programs, profiles = [], {}
    for path in args.program:
        program = read_program(path)
        check_words(program)
        if args.fake_cluster:  # the fake workers' file buffers: refused now, not per worker
            from pccx_flow.board.device.cma import check_plan, file_addresses

            sizes = [("image", int(program.ddr["total_bytes"]))]
            check_plan(sizes, file_addresses(sizes))
        profile = load_profile(args.profile or program.meta["profile"])
        check_program_matches(program, weights, profile.name)
        check_program_target(program.meta.get("target", "spec"), profile.program.target,
                             f"a device with profile {profile.name}")  # fmt: skip
        profiles[profile.name] = profile
        tokens = default_tokens(program.meta["position"] + 1, weights.config.vocab)
        programs.append((str(path), program, tokens))
    if len(profiles) > 1:
        raise InputError(f"the programs are for profiles {', '.join(profiles)}; give one")
    (profile,) = profiles.values()
    with _cluster(args) as client:
        need_device_worker(client, args.scheduler or "the local cluster")
        workers = device_workers(client)
        print(f"{len(programs)} programs on {len(workers)} NPU workers", flush=True)

        def show(name: str, res: dict) -> None:
            logits = res["logits"]
            top = int(logits.argmax()) if logits is not None else None
            print(f"  {name}: argmax {top}; {res['report']['batches']} batches on "
                  f"{res['worker']} ({res['device']})", flush=True)  # fmt: skip

        out = dispatch_sweep(client, programs, str(weights.path), profile, workers=workers,
                             attempts=args.attempts, timeout=args.timeout,
                             config=weights.config, on_result=show)  # fmt: skip
    for line in out.losses:
        print(f"  lost: {line}")
    for name, why in out.errors.items():
        print(f"pccx-flow: {name} was not run: {why}", file=sys.stderr)
    ran = sum(1 for r in out.results.values() if r is not None)
    print(f"{ran} of {len(programs)} programs ran; {len(out.losses)} losses on the way")
    return 0 if ran == len(programs) else 2

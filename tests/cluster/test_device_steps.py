"""`run --backend device`: a decode step as Dask tasks on the worker that owns the NPU.

The oracle for the tokens is the reference generation loop (`pccx_flow.reference.generate`),
and `--check` compares every step with the reference decode; the device is the fake one.
"""

from __future__ import annotations

import re

import pytest

from pccx_flow.board.device.dispatch import Batch, plan
from pccx_flow.cli.main import main
from pccx_flow.cluster.device_steps import group_pieces
from pccx_flow.cluster.device_view import deviations, device_view, lane_shares
from pccx_flow.errors import InputError
from pccx_flow.reference.generate import generate as reference_generate
from tests.board.conftest import lowered_graph


def test_device_backend_generates_the_reference_tokens_and_passes_check(tiny_ckpt_dir, tiny_ckpt,
                                                                        capsys):  # fmt: skip
    code = main(["run", "--weights", str(tiny_ckpt_dir), "--prompt-ids", "2", "--steps", "1",
                 "--check", "--backend", "device", "--fake-device", "--no-progress"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0, out
    want = reference_generate(tiny_ckpt, [2], 1).tokens
    assert f"generated ids: {','.join(map(str, want))}" in out
    assert "check against the reference decode: OK" in out
    assert "ran 1 program (critical-path, v002-spec)" in out
    assert "modelled cycles (spec issue model; a model estimate on profile v002-spec" in out
    rows = re.findall(r"^\s+(\d)\s+([\d.]+)\s+(\d+)\s+([\d.]+)\s+(\d+)\s", out, re.M)
    assert [int(r[0]) for r in rows] == [0]
    assert all(float(r[3]) > 0 and int(r[2]) > 0 for r in rows)


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--backend", "device"], "--backend device needs one device"),
        (["--backend", "device", "--fake-device", "--device", "uio"], "got --fake-device and"),
        (["--fake-device"], "--fake-device is an option of --backend device"),
        (["--backend", "device", "--fake-device", "--precision", "float64"], "computes float32"),
        (["--backend", "device", "--fake-device", "--fuse"], "--fuse is an option of the dask"),
    ],
)
def test_device_options_are_checked_in_one_line(argv, message, capsys):
    code = main(["run", "--synthetic", "tiny", *argv])
    err = capsys.readouterr().err.strip()
    assert code != 0 and message in err and len(err.splitlines()) == 1, err


def test_pieces_are_grouped_in_program_order_by_layer_or_one_per_batch():
    graph, _, profile, program = lowered_graph(position=2)
    steps = plan(program, 8)
    per_batch = group_pieces(program, steps, graph, "batch")
    per_layer = group_pieces(program, steps, graph, "layer")
    for groups in (per_batch, per_layer):
        assert [i for g in groups for i in g] == list(range(len(steps)))
    work = [i for i, s in enumerate(steps) if isinstance(s, Batch) or s.get("kind") == "host"]
    assert len(per_batch) == len(work)
    n_layers = graph.graph["config_dict"]["n_layers"]
    assert n_layers <= len(per_layer) < len(per_batch) / 10
    with pytest.raises(InputError, match="unknown task grouping"):
        group_pieces(program, steps, graph, "node")


def test_the_device_view_lays_batches_and_host_steps_end_to_end():
    graph, schedule, profile, program = lowered_graph(position=1)
    steps = plan(program, 8)
    records = []
    for i, s in enumerate(steps):
        if isinstance(s, Batch):  # a board's record: kick to DONE only
            records.append({"step": i, "kind": "batch", "first": s.first, "last": s.last,
                            "device_s": 2e-6, "wall_s": 1e-3})  # fmt: skip
        elif s.get("kind") == "host":
            records.append({"step": i, "kind": "host", "node": s["node"], "wall_s": 1e-5})
    view = device_view(program, schedule, records, core_hz=profile.core_hz, step=1, source="x")
    n_batches = sum(1 for r in records if r["kind"] == "batch")
    n_host = len(records) - n_batches
    assert view["device_s"] == pytest.approx(n_batches * 2e-6)
    assert view["measured_makespan_s"] == pytest.approx(n_batches * 2e-6 + n_host * 1e-5)
    assert view["planned_makespan_s"] == pytest.approx(schedule.makespan / profile.core_hz)
    assert all(0 <= b["start"] <= b["stop"] <= view["measured_makespan_s"] + 1e-12
               for b in view["measured"])  # fmt: skip
    planned_lanes = {str(slot.lane) for slot in schedule.slots.values()}
    assert {b["lane"] for b in view["measured"]} <= planned_lanes
    shares = {r["lane"]: r for r in view["lanes"]}
    assert all(r["measured_s"] <= view["measured_makespan_s"] + 1e-12 for r in shares.values())
    d = view["deviations"]
    assert [abs(r["delta_s"]) for r in d] == sorted((abs(r["delta_s"]) for r in d), reverse=True)


def test_lane_busy_time_is_the_union_of_its_bars():
    bars = [{"lane": "a", "start": 0.0, "stop": 2.0, "node": "x"},
            {"lane": "a", "start": 1.0, "stop": 3.0, "node": "y"},
            {"lane": "b", "start": 5.0, "stop": 6.0, "node": "z"}]  # fmt: skip
    shares = lane_shares(bars, bars[:1], ["b", "a"])
    assert [(r["lane"], r["planned_s"], r["measured_s"]) for r in shares] == [
        ("b", 1.0, 0.0), ("a", 3.0, 2.0)]  # fmt: skip
    worst = deviations(bars, [{"lane": "a", "start": 0.0, "stop": 9.0, "node": "y"}])
    assert worst[0]["node"] == "y" and worst[0]["delta_s"] == pytest.approx(7.0)


@pytest.mark.parametrize("backend", ["emulator", "device"])
def test_program_backends_take_a_profile_without_a_policy(backend):
    """They lower on the profile with their default policy (the help's own example)."""
    import argparse

    from pccx_flow.cli import run as run_cli

    parser = argparse.ArgumentParser()
    run_cli.register(parser.add_subparsers())
    extra = ["--fake-device"] if backend == "device" else []
    args = parser.parse_args(["run", "--synthetic", "tiny", "--backend", backend,
                              "--profile", "v002-as-built", *extra])  # fmt: skip
    run_cli._check_options(args)
    assert args.policy == "critical-path"
    dask_args = parser.parse_args(["run", "--synthetic", "tiny", "--profile", "v002-as-built"])
    with pytest.raises(InputError, match="--profile only matters with --policy"):
        run_cli._check_options(dask_args)

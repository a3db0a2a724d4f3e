"""The read-ahead study's policy: KV reads held back while L2 lacks room, on a small step."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from pccx_flow.graph.build import build_decode_graph
from pccx_flow.hardware.profile import load_profile
from pccx_flow.schedule.problem import problem_from_graph
from pccx_flow.schedule.validate import validate_schedule

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("policy", ["critical-path", "heft"])
def test_reads_wait_for_room_and_the_schedule_is_valid(policy, monkeypatch):
    """On tiny with a small L2 the study's schedule keeps L2 (the validator checks it),
    and reads start later than with the whole L2."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    bench = importlib.import_module("bench_read_ahead")
    profile = load_profile("v002-spec")
    graph = build_decode_graph("tiny", position=40, tile_rows=16, profile=profile)
    problem = problem_from_graph(graph, profile, memory=True, read_ahead={"within_layer": False})
    reads = [n for n in problem.order if graph.nodes[n]["kernel"] == "kv_read"]
    # tiny's tiles are 256 B at most and no node demands more than 1 KiB: in an L2 of
    # 6 KiB with a 1 KiB reserve the rest of the step leaves a few tiles in flight (4 KiB
    # leaves it none: a memory deadlock), in 1.75 MiB every read goes when it is ready
    assert max(problem.demands[n]["l2"] for n in reads) <= 256
    assert max(d["l2"] for d in problem.demands.values()) <= 1024
    problem.capacities["l2"] = 6144
    reserve = 1024
    timeline = bench.space_allowing(problem, policy, reserve)
    schedule = timeline.to_schedule(policy, profile.name)
    validate_schedule(schedule, problem)
    assert set(schedule.slots) == set(problem.order)
    unlimited = bench.space_allowing(
        problem_from_graph(graph, profile, memory=True, read_ahead={"within_layer": False}),
        policy,
        reserve,
    )
    later = [n for n in reads if schedule.slots[n].start > unlimited.slots[n].start]
    assert later

"""The speed benchmarks' helpers: a revision's chains.py or timeline.py loaded beside
these, a revision exported, the step timed in a fresh interpreter, the instruction
count's checks."""

from __future__ import annotations

import importlib
import shutil
import subprocess
from pathlib import Path

import pytest

from pccx_flow.graph.build import build_decode_graph
from pccx_flow.hardware.profile import load_profile
from pccx_flow.schedule import chains
from pccx_flow.schedule.problem import problem_from_graph

ROOT = Path(__file__).resolve().parent.parent


def _in_git() -> bool:
    if shutil.which("git") is None:
        return False
    r = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True)
    return r.returncode == 0


@pytest.mark.skipif(not _in_git(), reason="needs a git checkout to load a revision's file")
def test_a_revisions_chains_load_beside_these_and_run_on_todays_problem(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    bench = importlib.import_module("bench_speed")
    then = bench.chains_of("HEAD")
    assert then is not chains and then.__name__ == "chains_then"
    profile = load_profile("v002-spec")
    graph = build_decode_graph("tiny", position=9, profile=profile)
    problem = problem_from_graph(graph, profile, memory=True)
    now = chains.chain_bounds(problem, capacity=True)
    old = then.chain_bounds(problem, capacity=True)
    assert now and old.keys() == now.keys() and all(v > 0 for v in old.values())
    unchanged = subprocess.run(
        ["git", "diff", "--quiet", "HEAD", "--", "pccx_flow/schedule/chains.py"], cwd=ROOT
    )
    if unchanged.returncode == 0:  # the same file: the same bounds
        assert old == now


@pytest.mark.skipif(not _in_git(), reason="needs a git checkout to export a revision")
def test_a_revisions_package_is_exported_whole_and_a_bad_revision_is_one_line(
    monkeypatch, tmp_path
):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    against = importlib.import_module("bench_speed_against")
    commit = against.export("HEAD", tmp_path)
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True,
                          text=True, check=True).stdout.strip()  # fmt: skip
    assert commit == head
    exported = tmp_path / "pccx_flow" / "schedule" / "timeline.py"
    shown = subprocess.run(["git", "show", f"{commit}:pccx_flow/schedule/timeline.py"],
                           cwd=ROOT, capture_output=True, check=True).stdout  # fmt: skip
    assert exported.read_bytes() == shown
    assert (tmp_path / "pccx_flow" / "hardware" / "profiles" / "v002-spec.toml").exists()
    with pytest.raises(SystemExit, match="'no-such-rev' is not a commit of this checkout"):
        against.export("no-such-rev", tmp_path / "x")


def test_the_step_as_schedule_runs_it_is_timed_in_a_fresh_interpreter(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    bench = importlib.import_module("bench_speed")
    seconds = bench.as_schedule_fresh("v002-spec", 0)
    assert 0 < seconds < 60
    with pytest.raises(SystemExit, match="unknown hardware profile 'no-such'"):
        bench.as_schedule_fresh("no-such", 0)


@pytest.mark.skipif(not _in_git(), reason="needs a git checkout to load a revision's file")
def test_a_revisions_timeline_loads_beside_this_one_and_places_the_same(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    bench = importlib.import_module("bench_speed")
    then = bench.module_of("HEAD", "pccx_flow/schedule/timeline.py", "timeline_then")
    assert then.Timeline is not bench.Timeline and then.__name__ == "timeline_then"
    profile = load_profile("v002-as-built")
    problem = problem_from_graph(
        build_decode_graph("tiny", position=9, profile=profile), profile, memory=True
    )
    unchanged = subprocess.run(
        ["git", "diff", "--quiet", "HEAD", "--", "pccx_flow/schedule/timeline.py"], cwd=ROOT
    )
    for policy in ("heft", "critical-path"):
        now = bench._placed_on(bench.Timeline, policy, problem)
        old = bench._placed_on(then.Timeline, policy, problem)
        assert len(now.slots) == len(old.slots) == len(problem.order)
        if unchanged.returncode == 0:  # the same file: the same schedule
            assert (now.slots, now.memory_wait) == (old.slots, old.memory_wait)


def test_a_schedule_digest_sees_every_lane_start_and_finish(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    bench = importlib.import_module("bench_instructions")
    from pccx_flow.schedule.model import Slot

    slots = {"a": Slot("a", "x0", 0, 5), "b": Slot("b", "x1", 5, 9)}
    digest = bench.schedule_digest(slots)
    assert digest == bench.schedule_digest(dict(reversed(slots.items())))  # order: no
    assert digest != bench.schedule_digest({**slots, "b": Slot("b", "x1", 6, 10)})
    assert digest != bench.schedule_digest({**slots, "b": Slot("b", "x0", 5, 9)})
    assert digest != bench.schedule_digest({**slots, "b": Slot("b", "x1", 5, 10)})


@pytest.mark.skipif(shutil.which("callgrind_control") is None, reason="needs valgrind")
def test_counting_refuses_to_switch_outside_callgrind(monkeypatch):
    """callgrind_control exits 0 when it finds no callgrind task; the answer is read."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    bench = importlib.import_module("bench_instructions")
    with pytest.raises(SystemExit, match="could not switch counting on"):
        bench.switch_counting("on")

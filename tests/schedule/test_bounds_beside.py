"""The step's bounds from a forked child while the policy runs: the same numbers as
in-process, whatever happens to the child."""

from __future__ import annotations

import json
import multiprocessing
import os
import time

import pytest

from pccx_flow.graph.build import build_decode_graph
from pccx_flow.hardware.profile import load_profile
from pccx_flow.model.config import get_config
from pccx_flow.schedule import bounds_beside as beside
from pccx_flow.schedule.metrics import schedule_metrics, step_bounds
from pccx_flow.schedule.problem import problem_from_graph
from pccx_flow.schedule.registry import run_policy


@pytest.fixture(scope="module")
def tiny_step():
    profile = load_profile("v002-spec")
    graph = build_decode_graph(get_config("tiny"), position=5, profile=profile)
    return problem_from_graph(graph, profile, memory=True), profile


# what a child may do instead of sending the bounds
CHILD_FAILURES = pytest.mark.parametrize(
    "child_does",
    [lambda: os._exit(3), lambda: (_ for _ in ()).throw(ValueError("broken"))],
    ids=["child exits", "child raises"],
)


@pytest.fixture
def two_cores(monkeypatch):
    """The fork is taken on any test machine, one core or many."""
    monkeypatch.setattr(beside, "usable_cores", lambda: 2)


def _in_parent(monkeypatch, child_does=None) -> list[int]:
    """Record every call of the module's `step_chain_bounds` (the child's share) made in
    this process; in a child, do `child_does` instead (a forked child has its own copy
    of the list)."""
    parent, calls, real = os.getpid(), [], beside.step_chain_bounds

    def recorded(problem):
        if os.getpid() != parent and child_does is not None:
            child_does()
        if os.getpid() == parent:
            calls.append(parent)
        return real(problem)

    monkeypatch.setattr(beside, "step_chain_bounds", recorded)
    return calls


def test_the_child_sends_exactly_the_bounds_computed_in_process(tiny_step, two_cores, monkeypatch):
    """Asked once the child is done, both parts are the child's, and equal to the bounds
    computed in-process (its JSON keeps every name, number and order)."""
    problem, profile = tiny_step
    expected = step_bounds(problem, profile)
    calls = _in_parent(monkeypatch)
    others, parent, real = [], os.getpid(), beside.step_other_bounds

    def other_bounds(*args):
        if os.getpid() == parent:
            others.append(args)
        return real(*args)

    monkeypatch.setattr(beside, "step_other_bounds", other_bounds)
    with beside.bounds_beside(problem, profile, min_nodes=0) as bounds:
        for child in multiprocessing.active_children():
            child.join(30.0)  # it exits once both parts are sent (they fit in the pipe)
        got = bounds()
        assert bounds() is got  # asked twice, computed once
    assert calls == [] and others == []  # the parent computed no part: both came
    assert json.dumps(got) == json.dumps(expected)
    assert got == expected


def test_bounds_asked_after_the_body_are_computed_here(tiny_step, two_cores):
    """The child is stopped when the body ends: bounds first asked after it are the
    parent's own, the same numbers."""
    problem, profile = tiny_step
    with beside.bounds_beside(problem, profile, min_nodes=0) as bounds:
        pass
    assert bounds() == step_bounds(problem, profile)


@CHILD_FAILURES
def test_a_child_that_fails_leaves_the_bounds_to_the_parent(
    tiny_step, two_cores, monkeypatch, child_does
):
    problem, profile = tiny_step
    expected = step_bounds(problem, profile)
    calls = _in_parent(monkeypatch, child_does)
    with beside.bounds_beside(problem, profile, min_nodes=0) as bounds:
        assert bounds() == expected
    assert len(calls) == 1


def test_the_child_is_stopped_when_the_body_fails(tiny_step, two_cores, monkeypatch):
    problem, profile = tiny_step
    started = []
    real_start = beside.start_child

    def start(job):
        reader, child = real_start(lambda progress: time.sleep(60))
        started.append(child)
        return reader, child

    monkeypatch.setattr(beside, "start_child", start)
    with pytest.raises(KeyboardInterrupt), beside.bounds_beside(problem, profile, min_nodes=0):
        raise KeyboardInterrupt
    (child,) = started
    assert not child.is_alive() and child.exitcode is not None


@pytest.mark.parametrize("cores, min_nodes", [(1, 0), (2, 10**9)], ids=["one core", "small"])
def test_no_fork_for_one_core_or_a_small_problem(tiny_step, monkeypatch, cores, min_nodes):
    problem, profile = tiny_step
    monkeypatch.setattr(beside, "usable_cores", lambda: cores)

    def must_not_start(job):
        raise AssertionError("forked")

    monkeypatch.setattr(beside, "start_child", must_not_start)
    calls = _in_parent(monkeypatch)
    with beside.bounds_beside(problem, profile, min_nodes=min_nodes) as bounds:
        assert bounds() == step_bounds(problem, profile)
    assert len(calls) == 1


def _counted_build(graph, profile, built: list[int], marks=None):
    """A problem builder that records the process of every build in `built` (a forked
    child has its own copy of the list) and, when `marks` is a directory, a file there
    for a build in another process."""
    parent = os.getpid()

    def build():
        built.append(os.getpid())
        if marks is not None and os.getpid() != parent:
            (marks / f"built-in-{os.getpid()}").touch()
        return problem_from_graph(graph, profile, memory=True)

    return build


@pytest.fixture(scope="module")
def tiny_graph():
    profile = load_profile("v002-spec")
    return build_decode_graph(get_config("tiny"), position=5, profile=profile), profile


def test_the_child_builds_its_own_problem_and_sends_its_bounds(
    tiny_graph, two_cores, monkeypatch, tmp_path
):
    graph, profile = tiny_graph
    expected = step_bounds(problem_from_graph(graph, profile, memory=True), profile)
    calls, built = _in_parent(monkeypatch), []
    build = _counted_build(graph, profile, built, marks=tmp_path)
    with beside.problem_and_bounds_beside(build, profile, nodes=len(graph), min_nodes=0) as (
        problem,
        bounds,
    ):
        assert len(problem) == len(graph)
        assert bounds() == expected
    assert calls == [] and built == [os.getpid()]  # one build here; the chains came over
    assert len(list(tmp_path.glob("built-in-*"))) == 1  # and one in the child


def test_the_step_s_child_builds_the_hardware_problem_and_sends_the_problem_s_bounds(
    tiny_graph, two_cores, monkeypatch
):
    graph, profile = tiny_graph
    expected = step_bounds(problem_from_graph(graph, profile, memory=True), profile)
    calls, parent = _in_parent(monkeypatch), os.getpid()
    read, real_read = multiprocessing.Queue(), beside.problem_from_graph

    def recorded(*args, **kwargs):
        if os.getpid() != parent:
            read.put(kwargs.get("hardware", False))
        return real_read(*args, **kwargs)

    monkeypatch.setattr(beside, "problem_from_graph", recorded)
    with beside.step_problem_and_bounds(graph, profile, min_nodes=0) as (problem, bounds):
        assert problem.order_edges and problem.admit  # here: as `schedule` makes it
        assert bounds() == expected
    assert calls == []  # the chains came from the child, which built the hardware problem
    assert read.get(timeout=10) is True and read.empty()


@pytest.mark.parametrize("cores", [1, 2], ids=["no child", "a child that fails"])
def test_without_the_child_the_step_s_bounds_are_the_hardware_problem_s_here(
    tiny_graph, monkeypatch, cores
):
    """The bounds `schedule` prints do not depend on whether the fork worked: what the
    parent computes itself, it computes on the hardware problem the child would have."""
    graph, profile = tiny_graph
    monkeypatch.setattr(beside, "usable_cores", lambda: cores)
    _in_parent(monkeypatch, lambda: os._exit(3))
    parent, built, real_read = os.getpid(), [], beside.problem_from_graph

    def recorded(*args, **kwargs):
        if os.getpid() == parent:
            built.append(kwargs.get("hardware", False))
        return real_read(*args, **kwargs)

    monkeypatch.setattr(beside, "problem_from_graph", recorded)
    hardware = problem_from_graph(graph, profile, memory=True, hardware=True)
    with beside.step_problem_and_bounds(graph, profile, min_nodes=0) as (problem, bounds):
        assert built == [False] and problem.order_edges
        assert bounds() == step_bounds(hardware, profile)
        assert bounds() == step_bounds(hardware, profile)  # asked again: built once
    assert built == [False, True]


@CHILD_FAILURES
def test_a_failed_child_leaves_the_bounds_of_the_parents_own_problem(
    tiny_graph, two_cores, monkeypatch, child_does
):
    graph, profile = tiny_graph
    expected = step_bounds(problem_from_graph(graph, profile, memory=True), profile)
    calls, built = _in_parent(monkeypatch, child_does), []
    build = _counted_build(graph, profile, built)
    with beside.problem_and_bounds_beside(build, profile, nodes=len(graph), min_nodes=0) as (
        _,
        bounds,
    ):
        assert bounds() == expected
    assert len(calls) == 1 and built == [os.getpid()]  # computed here, not built again


def test_a_failed_build_stops_the_child_and_is_raised(tiny_graph, two_cores, monkeypatch):
    graph, profile = tiny_graph
    started, real_start = [], beside.start_child

    def start(job):
        reader, child = real_start(lambda progress: time.sleep(60))
        started.append(child)
        return reader, child

    def build():
        raise ValueError("no such lane")

    monkeypatch.setattr(beside, "start_child", start)
    with (
        pytest.raises(ValueError, match="no such lane"),
        beside.problem_and_bounds_beside(build, profile, nodes=len(graph), min_nodes=0),
    ):
        raise AssertionError("the body ran without a problem")
    (child,) = started
    assert not child.is_alive() and child.exitcode is not None


def test_no_fork_before_a_small_build(tiny_graph, monkeypatch):
    graph, profile = tiny_graph
    monkeypatch.setattr(beside, "usable_cores", lambda: 2)

    def must_not_start(job):
        raise AssertionError("forked")

    monkeypatch.setattr(beside, "start_child", must_not_start)
    built = []
    build = _counted_build(graph, profile, built)
    with beside.problem_and_bounds_beside(build, profile, nodes=len(graph)) as (problem, bounds):
        assert bounds() == step_bounds(problem, profile)
    assert built == [os.getpid()]


def test_metrics_take_the_bounds_given_instead_of_computing_them(tiny_step, monkeypatch):
    problem, profile = tiny_step
    schedule = run_policy(problem, profile, "critical-path")
    given = step_bounds(problem, profile)
    expected = schedule_metrics(schedule, problem, profile)

    def refuse(*_args, **_kwargs):
        raise AssertionError("bounds computed again")

    monkeypatch.setattr("pccx_flow.schedule.metrics.step_bounds", refuse)
    assert schedule_metrics(schedule, problem, profile, bounds=given) == expected


def test_metrics_ask_a_bounds_function_last(tiny_step, monkeypatch):
    """Given a function, the metrics call it once, after every metric of the schedule
    (the PLE slack is the last), so bounds computed beside have that time to arrive."""
    from pccx_flow.schedule import metrics

    problem, profile = tiny_step
    schedule = run_policy(problem, profile, "critical-path")
    expected = schedule_metrics(schedule, problem, profile)
    calls = []
    ple_slack = metrics.ple_slack

    def recorded_ple_slack(*args):
        calls.append("ple_slack")
        return ple_slack(*args)

    def bounds():
        calls.append("bounds")
        return step_bounds(problem, profile)

    monkeypatch.setattr(metrics, "ple_slack", recorded_ple_slack)
    assert schedule_metrics(schedule, problem, profile, bounds=bounds) == expected
    assert calls == ["ple_slack", "bounds"]


class _FakeParts:
    """A child's parts as `_assembled` reads them: `sent` came; the rest never will."""

    def __init__(self, calls: list, sent: list) -> None:
        self.calls, self.sent = calls, sent

    def get(self, k, *, wait):
        self.calls.append(("get", k, wait))
        return self.sent[k] if k < len(self.sent) else None


@pytest.mark.parametrize("sent", [0, 1, 2], ids=["none came", "chains came", "both came"])
def test_the_parent_computes_the_parts_that_did_not_come_the_others_first(
    tiny_step, monkeypatch, sent
):
    """Before the chain bounds came, the other bounds are computed here and then the
    chain bounds waited for (the parent's share runs while the child's chains are on
    their way); once they came, the child's others are waited for; a part that came is
    not computed again, one that never comes is; the bounds are the same whichever
    process made each part."""
    from pccx_flow.schedule import metrics

    problem, profile = tiny_step
    expected = step_bounds(problem, profile)
    parts = [metrics.step_chain_bounds(problem), metrics.step_other_bounds(problem, profile)]
    calls = []
    for name in ("step_chain_bounds", "step_other_bounds"):
        real = getattr(beside, name)
        monkeypatch.setattr(
            beside, name, lambda *a, real=real, name=name: calls.append(name) or real(*a)
        )
    got = beside._assembled(problem, profile, _FakeParts(calls, parts[:sent]))
    assert got == expected
    expected_calls = {
        0: [("get", 0, False), "step_other_bounds", ("get", 0, True), "step_chain_bounds"],
        1: [("get", 0, False), ("get", 1, True), "step_other_bounds"],
        2: [("get", 0, False), ("get", 1, True)],
    }
    assert calls == expected_calls[sent]


def test_parts_are_read_as_they_come():
    """A child that sent its first part and is still busy on the second: the first is
    read, the second is not waited for unless asked to be."""
    from pccx_flow.schedule.sandbox import start_child

    def job(_progress):
        yield {"first": 1}
        time.sleep(60)
        yield {"second": 2}

    reader, child = start_child(job)
    try:
        parts = beside._Parts(reader)
        assert parts.get(0, wait=True) == {"first": 1}
        assert parts.get(1, wait=False) is None
        child.kill()
        assert parts.get(1, wait=True) is None and parts.broken  # gone: nothing more comes
    finally:
        reader.close()
        child.join(5.0)

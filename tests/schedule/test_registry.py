"""Finding policies by name, module:Class and entry point; broken plugins fail cleanly."""

from __future__ import annotations

import sys
import textwrap

import networkx as nx
import pytest

from pccx_flow.errors import PolicyError
from pccx_flow.schedule.model import Lane
from pccx_flow.schedule.problem import SchedulingProblem
from pccx_flow.schedule.registry import (
    BUILTIN_POLICIES,
    ENTRY_POINT_GROUP,
    list_policies,
    make_policy,
    run_policy,
)
from pccx_flow.schedule.validate import validate_schedule

PLUGINS = '''
"""Test plugins: one good, several broken in different ways."""


class Sequential:
    name = "sequential"
    description = "everything on the first capable lane, program order"

    def schedule(self, problem, timeline):
        for node in problem.order:
            timeline.place(node, problem.lanes_for(node)[0])


class SelfTimed:
    description = "returns its own {node: (lane, start)}: one after another on lane p1"

    def schedule(self, problem, timeline):
        t, out = 0, {}
        for node in problem.order:
            out[node] = ("p1", t)
            t += problem.cost(node, "p1")
        return out


class AllAtZero:
    def schedule(self, problem, timeline):
        return {n: (problem.lanes_for(n)[i % 2], 0) for i, n in enumerate(problem.order)}


class Raises:
    def schedule(self, problem, timeline):
        raise RuntimeError("boom")


class Exits:
    def schedule(self, problem, timeline):
        raise SystemExit(0)


class RaisesLines:
    def schedule(self, problem, timeline):
        raise ValueError("first line\\n  second line\\n" + "x" * 500)


class Overlapping:
    def schedule(self, problem, timeline):
        return {node: ("p1", 0) for node in problem.order}


class HalfCycle:
    def schedule(self, problem, timeline):
        return {node: ("p1", 0.5) for node in problem.order}


class NegativeStart:
    def schedule(self, problem, timeline):
        return {node: ("p1", -1) for node in problem.order}


class ReturnsNumber:
    def schedule(self, problem, timeline):
        return 42


class LeavesNodes:
    def schedule(self, problem, timeline):
        timeline.place(problem.order[0], problem.lanes_for(problem.order[0])[0])


class NoSchedule:
    pass


class WantsArgs:
    def __init__(self, required):
        pass

    def schedule(self, problem, timeline):
        pass


def not_a_class(problem, timeline):
    pass
'''


@pytest.fixture
def plugin_module(tmp_path, monkeypatch):
    (tmp_path / "pccx_test_plugins.py").write_text(PLUGINS)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "pccx_test_plugins"
    sys.modules.pop("pccx_test_plugins", None)


def test_builtins_are_listed_with_descriptions():
    rows = {name: (origin, desc) for name, origin, desc in list_policies()}
    for name in BUILTIN_POLICIES:
        assert rows[name][0] == "built-in"
        assert rows[name][1]
    assert {"program-order", "random", "critical-path", "heft", "cpop", "etf", "dls",
            "min-min", "lookahead"} <= set(BUILTIN_POLICIES)  # fmt: skip


def test_every_builtin_description_fits_its_list_line():
    """`schedule --list` cuts a description longer than its 80-column line (a plugin's may
    be any length); a built-in's, the default's with its mark, must fit whole (the
    default's once read "highest level firs...")."""
    from pccx_flow.schedule.registry import DEFAULT_POLICY
    from pccx_flow.schedule.report import format_policy_list

    builtin = [row for row in list_policies() if row[1] == "built-in"]
    lines = format_policy_list(builtin, DEFAULT_POLICY).splitlines()
    for (name, _, desc), line in zip(builtin, lines, strict=True):
        assert line.startswith(name) and desc in line, line
    assert any(x.startswith(DEFAULT_POLICY) and x.endswith("(default)") for x in lines)


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(PolicyError, match="unknown policy 'fastest'.*critical-path.*heft"):
        make_policy("fastest")


def test_module_class_plugin_runs_and_is_validated(plugin_module, heft_problem):
    schedule = run_policy(heft_problem, policy=f"{plugin_module}:Sequential")
    validate_schedule(schedule, heft_problem)
    assert {s.lane for s in schedule.slots.values()} == {"p1"}
    assert schedule.makespan == sum(c["p1"] for c in heft_problem.costs.values())
    assert schedule.policy == f"{plugin_module}:Sequential"


def test_plugin_may_return_its_own_times(plugin_module, heft_problem):
    schedule = run_policy(heft_problem, policy=f"{plugin_module}:SelfTimed")
    validate_schedule(schedule, heft_problem)
    assert schedule.makespan == sum(c["p1"] for c in heft_problem.costs.values())


@pytest.mark.parametrize("ports", [1, 2])
def test_self_timed_plugin_gets_pool_instances_and_is_checked(plugin_module, ports):
    g = nx.DiGraph()
    g.add_nodes_from(["a", "b"])
    lanes = [Lane("g0", "gemv"), Lane("g1", "gemv")]
    costs = {n: {"g0": 4, "g1": 4} for n in "ab"}
    problem = SchedulingProblem(
        g, lanes, costs, resources={"a": ("port",), "b": ("port",)}, pools={"port": ports}
    )
    if ports == 2:
        schedule = run_policy(problem, policy=f"{plugin_module}:AllAtZero")
        assert sorted(s.resources for s in schedule.slots.values()) == [("port0",), ("port1",)]
    else:
        with pytest.raises(PolicyError, match="pool instance 'port0' runs 'a' .* and 'b'"):
            run_policy(problem, policy=f"{plugin_module}:AllAtZero")


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        ("Raises", "raised RuntimeError: boom"),
        ("Exits", "raised SystemExit"),
        ("Overlapping", "produced an invalid schedule: .*starts at 0 before its input"),
        ("ReturnsNumber", "returned a int; schedule\\(\\) must place nodes"),
        ("HalfCycle", "returned start 0.5 for node .*whole, non-negative number of cycles"),
        ("NegativeStart", "returned start -1 for node .*whole, non-negative number of cycles"),
        ("LeavesNodes", "left 9 of 10 nodes unscheduled"),
        ("NoSchedule", "has no schedule\\(problem, timeline\\) method"),
        ("WantsArgs", "could not be created: TypeError"),
        ("not_a_class", "is a function, not a class"),
        ("Missing", "has no attribute 'Missing'"),
    ],
)
def test_broken_plugins_fail_with_policy_error(plugin_module, heft_problem, cls, message):
    with pytest.raises(PolicyError, match=f"{plugin_module}:{cls}.*{message}|{message}"):
        run_policy(heft_problem, policy=f"{plugin_module}:{cls}")


def test_unimportable_module():
    with pytest.raises(PolicyError, match="cannot import policy module 'no_such_mod_xyz'"):
        make_policy("no_such_mod_xyz:Thing")


@pytest.mark.parametrize("cls", ["Overlapping", "RaisesLines"])
def test_policy_error_is_one_line(plugin_module, heft_problem, cls):
    with pytest.raises(PolicyError) as info:
        run_policy(heft_problem, policy=f"{plugin_module}:{cls}")
    assert "\n" not in str(info.value) and len(str(info.value)) < 400


@pytest.fixture
def entry_point_plugin(tmp_path, monkeypatch, plugin_module):
    """A real distribution on sys.path declaring entry points (what pip install writes)."""
    dist = tmp_path / "pccx_test_plugins-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: pccx-test-plugins\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        textwrap.dedent(
            f"""\
            [{ENTRY_POINT_GROUP}]
            sequential-test = {plugin_module}:Sequential
            raising-test = {plugin_module}:Raises
            broken-import-test = pccx_no_such_module:Thing
            """
        )
    )
    return "sequential-test"


def test_entry_point_plugin_is_found_listed_and_run(entry_point_plugin, heft_problem):
    rows = {name: (origin, desc) for name, origin, desc in list_policies()}
    assert rows["sequential-test"] == (
        "plugin pccx_test_plugins:Sequential",
        "everything on the first capable lane, program order",
    )
    assert rows["broken-import-test"][1].startswith("(cannot be loaded: ModuleNotFoundError")
    schedule = run_policy(heft_problem, policy="sequential-test")
    validate_schedule(schedule, heft_problem)
    assert schedule.policy == "sequential-test"


def test_broken_entry_points_fail_with_policy_error(entry_point_plugin, heft_problem):
    with pytest.raises(PolicyError, match="policy raising-test raised RuntimeError: boom"):
        run_policy(heft_problem, policy="raising-test")
    with pytest.raises(PolicyError, match="plugin 'broken-import-test' .* failed to load"):
        make_policy("broken-import-test")


def test_unknown_name_also_lists_plugins(entry_point_plugin):
    with pytest.raises(PolicyError, match="sequential-test"):
        make_policy("nope")


def test_policy_instance_can_be_passed_directly(heft_problem):
    schedule = run_policy(heft_problem, policy=BUILTIN_POLICIES["heft"]())
    assert schedule.makespan == 80


def test_options_go_to_the_constructor(heft_problem):
    a = run_policy(heft_problem, policy="random", seed=3)
    assert a.slots == run_policy(heft_problem, policy="random", seed=3).slots
    with pytest.raises(PolicyError, match="policy 'heft' takes no option 'depth'; it takes: seed"):
        run_policy(heft_problem, policy="heft", depth=2)


def test_module_class_policies_resolve_from_the_current_folder(tmp_path, monkeypatch, capsys):
    """`--policy mypkg.sched:MyPolicy` finds ./mypkg as `python -m` would, no PYTHONPATH."""
    import sys

    from pccx_flow.cli.main import main

    pkg = tmp_path / "mypkg_here"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "sched.py").write_text(
        "from pccx_flow.schedule.policies.program_order import ProgramOrder\n"
        "class MyPolicy(ProgramOrder):\n"
        "    name = 'mine'\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    code = main(["schedule", "--preset", "tiny", "--policy", "mypkg_here.sched:MyPolicy"])
    out = capsys.readouterr().out
    assert code == 0 and "policy mypkg_here.sched:MyPolicy" in out

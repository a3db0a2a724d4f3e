"""Plugins run in a child process: exits, hangs and BaseExceptions end in one PolicyError line."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from pccx_flow.errors import PolicyError
from pccx_flow.schedule.registry import (
    ENTRY_POINT_GROUP,
    PluginPolicy,
    list_policies,
    prepare_policy,
    run_policy,
)
from pccx_flow.schedule.sandbox import MIN_TIMEOUT, default_timeout, run_in_child
from pccx_flow.schedule.validate import validate_schedule

HOSTILE = '''
"""Plugins that try to take the process down."""
import os
import sys
import time


class Exit0:
    def schedule(self, problem, timeline):
        os._exit(0)


class SysExit:
    def schedule(self, problem, timeline):
        sys.exit(7)


class Sleeps:
    def schedule(self, problem, timeline):
        time.sleep(600)


class Spins:
    def schedule(self, problem, timeline):
        while True:
            pass


class Custom(BaseException):
    pass


class RaisesBase:
    def schedule(self, problem, timeline):
        raise Custom("not an Exception")


class RaisesGeneratorExit:
    def schedule(self, problem, timeline):
        raise GeneratorExit


class SlowInit:
    def __init__(self):
        time.sleep(600)

    def schedule(self, problem, timeline):
        pass


class Good:
    description = "everything on the first capable lane"

    def schedule(self, problem, timeline):
        for node in problem.order:
            timeline.place(node, problem.lanes_for(node)[0])
'''


@pytest.fixture
def hostile(tmp_path, monkeypatch):
    (tmp_path / "pccx_hostile_plugins.py").write_text(HOSTILE)
    (tmp_path / "pccx_exits_at_import.py").write_text("import sys\nsys.exit(7)\n")
    (tmp_path / "pccx_dies_at_import.py").write_text("import os\nos._exit(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "pccx_hostile_plugins"
    for name in ("pccx_hostile_plugins", "pccx_exits_at_import", "pccx_dies_at_import"):
        sys.modules.pop(name, None)


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        ("Exit0", "ended its process \\(exit code 0\\) without a result"),
        ("SysExit", "raised SystemExit: 7"),
        ("RaisesBase", "raised Custom: not an Exception"),
        ("RaisesGeneratorExit", "raised GeneratorExit$"),
        ("Sleeps", "did not finish within 1 s and was stopped"),
        ("Spins", "did not finish within 1 s and was stopped"),
    ],
)
def test_hostile_plugin_ends_in_one_policy_error(hostile, heft_problem, cls, message):
    t0 = time.monotonic()
    with pytest.raises(PolicyError, match=f"^policy {hostile}:{cls} .*{message}") as info:
        run_policy(heft_problem, policy=f"{hostile}:{cls}", policy_timeout=1)
    assert "\n" not in str(info.value)
    assert time.monotonic() - t0 < 10  # load (in a child) + 1 s limit + stopping the child


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("pccx_exits_at_import:P", "raised SystemExit: 7"),
        ("pccx_dies_at_import:P", "ended its process \\(exit code 0\\) without a result"),
        ("pccx_hostile_plugins:SlowInit", "did not finish within 1 s"),
    ],
)
def test_plugin_that_breaks_while_loading_fails_before_any_work(hostile, spec, message):
    with pytest.raises(PolicyError, match=message):
        prepare_policy(spec, timeout=1)


def test_good_plugin_gives_a_validated_schedule_from_the_child(hostile, heft_problem):
    policy = prepare_policy(f"{hostile}:Good")
    assert isinstance(policy, PluginPolicy)
    assert policy.description == "everything on the first capable lane"
    assert hostile not in sys.modules  # only the children imported it
    placed = []
    schedule = run_policy(heft_problem, policy=policy, policy_timeout=30)
    validate_schedule(schedule, heft_problem)
    assert {s.lane for s in schedule.slots.values()} == {"p1"}
    assert schedule.makespan == sum(c["p1"] for c in heft_problem.costs.values())
    from pccx_flow.schedule.registry import run_on_problem

    run_on_problem(policy, heft_problem, label="good", profile="p", on_place=placed.append)
    assert len(placed) == len(heft_problem)


def test_child_reply_is_json_not_pickle():
    # Whatever the child returns crosses as JSON text: an object that is not plain data fails.
    with pytest.raises(PolicyError, match="raised TypeError: Object of type object"):
        run_in_child(lambda _progress: object(), label="x", timeout=10)
    assert run_in_child(lambda _progress: {"a": [1, "b"]}, label="x", timeout=10) == {"a": [1, "b"]}


def test_default_timeout_scales_with_graph_size():
    assert default_timeout(10) == MIN_TIMEOUT
    assert default_timeout(100_000) > MIN_TIMEOUT
    for bad in (0, -1, float("nan"), float("inf")):
        with pytest.raises(PolicyError, match="policy time limit"):
            prepare_policy("heft", timeout=bad)


def test_list_shows_plugins_broken_at_import_and_keeps_the_others(tmp_path, monkeypatch, hostile):
    dist = tmp_path / "pccx_hostile-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: pccx-hostile\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        textwrap.dedent(
            f"""\
            [{ENTRY_POINT_GROUP}]
            good-test = {hostile}:Good
            exits-at-import-test = pccx_exits_at_import:P
            dies-at-import-test = pccx_dies_at_import:P
            """
        )
    )
    rows = {name: desc for name, _, desc in list_policies()}
    assert rows["good-test"] == "everything on the first capable lane"
    assert rows["exits-at-import-test"] == "(cannot be loaded: SystemExit: 7)"
    assert rows["dies-at-import-test"].startswith("(cannot be loaded: policy dies-at-import-test")
    assert "heft" in rows


def test_cli_plugin_exit_is_one_line_and_non_zero(hostile, tmp_path):
    # The whole command, as a user runs it: exit 2, one line naming the plugin, nothing else.
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), *sys.path])}
    argv = [sys.executable, "-m", "pccx_flow", "schedule", "--preset", "tiny", "--layers", "0:1"]
    for cls in ("Exit0", "Sleeps"):
        out = subprocess.run(
            [*argv, "--policy", f"{hostile}:{cls}", "--policy-timeout", "1"],
            capture_output=True,
            text=True,
            env=env,
            cwd=Path(__file__).parent,
            timeout=60,
        )
        assert out.returncode == 2
        assert out.stderr.count("\n") == 1
        assert out.stderr.startswith(f"pccx-flow: error: policy {hostile}:{cls} ")

"""The modules Cython compiles (`pccx_flow.compiled`) schedule exactly as their Python source,
and a compiled copy is imported only while it is current."""

from __future__ import annotations

import ast
import importlib.machinery
import json
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import pytest

from pccx_flow import compiled

ROOT = Path(__file__).resolve().parent.parent

# Every built-in policy on problems that take each path of the timeline: the `tiny` decode
# step within L2 on both profiles (capacities, holds, admitted KV reads, pools), the same
# without the L2 limit, and random DAGs of every family with comm and pools (comm makes
# the timeline take its per-lane data-ready path). Prints which modules ran compiled, each
# `tiny` graph (nodes and edges with their attributes), one line per schedule (its slots
# and memory waits), the metrics of `heft`'s and `critical-path`'s on `tiny`, and a digest
# of the same for an E4B step.
SCRIPT = r"""
import hashlib, json, sys
from pccx_flow.compare.families import FAMILIES
from pccx_flow.compare.instances import build_problem, random_instance
from pccx_flow.compiled import running_compiled
from pccx_flow.graph.build import build_decode_graph
from pccx_flow.hardware.profile import load_profile
from pccx_flow.schedule.capacity import capacity_groups
from pccx_flow.schedule.metrics import schedule_metrics
from pccx_flow.schedule.problem import problem_from_graph
from pccx_flow.schedule.registry import BUILTIN_POLICIES, make_policy, run_on_problem

print(json.dumps({"compiled": running_compiled()}))
problems = []
for name in ("v002-spec", "v002-as-built"):
    profile = load_profile(name)
    for position in (0, 40):
        graph = build_decode_graph("tiny", position=position, profile=profile)
        print(json.dumps(["graph", name, position, sorted(map(repr, graph.nodes(data=True))),
                          sorted(map(repr, graph.edges(data=True)))]))
        for memory in (True, False):
            problems.append((f"tiny/{name}/{position}/{memory}",
                             problem_from_graph(graph, profile, memory=memory), profile))
for family in FAMILIES:
    for seed in (1, 2):
        desc = random_instance(family, 40, seed)
        problems.append((desc["key"], *build_problem(desc)))
for key, problem, profile in problems:
    for policy in BUILTIN_POLICIES:
        s = run_on_problem(make_policy(policy, seed=3), problem, label=policy, profile="x")
        slots = sorted((repr(n), *x[1:]) for n, x in s.slots.items())  # lane .. resources
        waits = sorted((repr(n), w) for n, w in s.memory_wait.items())
        print(json.dumps([key, policy, slots, waits]))
        if profile is not None and policy in ("heft", "critical-path"):
            print(json.dumps([key, policy, repr(schedule_metrics(s, problem, profile))]))

# E4B's first 10 layers at 1023 on v002-as-built, as digests: ~4k nodes and 80 KV reads,
# a scale the tiny cases do not reach
profile = load_profile("v002-as-built")
graph = build_decode_graph("e4b", position=1023, profile=profile, layers=(0, 10))
problem = problem_from_graph(graph, profile, memory=True)
digest = hashlib.sha256(repr(sorted(map(repr, graph.edges(data=True)))).encode())
groups = capacity_groups(problem)  # where 80 KV reads are bit masks (capacity.py)
digest.update(repr([(sorted(map(repr, g.sources)), g.late_work, g.holds) for g in groups]).encode())
for policy in ("heft", "critical-path"):
    s = run_on_problem(make_policy(policy), problem, label=policy, profile=profile.name)
    digest.update(repr(sorted((repr(n), *x[1:]) for n, x in s.slots.items())).encode())
    digest.update(repr(schedule_metrics(s, problem, profile)).encode())
print(json.dumps(["e4b", len(graph), digest.hexdigest()]))
"""


def _run(pure: bool) -> tuple[list[str], list[str]]:
    env = {k: v for k, v in os.environ.items() if k != compiled.PURE_ENV}
    if pure:
        env[compiled.PURE_ENV] = "1"
    out = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, cwd=ROOT, capture_output=True, text=True,
        check=True,
    ).stdout.splitlines()  # fmt: skip
    return json.loads(out[0])["compiled"], out[1:]


@pytest.mark.slow
def test_compiled_modules_schedule_as_their_source():
    built, compiled_lines = _run(pure=False)
    if not built:
        pytest.skip("no module of pccx_flow.compiled.COMPILED is built (no Cython or compiler)")
    assert built == list(compiled.COMPILED), (
        "some listed modules run from source: not built, or edited since the build "
        "(`make .venv/.compiled` rebuilds them)"
    )
    none, pure_lines = _run(pure=True)
    assert none == []
    schedules = [line for line in pure_lines if len(json.loads(line)) == 4]
    assert len(schedules) == (8 + 2 * 5) * 9  # problems x built-in policies
    assert sum(len(json.loads(line)[2]) for line in schedules) > 5_000  # slots compared
    assert len(pure_lines) == len(schedules) + 4 + 8 * 2 + 1  # graphs, metrics, E4B
    assert json.loads(pure_lines[-1])[1] > 3_000  # the E4B cut's nodes
    assert compiled_lines == pure_lines


def _literal_shifts(source: str) -> list[int]:
    """Lines of `source` where an int literal is shifted (``1 << n``, ``x |= 1 << n``)."""
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.BinOp)
        and isinstance(node.op, ast.LShift | ast.RShift)
        and isinstance(node.left, ast.Constant)
    ]


def test_no_literal_is_shifted_in_a_compiled_module():
    """Cython computes ``a << b`` in C when both sides have C types, and an int literal,
    ``len(x)`` and the index of a comprehension over ``range(len(x))`` do: ``1 << len(x)``
    wraps past 63 bits where Python's int grows (capacity.py's ``1 << len(sbit)``,
    compiled, gave other masks and a lower `capacity_chain` at 8191). A compiled module
    shifts `precedence.ONE`, an imported Python int, instead."""
    assert _literal_shifts("m |= 1 << len(s)\nk = (1 << n) - 1\nj = ONE << n") == [1, 2]
    found = []
    for module in compiled.COMPILED:
        path = ROOT.joinpath(*module.split(".")).with_suffix(".py")
        lines = _literal_shifts(path.read_text(encoding="utf-8"))
        found += [f"{path.relative_to(ROOT)}:{line}" for line in lines]
    assert not found, f"an int literal shifted in a compiled module: {found}"


def _pair(tmp_path: Path, source_ns: int, ext_ns: int) -> Path:
    source = tmp_path / "mod.py"
    source.write_text("X = 1\n")
    ext = tmp_path / f"mod{importlib.machinery.EXTENSION_SUFFIXES[0]}"
    ext.write_bytes(b"\0")
    os.utime(source, ns=(source_ns, source_ns))
    os.utime(ext, ns=(ext_ns, ext_ns))
    return source


def test_an_extension_older_than_its_source_is_not_used(tmp_path):
    second = 1_000_000_000
    assert compiled._current_extension(_pair(tmp_path, 5 * second, 9 * second)) is not None
    assert compiled._current_extension(_pair(tmp_path, 9 * second, 9 * second)) is not None
    assert compiled._current_extension(_pair(tmp_path, 9 * second, 5 * second)) is None
    assert compiled._current_extension(tmp_path / "other.py") is None


def test_pure_python_when_asked():
    env = {**os.environ, compiled.PURE_ENV: "1"}
    code = (
        "import pccx_flow.schedule.timeline as t, pccx_flow.compiled as c; "
        "print(t.__file__); print(c.running_compiled())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.splitlines()
    assert out[0].endswith("timeline.py") and out[1] == "[]"


def test_setup_reads_the_same_list():
    """setup.py reads `COMPILED` from the source without importing the package."""
    namespace = runpy.run_path(str(ROOT / "setup.py"), run_name="not_main")
    assert namespace["compiled_modules"]() == list(compiled.COMPILED)


def _assigned_attributes(source: str) -> dict[str, set[str]]:
    """Per class of `source`: the attributes its methods assign on ``self``."""
    out: dict[str, set[str]] = {}
    for cls in ast.parse(source).body:
        if isinstance(cls, ast.ClassDef):
            names = out.setdefault(cls.name, set())
            for node in ast.walk(cls):
                targets = (
                    node.targets if isinstance(node, ast.Assign)
                    else [node.target] if isinstance(node, ast.AnnAssign | ast.AugAssign)
                    else []
                )  # fmt: skip
                for target in targets:
                    for t in ast.walk(target):
                        if (
                            isinstance(t, ast.Attribute)
                            and isinstance(t.value, ast.Name)
                            and t.value.id == "self"
                        ):
                            names.add(t.attr)
    return out


# `cdef public <type> a, b` under `cdef class Name:` in a .pxd
_PXD_CLASS = re.compile(r"^cdef class (\w+):$")
_PXD_FIELDS = re.compile(r"^\s+cdef public (\w+) ([\w, ]+)$")


def _declared_attributes(pxd: str) -> dict[str, dict[str, str]]:
    """Per `cdef class` of a .pxd: {attribute: its declared type}. Any other declaration
    (a C variable, a method, a private field) fails: the test checks only these."""
    out: dict[str, dict[str, str]] = {}
    cls = None
    for line in pxd.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if m := _PXD_CLASS.match(line):
            cls = out.setdefault(m.group(1), {})
        elif (m := _PXD_FIELDS.match(line)) and cls is not None:
            cls.update(dict.fromkeys((a.strip() for a in m.group(2).split(",")), m.group(1)))
        else:
            raise AssertionError(f"a declaration this test does not check: {line!r}")
    return out


def test_a_pxd_declares_every_attribute_its_classes_assign():
    """An extension type has no ``__dict__``: an attribute the source assigns that its
    .pxd does not declare would raise AttributeError in the compiled build only. And a C
    number type would wrap or refuse a large int where Python's does not: fields are
    Python objects."""
    example = _assigned_attributes(
        "class A:\n def f(self):\n  self.x: int = 0\n  self.y, z = 1, 2\n  self.w += 1\n"
    )
    assert example == {"A": {"x", "y", "w"}}
    assert _declared_attributes("# c\ncdef class A:\n    cdef public list x, y\n") == {
        "A": {"x": "list", "y": "list"}
    }
    with pytest.raises(AssertionError, match="does not check"):
        _declared_attributes("cdef class A:\n    cdef long x\n")
    pxds = []
    for module in compiled.COMPILED:
        source = ROOT.joinpath(*module.split(".")).with_suffix(".py")
        pxd = source.with_suffix(".pxd")
        if not pxd.exists():
            continue
        pxds.append(pxd.name)
        declared = _declared_attributes(pxd.read_text(encoding="utf-8"))
        assigned = _assigned_attributes(source.read_text(encoding="utf-8"))
        for cls, fields in declared.items():
            assert set(fields) == assigned[cls], f"{pxd.name}: {cls}"
            assert set(fields.values()) <= {"object", "list", "dict", "set", "tuple"}
    assert "timeline.pxd" in pxds

"""The package's shape: no import circles, board/ in rooms that import only downwards, small
modules. Imports are read from the source (module level and inside functions alike), so a
lazy import cannot hide a circle."""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "pccx_flow"


def module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The pccx_flow modules `path` imports (a name imported from a package counts as the
    submodule when there is one)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{a.name}" for a in node.names] + [node.module]
        else:
            continue
        for name in names:
            if not name.startswith("pccx_flow"):
                continue
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name:
                out.add(name)
    return out


def import_graph() -> nx.DiGraph:
    mods = modules()
    g = nx.DiGraph()
    g.add_nodes_from(mods)
    for name, path in mods.items():
        for target in imports_of(path, set(mods)):
            # a module importing its own package's __init__ (or an __init__ its submodule) is
            # Python's package mechanics, not a dependency between two rooms
            if target != name and not name.startswith(target + ".") and not (
                target.startswith(name + ".") and path.name == "__init__.py"
            ):
                g.add_edge(name, target)
    return g


def test_no_module_imports_itself_back_through_others():
    cycles = list(nx.simple_cycles(import_graph()))
    assert cycles == [], "import circles: " + "; ".join(" -> ".join(c) for c in cycles[:5])


def test_the_checker_sees_a_circle(tmp_path):
    """`imports_of` and the cycle search together catch a lazy circle (the check can fail)."""
    a = tmp_path / "a.py"
    b = tmp_path / "b.py"
    a.write_text("def f():\n    from pccx_flow.x import g\n")
    b.write_text("from pccx_flow.y import h\n")
    known = {"pccx_flow.y", "pccx_flow.x"}
    g = nx.DiGraph()
    g.add_edge("pccx_flow.y", *imports_of(a, known))
    g.add_edge("pccx_flow.x", *imports_of(b, known))
    assert list(nx.simple_cycles(g))


# board/'s rooms and the rooms each may import (pccx_flow/board/__init__.py says why)
BOARD_ROOMS = {
    "isa": set(),
    "program": {"isa"},
    "emulator": {"isa", "program"},
    "timing": {"isa", "program"},
    "device": {"isa", "program", "emulator", "timing"},
}


def room_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["pccx_flow", "board"] else None


def test_board_rooms_import_only_the_rooms_below_them():
    g = import_graph()
    assert {room_of(m) for m in g if room_of(m)} == set(BOARD_ROOMS)
    wrong = [
        f"{a} -> {b}"
        for a, b in g.edges
        if room_of(a) and room_of(b) and room_of(b) != room_of(a)
        and room_of(b) not in BOARD_ROOMS[room_of(a)]
    ]  # fmt: skip
    assert wrong == []


@pytest.mark.parametrize("room", sorted(BOARD_ROOMS))
def test_board_modules_stay_small_and_say_what_they_own(room):
    folder = PACKAGE / "board" / room
    init = (folder / "__init__.py").read_text(encoding="utf-8")
    assert "Owns:" in init and "Imports" in init  # what it owns, what it may import
    sizes = {p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in folder.glob("*.py")}
    assert max(sizes.values()) <= 420, sizes

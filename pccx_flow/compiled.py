"""Which modules may run as C extensions built by Cython, and which copy of each is imported.

The list scheduler places every node of a decode step through `Timeline` (tens of
thousands of placements at long context), and each placement is a few hundred
interpreted bytecodes: interpreter work, not the algorithm, is most of a long-context
`schedule`'s time. `setup.py` compiles the modules of `COMPILED`
from their unchanged Python source (Cython, no type declarations in it), beside each
``.py``; where Cython or a C compiler is missing the package is the same pure Python. A
``.pxd`` beside a module may declare its classes' attributes (``schedule/timeline.pxd``:
the timeline's classes become extension types), never as C numbers.

A compiled copy is imported only while it is current: `install_finder` (run when
`pccx_flow` is imported) takes a module's ``.py`` instead when the source is newer than
the extension (edited since the last build: the extension would run old code) or when
``PCCX_FLOW_PURE_PYTHON`` is set (to profile line by line, or to compare with a pure
build). `make` rebuilds the extensions when a listed source or a ``.pxd`` beside one
changes.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import sys
from pathlib import Path

# Modules compiled by `setup.py`: the timeline every policy places on, the static list
# scheduler's loop, what builds and checks a problem, the graph writer and the node
# builders it spends most of the graph's time in, the metrics, the chain bounds' passes
# and the two policies `schedule` runs most (`critical-path`, the default, and `heft`):
# the parts of a long-context `schedule` that are plain Python loops over every node,
# each compiled only where it measured faster (the read-ahead rule did not;
# `benchmarks/bench_speed.py`). A compiled module never shifts an int literal
# (`pccx_flow.schedule.precedence.ONE`; `tests/test_compiled.py`).
COMPILED: tuple[str, ...] = (
    "pccx_flow.schedule.timeline",
    "pccx_flow.schedule.policies.base",
    "pccx_flow.schedule.validate",
    "pccx_flow.schedule.memory",
    "pccx_flow.schedule.problem",
    "pccx_flow.schedule.metrics",
    "pccx_flow.graph.emit",
    "pccx_flow.graph.ops",
    "pccx_flow.graph.blocks_attention",
    "pccx_flow.schedule.capacity",
    "pccx_flow.schedule.chains",
    "pccx_flow.schedule.nearest",
    "pccx_flow.schedule.precedence",
    "pccx_flow.schedule.policies.heft",
    "pccx_flow.schedule.policies.critical_path",
)

PURE_ENV = "PCCX_FLOW_PURE_PYTHON"


def _extension_beside(source: Path) -> Path | None:
    """The extension module built from `source`, if one lies beside it."""
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        path = source.with_suffix(suffix)
        if path.is_file():
            return path
    return None


def _current_extension(source: Path) -> Path | None:
    """The extension beside `source` (a file) when it is at least as new as the source."""
    ext = _extension_beside(source)
    if ext is None:
        return None
    return ext if ext.stat().st_mtime_ns >= source.stat().st_mtime_ns else None


class _SourceOrCurrentExtension:
    """A meta path finder for the modules of `COMPILED`: the extension when it is current
    and pure Python is not asked for, the ``.py`` otherwise (the default finder would take
    any extension beside it, however old)."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in COMPILED or path is None:
            return None
        name = fullname.rpartition(".")[2]
        for folder in path:
            source = Path(folder, f"{name}.py")
            if not source.is_file():
                continue
            ext = None if os.environ.get(PURE_ENV) else _current_extension(source)
            if ext is not None:
                loader = importlib.machinery.ExtensionFileLoader(fullname, str(ext))
                return importlib.util.spec_from_file_location(fullname, ext, loader=loader)
            return importlib.util.spec_from_file_location(fullname, source)
        return None


def install_finder() -> None:
    """Put the finder first on ``sys.meta_path`` (once)."""
    if not any(isinstance(f, _SourceOrCurrentExtension) for f in sys.meta_path):
        sys.meta_path.insert(0, _SourceOrCurrentExtension())


def running_compiled() -> list[str]:
    """The modules of `COMPILED` imported from an extension in this process (each is
    imported to find out)."""
    out = []
    for module in COMPILED:
        origin = importlib.import_module(module).__spec__.origin or ""
        if not origin.endswith(".py"):
            out.append(module)
    return out

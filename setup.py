"""Build the package, with the modules `pccx_flow/compiled.py` lists compiled by Cython.

Those modules stay plain Python source; Cython compiles each unchanged (annotations not
taken as C types; a ``.pxd`` beside a module, if any, declares its classes' attributes)
into an extension beside its ``.py``.
Every extension is optional: without Cython or a C compiler the build still succeeds and
the package runs as pure Python. ``PCCX_FLOW_PURE_PYTHON=1`` at build time builds none.
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

from setuptools import setup

ROOT = Path(__file__).resolve().parent


def compiled_modules() -> list[str]:
    """`COMPILED` read from pccx_flow/compiled.py without importing the package."""
    tree = ast.parse((ROOT / "pccx_flow" / "compiled.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "COMPILED":
            return list(ast.literal_eval(node.value))
    raise SystemExit("pccx_flow/compiled.py has no COMPILED tuple")


def extensions() -> list:
    if os.environ.get("PCCX_FLOW_PURE_PYTHON"):
        return []
    try:
        from Cython.Build import cythonize
    except ImportError:
        return []
    sources = [str(Path(*m.split(".")).with_suffix(".py")) for m in compiled_modules()]
    exts = cythonize(
        sources,
        compiler_directives={"language_level": 3, "annotation_typing": False},
        quiet=True,
    )
    for ext in exts:
        ext.optional = True  # a failed compile leaves that module pure Python
    return exts


if __name__ == "__main__":  # as pip and setuptools run it (not when a test reads the list)
    setup(ext_modules=extensions(), options={"build_ext": {"parallel": os.cpu_count() or 1}})

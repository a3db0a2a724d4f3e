"""Finding Graphviz's layout programs and running them with a timeout.

The `graphviz` Python package only writes DOT source; laying it out needs the `dot` (or
`neato`) executable from the system's Graphviz. When it is missing the user gets one line
that says how to install it, and a layout that runs away (a node feeding hundreds of others
can keep `dot` busy for minutes) is stopped by a timeout with a hint to collapse more.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from pccx_flow import atomic
from pccx_flow.errors import RenderError

DOT_MISSING = (
    "Graphviz 'dot' not found: install it with `apt-get install graphviz` (Debian/Ubuntu) "
    "or `brew install graphviz`"
)

# Output formats `dot` is asked for; `.dot` is written as source without running anything.
LAYOUT_FORMATS = ("svg", "png", "pdf")

DEFAULT_TIMEOUT_S = 120.0


def find_layout_program(program: str = "dot") -> str:
    """Path of a Graphviz layout program on PATH; `RenderError` with the install hint if not."""
    path = shutil.which(program)
    if path is None:
        message = DOT_MISSING if program == "dot" else DOT_MISSING.replace("'dot'", f"'{program}'")
        raise RenderError(message)
    return path


def run_layout(
    source: str,
    out: Path,
    fmt: str,
    *,
    program: str = "dot",
    extra_args: tuple[str, ...] = (),
    timeout: float = DEFAULT_TIMEOUT_S,
) -> Path:
    """Lay out DOT `source` with `program` (plus `extra_args`) and write format `fmt` to `out`.

    Raises `RenderError` when the program is missing, exceeds `timeout` seconds, or fails.
    """
    if fmt not in LAYOUT_FORMATS:
        raise RenderError(
            f"unknown picture format {fmt!r}; choose one of: {', '.join(LAYOUT_FORMATS)}"
        )
    exe = find_layout_program(program)
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    try:  # the picture comes back on stdout: this process writes the file, so a full disk
        # is the usual OSError (Graphviz says only "gvwrite_no_z problem 50")
        proc = subprocess.run(
            [exe, *extra_args, f"-T{fmt}"],
            input=source.encode("utf-8"),
            capture_output=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise RenderError(
            f"Graphviz '{program}' took longer than {timeout:g} s: render fewer layers or "
            "collapse more (--collapse blocks or layers)"
        ) from None
    if proc.returncode != 0:
        detail = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        first = detail[0] if detail else f"exit status {proc.returncode}"
        raise RenderError(f"Graphviz '{program}' failed: {first}")
    atomic.write_bytes(out, proc.stdout)  # a killed or failed run leaves `out` as it was
    return out

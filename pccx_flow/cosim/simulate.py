"""Build the controller and the testbench with Verilator (once per RTL), run a stimulus.

The build is cached under ``$XDG_CACHE_HOME/pccx-flow/cosim/<key>`` (default
``~/.cache``), the key a hash of the controller's files, every header in its include
folders, the testbench text and the Verilator version: a changed checkout builds anew, the
same one is reused. A build writes into a temporary folder renamed into place when it
succeeds, so an interrupted build leaves no half a model behind.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from pccx_flow.cosim.harness import TB_TOP, bench_text
from pccx_flow.cosim.ports import discover_ports
from pccx_flow.cosim.rtl_files import FLAGS, checkout_files, fingerprint, verilator_version
from pccx_flow.errors import InputError

BINARY = "Vpccx_flow_cosim"


@dataclass(frozen=True)
class Model:
    """A built controller model: the binary, whether it came from the cache, build seconds."""

    binary: Path
    cached: bool
    build_seconds: float
    verilator: str
    version: tuple[int, int]
    ports: tuple[str, ...]


def cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "pccx-flow" / "cosim"


def build_model(rtl: Path, verilator: str, *, jobs: int = 2) -> Model:
    """The controller model for the checkout `rtl`, built or taken from the cache."""
    version = verilator_version(verilator)
    files, includes = checkout_files(rtl)
    headers = sorted(p for d in includes for p in d.glob("*.svh"))
    root = cache_root()
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="probe-", dir=root) as probe:
        ports = discover_ports(verilator, files, includes, Path(probe), FLAGS)
    bench = bench_text(ports)
    key = fingerprint(files + headers, bench, f"{version}")
    final = root / key
    names = tuple(p.name for p in ports)
    if (final / BINARY).is_file():
        return Model(final / BINARY, True, 0.0, verilator, version, names)
    t0 = time.perf_counter()
    work = Path(tempfile.mkdtemp(prefix=f"{key}-", dir=root))
    try:
        (work / "tb.sv").write_text(bench, encoding="utf-8")
        argv = [verilator, "--binary", "--timing", "-j", str(jobs), *FLAGS,
                "--top-module", TB_TOP, "--Mdir", str(work), "-o", BINARY,
                *(f"-I{d}" for d in includes), *map(str, files), str(work / "tb.sv")]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=3600)
        if done.returncode != 0 or not (work / BINARY).is_file():
            lines = (done.stderr or done.stdout).strip().splitlines() or ["no output"]
            first = next((ln for ln in lines if "%Error" in ln or "error:" in ln), lines[-1])
            raise InputError(f"Verilator could not build the controller: {first}")
        if final.exists():  # another build finished first: use it
            shutil.rmtree(work, ignore_errors=True)
        else:
            work.rename(final)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        raise
    return Model(final / BINARY, False, time.perf_counter() - t0, verilator, version, names)


def run_model(model: Model, stimulus: str, work: Path, drain: int = 64) -> tuple[str, float]:
    """Run `stimulus` through the model in `work`; the log text and the run's seconds."""
    stim, out = work / "stimulus.txt", work / "sim.log"
    stim.write_text(stimulus, encoding="ascii")
    t0 = time.perf_counter()
    done = subprocess.run([str(model.binary), f"+STIM={stim}", f"+OUT={out}", f"+DRAIN={drain}"],
                          capture_output=True, text=True, timeout=3600, cwd=work)  # fmt: skip
    seconds = time.perf_counter() - t0
    if done.returncode != 0 or not out.is_file():
        tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        raise InputError(f"the simulation failed: {tail[0]}")
    return out.read_text(encoding="ascii"), seconds

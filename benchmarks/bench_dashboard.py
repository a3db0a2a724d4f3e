"""What the pccx lanes page costs a run: a `tiny` generation of 8 steps on the in-process
cluster that ``pccx-flow run --dashboard`` starts, with and without the page.

Modes, interleaved run by run (median of ``--runs``), each on a fresh cluster as the CLI does:

- ``dashboard``: the Dask dashboard only (no preload, no plan announcements);
- ``dashboard + browser``: the same with headless Chromium showing Dask's ``/status`` page
  (what watching a run cost before the lanes page);
- ``lanes page``: the scheduler preload (`LaneRecorder` on every task transition) and the
  client announcing each step's plan (Gantt data of the step's schedule);
- ``lanes page + browser``: the same with headless Chromium showing the page during the run
  (its document polls the recorder every 0.5 s). The browser modes are skipped without
  chromium/chromedriver; the browser shares this machine's cores with the run.

The step runs fused (``--fuse``, the recommended way to watch a run) with the
``critical-path`` policy. Wall time of the whole `generate` call on this CPU (not an NPU
estimate). Target: the page costs at most 10 % over ``dashboard``.

    python benchmarks/bench_dashboard.py [--runs 3] [--steps 8]

Writes benchmarks/results/dashboard.json.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from measure import write_result

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

POLICY = "critical-path"


def _browser(url: str, profile: Path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium")
    for flag in (
        "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--window-size=1400,1500", f"--user-data-dir={profile}",
    ):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=options)
    driver.get(url)
    return driver


def one_run(ckpt, mode: str, steps: int) -> float:
    from pccx_flow.dashboard import ROUTE
    from pccx_flow.dashboard.client import PlanAnnouncer, page_url
    from pccx_flow.dashboard.cluster import PRELOAD, loopback_cluster
    from pccx_flow.execute.generate import generate

    page = mode.startswith("lanes page")
    driver = None
    with loopback_cluster((PRELOAD,) if page else ()) as (_, client):
        try:
            with tempfile.TemporaryDirectory(prefix="pccx-chromium-") as profile:
                if mode == "lanes page + browser":
                    driver = _browser(page_url(client), Path(profile))
                elif mode == "dashboard + browser":
                    driver = _browser(page_url(client).replace(ROUTE, "/status"), Path(profile))
                announce = PlanAnnouncer(client) if page else None
                t0 = time.perf_counter()
                generate(
                    ckpt, [2], steps, policy=POLICY, client=client, fuse=True, on_plan=announce
                )
                seconds = time.perf_counter() - t0
                if driver is not None:
                    driver.quit()
                    driver = None
        finally:
            if driver is not None:
                driver.quit()
    return seconds


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--steps", type=int, default=8)
    args = ap.parse_args(argv)

    from pccx_flow.model.config import get_config
    from pccx_flow.weights.checkpoint import open_checkpoint
    from pccx_flow.weights.synth import write_synthetic_checkpoint

    modes = ["dashboard", "dashboard + browser", "lanes page", "lanes page + browser"]
    browser = bool(shutil.which("chromium") and shutil.which("chromedriver"))
    try:
        import selenium  # noqa: F401
    except ImportError:
        browser = False
    if not browser:
        modes = [m for m in modes if "browser" not in m]
    times: dict[str, list[float]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory(prefix="pccx-tiny-") as tmp:
        write_synthetic_checkpoint(get_config("tiny"), 0, Path(tmp), progress=False)
        ckpt = open_checkpoint(tmp)
        one_run(ckpt, "dashboard", 1)  # warm-up: imports, numba compilation
        for i in range(args.runs):
            for mode in modes:
                times[mode].append(one_run(ckpt, mode, args.steps))
                print(f"run {i + 1} {mode}: {times[mode][-1]:.2f} s", flush=True)
    base = statistics.median(times["dashboard"])
    base_browser = statistics.median(times.get("dashboard + browser") or [base])
    result = {
        "preset": "tiny",
        "steps": args.steps,
        "policy": POLICY,
        "fused": True,
        "runs": args.runs,
        "cpu_count": os.cpu_count(),
        "modes": {
            m: {
                "seconds": t,
                "median_s": statistics.median(t),
                "overhead": statistics.median(t) / base - 1.0,
                "overhead_vs_same_viewer": statistics.median(t)
                / (base_browser if "browser" in m else base)
                - 1.0,
            }
            for m, t in times.items()
        },
        "target_overhead": 0.10,
        "browser": browser,
    }
    out = write_result("dashboard", result)
    for m, r in result["modes"].items():
        print(
            f"{m}: median {r['median_s']:.2f} s ({r['overhead']:+.1%}; "
            f"{r['overhead_vs_same_viewer']:+.1%} vs the dashboard with the same viewer)"
        )
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

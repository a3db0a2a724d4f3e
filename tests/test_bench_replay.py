"""The replay benchmark on a small step, and the README table it feeds."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parent.parent / "benchmarks"


def test_bench_replay_case_and_its_readme_table(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCH))
    bench = importlib.import_module("bench_replay")
    summarize = importlib.import_module("summarize")
    case = bench.one("tiny", 9, "v002-as-built", "as-built")
    assert "error" not in case
    models = case["models"]
    assert set(models) == {"spec", "rtl", "decoupled"}
    for s in models.values():
        assert s["estimate"] == "model estimate, profile v002-as-built"
        assert sum(s["time_slices_cycles"].values()) == s["makespan_cycles"]
    waits = case["models_dispatch_waits"]
    for m in ("spec", "rtl", "decoupled"):  # waiting after every batch can only cost time
        assert waits[m]["makespan_cycles"] >= models[m]["makespan_cycles"]
        assert waits[m]["host_waits"] == "every-batch"
    table = summarize.replay_section({"cases": [case]})
    assert "| tiny pos 9, v002-as-built, as-built |" in table
    spec_rtl = f"{waits['spec']['tokens_per_second']:.2f} / {waits['rtl']['tokens_per_second']:.2f}"
    assert f"| {spec_rtl} |" in table
    assert "model estimates" in table
    sys.modules.pop("bench_replay", None)
    sys.modules.pop("summarize", None)

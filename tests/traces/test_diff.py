"""`trace diff`: identical timelines are identical; different policies diverge at a node."""

from __future__ import annotations

import pytest

from pccx_flow.cli.main import main
from pccx_flow.traces.diff import diff_timelines, first_divergence, read_timeline
from pccx_flow.traces.timeline import Event, Timeline


def test_busy_time_counts_overlaps_once_and_divergence_names_the_event():
    a = Timeline(["x", "y"], [Event("x", 0, 10, name="n1"), Event("y", 5, 10, name="n2")])
    b = Timeline(["x", "y"], [Event("x", 0, 10, name="n1"), Event("y", 7, 10, name="n2")])
    assert a.busy() == {"x": 10, "y": 10}
    assert Timeline(["x"], [Event("x", 0, 10), Event("x", 5, 10)]).busy() == {"x": 15}
    div = first_divergence(a, b)
    assert div.name == "n2" and div.describe() == "event 1 (n2): start 5 vs 7 (+2 cycles)"
    d = diff_timelines(a, b)
    assert d["makespan_ratio_b_over_a"] == pytest.approx(17 / 15) and not d["identical"]
    assert diff_timelines(a, a)["identical"]


def test_cli_diff_of_two_policies_and_of_two_formats_of_one_schedule(tmp_path, capsys):
    a, b, c = tmp_path / "a.pccx", tmp_path / "b.pccx", tmp_path / "a.json"
    base = ["schedule", "--preset", "tiny", "--no-progress"]
    assert main([*base, "--pccx", str(a), "--trace", str(c)]) == 0
    assert main([*base, "--policy", "etf", "--pccx", str(b)]) == 0  # heft: the same timeline
    capsys.readouterr()
    assert main(["trace", "diff", str(a), str(b), "--json", str(tmp_path / "d.json")]) == 0
    out = capsys.readouterr().out
    assert "first divergence: event " in out and "makespan B/A" in out
    assert main(["trace", "diff", str(c), str(a)]) == 0  # Chrome trace vs .pccx, same schedule
    assert "identical, event for event" in capsys.readouterr().out
    assert read_timeline(c).lanes == read_timeline(a).lanes


def test_cli_diff_of_a_file_that_is_no_trace_is_one_line(tmp_path, capsys):
    junk = tmp_path / "junk.pccx"
    junk.write_text("hello")
    assert main(["trace", "diff", str(junk), str(junk)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pccx-flow: error: ") and len(err.strip().splitlines()) == 1

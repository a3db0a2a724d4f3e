"""Ratios and the per-policy summary, on hand-made records (numbers checked by hand)."""

from __future__ import annotations

import pytest

from pccx_flow.compare.summary import format_tables, instance_rows, summarize


def _rec(key, spans, bound, opt=None, kind="random"):
    return {
        "key": key, "kind": kind, "nodes": 10, "profile": None,
        "bounds": {"critical_path": bound}, "largest_bound_cycles": bound,
        "results": {p: {"makespan": m, "seconds": 0.01} for p, m in spans.items()},
        "exact": {"status": "optimal", "makespan": opt} if opt else {"status": "skipped"},
    }  # fmt: skip


RECORDS = [
    _rec("a", {"x": 100, "y": 120}, 80, opt=100),
    _rec("b", {"x": 110, "y": 100}, 100),
    _rec("c", {"x": 90, "y": 90}, 90, opt=90),
]


def test_rows_ratio_to_best_bound_and_optimum():
    rows = {(r["key"], r["policy"]): r for r in instance_rows(RECORDS)}
    assert rows[("a", "y")]["ratio_to_best"] == pytest.approx(1.2)
    assert rows[("a", "y")]["ratio_to_bound"] == pytest.approx(1.5)
    assert rows[("a", "y")]["ratio_to_optimum"] == pytest.approx(1.2)
    assert rows[("b", "x")]["ratio_to_optimum"] is None


def test_summary_mean_median_worst_wins():
    s = summarize(RECORDS, ["x", "y"])["random"]
    x, y = s["policies"]["x"], s["policies"]["y"]
    assert x["mean_ratio"] == pytest.approx((1 + 1.1 + 1) / 3) and x["worst_ratio"] == 1.1
    assert x["wins"] == 2 and y["wins"] == 2  # the tie on c counts for both
    assert y["median_ratio"] == 1.0 and y["worst_ratio"] == pytest.approx(1.2)
    assert x["optimal_hits"] == 2 and y["worst_ratio_to_optimum"] == pytest.approx(1.2)
    assert s["optimal"] == 2 and s["bound_over_optimum"]["largest"]["worst"] == 0.8


def test_decode_tables_say_model_estimate():
    recs = [dict(_rec("d", {"x": 5, "y": 6}, 4), kind="decode", profile="v002-spec")]
    text = format_tables(summarize(recs, ["x", "y"]))
    assert "model estimates on profiles v002-spec" in text
    assert max(len(line) for line in text.splitlines()) <= 100


def test_long_policy_names_keep_the_columns_aligned():
    long = "lookahead+improve:50"
    recs = [_rec(k, {long: m, "y": 100}, 80) for k, m in (("a", 90), ("b", 110))]
    lines = format_tables(summarize(recs, [long, "y"])).splitlines()
    header = next(line for line in lines if line.startswith("policy"))
    rows = [line for line in lines if line.startswith((long, "y "))]
    end_of_mean = header.index("mean") + len("mean")
    assert len(rows) == 2
    for row in rows:  # the mean ratio ends under the header's "mean"
        assert row[end_of_mean - 5 : end_of_mean].strip().replace(".", "").isdigit(), row
        assert row[end_of_mean] == " "


def test_every_column_of_the_table_has_its_own_name():
    text = format_tables(summarize(RECORDS, ["x", "y"]))
    header = next(line for line in text.splitlines() if line.startswith("policy"))
    names = ["policy", "mean", "median", "worst", "wins", "vs LB", "vs opt", "opt worst", "sched s"]
    assert [n for n in names if n in header] == names
    assert header.count("worst") == 2 and header.count(" worst") == 2  # "worst", "opt worst"
    row = next(line for line in text.splitlines() if line.startswith("y "))
    assert row.split()[-3:-1] == ["1.100", "1.200"]  # vs opt mean, opt worst under their names
    at = header.index("opt worst") + len("opt worst")
    assert row[:at].rstrip().endswith("1.200")

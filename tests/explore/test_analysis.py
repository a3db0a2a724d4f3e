"""Pareto front, smallest changes, context curves and costs on hand-made records."""

from __future__ import annotations

from pccx_flow.explore.analysis import context_curve, pareto_front, smallest_changes, with_cost
from pccx_flow.explore.params import base_value, design_cost, split_point
from pccx_flow.hardware.profile import load_profile

SPEC = load_profile("v002-spec")


def _rec(key, cost, tok_s, bound="pool:weight_port", **point):
    return {"key": key, "cost": cost, "tok_s": tok_s, "binding_bound": bound, "point": point}


def test_the_front_keeps_only_designs_faster_than_every_cheaper_one():
    recs = [_rec("a", 0, 3), _rec("b", 1, 2), _rec("c", 2, 6), _rec("d", 2, 5), _rec("e", 4, 6),
            {"key": "f", "point": {}, "error": "x"}]  # fmt: skip
    assert [r["key"] for r in pareto_front(recs)] == ["a", "c"]


def test_smallest_changes_pick_the_cheapest_design_per_target_or_say_none():
    recs = [_rec("a", 0, 3), _rec("b", 2, 6), _rec("c", 1, 5.5), _rec("d", 9, 12)]
    rows = smallest_changes(recs, targets=(5, 10, 20))
    assert [r["record"]["key"] if r["record"] else None for r in rows] == ["c", "d", None]
    assert rows[2]["best_tok_s"] == 12


def test_on_a_cost_tie_the_design_with_fewer_changes_wins():
    base = {"weight_ports": 2, "core_mhz": 400.0, "kv_bits": 16}
    two = _rec("two", 1, 6, weight_ports=3, core_mhz=400.0, kv_bits=8)
    one = _rec("one", 1, 5.5, weight_ports=3, core_mhz=400.0, kv_bits=16)
    rows = smallest_changes([two, one], targets=(5,), base_point=base)
    assert rows[0]["record"]["key"] == "one"  # without the base the faster "two" would win


def test_the_context_curve_marks_where_the_bound_changes():
    recs = [_rec("a", 0, 3, position=0), _rec("c", 0, 1, "lane_class:dma", position=8191),
            _rec("b", 0, 2.9, position=1023)]  # fmt: skip
    curve = context_curve(recs)
    assert [r["position"] for r in curve] == [0, 1023, 8191]
    assert [r["crossover"] for r in curve] == [False, False, True]


def test_cost_counts_additions_only_and_is_zero_for_the_base():
    base = {n: base_value(n, SPEC) for n in ("gemv_lanes", "weight_ports", "core_mhz",
                                             "sfu_cycles", "host_us")}  # fmt: skip
    assert base == {"gemv_lanes": 4, "weight_ports": 2, "core_mhz": 400.0, "sfu_cycles": 3.1,
                    "host_us": 5.0}  # fmt: skip
    assert design_cost(base, SPEC) == 0
    assert design_cost({"weight_ports": 4, "gemv_lanes": 2}, SPEC) == 4.0
    assert design_cost({"core_mhz": 500, "sfu_cycles": 1.55}, SPEC) == 3.0
    assert [r["cost"] for r in with_cost([{"point": {"gemv_lanes": 8}}], SPEC)] == [4.0]


def test_split_point_converts_units_and_keeps_step_defaults():
    over, step, after = split_point({"core_mhz": 500, "l2_kib": 2048, "spec_k": 2, "alpha": 0.8})
    assert over == {"clocks.core_hz": 500_000_000, "memory.l2_bytes": 2048 * 1024}
    assert step["spec_k"] == 2 and step["position"] == 1023 and after["alpha"] == 0.8

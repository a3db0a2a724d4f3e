"""Pruning keeps only the changes a design needs to reach its target."""

from __future__ import annotations

from pccx_flow.explore.prune import prune
from pccx_flow.hardware.profile import load_profile

SPEC = load_profile("v002-spec")
BASE = {"gemv_lanes": 4, "weight_ports": 2, "kv_bits": 16}


def _fake(points):
    return [{"point": p, "tok_s": 10.0 if p["weight_ports"] >= 4 else 1.0} for p in points]


def test_a_change_the_target_does_not_need_is_dropped_and_a_needed_one_kept():
    calls = []

    def evaluate_many(points):
        calls.append(len(points))
        return _fake(points)

    design = {"point": {"gemv_lanes": 8, "weight_ports": 4, "kv_bits": 8}, "tok_s": 10.0}
    other = {"point": {"gemv_lanes": 4, "weight_ports": 6, "kv_bits": 16}, "tok_s": 10.0}
    a, b = prune([(5.0, design), (8.0, other)], BASE, SPEC, evaluate_many)
    assert a["point"] == {"gemv_lanes": 4, "weight_ports": 4, "kv_bits": 16}
    assert b["point"] == other["point"]  # its one change is needed
    assert calls == [2, 1, 1]  # designs advance together, one try each per round


def test_a_failing_try_keeps_the_change():
    def evaluate_many(points):
        return [{"point": p, "error": "memory deadlock"} for p in points]

    design = {"point": {"gemv_lanes": 8, "weight_ports": 4, "kv_bits": 16}, "tok_s": 10.0}
    (a,) = prune([(5.0, design)], BASE, SPEC, evaluate_many)
    assert a is design

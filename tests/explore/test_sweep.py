"""Sweep files, --set, and grid / Latin hypercube / random sampling."""

from __future__ import annotations

import pytest

from pccx_flow.errors import InputError
from pccx_flow.explore.sweep import Axis, Sweep, parse_set, parse_sweep_text, read_sweep, sample


def test_a_sweep_file_parses_lists_ranges_and_fixed_values(tmp_path):
    f = tmp_path / "s.toml"
    f.write_text('[sweep]\nsampling = "grid"\npolicies = ["heft"]\n[params]\n'
                 "gemv_lanes = [4, 8]\ncore_mhz = { min = 200, max = 600, steps = 3 }\n"
                 "position = 1023\n")  # fmt: skip
    s = read_sweep(f)
    assert s.policies == ["heft"]
    points = sample(s)
    assert len(points) == 6
    assert {p["core_mhz"] for p in points} == {200.0, 400.0, 600.0}
    assert all(p["position"] == 1023 for p in points)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[params]\nx = [1]\n", "unknown sweep parameter 'x'"),
        ("[params]\ngemv_lanes = []\n", "empty list"),
        ("[params]\ngemv_lanes = { min = 8, max = 4 }\n", "need min <= max"),
        ("[params]\ngemv_lanes = 2.5\n", "whole number"),
        ("[params]\nverify_on = ['cpu']\n", "give one of gemm, gemv"),
        ("[sweep]\npoints = -1\n", "sweep.points must be an integer"),
        ("[sweep]\nsampling = 'lhs'\n", "lhs sampling needs sweep.points"),
        ("[other]\n", "unknown table [other]"),
        ("[sweep]\nfoo = 1\n", "unknown key sweep.foo"),
    ],
)
def test_every_mistake_is_one_line(text, words):
    with pytest.raises(InputError, match=None) as exc:
        parse_sweep_text(text, "t.toml")
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_a_grid_of_a_range_needs_steps():
    with pytest.raises(InputError, match="add steps = N"):
        sample(Sweep(axes=parse_set(["core_mhz=200:600"])))


def test_latin_hypercube_puts_one_point_in_each_stratum_and_is_seeded():
    axes = [Axis("core_mhz", lo=0.0 + 100, hi=1100.0), Axis("alpha", lo=0.0, hi=0.9)]
    s = Sweep(axes=axes, sampling="lhs", points=10, seed=3)
    pts = sample(s)
    assert len(pts) == 10
    assert sorted(int((p["core_mhz"] - 100) // 100) for p in pts) == list(range(10))
    assert sample(s) == pts and sample(Sweep(axes=axes, sampling="lhs", points=10, seed=4)) != pts


def test_lhs_gives_list_values_equal_shares_and_random_draws_within_range():
    s = Sweep(axes=[Axis("gemv_lanes", values=(4, 8))], sampling="lhs", points=2, seed=0)
    assert sorted(p["gemv_lanes"] for p in sample(s)) == [4, 8]
    r = Sweep(axes=[Axis("weight_ports", lo=2, hi=8)], sampling="random", points=30, seed=1)
    assert all(2 <= p["weight_ports"] <= 8 and isinstance(p["weight_ports"], int)
               for p in sample(r))  # fmt: skip


def test_set_parses_values_and_ranges():
    (a, b, c) = parse_set(["gemv_lanes=4,8", "core_mhz=200:600", "verify_on=gemv"])
    assert a.values == (4, 8) and (b.lo, b.hi) == (200, 600) and c.values == ("gemv",)
    with pytest.raises(InputError, match="write key=a,b,c"):
        parse_set(["gemv_lanes"])
    with pytest.raises(InputError, match="is not a number"):
        parse_set(["gemv_lanes=four"])

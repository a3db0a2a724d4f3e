"""The parameters a design sweep may vary: what each one changes, its unit and its cost.

Two kinds. *Profile* parameters replace a field of the hardware profile (the profile is then
checked as a user's file would be, so an implausible value is refused in one line). *Step*
parameters change the decode step itself (`pccx_flow.explore.step`): the context position,
the stored size of weights and KV rows, how much of W_down's masked input a streamer skips,
and speculative decoding's verify width. Two more (``alpha``, ``draft_us``) change only how
many tokens a step yields and what drafting costs, not the schedule; they are applied after
it (`pccx_flow.explore.point.derive`), so a sweep over them reuses cached schedules.

Any other ``section.field`` of a profile file (e.g. ``gemv.port_bytes_per_axi_clock``) may
be swept under its own name, as a bare number.

Cost (`design_cost`) is a deliberately rough count of hardware changes away from the base
profile, in *units*: one unit is about one more GEMV lane's worth of fabric or one more
board-level change. It is not area, power or money; it only orders designs so a Pareto front
and a "smallest change" table can be drawn, and every unit is listed in `PARAMS`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pccx_flow.errors import InputError


@dataclass(frozen=True)
class Param:
    """One sweepable parameter.

    ``field`` is the profile field it sets (None for a step parameter); ``scale`` converts
    the sweep's unit to the field's (MHz to Hz, say). ``kind`` is int, num or choice.
    ``cost_per`` units of cost per ``cost_step`` of change away from the base value,
    ``cost_dir`` +1 when more is the costly direction, -1 when less is (a faster SFU has
    fewer cycles per element)."""

    name: str
    kind: str
    unit: str
    doc: str
    field: str | None = None
    scale: float = 1.0
    lo: float | None = None
    hi: float | None = None
    choices: tuple = ()
    cost_per: float = 0.0
    cost_step: float = 1.0
    cost_dir: int = 1


PARAMS: dict[str, Param] = {
    p.name: p
    for p in (
        Param("gemv_lanes", "int", "lanes", "GEMV lanes (32 MAC/clk each)", "lanes.gemv",
              lo=1, hi=32, cost_per=1.0),
        Param("weight_ports", "int", "ports", "weight ports shared by the GEMV lanes (HP2, HP3)",
              "pools.weight_port", lo=1, hi=32, cost_per=2.0),
        Param("gemm_ports", "int", "ports", "weight ports of the GEMM array (HP0, HP1)",
              "gemm.ports", lo=1, hi=32, cost_per=2.0),
        Param("core_mhz", "num", "MHz", "core clock", "clocks.core_hz", 1e6, lo=1, hi=10000,
              cost_per=1.0, cost_step=50.0),
        Param("axi_mhz", "num", "MHz", "AXI clock of the HP/ACP ports", "clocks.axi_hz", 1e6,
              lo=1, hi=10000, cost_per=1.0, cost_step=50.0),
        Param("sfu_cycles", "num", "cycles/element", "SFU (CVO) cycles per element; REDUCE_SUM "
              "keeps its ratio to it", "sfu.cycles_per_element", lo=0.01, hi=100,
              cost_per=1.0, cost_dir=-1),
        Param("host_us", "num", "µs", "host cost per host step (driver call, cache upkeep)",
              "host.op_overhead_seconds", 1e-6, lo=0, hi=1e6, cost_per=1.0, cost_dir=-1),
        Param("ddr_gbs", "num", "GB/s", "effective DDR bandwidth",
              "memory.ddr_effective_bytes_per_second", 1e9, lo=0.001, hi=1e6, cost_per=1.0,
              cost_step=2.0),
        Param("l2_kib", "int", "KiB", "L2 size (the SFU reaches all of it when the base's does)",
              "memory.l2_bytes", 1024, lo=64, hi=1 << 30, cost_per=1.0, cost_step=512),
        Param("position", "int", "token", "decode position (context length - 1)", lo=0),
        Param("tile_rows", "int", "rows", "GEMV output rows and KV rows per tile (smaller "
              "tiles need less L2 at once)", lo=1, hi=512),
        Param("weight_bits", "int", "bits", "stored bits per weight of the INT4 matrices "
              "(4 today; one float32 scale per row stays)", lo=1, hi=16),
        Param("kv_bits", "int", "bits", "stored bits per KV element (16 today)", lo=1, hi=16),
        Param("sparse_down", "num", "share", "share of W_down's masked inputs (95 % on the "
              "sparse layers) the weight streamer skips: 0 dense, 1 all", lo=0, hi=1,
              cost_per=2.0),
        Param("spec_k", "int", "tokens", "draft tokens verified per weight pass (0: plain "
              "decode; the verify step has k+1 columns)", lo=0, hi=16),
        Param("verify_on", "choice", "", "where a verify step's weight matrices run: gemm "
              "(the GEMM array and its own ports) or gemv (k+1-wide GEMVs)",
              choices=("gemm", "gemv")),
        Param("alpha", "num", "", "per-token acceptance rate of drafted tokens", lo=0, hi=0.999),
        Param("draft_us", "num", "µs", "host time to draft one token (0: prompt lookup)",
              lo=0, hi=1e6),
    )
}  # fmt: skip

# Step parameters and their values when a sweep does not set them.
STEP_DEFAULTS: dict[str, Any] = {
    "position": 1023,
    "tile_rows": 512,
    "weight_bits": 4,
    "kv_bits": 16,
    "sparse_down": 0.0,
    "spec_k": 0,
    "verify_on": "gemm",
}
# Parameters applied after the schedule (they never change it).
AFTER_DEFAULTS: dict[str, Any] = {"alpha": 0.7, "draft_us": 0.0}


def check_value(name: str, value: Any) -> Any:
    """`value` as parameter `name` takes it (an int for int parameters), else one line.

    A name that is not in `PARAMS` but looks like ``section.field`` is a raw profile field:
    any finite number, checked later by the profile loader.
    """
    p = PARAMS.get(name)
    if p is None:
        if "." not in name:
            raise InputError(
                f"unknown sweep parameter {name!r}; use one of {', '.join(PARAMS)}, or a "
                "profile field as section.field (e.g. gemv.port_bytes_per_axi_clock)"
            )
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
        ):
            raise InputError(f"parameter {name} = {value!r}: give a number")
        return value
    if p.kind == "choice":
        if value not in p.choices:
            raise InputError(f"parameter {name} = {value!r}: give one of {', '.join(p.choices)}")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InputError(f"parameter {name} = {value!r}: give a number ({p.unit or p.kind})")
    if p.kind == "int":
        if value != int(value):
            raise InputError(f"parameter {name} = {value!r}: give a whole number of {p.unit}")
        value = int(value)
    if (p.lo is not None and value < p.lo) or (p.hi is not None and value > p.hi):
        hi = "" if p.hi is None else f"{p.hi:g}"
        raise InputError(f"parameter {name} = {value!r} is out of range; give {p.lo:g}..{hi}")
    return value


def split_point(point: Mapping[str, Any]) -> tuple[dict, dict, dict]:
    """``(profile overrides by field, step parameters, after-schedule parameters)``.

    Step and after-schedule parameters not in `point` take their defaults.
    """
    overrides: dict[str, Any] = {}
    step = dict(STEP_DEFAULTS)
    after = dict(AFTER_DEFAULTS)
    for name, value in point.items():
        p = PARAMS.get(name)
        if p is None:
            overrides[name] = value
        elif p.field is not None:
            v = value * p.scale
            overrides[p.field] = int(round(v)) if p.kind == "int" or v == int(v) else v
        elif name in AFTER_DEFAULTS:
            after[name] = value
        else:
            step[name] = value
    return overrides, step, after


def profile_overrides(base: Any, overrides: Mapping[str, Any]) -> dict[str, Any]:
    """`overrides` plus the fields that follow from them on `base` (a `Profile`).

    REDUCE_SUM keeps its ratio to the SFU element rate; when the base's SFU reaches all of
    L2, a new L2 size keeps it so. Clock fields are floats, as the loader expects Hz.
    """
    out = dict(overrides)
    rate = out.get("sfu.cycles_per_element")
    if rate is not None and "sfu.reduce_sum_cycles_per_element" not in out:
        ratio = base.sfu.reduce_sum_cycles_per_element / base.sfu.cycles_per_element
        out["sfu.reduce_sum_cycles_per_element"] = round(rate * ratio, 6)
    l2 = out.get("memory.l2_bytes")
    if l2 is not None and base.sfu.l2_reach_bytes >= base.memory.l2_bytes:
        out.setdefault("sfu.l2_reach_bytes", l2)
    return out


def base_value(name: str, base: Any) -> Any:
    """The value of parameter `name` on profile `base` (or its default), in the sweep's unit."""
    p = PARAMS.get(name)
    if p is None:  # a raw section.field
        return _field(base, name)
    if p.field is None:
        return {**STEP_DEFAULTS, **AFTER_DEFAULTS}.get(name)
    v = _field(base, p.field) / p.scale
    return int(round(v)) if p.kind == "int" else round(v, 9)


def _field(profile: Any, label: str) -> Any:
    section, _, key = label.partition(".")
    try:
        if section == "clocks":
            return getattr(profile, key)
        table = getattr(profile, section)
        value = table[key] if isinstance(table, dict) else getattr(table, key)
    except (AttributeError, KeyError, TypeError):
        value = None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise InputError(
            f"parameter {label}: the profile has no number field {label!r}; give section.field"
            " of a profile file (e.g. gemv.port_bytes_per_axi_clock) or a name from --params"
        )
    return value


def design_cost(point: Mapping[str, Any], base: Any) -> float:
    """Cost units of `point`'s changes away from profile `base` (module docstring).

    Per parameter: ``cost_per`` units for each ``cost_step`` moved in the costly direction;
    a move the other way costs nothing and saves nothing (a smaller design is not credited,
    so the cheapest design reaching a rate is the smallest addition to the base). ``sfu_cycles``
    counts in halvings (1 unit each: 3.1 to 1 is about 1.6 units) and ``host_us`` likewise,
    since each halving of a rate is similar work. Step parameters other than ``sparse_down``
    cost nothing here: narrower weights and KV are a software choice with an accuracy price,
    which this measure does not weigh.
    """
    total = 0.0
    for name, value in point.items():
        p = PARAMS.get(name)
        if p is None or not p.cost_per:
            continue
        if name == "sparse_down":
            total += p.cost_per * float(value)
            continue
        b = base_value(name, base)
        if name in ("sfu_cycles", "host_us"):
            if value >= b:
                continue
            steps = 4.0 if value <= 0 else math.log2(b / value)
            total += p.cost_per * min(steps, 4.0)
            continue
        total += p.cost_per * max(0.0, p.cost_dir * (value - b) / p.cost_step)
    return round(total, 6)

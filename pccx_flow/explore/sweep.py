"""A sweep: a small TOML file (or ``--set key=a,b,c``) and the points it samples.

A sweep file::

    [sweep]
    profile = "v002-spec"          # base profile: a built-in name or a .toml file
    preset = "e4b"
    sampling = "lhs"               # grid, lhs (Latin hypercube) or random
    points = 500                   # lhs and random only
    seed = 0
    policies = ["heft"]            # best of these per point
    memory = true                  # schedule within L2 (as `pccx-flow schedule` does)

    [params]
    gemv_lanes = [4, 8, 16]                 # a list: these values
    core_mhz = { min = 200, max = 600 }     # a range: continuous (lhs, random) ...
    weight_ports = { min = 2, max = 8, steps = 4 }   # ... or `steps` values for a grid
    position = 1023                         # a single value: fixed

Every key of ``[params]`` is a parameter of `pccx_flow.explore.params`. Everything wrong in
a file is one `InputError` line naming the key and what to write instead.

Sampling: *grid* takes every combination of every parameter's values (lists, or ranges with
``steps``). *lhs* cuts each parameter into ``points`` strata and takes one value from each,
the strata shuffled per parameter with the seed (McKay, Beckman, Conover 1979); a list
parameter maps the strata onto its values in order, so each value gets an equal share.
*random* draws each parameter independently. An integer parameter is rounded; a point that
repeats another is kept once.
"""

from __future__ import annotations

import itertools
import random
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pccx_flow.errors import InputError
from pccx_flow.explore.params import PARAMS, check_value

SAMPLINGS = ("grid", "lhs", "random")
MAX_POINTS = 100_000
MAX_SWEEP_BYTES = 1 << 16
_SWEEP_KEYS = {"profile", "preset", "sampling", "points", "seed", "policies", "memory"}


@dataclass(frozen=True)
class Axis:
    """One swept parameter: explicit values, or a range [lo, hi] (with `steps` for a grid)."""

    name: str
    values: tuple = ()
    lo: float | None = None
    hi: float | None = None
    steps: int | None = None

    def grid_values(self) -> tuple:
        if self.values:
            return self.values
        if self.steps is None:
            raise InputError(
                f"parameter {self.name}: a grid needs values; give a list or add steps = N"
                " to its range"
            )
        if self.steps == 1:
            return (_cast(self.name, self.lo),)
        span = (self.hi - self.lo) / (self.steps - 1)
        return tuple(dict.fromkeys(_cast(self.name, self.lo + i * span)
                                   for i in range(self.steps)))  # fmt: skip

    def at(self, u: float) -> Any:
        """The value at quantile `u` in [0, 1)."""
        if self.values:
            return self.values[min(int(u * len(self.values)), len(self.values) - 1)]
        return _cast(self.name, self.lo + u * (self.hi - self.lo))


@dataclass
class Sweep:
    """A parsed sweep (see the module docstring for the fields)."""

    axes: list[Axis]
    profile: str = "v002-spec"
    preset: str = "e4b"
    sampling: str = "grid"
    points: int = 0
    seed: int = 0
    policies: list[str] = field(default_factory=lambda: ["heft", "critical-path"])
    memory: bool = True


def _cast(name: str, value: float) -> Any:
    p = PARAMS.get(name)
    if p is not None and p.kind == "int":
        return int(round(value))
    return round(float(value), 9)


def parse_axis(name: str, spec: Any, where: str) -> Axis:
    """One ``[params]`` entry as an `Axis`, every value checked."""
    if isinstance(spec, list):
        if not spec:
            raise InputError(f"{where}: parameter {name} has an empty list; give values")
        values = tuple(dict.fromkeys(check_value(name, v) for v in spec))
        return Axis(name, values=values)
    if isinstance(spec, dict):
        unknown = set(spec) - {"min", "max", "steps"}
        if unknown or "min" not in spec or "max" not in spec:
            raise InputError(
                f"{where}: parameter {name}: a range is {{ min = A, max = B }} with an"
                " optional steps = N"
            )
        lo, hi = check_value(name, spec["min"]), check_value(name, spec["max"])
        if isinstance(lo, str) or hi < lo:
            raise InputError(f"{where}: parameter {name}: need min <= max, got {lo}..{hi}")
        steps = spec.get("steps")
        if steps is not None and (isinstance(steps, bool) or not isinstance(steps, int)
                                  or not 1 <= steps <= 1000):  # fmt: skip
            raise InputError(f"{where}: parameter {name}: steps must be an integer 1..1000")
        return Axis(name, lo=lo, hi=hi, steps=steps)
    return Axis(name, values=(check_value(name, spec),))


def parse_sweep_text(text: str, where: str) -> Sweep:
    """A sweep from TOML text; `where` names it in messages."""
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"sweep {where}: TOML syntax error: {exc}; fix that line") from None
    unknown = set(raw) - {"sweep", "params"}
    if unknown:
        raise InputError(f"sweep {where}: unknown table [{sorted(unknown)[0]}]; a sweep has "
                         "[sweep] and [params]")  # fmt: skip
    head = raw.get("sweep", {})
    params = raw.get("params", {})
    if not isinstance(head, dict) or not isinstance(params, dict):
        raise InputError(f"sweep {where}: [sweep] and [params] must be tables")
    bad = set(head) - _SWEEP_KEYS
    if bad:
        raise InputError(f"sweep {where}: unknown key sweep.{sorted(bad)[0]}; [sweep] has "
                         f"{', '.join(sorted(_SWEEP_KEYS))}")  # fmt: skip
    sweep = Sweep(axes=[parse_axis(k, v, f"sweep {where}") for k, v in params.items()])
    for key in _SWEEP_KEYS & set(head):
        setattr(sweep, key, head[key])
    check_sweep(sweep, f"sweep {where}")
    return sweep


def check_sweep(sweep: Sweep, where: str) -> None:
    """One line for a [sweep] field of the wrong kind."""
    for key, kind in (("profile", str), ("preset", str), ("sampling", str)):
        if not isinstance(getattr(sweep, key), kind):
            raise InputError(f"{where}: sweep.{key} must be a string")
    if sweep.sampling not in SAMPLINGS:
        raise InputError(f"{where}: sweep.sampling {sweep.sampling!r}: give one of "
                         f"{', '.join(SAMPLINGS)}")  # fmt: skip
    for key, lo, hi in (("points", 0, MAX_POINTS), ("seed", 0, 2**32 - 1)):
        v = getattr(sweep, key)
        if isinstance(v, bool) or not isinstance(v, int) or not lo <= v <= hi:
            raise InputError(f"{where}: sweep.{key} must be an integer {lo}..{hi}")
    if sweep.sampling != "grid" and sweep.points < 1:
        raise InputError(f"{where}: {sweep.sampling} sampling needs sweep.points = N (N >= 1)")
    pol = sweep.policies
    if isinstance(pol, str):
        sweep.policies = pol = [p for p in pol.split(",") if p]
    if not isinstance(pol, list) or not pol or not all(isinstance(p, str) for p in pol):
        raise InputError(f"{where}: sweep.policies must be a list of policy names")
    if not isinstance(sweep.memory, bool):
        raise InputError(f"{where}: sweep.memory must be true or false")


def read_sweep(path: Path) -> Sweep:
    """A sweep file, read safely (a regular, small file) and parsed."""
    from pccx_flow import files

    try:
        with files.open_regular(path) as f:
            data = f.read(MAX_SWEEP_BYTES + 1)
    except files.NotRegularFile:
        raise InputError(f"sweep {path} is not a regular file; give a .toml file") from None
    except OSError as exc:
        raise InputError(f"cannot read sweep {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_SWEEP_BYTES:
        raise InputError(f"sweep {path} is larger than 64 KiB; a sweep is a small TOML file")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise InputError(f"sweep {path} is not UTF-8 text; give a TOML file") from None
    return parse_sweep_text(text, str(path))


def parse_set(items: list[str]) -> list[Axis]:
    """``--set key=a,b,c`` (values) or ``--set key=lo:hi`` (a range) as axes."""
    out = []
    for item in items:
        name, eq, rest = item.partition("=")
        name = name.strip()
        if not eq or not name or not rest.strip():
            raise InputError(f"--set {item!r}: write key=a,b,c or key=lo:hi, e.g. gemv_lanes=4,8")
        if ":" in rest and "," not in rest:
            lo, _, hi = rest.partition(":")
            out.append(parse_axis(name, {"min": _number(name, lo), "max": _number(name, hi)},
                                  "--set"))  # fmt: skip
        else:
            values = [_number(name, v) for v in rest.split(",") if v.strip()]
            out.append(parse_axis(name, values, "--set"))
    return out


def _number(name: str, text: str) -> Any:
    text = text.strip()
    p = PARAMS.get(name)
    if p is not None and p.kind == "choice":
        return text
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        raise InputError(f"--set {name}: {text!r} is not a number") from None


def merge_axes(axes: list[Axis], extra: list[Axis]) -> list[Axis]:
    """`axes` with those of `extra` replacing any of the same name (``--set`` wins)."""
    names = {a.name for a in extra}
    return [a for a in axes if a.name not in names] + extra


def sample(sweep: Sweep) -> list[dict[str, Any]]:
    """The points of `sweep`, each ``{param: value}``, duplicates removed, order kept."""
    axes = sweep.axes
    if not axes:
        return [{}]
    if sweep.sampling == "grid":
        grids = [a.grid_values() for a in axes]
        total = 1
        for g in grids:
            total *= len(g)
        if total > MAX_POINTS:
            raise InputError(f"the grid has {total:,} points (over {MAX_POINTS:,}); give fewer "
                             "values or use sampling = lhs")  # fmt: skip
        points = [dict(zip([a.name for a in axes], combo, strict=True))
                  for combo in itertools.product(*grids)]  # fmt: skip
    else:
        rng = random.Random(sweep.seed)
        n = sweep.points
        cols = []
        for a in axes:
            if sweep.sampling == "lhs":
                strata = list(range(n))
                rng.shuffle(strata)
                cols.append([a.at((s + rng.random()) / n) for s in strata])
            else:
                cols.append([a.at(rng.random()) for _ in range(n)])
        points = [{a.name: cols[j][i] for j, a in enumerate(axes)} for i in range(n)]
    seen, out = set(), []
    for p in points:
        key = tuple(sorted(p.items()))
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out

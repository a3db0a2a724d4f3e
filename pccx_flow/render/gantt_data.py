"""The data every form of a Gantt chart draws, and how it travels as plain JSON.

`GanttData` is built by `pccx_flow.render.gantt.gantt_data` and drawn by the Bokeh builder
(`gantt_bokeh`) and the matplotlib one (`gantt_mpl`); it lives in a module of its own so the
builders and the module that picks one of them import it from here and not from each other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields


@dataclass(frozen=True)
class OccupancyRow:
    """A step series drawn as one extra row under the lanes: what something holds over time.

    ``points`` are ``(cycle, value)`` pairs, each value holding until the next point;
    ``capacity`` is the most it can hold (drawn as the row's top), ``unit`` labels values.
    """

    name: str
    points: Sequence[tuple[float, float]]
    capacity: float
    unit: str = ""


@dataclass(frozen=True)
class GanttData:
    """What every form of the chart draws, as plain data (`gantt_payload` makes it JSON)."""

    title: str
    subtitle: str
    lanes: list[dict]  # {"name", "lane_class", "busy"}
    bars: list[dict]  # {"node", "lane", "row", "start", "finish", "block", "layer", "critical",
    #                    "op", "kernel"}
    layers: list[tuple[int, int]]  # (layer, first start cycle)
    makespan: int
    core_hz: float | None
    profile: str
    critical_source: str
    occupancy: list[OccupancyRow] = field(default_factory=list)


def gantt_payload(data: GanttData) -> dict:
    """`data` as plain JSON/msgpack-able values (what the dashboard is sent per step).

    Shallow on purpose: the bars are already plain dicts, and `dataclasses.asdict` deep-
    copies every one (1.5 s for a `tiny` step's 2,400 bars)."""
    out = {f.name: getattr(data, f.name) for f in fields(data)}
    out["layers"] = [list(x) for x in data.layers]
    out["occupancy"] = [
        {"name": r.name, "points": [list(p) for p in r.points], "capacity": r.capacity,
         "unit": r.unit}
        for r in data.occupancy
    ]  # fmt: skip
    return out


def gantt_from_payload(payload: dict) -> GanttData:
    """The inverse of `gantt_payload`."""
    values = dict(payload)
    values["layers"] = [tuple(x) for x in values.get("layers", ())]
    values["occupancy"] = [
        OccupancyRow(r["name"], [tuple(p) for p in r["points"]], r["capacity"], r.get("unit", ""))
        for r in values.get("occupancy", ())
    ]
    return GanttData(**values)


def lane_label(lane: dict) -> str:
    """The row label of a lane: its name and busy share, e.g. ``gemv0 37%``."""
    return f"{lane['name']} {lane['busy']:.0%}"

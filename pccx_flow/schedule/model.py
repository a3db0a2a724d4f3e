"""The result of scheduling: which lane runs each node, from when to when, holding what.

Plain immutable records with a JSON form, so a schedule can be written, re-read and checked
by `validate` without the policy that made it. Times are integer cycles at the profile's core
clock; they are model estimates, never measurements.
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from pccx_flow import atomic


@dataclass(frozen=True)
class Lane:
    """One execution lane: a name (``gemv0``) and the class of ops it runs (``gemv``)."""

    name: str
    lane_class: str


class Slot(NamedTuple):
    """One node's placement: lane, [start, finish) in cycles, and pool instances held.

    A named tuple rather than a frozen dataclass: a long-context step places 32k nodes,
    and a frozen dataclass, set field by field through ``object.__setattr__``, takes about
    2.5x as long to build (`heft` at position 8191: 0.975x the time with this)."""

    node: Hashable
    lane: str
    start: int
    finish: int
    resources: tuple[str, ...] = ()

    @property
    def duration(self) -> int:
        return self.finish - self.start

    def to_dict(self) -> dict:
        return {
            "node": self.node,
            "lane": self.lane,
            "start": self.start,
            "finish": self.finish,
            "resources": list(self.resources),
        }


@dataclass
class Schedule:
    """Every node of a problem placed on a lane by one policy, for one hardware profile."""

    policy: str
    profile: str
    lanes: tuple[Lane, ...]
    slots: dict[Hashable, Slot] = field(default_factory=dict)
    # Cycles each node waited for a capacity (L2) after its inputs were ready; only nodes
    # that waited. Informational: the validator checks occupancy, not this.
    memory_wait: dict[Hashable, int] = field(default_factory=dict)

    @property
    def makespan(self) -> int:
        """Cycles from the first start (time 0) to the last finish."""
        return max((s.finish for s in self.slots.values()), default=0)

    def order(self) -> list[Slot]:
        """Slots by start time, then lane order, then finish (the order an issuer walks)."""
        lane_pos = {lane.name: i for i, lane in enumerate(self.lanes)}
        return sorted(
            self.slots.values(),
            key=lambda s: (s.start, lane_pos.get(s.lane, len(lane_pos)), s.finish, str(s.node)),
        )

    def lane_slots(self) -> dict[str, list[Slot]]:
        """Each lane's slots in start order (lanes with nothing on them map to [])."""
        out: dict[str, list[Slot]] = {lane.name: [] for lane in self.lanes}
        for slot in self.order():
            out.setdefault(slot.lane, []).append(slot)
        return out

    def to_dict(self) -> dict:
        return {
            "policy": self.policy,
            "profile": self.profile,
            "time_unit": "cycles (model estimate)",
            "makespan_cycles": self.makespan,
            "lanes": [{"name": ln.name, "lane_class": ln.lane_class} for ln in self.lanes],
            "slots": [s.to_dict() for s in self.order()],
        }

    def to_json(self, path: str | Path | None = None, **extra: object) -> str:
        """The schedule as JSON text (plus any `extra` top-level keys); written if `path`."""
        data = self.to_dict()
        data.update(extra)
        text = json.dumps(data, indent=1, default=str)
        if path is not None:
            atomic.write_text(Path(path), text + "\n")
        return text

    @classmethod
    def from_dict(cls, data: dict) -> Schedule:
        lanes = tuple(Lane(d["name"], d["lane_class"]) for d in data["lanes"])
        slots = {
            s["node"]: Slot(
                s["node"],
                s["lane"],
                int(s["start"]),
                int(s["finish"]),
                tuple(s.get("resources", ())),
            )
            for s in data["slots"]
        }
        return cls(data["policy"], data["profile"], lanes, slots)

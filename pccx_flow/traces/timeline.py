"""A timeline: what ran on which lane from which cycle for how long, independent of its source.

Schedules (list-scheduled model estimates), timing replays and, one day, traces measured on a
board all reduce to the same plain data, so one writer per file format and one `diff` serve
them all. Times are integer cycles at ``clock_hz``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

# pccx-lab's event type ids (crates/core/src/trace.rs `event_type_id` in pccxai/pccx-lab).
UNKNOWN, MAC_COMPUTE, DMA_READ, DMA_WRITE, SYSTOLIC_STALL, BARRIER_SYNC, API_CALL = range(7)
EVENT_TYPE_NAMES = (
    "UNKNOWN",
    "MAC_COMPUTE",
    "DMA_READ",
    "DMA_WRITE",
    "SYSTOLIC_STALL",
    "BARRIER_SYNC",
    "API_CALL",
)


@dataclass(frozen=True)
class Event:
    """One busy interval of one lane."""

    lane: str
    start: int
    duration: int
    kind: int = UNKNOWN  # a pccx-lab event type id
    name: str = ""  # the graph node (or instruction) it came from

    @property
    def finish(self) -> int:
        return self.start + self.duration


@dataclass
class Timeline:
    """Events on named lanes; `source` says what produced it (and that it is an estimate)."""

    lanes: list[str]
    events: list[Event] = field(default_factory=list)
    clock_hz: float | None = None
    source: str = ""

    @property
    def makespan(self) -> int:
        return max((e.finish for e in self.events), default=0)

    def busy(self) -> dict[str, int]:
        """Cycles each lane is busy (overlapping events of one lane counted once)."""
        by_lane: dict[str, list[tuple[int, int]]] = {lane: [] for lane in self.lanes}
        for e in self.events:
            by_lane.setdefault(e.lane, []).append((e.start, e.finish))
        out = {}
        for lane, spans in by_lane.items():
            total, end = 0, None
            for a, b in sorted(spans):
                if end is None or a >= end:
                    total += b - a
                    end = b
                elif b > end:
                    total += b - end
                    end = b
            out[lane] = total
        return out


def event_kind(attrs: dict) -> int:
    """pccx-lab's event type of a graph node: GEMV/GEMM compute, MEMCPY in or out."""
    op = attrs.get("op")
    if op in ("GEMV", "GEMM"):
        return MAC_COMPUTE
    if op == "MEMCPY":
        func = str(attrs.get("func") or attrs.get("kernel") or "")
        return DMA_WRITE if "write" in func else DMA_READ
    return UNKNOWN  # CVO, MEMSET and host steps have no pccx-lab type of their own


def timeline_from_schedule(schedule, graph=None, clock_hz: float | None = None) -> Timeline:
    """A `Schedule`'s slots as a timeline (event kinds from the graph's node ops)."""
    from pccx_flow.schedule.metrics import estimate_label

    nodes = graph.nodes if graph is not None else {}
    events = [
        Event(slot.lane, int(slot.start), int(slot.duration), event_kind(nodes.get(slot.node, {})),
              str(slot.node))
        for slot in schedule.order()
    ]  # fmt: skip
    return Timeline(
        lanes=[lane.name for lane in schedule.lanes],
        events=events,
        clock_hz=clock_hz,
        source=f"pccx-flow {schedule.policy} schedule ({estimate_label(schedule.profile)})",
    )

"""Compare two timelines: makespan, per-lane busy time, and where they first part ways.

Meant for holding one timeline against another of the same step: a list schedule against a
replay of its program, two policies, or (one day) a trace measured on a board against the
model. Events are matched by name (the graph node or instruction) when both timelines carry
names, else by their position in start order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from pccx_flow.errors import TraceError
from pccx_flow.traces.timeline import Event, Timeline


@dataclass(frozen=True)
class Divergence:
    """The first event (in A's start order) that B runs differently, or lacks."""

    index: int  # position in A's start order
    name: str
    a: Event
    b: Event | None

    def describe(self) -> str:
        a = self.a
        if self.b is None:
            return f"event {self.index} ({self.name or 'unnamed'}) is in A only"
        b = self.b
        parts = []
        if a.lane != b.lane:
            parts.append(f"lane {a.lane} vs {b.lane}")
        if a.start != b.start:
            parts.append(f"start {a.start:,} vs {b.start:,} ({b.start - a.start:+,} cycles)")
        if a.duration != b.duration:
            parts.append(f"duration {a.duration:,} vs {b.duration:,}")
        return f"event {self.index} ({self.name or 'unnamed'}): " + ", ".join(parts)


def _ordered(t: Timeline) -> list[Event]:
    pos = {lane: i for i, lane in enumerate(t.lanes)}
    return sorted(t.events, key=lambda e: (e.start, pos.get(e.lane, len(pos)), e.name))


def first_divergence(a: Timeline, b: Timeline) -> Divergence | None:
    """The first event of `a` that `b` places on another lane, at another time or length."""
    ea, eb = _ordered(a), _ordered(b)
    named = all(e.name for e in ea) and all(e.name for e in eb)
    by_name = {e.name: e for e in eb} if named else {}
    for i, e in enumerate(ea):
        other = by_name.get(e.name) if named else (eb[i] if i < len(eb) else None)
        if other is None or (other.lane, other.start, other.duration) != (
            e.lane,
            e.start,
            e.duration,
        ):
            return Divergence(i, e.name, e, other)
    return None


def diff_timelines(a: Timeline, b: Timeline) -> dict:
    """Makespans, per-lane busy cycles of both, and the first divergence, as plain data."""
    busy_a, busy_b = a.busy(), b.busy()
    lanes = list(dict.fromkeys([*a.lanes, *b.lanes]))
    div = first_divergence(a, b)
    only_b = len(b.events) - len(a.events)
    return {
        "a": {"source": a.source, "makespan_cycles": a.makespan, "events": len(a.events)},
        "b": {"source": b.source, "makespan_cycles": b.makespan, "events": len(b.events)},
        "makespan_ratio_b_over_a": b.makespan / a.makespan if a.makespan else None,
        "busy_cycles": {lane: [busy_a.get(lane, 0), busy_b.get(lane, 0)] for lane in lanes},
        "first_divergence": None if div is None else div.describe(),
        "identical": div is None and only_b == 0,
    }


def format_diff(d: dict) -> str:
    """The diff as a short table for a terminal."""
    lines = [
        f"{k.upper()}  {t['source'] or '?'}: makespan {t['makespan_cycles']:,} cycles, "
        f"{t['events']:,} events"
        for k, t in (("a", d["a"]), ("b", d["b"]))
    ]
    if d["makespan_ratio_b_over_a"] is not None:
        lines.append(f"makespan B/A {d['makespan_ratio_b_over_a']:.4f}")
    lines.append(f"{'lane':<10}{'busy A':>16}{'busy B':>16}{'B - A':>14}")
    for lane, (x, y) in d["busy_cycles"].items():
        lines.append(f"{lane:<10}{x:>16,}{y:>16,}{y - x:>+14,}")
    if d["identical"]:
        lines.append("the two timelines are identical, event for event")
    else:
        lines.append(f"first divergence: {d['first_divergence'] or 'B has extra events'}")
    return "\n".join(lines)


def read_timeline(path: str | Path) -> Timeline:
    """A ``.pccx`` file or a Chrome trace JSON (as `schedule --trace` writes) as a timeline."""
    from pccx_flow.traces.pccx_file import MAGIC, read_pccx

    path = Path(path)
    try:
        with open(path, "rb") as f:
            head = f.read(4)
    except OSError as exc:
        raise TraceError(f"cannot read {path}: {exc.strerror or exc}") from None
    if head == MAGIC:
        return read_pccx(path)
    return read_chrome_trace(path)


def read_chrome_trace(path: Path) -> Timeline:
    """Complete events (``ph: X``) of a Chrome trace; lanes from its thread names.

    Cycles come from ``args.start_cycle`` / ``args.cycles`` where present (pccx-flow's own
    traces), else from microseconds at the trace's clock (1 MHz when it names none).
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        events = data["traceEvents"] if isinstance(data, dict) else data
        if not isinstance(events, list):
            raise TypeError("traceEvents is not a list")
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise TraceError(f"{path} is neither a .pccx file nor Chrome trace JSON ({exc})") from None
    names: dict[tuple, str] = {}
    for e in events:
        if isinstance(e, dict) and e.get("ph") == "M" and e.get("name") == "thread_name":
            names[(e.get("pid"), e.get("tid"))] = str((e.get("args") or {}).get("name"))
    out, lanes = [], []
    for e in events:
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue
        lane = names.get((e.get("pid"), e.get("tid")), f"tid{e.get('tid')}")
        if lane not in lanes:
            lanes.append(lane)
        args = e.get("args") or {}
        try:
            start = int(args["start_cycle"]) if "start_cycle" in args else round(e["ts"])
            dur = int(args["cycles"]) if "cycles" in args else round(e.get("dur", 0))
        except (KeyError, TypeError, ValueError) as exc:
            raise TraceError(f"{path}: an event has no usable time ({exc})") from None
        out.append(Event(lane, start, dur, 0, str(e.get("name", ""))))
    other = data.get("otherData", {}) if isinstance(data, dict) else {}
    declared = [names[k] for k in sorted(names, key=lambda k: (str(k[0]), str(k[1])))]
    ordered = list(dict.fromkeys([*declared, *lanes]))  # the trace's own lane order first
    return Timeline(ordered, out, None, str(other.get("estimate") or path.name))

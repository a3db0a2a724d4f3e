"""A step run on a device beside its plan: per-lane bars, makespans, the largest deviations.

The planned side is the step's schedule (model-estimate cycles on the profile, turned into
seconds at its core clock). The device side is what the session recorded per program step
(`pccx_flow.board.device.session`), laid end to end in program order as the host lived
them, since `dispatch` runs one batch at a time and waits for its DONE:

- a batch lasts its device time: on the fake device its modelled cycles, each word drawn at
  its own modelled interval; on a board the kick-to-DONE wall time, every word of the batch
  drawn across that whole interval (the host sees no finer time);
- a host step lasts this host's wall time for it (on the fake device: this CPU's, not a
  KV260's ARM cores).

Words are drawn on the lane the schedule gave their graph node, so the rows line up with
the plan's. Everything is plain data, sent to the lanes page and drawn there
(`pccx_flow.dashboard.device_page`).
"""

from __future__ import annotations

from collections import defaultdict

MAX_DEVIATIONS = 5


def _union(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of intervals."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def source_label(records: list[dict], profile_name: str, issue_model: str | None) -> str:
    """What the device times are, in words the page prints."""
    if any(r.get("source") == "modelled" for r in records):
        return (f"fake device: modelled cycles ({issue_model} issue model; a model estimate on "
                f"profile {profile_name}, not a measurement)")  # fmt: skip
    return "board: wall time from each kick to its DONE, measured by the host"


def device_view(program, schedule, records: list[dict], *, core_hz: float, step: int,
                source: str) -> dict:  # fmt: skip
    """The page's payload for one step (see the module docstring); times in seconds."""
    lane_of = {str(n): str(s.lane) for n, s in schedule.slots.items()}
    first_of_class: dict[str, str] = {}
    for lane in schedule.lanes:
        first_of_class.setdefault(str(lane.name).rstrip("0123456789"), str(lane.name))
    planned = [
        {"lane": str(s.lane), "start": s.start / core_hz, "stop": s.finish / core_hz,
         "node": str(n)}  # fmt: skip
        for n, s in schedule.slots.items()
    ]
    measured: list[dict] = []
    cursor = 0.0
    for rec in records:
        if rec["kind"] == "batch":
            if "words" in rec:
                for _, node, engine, a, b in rec["words"]:
                    # a word the lowering added (a DONE marker) runs on its engine's first lane
                    lane = lane_of.get(node) or first_of_class.get(engine, engine)
                    measured.append({"lane": lane, "start": cursor + a, "stop": cursor + b,
                                     "node": node})  # fmt: skip
            else:  # the graph's nodes of the batch (a board cannot time an added word apart)
                nodes = program.nodes[rec["first"] : rec["last"] + 1]
                for node in dict.fromkeys(n for n in nodes if n in lane_of):
                    measured.append({"lane": lane_of[node], "start": cursor,
                                     "stop": cursor + rec["device_s"], "node": node})  # fmt: skip
            cursor += rec["device_s"]
        elif rec["kind"] == "host":
            node = str(rec.get("node") or "host")
            measured.append({"lane": lane_of.get(node, "host0"), "start": cursor,
                             "stop": cursor + rec["wall_s"], "node": node})  # fmt: skip
            cursor += rec["wall_s"]
    return {
        "step": step,
        "position": program.meta.get("position"),
        "profile": program.meta.get("profile"),
        "policy": program.meta.get("policy"),
        "source": source,
        "planned_makespan_s": schedule.makespan / core_hz,
        "measured_makespan_s": cursor,
        "device_s": sum(r["device_s"] for r in records if r["kind"] == "batch"),
        "host_s": sum(r["wall_s"] for r in records if r["kind"] == "host"),
        "planned": planned,
        "measured": measured,
        "lanes": lane_shares(planned, measured, [str(lane.name) for lane in schedule.lanes]),
        "deviations": deviations(planned, measured),
    }


def lane_shares(planned: list[dict], measured: list[dict], order: list[str]) -> list[dict]:
    """Per lane, busy seconds planned and on the device (the union of its bars)."""
    busy: dict[str, dict[str, list]] = defaultdict(lambda: {"planned": [], "measured": []})
    for side, bars in (("planned", planned), ("measured", measured)):
        for b in bars:
            busy[b["lane"]][side].append((b["start"], b["stop"]))
    lanes = [ln for ln in order if ln in busy] + sorted(set(busy) - set(order))
    return [
        {"lane": ln, "planned_s": _union(busy[ln]["planned"]),
         "measured_s": _union(busy[ln]["measured"])}  # fmt: skip
        for ln in lanes
    ]


def deviations(planned: list[dict], measured: list[dict], n: int = MAX_DEVIATIONS) -> list[dict]:
    """The `n` graph nodes whose device time differs most from their planned time."""
    plan = {b["node"]: (b["lane"], b["stop"] - b["start"]) for b in planned}
    spans: dict[str, list] = defaultdict(list)
    for b in measured:
        spans[b["node"]].append((b["start"], b["stop"]))
    rows = []
    for node, intervals in spans.items():
        if node not in plan:
            continue
        lane, want = plan[node]
        got = _union(intervals)
        rows.append({"node": node, "lane": lane, "planned_s": want, "measured_s": got,
                     "delta_s": got - want})  # fmt: skip
    rows.sort(key=lambda r: -abs(r["delta_s"]))
    return rows[:n]

"""Schedule JSON round trip, Chrome trace and the 80-column summary."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from pccx_flow.hardware.profile import load_profile
from pccx_flow.schedule.metrics import schedule_metrics
from pccx_flow.schedule.model import Schedule
from pccx_flow.schedule.problem import problem_from_graph
from pccx_flow.schedule.registry import run_policy
from pccx_flow.schedule.report import format_policy_list, format_summary
from pccx_flow.schedule.trace import chrome_trace, write_chrome_trace
from pccx_flow.schedule.validate import validate_schedule


def scheduled(graph, profile_name="v002-spec", policy="critical-path"):
    profile = load_profile(profile_name)
    problem = problem_from_graph(graph, profile)
    return profile, problem, run_policy(problem, profile, policy=policy)


def test_schedule_json_round_trip(decode_graph, tmp_path):
    _, problem, schedule = scheduled(decode_graph)
    path = tmp_path / "s.json"
    schedule.to_json(path, note="x")
    data = json.loads(path.read_text())
    assert data["note"] == "x" and data["makespan_cycles"] == schedule.makespan
    again = Schedule.from_dict(data)
    assert again.slots == schedule.slots and again.lanes == schedule.lanes
    validate_schedule(again, problem)
    starts = [s["start"] for s in data["slots"]]
    assert starts == sorted(starts)


def test_order_is_by_start_then_lane(decode_graph):
    _, _, schedule = scheduled(decode_graph)
    lane_pos = {ln.name: i for i, ln in enumerate(schedule.lanes)}
    keys = [(s.start, lane_pos[s.lane]) for s in schedule.order()]
    assert keys == sorted(keys)


def test_chrome_trace_has_one_track_per_lane_and_every_node(decode_graph, tmp_path):
    profile, problem, schedule = scheduled(decode_graph)
    path = write_chrome_trace(schedule, tmp_path / "t.json", decode_graph, profile.core_hz)
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    names = {e["args"]["name"]: e["tid"] for e in events if e.get("name") == "thread_name"}
    assert list(names) == [ln.name for ln in schedule.lanes]
    assert len(set(names.values())) == len(names)
    spans = [e for e in events if e["ph"] == "X"]
    assert len(spans) == len(problem)
    by_node = {e["name"]: e for e in spans}
    us = 1e6 / profile.core_hz
    for node, slot in schedule.slots.items():
        e = by_node[node]
        assert e["tid"] == names[slot.lane]
        assert e["ts"] == slot.start * us and e["dur"] == slot.duration * us
        assert e["args"]["start_cycle"] == slot.start
    process = next(e for e in events if e.get("name") == "process_name")
    assert "model estimate, profile v002-spec" in process["args"]["name"]


def test_trace_without_a_clock_says_cycles():
    from pccx_flow.schedule.model import Lane, Slot

    s = Schedule("p", "prof", (Lane("a", "c"),), {"n": Slot("n", "a", 2, 5)})
    trace = chrome_trace(s)
    assert trace["otherData"]["time_unit"].startswith("cycles")
    assert [e["ts"] for e in trace["traceEvents"] if e["ph"] == "X"] == [2.0]


def test_summary_fits_80_columns_and_labels_times(decode_graph):
    profile, problem, schedule = scheduled(decode_graph, "v002-as-built")
    metrics = schedule_metrics(schedule, problem, profile)
    text = format_summary(metrics, {"preset": "synthetic", "position": 7})
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    assert "policy critical-path, profile v002-as-built" in lines[0]
    assert f"{schedule.makespan:,} cycles" in text
    assert "model estimate, profile v002-as-built" in text
    assert "tok/s" in text and "<- largest" in text
    assert "LAuReL" in text and "PLE slack" in text
    assert text.rstrip().endswith("no pccx board has been timed.")


def test_blocked_causes_that_round_to_nothing_are_left_out(decode_graph):
    """A cause under 0.05 % of the makespan printed as "pools 0.0 %" and pushed the line
    past 80 columns, where it was cut."""
    profile, problem, schedule = scheduled(decode_graph)
    metrics = schedule_metrics(schedule, problem, profile)
    span = metrics["makespan_cycles"]
    metrics["critical_path"]["blocked_cycles"] = {
        "lane": span * 0.015, "lane+pool": span * 0.883, "pool": span * 0.0004,
    }  # fmt: skip
    line = next(x for x in format_summary(metrics, {}).splitlines() if "blocked by" in x)
    assert line.strip() == "ready but blocked by: lanes 1.5 %, lane+pools 88.3 % (of the makespan)"


def test_a_wait_for_room_on_the_critical_path_reads_memory(decode_graph):
    profile, problem, schedule = scheduled(decode_graph)
    metrics = schedule_metrics(schedule, problem, profile)
    span = metrics["makespan_cycles"]
    cp = metrics["critical_path"]
    cp["blocked_cycles"] = {"lane+pool": span * 0.6, "memory": span * 0.2}
    assert not any("memory:" in st["cause"] for st in cp["steps"])
    cp["steps"][1]["cause"] = cp["steps"][-1]["cause"] = "memory:l2+kv_slots"
    cp["steps"][2]["cause"] = "memory:l2"
    text = " ".join(x.strip() for x in format_summary(metrics, {}).splitlines())
    assert "ready but blocked by: lane+pools 60.0 %, memory 20.0 % (of the makespan)" in text
    assert "3 of them waited until room on l2, l2+kv_slots was freed" in text


def test_a_long_summary_line_wraps_after_a_comma_and_loses_nothing():
    from pccx_flow.schedule.report import _fit

    size = "size      32,575 nodes, 61,542 edges + 35,706 order-only (L2 read-ahead), 9 lanes"
    assert _fit(size).splitlines() == [
        "size      32,575 nodes, 61,542 edges + 35,706 order-only (L2 read-ahead),",
        "          9 lanes",
    ]
    blocked = "          ready but blocked by: lanes 0.5 %, lane+pools 90.4 %, pools 0.3 % (of it)"
    assert _fit(blocked).splitlines() == [
        "          ready but blocked by: lanes 0.5 %, lane+pools 90.4 %,",
        "            pools 0.3 % (of it)",
    ]
    name = "pkg.mod:" + "X" * 80  # a plugin's name longer than the room stays whole
    assert _fit(f"pccx-flow schedule: policy {name}, profile p").splitlines() == [
        "pccx-flow schedule: policy",
        f"          {name},",
        "          profile p",
    ]
    busy = "busiest   " + "L" * 72 + " 50.0 %  b 40.0 %"  # what follows it still wraps
    assert _fit(busy).splitlines() == ["busiest   " + "L" * 72, "          50.0 %  b 40.0 %"]
    names = ("gemv0", "gemv1", "host_lane_0", "sfu0", "dma0", "x")
    lanes = "busiest   " + "  ".join(f"{n} 9{k}.0 %" for k, n in enumerate(names))
    assert _fit(lanes).splitlines() == [  # between two columns, not "94.0" from its "%"
        "busiest   gemv0 90.0 %  gemv1 91.0 %  host_lane_0 92.0 %  sfu0 93.0 %",
        "          dma0 94.0 %  x 95.0 %",
    ]
    edge = "size      bbbbb " + "c" * 65 + " d"  # a space at column 81 is past the room
    assert _fit(edge).splitlines() == ["size      bbbbb", "          " + "c" * 65 + " d"]


@settings(max_examples=200, deadline=None)
@given(
    st.sampled_from(["", "  ", "          ", "makespan  "]),
    st.lists(
        st.tuples(
            st.from_regex(r"[a-z0-9.+%()]{1,20}", fullmatch=True),
            st.sampled_from(["", "", "", ","]),
        ).map("".join),
        min_size=1,
        max_size=40,
    ),
)
def test_wrapped_lines_fit_80_columns_and_join_back_to_the_line(head, words):
    from pccx_flow.schedule.report import WIDTH, _fit

    line = head + " ".join(words)
    out = _fit(line).splitlines()
    assert all(len(x) <= WIDTH for x in out), out
    assert " ".join([out[0], *(x.strip() for x in out[1:])]) == line


def test_policy_list_is_one_line_each():
    rows = [("a", "built-in", "first"), ("bb", "plugin m:C", "second")]
    text = format_policy_list(rows, default="a")
    assert text.splitlines() == ["a   first (default)", "bb  second [plugin]"]
    long = format_policy_list([("p", "plugin m:C", "x" * 200)], default="a")
    assert len(long) == 80 and long.endswith("... [plugin]")


def test_the_gap_to_the_pool_bound_splits_into_proven_idle_and_the_rest():
    from pccx_flow.schedule.report import gap_split_lines

    lines = gap_split_lines({"pool:p": 100, "pool_chain:p": 130, "lane_class:x": 90}, 200)
    assert lines == [
        "  gap to pool:p 100 cycles = 30 forced idle",
        "    (pool_chain proves it) + 70 no bound explains (policy, L2)",
    ]
    assert gap_split_lines({"pool:p": 100, "pool_chain:p": 130}, 100) == []  # no gap
    assert gap_split_lines({"pool:p": 100}, 200) == []  # no chain bound to split by
    with_capacity = {"pool:p": 100, "pool_chain:p": 130, "capacity_chain:p": 170}
    assert gap_split_lines(with_capacity, 200) == [
        "  gap to pool:p 100 cycles = 30 forced idle",
        "    (pool_chain proves it) + 40 forced by L2 capacity",
        "    (capacity_chain proves it) + 30 no bound explains",
    ]
    # a lane class walked as a resource splits the gap to its own work bound
    lanes = {"lane_class:g": 120, "pool_chain:g_lanes": 150, "pool:p": 100}
    assert gap_split_lines(lanes, 200) == [
        "  gap to lane_class:g 80 cycles = 30 forced idle",
        "    (pool_chain proves it) + 50 no bound explains (policy, L2)",
    ]


def test_a_larger_bound_of_another_resource_explains_its_part_of_a_gap():
    """v002-as-built at 1023: the GEMV lanes' chain (80.3 M) is above the weight ports'
    (78.0 M), so 2.3 M of the ports' gap is proven too; the ports' line once put it under
    "no bound explains" (2.9 M against the GEMV lanes' 0.6 M). A bound the makespan is
    below (not kept by the scheduler, `below_bounds`) proves nothing here."""
    from pccx_flow.schedule.report import gap_split_lines

    bounds = {"lane_class:gemv": 77, "pool_chain:gemv_lanes": 80, "pool:port": 75,
              "pool_chain:port": 78, "capacity_chain:port": 79, "bandwidth:ddr": 95}  # fmt: skip
    assert gap_split_lines(bounds, 81) == [
        "  gap to lane_class:gemv 4 cycles = 3 forced idle",
        "    (pool_chain proves it) + 1 no bound explains (policy, L2)",
        "  gap to pool:port 6 cycles = 3 forced idle",
        "    (pool_chain proves it) + 1 forced by L2 capacity",
        "    (capacity_chain proves it) + 1 forced by a larger bound",
        "    (pool_chain:gemv_lanes proves it) + 1 no bound explains",
    ]


def test_size_line_counts_the_graphs_edges_as_check_does_and_the_l2_ones_apart():
    """`check` counts the graph's edges; `schedule` within L2 adds order-only read-ahead
    edges. The size line names both, so the two commands' numbers add up."""
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.schedule.readahead import kv_stream_edges

    graph = build_decode_graph("tiny", layers=(0, 3), position=7)
    profile = load_profile("v002-spec")
    extra = len(set(kv_stream_edges(graph)) - set(graph.edges))
    assert extra > 0
    for memory, added in ((True, extra), (False, 0)):
        problem = problem_from_graph(graph, profile, memory=memory)
        metrics = schedule_metrics(run_policy(problem, profile, "critical-path"), problem, profile)
        size = next(x for x in format_summary(metrics, {}).splitlines() if x.startswith("size"))
        edges = f"{graph.number_of_edges():,} edges"
        assert size.endswith(edges + (f" + {added:,} order-only (L2 read-ahead), " if added
                                      else ", ") + f"{len(problem.lanes)} lanes"), size  # fmt: skip


def test_schedule_trace_has_counters_the_critical_flag_and_dependency_flows(tmp_path):
    """`schedule --trace` on a tiny step within L2: weight-port and L2 counter tracks, the
    critical path flagged, one flow per data edge from producer slice to consumer slice."""
    from pccx_flow.cli.main import main

    out = tmp_path / "t.json"
    argv = ["schedule", "--preset", "tiny", "--layers", "0:2", "--trace", str(out),
            "--json", str(tmp_path / "s.json")]  # fmt: skip
    assert main(argv) == 0
    events = json.loads(out.read_text())["traceEvents"]
    counters = {e["name"] for e in events if e["ph"] == "C"}
    assert counters == {"weight_port busy", "L2 bytes"}
    ports = [e["args"]["weight_port"] for e in events if e.get("name") == "weight_port busy"]
    assert max(ports) == 2 and min(ports) == 0
    assert max(e["args"]["L2"] for e in events if e.get("name") == "L2 bytes") > 0
    saved = json.loads((tmp_path / "s.json").read_text())
    critical = set(saved["metrics"]["critical_path"]["nodes"])
    flagged = {e["name"] for e in events if e["ph"] == "X" and e["args"].get("critical_path")}
    assert flagged == critical and critical
    spans = {e["name"]: e for e in events if e["ph"] == "X"}
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert starts.keys() == ends.keys() and len(starts) > len(spans) / 2
    for key, s in starts.items():
        f = ends[key]
        assert f["bp"] == "e" and s["ts"] <= f["ts"]
        # each end binds to a slice that starts there on its thread
        assert any(x["tid"] == f["tid"] and x["ts"] == f["ts"] for x in spans.values())

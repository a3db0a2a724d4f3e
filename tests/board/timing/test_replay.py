"""Timing replay: hand-built programs whose timing is worked out by hand, and a tiny step."""

from __future__ import annotations

import json
import math
import struct

import pytest

from pccx_flow.board.isa import KICK_MARKER, encode
from pccx_flow.board.program.files import Program, ProgramFileError
from pccx_flow.board.timing.footprint import footprints
from pccx_flow.board.timing.issue import RTL_WRITE_TO_DECODE
from pccx_flow.board.timing.replay import (
    replay,
    replay_all,
    replay_timeline,
    summary,
    time_slices,
)
from pccx_flow.errors import InputError, ProfileError
from pccx_flow.hardware.cost import node_cycles
from pccx_flow.hardware.profile import load_profile
from pccx_flow.traces.diff import diff_timelines
from pccx_flow.traces.pccx_file import write_pccx
from pccx_flow.traces.timeline import timeline_from_schedule

SPEC = load_profile("v002-spec")
ROWS, COLS = 64, 128
# v002-spec: 400 MHz core, 250 MHz AXI; [issue] 20 / 10 / 40 AXI clocks per write/kick/poll
WRITE, KICK, POLL = 32, 16, 64


def _gemv_cycles(profile) -> int:
    node = {"op": "GEMV", "lane_class": "gemv", "macs": ROWS * COLS,
            "weight_bytes": ROWS * COLS // 2 + 4 * ROWS}  # fmt: skip
    return node_cycles(node, profile)


def _program(words: list[int], steps: list[dict], streams: dict | None = None) -> Program:
    nodes = [None if w == KICK_MARKER else f"n{i}" for i, w in enumerate(words)]
    roles = ["kick" if w == KICK_MARKER else "node" for w in words]
    meta = {"config": "tiny", "profile": "v002-spec", "policy": "hand", "position": 0}
    return Program(words=words, nodes=nodes, roles=roles, steps=steps, meta=meta,
                   streams=streams or {})  # fmt: skip


def _weight(rows: int = ROWS, cols: int = COLS) -> dict:
    return {"weight": {"key": "w", "runs": rows, "run_bytes": cols // 2, "scale_bytes": 4 * rows}}


def two_gemvs(second_reads_first: bool = False) -> Program:
    """MEMSET size, MEMSET shape, GEMV a -> 100, GEMV (a or the first's output) -> 200."""
    size = encode("MEMSET", dest_cache="fmap_shape", slot=0, a=COLS, b=0, c=1)
    shape = encode("MEMSET", dest_cache="weight_shape", slot=1, a=ROWS, b=COLS, c=0)
    g1 = encode("GEMV", dest=100, src=0, size_ptr=0, shape_ptr=1, parallel_lane=1)
    src2 = 100 if second_reads_first else 0
    g2 = encode("GEMV", dest=200, src=src2, size_ptr=0, shape_ptr=1, parallel_lane=1)
    words = [size, shape, g1, g2, KICK_MARKER]
    steps = [{"kind": "batch", "start": 0, "end": 5}, {"kind": "fence", "reason": "end"}]
    return _program(words, steps, {2: _weight(), 3: _weight()})


def fence_end(t0: int, done: int) -> int:
    """The host polls from t0 every POLL cycles; the first poll issued at/after done ends it."""
    return t0 + (max(0, math.ceil((done - t0) / POLL)) + 1) * POLL


def test_two_independent_gemvs_overlap_under_spec_and_serialise_under_rtl():
    g = _gemv_cycles(SPEC)
    release = 4 * WRITE + KICK  # four words, then the kick
    # decode one per cycle: MEMSETs at release, release+1; the GEMVs at +2 and +3
    spec = replay(two_gemvs(), SPEC, "spec")
    starts = [p.start for p in spec.placed]
    assert starts == [release, release + 1, release + 2, release + 3]
    assert spec.placed[2].lane != spec.placed[3].lane
    assert spec.makespan == fence_end(release, release + 3 + g)
    # rtl: each word is decoded RTL_WRITE_TO_DECODE cycles after its write starts (the
    # controller does not wait for the kick; calibrated by cosim), and the second GEMV waits
    # for the first to complete (one load-path uop register)
    rtl = replay(two_gemvs(), SPEC, "rtl")
    at = [k * WRITE + RTL_WRITE_TO_DECODE for k in range(4)]
    assert [w[0] for w in rtl.writes] == [0, WRITE, 2 * WRITE, 3 * WRITE, 4 * WRITE]
    assert [p.start for p in rtl.placed] == [at[0], at[1], at[2], at[2] + g]
    assert rtl.placed[3].binding == "issue"
    assert rtl.counters["issue_stall_cycles"] == at[2] + g - at[3]
    assert rtl.makespan == fence_end(release, at[2] + 2 * g)
    # DONE comes only from CVO completion: this fence cannot be seen on the as-built RTL
    assert rtl.counters["blind_fences"] == 1
    assert "blind_fences" not in spec.counters
    dec = replay(two_gemvs(), SPEC, "decoupled")
    assert [p.start for p in dec.placed] == starts


def test_a_dependent_gemv_waits_for_its_input_in_every_model():
    g = _gemv_cycles(SPEC)
    release = 4 * WRITE + KICK
    for model in ("spec", "rtl", "decoupled"):
        r = replay(two_gemvs(second_reads_first=True), SPEC, model)
        # under rtl the first GEMV is decoded at its write, not at the kick
        first = 2 * WRITE + RTL_WRITE_TO_DECODE if model == "rtl" else release + 2
        assert r.placed[3].start == first + g, model
        assert r.makespan == fence_end(release, first + 2 * g)


def test_a_fence_costs_polls_until_done():
    word = encode("MEMSET", dest_cache="fmap_shape", slot=0, a=1)
    steps = [{"kind": "batch", "start": 0, "end": 2}, {"kind": "fence", "reason": "end"}]
    r = replay(_program([word, KICK_MARKER], steps), SPEC, "spec")
    release = WRITE + KICK
    # the MEMSET is done one cycle after the kick: the first poll misses it, the second sees it
    assert r.makespan == release + 2 * POLL
    assert r.counters["polls"] == 2 and r.counters["fence_cycles"] == 2 * POLL


def test_waiting_after_every_batch_as_dispatch_does_costs_a_drain_per_batch():
    # two batches of one GEMV each, then the end fence: dispatch's host waits for DONE after
    # each batch, so the second GEMV is only written once the first has finished
    size = encode("MEMSET", dest_cache="fmap_shape", slot=0, a=COLS, b=0, c=1)
    shape = encode("MEMSET", dest_cache="weight_shape", slot=1, a=ROWS, b=COLS, c=0)
    g1 = encode("GEMV", dest=100, src=0, size_ptr=0, shape_ptr=1, parallel_lane=1)
    g2 = encode("GEMV", dest=200, src=0, size_ptr=0, shape_ptr=1, parallel_lane=1)
    words = [size, shape, g1, KICK_MARKER, g2, KICK_MARKER]
    steps = [{"kind": "batch", "start": 0, "end": 4}, {"kind": "batch", "start": 4, "end": 6},
             {"kind": "fence", "reason": "end"}]  # fmt: skip
    prog = _program(words, steps, {2: _weight(), 4: _weight()})
    fences = replay(prog, SPEC, "spec")
    waits = replay(prog, SPEC, "spec", host_waits="every-batch")
    gemv = _gemv_cycles(SPEC)
    first_done = fences.placed[2].finish
    assert fences.placed[3].start < first_done  # written at once, runs on another lane
    second_release = fence_end(3 * WRITE + KICK, first_done) + WRITE + KICK
    assert waits.placed[3].start == second_release
    assert waits.makespan == fence_end(second_release, second_release + gemv)
    assert waits.counters["batch_waits"] == 2 and "batch_waits" not in fences.counters
    assert summary(waits)["host_waits"] == "every-batch"
    with pytest.raises(InputError, match="unknown host wait rule"):
        replay(prog, SPEC, "spec", host_waits="sometimes")


def test_the_command_fifo_fills_when_the_controller_cannot_drain_it():
    """rtl: 6 then 8 GEMVs; the second batch's words wait for the first's to leave the FIFO."""
    size = encode("MEMSET", dest_cache="fmap_shape", slot=0, a=COLS, b=0, c=1)
    shape = encode("MEMSET", dest_cache="weight_shape", slot=1, a=ROWS, b=COLS, c=0)
    gemvs = [
        encode("GEMV", dest=100 + 20 * k, src=0, size_ptr=0, shape_ptr=1, parallel_lane=1)
        for k in range(14)
    ]
    words = [size, shape, *gemvs[:6], KICK_MARKER, *gemvs[6:], KICK_MARKER]
    steps = [{"kind": "batch", "start": 0, "end": 9}, {"kind": "batch", "start": 9, "end": 18},
             {"kind": "fence", "reason": "end"}]  # fmt: skip
    streams = {i: _weight() for i, w in enumerate(words) if w >> 60 == 0 and w != KICK_MARKER}
    prog = _program(words, steps, streams)
    rtl = replay(prog, SPEC, "rtl")
    spec = replay(prog, SPEC, "spec")
    assert rtl.counters.get("fifo_full_waits", 0) >= 1
    assert "fifo_full_waits" not in spec.counters  # the spec decoder drains 1 per cycle
    assert rtl.makespan > spec.makespan


def test_a_batch_deeper_than_the_fifo_is_refused():
    word = encode("MEMSET", dest_cache="fmap_shape", slot=0, a=1)
    words = [word] * 9 + [KICK_MARKER]
    steps = [{"kind": "batch", "start": 0, "end": 10}]
    with pytest.raises(ProgramFileError, match="command FIFO holds 8"):
        replay(_program(words, steps), SPEC, "rtl")


def test_a_slot_read_before_any_memset_is_one_error():
    g = encode("GEMV", dest=100, src=0, size_ptr=5, shape_ptr=6, parallel_lane=1)
    prog = _program([g, KICK_MARKER], [{"kind": "batch", "start": 0, "end": 2}])
    with pytest.raises(ProgramFileError, match="constant slot 5"):
        replay(prog, SPEC, "spec")


def test_a_profile_without_issue_costs_is_refused(tmp_path):
    path = tmp_path / "p.toml"
    text = (load_profile.__globals__["_builtin_text"])("v002-spec")
    path.write_text(text.split("[issue]")[0].rsplit("# Host-side", 1)[0])
    with pytest.raises(ProfileError, match=r"no \[issue\] table"):
        replay(two_gemvs(), load_profile(path), "spec")


# --- a real program: the tiny step -----------------------------------------------------------


@pytest.fixture(scope="module")
def spec_program():
    """A tiny program of this module's own (other modules edit the session-wide one)."""
    from ..conftest import lowered

    return lowered("v002-spec", "critical-path")


def test_tiny_step_replays_consistently_with_its_list_schedule(spec_program):
    graph, schedule, profile, program = spec_program
    replays = replay_all(program, profile)
    list_busy = timeline_from_schedule(schedule, graph).busy()
    for model, r in replays.items():
        s = summary(r)
        assert s["estimate"] == "model estimate, profile v002-spec"
        assert sum(time_slices(r).values()) == r.makespan, model
        assert r.counters.get("host_hazards", 0) == 0, model  # the program's fences suffice
        # the same instruction costs as the schedule: total busy per engine class agrees
        busy = {}
        for p in r.placed:
            if p.fp.role == "node":
                busy[p.fp.engine] = busy.get(p.fp.engine, 0) + p.finish - p.start
        for cls in ("gemv", "sfu", "dma"):
            listed = sum(v for lane, v in list_busy.items() if lane.startswith(cls))
            assert busy.get(cls, 0) == listed, (model, cls)
        # the replay adds host writes, kicks and polls the list schedule does not have
        assert r.makespan > schedule.makespan
    # rtl: one load-path uop at a time (GEMV, CVO, MEMCPY never overlap), each word decoded
    # no sooner than its write reaches the decoder; it can finish before spec, whose words
    # wait for their batch's kick
    loads = sorted((p.start, p.finish) for p in replays["rtl"].placed if p.fp.load_path)
    assert all(loads[k][1] <= loads[k + 1][0] for k in range(len(loads) - 1))
    assert all(p.start >= p.release for p in replays["rtl"].placed)
    assert replays["decoupled"].makespan >= replays["spec"].makespan


def test_every_word_touches_at_least_what_the_sidecar_says(spec_program):
    _, _, profile, program = spec_program
    for fp in footprints(program, profile):
        if fp is None:
            continue
        for key, regions in (("inputs", fp.reads), ("outputs", fp.writes)):
            for addr, words, *_ in program.operands.get(fp.index, {}).get(key, {}).values():
                assert any(a <= addr and addr + words <= b for a, b in regions), (fp.index, key)


def test_replay_pccx_parses_back_by_the_format_rules(spec_program, tmp_path):
    _, _, profile, program = spec_program
    r = replay(program, profile, "rtl")
    timeline = replay_timeline(r)
    path = write_pccx(timeline, tmp_path / "rtl.pccx")
    data = path.read_bytes()
    assert data[:4] == b"PCCX" and data[4] == 1  # magic, major version
    (hlen,) = struct.unpack_from("<Q", data, 8)
    header = json.loads(data[16 : 16 + hlen])
    payload = data[16 + hlen :]
    assert header["payload"]["encoding"] == "flatbuf"
    assert header["payload"]["byte_length"] == len(payload)
    n = len(timeline.events)
    records = [struct.unpack_from("<IQQI", payload, 24 * k) for k in range(n)]
    assert header["trace"]["cycles"] == r.makespan
    assert max(start + dur for _, start, dur, _ in records) == r.makespan
    assert sorted(start for _, start, _, _ in records) == [rec[1] for rec in records]
    assert {core for core, *_ in records} <= set(range(header["trace"]["cores"]))
    assert "model estimate, profile v002-spec" in header["pccx_flow"]["source"]


def test_trace_diff_names_where_replay_and_list_schedule_part(spec_program):
    graph, schedule, profile, program = spec_program
    listed = timeline_from_schedule(schedule, graph, profile.core_hz)
    d = diff_timelines(listed, replay_timeline(replay(program, profile, "rtl")))
    assert not d["identical"]
    first = d["first_divergence"]
    assert first.startswith("event 0 (")  # the host writes the first batch before it runs
    name = first.split("(")[1].split(")")[0]
    assert name in graph.nodes
    assert d["busy_cycles"]["host-io"][0] == 0 and d["busy_cycles"]["host-io"][1] > 0

"""`.pccx` files parse by pccx-lab's format rules; damaged ones fail in one line."""

from __future__ import annotations

import json
import struct

import pytest

from pccx_flow.errors import TraceError
from pccx_flow.traces.pccx_file import fnv1a_64, read_pccx, write_pccx
from pccx_flow.traces.timeline import DMA_READ, DMA_WRITE, MAC_COMPUTE, timeline_from_schedule


@pytest.fixture(scope="module")
def scheduled():
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.hardware.profile import load_profile
    from pccx_flow.schedule.registry import run_policy

    profile = load_profile("v002-spec")
    graph = build_decode_graph("tiny", position=5, profile=profile)
    return graph, run_policy(graph, profile, "critical-path"), profile


def test_fnv1a_64_matches_the_published_test_vectors():
    # FNV-1a 64 of "" is the offset basis; of "a" and "foobar" from the FNV reference tables
    assert fnv1a_64(b"") == 0xCBF29CE484222325
    assert fnv1a_64(b"a") == 0xAF63DC4C8601EC8C
    assert fnv1a_64(b"foobar") == 0x85944171F73967E8


def test_a_written_file_parses_by_the_format_rules(scheduled, tmp_path):
    """Parsed here straight from docs/pccx-format.md and crates/core/src/pccx_format.rs."""
    graph, schedule, profile = scheduled
    path = write_pccx(timeline_from_schedule(schedule, graph, profile.core_hz), tmp_path / "s.pccx")
    data = path.read_bytes()
    assert data[:4] == b"PCCX" and data[4:6] == bytes([1, 1]) and data[6:8] == b"\0\0"
    (hlen,) = struct.unpack("<Q", data[8:16])
    header = json.loads(data[16 : 16 + hlen].decode("utf-8"))
    # the fields pccx-lab's serde structs require, with their types
    assert isinstance(header["pccx_lab_version"], str)
    assert len(header["arch"]["mac_dims"]) == 2 and isinstance(header["arch"]["isa_version"], str)
    assert header["trace"]["cycles"] == schedule.makespan
    assert header["trace"]["cores"] == len(schedule.lanes)
    assert header["trace"]["clock_mhz"] == 400
    payload = data[16 + hlen :]
    info = header["payload"]
    assert info["encoding"] == "flatbuf" and info["byte_length"] == len(payload)
    assert isinstance(info["checksum_fnv64"], int) and info["checksum_fnv64"] == fnv1a_64(payload)
    n = len(schedule.slots)
    records = [struct.unpack_from("<IQQI", payload, 24 * i) for i in range(n)]
    starts = [r[1] for r in records]
    assert starts == sorted(starts)  # pccx-lab's viewport search wants start order
    lanes = [lane.name for lane in schedule.lanes]
    got = sorted((lanes[c], s, d) for c, s, d, _ in records)
    want = sorted((s.lane, s.start, s.duration) for s in schedule.slots.values())
    assert got == want
    kinds = {r[3] for r in records}
    assert {MAC_COMPUTE, DMA_READ, DMA_WRITE} <= kinds
    magic, count = struct.unpack_from("<II", payload, 24 * n)  # the PCC2 name trailer
    assert magic == 0x32434350 and count == n


def test_read_back_gives_the_same_timeline(scheduled, tmp_path):
    graph, schedule, profile = scheduled
    timeline = timeline_from_schedule(schedule, graph, profile.core_hz)
    back = read_pccx(write_pccx(timeline, tmp_path / "s.pccx"))
    assert back.lanes == timeline.lanes and back.clock_hz == profile.core_hz
    assert sorted(back.events, key=repr) == sorted(timeline.events, key=repr)
    assert "model estimate, profile v002-spec" in back.source


def _damage(data: bytes, how: str) -> bytes:
    (hlen,) = struct.unpack("<Q", data[8:16])
    if how == "magic":
        return b"XCCP" + data[4:]
    if how == "major":
        return data[:4] + bytes([2]) + data[5:]
    if how == "truncated":
        return data[:-5]
    if how == "checksum":
        return data[:-1] + bytes([data[-1] ^ 0xFF])
    if how == "encoding":
        header = json.loads(data[16 : 16 + hlen])
        header["payload"]["encoding"] = "bincode"
        text = json.dumps(header).encode()
        return data[:8] + struct.pack("<Q", len(text)) + text + data[16 + hlen :]
    if how == "header":
        return data[:8] + struct.pack("<Q", 1 << 40) + data[16:]
    raise AssertionError(how)


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("magic", "not a .pccx file"),
        ("major", "major version 2"),
        ("truncated", "payload bytes"),
        ("checksum", "checksum mismatch"),
        ("encoding", "encoding 'bincode'"),
        ("header", "runs past the end"),
    ],
)
def test_damaged_files_are_one_line_errors(scheduled, tmp_path, how, message):
    graph, schedule, profile = scheduled
    good = write_pccx(timeline_from_schedule(schedule, graph), tmp_path / "s.pccx").read_bytes()
    bad = tmp_path / "bad.pccx"
    bad.write_bytes(_damage(good, how))
    with pytest.raises(TraceError, match=message) as exc:
        read_pccx(bad)
    assert "\n" not in str(exc.value)

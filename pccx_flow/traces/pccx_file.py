"""pccx-lab's ``.pccx`` trace files: write a timeline, and read one back by the format's rules.

Layout (``docs/pccx-format.md`` and ``crates/core/src/pccx_format.rs`` in pccxai/pccx-lab,
the latter being the source of truth where they differ): the magic ``PCCX``, a major and a
minor version byte (1, 1), two zero bytes, a little-endian u64 header length, a UTF-8 JSON
header, then the payload. pccx-flow writes the ``flatbuf`` encoding: one 24-byte
little-endian record per event ``{u32 core_id, u64 start_cycle, u64 duration, u32
event_type_id}``, followed by the optional ``PCC2`` name trailer of
``crates/core/src/trace.rs`` (``u32 magic, u32 count``, then per name ``u32 event_index,
u16 length, UTF-8 bytes``) so each event keeps the graph node it came from.

Where the two pccx-lab sources disagree, the Rust source wins: ``checksum_fnv64`` is a JSON
number (``Option<u64>``), not the hex string the document shows. Lane names, the policy and
the estimate label travel in an extra ``pccx_flow`` header object, which pccx-lab ignores
(its header structs do not deny unknown fields). A reader here accepts any minor version
and refuses another major one, another encoding, a truncated payload or a wrong checksum.
"""

from __future__ import annotations

import json
import stat
import struct
from pathlib import Path

from pccx_flow import __version__, atomic
from pccx_flow.errors import TraceError
from pccx_flow.traces.timeline import EVENT_TYPE_NAMES, Event, Timeline

MAGIC = b"PCCX"
MAJOR_VERSION = 1
MINOR_VERSION = 1
RECORD = struct.Struct("<IQQI")  # core_id, start_cycle, duration, event_type_id: 24 bytes
NAME_TRAILER_MAGIC = 0x3243_4350  # "PCC2" read as a little-endian u32
MAX_HEADER_BYTES = 1 << 24
# GEMM systolic array of pccx v002 (pccx-v002.md §1): informational in the header.
MAC_DIMS = (32, 32)


def fnv1a_64(data: bytes) -> int:
    """FNV-1a 64-bit hash of the payload (pccx-lab's integrity check)."""
    h = 0xCBF29CE484222325
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def encode_payload(timeline: Timeline, names: bool = True) -> bytes:
    """The ``flatbuf`` payload: 24-byte records, then the name trailer when `names`."""
    core = {lane: i for i, lane in enumerate(timeline.lanes)}
    ordered = sorted(timeline.events, key=lambda e: (e.start, core[e.lane]))
    parts = [RECORD.pack(core[e.lane], e.start, e.duration, e.kind) for e in ordered]
    if names:
        named = [(i, e.name.encode("utf-8")[:0xFFFF]) for i, e in enumerate(ordered) if e.name]
        if named:
            parts.append(struct.pack("<II", NAME_TRAILER_MAGIC, len(named)))
            parts += [struct.pack("<IH", i, len(b)) + b for i, b in named]
    return b"".join(parts)


def write_pccx(timeline: Timeline, path: str | Path, *, names: bool = True) -> Path:
    """Write `timeline` as a ``.pccx`` file (events sorted by start cycle, as pccx-lab's
    viewport search expects)."""
    payload = encode_payload(timeline, names)
    clock_mhz = round(timeline.clock_hz / 1e6) if timeline.clock_hz else 1000
    header = {
        "pccx_lab_version": f"pccx-flow {__version__}",
        "format_minor": MINOR_VERSION,
        "arch": {"mac_dims": list(MAC_DIMS), "isa_version": "v002", "peak_tops": 0.0},
        "trace": {
            "cycles": timeline.makespan,
            "cores": len(timeline.lanes),
            "clock_mhz": clock_mhz,
        },
        "payload": {
            "encoding": "flatbuf",
            "byte_length": len(payload),
            "checksum_fnv64": fnv1a_64(payload),
        },
        "pccx_flow": {
            "lanes": timeline.lanes,
            "source": timeline.source,
            "clock_hz": timeline.clock_hz,
        },
    }
    text = json.dumps(header, ensure_ascii=False).encode("utf-8")
    path = Path(path)
    head = MAGIC + bytes([MAJOR_VERSION, MINOR_VERSION, 0, 0])
    atomic.write_bytes(path, head + struct.pack("<Q", len(text)) + text + payload)
    return path


def read_pccx(path: str | Path) -> Timeline:
    """Read a ``.pccx`` file with a ``flatbuf`` payload; `TraceError` naming what is wrong."""
    path = Path(path)
    try:
        if not stat.S_ISREG(path.stat().st_mode):
            raise TraceError(f"{path} is not a regular file; give a .pccx file")
        data = path.read_bytes()
    except OSError as exc:
        raise TraceError(f"cannot read {path}: {exc.strerror or exc}") from None
    where = str(path)
    if len(data) < 16 or data[:4] != MAGIC:
        raise TraceError(f"{where} is not a .pccx file (it does not start with 'PCCX')")
    if data[4] != MAJOR_VERSION:
        raise TraceError(f"{where}: .pccx major version {data[4]}, this reader knows 1")
    (hlen,) = struct.unpack_from("<Q", data, 8)
    if hlen > MAX_HEADER_BYTES or 16 + hlen > len(data):
        raise TraceError(f"{where}: header length {hlen} runs past the end of the file")
    try:
        header = json.loads(data[16 : 16 + hlen].decode("utf-8"))
        payload_info = header["payload"]
        encoding, length = payload_info["encoding"], int(payload_info["byte_length"])
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise TraceError(f"{where}: the JSON header is malformed ({exc})") from None
    if encoding != "flatbuf":
        raise TraceError(f"{where}: payload encoding {encoding!r}; pccx-flow reads 'flatbuf'")
    payload = data[16 + hlen :]
    if len(payload) != length:
        raise TraceError(
            f"{where}: the header declares {length} payload bytes, the file has {len(payload)}"
        )
    checksum = payload_info.get("checksum_fnv64")
    if checksum is not None and checksum != fnv1a_64(payload):
        raise TraceError(f"{where}: payload checksum mismatch (the file is damaged)")
    return _timeline(header, payload, where)


def _timeline(header: dict, payload: bytes, where: str) -> Timeline:
    ours = header.get("pccx_flow") if isinstance(header.get("pccx_flow"), dict) else {}
    end = len(payload) - len(payload) % RECORD.size
    for off in range(0, len(payload) - 7, RECORD.size):  # a name trailer ends the records
        if struct.unpack_from("<I", payload, off)[0] == NAME_TRAILER_MAGIC and off + 8 <= len(
            payload
        ):
            end = off
            break
    records = [RECORD.unpack_from(payload, off) for off in range(0, end, RECORD.size)]
    names = _names(payload, end, len(records), where)
    cores = int(header.get("trace", {}).get("cores") or 0)
    lanes = [str(x) for x in ours.get("lanes") or []] or [f"core{i}" for i in range(cores)]
    for core, *_ in records:
        while core >= len(lanes):
            lanes.append(f"core{len(lanes)}")
    events = [
        Event(
            lanes[core], start, dur, kind if kind < len(EVENT_TYPE_NAMES) else 0, names.get(i, "")
        )
        for i, (core, start, dur, kind) in enumerate(records)
    ]
    clock = ours.get("clock_hz") or (header.get("trace", {}).get("clock_mhz") or 1000) * 1e6
    return Timeline(
        lanes, events, float(clock), str(ours.get("source") or header.get("pccx_lab_version", ""))
    )


def _names(payload: bytes, end: int, n_events: int, where: str) -> dict[int, str]:
    if end + 8 > len(payload):
        return {}
    _, count = struct.unpack_from("<II", payload, end)
    names, cur = {}, end + 8
    for _ in range(count):
        if cur + 6 > len(payload):
            raise TraceError(f"{where}: the event name table is truncated")
        index, length = struct.unpack_from("<IH", payload, cur)
        cur += 6
        if cur + length > len(payload) or index >= n_events:
            raise TraceError(f"{where}: the event name table is truncated or out of range")
        names[index] = payload[cur : cur + length].decode("utf-8", "replace")
        cur += length
    return names

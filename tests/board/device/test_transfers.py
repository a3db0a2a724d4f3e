"""Which DataMover commands each word gets, and the limits that make them one-line errors."""

from __future__ import annotations

import pytest

from pccx_flow.board.device.cma import FileSource
from pccx_flow.board.device.transfers import (
    MAX_RUN,
    batch_transfers,
    check_fifo_depth,
    gather_into,
    staging_bytes,
    word_transfers,
)
from pccx_flow.board.program.files import Program
from pccx_flow.errors import BoardError


def test_every_stream_of_a_lowered_program_gets_its_commands(spec_program):
    _, _, _, program = spec_program
    kinds = set()
    for i, s in program.streams.items():
        ts, _ = word_transfers(program, i, 5, 0)
        kinds |= {t.what for t in ts}
        if "weight" in s:
            w = s["weight"]
            assert ts[0].page == "hp2" and ts[0].nbytes == w["run_bytes"] * w["runs"]
            assert (ts[0].gather is None) == (w["runs"] == 1 or w["run_bytes"] == w["stride"])
            assert ("scale_offset" in w) == any(t.page == "hp3" for t in ts)
    assert {"weights", "scales", "kv_read", "kv_write", "embed", "logits"} <= kinds
    assert staging_bytes(program) > 0  # the tiny step has strided float32 tiles


def test_strided_tiles_are_gathered_into_staging(tmp_path):
    src = FileSource(tmp_path)
    image, act = src.allocate("image", 64), src.allocate("act", 64)
    image.view(0, 64)[:] = bytes(range(64))
    program = Program(
        streams={0: {"weight": {"offset": 4, "run_bytes": 2, "runs": 3, "stride": 10}}}
    )
    (t,), used = word_transfers(program, 0, 0, 16)
    assert (t.buffer, t.offset, t.nbytes, used) == ("act", 16, 6, 16 + 64)
    gather_into(image, act, t)
    assert bytes(act.view(16, 6)) == bytes([4, 5, 14, 15, 24, 25])


def test_long_runs_split_and_deep_batches_are_refused():
    big = {"weight": {"offset": 0, "run_bytes": 2 * MAX_RUN, "runs": 1, "stride": 0}}
    program = Program(streams={i: big for i in range(5)}, nodes=[f"n{i}" for i in range(5)])
    ts, _ = batch_transfers(program, 0, 1, 0, 0)
    assert len(ts) == 3 and sum(t.nbytes for t in ts) == 2 * MAX_RUN
    ts, _ = batch_transfers(program, 0, 5, 0, 0)
    with pytest.raises(BoardError, match=r"instruction 2, node n2\): needs more than 8"):
        check_fifo_depth(ts, 4, program.nodes)

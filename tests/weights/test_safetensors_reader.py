"""safetensors headers: every malformed, overlapping or out-of-range entry is one line."""

from __future__ import annotations

import json
import os
import struct

import pytest

from pccx_flow.errors import TensorFormatError, WeightsError
from pccx_flow.weights.hf_import import find_shards
from pccx_flow.weights.safetensors_reader import read_safetensors_header


def shard(path, header: dict | str, payload: bytes = b"\0" * 64) -> None:
    text = (header if isinstance(header, str) else json.dumps(header)).encode()
    path.write_bytes(struct.pack("<Q", len(text)) + text + payload)


def entry(begin, end, shape=(4,), dtype="F32"):
    return {"dtype": dtype, "shape": list(shape), "data_offsets": [begin, end]}


def test_a_good_header_is_read(tmp_path):
    shard(tmp_path / "a.safetensors", {"x": entry(0, 16), "y": entry(16, 32)})
    got = read_safetensors_header(tmp_path / "a.safetensors")
    assert sorted(got) == ["x", "y"] and got["y"].shape == (4,)


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ({"x": entry(0, 16), "y": entry(8, 24)}, "overlap"),
        ({"x": entry(-16, 0)}, "malformed header entry"),
        ({"x": entry(16, 0)}, "malformed header entry"),
        ({"x": entry(0, 16, shape=(-4,))}, "malformed header entry"),
        ({"x": entry(0, 1 << 62, shape=(1 << 60,))}, "truncated or damaged"),
        ({"x": [1, 2]}, "malformed header entry"),
        ({"x": {"dtype": "F32", "shape": "4", "data_offsets": [0, 16]}}, "malformed"),
        ("[" * 100_000 + "]" * 100_000, "not a safetensors file"),
        ("[1, 2]", "not a JSON object"),
    ],
)
def test_bad_headers_are_one_line(tmp_path, header, message):
    path = tmp_path / "bad.safetensors"
    shard(path, header)
    with pytest.raises(TensorFormatError, match=message) as info:
        read_safetensors_header(path)
    assert "\n" not in str(info.value)


def test_a_fifo_shard_is_refused(tmp_path):
    os.mkfifo(tmp_path / "f.safetensors")
    with pytest.raises(TensorFormatError, match="not a regular file"):
        read_safetensors_header(tmp_path / "f.safetensors")


@pytest.mark.parametrize("name", ["../x.safetensors", "/etc/passwd", "sub/a.safetensors", ".."])
def test_index_may_only_name_shards_next_to_it(tmp_path, name):
    (tmp_path / "x.safetensors").write_bytes(b"")
    repo = tmp_path / "repo"
    repo.mkdir()
    index = {"weight_map": {"model.norm.weight": name}}
    (repo / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(WeightsError, match="is not a file name in the index's folder"):
        find_shards([repo])


def test_index_whose_weight_map_is_a_list(tmp_path):
    (tmp_path / "model.safetensors.index.json").write_text('{"weight_map": ["a"]}')
    with pytest.raises(WeightsError, match="weight_map"):
        find_shards([tmp_path])

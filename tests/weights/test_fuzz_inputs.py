"""Fuzzing every file a user hands to pccx-flow's checkpoint code.

Manifests, configs (manifest configs and Hugging Face config.json), `.npy` headers and
safetensors headers are generated malformed in many ways, from random JSON to small
mutations of valid ones. The only outcomes allowed: the input is accepted, or a
`PccxFlowError` subclass is raised whose message is one line. Any other exception, or a
hang, fails. Derandomized (same examples on every run) and kept to a few seconds.
"""

from __future__ import annotations

import io
import json
import math
import shutil
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pccx_flow.errors import PccxFlowError
from pccx_flow.model.config import FIELD_RANGES, get_config
from pccx_flow.model.tensors import tensor_manifest
from pccx_flow.weights.checkpoint import MANIFEST_NAME, config_from_dict, open_checkpoint
from pccx_flow.weights.hf_import import config_from_hf
from pccx_flow.weights.npy import open_readonly, read_header
from pccx_flow.weights.safetensors_reader import read_safetensors_header

FUZZ = settings(
    max_examples=60,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(1 << 70), max_value=1 << 70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=12)
)
json_values = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=16,
)
# Values a config field is likely to be mistyped as: zeros, negatives, huge, NaN, wrong types.
field_values = (
    st.sampled_from([0, -1, 1, 2, 3, 7, 1 << 31, 10**12, 0.0, -0.0, 1e-300, 1e300, True])
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.integers(min_value=-5, max_value=5000)
    | st.text(max_size=4)
    | st.none()
)
TINY = get_config("tiny").to_dict()


def mutated_config() -> st.SearchStrategy[dict]:
    """The tiny config with up to four fields replaced (or dropped, or an unknown one added)."""
    names = sorted(FIELD_RANGES)
    return st.builds(
        _mutate,
        st.dictionaries(st.sampled_from(names), field_values, min_size=1, max_size=4),
        st.lists(st.sampled_from(names), max_size=1),
        st.booleans(),
    )


def _mutate(changes: dict, drop: list, extra: bool) -> dict:
    data = {**TINY, **changes}
    for name in drop:
        data.pop(name, None)
    if extra:
        data["n_experts"] = 4
    return data


def assert_refused_in_one_line(exc: PccxFlowError) -> None:
    assert "\n" not in str(exc) and str(exc), repr(exc)


@pytest.fixture(scope="module")
def ckpt_dir(tiny_ckpt_dir, tmp_path_factory):
    return shutil.copytree(tiny_ckpt_dir, tmp_path_factory.mktemp("fuzz") / "ck")


@FUZZ
@given(
    manifest=json_values
    | st.fixed_dictionaries(
        {"mode": st.sampled_from(["int4", "float32", "int8", 4])},
        optional={
            "format": st.sampled_from(["pccx-split-npy", "other", None]),
            "preset": st.sampled_from(["tiny", "e4b", "x"]) | json_values,
            "config": mutated_config() | json_values,
        },
    )
)
def test_manifests_open_or_fail_in_one_line(ckpt_dir, manifest):
    (ckpt_dir / MANIFEST_NAME).write_text(json.dumps(manifest), encoding="utf-8")
    try:
        ck = open_checkpoint(ckpt_dir)
    except PccxFlowError as exc:
        assert_refused_in_one_line(exc)
    else:
        assert ck.config.n_layers == 10  # the folder's tensors are tiny's; anything else fails


@FUZZ
@given(data=mutated_config())
def test_configs_build_or_fail_in_one_line(data):
    try:
        config = config_from_dict(data, "manifest.json")
    except PccxFlowError as exc:
        assert_refused_in_one_line(exc)
        return
    specs = tensor_manifest(config)  # a config that is accepted must be usable
    assert all(all(d >= 1 for d in s.shape) for s in specs)
    assert math.isfinite(config.final_softcap) and config.final_softcap > 0


def _hf_config() -> dict:
    c = get_config("tiny")
    return {
        "hidden_size": c.hidden,
        "intermediate_size": c.ffn,
        "num_hidden_layers": c.n_layers,
        "num_attention_heads": c.n_q_heads,
        "num_key_value_heads": c.n_kv_heads,
        "head_dim": c.head_dim,
        "vocab_size": c.vocab,
        "vocab_size_per_layer_input": c.vocab_per_layer,
        "hidden_size_per_layer_input": c.ple_dim,
        "altup_num_inputs": c.altup_streams,
        "laurel_rank": c.laurel_rank,
        "num_kv_shared_layers": c.n_layers - c.first_kv_shared_layer,
        "final_logit_softcapping": c.final_softcap,
        "rope_theta": c.theta_global,
    }


HF_KEYS = sorted(_hf_config()) + ["layer_types", "activation_sparsity_pattern", "rope_parameters"]


@FUZZ
@given(
    changes=st.dictionaries(st.sampled_from(HF_KEYS), field_values | json_values, max_size=4),
    nested=st.booleans(),
)
def test_hugging_face_configs_translate_or_fail_in_one_line(changes, nested):
    text = {**_hf_config(), **changes}
    hf = {"text_config": text} if nested else text
    try:
        config_from_hf(hf, "config.json")
    except PccxFlowError as exc:
        assert_refused_in_one_line(exc)


def _npy_file(descr, shape, fortran, version, header_text, tail) -> bytes:
    if header_text is None:
        header_text = repr({"descr": descr, "fortran_order": fortran, "shape": shape})
    body = header_text.encode("latin1", "replace")
    body += b" " * (-(len(body) + 11) % 64) + b"\n"
    length = struct.pack("<H", len(body)) if version == 1 else struct.pack("<I", len(body))
    return b"\x93NUMPY" + bytes([version, 0]) + length + body + tail


npy_files = st.builds(
    _npy_file,
    descr=st.sampled_from(["<f4", "|u1", "<f8", "|O", "V0", "<U0", "zz", "<f4x", "|V8"])
    | st.text(max_size=6),
    shape=st.lists(st.integers(min_value=-3, max_value=1 << 62), max_size=3).map(tuple)
    | json_values,
    fortran=st.booleans() | st.integers(),
    version=st.sampled_from([1, 2, 3]),
    header_text=st.none() | st.text(max_size=40) | st.just("{" * 3000),
    tail=st.binary(max_size=64),
) | st.binary(max_size=200)


@FUZZ
@given(blob=npy_files)
def test_npy_headers_read_or_fail_in_one_line(tmp_path_factory, blob):
    path = tmp_path_factory.getbasetemp() / "fuzz.npy"
    path.write_bytes(blob)
    try:
        header = read_header(path, "tensor fuzz")
        array, _ = open_readonly(path, "tensor fuzz")
    except PccxFlowError as exc:
        assert_refused_in_one_line(exc)
        return
    assert array.shape[: len(header.shape)] == header.shape
    del array


def _safetensors_file(header, payload: bytes, declared_extra: int) -> bytes:
    text = header if isinstance(header, str) else json.dumps(header)
    raw = text.encode("utf-8", "replace")
    return struct.pack("<Q", max(0, len(raw) + declared_extra)) + raw + payload


entries = st.fixed_dictionaries(
    {
        "dtype": st.sampled_from(["F32", "F16", "BF16", "I8", "F64"]) | json_values,
        "shape": st.lists(st.integers(min_value=-2, max_value=1 << 40), max_size=3) | json_values,
        "data_offsets": st.lists(st.integers(min_value=-8, max_value=80), min_size=2, max_size=2)
        | json_values,
    }
)
safetensors_files = st.builds(
    _safetensors_file,
    header=st.dictionaries(st.text(max_size=6), entries | json_values, max_size=4)
    | json_values
    | st.integers(min_value=1, max_value=20_000).map(lambda n: "[" * n + "]" * n),
    payload=st.binary(max_size=96),
    declared_extra=st.sampled_from([0, 0, 0, -1, 1, 1 << 40]),
)


@FUZZ
@given(blob=safetensors_files)
def test_safetensors_headers_read_or_fail_in_one_line(tmp_path_factory, blob):
    path = tmp_path_factory.getbasetemp() / "fuzz.safetensors"
    path.write_bytes(blob)
    try:
        tensors = read_safetensors_header(path)
    except PccxFlowError as exc:
        assert_refused_in_one_line(exc)
        return
    for t in tensors.values():  # accepted tensors lie inside the file: reading them works
        rows = t.rows_float32(0, 2)
        assert rows.dtype == np.float32


def test_deeply_nested_safetensors_header_is_one_line(tmp_path):
    path = tmp_path / "deep.safetensors"
    path.write_bytes(_safetensors_file("[" * 100_000 + "]" * 100_000, b"", 0))
    with pytest.raises(PccxFlowError, match="not a safetensors file"):
        read_safetensors_header(path)


def test_fuzz_helpers_build_valid_files_too(tmp_path):
    """The generators can produce valid files, so 'accepted' outcomes are really exercised."""
    f = io.BytesIO()
    np.save(f, np.arange(6, dtype=np.float32).reshape(2, 3))
    (tmp_path / "ok.npy").write_bytes(_npy_file("<f4", (2, 3), False, 1, None, f.getvalue()[128:]))
    assert read_header(tmp_path / "ok.npy", "t").shape == (2, 3)
    header = {"x": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}
    (tmp_path / "ok.safetensors").write_bytes(_safetensors_file(header, b"\0" * 8, 0))
    assert list(read_safetensors_header(tmp_path / "ok.safetensors")) == ["x"]

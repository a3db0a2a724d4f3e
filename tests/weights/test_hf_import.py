"""Import of Hugging Face safetensors shards written by the test itself (tiny config shapes).

Shard A is written by the `safetensors` package (F32 and F16, prefix ``model.language_model.``);
shard B by a hand-written encoder of the file format (BF16 and F32, prefix ``model.``), so the
reader is checked against two independent writers. Expected values are the float32 arrays the
test generated, in Hugging Face orientation, rounded to what each dtype can hold.
"""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest

from pccx_flow.errors import ConfigError, MissingTensorError, TensorFormatError, WeightsError
from pccx_flow.model.tensors import tensor_manifest
from pccx_flow.weights.checkpoint import open_checkpoint
from pccx_flow.weights.hf_import import config_from_hf, import_safetensors
from pccx_flow.weights.verify import verify_checkpoint

safetensors_numpy = pytest.importorskip("safetensors.numpy")


def hf_shape(spec):
    return tuple(reversed(spec.shape)) if spec.hf_transposed else spec.shape


def to_bf16_bits(x: np.ndarray) -> np.ndarray:
    """Upper 16 bits of float32 values that are exactly representable in bfloat16."""
    bits = x.astype(np.float32).view(np.uint32)
    assert not (bits & 0xFFFF).any()
    return (bits >> 16).astype(np.uint16)


def round_to_bf16(x: np.ndarray) -> np.ndarray:
    return (x.astype(np.float32).view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)


def write_safetensors_by_hand(path, tensors: dict[str, tuple[str, np.ndarray]]) -> None:
    """Minimal safetensors encoder: {name: (dtype name, raw little-endian array)}."""
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, (dtype, arr) in tensors.items():
        raw = np.ascontiguousarray(arr).tobytes()
        header[name] = {
            "dtype": dtype,
            "shape": list(arr.shape),
            "data_offsets": [offset, offset + len(raw)],
        }
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def hf_text_config(c) -> dict:
    """A Hugging Face style config.json for the tiny preset."""
    return {
        "architectures": ["Gemma3nForConditionalGeneration"],
        "text_config": {
            "hidden_size": c.hidden,
            "intermediate_size": [c.ffn] * c.n_layers,
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
            "activation_sparsity_pattern": [0.95] * c.n_sparse_layers
            + [0.0] * (c.n_layers - c.n_sparse_layers),
            "layer_types": [
                "full_attention" if i % 5 == 4 else "sliding_attention" for i in range(c.n_layers)
            ],
            "sliding_window": c.sliding_window,
            "max_position_embeddings": c.max_seq,
            "rope_theta": c.theta_global,
            "rope_local_base_freq": c.theta_local,
            "rms_norm_eps": c.rms_eps,
            "final_logit_softcapping": c.final_softcap,
        },
    }


@pytest.fixture(scope="module")
def hf_weights(tiny_config):
    """{short key: (expected float32 in HF orientation, dtype it is stored as)}."""
    rng = np.random.default_rng(3)
    out = {}
    for spec in tensor_manifest(tiny_config):
        x = rng.standard_normal(hf_shape(spec)).astype(np.float32)
        layer = spec.layer if spec.layer is not None else -1
        if layer >= 5 and len(spec.shape) == 2:
            out[spec.key] = (round_to_bf16(x), "BF16")
        elif len(spec.shape) == 1 and layer < 5:
            out[spec.key] = (x.astype(np.float16).astype(np.float32), "F16")
        else:
            out[spec.key] = (x, "F32")
    return out


def write_shards(folder, weights, *, drop=(), reshape=None) -> list:
    """Shard A: model-level and layers 0-4; shard B: layers 5+. Returns the two paths."""
    folder.mkdir(parents=True, exist_ok=True)
    a, b = {}, {}
    for key, (x, dtype) in weights.items():
        if key in drop:
            continue
        if reshape and key in reshape:
            x = x.reshape(reshape[key])
        layer = int(key.split(".")[1]) if key.startswith("layers.") else -1
        if layer < 5:
            a["model.language_model." + key] = x.astype(
                np.float16 if dtype == "F16" else np.float32
            )
        else:
            raw = to_bf16_bits(x) if dtype == "BF16" else x
            b["model." + key] = (dtype, raw)
    a["model.vision_tower.timm_model.stem.weight"] = np.ones((3, 3), np.float32)
    b["model.audio_tower.conv.weight"] = ("BF16", np.zeros((2, 2), np.uint16))
    pa, pb = (
        folder / "model-00001-of-00002.safetensors",
        folder / "model-00002-of-00002.safetensors",
    )
    safetensors_numpy.save_file(a, str(pa))
    write_safetensors_by_hand(pb, b)
    return [pa, pb]


@pytest.fixture(scope="module")
def shards(tmp_path_factory, hf_weights):
    return write_shards(tmp_path_factory.mktemp("hf"), hf_weights)


def test_float32_import_keeps_values_and_transposes(tmp_path, shards, hf_weights, tiny_config):
    out = import_safetensors(
        shards, tmp_path / "f32", config=tiny_config, quantize=False, progress=False
    )
    ck = open_checkpoint(out)
    assert ck.config == tiny_config
    for spec in tensor_manifest(tiny_config):
        x, _ = hf_weights[spec.key]
        want = x.T if spec.hf_transposed else x
        assert ck.storage(spec.key) == "float32"
        np.testing.assert_array_equal(ck.tensor(spec.key), want, err_msg=spec.key)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["mode"] == "float32"


def test_transposition_of_the_router_and_ple_projection(tmp_path, shards, hf_weights, tiny_config):
    out = import_safetensors(
        shards, tmp_path / "t", config=tiny_config, quantize=False, progress=False
    )
    ck = open_checkpoint(out)
    router = ck.tensor("layers.7.altup.modality_router.weight")  # HF [4, 64], BF16 shard
    assert router.shape == (64, 4)
    np.testing.assert_array_equal(
        router[10, 2], hf_weights["layers.7.altup.modality_router.weight"][0][2, 10]
    )
    proj = ck.tensor("layers.1.per_layer_projection.weight")  # HF [64, 8] -> spec [8, 64]
    assert proj.shape == (8, 64)
    # INT4-kind weights keep the HF [out, in] orientation
    np.testing.assert_array_equal(
        ck.tensor("layers.6.mlp.down_proj.weight"), hf_weights["layers.6.mlp.down_proj.weight"][0]
    )


def test_quantised_import(tmp_path, shards, hf_weights, tiny_config):
    out = import_safetensors(shards, tmp_path / "q", config=tiny_config, progress=False)
    ck = open_checkpoint(out)
    for spec in tensor_manifest(tiny_config):
        x, _ = hf_weights[spec.key]
        want = x.T if spec.hf_transposed else x
        assert ck.storage(spec.key) == spec.storage, spec.key
        if spec.storage == "int4":
            _, scale = ck.int4(spec.key)
            np.testing.assert_allclose(scale, np.abs(want).max(axis=1) / 7, rtol=1e-6)
            err = np.abs(ck.tensor(spec.key) - want)
            assert (err <= scale[:, None] / 2 * (1 + 1e-5)).all(), spec.key
        else:
            np.testing.assert_array_equal(ck.tensor(spec.key), want)


def test_config_from_config_json_and_index(tmp_path, hf_weights, tiny_config):
    folder = tmp_path / "repo"
    paths = write_shards(folder, hf_weights)
    (folder / "config.json").write_text(json.dumps(hf_text_config(tiny_config)))
    index = {"metadata": {}, "weight_map": {"a": paths[0].name, "b": paths[1].name}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    out = import_safetensors([folder], tmp_path / "out", progress=False)
    assert open_checkpoint(out).config == tiny_config


def test_config_from_shapes(tmp_path, shards, tiny_config):
    out = import_safetensors(shards, tmp_path / "out", progress=False)
    assert open_checkpoint(out).config == tiny_config


def test_config_json_with_other_sizes_gives_custom_config(tiny_config):
    hf = hf_text_config(tiny_config)
    hf["text_config"]["laurel_rank"] = 32
    cfg = config_from_hf(hf, "config.json")
    assert cfg.name == "hf-import" and cfg.laurel_rank == 32 and cfg.n_sparse_layers == 3
    assert cfg.first_kv_shared_layer == 5
    hf["text_config"]["activation_sparsity_pattern"] = [0.0, 0.95] + [0.0] * 8
    with pytest.raises(ConfigError, match="sparse layers must come first"):
        config_from_hf(hf, "config.json")
    hf["text_config"]["activation_sparsity_pattern"] = [0.95] * 3 + [0.0] * 7
    del hf["text_config"]["hidden_size"]
    with pytest.raises(ConfigError, match="hidden_size"):
        config_from_hf(hf, "config.json")


def test_unused_kv_weights_are_optional(tmp_path, hf_weights, tiny_config):
    """As transformers 5 saves KV-sharing layers: no k_proj, v_proj or k_norm."""
    drop = {
        f"layers.{i}.self_attn.{name}.weight"
        for i in range(5, 10)
        for name in ("k_proj", "v_proj", "k_norm")
    }
    paths = write_shards(tmp_path / "hf", hf_weights, drop=drop)
    out = import_safetensors(paths, tmp_path / "out", progress=False)  # config from shapes
    written = json.loads((out / "manifest.json").read_text())["tensors"]
    assert not drop & set(written)
    assert len(written) == len(tensor_manifest(tiny_config)) - len(drop)
    ck = open_checkpoint(out)
    assert ck.config == tiny_config
    assert ck.tensor("layers.7.self_attn.q_proj.weight").shape == (64, 64)
    assert verify_checkpoint(out) == []
    with pytest.raises(MissingTensorError, match="k_norm"):
        ck.tensor("layers.7.self_attn.k_norm.weight")
    # a KV-owning layer's k_norm is still required
    paths = write_shards(tmp_path / "hf2", hf_weights, drop={"layers.4.self_attn.k_norm.weight"})
    with pytest.raises(MissingTensorError, match=r"layers\.4\.self_attn\.k_norm"):
        import_safetensors(paths, tmp_path / "out2", config=tiny_config, progress=False)


def test_missing_tensor_named(tmp_path, hf_weights, tiny_config):
    paths = write_shards(tmp_path / "hf", hf_weights, drop={"layers.2.mlp.up_proj.weight"})
    with pytest.raises(MissingTensorError, match=r"layers\.2\.mlp\.up_proj\.weight"):
        import_safetensors(paths, tmp_path / "out", config=tiny_config, progress=False)
    assert not (tmp_path / "out").exists()


def test_wrong_shape_refused_before_writing(tmp_path, hf_weights, tiny_config):
    paths = write_shards(
        tmp_path / "hf", hf_weights, reshape={"layers.8.mlp.gate_proj.weight": (128, 128)}
    )
    with pytest.raises(TensorFormatError, match=r"gate_proj.*\[128, 128\], expected \[256, 64\]"):
        import_safetensors(paths, tmp_path / "out", config=tiny_config, progress=False)


def test_bad_sources(tmp_path, shards, tiny_config):
    with pytest.raises(WeightsError, match="does not exist"):
        import_safetensors([tmp_path / "nope"], tmp_path / "o", config=tiny_config, progress=False)
    copy = tmp_path / "copy.safetensors"
    copy.write_bytes(shards[0].read_bytes())
    with pytest.raises(WeightsError, match="twice"):
        import_safetensors([shards[0], copy], tmp_path / "o", config=tiny_config, progress=False)
    # the same shard named twice (file and folder) is read once
    out = import_safetensors(
        [shards[0], shards[0].parent], tmp_path / "o2", config=tiny_config, progress=False
    )
    assert (out / "manifest.json").is_file()
    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\x05\x00")
    with pytest.raises(TensorFormatError, match="not a safetensors file"):
        import_safetensors([junk], tmp_path / "o", config=tiny_config, progress=False)
    truncated = tmp_path / "cut.safetensors"
    truncated.write_bytes(shards[1].read_bytes()[:-100])
    with pytest.raises(TensorFormatError, match="truncated"):
        import_safetensors([truncated], tmp_path / "o", config=tiny_config, progress=False)


@pytest.mark.parity
def test_bf16_written_by_torch(tmp_path, tiny_config, hf_weights):
    """BF16 as torch writes it (an independent encoder of the dtype)."""
    torch = pytest.importorskip("torch")
    st_torch = pytest.importorskip("safetensors.torch")
    key = "layers.0.mlp.gate_proj.weight"
    x = hf_weights[key][0]
    path = tmp_path / "one.safetensors"
    st_torch.save_file({"model." + key: torch.from_numpy(x).to(torch.bfloat16)}, str(path))
    from pccx_flow.weights.safetensors_reader import read_safetensors_header

    t = read_safetensors_header(path)["model." + key]
    assert t.dtype == "BF16"
    np.testing.assert_array_equal(
        t.float32(), torch.from_numpy(x).to(torch.bfloat16).float().numpy()
    )


@pytest.mark.parity
def test_transformers_default_config_is_e4b():
    """transformers' own Gemma3nConfig defaults describe E4B (rope_parameters form, 5.x)."""
    transformers = pytest.importorskip("transformers")
    from pccx_flow.model.config import get_config

    hf = transformers.Gemma3nConfig().to_dict()
    assert config_from_hf(hf, "config.json") == get_config("e4b")
    hf["text_config"]["rope_parameters"]["full_attention"]["rope_theta"] = 5e5
    assert config_from_hf(hf, "config.json").theta_global == 5e5


def test_row_chunking_does_not_change_the_result(tmp_path, shards, tiny_config, monkeypatch):
    from pccx_flow.weights import hf_import

    whole = import_safetensors(shards, tmp_path / "whole", config=tiny_config, progress=False)
    monkeypatch.setattr(hf_import, "CHUNK_ELEMENTS", 100)  # many row chunks per tensor
    chunked = import_safetensors(shards, tmp_path / "chunked", config=tiny_config, progress=False)
    for p in sorted(whole.glob("*.npy")):
        assert p.read_bytes() == (chunked / p.name).read_bytes(), p.name


def test_nan_tensor_leaves_the_old_checkpoint_intact(tmp_path, hf_weights, tiny_config):
    old = import_safetensors(
        write_shards(tmp_path / "good", hf_weights), tmp_path / "ck", progress=False
    )
    before = {p.name: p.read_bytes() for p in old.iterdir()}
    key = "layers.8.mlp.down_proj.weight"  # BF16 shard, written late
    poisoned = dict(hf_weights)
    x = poisoned[key][0].copy()
    x[3, 5] = np.nan
    poisoned[key] = (x, poisoned[key][1])
    with pytest.raises(TensorFormatError, match="NaN.*unchanged"):
        import_safetensors(
            write_shards(tmp_path / "bad", poisoned), old, progress=False, force=True
        )
    assert {p.name: p.read_bytes() for p in old.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad", "ck", "good"]
    assert verify_checkpoint(old) == []

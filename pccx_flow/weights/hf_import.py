"""Import a Hugging Face Gemma 3n safetensors checkpoint into the pccx split-`.npy` layout.

Text-decoder tensors are found under ``model.language_model.`` (multimodal checkpoints) or
``model.`` (text-only ones); vision and audio towers are ignored. Each tensor is widened to
float32 (F32/F16/BF16), transposed exactly when the manifest marks it ``hf_transposed`` (the
specification multiplies ``x · A`` there), and the manifest's INT4 tensors are quantised per
output row, a row chunk at a time, unless ``quantize=False`` keeps them float32.

The config comes from the caller, else from a Hugging Face ``config.json`` next to the shards
(its ``text_config``), else from the tensor shapes when they match a preset exactly (shapes
alone cannot tell where KV sharing or the sparse layers start).
"""

from __future__ import annotations

import math
import os
import sys
from dataclasses import fields
from pathlib import Path

import numpy as np
from tqdm import tqdm

from pccx_flow.errors import ConfigError, MissingTensorError, TensorFormatError, WeightsError
from pccx_flow.model.config import PRESETS, Gemma3nConfig
from pccx_flow.model.tensors import KEY_PREFIX, TensorSpec, tensor_manifest
from pccx_flow.weights.int4 import quantize_rows
from pccx_flow.weights.safetensors_reader import SafeTensor, read_safetensors_header
from pccx_flow.weights.writer import TensorFileWriter, staged_checkpoint, write_manifest

PREFIXES = (KEY_PREFIX, "model.")
INDEX_NAME = "model.safetensors.index.json"
HF_CONFIG_NAME = "config.json"
CHUNK_ELEMENTS = 1 << 22
# pccx-flow allocates the KV cache eagerly; a config.json's max_position_embeddings (32,768 on
# E4B) is capped to the specification's 8,192 positions.
MAX_SEQ_CAP = 8192


# --- finding the shards -----------------------------------------------------------------------


def shards_of_index(index: Path) -> list[Path]:
    """The shard files a ``model.safetensors.index.json`` names, all inside its folder."""
    from pccx_flow.weights.checkpoint import read_small_json

    data = read_small_json(index, "safetensors index")
    weight_map = data.get("weight_map") if isinstance(data, dict) else None
    if not isinstance(weight_map, dict) or not all(isinstance(v, str) for v in weight_map.values()):
        raise WeightsError(
            f'{index}: not a valid safetensors index (needs a "weight_map" object of '
            "tensor name -> shard file name)"
        )
    names = sorted(set(weight_map.values()))
    for n in names:
        if not n or n in (".", "..") or Path(n).name != n or "\\" in n or "\0" in n:
            raise WeightsError(
                f"{index}: shard {n[:80]!r} is not a file name in the index's folder; an index "
                "may only name shards next to it"
            )
    return [index.parent / n for n in names]


def find_shards(sources: list[Path | str]) -> list[Path]:
    """Safetensors files named by `sources`: files, or folders (via their index if present)."""
    shards: list[Path] = []
    for src in map(Path, sources):
        if src.is_file():
            shards.append(src)
        elif src.is_dir():
            index = src / INDEX_NAME
            if os.path.lexists(index):
                shards.extend(shards_of_index(index))
            else:
                found = sorted(src.glob("*.safetensors"))
                if not found:
                    raise WeightsError(
                        f"{src} holds no .safetensors files; pass shards or a folder"
                    )
                shards.extend(found)
        elif src.exists():
            raise WeightsError(f"source {src} is not a file or folder; pass .safetensors files")
        else:
            raise WeightsError(f"source {src} does not exist; pass .safetensors files or a folder")
    missing = [s for s in shards if not s.exists()]
    if missing:
        raise WeightsError(f"shard {missing[0]} listed in the index does not exist")
    return list(dict.fromkeys(shards))


def collect_text_tensors(shards: list[Path]) -> dict[str, SafeTensor]:
    """Map short key -> tensor over all shards, for text-decoder tensors only."""
    found: dict[str, SafeTensor] = {}
    for shard in shards:
        for name, t in read_safetensors_header(shard).items():
            key = next((name[len(p) :] for p in PREFIXES if name.startswith(p)), None)
            if key is None:
                continue
            if key in found:
                raise WeightsError(
                    f"tensor {key} appears twice ({found[key].file.name}: {found[key].name}, "
                    f"{shard.name}: {name}); pass each shard once"
                )
            found[key] = t
    return found


# --- the config -------------------------------------------------------------------------------


def _matching_preset(config: Gemma3nConfig) -> Gemma3nConfig | None:
    """The preset equal to `config` in every field but name and max_seq, if any."""
    skip = {"name", "max_seq"}
    for preset in PRESETS.values():
        if all(
            getattr(preset, f.name) == getattr(config, f.name)
            for f in fields(Gemma3nConfig)
            if f.name not in skip
        ):
            return preset
    return None


def _global_period(layer_types: list, where: str) -> int:
    full = [i for i, t in enumerate(layer_types) if t == "full_attention"]
    if full:
        period = full[0] + 1
        if full == list(range(period - 1, len(layer_types), period)):
            return period
    raise ConfigError(f"{where}: layer_types is not a periodic [local..., global] cycle")


def config_from_hf(hf: dict, where: str) -> Gemma3nConfig:
    """Translate a Hugging Face Gemma 3n ``config.json`` (or its text_config) to a config."""
    t = hf.get("text_config", hf)
    if not isinstance(t, dict):
        raise ConfigError(f"{where}: text_config must be an object; pass --preset")
    try:
        ffn = t["intermediate_size"]
        if isinstance(ffn, list):
            if len(set(ffn)) != 1:
                raise ConfigError(f"{where}: per-layer intermediate_size differs; unsupported")
            ffn = ffn[0]
        n_layers = int(t["num_hidden_layers"])
        sparsity = list(t.get("activation_sparsity_pattern") or [0.0] * n_layers)
        n_sparse = next((i for i, s in enumerate(sparsity) if not s), len(sparsity))
        if any(sparsity[n_sparse:]):
            raise ConfigError(f"{where}: sparse layers must come first; pattern unsupported")
        period = 5
        if t.get("layer_types"):
            period = _global_period(t["layer_types"], where)
        values = {
            "hidden": int(t["hidden_size"]),
            "ffn": int(ffn),
            "n_layers": n_layers,
            "n_q_heads": int(t["num_attention_heads"]),
            "n_kv_heads": int(t["num_key_value_heads"]),
            "head_dim": int(t["head_dim"]),
            "vocab": int(t["vocab_size"]),
            "vocab_per_layer": int(t["vocab_size_per_layer_input"]),
            "ple_dim": int(t["hidden_size_per_layer_input"]),
            "altup_streams": int(t["altup_num_inputs"]),
            "laurel_rank": int(t["laurel_rank"]),
            "first_kv_shared_layer": n_layers - int(t.get("num_kv_shared_layers", 0)),
            "n_sparse_layers": n_sparse,
            "max_seq": min(int(t.get("max_position_embeddings", MAX_SEQ_CAP)), MAX_SEQ_CAP),
            "global_period": period,
        }
    except (KeyError, TypeError, ValueError, OverflowError, AttributeError) as exc:
        raise ConfigError(f"{where}: missing or bad Gemma 3n field {exc}; pass --preset") from None
    optional = {
        "rms_eps": "rms_norm_eps",
        "theta_global": "rope_theta",
        "theta_local": "rope_local_base_freq",
        "final_softcap": "final_logit_softcapping",
        "sliding_window": "sliding_window",
    }
    try:
        for ours, theirs in optional.items():
            if t.get(theirs) is not None:
                values[ours] = type(getattr(PRESETS["e4b"], ours))(t[theirs])
        # transformers >= 5 moves the two RoPE bases into rope_parameters, keyed by layer type
        rope = t.get("rope_parameters") or {}
        for ours, layer_type in (
            ("theta_local", "sliding_attention"),
            ("theta_global", "full_attention"),
        ):
            theta = (rope.get(layer_type) or {}).get("rope_theta")
            if theta is not None:
                values[ours] = float(theta)
    except (TypeError, ValueError, OverflowError, AttributeError) as exc:
        raise ConfigError(f"{where}: bad Gemma 3n field ({exc}); fix it or pass --preset") from None
    config = Gemma3nConfig(name="hf-import", **values)
    preset = _matching_preset(config)
    return preset if preset is not None else config


def config_from_shapes(tensors: dict[str, SafeTensor]) -> Gemma3nConfig:
    """The preset whose every tensor shape matches the shards, else a `ConfigError`."""
    for preset in PRESETS.values():
        specs = tensor_manifest(preset)
        needed = [s for s in specs if s.used]
        if all(s.key in tensors and tensors[s.key].shape == hf_shape(s) for s in needed):
            return preset
    raise ConfigError(
        "cannot tell the config from the tensor shapes alone; pass --preset or put the "
        "Hugging Face config.json next to the shards"
    )


def _hf_config_near(shards: list[Path], sources: list[Path]) -> Path | None:
    for folder in [Path(s) for s in sources if Path(s).is_dir()] + [s.parent for s in shards]:
        if (folder / HF_CONFIG_NAME).is_file():
            return folder / HF_CONFIG_NAME
    return None


def resolve_import_config(
    shards: list[Path], sources: list[Path], tensors: dict[str, SafeTensor]
) -> Gemma3nConfig:
    path = _hf_config_near(shards, sources)
    if path is None:
        return config_from_shapes(tensors)
    from pccx_flow.weights.checkpoint import read_small_json

    hf = read_small_json(path, "Hugging Face config")
    if not isinstance(hf, dict):
        raise ConfigError(f"{path}: must be a JSON object (a Hugging Face config.json)")
    return config_from_hf(hf, str(path))


# --- conversion -------------------------------------------------------------------------------


def hf_shape(spec: TensorSpec) -> tuple[int, ...]:
    """Shape of the tensor in the Hugging Face checkpoint ([out, in] for every Linear)."""
    return tuple(reversed(spec.shape)) if spec.hf_transposed else spec.shape


def _chunks(spec: TensorSpec, src: SafeTensor):
    """Yield float32 row chunks of the tensor in the specification's orientation."""
    if spec.hf_transposed:  # float32 matrices of at most D x D: transpose in memory
        yield np.ascontiguousarray(src.float32().T)
        return
    rows = spec.shape[0]
    step = max(1, CHUNK_ELEMENTS // max(math.prod(spec.shape[1:]), 1))
    for start in range(0, rows, step):
        yield src.rows_float32(start, min(rows, start + step))


def convert_tensor(out: Path, spec: TensorSpec, src: SafeTensor, storage: str, bar) -> None:
    if src.shape != hf_shape(spec):
        raise TensorFormatError(
            f"{src.file.name}: {src.name} has shape {list(src.shape)}, expected "
            f"{list(hf_shape(spec))}; pass the --preset these shards were made for"
        )
    writer = TensorFileWriter(out, spec, storage)
    for chunk in _chunks(spec, src):
        if not np.isfinite(chunk).all():
            raise TensorFormatError(f"{src.file.name}: {src.name} holds NaN or infinite values")
        if storage == "int4":
            packed, scale = quantize_rows(chunk)
            bar.update(writer.write_int4(packed, scale))
        else:
            bar.update(writer.write_float32(chunk))
    writer.close()


def import_safetensors(
    sources: list[Path],
    out: Path,
    *,
    config: Gemma3nConfig | None = None,
    quantize: bool = True,
    progress: bool = True,
    force: bool = False,
) -> Path:
    """Convert safetensors shards to a pccx checkpoint at `out`; returns the directory."""
    sources = [Path(s) for s in sources]
    if not sources:
        raise WeightsError("no sources given; pass .safetensors files or a folder")
    shards = find_shards(sources)
    tensors = collect_text_tensors(shards)
    if config is None:
        config = resolve_import_config(shards, sources, tensors)
    specs = tensor_manifest(config)
    missing = [s.key for s in specs if s.used and s.key not in tensors]
    if missing:
        shown = ", ".join(missing[:5]) + (
            f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        )
        raise MissingTensorError(
            f"{len(missing)} tensor(s) of config {config.name!r} missing from the shards: {shown}"
        )
    present = [s for s in specs if s.key in tensors]
    for s in present:  # check every shape before writing anything
        if tensors[s.key].shape != hf_shape(s):
            raise TensorFormatError(
                f"{tensors[s.key].file.name}: {tensors[s.key].name} has shape "
                f"{list(tensors[s.key].shape)}, expected {list(hf_shape(s))} for config "
                f"{config.name!r}; pass the matching --preset"
            )
    storages = {s.key: (s.storage if quantize else "float32") for s in present}
    total = sum(
        s.stored_bytes if storages[s.key] == "int4" else 4 * math.prod(s.shape) for s in present
    )
    show = progress and sys.stderr.isatty()
    with staged_checkpoint(out, force=force, config=config) as tmp:
        with tqdm(
            total=total, unit="B", unit_scale=True, desc="import", file=sys.stderr, disable=not show
        ) as bar:
            for spec in present:
                convert_tensor(tmp, spec, tensors[spec.key], storages[spec.key], bar)
        source = {"hf_import": {"shards": [s.name for s in shards], "quantized": quantize}}
        mode = "int4" if quantize else "float32"
        write_manifest(tmp, config, mode, storages, present, extra=source)
    return Path(out)

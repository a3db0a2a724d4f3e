"""Infer a checkpoint's config from its tensor shapes, for folders written without a manifest.

pccx's own runtime reads a split-`.npy` folder with or without ``manifest.json``
(``sw/runtime/gemma/weights.py`` in pccxai/pccx-FPGA-NPU-LLM-kv260 treats the manifest as
optional and defaults to ``{"mode": "int4"}``), so a real pccx export may carry no config at
all. Most dimensions can be read off a handful of `.npy` headers (no tensor data is read):

- ``embed_tokens.weight`` [vocab, hidden]; ``embed_tokens_per_layer.weight``
  [vocab_per_layer, n_layers·ple_dim]; ``per_layer_projection_norm.weight`` [ple_dim];
- the layer count from the ``layers.N.`` file names (0..N-1, none missing);
- layer 0: ``q_norm`` [head_dim], ``q_proj`` [heads·head_dim, hidden], ``k_proj``
  [kv_heads·head_dim, hidden], ``gate_proj`` [ffn, hidden], ``laurel.linear_left``
  [rank, hidden], ``altup.correction_coefs`` [streams, streams].

Three fields cannot be seen in shapes: which layer starts KV sharing (real checkpoints keep
K/V weights on sharing layers too; only a folder that leaves them out shows it), how many
layers use the sparse gate, and the KV cache length. When the shapes equal a preset's, that
preset's values are taken; otherwise E4B's proportions (KV sharing from layer 20 of 35,
sparse layers 10 of 35, 8,192 positions) are assumed. Either way the caller is told which
fields were assumed, so it can pass them in a ``--config`` file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from pccx_flow.errors import ConfigError, PccxFlowError, WeightsError
from pccx_flow.model.config import PRESETS, Gemma3nConfig
from pccx_flow.model.tensors import KEY_PREFIX
from pccx_flow.weights.npy import read_header

# Fields no tensor shape shows, and how the defaults for them are chosen.
UNSEEN_FIELDS = ("first_kv_shared_layer", "n_sparse_layers", "max_seq")
E4B = PRESETS["e4b"]

_LAYER_FILE = re.compile(re.escape(KEY_PREFIX) + r"layers\.(\d+)\.")


@dataclass(frozen=True)
class InferredConfig:
    """A config read off tensor shapes, with the fields that had to be assumed."""

    config: Gemma3nConfig
    assumed: dict[str, int]  # field -> value taken without evidence in the files
    basis: str  # "preset e4b" or "E4B proportions"

    def describe(self) -> str:
        """One line for the user: what was inferred and what was assumed."""
        c = self.config
        seen = (
            f"hidden={c.hidden} ffn={c.ffn} layers={c.n_layers} heads={c.n_q_heads}/"
            f"{c.n_kv_heads} head_dim={c.head_dim} vocab={c.vocab} "
            f"vocab_per_layer={c.vocab_per_layer} ple_dim={c.ple_dim} "
            f"laurel_rank={c.laurel_rank}"
        )
        if not self.assumed:
            return f"config inferred from tensor shapes: {seen}"
        guess = ", ".join(f"{k}={v}" for k, v in self.assumed.items())
        return (
            f"config inferred from tensor shapes: {seen}; assumed {guess} ({self.basis}; "
            "not visible in shapes: pass --config FILE to set them)"
        )


def _logical_shape(directory: Path, key: str) -> tuple[int, ...]:
    """Shape of a tensor as the model uses it (a packed INT4 matrix has twice the columns)."""
    path = directory / f"{KEY_PREFIX}{key}.npy"
    header = read_header(path, f"tensor {key}")
    if header.dtype == np.uint8 and len(header.shape) == 2:
        return (header.shape[0], 2 * header.shape[1])
    if header.dtype == np.float32:
        return header.shape
    raise WeightsError(
        f"tensor {key}: {path.name} is {header.dtype} {list(header.shape)}; expected float32, "
        "or packed uint8 for an INT4 matrix"
    )


def _layer_indices(directory: Path) -> set[int]:
    found = set()
    for p in directory.iterdir():
        m = _LAYER_FILE.match(p.name)
        if m:
            found.add(int(m.group(1)))
    return found


def _dims(shape: tuple[int, ...], n: int, key: str) -> tuple[int, ...]:
    if len(shape) != n:
        raise WeightsError(f"tensor {key} has shape {list(shape)}; expected {n} dimensions")
    return shape


def _unseen_defaults(n_layers: int) -> dict[str, int]:
    """E4B's proportions: KV sharing from 20/35 (a multiple of the θ cycle), sparse 10/35."""
    period = E4B.global_period
    shared = round(n_layers * E4B.first_kv_shared_layer / E4B.n_layers / period) * period
    return {
        "first_kv_shared_layer": min(max(shared, period), n_layers),
        "n_sparse_layers": round(n_layers * E4B.n_sparse_layers / E4B.n_layers),
        "max_seq": E4B.max_seq,
    }


def infer_config(directory: Path | str, name: str | None = None) -> InferredConfig:
    """Read the config off a checkpoint folder's tensor headers; `WeightsError` if it cannot.

    Reads about ten `.npy` headers and lists the folder once; no tensor data is read. The
    config is called `name`, else after the preset whose shapes it has, else "inferred".
    """
    directory = Path(directory)
    try:
        return _infer(directory, name)
    except FileNotFoundError as exc:
        missing = Path(exc.filename or "?").name
        raise WeightsError(
            f"checkpoint {directory}: no manifest.json and its config cannot be inferred "
            f"(no file {missing}); pass --preset NAME or --config FILE"
        ) from None
    except PccxFlowError as exc:
        raise WeightsError(
            f"checkpoint {directory}: no manifest.json and its config cannot be inferred "
            f"({exc}); pass --preset NAME or --config FILE"
        ) from None


def _infer(directory: Path, name: str | None) -> InferredConfig:
    vocab, hidden = _dims(_logical_shape(directory, "embed_tokens.weight"), 2, "embed_tokens")
    vocab_pl, ple_total = _dims(
        _logical_shape(directory, "embed_tokens_per_layer.weight"), 2, "embed_tokens_per_layer"
    )
    (ple_dim,) = _dims(_logical_shape(directory, "per_layer_projection_norm.weight"), 1, "norm")
    layers = _layer_indices(directory)
    n_layers = max(layers) + 1 if layers else 0
    if not layers or layers != set(range(n_layers)):
        gaps = sorted(set(range(n_layers)) - layers)
        raise WeightsError(f"layer files are not numbered 0..N-1 (missing layers {gaps[:5]})")
    if ple_total != n_layers * ple_dim:
        raise WeightsError(
            f"embed_tokens_per_layer is {ple_total} wide but {n_layers} layers × ple_dim "
            f"{ple_dim} = {n_layers * ple_dim}"
        )
    p = "layers.0."
    (head_dim,) = _dims(_logical_shape(directory, p + "self_attn.q_norm.weight"), 1, "q_norm")
    q_dim, _ = _dims(_logical_shape(directory, p + "self_attn.q_proj.weight"), 2, "q_proj")
    kv_dim, _ = _dims(_logical_shape(directory, p + "self_attn.k_proj.weight"), 2, "k_proj")
    ffn, _ = _dims(_logical_shape(directory, p + "mlp.gate_proj.weight"), 2, "gate_proj")
    rank, _ = _dims(_logical_shape(directory, p + "laurel.linear_left.weight"), 2, "laurel")
    streams, _ = _dims(
        _logical_shape(directory, p + "altup.correction_coefs.weight"), 2, "correction_coefs"
    )
    if head_dim < 1 or q_dim % head_dim or kv_dim % head_dim or not kv_dim:
        raise WeightsError(
            f"q_proj ({q_dim} rows) and k_proj ({kv_dim} rows) are not whole heads of "
            f"head_dim {head_dim}"
        )
    seen = {
        "hidden": hidden,
        "ffn": ffn,
        "n_layers": n_layers,
        "n_q_heads": q_dim // head_dim,
        "n_kv_heads": kv_dim // head_dim,
        "head_dim": head_dim,
        "vocab": vocab,
        "vocab_per_layer": vocab_pl,
        "ple_dim": ple_dim,
        "altup_streams": streams,
        "laurel_rank": rank,
    }
    # A folder that leaves out the (never read) K/V weights of sharing layers shows where
    # sharing starts: the first layer without k_proj, every later one without it too.
    own = [
        (directory / f"{KEY_PREFIX}layers.{i}.self_attn.k_proj.weight.npy").exists()
        for i in range(n_layers)
    ]
    shared_from = own.index(False) if False in own else None
    if shared_from is not None and any(own[shared_from:]):
        shared_from = None
    for preset in PRESETS.values():
        same_shapes = all(getattr(preset, k) == v for k, v in seen.items())
        if same_shapes and shared_from in (None, preset.first_kv_shared_layer):
            base, basis = preset, f"as preset {preset.name}"
            break
    else:
        base, basis = None, "E4B's proportions"
    if base is not None:
        guesses = {k: getattr(base, k) for k in UNSEEN_FIELDS}
        extra = {"sliding_window": base.sliding_window}
        name = name or base.name
    else:
        guesses = _unseen_defaults(n_layers)
        extra = {}
        name = name or "inferred"
    if shared_from is not None:
        guesses.pop("first_kv_shared_layer")
        seen["first_kv_shared_layer"] = shared_from
    try:
        config = Gemma3nConfig(name=name, **seen, **guesses, **extra)
    except (ConfigError, TypeError, ValueError) as exc:
        raise WeightsError(f"the shapes give no valid config ({exc})") from None
    return InferredConfig(config, guesses, basis)


def with_overrides(base: Gemma3nConfig, fields: dict, where: str) -> Gemma3nConfig:
    """`base` with some fields replaced (a partial ``--config`` file); one-line errors."""
    try:
        return replace(base, **fields)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None

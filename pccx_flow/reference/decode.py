"""The reference decode step: the NumPy oracle the instruction-graph executor is checked against.

Written straight from the specification (spec 000 §1-§5) and, for
``semantics="gemma3n"``, from the differences listed in gemma3n-semantics.md. It reads the
weights through the checkpoint API only and shares no code with the graph builder, the
scheduler or the executor, so an agreement between the two is evidence, not an echo.

One call computes one position of one token::

    cache = new_kv_cache(ckpt.config)
    logits = decode_step(ckpt, token_id=2, position=0, cache=cache)   # float32 [vocab]

Semantics (chosen by name, ``pccx`` by default):

- ``pccx``: the specification unchanged: token ids clipped to ``vocab_per_layer - 1`` for
  both tables (§1 note), no AltUp rescale, V cached as projected, ``altup_scale`` before the
  correction, interleaved RoPE pairs (2i, 2i+1) with ω_i = θ^(-2i/d_head), a float16 KV
  cache, no sliding window, and the magnitude floor ``max(sqrt(mean p²), 1e-12)``.
- ``gemma3n``: the published Gemma 3n (Hugging Face transformers): all eight differences of
  gemma3n-semantics.md, including a float32 KV cache and a sliding window of
  ``config.sliding_window`` on local layers (a query at position p sees keys p-w+1..p).

Both: the Gaussian top-k gate's "Std" is the population one (ddof = 0; spec 002 §4 divides
the variance by N, and pccx's runtime uses ``np.std``), RMSNorm multiplies by gamma itself,
attention has no 1/sqrt(d_head) scaling and no softcap, GELU is the tanh form, and the LM
head is the tied ``W_embed``. Every named tensor below is float32; the arithmetic between two
of them runs in float64 and is rounded once (`pccx_flow.reference.functions`, "Precision").

``trace`` (a dict) receives copies of named intermediates, for tests and for comparing with
the executor node by node:

- ``x0``, ``xs_init`` ``[4, D]``, ``pli_all`` ``[n_layers, ple_dim]``
- per layer i, ``L{i}.<name>`` with name one of ``xs_in``, ``modalities``, ``xs_pred``,
  ``x_input``, ``x_norm``, ``q_rope`` ``[heads, d]``, ``k_rope`` / ``v`` (layers that own
  KV), ``kv_source`` (the cache slot read), ``kv_start`` (first position attended),
  ``attn_raw``, ``laurel_in``, ``laurel_out``, ``attn_output``, ``x_attn``, ``gate_raw``,
  ``up_out``, ``hidden``, ``outputs``, ``activated``, ``xs_before_ple``, ``ple_mapped``,
  ``xs_after_ple``
- ``xs_final`` ``[4, D]``, ``x_final``, ``x_final_norm``, ``logits_raw`` (before the
  softcap), ``logits``
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import numpy as np

from pccx_flow.errors import InputError
from pccx_flow.model.config import Gemma3nConfig, check_position, check_semantics
from pccx_flow.precision import DEFAULT_PRECISION, computing_in, tensor_dtype
from pccx_flow.reference.functions import rms_norm, softcap
from pccx_flow.reference.layer import INV_SQRT2, decoder_layer
from pccx_flow.reference.streaming import matvec, row, slab_rows, vector

F64 = np.float64

KV_DTYPE = {"pccx": np.float16, "gemma3n": np.float32}


@dataclass
class KVCache:
    """K and V caches, ``[n_kv_cache_layers, max_seq, kv_dim]`` each (spec §4.B-4).

    Row ``[i, p]`` holds layer i's RoPE'd K (and its V) for position p. The dtype is the
    storage dtype of the semantics: float16 for ``pccx`` (the specification downcasts),
    float32 for ``gemma3n``.
    """

    k: np.ndarray
    v: np.ndarray


def new_kv_cache(config: Gemma3nConfig, semantics: str = "pccx") -> KVCache:
    """An all-zero KV cache for `config` in the storage dtype of `semantics`."""
    dtype = KV_DTYPE[check_semantics(semantics)]
    shape = (config.n_kv_cache_layers, config.max_seq, config.kv_dim)
    return KVCache(k=np.zeros(shape, dtype=dtype), v=np.zeros(shape, dtype=dtype))


def _as_int(value, what: str) -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise InputError(f"{what} must be an integer, got {value!r}") from None


def check_token_id(config: Gemma3nConfig, token_id) -> int:
    """Return `token_id` as an int, or raise `InputError` if it is outside ``0..vocab-1``."""
    tid = _as_int(token_id, "token id")
    if not 0 <= tid < config.vocab:
        raise InputError(
            f"token id {tid} out of range: the {config.name} vocabulary has ids "
            f"0..{config.vocab - 1}"
        )
    return tid


def _check_cache(config: Gemma3nConfig, cache: KVCache, semantics: str) -> None:
    shape = (config.n_kv_cache_layers, config.max_seq, config.kv_dim)
    want = np.dtype(KV_DTYPE[semantics])
    for name in ("k", "v"):
        arr = getattr(cache, name)
        if arr.shape != shape or arr.dtype != want:
            raise InputError(
                f"KV cache {name} is {arr.dtype}{list(arr.shape)}, expected {want}{list(shape)}"
                f" for {config.name} / {semantics}: create it with "
                f"new_kv_cache(config, semantics={semantics!r})"
            )


def embedding_ids(config: Gemma3nConfig, token_id: int, semantics: str) -> tuple[int, int]:
    """Row ids into ``W_embed`` and ``W_ple`` for a valid `token_id`.

    ``pccx``: both are ``min(token_id, vocab_per_layer - 1)`` (spec §1 note).
    ``gemma3n``: the main id is not clipped; a per-layer id outside the per-layer table
    maps to row 0 (difference 7).
    """
    if semantics == "gemma3n":
        return token_id, token_id if token_id < config.vocab_per_layer else 0
    clipped = min(token_id, config.vocab_per_layer - 1)
    return clipped, clipped


def _record(trace: dict | None, name: str, value) -> None:
    if trace is not None:
        trace[name] = np.array(value, copy=True)


def embed_and_ple(
    ckpt, token_id: int, semantics: str, trace: dict | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Spec §1-§3: ``x0`` ``[D]``, the initial streams ``xs`` ``[4, D]`` and ``pli_all``."""
    cfg: Gemma3nConfig = ckpt.config
    D = cfg.hidden
    main_id, ple_id = embedding_ids(cfg, token_id, semantics)

    # §1 token embedding
    x0 = (row(ckpt, "embed_tokens.weight", main_id) * math.sqrt(D)).astype(tensor_dtype())

    # §2 AltUp initial projections
    xs = np.empty((cfg.altup_streams, D), dtype=tensor_dtype())
    xs[0] = x0
    x0_64 = x0.astype(F64)
    target_mag = np.sqrt(np.mean(np.square(x0_64)))
    for k in range(cfg.altup_streams - 1):
        p = x0_64 @ vector(ckpt, f"altup_projections.{k}.weight").astype(F64)
        if semantics == "gemma3n":  # difference 1: rescale to the RMS of x0
            p = p * target_mag / np.sqrt(max(np.mean(np.square(p)), 1e-5))
        xs[k + 1] = p

    # §3 PLE pre-compute, shared by every layer
    x_proj = matvec(ckpt, "per_layer_model_projection.weight", x0).astype(F64) / math.sqrt(D)
    x_proj = x_proj.reshape(cfg.n_layers, cfg.ple_dim)
    x_proj_normed = rms_norm(x_proj, vector(ckpt, "per_layer_projection_norm.weight"), cfg.rms_eps)
    y = row(ckpt, "embed_tokens_per_layer.weight", ple_id).reshape(cfg.n_layers, cfg.ple_dim)
    y = y * math.sqrt(cfg.ple_dim)
    pli_all = ((x_proj_normed + y) * INV_SQRT2).astype(tensor_dtype())

    _record(trace, "x0", x0)
    _record(trace, "xs_init", xs)
    _record(trace, "pli_all", pli_all)
    return x0, xs, pli_all


def final_logits(ckpt, xs: np.ndarray, semantics: str, trace: dict | None = None) -> np.ndarray:
    """Spec §5: magnitude matching, unprojection, mean of the streams, final norm, LM head
    (the tied ``W_embed``, multiplied slab by slab) and the softcap."""
    cfg: Gemma3nConfig = ckpt.config
    xs64 = xs.astype(F64)
    target_mag = np.sqrt(np.mean(np.square(xs64[0])))
    streams = [xs64[0]]
    for k in range(cfg.altup_streams - 1):
        p = xs64[k + 1] @ vector(ckpt, f"altup_unembed_projections.{k}.weight").astype(F64)
        mean_sq = np.mean(np.square(p))
        if semantics == "gemma3n":  # difference 8: floor inside the square root
            new_mag = np.sqrt(max(mean_sq, 1e-5))
        else:
            new_mag = max(np.sqrt(mean_sq), 1e-12)
        streams.append(p * (target_mag / new_mag))
    x_final = np.mean(np.stack(streams), axis=0).astype(tensor_dtype())
    x_final_norm = rms_norm(x_final, vector(ckpt, "norm.weight"), cfg.rms_eps)

    logits = np.empty(cfg.vocab, dtype=tensor_dtype())
    step = slab_rows(cfg.hidden)
    x_final_norm64 = x_final_norm.astype(F64)
    for start in range(0, cfg.vocab, step):
        stop = min(cfg.vocab, start + step)
        slab = ckpt.rows("embed_tokens.weight", start, stop, F64)
        logits[start:stop] = slab @ x_final_norm64
        del slab
    capped = softcap(logits, cfg.final_softcap)

    _record(trace, "xs_final", xs)
    _record(trace, "x_final", x_final)
    _record(trace, "x_final_norm", x_final_norm)
    _record(trace, "logits_raw", logits)
    _record(trace, "logits", capped)
    return capped


def decode_step(
    ckpt,
    token_id: int,
    position: int,
    cache: KVCache,
    *,
    semantics: str = "pccx",
    trace: dict | None = None,
    precision: str = DEFAULT_PRECISION,
) -> np.ndarray:
    """One decode step: float32 ``[vocab]`` logits after the final softcap (spec §5 step 3).

    Writes row `position` of the KV cache for every layer that owns a slot; the caller
    feeds positions in order (0, 1, 2, ...) with the same `cache`. Raises `InputError` for a
    token id outside the vocabulary, a position outside the cache or a cache of the wrong
    shape or dtype or an unknown `precision`, and `ConfigError` for an unknown `semantics`.
    ``precision="float64"`` keeps the activations (and logits) in float64 instead of
    rounding them to float32; the cache keeps its storage dtype (`pccx_flow.precision`).
    """
    with computing_in(precision):
        return _decode_step(ckpt, token_id, position, cache, semantics, trace)


def _decode_step(ckpt, token_id, position, cache, semantics, trace) -> np.ndarray:
    semantics = check_semantics(semantics)
    cfg: Gemma3nConfig = ckpt.config
    token_id = check_token_id(cfg, token_id)
    position = _as_int(position, "position")
    check_position(cfg, position)
    _check_cache(cfg, cache, semantics)

    _, xs, pli_all = embed_and_ple(ckpt, token_id, semantics, trace)
    for layer in range(cfg.n_layers):
        xs = decoder_layer(ckpt, layer, xs, pli_all[layer], position, cache, semantics, trace)
    return final_logits(ckpt, xs, semantics, trace)

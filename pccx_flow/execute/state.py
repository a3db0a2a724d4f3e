"""The decode state that lives between steps: position, current token and the KV caches.

A decode graph is pure: its KV-write nodes only *output* the new K/V rows, and its KV-read
nodes read the rows of earlier positions from here. After a step the executor commits the new
rows with `commit_step`, so a step that fails halfway never leaves a half-written cache.

The caches are ``[n_kv_cache_layers, max_seq, kv_dim]``: float16 under the specification
(spec 000 §4.B-4 downcasts to float16 on store) and float32 under ``gemma3n`` semantics (the
published reference keeps the model dtype, ``gemma3n-semantics.md`` item 5).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pccx_flow.errors import InputError
from pccx_flow.model.config import Gemma3nConfig, check_position
from pccx_flow.precision import kv_cache_dtype


@dataclass
class DecodeState:
    """Everything a decode step needs from outside its graph.

    ``position`` is the position the next step decodes and ``token_id`` the token it reads.
    ``k_cache[j, p]`` / ``v_cache[j, p]`` hold the K/V rows cache layer ``j`` stored at
    position ``p``; rows at ``p >= position`` are not valid yet.
    """

    config: Gemma3nConfig
    semantics: str
    position: int
    token_id: int
    k_cache: np.ndarray
    v_cache: np.ndarray

    def past_rows(self, cache_layer: int, kind: str) -> np.ndarray:
        """Rows ``0..position-1`` of one cache layer (a view, not a copy)."""
        cache = self.k_cache if kind == "k" else self.v_cache
        return cache[cache_layer, : self.position]


def new_decode_state(
    config: Gemma3nConfig, semantics: str = "pccx", *, token_id: int = 0, position: int = 0
) -> DecodeState:
    """A state before `position` with empty (zero) caches, about to read `token_id`."""
    dtype = kv_cache_dtype(semantics)
    check_position(config, position)
    check_token_id(config, token_id)
    shape = (config.n_kv_cache_layers, config.max_seq, config.kv_dim)
    return DecodeState(
        config=config,
        semantics=semantics,
        position=position,
        token_id=int(token_id),
        k_cache=np.zeros(shape, dtype),
        v_cache=np.zeros(shape, dtype),
    )


def check_token_id(config: Gemma3nConfig, token_id: int) -> None:
    """Raise `InputError` unless ``0 <= token_id < vocab``."""
    if isinstance(token_id, bool) or not isinstance(token_id, (int, np.integer)):
        raise InputError(f"token id {token_id!r} is not an integer")
    if not 0 <= int(token_id) < config.vocab:
        raise InputError(
            f"token id {token_id} out of range: the {config.name} vocabulary has ids "
            f"0..{config.vocab - 1}"
        )


def commit_step(
    state: DecodeState,
    kv_rows: dict[int, tuple[np.ndarray, np.ndarray]],
    next_token: int | None = None,
) -> DecodeState:
    """Write the step's new K/V rows at ``state.position`` and advance by one position.

    `kv_rows` maps a cache layer to its ``(k_row, v_row)`` of length ``kv_dim``; every cache
    layer must be present, so a graph that forgot a KV write is caught here rather than as a
    silently stale cache one step later. The rows are cast to the cache dtype (float16 under
    the specification). `next_token`, when given, becomes the token the next step reads.
    """
    cfg = state.config
    missing = sorted(set(range(cfg.n_kv_cache_layers)) - set(kv_rows))
    if missing:
        raise InputError(
            f"step at position {state.position} produced no KV rows for layers "
            f"{missing}; the decode graph must write every owned cache layer"
        )
    if state.position >= cfg.max_seq:
        check_position(cfg, state.position)
    for layer, (k_row, v_row) in kv_rows.items():  # all checked before any row is written
        for kind, row in (("K", k_row), ("V", v_row)):
            if np.asarray(row).size != cfg.kv_dim:
                raise InputError(
                    f"cache layer {layer}: the step wrote a {kind} row of "
                    f"{np.asarray(row).size} values, not {cfg.kv_dim} (every KV head's part)"
                )
    for layer, (k_row, v_row) in kv_rows.items():
        state.k_cache[layer, state.position] = np.asarray(k_row).reshape(cfg.kv_dim)
        state.v_cache[layer, state.position] = np.asarray(v_row).reshape(cfg.kv_dim)
    state.position += 1
    if next_token is not None:
        check_token_id(cfg, next_token)
        state.token_id = int(next_token)
    return state

"""Gemma 3N model configuration and the per-layer rules of the specification.

`Gemma3nConfig` holds every dimension the specification fixes. Two presets exist:

- ``e4b``: the specification's Gemma 3N E4B (spec 004 §1 and 000 "기본 차원").
- ``tiny``: the same structure at toy sizes, for tests. It keeps every structural feature
  (see ``gemma3n-semantics.md``): the L,L,L,L,G θ cycle, a KV-sharing block that contains a
  local and a global layer, sparse layers at the start, 8 Q / 2 KV heads and 4 AltUp streams,
  and a per-layer vocabulary smaller than the main one so the token-id rules are exercised.

The per-layer rules (θ, KV source layer, sparse or dense gate) are small named functions so
the graph builder, the reference decode and the checks all ask the same question the same way.

>>> cfg = get_config("e4b")
>>> rope_theta(cfg, 4), rope_theta(cfg, 5)
(1000000.0, 10000.0)
>>> kv_source_layer(cfg, 24), kv_source_layer(cfg, 25), kv_source_layer(cfg, 3)
(19, 18, 3)
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from pccx_flow.errors import ConfigError, InputError


@dataclass(frozen=True)
class Gemma3nConfig:
    """Dimensions and constants of one Gemma 3N text decoder."""

    name: str
    hidden: int  # D, width of each AltUp stream
    ffn: int  # D_ffn
    n_layers: int
    n_q_heads: int
    n_kv_heads: int
    head_dim: int
    vocab: int  # rows of W_embed / W_lm_head (tied)
    vocab_per_layer: int  # rows of W_ple (the per-layer embedding table)
    ple_dim: int  # D_patch: per-layer embedding width
    altup_streams: int  # 4: xs[0] main + 3 shadow streams
    laurel_rank: int
    first_kv_shared_layer: int  # layers >= this reuse an earlier layer's KV cache
    n_sparse_layers: int  # layers < this use the Gaussian top-k gate
    max_seq: int  # KV cache length; positions must be < max_seq
    rms_eps: float = 1e-6
    sparse_z: float = 1.6448536  # z-score of the 95th percentile (spec 002 §1)
    theta_local: float = 10_000.0
    theta_global: float = 1_000_000.0
    global_period: int = 5  # layer i is global when i % 5 == 4
    final_softcap: float = 30.0
    sliding_window: int = 512  # used by semantics="gemma3n" only

    def __post_init__(self) -> None:
        check_config_ranges(self)
        if self.n_q_heads * self.head_dim != self.hidden:
            raise ConfigError(
                f"config {self.name!r}: n_q_heads*head_dim = {self.n_q_heads * self.head_dim}"
                f" must equal hidden = {self.hidden}"
            )
        if self.n_q_heads % self.n_kv_heads:
            raise ConfigError(f"config {self.name!r}: n_q_heads must be a multiple of n_kv_heads")
        if self.head_dim % 2:
            raise ConfigError(f"config {self.name!r}: head_dim must be even for RoPE pairs")
        if not 0 < self.first_kv_shared_layer <= self.n_layers:
            raise ConfigError(f"config {self.name!r}: first_kv_shared_layer out of range")
        if self.first_kv_shared_layer < self.n_layers:
            own = range(self.first_kv_shared_layer)
            if not any(is_global_layer(self, j) for j in own) or not any(
                not is_global_layer(self, j) for j in own
            ):
                raise ConfigError(
                    f"config {self.name!r}: KV sharing needs a local and a global layer below "
                    f"layer {self.first_kv_shared_layer}"
                )
        if self.n_sparse_layers > self.n_layers:
            raise ConfigError(f"config {self.name!r}: n_sparse_layers must be <= n_layers")
        if self.vocab_per_layer > self.vocab:
            raise ConfigError(f"config {self.name!r}: vocab_per_layer must be <= vocab")

    # Derived sizes, named as the specification names them.
    @property
    def q_dim(self) -> int:
        return self.n_q_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.n_kv_heads * self.head_dim

    @property
    def ple_total(self) -> int:
        """Width of one W_ple row and of the model-level PLE projection: n_layers * ple_dim."""
        return self.n_layers * self.ple_dim

    @property
    def n_kv_cache_layers(self) -> int:
        """Layers that own a KV cache slot (K_cache is [n_kv_cache_layers, max_seq, kv_dim])."""
        return self.first_kv_shared_layer

    @property
    def q_per_kv(self) -> int:
        return self.n_q_heads // self.n_kv_heads

    def to_dict(self) -> dict:
        return asdict(self)


# --- plausible ranges ------------------------------------------------------------------------

# Inclusive range of every numeric field: wide enough for any Gemma 3N size (E4B is well
# inside each), narrow enough that a typo or a hostile manifest (``"n_layers": 1000000000``,
# a zero that divides, ``final_softcap = 0`` that turns every logit to NaN) is refused in one
# line before anything is allocated or written.
FIELD_RANGES: dict[str, tuple[float, float]] = {
    "hidden": (2, 1 << 16),
    "ffn": (1, 1 << 18),
    "n_layers": (1, 1024),
    "n_q_heads": (1, 1024),
    "n_kv_heads": (1, 1024),
    "head_dim": (2, 4096),
    "vocab": (1, 1 << 22),
    "vocab_per_layer": (1, 1 << 22),
    "ple_dim": (1, 1 << 14),
    "altup_streams": (1, 64),
    "laurel_rank": (1, 1 << 14),
    "first_kv_shared_layer": (1, 1024),
    "n_sparse_layers": (0, 1024),
    "max_seq": (1, 1 << 20),
    "rms_eps": (1e-12, 0.1),
    "sparse_z": (0.0, 10.0),
    "theta_local": (1.0, 1e12),
    "theta_global": (1.0, 1e12),
    "global_period": (1, 1024),
    "final_softcap": (1e-3, 1e6),
    "sliding_window": (1, 1 << 20),
}


def check_config_ranges(config: Gemma3nConfig) -> None:
    """Raise `ConfigError` naming the first field outside `FIELD_RANGES` (or not a number)."""
    if not isinstance(config.name, str):
        raise ConfigError(f"config name must be a string, got {config.name!r}")
    for name, (lo, hi) in FIELD_RANGES.items():
        value = getattr(config, name)
        integral = isinstance(lo, int)
        ok_type = isinstance(value, int) if integral else isinstance(value, int | float)
        if isinstance(value, bool) or not ok_type:
            kind = "an integer" if integral else "a number"
            raise ConfigError(f"config {config.name!r}: {name} must be {kind}, got {value!r}")
        if not lo <= value <= hi:  # NaN fails this too
            raise ConfigError(
                f"config {config.name!r}: {name} = {value!r} is outside its plausible range "
                f"{lo:g}..{hi:g}; fix the config or use a preset"
            )


# --- per-layer rules -------------------------------------------------------------------------


def _check_layer(config: Gemma3nConfig, layer: int) -> None:
    if not 0 <= layer < config.n_layers:
        raise ConfigError(f"layer {layer} out of range 0..{config.n_layers - 1}")


def is_global_layer(config: Gemma3nConfig, layer: int) -> bool:
    """Global-attention layer of the [L, L, L, L, G] cycle (spec 001 §2): i % 5 == 4."""
    return layer % config.global_period == config.global_period - 1


def rope_theta(config: Gemma3nConfig, layer: int) -> float:
    """RoPE θ base of a layer: 1e6 on global layers, 1e4 on local ones (spec 000 §4.B-3)."""
    _check_layer(config, layer)
    return config.theta_global if is_global_layer(config, layer) else config.theta_local


def owns_kv(config: Gemma3nConfig, layer: int) -> bool:
    """True when the layer projects K/V and writes its own KV cache slot (spec 000 §4.B-4)."""
    _check_layer(config, layer)
    return layer < config.first_kv_shared_layer


def kv_source_layer(config: Gemma3nConfig, layer: int) -> int:
    """The layer whose KV cache this layer attends over.

    Layers below `first_kv_shared_layer` use their own; the others reuse the last own layer
    of the same kind: 19 (global) or 18 (local) on E4B, 4 or 3 on ``tiny``.
    """
    if owns_kv(config, layer):
        return layer
    want_global = is_global_layer(config, layer)
    for j in range(config.first_kv_shared_layer - 1, -1, -1):
        if is_global_layer(config, j) == want_global:
            return j
    raise ConfigError(f"no KV source layer for layer {layer}")  # excluded by __post_init__


def is_sparse_layer(config: Gemma3nConfig, layer: int) -> bool:
    """True on layers with the Gaussian top-k FFN gate (layers 0..9 on E4B, spec 002 §1)."""
    _check_layer(config, layer)
    return layer < config.n_sparse_layers


def check_position(config: Gemma3nConfig, position: int) -> None:
    """Raise `InputError` unless 0 <= position < max_seq."""
    if not isinstance(position, int) or not 0 <= position < config.max_seq:
        raise InputError(
            f"position {position} out of range: the {config.name} KV cache holds positions "
            f"0..{config.max_seq - 1}"
        )


SEMANTICS = ("pccx", "gemma3n")


def check_semantics(semantics: str) -> str:
    """Return `semantics` if known, else raise `ConfigError` naming the choices."""
    if semantics not in SEMANTICS:
        raise ConfigError(f"unknown semantics {semantics!r}; choose one of: {', '.join(SEMANTICS)}")
    return semantics


# --- presets -----------------------------------------------------------------------------

PRESETS: dict[str, Gemma3nConfig] = {
    "e4b": Gemma3nConfig(
        name="e4b",
        hidden=2048,
        ffn=16384,
        n_layers=35,
        n_q_heads=8,
        n_kv_heads=2,
        head_dim=256,
        vocab=262_400,
        vocab_per_layer=262_144,
        ple_dim=256,
        altup_streams=4,
        laurel_rank=64,
        first_kv_shared_layer=20,
        n_sparse_layers=10,
        max_seq=8192,
    ),
    "tiny": Gemma3nConfig(
        name="tiny",
        hidden=64,
        ffn=256,
        n_layers=10,
        n_q_heads=8,
        n_kv_heads=2,
        head_dim=8,
        vocab=512,
        vocab_per_layer=448,
        ple_dim=8,
        altup_streams=4,
        laurel_rank=16,
        first_kv_shared_layer=5,
        n_sparse_layers=3,
        max_seq=64,
        sliding_window=4,
    ),
}


def get_config(name: str) -> Gemma3nConfig:
    """Return the preset called `name`; raise `ConfigError` naming the known presets."""
    try:
        return PRESETS[name]
    except KeyError:
        known = ", ".join(sorted(PRESETS))
        from pccx_flow.suggest import did_you_mean

        hint = did_you_mean(name, PRESETS)
        raise ConfigError(f"unknown preset {name!r}{hint}; choose one of: {known}") from None

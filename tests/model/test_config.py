"""Presets and per-layer rules against the specification's tables."""

import pytest

from pccx_flow.errors import ConfigError, InputError
from pccx_flow.model.config import (
    check_position,
    get_config,
    is_global_layer,
    is_sparse_layer,
    kv_source_layer,
    owns_kv,
    rope_theta,
)


def test_e4b_dimensions_match_spec_overview():
    c = get_config("e4b")
    assert (c.hidden, c.ffn, c.n_layers) == (2048, 16384, 35)
    assert (c.n_q_heads, c.n_kv_heads, c.head_dim) == (8, 2, 256)
    assert (c.vocab, c.vocab_per_layer, c.ple_dim, c.ple_total) == (262_400, 262_144, 256, 8960)
    assert (c.altup_streams, c.laurel_rank, c.first_kv_shared_layer) == (4, 64, 20)
    assert c.n_kv_cache_layers == 20 and c.kv_dim == 512


def test_theta_cycle_is_local_local_local_local_global():
    c = get_config("e4b")
    globals_ = [i for i in range(35) if rope_theta(c, i) == 1_000_000.0]
    assert globals_ == [4, 9, 14, 19, 24, 29, 34]
    assert all(rope_theta(c, i) == 10_000.0 for i in range(35) if i not in globals_)


def test_kv_source_for_every_e4b_layer():
    c = get_config("e4b")
    expected = list(range(20)) + [19 if i % 5 == 4 else 18 for i in range(20, 35)]
    assert [kv_source_layer(c, i) for i in range(35)] == expected
    assert [owns_kv(c, i) for i in range(35)] == [i < 20 for i in range(35)]


def test_sparse_layers_are_0_to_9():
    c = get_config("e4b")
    assert [i for i in range(35) if is_sparse_layer(c, i)] == list(range(10))


def test_tiny_keeps_every_structural_feature():
    t = get_config("tiny")
    assert t.n_layers >= 10 and (t.n_q_heads, t.n_kv_heads, t.altup_streams) == (8, 2, 4)
    shared = range(t.first_kv_shared_layer, t.n_layers)
    kinds = {is_global_layer(t, i) for i in shared}
    assert kinds == {True, False}, "sharing block needs a local and a global layer"
    assert {kv_source_layer(t, i) for i in shared} == {3, 4}
    assert is_sparse_layer(t, 0) and not is_sparse_layer(t, t.n_layers - 1)
    assert t.vocab_per_layer < t.vocab


def test_unknown_preset_and_bad_layer_and_position():
    with pytest.raises(ConfigError, match="unknown preset 'e2b'"):
        get_config("e2b")
    with pytest.raises(ConfigError, match="layer 35 out of range"):
        rope_theta(get_config("e4b"), 35)
    with pytest.raises(InputError, match="position 64 out of range"):
        check_position(get_config("tiny"), 64)
    check_position(get_config("tiny"), 63)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("n_layers", 1_000_000_000, "n_layers = 1000000000 is outside its plausible range"),
        ("final_softcap", 0.0, "final_softcap = 0.0 is outside"),
        ("hidden", 0, "hidden = 0 is outside"),
        ("head_dim", 0, "head_dim = 0 is outside"),
        ("n_kv_heads", 0, "n_kv_heads = 0 is outside"),
        ("global_period", 0, "global_period = 0 is outside"),
        ("rms_eps", float("nan"), "rms_eps = nan is outside"),
        ("theta_local", float("inf"), "theta_local = inf is outside"),
        ("max_seq", 1.5, "max_seq must be an integer"),
        ("vocab", True, "vocab must be an integer"),
        ("n_sparse_layers", 11, "n_sparse_layers must be <= n_layers"),
    ],
)
def test_every_field_has_a_plausible_range(field, value, message):
    from dataclasses import replace

    with pytest.raises(ConfigError, match=message.replace("(", r"\(")):
        replace(get_config("tiny"), **{field: value})


def test_every_field_has_a_documented_range_and_the_presets_are_inside():
    from dataclasses import fields

    from pccx_flow.model.config import FIELD_RANGES, PRESETS, Gemma3nConfig

    assert set(FIELD_RANGES) == {f.name for f in fields(Gemma3nConfig)} - {"name"}
    for preset in PRESETS.values():
        for name, (lo, hi) in FIELD_RANGES.items():
            assert lo <= getattr(preset, name) <= hi, (preset.name, name)

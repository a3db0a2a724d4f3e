"""The §0 core functions against independent formulations (complex rotation, float64, stdlib)."""

from __future__ import annotations

import statistics

import numpy as np
import pytest

from pccx_flow.reference.functions import (
    gaussian_topk_gate,
    gelu_tanh,
    gqa_attention,
    rms_norm,
    rope_interleaved,
    rope_split_half,
    softcap,
)

RNG = np.random.default_rng(1234)


def test_rms_norm_matches_float64_formula_and_multiplies_gamma_itself():
    x = RNG.normal(size=(3, 16)).astype(np.float32)
    gamma = RNG.uniform(0.5, 1.5, size=16).astype(np.float32)
    x64 = x.astype(np.float64)
    want = x64 / np.sqrt((x64**2).mean(axis=-1, keepdims=True) + 1e-6) * gamma
    got = rms_norm(x, gamma, 1e-6)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)
    # without gamma: unit RMS per row
    np.testing.assert_allclose(np.sqrt((rms_norm(x, None) ** 2).mean(axis=-1)), 1.0, rtol=1e-5)


def test_gelu_tanh_matches_torch_tanh_approximation():
    torch = pytest.importorskip("torch", reason="torch is the independent GELU oracle")
    x = np.linspace(-6, 6, 97, dtype=np.float32)
    want = torch.nn.functional.gelu(torch.from_numpy(x), approximate="tanh").numpy()
    np.testing.assert_allclose(gelu_tanh(x), want, rtol=1e-6, atol=1e-6)


def _rotate_complex(pairs_re, pairs_im, position, theta, d):
    i = np.arange(d // 2)
    z = (pairs_re + 1j * pairs_im) * np.exp(1j * position * theta ** (-2.0 * i / d))
    return z.real, z.imag


@pytest.mark.parametrize("position,theta", [(0, 1e4), (3, 1e4), (17, 1e6), (8191, 1e4)])
def test_rope_interleaved_is_a_complex_rotation_of_adjacent_pairs(position, theta):
    x = RNG.normal(size=(2, 16)).astype(np.float32)
    re, im = _rotate_complex(x[:, 0::2].astype(np.float64), x[:, 1::2], position, theta, 16)
    got = rope_interleaved(x, position, theta)
    np.testing.assert_allclose(got[:, 0::2], re, atol=2e-5)
    np.testing.assert_allclose(got[:, 1::2], im, atol=2e-5)


@pytest.mark.parametrize("position,theta", [(0, 1e4), (5, 1e4), (17, 1e6)])
def test_rope_split_half_is_a_complex_rotation_of_halves(position, theta):
    x = RNG.normal(size=(2, 16)).astype(np.float32)
    re, im = _rotate_complex(x[:, :8].astype(np.float64), x[:, 8:], position, theta, 16)
    got = rope_split_half(x, position, theta)
    np.testing.assert_allclose(got[:, :8], re, atol=2e-5)
    np.testing.assert_allclose(got[:, 8:], im, atol=2e-5)


def test_the_two_rope_pairings_differ_away_from_position_zero():
    x = RNG.normal(size=(1, 16)).astype(np.float32)
    np.testing.assert_array_equal(rope_interleaved(x, 0, 1e4), rope_split_half(x, 0, 1e4))
    assert np.abs(rope_interleaved(x, 3, 1e4) - rope_split_half(x, 3, 1e4)).max() > 1e-2


def test_gqa_attention_groups_four_query_heads_per_kv_head_without_scaling():
    d, length = 8, 5
    q = RNG.normal(size=(8, d)).astype(np.float32)
    k = RNG.normal(size=(length, 2, d)).astype(np.float32)
    v = RNG.normal(size=(length, 2, d)).astype(np.float32)
    want = np.zeros((8, d))
    for h in range(8):
        g = h // 4
        scores = [float(np.dot(q[h].astype(np.float64), k[t, g])) for t in range(length)]
        w = np.exp(scores) / np.sum(np.exp(scores))
        want[h] = sum(w[t] * v[t, g].astype(np.float64) for t in range(length))
    np.testing.assert_allclose(gqa_attention(q, k, v), want.reshape(-1), rtol=1e-5, atol=1e-5)


def test_gaussian_topk_gate_uses_the_population_standard_deviation():
    g = RNG.normal(size=200).astype(np.float32)
    vals = [float(t) for t in g]
    cutoff = statistics.fmean(vals) + 1.6448536 * statistics.pstdev(vals)
    want = np.maximum(np.array(vals) - cutoff, 0.0)
    got = gaussian_topk_gate(g, 1.6448536)
    np.testing.assert_allclose(got, want, atol=1e-5)
    assert 0 < np.count_nonzero(got) < 0.15 * g.size  # roughly the top 5 % survive


def test_gaussian_topk_gate_keeps_what_only_the_population_std_keeps():
    """[-1, -1, -1, 3]: mean 0; population std √3 → cutoff 2.849, 3 survives by 0.151.

    The sample std (2, cutoff 3.290) would zero every element, so this vector tells the two
    rules apart (spec 002 §4 divides the variance by N; pccx's runtime uses ``np.std``).
    """
    got = gaussian_topk_gate(np.array([-1.0, -1.0, -1.0, 3.0], dtype=np.float32), 1.6448536)
    assert got.tolist() == pytest.approx([0.0, 0.0, 0.0, 3.0 - 1.6448536 * 1.7320508075688772])
    assert np.count_nonzero(got) == 1


def test_softcap_bounds_logits_and_is_nearly_identity_near_zero():
    x = np.array([-1e4, -30.0, 0.0, 0.5, 30.0, 1e4], dtype=np.float32)
    got = softcap(x, 30.0)
    assert np.all(np.abs(got) <= 30.0)
    np.testing.assert_allclose(got, 30.0 * np.tanh(x.astype(np.float64) / 30.0), rtol=1e-6)
    assert abs(got[3] - 0.5) < 1e-3

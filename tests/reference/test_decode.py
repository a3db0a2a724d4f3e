"""The reference decode step on the synthetic tiny checkpoint.

Structural claims of the specification (PLE only into rows 1..3, LAuReL on x_norm, KV
sharing, token-id rules, sparse gate) are checked by recomputing the step's pieces here in
float64 from the checkpoint's weights and the traced inputs of that piece.
"""

from __future__ import annotations

import math
import statistics

import numpy as np
import pytest

from pccx_flow.errors import ConfigError, InputError
from pccx_flow.model.config import kv_source_layer, owns_kv
from pccx_flow.reference.decode import KVCache, decode_step, new_kv_cache

SEMANTICS = ("pccx", "gemma3n")
TOKENS = (3, 500, 17, 447, 448, 100, 2)  # > vocab_per_layer (448) included on purpose


def _run(ckpt, semantics, tokens=TOKENS):
    cache = new_kv_cache(ckpt.config, semantics)
    logits, traces = [], []
    for position, token in enumerate(tokens):
        trace = {}
        logits.append(decode_step(ckpt, token, position, cache, semantics=semantics, trace=trace))
        traces.append(trace)
    return logits, traces, cache


@pytest.fixture(scope="module", params=SEMANTICS)
def run(request, tiny_ckpt):
    logits, traces, cache = _run(tiny_ckpt, request.param)
    return request.param, logits, traces, cache


def _rms_norm64(x, gamma=None, eps=1e-6):
    x = np.asarray(x, dtype=np.float64)
    out = x / np.sqrt((x**2).mean(axis=-1, keepdims=True) + eps)
    return out if gamma is None else out * gamma


def _w(ckpt, key):
    return ckpt.tensor(key).astype(np.float64)


def test_logits_are_finite_float32_vocab_vectors_within_the_softcap(run, tiny_config):
    _, logits, traces, _ = run
    for step, out in enumerate(logits):
        assert out.shape == (tiny_config.vocab,) and out.dtype == np.float32
        assert np.isfinite(out).all()
        assert np.abs(out).max() < tiny_config.final_softcap
        raw = traces[step]["logits_raw"].astype(np.float64)
        np.testing.assert_allclose(out, 30.0 * np.tanh(raw / 30.0), rtol=1e-5, atol=1e-5)
    # the steps really depend on the token and the position
    assert len({int(np.argmax(x)) for x in logits}) > 1


def test_decode_is_deterministic(run, tiny_ckpt):
    semantics, logits, _, cache = run
    again, _, cache2 = _run(tiny_ckpt, semantics)
    for a, b in zip(logits, again, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(cache.k, cache2.k)


def test_semantics_give_different_logits(tiny_ckpt):
    pccx, _, _ = _run(tiny_ckpt, "pccx", TOKENS[:2])
    gemma, _, _ = _run(tiny_ckpt, "gemma3n", TOKENS[:2])
    assert np.abs(pccx[1] - gemma[1]).max() > 0.1


def test_cache_dtype_and_shape_follow_the_semantics(tiny_config):
    shape = (tiny_config.n_kv_cache_layers, tiny_config.max_seq, tiny_config.kv_dim)
    for semantics, dtype in (("pccx", np.float16), ("gemma3n", np.float32)):
        cache = new_kv_cache(tiny_config, semantics)
        assert cache.k.shape == cache.v.shape == shape
        assert cache.k.dtype == cache.v.dtype == dtype
    with pytest.raises(ConfigError):
        new_kv_cache(tiny_config, "llama")


def test_ple_never_touches_row_zero(run, tiny_config):
    _, _, traces, _ = run
    for trace in traces:
        for i in range(tiny_config.n_layers):
            before, after = trace[f"L{i}.xs_before_ple"], trace[f"L{i}.xs_after_ple"]
            np.testing.assert_array_equal(before[0], after[0])
            mapped = trace[f"L{i}.ple_mapped"]
            assert np.abs(mapped).max() > 1e-3
            for r in (1, 2, 3):
                assert np.abs(after[r] - before[r]).max() > 1e-3
                np.testing.assert_allclose(after[r] - before[r], mapped, atol=1e-5)


def test_laurel_reads_x_norm_not_x_input(run, tiny_ckpt, tiny_config):
    _, _, traces, _ = run
    trace = traces[2]
    for i in (0, 4, 7):
        p = f"layers.{i}.laurel."
        x_norm, x_input = trace[f"L{i}.x_norm"], trace[f"L{i}.x_input"]
        np.testing.assert_array_equal(trace[f"L{i}.laurel_in"], x_norm)
        assert np.abs(x_norm - x_input).max() > 1e-2

        def laurel(x, p=p):
            mid = _w(tiny_ckpt, p + "linear_left.weight") @ x
            lx = _w(tiny_ckpt, p + "linear_right.weight") @ mid
            return x + _rms_norm64(lx, _w(tiny_ckpt, p + "post_laurel_norm.weight"))

        np.testing.assert_allclose(trace[f"L{i}.laurel_out"], laurel(x_norm), atol=1e-4)
        assert np.abs(trace[f"L{i}.laurel_out"] - laurel(x_input)).max() > 1e-2


def _attention64(q, k, v, q_per_kv):
    out = []
    for h in range(q.shape[0]):
        g = h // q_per_kv
        s = k[:, g, :].astype(np.float64) @ q[h]
        w = np.exp(s - s.max())
        out.append((w / w.sum()) @ v[:, g, :].astype(np.float64))
    return np.concatenate(out)


def test_kv_sharing_layers_read_the_last_own_slot_of_their_kind(run, tiny_config):
    semantics, _, traces, cache = run
    c = tiny_config
    assert cache.k.shape[0] == c.first_kv_shared_layer == 5
    position = len(traces) - 1  # 6: past the tiny sliding window of 4
    trace = traces[position]
    shape = (-1, c.n_kv_heads, c.head_dim)
    for i in range(c.n_layers):
        slot = int(trace[f"L{i}.kv_source"])
        want_slot = i if i < 5 else (4 if i % 5 == 4 else 3)
        assert slot == want_slot == kv_source_layer(c, i)
        window = semantics == "gemma3n" and i % 5 != 4
        start = position - c.sliding_window + 1 if window else 0
        assert int(trace[f"L{i}.kv_start"]) == start
        q = trace[f"L{i}.q_rope"].astype(np.float64)
        k = cache.k[slot, start : position + 1].reshape(shape)
        v = cache.v[slot, start : position + 1].reshape(shape)
        want = _attention64(q, k, v, c.q_per_kv)
        np.testing.assert_allclose(trace[f"L{i}.attn_raw"], want, rtol=1e-4, atol=1e-4)
        if i >= 5:  # the other slot (or the full history) would give another answer
            other = 4 if slot == 3 else 3
            k2 = cache.k[other, start : position + 1].reshape(shape)
            v2 = cache.v[other, start : position + 1].reshape(shape)
            assert (
                np.abs(trace[f"L{i}.attn_raw"] - _attention64(q, k2, v2, c.q_per_kv)).max() > 1e-3
            )


def test_own_kv_layers_write_their_slot_at_the_position(run, tiny_config):
    semantics, _, traces, cache = run
    dtype = np.float16 if semantics == "pccx" else np.float32
    for position, trace in enumerate(traces):
        for i in range(tiny_config.n_layers):
            if not owns_kv(tiny_config, i):
                assert f"L{i}.k_rope" not in trace
                continue
            want_k = trace[f"L{i}.k_rope"].reshape(-1).astype(dtype)
            np.testing.assert_array_equal(cache.k[i, position], want_k)
            np.testing.assert_array_equal(
                cache.v[i, position], trace[f"L{i}.v"].reshape(-1).astype(dtype)
            )
    assert not cache.k[:, len(traces) :].any()  # nothing written past the last position


def _complex_rope(x, position, theta, pairing):
    d = x.shape[-1]
    i = np.arange(d // 2)
    rot = np.exp(1j * position * theta ** (-2.0 * i / d))
    if pairing == "interleaved":
        z = (x[:, 0::2] + 1j * x[:, 1::2]) * rot
        out = np.empty_like(x)
        out[:, 0::2], out[:, 1::2] = z.real, z.imag
    else:
        z = (x[:, : d // 2] + 1j * x[:, d // 2 :]) * rot
        out = np.concatenate([z.real, z.imag], axis=1)
    return out


@pytest.mark.parametrize("layer", [0, 4])
def test_k_is_normed_per_head_and_rotated_with_the_layer_theta(run, tiny_ckpt, tiny_config, layer):
    semantics, _, traces, _ = run
    c = tiny_config
    position = 5
    trace = traces[position]
    p = f"layers.{layer}.self_attn."
    k = _w(tiny_ckpt, p + "k_proj.weight") @ trace[f"L{layer}.x_norm"]
    k = _rms_norm64(k.reshape(c.n_kv_heads, c.head_dim), _w(tiny_ckpt, p + "k_norm.weight"))
    theta = 1e6 if layer == 4 else 1e4
    pairing = "interleaved" if semantics == "pccx" else "split-half"
    np.testing.assert_allclose(
        trace[f"L{layer}.k_rope"], _complex_rope(k, position, theta, pairing), atol=1e-4
    )
    v = (_w(tiny_ckpt, p + "v_proj.weight") @ trace[f"L{layer}.x_norm"]).reshape(2, -1)
    want_v = v if semantics == "pccx" else _rms_norm64(v)  # weightless V norm (gemma3n)
    np.testing.assert_allclose(trace[f"L{layer}.v"], want_v, atol=1e-4)


def test_sparse_layers_keep_only_the_top_of_the_gate(run, tiny_config):
    _, _, traces, _ = run
    for trace in traces:
        for i in range(tiny_config.n_layers):
            density = np.count_nonzero(trace[f"L{i}.hidden"]) / tiny_config.ffn
            if i < tiny_config.n_sparse_layers:
                assert 0 < density < 0.15
            else:
                assert density > 0.9


def _gelu64(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


def test_sparse_gate_statistics_follow_the_semantics(run, tiny_config):
    """Both semantics: population std (ddof=0, spec 002 §4); z = 1.6448536."""
    semantics, _, traces, _ = run
    trace = traces[3]
    for i in range(tiny_config.n_sparse_layers):
        gate = [float(g) for g in trace[f"L{i}.gate_raw"]]
        std = statistics.pstdev(gate)
        cutoff = statistics.fmean(gate) + 1.6448536 * std
        sparse = np.maximum(np.array(gate) - cutoff, 0.0)
        want = _gelu64(sparse) * trace[f"L{i}.up_out"]
        np.testing.assert_allclose(trace[f"L{i}.hidden"], want, rtol=1e-5, atol=1e-6)
    i = tiny_config.n_sparse_layers  # first dense layer: plain GELU gate
    want = _gelu64(trace[f"L{i}.gate_raw"].astype(np.float64)) * trace[f"L{i}.up_out"]
    np.testing.assert_allclose(trace[f"L{i}.hidden"], want, rtol=1e-5, atol=1e-6)


def _pli_embedding_part(ckpt, trace):
    """pli_all·√2 minus the normed projection of x0: the W_ple row times sqrt(ple_dim)."""
    c = ckpt.config
    x_proj = _w(ckpt, "per_layer_model_projection.weight") @ trace["x0"] / math.sqrt(c.hidden)
    normed = _rms_norm64(
        x_proj.reshape(c.n_layers, c.ple_dim), _w(ckpt, "per_layer_projection_norm.weight")
    )
    return (trace["pli_all"] * math.sqrt(2.0) - normed).reshape(-1) / math.sqrt(c.ple_dim)


def test_token_ids_beyond_the_per_layer_table(tiny_ckpt, tiny_config):
    c = tiny_config
    big = 500  # >= vocab_per_layer (448), < vocab (512)
    traces = {}
    for semantics in SEMANTICS:
        for token in (big, c.vocab_per_layer - 1):
            trace = {}
            decode_step(
                tiny_ckpt, token, 0, new_kv_cache(c, semantics), semantics=semantics, trace=trace
            )
            traces[semantics, token] = trace
    sqrt_d = math.sqrt(c.hidden)
    embed = lambda t: tiny_ckpt.rows("embed_tokens.weight", t, t + 1)[0] * sqrt_d  # noqa: E731
    ple_row = lambda t: tiny_ckpt.rows("embed_tokens_per_layer.weight", t, t + 1)[0]  # noqa: E731
    # pccx clips both lookups to vocab_per_layer - 1: the two tokens give the same step
    np.testing.assert_array_equal(traces["pccx", big]["logits"], traces["pccx", 447]["logits"])
    np.testing.assert_allclose(traces["pccx", big]["x0"], embed(447), rtol=1e-6)
    # gemma3n: the main embedding is not clipped, the per-layer id maps to row 0
    np.testing.assert_allclose(traces["gemma3n", big]["x0"], embed(big), rtol=1e-6)
    np.testing.assert_allclose(
        _pli_embedding_part(tiny_ckpt, traces["gemma3n", big]), ple_row(0), atol=1e-4
    )
    np.testing.assert_allclose(
        _pli_embedding_part(tiny_ckpt, traces["gemma3n", 447]), ple_row(447), atol=1e-4
    )


@pytest.mark.parametrize("token", [-1, 512, 10**9, 2.0, "3", None])
def test_bad_token_id_is_an_input_error(tiny_ckpt, tiny_config, token):
    with pytest.raises(InputError, match="token id"):
        decode_step(tiny_ckpt, token, 0, new_kv_cache(tiny_config))


@pytest.mark.parametrize("position", [-1, 64, 1000, 1.5])
def test_bad_position_is_an_input_error(tiny_ckpt, tiny_config, position):
    with pytest.raises(InputError, match="position"):
        decode_step(tiny_ckpt, 1, position, new_kv_cache(tiny_config))


def test_numpy_integers_are_accepted(tiny_ckpt, tiny_config):
    a = decode_step(tiny_ckpt, np.int64(5), np.int32(0), new_kv_cache(tiny_config))
    b = decode_step(tiny_ckpt, 5, 0, new_kv_cache(tiny_config))
    np.testing.assert_array_equal(a, b)


def test_unknown_semantics_is_a_config_error(tiny_ckpt, tiny_config):
    with pytest.raises(ConfigError, match="semantics"):
        decode_step(tiny_ckpt, 1, 0, new_kv_cache(tiny_config), semantics="llama")


def test_cache_of_the_other_semantics_is_refused(tiny_ckpt, tiny_config):
    with pytest.raises(InputError, match="new_kv_cache"):
        decode_step(tiny_ckpt, 1, 0, new_kv_cache(tiny_config, "gemma3n"), semantics="pccx")
    small = KVCache(k=np.zeros((5, 8, 16), np.float16), v=np.zeros((5, 8, 16), np.float16))
    with pytest.raises(InputError, match="KV cache"):
        decode_step(tiny_ckpt, 1, 0, small)

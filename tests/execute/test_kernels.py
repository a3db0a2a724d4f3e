"""Single kernels against the reference decode's own functions (an independent oracle)."""

from __future__ import annotations

import numpy as np
import pytest

from pccx_flow.execute.kernels import kernel_table
from pccx_flow.execute.plan import NodeCall
from pccx_flow.execute.runtime import StepContext
from pccx_flow.graph.kernel_specs import KERNELS as SPECIFIED
from pccx_flow.reference.functions import gelu_tanh, rope_interleaved, rope_split_half

TABLE = kernel_table("default")


def _call(kernel, params=None, out_shapes=((1,),), weight=None, flags=None):
    return NodeCall(
        node=f"test.{kernel}",
        kernel=kernel,
        op="HOST",
        params=params or {},
        flags=flags or {},
        weight=weight,
        input_names=(),
        output_names=tuple(f"o{i}" for i in range(len(out_shapes))),
        output_shapes=tuple(out_shapes),
        producers=(),
        sources=(),
    )


def _run(kernel, inputs, params=None, ctx=None, weights=None, weight=None, flags=None):
    return TABLE[kernel](
        _call(kernel, params, weight=weight, flags=flags), inputs, ctx, weights, None
    )


def test_every_specified_kernel_has_an_implementation():
    assert set(SPECIFIED) == set(TABLE)


@pytest.mark.parametrize(
    ("pairing", "oracle"), [("interleaved", rope_interleaved), ("split_half", rope_split_half)]
)
@pytest.mark.parametrize("position", [0, 7, 8191])
@pytest.mark.parametrize("theta", [1e4, 1e6])
def test_rope_phase_sin_cos_combine_equals_reference_rope(pairing, oracle, position, theta):
    d = 16
    x = np.random.default_rng(position).standard_normal(d).astype(np.float32)
    phase = _run(
        "rope_phase",
        [np.array([theta], np.float32)],
        {"position": position, "head_dim": d, "theta": theta},
    )
    assert np.all(np.abs(phase) <= np.pi)
    sin, cos = _run("cvo_sin", [phase]), _run("cvo_cos", [phase])
    got = _run("rope_combine", [x, sin, cos], {"pairing": pairing})
    want = oracle(x[None, :], position, theta)[0]
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6)


def test_gelu_is_the_tanh_form_with_spans():
    x = np.linspace(-6, 6, 101, dtype=np.float32)
    np.testing.assert_allclose(_run("cvo_gelu", [x]), gelu_tanh(x), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(
        _run("cvo_gelu", [x], {"span": [10, 20]}), gelu_tanh(x[10:20]), rtol=1e-6, atol=1e-7
    )
    # Not the RTL's x * sigmoid(1.702 x), which differs by up to ~0.02.
    assert np.abs(_run("cvo_gelu", [x]) - x / (1 + np.exp(-1.702 * x))).max() > 1e-2


def test_softmax_sequence_and_sparse_gate_scalars():
    s = np.array([1.0, 3.0, -2.0, 0.5], np.float32)
    m = np.array([s.max()], np.float32)
    e = _run("cvo_exp", [s, m])
    total = _run("cvo_reduce_sum", [e])
    p = _run("cvo_scale_recip", [e, total])
    want = np.exp(s.astype(np.float64) - 3.0)
    np.testing.assert_allclose(p, want / want.sum(), rtol=1e-6)
    c = _run("cutoff", [np.array([1.0], np.float32), np.array([2.0], np.float32)], {"z": 1.5})
    assert c[0] == np.float32(4.0)
    np.testing.assert_array_equal(_run("sub_relu", [s, c - 2]), np.float32([0, 1, 0, 0]))


def test_altup_mix_uses_row_major_coefficients():
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(6).astype(np.float32) for _ in range(4)]
    coef = rng.standard_normal(16).astype(np.float32)
    for k in range(4):
        got = _run("altup_mix", [coef, *xs], {"row": k, "n_streams": 4})
        want = xs[k] + sum(coef[4 * k + j] * xs[j] for j in range(4))
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_ple_write_refuses_row_zero():
    with pytest.raises(ValueError, match="row 0"):
        _run("ple_write", [np.ones(3), np.ones(3)], {"rows": [0]})


@pytest.mark.parametrize(
    ("rule", "token", "row"),
    [
        ("clip", 500, 447),
        ("zero_if_oob", 500, 0),
        ("zero_if_oob", 5, 5),
        ("none", 500, 500),
    ],
)
def test_embed_row_id_rules(tiny_ckpt, rule, token, row):
    cfg = tiny_ckpt.config
    ctx = StepContext(cfg, "pccx", 0, token)
    key = "embed_tokens.weight"
    got = _run(
        "embed_row",
        [],
        {"id_rule": rule, "id_limit": cfg.vocab_per_layer},
        ctx,
        tiny_ckpt,
        weight={"key": key, "rows": [0, cfg.vocab]},
    )
    np.testing.assert_array_equal(got, np.asarray(tiny_ckpt.rows(key, row, row + 1))[0])


def test_gemv_layouts_tiles_and_accumulate(tiny_ckpt):
    cfg = tiny_ckpt.config
    rng = np.random.default_rng(1)
    key = "layers.0.mlp.down_proj.weight"  # INT4 [hidden, ffn]
    w = np.asarray(tiny_ckpt.tensor(key), np.float64)
    x = rng.standard_normal(cfg.ffn).astype(np.float32)
    acc = rng.standard_normal(16).astype(np.float32)
    got = _run(
        "gemv",
        [x[32:96], acc],
        {"layout": "out_in"},
        weights=tiny_ckpt,
        weight={"key": key, "rows": [16, 32], "cols": [32, 96]},
        flags={"accm": 1},
    )
    np.testing.assert_allclose(got, w[16:32, 32:96] @ x[32:96] + acc, rtol=1e-5, atol=1e-5)
    key = "altup_projections.1.weight"  # float32, multiplied as x · A
    a = np.asarray(tiny_ckpt.tensor(key), np.float64)
    x = rng.standard_normal(cfg.hidden).astype(np.float32)
    got = _run(
        "gemv", [x], {"layout": "in_out"}, weights=tiny_ckpt, weight={"key": key, "rows": [8, 40]}
    )
    np.testing.assert_allclose(got, (x @ a)[8:40], rtol=1e-5, atol=1e-5)


def test_kv_write_rows_join_head_parts_and_refuse_a_missing_head():
    """The step's KV rows arrive one KV head's part per write; a layer's row is the parts
    in head order, and a head missing from one kind is one clear error."""
    from types import SimpleNamespace

    from pccx_flow.errors import ExecutionError
    from pccx_flow.execute.kernels_mem import kv_write_rows

    def write(kind, head):
        params = {"cache_layer": 0, "kind": kind, "kv_head": head}
        return SimpleNamespace(kernel="kv_write", params=params)

    calls = {f"{k}{h}": write(k, h) for k in "kv" for h in (1, 0)}
    results = {n: (np.full(2, 10 * (n[0] == "v") + int(n[1]), np.float16),) for n in calls}
    k_row, v_row = kv_write_rows(calls, results)[0]
    np.testing.assert_array_equal(k_row, [0, 0, 1, 1])
    np.testing.assert_array_equal(v_row, [10, 10, 11, 11])
    del calls["v1"]
    with pytest.raises(ExecutionError, match=r"K heads \[0, 1\] and V heads \[0\]"):
        kv_write_rows(calls, results)

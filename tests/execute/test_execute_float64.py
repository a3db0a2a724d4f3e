"""In float64 the executed graph computes the reference decode's function, to ~1e-13.

`test_execute_tiny.py` holds float32 steps to 1e-4: the graph rounds every node's output to
float32 and the reference every function's, so two correct float32 programs differ by up to
~2e-5 on tiny, and even an executor whose every node were exact before that rounding would be
up to ~1.2e-5 from the exact decode on some steps (README, "Numerics"). A 1e-5 check cannot
hold in float32. Here both sides keep activations in float64 (`pccx_flow.precision`) while
storage stays as specified (INT4 weights, float16 or float32 KV cache), and every step, from
the same earlier KV rows, must agree to 1e-10 with identical new KV rows and the same argmax:
on the threaded scheduler, with a schedule's priorities on an in-process distributed cluster
(one task per node and fused), in the plain loop, and in free-running generation. A
structural mistake moves logits by orders of magnitude more than 1e-10.
"""

from __future__ import annotations

import numpy as np
import pytest

from pccx_flow.errors import InputError
from pccx_flow.execute.executor import execute, execute_step, run_sequential
from pccx_flow.execute.generate import generate
from pccx_flow.execute.state import new_decode_state
from pccx_flow.graph.build import build_decode_graph
from pccx_flow.reference.decode import decode_step, new_kv_cache
from pccx_flow.reference.generate import generate as reference_generate

from .test_execute_tiny import TOKENS, _schedule, _state_at

TOLERANCE = 1e-10


@pytest.fixture(scope="module")
def reference64(tiny_ckpt):
    """Float64 reference logits of TOKENS at positions 0.. and its KV cache, per semantics."""
    out = {}
    for semantics in ("pccx", "gemma3n"):
        cache = new_kv_cache(tiny_ckpt.config, semantics)
        logits = [
            decode_step(tiny_ckpt, t, p, cache, semantics=semantics, precision="float64")
            for p, t in enumerate(TOKENS)
        ]
        out[semantics] = {"logits": logits, "cache": cache}
    return out


def _assert_step(reference64, semantics, p, logits, state):
    want = reference64[semantics]["logits"][p]
    cache = reference64[semantics]["cache"]
    assert logits.dtype == np.float64 and want.dtype == np.float64
    np.testing.assert_array_equal(state.k_cache[:, p], cache.k[:, p])
    np.testing.assert_array_equal(state.v_cache[:, p], cache.v[:, p])
    diff = float(np.max(np.abs(logits - want)))
    assert diff <= TOLERANCE, f"{semantics} position {p}: max |logit diff| {diff:.2e}"
    assert int(np.argmax(logits)) == int(np.argmax(want))


@pytest.mark.parametrize("semantics", ["pccx", "gemma3n"])
def test_threaded_dask_matches_the_float64_reference(tiny_ckpt, reference64, semantics):
    for p in range(len(TOKENS)):
        g = build_decode_graph(tiny_ckpt.config, semantics=semantics, position=p)
        state = _state_at(tiny_ckpt, reference64, semantics, p)
        logits = execute(g, tiny_ckpt, state, precision="float64")
        _assert_step(reference64, semantics, p, logits, state)


def test_distributed_fused_and_loop_runners_match_too(tiny_ckpt, reference64, local_client):
    """gemma3n at position 5: the sliding window (4) no longer sees position 0, and layers
    5-9 read the KV of layers 3 and 4."""
    semantics, p = "gemma3n", 5
    g = build_decode_graph(tiny_ckpt.config, semantics=semantics, position=p)
    schedule = _schedule(g)
    runners = {
        "distributed": lambda st: execute(
            g, tiny_ckpt, st, client=local_client, schedule=schedule, precision="float64"
        ),
        "distributed fused": lambda st: execute(
            g, tiny_ckpt, st, client=local_client, fuse=True, precision="float64"
        ),
        "threaded fused": lambda st: execute(g, tiny_ckpt, st, fuse=True, precision="float64"),
        "loop": lambda st: run_sequential(g, tiny_ckpt, st, precision="float64"),
    }
    for run in runners.values():
        state = _state_at(tiny_ckpt, reference64, semantics, p)
        _assert_step(reference64, semantics, p, run(state), state)


@pytest.mark.parametrize(("semantics", "temperature"), [("pccx", 0.0), ("gemma3n", 0.9)])
def test_float64_generation_matches_the_reference_loop(tiny_ckpt, semantics, temperature):
    """Free-running, each side on its own cache: in float64 the caches do not drift apart,
    so every step's logits stay within 1e-10, not only the tokens."""
    prompt, steps = [2, 105], 4
    kw = dict(semantics=semantics, temperature=temperature, seed=5, precision="float64")
    want = reference_generate(tiny_ckpt, prompt, steps, **kw)
    got = generate(tiny_ckpt, prompt, steps, **kw)
    assert got.tokens == want.tokens
    for a, b in zip(got.logits, want.logits, strict=True):
        assert a.dtype == b.dtype == np.float64
        assert np.max(np.abs(a - b)) <= TOLERANCE


def test_float32_stays_the_default_and_float64_really_changes_the_arithmetic(tiny_ckpt):
    g = build_decode_graph(tiny_ckpt.config, semantics="pccx", position=0)
    state32 = new_decode_state(tiny_ckpt.config, "pccx", token_id=2)
    state64 = new_decode_state(tiny_ckpt.config, "pccx", token_id=2)
    out32 = execute_step(g, tiny_ckpt, state32)
    out64 = execute_step(g, tiny_ckpt, state64, precision="float64")
    assert out32.logits.dtype == np.float32 and out64.logits.dtype == np.float64
    dtypes32 = {np.asarray(v).dtype for outs in out32.node_outputs.values() for v in outs}
    dtypes64 = {np.asarray(v).dtype for outs in out64.node_outputs.values() for v in outs}
    assert np.dtype(np.float64) not in dtypes32 and np.dtype(np.float64) in dtypes64
    diff = np.max(np.abs(out64.logits - out32.logits))
    assert 0 < diff < 1e-4  # float32 rounding, nothing more
    assert state32.k_cache.dtype == state64.k_cache.dtype == np.float16  # storage unchanged


def test_unknown_precision_is_refused_before_any_work(tiny_ckpt):
    g = build_decode_graph(tiny_ckpt.config, semantics="pccx", position=0)
    state = new_decode_state(tiny_ckpt.config, "pccx", token_id=2)
    with pytest.raises(InputError, match="unknown precision 'float16'"):
        execute(g, tiny_ckpt, state, precision="float16")
    assert state.position == 0 and not state.k_cache.any()
    cache = new_kv_cache(tiny_ckpt.config, "pccx")
    with pytest.raises(InputError, match="unknown precision"):
        decode_step(tiny_ckpt, 2, 0, cache, precision="bfloat16")
    assert not cache.k.any()

"""The scheduled nodes compute the right numbers: executed decode graphs vs the reference decode.

On the ``tiny`` preset (10 layers, layers 5-9 reuse the KV of layers 3 and 4, sparse FFN on
layers 0-2, sliding window 4 under ``gemma3n``) the logits of each executed step are compared
with `pccx_flow.reference.decode.decode_step`, which shares no code with the graph or the
kernels.

Tolerance: the graph computes the same math as the reference with different float32 rounding
points (RMSNorm as x · recip(sqrt(.)) from tiled partial sums, GEMV tiles, softmax from CVO
steps), which leaves per-layer relative differences of 1e-7..1e-6; on logits of magnitude
~20 that is up to ~3e-5 after a few positions (and a float16 KV row can round the other way).
`LOGIT_TOL` is therefore 1e-4, the CLI's ``--check`` tolerance; any structural mistake
(a wrong norm, pairing, window, cache slot or id rule) moves logits by far more.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from pccx_flow.errors import ExecutionError
from pccx_flow.execute.executor import execute, execute_step, run_sequential
from pccx_flow.execute.generate import generate
from pccx_flow.execute.kernels import kernel_table, register_table
from pccx_flow.execute.state import new_decode_state
from pccx_flow.graph.build import build_decode_graph
from pccx_flow.reference.decode import decode_step, new_kv_cache
from pccx_flow.reference.generate import generate as reference_generate

LOGIT_TOL = 1e-4
# 500 is above the per-layer vocabulary (448): exercises the clip / zero-if-out-of-range rules.
TOKENS = [2, 105, 500, 7, 300, 9]


@pytest.fixture(scope="module")
def reference_logits(tiny_ckpt):
    """Reference logits of TOKENS at positions 0.. for both semantics."""
    out = {}
    for semantics in ("pccx", "gemma3n"):
        cache = new_kv_cache(tiny_ckpt.config, semantics)
        out[semantics] = [
            decode_step(tiny_ckpt, t, p, cache, semantics=semantics) for p, t in enumerate(TOKENS)
        ]
    return out


@pytest.fixture(scope="module")
def graphs(tiny_config):
    return {
        (s, p): build_decode_graph(tiny_config, semantics=s, position=p)
        for s in ("pccx", "gemma3n")
        for p in range(len(TOKENS))
    }


def _schedule(graph, policy="critical-path"):
    from pccx_flow.hardware.profile import load_profile
    from pccx_flow.schedule.registry import run_policy

    return run_policy(graph, load_profile("v002-spec"), policy)


def _assert_close(got, want, where):
    diff = float(np.max(np.abs(np.asarray(got, np.float64) - want)))
    assert diff <= LOGIT_TOL, f"{where}: max |logit diff| {diff:.2e}"
    assert int(np.argmax(got)) == int(np.argmax(want)), f"{where}: argmax differs"


def _decode(tiny_ckpt, graphs, semantics, n_steps, run):
    state = new_decode_state(tiny_ckpt.config, semantics, token_id=TOKENS[0])
    logits = []
    for p in range(n_steps):
        state.token_id = TOKENS[p]
        logits.append(run(graphs[semantics, p], state))
    return logits, state


@pytest.mark.parametrize("semantics", ["pccx", "gemma3n"])
def test_threaded_dask_matches_reference_over_positions(
    tiny_ckpt, graphs, reference_logits, semantics
):
    got, state = _decode(
        tiny_ckpt, graphs, semantics, len(TOKENS), lambda g, st: execute(g, tiny_ckpt, st)
    )
    for p, (a, b) in enumerate(zip(got, reference_logits[semantics], strict=True)):
        _assert_close(a, b, f"{semantics} position {p}")
    assert state.position == len(TOKENS)


def test_schedule_priorities_and_plain_loop_compute_the_same(tiny_ckpt, graphs, reference_logits):
    n = 3
    sched, _ = _decode(
        tiny_ckpt,
        graphs,
        "pccx",
        n,
        lambda g, st: execute(g, tiny_ckpt, st, schedule=_schedule(g)),
    )
    loop, _ = _decode(tiny_ckpt, graphs, "pccx", n, lambda g, st: run_sequential(g, tiny_ckpt, st))
    for p in range(n):
        _assert_close(sched[p], reference_logits["pccx"][p], f"scheduled position {p}")
        # Same kernels on the same inputs: the runner does not change a single bit.
        np.testing.assert_array_equal(sched[p], loop[p])


def _advance_to(tiny_ckpt, graphs, semantics, position):
    """A state at `position`, having decoded TOKENS[:position] on the threaded scheduler."""
    state = new_decode_state(tiny_ckpt.config, semantics, token_id=TOKENS[0])
    for p in range(position):
        state.token_id = TOKENS[p]
        execute(graphs[semantics, p], tiny_ckpt, state)
    state.token_id = TOKENS[position]
    return state


def test_distributed_in_process_cluster_with_schedule(
    tiny_ckpt, graphs, reference_logits, local_client
):
    """One task per node, lanes and priorities from a HEFT schedule, at a position with past KV."""
    p = 1
    state = _advance_to(tiny_ckpt, graphs, "pccx", p)
    g = graphs["pccx", p]
    got = execute(g, tiny_ckpt, state, client=local_client, schedule=_schedule(g, "heft"))
    _assert_close(got, reference_logits["pccx"][p], f"distributed position {p}")


def test_fused_tasks_compute_the_same_numbers(tiny_ckpt, graphs, reference_logits, local_client):
    p = 2
    g = graphs["gemma3n", p]
    start = _advance_to(tiny_ckpt, graphs, "gemma3n", p)
    unfused = execute_step(g, tiny_ckpt, copy.deepcopy(start))
    for kw in ({}, {"client": local_client, "schedule": _schedule(g)}):
        state = copy.deepcopy(start)
        fused = execute_step(g, tiny_ckpt, state, fuse=True, **kw)
        assert len(fused.node_outputs) == g.number_of_nodes()
        np.testing.assert_array_equal(fused.logits, unfused.logits)
        for layer, (k, v) in unfused.kv_rows.items():
            np.testing.assert_array_equal(fused.kv_rows[layer][0], k)
            np.testing.assert_array_equal(fused.kv_rows[layer][1], v)
    _assert_close(unfused.logits, reference_logits["gemma3n"][p], f"fused position {p}")


def test_worker_processes_and_a_killed_worker_leave_results_unchanged(
    tiny_ckpt, graphs, reference_logits
):
    """Two worker processes open the checkpoint themselves; one is killed after a step.

    Fused tasks keep this test short; the killed worker's nanny restarts it while the next
    step is submitted, and the scheduler recomputes whatever was lost.
    """
    import os
    import signal

    from distributed import Client, LocalCluster

    cluster = LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
        worker_dashboard_address="127.0.0.1:0",
    )
    try:
        with Client(cluster, set_as_default=False) as client:
            state = new_decode_state(tiny_ckpt.config, "gemma3n", token_id=TOKENS[0])
            got = [execute(graphs["gemma3n", 0], tiny_ckpt, state, client=client, fuse=True)]
            victim = sorted(client.run(os.getpid).values())[0]
            os.kill(victim, signal.SIGKILL)  # the nanny restarts it
            state.token_id = TOKENS[1]
            got.append(execute(graphs["gemma3n", 1], tiny_ckpt, state, client=client, fuse=True))
            assert victim not in client.run(os.getpid).values()
    finally:
        cluster.close()
    for p in range(2):
        _assert_close(got[p], reference_logits["gemma3n"][p], f"worker processes position {p}")


@pytest.mark.parametrize(
    ("semantics", "temperature"), [("pccx", 0.0), ("gemma3n", 0.0), ("pccx", 0.9)]
)
def test_generation_produces_the_reference_tokens(tiny_ckpt, semantics, temperature):
    prompt, steps = [2, 105], 3
    kw = dict(semantics=semantics, temperature=temperature, top_p=0.9, seed=11)
    want = reference_generate(tiny_ckpt, prompt, steps, **kw)
    got = generate(tiny_ckpt, prompt, steps, **kw)
    assert got.tokens == want.tokens
    assert len(got.logits) == len(want.logits) == len(prompt) + steps - 1
    for p, (a, b) in enumerate(zip(got.logits, want.logits, strict=True)):
        _assert_close(a, b, f"generation step {p}")
    assert len(got.step_seconds) == len(got.logits)


def test_failing_kernel_is_an_execution_error_naming_the_node(tiny_ckpt, graphs):
    def broken(call, inputs, ctx, weights, external):
        raise FloatingPointError("overflow in rotation")

    register_table("broken-rope", {**kernel_table("default"), "rope_combine": broken})
    state = new_decode_state(tiny_ckpt.config, "pccx", token_id=2)
    with pytest.raises(ExecutionError) as info:
        execute_step(graphs["pccx", 0], tiny_ckpt, state, kernels="broken-rope")
    msg = str(info.value)
    assert "rope" in msg and "kernel rope_combine" in msg and "overflow in rotation" in msg
    assert msg.startswith("node L") and "\n" not in msg
    assert state.position == 0 and not state.k_cache.any()

"""The scheduled nodes compute the right numbers: executed decode graphs vs the reference decode.

On the ``tiny`` preset (10 layers, layers 5-9 reuse the KV of layers 3 and 4, sparse FFN on
layers 0-2, sliding window 4 under ``gemma3n``) each executed step is compared with
`pccx_flow.reference.decode.decode_step`, which shares no code with the graph or the kernels.

Method: every executed step starts from the reference's KV rows of earlier positions, so a
step is judged on what it computes from the same state; its new K/V rows must equal the
reference's up to float16 rounding flips (`pccx_flow.execute.compare`), and its logits must
agree to 1e-4 with the same argmax (1e-3 on a step whose float16 rows rounded differently).
Why not 1e-5: that is the float32 noise floor of this model, measured, not assumed.
Against the same decode done in float64, the reference (float64 between float32 tensors) is
4e-6 off on average and the executor 7e-6..8e-6; even an executor whose every node output
were the exact result rounded once to float32 would be 5e-6 off (up to 8e-6), and no single
op contributes more than 3e-6 of it (per-op budget in the README, "Numerics"). Two such
programs differ by up to ~2e-5 on some steps. Any structural mistake (a norm, pairing,
window, cache slot or id rule) moves logits by orders of magnitude more. The same steps in
float64 (`test_execute_float64.py`) agree to 1e-10.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
from distributed.diagnostics.plugin import SchedulerPlugin

from pccx_flow.errors import ExecutionError
from pccx_flow.execute.compare import kv_rounding, step_verdict
from pccx_flow.execute.dask_graph import schedule_priorities, task_key
from pccx_flow.execute.executor import execute, execute_step, run_sequential
from pccx_flow.execute.generate import generate
from pccx_flow.execute.kernels import kernel_table, register_table
from pccx_flow.execute.state import new_decode_state
from pccx_flow.graph.build import build_decode_graph
from pccx_flow.reference.decode import decode_step, new_kv_cache
from pccx_flow.reference.generate import generate as reference_generate

# 500 is above the per-layer vocabulary (448): exercises the clip / zero-if-out-of-range rules.
TOKENS = [2, 105, 500, 7, 300, 9]


@pytest.fixture(scope="module")
def reference(tiny_ckpt):
    """Reference logits of TOKENS at positions 0.. and the final KV cache, per semantics."""
    out = {}
    for semantics in ("pccx", "gemma3n"):
        cache = new_kv_cache(tiny_ckpt.config, semantics)
        logits = [
            decode_step(tiny_ckpt, t, p, cache, semantics=semantics) for p, t in enumerate(TOKENS)
        ]
        out[semantics] = {"logits": logits, "cache": cache}
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


def _state_at(tiny_ckpt, reference, semantics, p):
    """A decode state at position p holding the reference's KV rows of positions < p."""
    state = new_decode_state(tiny_ckpt.config, semantics, token_id=TOKENS[p], position=p)
    cache = reference[semantics]["cache"]
    state.k_cache[:, :p] = cache.k[:, :p]
    state.v_cache[:, :p] = cache.v[:, :p]
    return state


def _assert_step(reference, semantics, p, logits, state):
    """The step at p agrees with the reference: KV rows, logits, argmax."""
    cache = reference[semantics]["cache"]
    want = reference[semantics]["logits"][p]
    k = kv_rounding(state.k_cache[:, p], cache.k[:, p])
    v = kv_rounding(state.v_cache[:, p], cache.v[:, p])
    assert k.beyond == 0 and v.beyond == 0, f"{semantics} position {p}: KV rows differ"
    diff = float(np.max(np.abs(np.asarray(logits, np.float64) - want)))
    same = int(np.argmax(logits)) == int(np.argmax(want))
    assert step_verdict(diff, same, type(k)(k.flips + v.flips, 0)), (
        f"{semantics} position {p}: max |logit diff| {diff:.2e}, argmax same: {same}, "
        f"float16 flips: {k.flips + v.flips}"
    )


def _decode(tiny_ckpt, graphs, reference, semantics, positions, run):
    """Run each position from the reference's earlier rows; check it; return the logits."""
    logits = []
    for p in positions:
        state = _state_at(tiny_ckpt, reference, semantics, p)
        logits.append(run(graphs[semantics, p], state))
        assert state.position == p + 1
        _assert_step(reference, semantics, p, logits[-1], state)
    return logits


@pytest.mark.parametrize("semantics", ["pccx", "gemma3n"])
def test_threaded_dask_matches_reference_over_positions(tiny_ckpt, graphs, reference, semantics):
    _decode(
        tiny_ckpt,
        graphs,
        reference,
        semantics,
        range(len(TOKENS)),
        lambda g, st: execute(g, tiny_ckpt, st),
    )


def test_schedule_priorities_and_plain_loop_compute_the_same(tiny_ckpt, graphs, reference):
    positions = range(3)
    sched = _decode(
        tiny_ckpt,
        graphs,
        reference,
        "pccx",
        positions,
        lambda g, st: execute(g, tiny_ckpt, st, schedule=_schedule(g)),
    )
    loop = _decode(
        tiny_ckpt,
        graphs,
        reference,
        "pccx",
        positions,
        lambda g, st: run_sequential(g, tiny_ckpt, st),
    )
    for a, b in zip(sched, loop, strict=True):
        # Same kernels on the same inputs: the runner does not change a single bit.
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("policy", ["critical-path", "program-order"])
def test_one_thread_runs_in_exactly_the_schedule_order(tiny_ckpt, graphs, policy):
    """The local threaded scheduler ignores annotations; the executor's callback re-sorts its
    ready tasks by priority, so with one thread the nodes run in the schedule's order. Without
    a schedule Dask's own order differs (the check has something to catch)."""
    import threading

    import dask

    ran, lock = [], threading.Lock()

    def recording(kernel):
        def run(call, inputs, ctx, weights, external):
            with lock:
                ran.append(call.node)
            return kernel(call, inputs, ctx, weights, external)

        return run

    base = kernel_table("default")
    register_table("recording", {name: recording(k) for name, k in base.items()})
    g = graphs["pccx", 2]
    schedule = _schedule(g, policy)
    want = [getattr(slot, "node", slot) for slot in schedule.order()]
    orders = {}
    with dask.config.set(num_workers=1, chunksize=1):
        for label, sched in (("scheduled", schedule), ("plain", None)):
            ran.clear()
            state = new_decode_state(tiny_ckpt.config, "pccx", token_id=TOKENS[2], position=2)
            execute_step(g, tiny_ckpt, state, schedule=sched, kernels="recording")
            orders[label] = list(ran)
    assert orders["scheduled"] == want
    assert orders["plain"] != want and sorted(orders["plain"]) == sorted(want)


class CaptureAnnotations(SchedulerPlugin):
    """Records the annotations the scheduler resolved for every task it was given."""

    name = "pccx-test-capture-annotations"

    def __init__(self):
        self.seen: dict[str, dict] = {}

    def update_graph(self, scheduler, *, annotations=None, **kwargs):
        for name, per_key in (annotations or {}).items():
            self.seen.setdefault(name, {}).update(per_key)


def test_distributed_in_process_cluster_with_schedule(tiny_ckpt, graphs, reference, local_client):
    """One task per node with lane class, lane and priority from a HEFT schedule, at a position
    with past KV; the scheduler receives exactly the schedule's lanes and priorities."""
    p = 4
    g = graphs["pccx", p]
    schedule = _schedule(g, "heft")
    local_client.register_plugin(CaptureAnnotations())
    _decode(
        tiny_ckpt,
        graphs,
        reference,
        "pccx",
        [p],
        lambda g, st: execute(g, tiny_ckpt, st, client=local_client, schedule=schedule),
    )
    seen = local_client.run_on_scheduler(
        lambda dask_scheduler: dask_scheduler.plugins[CaptureAnnotations.name].seen
    )
    prio = schedule_priorities(schedule, list(g))
    lanes = {n: schedule.slots[n].lane for n in g}
    # Keys are <op>-<lane>-<node id>-s<position>-<run>: map them back to node ids.
    prefix = {task_key(n, g.nodes[n], "", lanes[n]): n for n in g}
    node_of = {k: prefix[k.rsplit("-", 2)[0] + "-"] for k in seen["priority"] if "-s4-" in k}
    assert set(node_of.values()) == set(g)
    for key, node in node_of.items():
        assert seen["priority"][key] == prio[node]
        assert seen["lane"][key] == lanes[node]
        assert seen["lane_class"][key] == g.nodes[node]["lane_class"]
    assert len(set(prio.values())) == len(prio)  # a strict order, not ties


def test_fused_tasks_compute_the_same_numbers(tiny_ckpt, graphs, reference, local_client):
    p = 5  # gemma3n, sliding window 4: local layers no longer see position 0
    g = graphs["gemma3n", p]
    start = _state_at(tiny_ckpt, reference, "gemma3n", p)
    unfused = execute_step(g, tiny_ckpt, copy.deepcopy(start))
    for kw in ({}, {"client": local_client, "schedule": _schedule(g)}):
        state = copy.deepcopy(start)
        fused = execute_step(g, tiny_ckpt, state, fuse=True, **kw)
        assert len(fused.node_outputs) == g.number_of_nodes()
        np.testing.assert_array_equal(fused.logits, unfused.logits)
        for layer, (k, v) in unfused.kv_rows.items():
            np.testing.assert_array_equal(fused.kv_rows[layer][0], k)
            np.testing.assert_array_equal(fused.kv_rows[layer][1], v)
        _assert_step(reference, "gemma3n", p, fused.logits, state)


def test_worker_processes_and_a_killed_worker_leave_results_unchanged(tiny_ckpt, graphs, reference):
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
    killed = []
    try:
        with Client(cluster, set_as_default=False) as client:

            def run(g, st):
                out = execute(g, tiny_ckpt, st, client=client, fuse=True)
                if not killed:
                    killed.append(sorted(client.run(os.getpid).values())[0])
                    os.kill(killed[0], signal.SIGKILL)  # the nanny restarts it
                return out

            _decode(tiny_ckpt, graphs, reference, "gemma3n", [2, 3], run)
            assert killed[0] not in client.run(os.getpid).values()
    finally:
        cluster.close()


@pytest.mark.parametrize(
    ("semantics", "temperature"), [("pccx", 0.0), ("gemma3n", 0.0), ("pccx", 0.9)]
)
def test_generation_produces_the_reference_tokens(tiny_ckpt, semantics, temperature):
    """Free-running loops: same tokens. Their caches may drift by float16 rounding flips, so
    logits are held to 1e-3 here; the per-step tests above hold each step to 1e-4."""
    prompt, steps = [2, 105], 3
    kw = dict(semantics=semantics, temperature=temperature, top_p=0.9, seed=11)
    want = reference_generate(tiny_ckpt, prompt, steps, **kw)
    got = generate(tiny_ckpt, prompt, steps, **kw)
    assert got.tokens == want.tokens
    assert len(got.logits) == len(want.logits) == len(prompt) + steps - 1
    for a, b in zip(got.logits, want.logits, strict=True):
        assert np.max(np.abs(a - b)) <= 1e-3 and np.argmax(a) == np.argmax(b)
    assert len(got.step_seconds) == len(got.build_seconds) == len(got.logits)


@pytest.mark.parametrize("where", ["threaded", "distributed", "fused"])
def test_failing_kernel_is_an_execution_error_naming_the_node(
    tiny_ckpt, graphs, local_client, where
):
    def broken(call, inputs, ctx, weights, external):
        raise FloatingPointError("overflow in rotation")

    register_table("broken-rope", {**kernel_table("default"), "rope_combine": broken})
    state = new_decode_state(tiny_ckpt.config, "pccx", token_id=2)
    kw = {"distributed": {"client": local_client}, "fused": {"fuse": True}}.get(where, {})
    with pytest.raises(ExecutionError) as info:
        execute_step(graphs["pccx", 0], tiny_ckpt, state, kernels="broken-rope", **kw)
    msg = str(info.value)
    assert "rope" in msg and "kernel rope_combine" in msg and "overflow in rotation" in msg
    assert msg.startswith("node L") and "\n" not in msg
    assert state.position == 0 and not state.k_cache.any()


@pytest.mark.parametrize("semantics", ["pccx", "gemma3n"])
def test_small_tiles_split_keys_and_weights_across_many_nodes(tiny_ckpt, tiny_config, semantics):
    """tile_rows=8 at position 19: three key tiles per head (the key-split softmax combined on
    the host) and many GEMV tiles per matrix, paths the default 512-row tiles never take on
    tiny."""
    tokens = [(37 * i + 2) % 512 for i in range(20)]
    p = len(tokens) - 1
    cache = new_kv_cache(tiny_config, semantics)
    ref_logits = [decode_step(tiny_ckpt, t, i, cache, semantics=semantics) for i, t in
                  enumerate(tokens)]  # fmt: skip
    g = build_decode_graph(tiny_config, semantics=semantics, position=p, tile_rows=8)
    assert any(n.endswith(".attn.combine.h0") for n in g)  # more than one key tile
    state = new_decode_state(tiny_config, semantics, token_id=tokens[p], position=p)
    state.k_cache[:, :p] = cache.k[:, :p]
    state.v_cache[:, :p] = cache.v[:, :p]
    logits = run_sequential(g, tiny_ckpt, state)
    expected = {semantics: {"logits": {p: ref_logits[p]}, "cache": cache}}
    _assert_step(expected, semantics, p, logits, state)

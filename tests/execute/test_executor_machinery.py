"""The executor's machinery on a small hand-made graph: plan, keys, annotations, errors, KV.

The graph is built here with its own tiny kernel table (``handmade``), so these tests do not
depend on the decode-graph builder: they pin down how nodes find their inputs, how the Dask
graph is named and annotated, that the loop and Dask agree, and that a failing kernel is
reported by node.
"""

from __future__ import annotations

from types import SimpleNamespace

import networkx as nx
import numpy as np
import pytest

from pccx_flow.errors import ExecutionError, GraphError, InputError
from pccx_flow.execute.dask_graph import build_dask_graph, task_key
from pccx_flow.execute.executor import execute_step, prepare, run_sequential
from pccx_flow.execute.kernels import register_table
from pccx_flow.execute.kernels_mem import kv_read, kv_write
from pccx_flow.execute.plan import plan_graph
from pccx_flow.execute.runtime import WeightsRef
from pccx_flow.execute.state import new_decode_state
from pccx_flow.graph.nodes import tensor


def _const(call, inputs, ctx, weights, external):
    return np.full(call.output_shapes[0], call.params["value"], dtype=np.float32)


def _add(call, inputs, ctx, weights, external):
    return inputs[0] + inputs[1]


def _scale_by_position(call, inputs, ctx, weights, external):
    return inputs[0] * np.float32(ctx.position + 1)


def _split(call, inputs, ctx, weights, external):
    half = inputs[0].shape[0] // 2
    return inputs[0][:half].copy(), inputs[0][half:].copy()


def _boom(call, inputs, ctx, weights, external):
    raise ValueError("deliberate failure\nsecond line")


def _attend(call, inputs, ctx, weights, external):
    """Per KV head the sum of its visible K rows plus its V rows, heads joined: float32
    [kv_dim] (inputs: every head's K rows, then every head's V rows)."""
    half = len(inputs) // 2
    return np.concatenate([
        k.astype(np.float32).sum(axis=0) + v.astype(np.float32).sum(axis=0)
        for k, v in zip(inputs[:half], inputs[half:], strict=True)
    ])  # fmt: skip


def _logits(call, inputs, ctx, weights, external):
    return np.concatenate([inputs[0], inputs[1]]).astype(np.float32)


register_table(
    "handmade",
    {
        "const": _const,
        "add": _add,
        "scale_pos": _scale_by_position,
        "split": _split,
        "boom": _boom,
        "attend": _attend,
        "logits": _logits,
        "kv_write": kv_write,
        "kv_read": kv_read,
    },
)


def _node(g, nid, kernel, op, lane, inputs, outputs, params=None):
    g.add_node(
        nid,
        kernel=kernel,
        op=op,
        lane_class=lane,
        params=params or {},
        inputs=inputs,
        outputs=outputs,
        weight=None,
    )
    for t in inputs:
        for src, attrs in g.nodes(data=True):
            if any(o["name"] == t["name"] for o in attrs.get("outputs", [])):
                g.add_edge(src, nid, tensor=t["name"], bytes=0)


def handmade_graph(config, position, *, fail=False):
    """A two-cache-layer toy step: constants -> add -> KV write/read -> attend -> logits."""
    kv = config.kv_dim
    g = nx.DiGraph(config=config.name, semantics="pccx", position=position, tile_rows=512)
    a, b = tensor("a", [kv], "float32"), tensor("b", [kv], "float32")
    _node(g, "pre.const.a", "const", "MEMSET", "ctrl", [], [a], {"value": 1.5})
    _node(g, "pre.const.b", "const", "MEMSET", "ctrl", [], [b], {"value": -0.25})
    s = tensor("s", [kv], "float32")
    _node(g, "pre.host.add", "boom" if fail else "add", "HOST", "host", [a, b], [s])
    sp = tensor("sp", [kv], "float32")
    _node(g, "pre.host.scale", "scale_pos", "HOST", "host", [s], [sp])
    d = config.head_dim
    assert config.n_kv_heads == 2  # the toy splits a row into its two KV heads
    heads = [tensor(f"sp.g{h}", [d], "float32") for h in range(2)]
    _node(g, "pre.host.heads", "split", "HOST", "host", [sp], heads)
    attn = []
    for layer in range(config.n_kv_cache_layers):
        rows = {"k": [], "v": []}
        for kind in ("k", "v"):
            for h, part in enumerate(heads):  # the cache is per KV head
                new = tensor(f"L{layer}.{kind}_new.g{h}", [d], "float16")
                params = {"cache_layer": layer, "kind": kind, "kv_head": h}
                _node(g, f"L{layer:02d}.attn.{kind}_write.g{h}", "kv_write", "MEMCPY", "dma",
                      [part], [new], params)  # fmt: skip
                rows[kind].append(tensor(f"L{layer}.{kind}_rows.g{h}", [position + 1, d],
                                         "float16"))  # fmt: skip
                _node(g, f"L{layer:02d}.attn.{kind}_read.g{h}", "kv_read", "MEMCPY", "dma",
                      [new], [rows[kind][-1]], params)  # fmt: skip
        out = tensor(f"L{layer}.attn", [kv], "float32")
        _node(g, f"L{layer:02d}.attn.gqa", "attend", "HOST", "host", [*rows["k"], *rows["v"]],
              [out])  # fmt: skip
        attn.append(out)
    half = tensor("half0", [kv // 2], "float32"), tensor("half1", [kv // 2], "float32")
    _node(g, "post.host.split", "split", "HOST", "host", [attn[0]], list(half))
    logits = tensor("logits", [kv], "float32")
    _node(g, "post.final.logits", "logits", "MEMCPY", "dma", list(half), [logits])
    return g


def expected_logits(config, steps):
    """What the toy computes, written directly: row value at p is 1.25*(p+1)."""
    vals = [np.float16(1.25 * (p + 1)) for p in range(steps)]
    total = np.float32(2 * sum(np.float32(v) for v in vals))
    return np.full(config.kv_dim, total, dtype=np.float32)


@pytest.fixture
def cfg(tiny_config):
    return tiny_config


def test_plan_resolves_inputs_to_producer_outputs(cfg):
    calls = plan_graph(handmade_graph(cfg, 0))
    logit = calls["post.final.logits"]
    assert logit.producers == ("post.host.split",)
    assert logit.sources == ((0, 0), (0, 1))
    order = list(calls)
    assert order.index("pre.host.add") > order.index("pre.const.b")


def test_plan_rejects_cycles_and_double_writers(cfg):
    g = handmade_graph(cfg, 0)
    g.add_edge("post.final.logits", "pre.const.a", tensor="x", bytes=0)
    with pytest.raises(GraphError, match="cycle"):
        plan_graph(g)
    g = handmade_graph(cfg, 0)
    g.nodes["pre.const.b"]["outputs"] = [tensor("a", [cfg.kv_dim], "float32")]
    with pytest.raises(GraphError, match="written by both"):
        plan_graph(g)


def test_sequential_and_dask_agree_over_steps(cfg):
    state_loop = new_decode_state(cfg, "pccx", token_id=1)
    state_dask = new_decode_state(cfg, "pccx", token_id=1)
    for p in range(3):
        g = handmade_graph(cfg, p)
        want = expected_logits(cfg, p + 1)
        got_loop = run_sequential(g, None, state_loop, kernels="handmade")
        got_dask = execute_step(g, None, state_dask, kernels="handmade").logits
        np.testing.assert_array_equal(got_loop, want)
        np.testing.assert_array_equal(got_dask, want)
    assert state_loop.position == state_dask.position == 3
    assert state_dask.k_cache.dtype == np.float16
    np.testing.assert_array_equal(state_dask.k_cache[1, :3, 0], np.float16([1.25, 2.5, 3.75]))
    np.testing.assert_array_equal(state_dask.k_cache, state_loop.k_cache)


def test_graph_for_other_position_is_refused(cfg):
    state = new_decode_state(cfg, "pccx")
    with pytest.raises(InputError, match="position 2"):
        run_sequential(handmade_graph(cfg, 2), None, state, kernels="handmade")


def test_failing_kernel_names_node_and_kernel(cfg):
    state = new_decode_state(cfg, "pccx")
    g = handmade_graph(cfg, 0, fail=True)
    for run in (
        lambda: execute_step(g, None, state, kernels="handmade"),
        lambda: run_sequential(g, None, state, kernels="handmade"),
    ):
        with pytest.raises(ExecutionError) as info:
            run()
        msg = str(info.value)
        assert "pre.host.add" in msg and "kernel boom" in msg and "deliberate failure" in msg
        assert "\n" not in msg
    assert state.position == 0  # nothing committed


def test_keys_name_op_lane_node_and_step(cfg):
    g = handmade_graph(cfg, 5)
    assert task_key("L07.ffn.gate.t03", {"op": "GEMV", "lane_class": "gemv"}, "s12") == (
        "gemv-gemv-L07-ffn-gate-t03-s12"
    )
    state = new_decode_state(cfg, "pccx", position=5)
    calls, ctx, ext = prepare(g, state)
    order = list(reversed(list(calls)))  # a deliberately different order
    sched = SimpleNamespace(
        slots={n: SimpleNamespace(lane=f"{g.nodes[n]['lane_class']}0", start=0) for n in calls},
        order=lambda: order,
    )
    step = build_dask_graph(
        g,
        calls,
        kernels="handmade",
        ctx=ctx,
        weights=WeightsRef(None),
        externals=ext,
        step_tag="s5",
        schedule=sched,
    )
    assert step.key_of["pre.host.add"] == "host-host0-pre-host-add-s5"
    assert {step.node_of[k] for k in step.dsk} == set(calls)
    ann = step.annotations[step.key_of[order[0]]]
    assert ann["priority"] == len(order) and ann["lane"].endswith("0")
    assert step.annotations[step.key_of[order[-1]]]["priority"] == 1
    # Every graph edge is a task dependency.
    for u, v in g.edges:
        assert step.key_of[u] in step.dsk[step.key_of[v]].dependencies


def test_kv_read_sees_committed_rows_only_through_state(cfg):
    state = new_decode_state(cfg, "pccx")
    out = execute_step(handmade_graph(cfg, 0), None, state, kernels="handmade", commit=False)
    assert state.position == 0 and not state.k_cache.any()
    assert set(out.kv_rows) == set(range(cfg.n_kv_cache_layers))


def test_distributed_runs_with_annotations_and_unique_keys(cfg, local_client):
    state = new_decode_state(cfg, "pccx", token_id=1)

    for p in range(2):
        g = handmade_graph(cfg, p)
        calls = plan_graph(g)
        order = list(calls)
        sched = SimpleNamespace(
            slots={n: SimpleNamespace(lane=f"{g.nodes[n]['lane_class']}0", node=n) for n in calls},
            order=lambda order=order: [SimpleNamespace(node=n) for n in order],
        )
        out = execute_step(g, None, state, kernels="handmade", client=local_client, schedule=sched)
        np.testing.assert_array_equal(out.logits, expected_logits(cfg, p + 1))

    assert state.position == 2


def test_refused_and_silent_scheduler_addresses_are_input_errors(cfg):
    import socket

    state = new_decode_state(cfg, "pccx")
    with pytest.raises(InputError, match="cannot reach a Dask scheduler"):
        execute_step(
            handmade_graph(cfg, 0), None, state, kernels="handmade", scheduler="tcp://127.0.0.1:1"
        )
    with socket.socket() as silent:  # accepts connections and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        port = silent.getsockname()[1]
        with pytest.raises(InputError, match="no answer|TimeoutError"):
            execute_step(
                handmade_graph(cfg, 0), None, state, kernels="handmade",
                scheduler=f"tcp://127.0.0.1:{port}",
            )  # fmt: skip
    with pytest.raises(InputError, match="unknown scheduler"):
        execute_step(handmade_graph(cfg, 0), None, state, kernels="handmade", scheduler="gpu")


def test_weights_travel_as_a_path_and_open_once_per_process(tiny_ckpt):
    import pickle

    ref = WeightsRef(tiny_ckpt)
    blob = pickle.dumps(ref)
    assert len(blob) < 4096  # a path and a config, not arrays
    a, b = pickle.loads(blob), pickle.loads(blob)
    assert a.checkpoint is b.checkpoint  # opened once, then reused
    assert a.path == str(tiny_ckpt.path)
    key = "layers.0.input_layernorm.weight"
    np.testing.assert_array_equal(a.checkpoint.tensor(key), tiny_ckpt.tensor(key))


def test_cut_graphs_are_refused(tiny_config):
    from pccx_flow.graph.build import build_decode_graph

    g = build_decode_graph(tiny_config, position=0, layers=(2, 10))
    with pytest.raises(InputError, match="layers 2..9 only"):
        run_sequential(g, None, new_decode_state(tiny_config, "pccx"))


def test_a_node_that_writes_nan_names_itself_and_the_tensor(monkeypatch):
    from pccx_flow.execute import runtime
    from pccx_flow.execute.plan import NodeCall
    from pccx_flow.model.config import get_config

    call = NodeCall(node="L03.attn.q.t00", kernel="poison", op="GEMV", params={}, flags={},
                    weight=None, input_names=(), output_names=("L03.q",), output_shapes=((4,),),
                    producers=(), sources=())  # fmt: skip
    table = {"poison": lambda *a: np.array([1.0, np.inf, 0.0, 2.0], np.float32)}
    monkeypatch.setattr(runtime, "kernel_table", lambda name: table)
    ctx = runtime.StepContext(get_config("tiny"), "pccx", 0, 0)
    said = r"node L03\.attn\.q\.t00 .* NaN or infinite .* L03\.q"
    with pytest.raises(ExecutionError, match=said):
        runtime.run_node(call, "numpy", ctx, runtime.WeightsRef(None, None), None)

"""The step parameters change exactly the costs they name, and only those."""

from __future__ import annotations

import pytest

from pccx_flow.explore.params import STEP_DEFAULTS
from pccx_flow.explore.step import build_point_graph, tokens_per_step
from pccx_flow.graph.build import build_decode_graph
from pccx_flow.hardware.profile import load_profile
from pccx_flow.model.config import get_config

PROFILE = load_profile("v002-spec")
CONFIG = get_config("tiny")


def _graph(**step):
    return build_point_graph(CONFIG, {**STEP_DEFAULTS, "position": 63, **step}, PROFILE)


def _total(g, attr, pred=lambda a: True):
    return sum(a.get(attr) or 0 for _, a in g.nodes(data=True) if pred(a))


def test_defaults_leave_the_step_as_schedule_builds_it():
    plain = build_decode_graph(CONFIG, position=63, profile=PROFILE)
    g = _graph()
    for n, a in plain.nodes(data=True):
        b = g.nodes[n]
        assert (a["cycles"], a["weight_bytes"], a["act_bytes"], a["macs"]) == (
            b["cycles"], b["weight_bytes"], b["act_bytes"], b["macs"])  # fmt: skip


def test_weight_bits_scale_the_int4_matrices_and_keep_their_scales():
    g4, g8 = _graph(), _graph(weight_bits=8)
    int4 = lambda a: a["op"] == "GEMV" and a["flags"].get("w_scale")  # noqa: E731
    f32 = lambda a: a["op"] == "GEMV" and not a["flags"].get("w_scale")  # noqa: E731
    rows = sum(a["weight"]["rows"][1] - a["weight"]["rows"][0]
               for _, a in g4.nodes(data=True) if int4(a))  # fmt: skip
    b4, b8 = _total(g4, "weight_bytes", int4), _total(g8, "weight_bytes", int4)
    assert b8 - 4 * rows == 2 * (b4 - 4 * rows)
    assert _total(g4, "weight_bytes", f32) == _total(g8, "weight_bytes", f32)


def test_kv_bits_scale_kv_traffic():
    kv = lambda a: a["kernel"] in ("kv_read", "kv_write")  # noqa: E731
    assert _total(_graph(kv_bits=8), "act_bytes", kv) * 2 == _total(_graph(), "act_bytes", kv)


def test_sparse_down_one_streams_the_recorded_sparse_bytes():
    g, s = _graph(), _graph(sparse_down=1.0)
    sparse = [n for n, a in g.nodes(data=True) if "sparse_weight_bytes" in a["params"]]
    assert sparse
    for n in sparse:
        assert s.nodes[n]["weight_bytes"] == g.nodes[n]["params"]["sparse_weight_bytes"]
        assert s.nodes[n]["macs"] < g.nodes[n]["macs"]


@pytest.mark.parametrize("verify_on", ["gemm", "gemv"])
def test_a_verify_step_reads_each_weight_once_for_k_plus_one_columns(verify_on):
    g, v = _graph(), _graph(spec_k=3, verify_on=verify_on)
    weighted = [n for n, a in g.nodes(data=True) if a["op"] == "GEMV" and a["weight_bytes"]]
    for n in weighted:
        assert v.nodes[n]["weight_bytes"] == g.nodes[n]["weight_bytes"]
        assert v.nodes[n]["macs"] == 4 * g.nodes[n]["macs"]
        assert v.nodes[n]["lane_class"] == ("gemm" if verify_on == "gemm" else "gemv")
    kv_read = lambda a: a["kernel"] == "kv_read"  # noqa: E731
    kv_write = lambda a: a["kernel"] == "kv_write"  # noqa: E731
    logits = lambda a: a.get("func") == "logits_readback"  # noqa: E731
    assert _total(v, "act_bytes", kv_read) == _total(g, "act_bytes", kv_read)  # read once
    assert _total(v, "act_bytes", kv_write) == 4 * _total(g, "act_bytes", kv_write)
    assert _total(v, "act_bytes", logits) == 4 * _total(g, "act_bytes", logits) > 0
    assert v.graph["verify_columns"] == 4


def test_tokens_per_step_follows_the_acceptance_model():
    assert tokens_per_step(0, 0.9) == 1.0
    assert tokens_per_step(3, 0.5) == pytest.approx(1 + 0.5 + 0.25 + 0.125)
    assert tokens_per_step(4, 1.0) == 5.0

"""Programs for the RTL as built: lowered by its rules, emulated as the RTL reads the words.

The oracle is the monolithic reference decode (`pccx_flow.reference`). An as-built program
keeps activations and KV rows in BF16, so it is held to the BF16 rule of
`pccx_flow.execute.compare.bf16_step_verdict` (logits and new KV rows within 10 % of their
scale, the token it picks within that of the reference's best), not to float32 rounding.
"""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pccx_flow.board.emulator.check import default_tokens, emulate_against_reference
from pccx_flow.board.emulator.emulate import EmulationError, Emulator, batch_rule_violation
from pccx_flow.board.isa import CVO_FUNCS, KICK_MARKER, decode, encode
from pccx_flow.board.isa.target import AS_BUILT, get_target

from ..conftest import lowered

CVO_NAMES = {v: k for k, v in CVO_FUNCS.items()}


def as_built(policy="heft", position=5, semantics="pccx", target=None):
    return lowered(
        "v002-as-built", policy, position=position, semantics=semantics, target=target
    )[3]


def cvo_words(program):
    for i, w in enumerate(program.words):
        if w != KICK_MARKER and decode(w).op == "CVO":
            yield i, decode(w).fields


def check_rules(program, cap=2048):
    """Every rule of the as-built target a program can break, asserted word by word."""
    assert program.meta["target"] == "as-built" and program.meta["l2_dtype"] == "bfloat16"
    for _, f in cvo_words(program):
        func = CVO_NAMES[f["func"]]
        results = 1 if func == "REDUCE_SUM" else f["length"]
        assert f["length"] >= 1 and results <= cap
        assert f["src"] % 8 == 0 and f["dst"] % 8 == 0  # streams start at element 0
        assert f["dst"] < 1 << 17
        if func != "REDUCE_SUM":
            assert f["length"] % 8 == 0  # whole words
    for step in program.steps:
        if step["kind"] != "batch":
            continue
        words = program.words[step["start"] : step["end"]]
        assert words[-1] == KICK_MARKER
        # one CVO per batch, the last word: the DONE the host waits for is that CVO's, and
        # no CVO reaches the bridge while it is busy (so no DONE marker can be dropped)
        assert batch_rule_violation(AS_BUILT, words) is None
        assert decode(words[-2]).op == "CVO"
        assert sum(1 for w in words[:-1] if decode(w).op == "CVO") == 1


def test_tiny_lowers_by_the_as_built_rules():
    program = as_built()
    check_rules(program)
    slots = {}
    for w in program.words:
        if w == KICK_MARKER:
            continue
        ins = decode(w)
        if ins.op == "MEMSET":
            slots[ins.fields["slot"]] = ins.fields
        elif ins.op == "GEMV":
            # the L2 load's length: fmap-shape slot at shape_ptr, X*Y*Z BF16 elements
            length = slots[ins.fields["shape_ptr"]]
            engine = slots[ins.fields["size_ptr"]]
            assert length["dest_cache"] == 0 and engine["dest_cache"] == 1
            cols = engine["b"] | engine["c"] << 16
            assert length["a"] * length["b"] * length["c"] == cols
    assert program.summary["ddr_image_bytes"] > 0 and program.ddr["kv_dtype"] == "bfloat16"


@pytest.mark.parametrize("semantics", ["pccx", "gemma3n"])
@pytest.mark.parametrize("position", range(6))
def test_as_built_emulation_agrees_with_the_reference_in_bf16(tiny_ckpt, semantics, position):
    program = as_built("heft" if position % 2 else "critical-path", position, semantics)
    tokens = default_tokens(position + 1, tiny_ckpt.config.vocab)
    r = emulate_against_reference(program, tiny_ckpt, tokens)
    assert r["argmax_same"] and r["ok"], (r["max_abs_diff"], r["kv_error"])
    # BF16, not float32: the difference is far above float32 rounding, within 10 % of scale
    assert 1e-3 < r["max_abs_diff"] <= 0.10 * r["logit_scale"] and r["kv_error"] <= 0.10


def test_a_cvo_cap_smaller_than_the_cvos_splits_them_and_still_agrees(tiny_ckpt):
    program = as_built(target=dataclasses.replace(AS_BUILT, cvo_max_results=16))
    check_rules(program, cap=16)
    lengths = [f["length"] for _, f in cvo_words(program) if CVO_NAMES[f["func"]] != "REDUCE_SUM"]
    assert max(lengths) == 16
    split = sum(1 for n in program.nodes if n) - len(set(n for n in program.nodes if n))
    assert split > 0  # some nodes became several words
    r = emulate_against_reference(program, tiny_ckpt, default_tokens(6, tiny_ckpt.config.vocab))
    assert r["ok"], r["max_abs_diff"]


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    policy=st.sampled_from(
        ["critical-path", "heft", "cpop", "etf", "dls", "min-min", "lookahead", "random"]
    ),
    position=st.integers(0, 63),
    semantics=st.sampled_from(["pccx", "gemma3n"]),
)
def test_no_as_built_program_breaks_the_bridge_or_loses_a_done(policy, position, semantics):
    check_rules(as_built(policy, position, semantics))


def _reread(program, target: str):
    """The same words and sidecar, read as another target's hardware reads them."""
    other = copy.deepcopy(program)
    other.meta["target"] = target
    other.meta["l2_dtype"] = get_target(target).l2_dtype
    return other


def test_a_program_read_as_the_other_target_does_not_compute_the_step(tiny_ckpt):
    tokens = default_tokens(6, tiny_ckpt.config.vocab)
    spec = lowered("v002-spec", "critical-path", position=5)[3]
    assert emulate_against_reference(spec, tiny_ckpt, tokens)["ok"]
    # the spec program on the RTL: several CVOs share a batch (the bridge would drop them)
    with pytest.raises(EmulationError, match="not the last word of its batch"):
        emulate_against_reference(_reread(spec, "as-built"), tiny_ckpt, tokens)
    # ... and with the batches cut as the RTL needs, its CVO word addresses land elsewhere
    relaxed = dataclasses.replace(AS_BUILT, one_cvo_per_batch=False)
    em = Emulator(_reread(spec, "as-built"), tiny_ckpt, None, None, tokens[-1])
    em.t = relaxed
    with pytest.raises(EmulationError):
        em.run()
    # the as-built program read as the spec target: element addresses taken for words
    built = as_built()
    assert emulate_against_reference(built, tiny_ckpt, tokens)["ok"]
    with pytest.raises(EmulationError, match="beyond the SFU's reach|outside every|no instr"):
        emulate_against_reference(_reread(built, "spec"), tiny_ckpt, tokens)


@pytest.fixture(scope="module")
def small():
    return as_built("critical-path", 2)


def _run(program, ckpt):
    return emulate_against_reference(program, ckpt, default_tokens(3, ckpt.config.vocab))


def _cvo(program, func=None):
    return next(
        (i, f) for i, f in cvo_words(program)
        if program.roles[i] == "node" and (func is None or CVO_NAMES[f["func"]] == func)
    )  # fmt: skip


@pytest.mark.parametrize(
    ("length", "message"),
    [(0, "length 0 never finishes"), (2056, "result FIFO holds 2048")],
)
def test_cvo_lengths_the_bridge_cannot_run_are_caught(tiny_ckpt, small, length, message):
    program = copy.deepcopy(small)
    i, f = _cvo(program, "EXP")
    program.words[i] = encode("CVO", **{**f, "length": length})
    with pytest.raises(EmulationError, match=rf"^word {i} .*{message}"):
        _run(program, tiny_ckpt)


def test_a_cvo_moved_before_another_word_of_its_batch_is_caught(tiny_ckpt, small):
    program = copy.deepcopy(small)
    step = next(
        s for s in program.steps if s["kind"] == "batch" and s["end"] - s["start"] > 2
        and program.roles[s["end"] - 2] == "node"
        and decode(program.words[s["end"] - 2]).op == "CVO"
    )  # fmt: skip
    a, b = step["end"] - 3, step["end"] - 2
    for field in ("words", "nodes", "roles"):
        seq = getattr(program, field)
        seq[a], seq[b] = seq[b], seq[a]
    with pytest.raises(EmulationError, match=rf"^word {a} .*not the last word of its batch"):
        _run(program, tiny_ckpt)


def test_gemv_pointers_read_the_spec_way_do_not_load_the_input(tiny_ckpt, small):
    program = copy.deepcopy(small)
    i = next(
        k for k, w in enumerate(program.words)
        if w != KICK_MARKER and decode(w).op == "GEMV" and "weight" in program.streams.get(k, {})
    )  # fmt: skip
    f = decode(program.words[i]).fields
    swapped = {**f, "size_ptr": f["shape_ptr"], "shape_ptr": f["size_ptr"]}
    program.words[i] = encode("GEMV", **swapped)
    with pytest.raises(EmulationError, match=rf"^word {i} "):
        _run(program, tiny_ckpt)


def test_the_bridge_writes_a_partial_last_word_into_its_top_elements():
    em = Emulator.__new__(Emulator)
    written = {}
    em.write = lambda addr, values, dtype: written.update(addr=addr, v=np.asarray(values))
    em.write_bridge(5, np.arange(11, dtype=np.float32))
    # word 0: results 0-7; word 1: the serialiser's leftover (results 3-7) then 8, 9, 10
    assert written["addr"] == 5
    assert written["v"].tolist() == [0, 1, 2, 3, 4, 5, 6, 7, 3, 4, 5, 6, 7, 8, 9, 10]
    em.write_bridge(9, np.array([42.0], dtype=np.float32))  # a lone result: element 7
    assert written["v"].tolist() == [0, 0, 0, 0, 0, 0, 0, 42]

"""The emulator runs the words and gets the reference decode's logits and KV rows.

The oracle is the monolithic reference decode (`pccx_flow.reference`), never the executor:
the reference decodes the prefix and the step, the emulator runs the step's program from the
same earlier KV rows. float64: logits within 1e-9 and identical KV rows; float32: the rule of
`run --check` (`pccx_flow.execute.compare.step_verdict`).
"""

from __future__ import annotations

import copy
import re

import numpy as np
import pytest

from pccx_flow.board.emulator.check import default_tokens, emulate_against_reference
from pccx_flow.board.emulator.emulate import EmulationError
from pccx_flow.board.isa import KICK_MARKER, decode, encode
from pccx_flow.cli.main import main

from ..conftest import lowered

# (profile, policy, semantics, position): three policies, both profiles, both semantics
CASES = [
    ("v002-spec", "critical-path", "pccx", 0),
    ("v002-spec", "critical-path", "pccx", 5),
    ("v002-as-built", "heft", "pccx", 3),
    ("v002-spec", "random", "gemma3n", 4),
    ("v002-as-built", "critical-path", "gemma3n", 2),
]


def _program(profile, policy, semantics, position, target="spec"):
    return lowered(profile, policy, position=position, semantics=semantics, target=target)[3]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(map(str, c)))
def test_float64_emulation_matches_the_reference(tiny_ckpt, case):
    # the spec target (word addresses, float32 in L2) on both profiles: exact to 1e-9
    prog = _program(*case)
    tokens = default_tokens(case[3] + 1, tiny_ckpt.config.vocab)
    r = emulate_against_reference(prog, tiny_ckpt, tokens, precision="float64")
    assert r["max_abs_diff"] <= 1e-9 and r["argmax_same"], r["max_abs_diff"]
    assert r["kv_layers"] == tiny_ckpt.config.n_kv_cache_layers and r["ok"]


@pytest.mark.parametrize("case", CASES[1:3], ids=lambda c: "-".join(map(str, c)))
def test_float32_emulation_passes_the_run_check_rule(tiny_ckpt, case):
    prog = _program(*case)
    tokens = default_tokens(case[3] + 1, tiny_ckpt.config.vocab)
    r = emulate_against_reference(prog, tiny_ckpt, tokens, precision="float32")
    assert r["ok"], (r["max_abs_diff"], r["kv_flips"], r["kv_beyond"])


@pytest.mark.parametrize("profile", ["v002-spec", "v002-as-built"])
def test_a_step_of_several_key_tiles_matches_the_reference(tiny_ckpt, profile):
    """Three 8-key tiles per KV head (position 20): each attention GEMV reads its own
    tile's rows, whose first key is the tile's ``row_offset``, not key 0 (float64, the
    spec target: exact)."""
    from ..conftest import lowered_graph

    graph, _, _, prog = lowered_graph(profile, position=20, tile_rows=8, target="spec")
    assert any(a.get("params", {}).get("row_offset") == 16 for _, a in graph.nodes(data=True))
    r = emulate_against_reference(prog, tiny_ckpt, default_tokens(21, tiny_ckpt.config.vocab),
                                  precision="float64")  # fmt: skip
    assert r["max_abs_diff"] <= 1e-9 and r["argmax_same"] and r["ok"], r["max_abs_diff"]


def test_tiles_rounded_to_whole_words_still_compute_the_step(tiny_ckpt):
    """Tiles of at most 13 rows hold 12 on the spec target (whole float32 words,
    `build._whole_word_rows`): the 64-row matrices split 12+12+12+12+12+4 and the keys at
    position 20 in tiles of 12 and 9; the program matches the reference (float64)."""
    from ..conftest import lowered_graph

    graph, _, _, prog = lowered_graph("v002-spec", position=20, tile_rows=13, target="spec")
    assert graph.graph["tile_rows"] == 13
    assert {tuple(a["weight"]["rows"]) for n, a in graph.nodes(data=True)
            if n.startswith("L00.laurel.right.t")} == {(0, 12), (12, 24), (24, 36), (36, 48),
                                                       (48, 60), (60, 64)}  # fmt: skip
    r = emulate_against_reference(prog, tiny_ckpt, default_tokens(21, tiny_ckpt.config.vocab),
                                  precision="float64")  # fmt: skip
    assert r["max_abs_diff"] <= 1e-9 and r["argmax_same"] and r["ok"], r["max_abs_diff"]


def test_rtl_numerics_drift_from_the_spec(tiny_ckpt):
    prog = _program("v002-spec", "critical-path", "pccx", 5)
    tokens = default_tokens(6, tiny_ckpt.config.vocab)
    spec = emulate_against_reference(prog, tiny_ckpt, tokens, precision="float64")
    rtl = emulate_against_reference(prog, tiny_ckpt, tokens, precision="float64", numerics="rtl")
    drift = float(np.max(np.abs(rtl["logits"] - spec["logits"])))
    assert 1e-6 < drift < 10.0  # GELU's sigmoid form moves logits, but not wildly


@pytest.fixture(scope="module")
def small():
    return _program("v002-spec", "critical-path", "pccx", 2)


def _run(prog, ckpt):
    return emulate_against_reference(prog, ckpt, default_tokens(3, ckpt.config.vocab))


def test_a_missing_fence_is_caught(tiny_ckpt, small):
    prog = copy.deepcopy(small)
    i = next(k for k, s in enumerate(prog.steps) if s["kind"] == "fence"
             and s["reason"] == "read after write across engines")  # fmt: skip
    del prog.steps[i]
    with pytest.raises(EmulationError, match=r"^word \d+ \(.+\): .*missing fence"):
        _run(prog, tiny_ckpt)


def test_a_host_step_reads_only_what_memcpy_words_brought_after_a_fence(tiny_ckpt, small):
    # no fence between the copy out and the host step: the host would read a half-copied tensor
    prog = copy.deepcopy(small)
    i = next(k for k, s in enumerate(prog.steps) if s["kind"] == "fence"
             and s["reason"] == "host reads an NPU result")  # fmt: skip
    assert prog.steps[i + 1]["kind"] == "host"
    del prog.steps[i]
    with pytest.raises(EmulationError, match=r"host step reads .* \(missing fence\)"):
        _run(prog, tiny_ckpt)
    # no copy out at all: the host has nothing to read (it cannot read L2 itself)
    prog = copy.deepcopy(small)
    j = next(k for k, r in enumerate(prog.roles) if r == "host_io")
    name = prog.streams.pop(j)["tensor"]
    prog.words[j] = encode("MEMSET", dest_cache="fmap_shape", slot=63, a=0, b=0, c=0)
    with pytest.raises(EmulationError, match=rf"host step reads {name}, which is not in host"):
        _run(prog, tiny_ckpt)


def test_an_illegal_word_names_its_index_and_node(tiny_ckpt, small):
    prog = copy.deepcopy(small)
    i = prog.roles.index("node")
    prog.words[i] = 0xF << 60
    with pytest.raises(EmulationError, match=rf"^word {i} \({prog.nodes[i]}\): .*reserved"):
        _run(prog, tiny_ckpt)


def test_access_outside_an_allocation_and_unwritten_reads(tiny_ckpt, small):
    prog = copy.deepcopy(small)
    i = next(k for k, w in enumerate(prog.words)
             if prog.roles[k] == "node" and decode(w).op == "CVO")  # fmt: skip
    f = dict(decode(prog.words[i]).fields)
    prog.words[i] = encode("CVO", **{**f, "src": (1 << 17) - 1})
    with pytest.raises(EmulationError, match=rf"^word {i} .*beyond the SFU's reach"):
        _run(prog, tiny_ckpt)
    used = set()
    for r in prog.l2.values():
        used.update(range(r["addr"], r["addr"] + r["words"]))
    gap = next(a for a in range(1 << 17) if a not in used)
    prog.words[i] = encode("CVO", **{**f, "src": gap})
    with pytest.raises(EmulationError, match=rf"^word {i} .*outside every allocated region"):
        _run(prog, tiny_ckpt)
    prog = copy.deepcopy(small)
    j = next(k for k, w in enumerate(prog.words) if w != KICK_MARKER and decode(w).op == "GEMV")
    first = next(k for k, s in enumerate(prog.steps) if s["kind"] == "batch" and s["end"] > j)
    # drop every step before the GEMV's batch: its input was never written
    prog.steps = [s for k, s in enumerate(prog.steps) if k >= first]
    with pytest.raises(EmulationError, match=r"no instruction or host step wrote|no MEMSET"):
        _run(prog, tiny_ckpt)


def test_emulate_command(tiny_ckpt_dir, tmp_path, capsys):
    out = tmp_path / "s.prog"
    assert main(["emit", "--preset", "tiny", "--position", "2", "-o", str(out)]) == 0
    capsys.readouterr()
    args = ["emulate", str(out), "--weights", str(tiny_ckpt_dir), "--numerics", "rtl"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "agrees" in text and "rtl numerics: max |logit drift|" in text and "GELU" in text
    assert main([*args, "--profile", "v002-as-built"]) == 2
    assert "lowered for profile 'v002-spec'" in capsys.readouterr().err
    ab = tmp_path / "ab.prog"
    emit = ["emit", "--preset", "tiny", "--position", "2", "--profile", "v002-as-built"]
    assert main([*emit, "-o", str(ab)]) == 0
    capsys.readouterr()
    assert main(["emulate", str(ab), "--weights", str(tiny_ckpt_dir), "--numerics", "rtl"]) == 0
    text = capsys.readouterr().out
    found = re.search(r"(\d+) of (\d+) logits at the softcap, (\d+) not finite", text)
    assert "the as-built SFU's own BF16 arithmetic" in text and found
    assert int(found[1]) > int(found[2]) // 2

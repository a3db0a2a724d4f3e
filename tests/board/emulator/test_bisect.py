"""emit --bisect prefixes: each valid on its own, each agreeing with the full program."""

from __future__ import annotations

import json

from pccx_flow.board.emulator.bisect import STAGES, bisect_programs, prefix_golden
from pccx_flow.board.emulator.check import (
    default_tokens,
    emulate_against_reference,
    reference_prefix,
)
from pccx_flow.board.isa import decode
from pccx_flow.board.program.files import check_words
from pccx_flow.cli.main import main
from pccx_flow.execute.runtime import StepContext
from tests.board.conftest import lowered


def test_prefixes_grow_emulate_and_write_the_full_programs_golden_words(tiny_ckpt):
    _, _, _, program = lowered("v002-spec", "critical-path", position=3)
    tokens = default_tokens(4, tiny_ckpt.config.vocab)
    full: dict = {}
    assert emulate_against_reference(program, tiny_ckpt, tokens, record=full)["ok"]
    k, v, _ = reference_prefix(program, tiny_ckpt, tokens)
    ctx = StepContext(tiny_ckpt.config, program.meta["semantics"], 3, tokens[-1], "float32")
    stages = bisect_programs(program)
    names = [s.name for s in stages]
    assert set(names) == set(STAGES) and names[0] == "memset" and names[-1] == "step"
    sizes = [len(s.program.words) for s in stages]
    assert sizes == sorted(set(sizes))
    for stage in stages:
        p = stage.program
        check_words(p)  # kicks exactly at batch ends, every word decodes
        assert p.steps[-1]["kind"] == "fence"
        body = p.words[:-1]  # without its closing kick; a cut batch may gain a DONE marker
        if p.roles[-2] == "done" and program.roles[len(body) - 1] != "done":
            assert decode(body[-1]).op == "CVO" and decode(body[-2]).op != "CVO"
            body = body[:-1]
        assert body == program.words[: len(body)]
        assert all(
            decode(w).op == "CVO" for w, r in zip(p.words, p.roles, strict=True) if r == "done"
        )
        ends = [p.words[st["end"] - 2] for st in p.steps if st["kind"] == "batch"]
        assert all(decode(w).op == "CVO" for w in ends)  # every batch raises DONE on the RTL
        record = prefix_golden(p, tiny_ckpt, k.copy(), v.copy(), tokens[-1], ctx)
        assert record.keys() <= full.keys()
        for i, writes in record.items():
            assert writes == full[i], (stage.name, i)
    ops = {
        s.name: {
            decode(w).op
            for w, r in zip(s.program.words, s.program.roles, strict=True)
            if r not in ("kick", "done")
        }
        for s in stages
    }
    assert ops["memset"] == {"MEMSET"}
    assert "MEMCPY" in ops["memcpy"] and "GEMV" in ops["gemv"] and "CVO" in ops["cvo"]


def test_emit_bisect_writes_programs_goldens_and_an_index(tmp_path, tiny_ckpt_dir, capsys):
    out = tmp_path / "bis"
    args = ["emit", "--preset", "tiny", "--position", "2", "--bisect", str(out)]
    assert main([*args, "--weights", str(tiny_ckpt_dir)]) == 0
    printed = capsys.readouterr().out
    index = json.loads((out / "index.json").read_text())
    assert [r["name"] for r in index["stages"]][0] == "memset"
    for r in index["stages"]:
        assert (out / r["program"]).is_file() and (out / r["golden"] / "index.json").is_file()
        assert f"{r['name']:8s} {r['instructions']:6d} {r['batches']:7d}" in printed
    gemv = next(r for r in index["stages"] if r["name"] == "gemv")
    code = main(
        [
            "dispatch",
            str(out / gemv["program"]),
            "--weights",
            str(tiny_ckpt_dir),
            "--fake-device",
            "--check-golden",
            str(out / gemv["golden"]),
        ]
    )
    assert code == 0 and "L2 matched the golden words" in capsys.readouterr().out
    assert main(["emit", "--preset", "tiny", "--bisect", str(out)]) == 2
    assert "--bisect runs the emulator" in capsys.readouterr().err


def test_emit_help_lists_the_prefixes_in_the_order_a_program_reaches_them(capsys):
    import re

    import pytest

    for profile in ("v002-spec", "v002-as-built"):
        names = [s.name for s in bisect_programs(lowered(profile, "critical-path")[3])]
        assert names == ["memset", "memcpy", "cvo", "gemv", "layer0", "step"], profile
    with pytest.raises(SystemExit):
        main(["emit", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    listed = re.search(r"\(MEMSET only, ([^)]*)\)", text)[1]
    assert listed == "+MEMCPY, +CVO, +GEMV, layer 0, the step"

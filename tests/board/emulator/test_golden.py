"""Golden vectors: per-instruction L2 writes as .memh, checked against the reference."""

from __future__ import annotations

import json

import numpy as np

from pccx_flow.board.emulator.check import default_tokens
from pccx_flow.board.emulator.golden import word_lines
from pccx_flow.cli.main import main
from pccx_flow.reference.decode import decode_step, new_kv_cache


def test_word_lines_pack_little_endian_and_pad():
    raw = np.array([1.0, 2.0, 3.0, 4.0, 5.0], dtype=np.float32).tobytes()
    lines = word_lines(0x12, raw)
    assert lines[0] == "@00012"
    assert lines[1] == "4080000040400000400000003f800000"  # 4.0 3.0 2.0 1.0, high to low
    assert lines[2] == "000000000000000000000000" + "40a00000"


def test_emit_golden_holds_the_reference_logits(tiny_ckpt, tiny_ckpt_dir, tmp_path, capsys):
    gold = tmp_path / "gold"
    args = ["emit", "--preset", "tiny", "--position", "2", "-o", str(tmp_path / "s.prog")]
    assert main([*args, "--golden", str(gold), "--weights", str(tiny_ckpt_dir)]) == 0
    assert "agrees with the reference" in capsys.readouterr().out
    index = json.loads((gold / "index.json").read_text())["instructions"]
    ops = {e["op"] for e in index.values()}
    assert ops <= {"GEMV", "CVO", "MEMCPY"} and {"GEMV", "CVO"} <= ops
    # the LM head's output (tiny: one tile), read from the golden words and soft-capped as
    # the host does, gives the reference's logits
    i = next(k for k, e in index.items() if e["node"] == "post.final.lm_head.t00")
    lines = (gold / f"w{int(i):05d}.memh").read_text().splitlines()
    words = [int(x, 16) for x in lines if x and x[0] not in "@/"]
    raw = b"".join(w.to_bytes(16, "little") for w in words)
    got = np.frombuffer(raw, dtype=np.float32)[: tiny_ckpt.config.vocab]
    cache = new_kv_cache(tiny_ckpt.config, "pccx")
    want = [decode_step(tiny_ckpt, t, p, cache) for p, t in enumerate(default_tokens(3, 512))]
    assert got.size == want[-1].size
    cap = tiny_ckpt.config.final_softcap
    assert float(np.max(np.abs(cap * np.tanh(got / cap) - want[-1]))) <= 1e-4
    assert main([*args, "--golden", str(gold)]) == 2
    assert "--weights" in capsys.readouterr().err

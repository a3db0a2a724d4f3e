"""The program bytes and golden vectors of two tiny steps, pinned.

The digests were taken before `pccx_flow/board` was split into rooms (isa, program,
emulator, timing, device) and after it, and agree: the split moved code, it changed no word,
sidecar field or golden byte. A change that alters programs on purpose must update them here
and say why in its commit.
"""

from __future__ import annotations

import hashlib
import json

import pytest

from pccx_flow.board.emulator.check import default_tokens, emulate_against_reference

from ..conftest import lowered

# (profile, policy, position, semantics, target) -> digests
PINNED = {
    ('v002-spec', 'critical-path', 5, 'pccx', 'spec'): {
        'words': '4fd771c5dd696702f343c143f252244ed6967c6a6cd326c474f3b7f29a4bba41',
        'sidecar': '464d27d8c755d6c984140ec83619434c6c2ed848bab10752ceabea5e9efc321a',
        'golden': 'f713eb2b82c653b6937abf701e6fcd8ef92c7bf42ba2803d3511e0ff5ed562e3',
    },
    ('v002-as-built', 'heft', 3, 'gemma3n', 'as-built'): {
        'words': '1ed3faec687f8fe494233bcd489c4e44eb900ef1241208fe9b1d77e363809fa0',
        'sidecar': 'ad1a84e264d4effa32621d7222a2c0208d4175845b69de5a87e7b37078749822',
        'golden': '06dc9ce4680ce0abd015e74da2e7c26e88aa06d948f3d91109717483de10f18a',
    },
}


@pytest.mark.parametrize("case", sorted(PINNED), ids=lambda c: "-".join(map(str, c)))
def test_program_bytes_and_golden_vectors_are_pinned(tiny_ckpt, case):
    profile, policy, position, semantics, target = case
    program = lowered(profile, policy, position=position, semantics=semantics, target=target)[3]
    side = program.to_sidecar()
    record: dict = {}
    tokens = default_tokens(position + 1, tiny_ckpt.config.vocab)
    emulate_against_reference(program, tiny_ckpt, tokens, record=record)
    gold = hashlib.sha256()
    for i in sorted(record):
        for addr, dtype, raw in record[i]:
            gold.update(f"{i}:{addr}:{dtype}:".encode() + raw)
    got = {
        "words": side["sha256"],
        "sidecar": hashlib.sha256(json.dumps(side, sort_keys=True).encode()).hexdigest(),
        "golden": gold.hexdigest(),
    }
    assert got == PINNED[case]

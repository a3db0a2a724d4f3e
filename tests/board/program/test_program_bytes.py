"""The program bytes and golden vectors of two tiny steps, pinned.

The digests were taken before `pccx_flow/board` was split into rooms (isa, program,
emulator, timing, device) and after it, and agree: the split moved code, it changed no word,
sidecar field or golden byte. A change that alters programs on purpose must update them here
and say why in its commit (last: the KV cache is head-major and every KV tile and new row
moves per KV head, attention streams carry their tile's first key, and a new row later
layers read is grouped with no tile, so words, sidecar, addresses and the golden writes'
layout moved, golden sums unchanged).

Words and sidecar are pinned by digest. The golden vectors are pinned by their layout (which
instruction writes which address, in which type and length: a digest) and by the sums of
their finite values: the emulator's float32 matrix-vector products go through NumPy's BLAS,
whose summation order depends on the CPU and the BLAS build, so a value may differ in its
last bit from one machine to another (seen: the same code, two machines, two golden
digests). A change of the numbers beyond that moves the sums by far more than 1e-4.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from pccx_flow.board.emulator.check import default_tokens, emulate_against_reference

from ..conftest import lowered

# (profile, policy, position, semantics, target) -> digests
PINNED = {
    ('v002-spec', 'critical-path', 5, 'pccx', 'spec'): {
        'words': '1310ad91e2528f3d5d8baffa621372f38667521186f4009bf5c704ee5e872d82',
        'sidecar': '00a837c66888af4970e02aa71b9118d48367b8944c50af1fd6e44f4d989bf555',
        'golden_layout': '9116b3c6a1fd55154a868cad218775b8abd0fbb5465dcb9880d495f000cfdda1',
        'golden_sums': (189007.58203526004, 153688.4518873038, 0),
    },
    ('v002-as-built', 'heft', 3, 'gemma3n', 'as-built'): {
        'words': '234a1779e2fa1f241d7beabe51611d82a13d4c9daa7e363ac8335edb5e281686',
        'sidecar': 'ad9fd3e91116c5613978ac38fef8f88361094cefa50d2bfd27fe1d69b29e07ce',
        'golden_layout': '4fc295adffbe6c23995021b3b8e27f07f99335018e86108cf58d80444ee9eee0',
        'golden_sums': (150030.49407905765, 113072.13581672712, 1337),
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
    layout, sums = golden_fingerprint(record)
    side_digest = hashlib.sha256(json.dumps(side, sort_keys=True).encode()).hexdigest()
    want = PINNED[case]
    assert (side["sha256"], side_digest, layout) == (
        want["words"], want["sidecar"], want["golden_layout"]
    )
    l1, total, nonfinite = sums
    assert nonfinite == want["golden_sums"][2]
    assert (l1, total) == pytest.approx(want["golden_sums"][:2], rel=1e-4)


def golden_fingerprint(record: dict) -> tuple[str, tuple[float, float, int]]:
    """(digest of the golden writes' layout, (sum of |v|, sum of v, count of non-finite))
    over every value written, decoded in its stored type."""
    layout = hashlib.sha256()
    l1 = total = 0.0
    nonfinite = 0
    for i in sorted(record):
        for addr, dtype, raw in record[i]:
            layout.update(f"{i}:{addr}:{dtype}:{len(raw)};".encode())
            if dtype == "bfloat16":
                v = (np.frombuffer(raw, np.uint16).astype(np.uint32) << 16).view(np.float32)
            else:
                v = np.frombuffer(raw, np.float16 if dtype == "float16" else np.float32)
            v = v.astype(np.float64)
            finite = np.isfinite(v)
            nonfinite += int((~finite).sum())
            l1 += float(np.abs(v[finite]).sum())
            total += float(v[finite].sum())
    return layout.hexdigest(), (l1, total, nonfinite)

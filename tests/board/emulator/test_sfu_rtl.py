"""The SFU's BF16 arithmetic as the RTL computes it, checked against the RTL itself.

The oracle is pccx-v002's ``CVO_sfu_unit.sv`` simulated by Verilator through a testbench of
our own (``tb_sfu.sv``, next to this file). CI has no pccx-v002 checkout and the RTL is not
copied into this repository, so those tests skip unless ``PCCX_V002_RTL`` names a checkout
(and ``PCCX_VERILATOR`` a verilator command, else ``verilator`` on PATH). Without them the
tests below still pin what the model says the RTL does on a few hand-worked cases.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from pccx_flow.board.emulator import sfu_rtl
from pccx_flow.board.emulator.check import default_tokens, emulate_against_reference
from pccx_flow.board.isa import bf16

from ..conftest import lowered

FUNCS = {"EXP": 0, "SQRT": 1, "GELU": 2, "REDUCE_SUM": 5, "SCALE": 6, "RECIP": 7}
INCLUDES = (
    "common/rtl/packages/legacy", "common/rtl/packages", "common/rtl/interfaces",
    "LLM/rtl/packages/isa", "LLM/rtl/packages/controller", "LLM/rtl/core/mat",
    "LLM/rtl/core/vec", "LLM/rtl/interfaces",
)  # fmt: skip
SOURCES = (
    "LLM/rtl/packages/isa/isa_pkg.sv",
    "common/rtl/packages/BF16_math.sv",
    "LLM/rtl/core/cvo/CVO_sfu_unit.sv",
)


def bits(values) -> np.ndarray:
    return bf16.to_bits(np.asarray(values, dtype=np.float32))


def values(b) -> list[float]:
    return bf16.from_bits(np.asarray(b, dtype=np.uint16)).tolist()


def test_the_adder_normalises_one_bit_off_as_the_rtl_writes_it():
    assert values(sfu_rtl.bf16_add(bits([1.0, 1.0, 2.0]), bits([1.0, 2**-8, 0.0]))) == [
        1.5, 0.75, 2.0,
    ]  # fmt: skip
    assert values([sfu_rtl.reduce_sum(bits([1.0] * 4))]) == [1.65625]


def test_exp_loses_the_hidden_bit_and_mul_truncates():
    assert values(sfu_rtl.apply("EXP", bits([0.5, 1.0, 2.0, 0.0]))) == [1.0] * 4
    assert values(sfu_rtl.bf16_mul(bits([3.0, 1.5]), bits([0.5, 1.5]))) == [1.5, 2.25]
    # recip_scale takes 1/4 as {254 - e, 127 - m[6:1]} = 2**-2 * (1 + 127/128): 0.498
    assert values(sfu_rtl.scale(bits([1.0, -1.5]), int(bits([4.0])[0]), recip=True)) == [
        0.498046875, -0.74609375,
    ]  # fmt: skip


def test_an_as_built_program_with_rtl_numerics_runs_the_sfus_own_arithmetic(tiny_ckpt):
    program = lowered("v002-as-built", "heft", position=3)[3]
    tokens = default_tokens(4, tiny_ckpt.config.vocab)
    spec = emulate_against_reference(program, tiny_ckpt, tokens)
    with np.errstate(all="ignore"):
        rtl = emulate_against_reference(program, tiny_ckpt, tokens, numerics="rtl")
    assert spec["ok"]
    # with the RTL's adder and EXP the step falls apart: logits pile up at the softcap
    assert np.sum(np.abs(rtl["logits"]) >= 29.9) > rtl["logits"].size // 2
    assert not rtl["ok"]


@pytest.fixture(scope="module")
def rtl_sfu(tmp_path_factory):
    root = os.environ.get("PCCX_V002_RTL")
    if not root:
        pytest.skip("set PCCX_V002_RTL to a pccx-v002 checkout to check against the RTL")
    root = Path(root)
    missing = [s for s in SOURCES if not (root / s).is_file()]
    if missing:
        pytest.skip(f"PCCX_V002_RTL={root} has no {missing[0]}")
    verilator = shlex.split(os.environ.get("PCCX_VERILATOR", "verilator"))
    if shutil.which(verilator[0]) is None:
        pytest.skip(f"no verilator command {verilator[0]!r} (set PCCX_VERILATOR)")
    out = tmp_path_factory.mktemp("sfu")
    argv = [*verilator, "--binary", "--timing", "-j", "2", "-Wno-fatal", "-sv",
            *(f"-I{root / i}" for i in INCLUDES), "--top-module", "tb_sfu",
            *(str(root / s) for s in SOURCES), str(Path(__file__).with_name("tb_sfu.sv")),
            "-Mdir", str(out / "obj")]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]

    def run(func: str, stream: np.ndarray, length: int | None = None, flags: int = 0):
        (out / "in.memh").write_text("".join(f"{int(v):04x}\n" for v in stream))
        n = len(stream)
        sim = subprocess.run(
            [str(out / "obj" / "Vtb_sfu"), f"+N={n}", f"+LEN={length or n}",
             f"+F={FUNCS[func]}", f"+FLAGS={flags}"],
            capture_output=True, text=True, cwd=out, timeout=600,
        )  # fmt: skip
        got = [int(line.split()[1], 16) for line in sim.stdout.splitlines() if line[:2] == "R "]
        return np.array(got, dtype=np.uint16)

    return run


ALL_BITS = np.arange(1 << 16, dtype=np.uint16)


@pytest.mark.parametrize("func", ["EXP", "SQRT", "RECIP"])
def test_unary_functions_match_the_rtl_on_every_bf16_input(rtl_sfu, func):
    got = rtl_sfu(func, ALL_BITS)
    want = sfu_rtl.apply(func, ALL_BITS)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, [(hex(ALL_BITS[i]), hex(got[i]), hex(want[i])) for i in bad[:5]]


def test_gelu_matches_the_rtl_and_pairs_x_two_elements_late(rtl_sfu):
    # each value three times in a row: the third result pairs x with its own sigmoid
    got = rtl_sfu("GELU", np.repeat(ALL_BITS, 3))[2::3]
    assert np.array_equal(got, sfu_rtl.apply("GELU", ALL_BITS))
    # a continuous stream: result k is x[k-2] * sigmoid(1.702 x[k])
    x = np.random.default_rng(1).integers(0x3000, 0x4100, 300).astype(np.uint16)
    got = rtl_sfu("GELU", x)
    assert np.array_equal(got[2:], sfu_rtl.bf16_mul(x[:-2], sfu_rtl.gelu_sigmoid(x)[2:]))


def test_the_adder_and_scale_match_the_rtl(rtl_sfu):
    rng = np.random.default_rng(2)
    a, b = (rng.integers(0, 1 << 16, 30_000).astype(np.uint16) for _ in range(2))
    pairs = np.column_stack([a, b]).reshape(-1)
    assert np.array_equal(rtl_sfu("REDUCE_SUM", pairs, length=2), sfu_rtl.bf16_add(a, b))
    for recip in (False, True):
        stream = rng.integers(0x3000, 0x4400, 64).astype(np.uint16)
        got = rtl_sfu("SCALE", stream, flags=0b01000 if recip else 0)
        assert np.array_equal(got, sfu_rtl.scale(stream[1:], int(stream[0]), recip))
    # consecutive SCALEs keep the first scalar: 2n elements in ops of 2 give 2n - 1 results
    assert len(rtl_sfu("SCALE", pairs[:200], length=2)) == 199

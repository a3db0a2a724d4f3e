"""`pccx-flow cosim` against a real pccx-v002 checkout under Verilator.

CI has no checkout and none is copied into this repository: these tests skip unless
``PCCX_V002_RTL`` points at a pccx-v002 checkout (and a Verilator 5.20+ is on PATH or in
``PCCX_VERILATOR``). The oracle is the program's own decode (`pccx_flow.board.isa`): the
RTL must decode every word to the same fields.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from pccx_flow.board.program.files import write_program
from pccx_flow.cli.main import main
from tests.board.conftest import lowered

RTL = os.environ.get("PCCX_V002_RTL")
VERILATOR = os.environ.get("PCCX_VERILATOR") or shutil.which("verilator")
pytestmark = pytest.mark.skipif(
    not (RTL and VERILATOR),
    reason="set PCCX_V002_RTL to a pccx-v002 checkout (and PCCX_VERILATOR or verilator on "
    "PATH) to co-simulate against the RTL",
)


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    out = {}
    folder = tmp_path_factory.mktemp("cosim")
    for profile in ("v002-spec", "v002-as-built"):
        program = lowered(profile, "heft", position=3)[3]
        out[profile] = write_program(program, folder / f"{profile}.prog")["words"]
    return out


def _cosim(capsys, program: Path, *extra: str) -> tuple[int, str, str]:
    code = main(["cosim", str(program), "--rtl", RTL, "--verilator", VERILATOR, *extra])
    cap = capsys.readouterr()
    return code, cap.out, cap.err


@pytest.mark.parametrize("profile", ["v002-spec", "v002-as-built"])
def test_every_word_decodes_to_the_programs_fields(programs, capsys, profile, tmp_path):
    rtl_trace, model_trace = tmp_path / "rtl.json", tmp_path / "model.json"
    code, out, err = _cosim(capsys, programs[profile], "--trace-rtl", str(rtl_trace),
                            "--trace-model", str(model_trace))  # fmt: skip
    assert code == 0, err
    assert "every decoded uop equals the program's word, field for field" in out
    bound = next(ln for ln in out.splitlines() if "controller-bound (start set" in ln)
    assert bound.rstrip().endswith(("max 0", "max 1", "max 2", "max 3", "max 4", "max 5")), bound
    assert main(["trace", "diff", str(model_trace), str(rtl_trace)]) == 0


def test_a_flipped_bit_is_caught(programs, capsys):
    code, _, err = _cosim(capsys, programs["v002-spec"], "--mutate", "120:3")
    assert code == 1 and "word 120 (node " in err and "field" in err

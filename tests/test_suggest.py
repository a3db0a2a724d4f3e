"""`did you mean` in the one-line errors of a mistyped policy, preset or profile."""

from __future__ import annotations

import pytest

from pccx_flow.cli.main import main
from pccx_flow.suggest import did_you_mean


def test_nearest_name_or_nothing():
    assert did_you_mean("hetf", ["heft", "cpop", "dls"]) == " (did you mean 'heft'?)"
    assert did_you_mean("CPOP", ["heft", "cpop"]) == " (did you mean 'cpop'?)"
    assert did_you_mean("zzzzzz", ["heft", "cpop"]) == ""


@pytest.mark.parametrize(
    ("argv", "wanted"),
    [
        (["schedule", "--preset", "tiny", "--policy", "critical-pth"], "'critical-path'"),
        (["schedule", "--preset", "tinyy"], "'tiny'"),
        (["schedule", "--preset", "tiny", "--profile", "v002-spek"], "'v002-spec'"),
    ],
)
def test_the_cli_error_names_the_fix(argv, wanted, capsys):
    assert main(argv) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"did you mean {wanted}?" in err[0], err

"""The command outputs README.md quotes are what the commands print today."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_readme_quotes_what_the_commands_print():
    script = ROOT / "benchmarks" / "readme_commands.py"
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stdout + done.stderr
    match = re.search(r"(\d+) of (\d+) quoted outputs match", done.stdout)
    assert match and match[1] == match[2] and int(match[1]) >= 6, done.stdout


def test_a_stale_quote_is_caught(tmp_path):
    """The checker fails on a README whose quoted block differs from the command output."""
    readme = tmp_path / "README.md"
    readme.write_text(
        "<!-- command: pccx-flow schedule --list | lines: ^critical-path -->\n```\nstale\n```\n"
    )
    script = ROOT / "benchmarks" / "readme_commands.py"
    run = [sys.executable, str(script), "--readme", str(readme)]
    stale = subprocess.run(run, capture_output=True, text=True, timeout=120)
    assert stale.returncode == 1 and "-stale" in stale.stdout
    assert subprocess.run([*run, "--update"], capture_output=True, timeout=120).returncode == 0
    assert readme.read_text().splitlines()[2].startswith("critical-path")
    assert subprocess.run(run, capture_output=True, timeout=120).returncode == 0

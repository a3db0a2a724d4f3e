"""The command outputs README.md and the docs pages quote are what the commands print today."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def checker():
    """benchmarks/readme_commands.py as a module (it runs the quoted commands in-process)."""
    spec = importlib.util.spec_from_file_location(
        "readme_commands", ROOT / "benchmarks" / "readme_commands.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def quoted_commands() -> list[str]:
    found = []
    for page in checker().pages():
        lines = page.read_text(encoding="utf-8").splitlines()
        found += [cmd for _, cmd, _, _, _ in checker().blocks(lines)]
    return list(dict.fromkeys(found))


COMMANDS = quoted_commands()


def test_the_pages_quote_commands():
    assert len(COMMANDS) >= 7, COMMANDS


@pytest.mark.slow
@pytest.mark.parametrize("command", COMMANDS)
def test_the_pages_quote_what_each_command_prints(command, capsys):
    """One case per quoted command (E4B ones take seconds), so the suite's workers share
    them; each case checks every block on README.md and docs/*.md that quotes it."""
    code = checker().main(["--command", command])
    out = capsys.readouterr().out
    assert code == 0, out
    match = re.search(r"(\d+) of (\d+) quoted outputs match", out)
    assert match and match[1] == match[2] and int(match[1]) >= 1, out


def test_a_stale_quote_is_caught(tmp_path, capsys):
    """The checker fails on a README whose quoted block differs from the command output."""
    readme = tmp_path / "README.md"
    readme.write_text(
        "<!-- command: pccx-flow schedule --list | lines: ^critical-path -->\n```\nstale\n```\n"
    )
    check = checker().main
    assert check(["--readme", str(readme)]) == 1
    assert "-stale" in capsys.readouterr().out
    assert check(["--readme", str(readme), "--update"]) == 0
    assert readme.read_text().splitlines()[2].startswith("critical-path")
    assert check(["--readme", str(readme)]) == 0


def test_the_readme_stays_a_screen_or_two_and_links_the_docs():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    for link in re.findall(r"\]\((docs/[\w-]+\.md)\)", readme):
        assert (ROOT / link).is_file(), link

"""Every command README.md and Getting started's "Everyday use" list runs as written.

The commands run in order, in an empty folder (with a copy of `examples/`), in this
process, so a command may use a file an earlier one wrote; one whose comment says
``needs:`` something the reader supplies (an RTL checkout, a download, a cluster) is only
checked to say so. A file a command is asked to write must exist afterwards. A command an
earlier page lists word for word, and that writes no file, ran there: it is not run again.
"""

from __future__ import annotations

import re
import shlex
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SOURCES = {  # page: the section whose ```sh blocks are checked (None: the whole page)
    "README.md": None,
    "docs/getting-started.md": "## Everyday use",
}
OUTPUT_FLAGS = {"-o", "--out", "--gantt", "--json", "--trace", "--pccx", "--report", "--plot"}


def _section(text: str, heading: str | None) -> str:
    if heading is None:
        return text
    start = text.index(heading + "\n")
    nxt = re.search(r"^## ", text[start + len(heading) :], re.M)
    return text[start : start + len(heading) + (nxt.start() if nxt else len(text))]


def listed_commands() -> list[tuple[str, str, str | None]]:
    """(page, command, what it needs or None) for every ``pccx-flow`` line of a sh block."""
    found = []
    for page, heading in SOURCES.items():
        text = _section((ROOT / page).read_text(encoding="utf-8"), heading)
        for block in re.findall(r"^```sh\n(.*?)^```", text, re.M | re.S):
            for line in block.splitlines():
                if not line.startswith("pccx-flow "):
                    continue
                cmd, _, comment = line.partition("  #")
                needs = re.search(r"needs: (.+)$", comment)
                found.append((page, cmd.strip(), needs[1].strip() if needs else None))
    return found


COMMANDS = listed_commands()
PAGES = sorted({page for page, _, _ in COMMANDS})


def test_the_pages_list_commands_and_say_how_to_reach_them():
    assert len(PAGES) == len(SOURCES) and len(COMMANDS) >= 30
    for page in SOURCES:
        text = (ROOT / page).read_text(encoding="utf-8")
        assert "source .venv/bin/activate" in text and ".venv/bin/pccx-flow" in text, page
    for _, cmd, needs in COMMANDS:
        assert needs is None or len(needs) > 5, cmd


def _run_until_ctrl_c(argv: list[str], folder: Path) -> None:
    """A command that stays up until Ctrl-C: run it, press Ctrl-C once it says so, and it
    ends with exit 0 (closing the page is no interruption)."""
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "pccx_flow", *argv], cwd=folder, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True,
    )  # fmt: skip
    try:
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if "Ctrl-C to close" in line:
                break
        assert lines and "Ctrl-C to close" in lines[-1], lines[-5:]
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _outputs(argv: list[str]) -> list[str]:
    return [argv[i + 1] for i, a in enumerate(argv[:-1]) if a in OUTPUT_FLAGS]


def _ran_on_an_earlier_page(page: str, cmd: str) -> bool:
    """`cmd` is listed word for word on a page checked before `page` and writes no file (so
    no later command of `page` can depend on it): running it again proves nothing new."""
    if _outputs(shlex.split(cmd)) or "--keep-open" in cmd:
        return False
    earlier = PAGES[: PAGES.index(page)]
    return any(p in earlier and c == cmd and n is None for p, c, n in COMMANDS)


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_each_command_runs_as_written_in_an_empty_folder(page, tmp_path, monkeypatch, capsys):
    from pccx_flow.cli.main import main

    shutil.copytree(ROOT / "examples", tmp_path / "examples")
    monkeypatch.chdir(tmp_path)
    ran = 0
    for where, cmd, needs in COMMANDS:
        if where != page or needs is not None or _ran_on_an_earlier_page(page, cmd):
            continue
        argv = shlex.split(cmd)[1:]
        if "--keep-open" in argv:
            _run_until_ctrl_c(argv, tmp_path)
            ran += 1
            continue
        code = main(argv)
        seen = capsys.readouterr()
        assert code == 0, f"{page}: `{cmd}` exited {code}: {seen.err.strip()[-400:]}"
        for out in _outputs(argv):
            assert (tmp_path / out).exists(), f"{page}: `{cmd}` did not write {out}"
        ran += 1
    assert ran >= 5

"""Keep the command outputs README.md and the docs pages quote equal to what the commands print.

A quoted output in README.md or a page under docs/ is a fenced block right after a marker
line::

    <!-- command: pccx-flow schedule --policy critical-path -->
    ```
    ...what the command prints...
    ```

``<!-- command: CMD | lines: REGEX -->`` quotes only the lines matching REGEX. Lines that
carry this machine's wall times (``(scheduled in 0.16 s ...``) are left out of both sides.

    python benchmarks/readme_commands.py            # check: exit 1 and a diff on a mismatch
    python benchmarks/readme_commands.py --update   # rewrite the blocks from fresh runs
    python benchmarks/readme_commands.py --readme docs/board-programs.md   # one page

The test suite runs the check (`tests/test_readme.py`), so a number a page quotes from a
command cannot drift from what the command prints. A command quoted on several pages runs
once.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import io
import re
import shlex
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"


def pages() -> list[Path]:
    """README.md and every page of the documentation site."""
    return [README, *sorted((ROOT / "docs").glob("*.md"))]
MARKER = re.compile(r"^<!-- command: (?P<cmd>.+?)(?: \| lines: (?P<lines>.+?))? -->$")
WALL_TIME = re.compile(r"of wall time on this machine|^\s*\d+\s+\d+\.\d{3}\s+\d+\.\d{3}\b")


def run_command(cmd: str) -> str:
    """What `cmd` (a ``pccx-flow ...`` line) prints on stdout, run in this process."""
    from pccx_flow.cli.main import main

    argv = shlex.split(cmd)
    if argv[:1] != ["pccx-flow"]:
        raise SystemExit(f"README command must start with pccx-flow: {cmd}")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(argv[1:])  # stderr is no terminal here: no progress bars
    if code not in (0, 1):
        raise SystemExit(f"README command failed with exit {code}: {cmd}")
    return out.getvalue()


def quoted(text: str, lines: str | None) -> list[str]:
    keep = re.compile(lines) if lines else None
    return [
        line.rstrip()
        for line in text.splitlines()
        if not WALL_TIME.search(line) and (keep is None or keep.search(line))
    ]


def blocks(readme: list[str]):
    """(marker index, cmd, lines regex, first block line, end line) for each quoted block."""
    for i, line in enumerate(readme):
        m = MARKER.match(line.strip())
        if not m:
            continue
        if i + 1 >= len(readme) or not readme[i + 1].startswith("```"):
            raise SystemExit(f"README line {i + 1}: a command marker must precede a ``` block")
        end = next(j for j in range(i + 2, len(readme)) if readme[j].startswith("```"))
        yield i, m["cmd"], m["lines"], i + 2, end


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--update", action="store_true", help="rewrite the quoted blocks")
    parser.add_argument(
        "--readme",
        type=Path,
        action="append",
        help="a page to check (repeatable; default: README.md and docs/*.md)",
    )
    parser.add_argument("--command", help="check only the blocks quoting this command")
    parser.add_argument("--list", action="store_true", help="print each quoted command once")
    args = parser.parse_args(argv)
    if args.list:
        seen = dict.fromkeys(
            cmd for page in args.readme or pages()
            for _, cmd, _, _, _ in blocks(page.read_text(encoding="utf-8").splitlines())
        )  # fmt: skip
        print("\n".join(seen))
        return 0
    outputs: dict[str, str] = {}  # a command quoted on several pages runs once
    total = bad = 0
    for page in args.readme or pages():
        text = page.read_text(encoding="utf-8").splitlines()
        found = [f for f in blocks(text) if args.command in (None, f[1])]
        total += len(found)
        for _, cmd, lines, start, end in reversed(found):
            if cmd not in outputs:
                outputs[cmd] = run_command(cmd)
            fresh = quoted(outputs[cmd], lines)
            if args.update:
                text[start:end] = fresh
                continue
            have = [line.rstrip() for line in text[start:end] if not WALL_TIME.search(line)]
            if have != fresh:
                bad += 1
                print(f"{page.name} quotes an outdated output of: {cmd}")
                sys.stdout.writelines(
                    line + "\n" for line in difflib.unified_diff(have, fresh, page.name, "now", n=1)
                )
        if args.update and found:
            page.write_text("\n".join(text) + "\n", encoding="utf-8")
            print(f"rewrote {len(found)} quoted outputs in {page}")
    if not total:
        print("no quoted command blocks on the pages", file=sys.stderr)
        return 1
    if args.update:
        return 0
    print(f"{total - bad} of {total} quoted outputs match what the commands print")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

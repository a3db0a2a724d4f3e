"""Keep the command outputs the README quotes equal to what the commands print today.

A quoted output in README.md is a fenced block right after a marker line::

    <!-- command: pccx-flow schedule --policy critical-path -->
    ```
    ...what the command prints...
    ```

``<!-- command: CMD | lines: REGEX -->`` quotes only the lines matching REGEX. Lines that
carry this machine's wall times (``(scheduled in 0.16 s ...``) are left out of both sides.

    python benchmarks/readme_commands.py            # check: exit 1 and a diff on a mismatch
    python benchmarks/readme_commands.py --update   # rewrite the blocks from fresh runs

The test suite runs the check (`tests/test_readme.py`), so a number the README quotes from
a command cannot drift from what the command prints.
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

README = Path(__file__).resolve().parent.parent / "README.md"
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
    parser.add_argument("--readme", type=Path, default=README)
    args = parser.parse_args(argv)
    readme = args.readme.read_text(encoding="utf-8").splitlines()
    found = list(blocks(readme))
    if not found:
        print("no quoted command blocks in the README", file=sys.stderr)
        return 1
    bad = 0
    for _, cmd, lines, start, end in reversed(found):
        fresh = quoted(run_command(cmd), lines)
        if args.update:
            readme[start:end] = fresh
            continue
        have = [line.rstrip() for line in readme[start:end] if not WALL_TIME.search(line)]
        if have != fresh:
            bad += 1
            print(f"README quotes an outdated output of: {cmd}")
            sys.stdout.writelines(
                line + "\n" for line in difflib.unified_diff(have, fresh, "README", "now", n=1)
            )
    if args.update:
        args.readme.write_text("\n".join(readme) + "\n", encoding="utf-8")
        print(f"rewrote {len(found)} quoted outputs in {args.readme}")
        return 0
    print(f"{len(found) - bad} of {len(found)} quoted outputs match what the commands print")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

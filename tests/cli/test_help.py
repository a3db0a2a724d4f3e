"""Every `--help` text: examples a newcomer can run anywhere (no paths of one machine)."""

from __future__ import annotations

import argparse
import re

from pccx_flow.cli.main import build_parser

# An absolute path into somebody's machine: a home, a workspace, a temp folder.
MACHINE_PATH = re.compile(r"(?<![\w.])/(?:work|home|root|tmp|Users|mnt)/")


def _all_parsers(parser: argparse.ArgumentParser, prefix: str = "pccx-flow"):
    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _all_parsers(sub, f"{prefix} {name}")


def test_no_help_text_names_a_path_of_one_machine():
    parsers = list(_all_parsers(build_parser()))
    assert len(parsers) > 10  # every subcommand and action was walked
    for command, parser in parsers:
        text = parser.format_help()
        assert not MACHINE_PATH.search(text), f"{command} --help: {MACHINE_PATH.search(text)}"


def test_every_command_help_has_examples():
    for command, parser in _all_parsers(build_parser()):
        if command.count(" ") == 1:  # the subcommands themselves
            assert "examples:" in parser.format_help(), command

"""The step options every graph-building command shares."""

import argparse
import contextlib
import functools
import io
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pccx_flow.cli.common import (
    DEFAULT_POSITION,
    add_step_args,
    ascii_int,
    check_distinct_outputs,
    count,
    float_in,
    int_in,
    parse_layers,
    step_from_args,
)
from pccx_flow.cli.main import build_parser
from pccx_flow.cli.run import parse_prompt_ids
from pccx_flow.errors import ConfigError, InputError


def _args(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_step_args(p)
    return p.parse_args(list(argv))


def test_parse_layers():
    assert parse_layers(None, 35) is None
    assert parse_layers("3:7", 35) == (3, 7)
    assert parse_layers(":4", 35) == (0, 4)
    assert parse_layers("30:", 35) == (30, 35)
    assert parse_layers("5", 35) == (5, 6)
    for bad in ("0:36", "7:3", "a:b", "-1:2"):
        with pytest.raises(InputError, match="--layers"):
            parse_layers(bad, 35)


def test_default_position_is_capped_by_the_preset_cache():
    assert step_from_args(_args()).position == DEFAULT_POSITION
    tiny = step_from_args(_args("--preset", "tiny"))
    assert tiny.position == tiny.config.max_seq - 1 < DEFAULT_POSITION


def test_bad_step_options_fail_before_building():
    with pytest.raises(ConfigError, match="unknown preset"):
        step_from_args(_args("--preset", "e2b"))
    with pytest.raises(ConfigError, match="unknown semantics"):
        step_from_args(_args("--semantics", "llama"))
    with pytest.raises(InputError, match="position 64 out of range"):
        step_from_args(_args("--preset", "tiny", "--position", "64"))
    with pytest.raises(SystemExit):  # argparse: "argument --tile-rows: 0 is out of range"
        _args("--tile-rows", "0")


def test_build_uses_the_chosen_step():
    step = step_from_args(_args("--preset", "tiny", "--position", "3", "--layers", "2:4"))
    g = step.build()
    assert (g.graph["position"], g.graph["config"], g.graph["semantics"]) == (3, "tiny", "pccx")
    layers = {d["layer"] for _, d in g.nodes(data=True)}
    assert layers <= {-1, 2, 3} and {2, 3} <= layers


# --- numbers on the command line --------------------------------------------------------


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.text(max_size=12))
def test_ascii_int_takes_ascii_digits_or_refuses_in_one_line(text):
    try:
        value = ascii_int(text)
    except argparse.ArgumentTypeError as exc:
        assert "\n" not in str(exc)
    else:
        assert text.strip().isascii() and value == int(text)


@pytest.mark.parametrize("text", ["²", "٣", "1_000", "--5", "", "0x10", "1e3", "1.0"])
def test_ascii_int_refuses_what_int_would_bend(text):
    with pytest.raises(argparse.ArgumentTypeError, match="is not an integer"):
        ascii_int(text)


@settings(max_examples=150, deadline=None, derandomize=True)
@given(st.one_of(st.text(max_size=12), st.floats().map(repr), st.floats().map(str)))
def test_float_in_gives_finite_numbers_in_range_or_one_line(text):
    parse = float_in(1e-3, 1e3, zero=True)
    try:
        value = parse(text)
    except argparse.ArgumentTypeError as exc:
        assert "\n" not in str(exc)
    else:
        assert value == 0 or 1e-3 <= value <= 1e3


@pytest.mark.parametrize("text", ["nan", "inf", "-inf", "1e-320", "1e400", "-1", "²", "1e99999"])
def test_float_in_refuses_non_finite_subnormal_and_out_of_range(text):
    with pytest.raises(argparse.ArgumentTypeError):
        float_in(1e-3, 1e3, zero=True)(text)


def test_a_count_below_its_least_asks_for_that_or_more_not_the_typo_guard():
    with pytest.raises(argparse.ArgumentTypeError, match=r"^-1 is out of range; give 0 or more$"):
        count("-1")
    with pytest.raises(argparse.ArgumentTypeError, match=r"give 0\.\.2147483647$"):
        count("9" * 12)  # above the guard: the range is what was broken
    with pytest.raises(argparse.ArgumentTypeError, match=r"^-1 is out of range; give 0\.\.9$"):
        int_in(0, 9)("-1")  # a real upper limit is named


# Every option of every command that takes a number, with values a user or an attacker types.
NUMBER_OPTIONS = [
    ("schedule", "--position"),
    ("schedule", "--tile-rows"),
    ("schedule", "--seed"),
    ("schedule", "--policy-timeout"),
    ("render", "--timeout"),
    ("render", "--max-nodes"),
    ("render", "--layer"),
    ("run", "--steps"),
    ("run", "--temperature"),
    ("run", "--top-p"),
    ("run", "--repetition-penalty"),
    ("run", "--tolerance"),
    ("run", "--seed"),
    ("run", "--seed-weights"),
]
REQUIRED = {"render": ["-o", "x.svg"], "run": ["--synthetic", "tiny"]}
PARSER = functools.cache(build_parser)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(
    option=st.sampled_from(NUMBER_OPTIONS),
    value=st.one_of(
        st.text(max_size=10),
        st.sampled_from(["nan", "inf", "-1", "0", "1e-320", "1e400", "²", "٣", "--5", "9" * 40]),
    ),
)
def test_number_options_parse_or_fail_with_one_usage_line(option, value):
    command, flag = option
    argv = [command, *REQUIRED.get(command, []), f"{flag}={value}"]
    stderr = io.StringIO()
    try:
        with contextlib.redirect_stderr(stderr):
            args = PARSER().parse_args(argv)
    except SystemExit as exc:
        err = stderr.getvalue()
        assert exc.code == 2
        assert err.count("\n") == 1 and f"see `pccx-flow {command} --help`" in err
    else:
        parsed = getattr(args, flag.lstrip("-").replace("-", "_"))
        assert isinstance(parsed, int | float) and math.isfinite(parsed)


@pytest.mark.parametrize("text", ["--5", "²", "1,,2", "2, x", "", "-1", "1" * 12])
def test_prompt_ids_must_be_ascii_token_ids(text):
    with pytest.raises(InputError, match="--prompt-ids .* is not a comma-separated list"):
        parse_prompt_ids(text)
    assert parse_prompt_ids(" 2, 105,7") == [2, 105, 7]


# --- outputs ----------------------------------------------------------------------------


def test_two_outputs_may_not_name_one_file(tmp_path):
    a = tmp_path / "same.json"
    check_distinct_outputs({"--json": a, "--trace": tmp_path / "other.json", "--gantt": None})
    with pytest.raises(InputError, match="--json and --trace both name"):
        check_distinct_outputs({"--json": a, "--trace": tmp_path / "." / "same.json"})
    a.write_text("{}")
    (tmp_path / "hard.json").hardlink_to(a)
    with pytest.raises(InputError, match="--json and --trace name the same file"):
        check_distinct_outputs({"--json": a, "--trace": tmp_path / "hard.json"})


def test_read_ahead_names_a_rule_within_l2_only(capsys):
    """--read-ahead picks the problem's KV read rule; the default is the problem's own
    (None), and it means nothing without the L2 limit, so --no-memory refuses it in one
    line (exit 2) instead of ignoring it."""
    from pccx_flow.cli import main as cli_main
    from pccx_flow.cli.common import read_ahead_from_args

    parser = build_parser()
    for argv, rule in ((["schedule"], None), (["schedule", "--read-ahead", "fixed"], "fixed"),
                       (["emit", "--read-ahead", "stream"], "stream")):  # fmt: skip
        got = read_ahead_from_args(parser.parse_args(argv))
        assert got == (rule and {"rule": rule})
    unlimited = ["schedule", "--no-memory", "--read-ahead", "fixed"]
    with pytest.raises(InputError, match="drop --no-memory"):
        read_ahead_from_args(parser.parse_args(unlimited))
    assert cli_main.main([*unlimited, "--preset", "tiny"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--no-memory" in err

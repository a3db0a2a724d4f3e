"""The step options every graph-building command shares."""

import argparse

import pytest

from pccx_flow.cli.common import DEFAULT_POSITION, add_step_args, parse_layers, step_from_args
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
    with pytest.raises(InputError, match="--tile-rows 0"):
        step_from_args(_args("--tile-rows", "0"))


def test_build_uses_the_chosen_step():
    step = step_from_args(_args("--preset", "tiny", "--position", "3", "--layers", "2:4"))
    g = step.build()
    assert (g.graph["position"], g.graph["config"], g.graph["semantics"]) == (3, "tiny", "pccx")
    layers = {d["layer"] for _, d in g.nodes(data=True)}
    assert layers <= {-1, 2, 3} and {2, 3} <= layers

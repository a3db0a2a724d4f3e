"""Lowered tiny programs, built once per session (schedule + lower takes ~1 s each)."""

from __future__ import annotations

import pytest

from pccx_flow.board.isa.target import row_align_for, target_of
from pccx_flow.board.program.lower import lower
from pccx_flow.graph.build import build_decode_graph
from pccx_flow.hardware.profile import load_profile
from pccx_flow.model.config import get_config
from pccx_flow.schedule import run_policy

CASES = [("v002-spec", "critical-path"), ("v002-as-built", "heft"), ("v002-spec", "random")]


def lowered(profile_name: str, policy: str, position: int = 9, semantics: str = "pccx",
            target: str | None = None):  # fmt: skip
    return lowered_graph(
        profile_name, policy, position=position, semantics=semantics, target=target
    )


def lowered_graph(
    profile_name: str = "v002-spec",
    policy: str = "critical-path",
    *,
    position: int = 9,
    semantics: str = "pccx",
    tile_rows: int | None = None,
    target: str | None = None,
):
    """(graph, schedule, profile, program) of one tiny step (`tile_rows` None: the default;
    `target` None: the profile's)."""
    profile = load_profile(profile_name)
    config = get_config("tiny")
    extra = {} if tile_rows is None else {"tile_rows": tile_rows}
    align = row_align_for(target_of(profile, target))
    graph = build_decode_graph(
        config, semantics=semantics, position=position, profile=profile, row_align=align, **extra
    )
    schedule = run_policy(graph, profile, policy, seed=1)
    return graph, schedule, profile, lower(graph, schedule, profile, config, target=target)


def refuse_room(monkeypatch, refused) -> list[str]:
    """Make L2 placement fail for each node `refused(lowering, node)` names, as a full L2
    with no hole would; returns the nodes refused, one entry per refusal."""
    from pccx_flow.board.program.addresses import Addresses
    from pccx_flow.board.program.alloc import AllocationError

    take, seen = Addresses._take, []

    def taking(self, words, low, name, node, index, *rest):
        if refused(self, node):
            seen.append(node)
            raise AllocationError(f"does not fit: tensor {name} (node {node})", node=node)
        return take(self, words, low, name, node, index, *rest)

    monkeypatch.setattr(Addresses, "_take", taking)
    return seen


@pytest.fixture(scope="session", params=CASES, ids=lambda c: f"{c[0]}-{c[1]}")
def tiny_program(request):
    return lowered(*request.param)


@pytest.fixture(scope="session")
def spec_program():
    return lowered("v002-spec", "critical-path")

"""Fixtures of the render tests: a toy decode graph and a list schedule of it."""

from __future__ import annotations

import pytest

from .toys import CYCLES, make_toy_graph, make_toy_schedule


@pytest.fixture
def toy_graph():
    return make_toy_graph(2)


@pytest.fixture
def toy_schedule(toy_graph):
    for node in toy_graph:
        toy_graph.nodes[node]["cycles"] = CYCLES[toy_graph.nodes[node]["op"]]
    return make_toy_schedule(toy_graph)

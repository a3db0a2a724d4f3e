"""Scheduling fixtures: the HEFT paper's example and a decode-shaped graph."""

from __future__ import annotations

import networkx as nx
import pytest

from pccx_flow.schedule.problem import SchedulingProblem

from .problems import decode_shaped_graph, heft_paper_problem


@pytest.fixture
def heft_problem() -> SchedulingProblem:
    return heft_paper_problem()


@pytest.fixture(scope="module")
def decode_graph() -> nx.DiGraph:
    return decode_shaped_graph()

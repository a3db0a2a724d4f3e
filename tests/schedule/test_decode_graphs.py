"""Every built-in policy on the real decode graphs (tiny and E4B) on both built-in profiles.

One graph and one problem per (preset, profile) are built per module. Each schedule is
checked by the validator and against `pccx_flow.bounds` (an independent lower bound
implementation), and the informed policies must not lose to the naive program order.
"""

from __future__ import annotations

import pytest

from pccx_flow.bounds import lower_bounds
from pccx_flow.graph.build import build_decode_graph
from pccx_flow.hardware.profile import load_profile
from pccx_flow.schedule.chains import pool_chain_bounds
from pccx_flow.schedule.metrics import schedule_metrics
from pccx_flow.schedule.problem import problem_from_graph
from pccx_flow.schedule.registry import BUILTIN_POLICIES, run_policy
from pccx_flow.schedule.validate import validate_schedule

PROFILES = ("v002-spec", "v002-as-built")
# ETF, DLS and Min-Min re-evaluate every ready node after every placement: seconds on E4B.
DYNAMIC = {"etf", "dls", "min-min"}
UNINFORMED = {"program-order", "random"}

_cache: dict = {}


def decode_problem(preset: str, profile_name: str):
    key = (preset, profile_name)
    if key not in _cache:
        profile = load_profile(profile_name)
        position = 1023 if preset == "e4b" else 40
        graph = build_decode_graph(preset, position=position, profile=profile)
        problem = problem_from_graph(graph, profile)
        bound = lower_bounds(graph, profile)
        _cache[key] = (profile, graph, problem, bound, {"chain": pool_chain_bounds(problem)})
    return _cache[key]


@pytest.fixture(scope="module", autouse=True)
def _drop_graphs():
    yield
    _cache.clear()


def check_policy(preset: str, profile_name: str, policy: str) -> None:
    profile, graph, problem, bound, spans = decode_problem(preset, profile_name)
    assert len(problem) == graph.number_of_nodes()
    schedule = run_policy(problem, profile, policy=policy)
    validate_schedule(schedule, problem)
    assert schedule.makespan >= bound.largest_cycles
    assert schedule.makespan >= bound.critical_path_cycles
    assert schedule.makespan >= max(spans["chain"].values())
    spans[policy] = schedule.makespan
    if policy not in UNINFORMED and "program-order" in spans:
        assert schedule.makespan <= spans["program-order"], policy


def ordered(policies):
    """program-order first, so later policies can be compared with it."""
    return sorted(policies, key=lambda p: (p != "program-order", p))


@pytest.mark.parametrize("profile_name", PROFILES)
@pytest.mark.parametrize("policy", ordered(BUILTIN_POLICIES))
def test_every_policy_on_tiny(profile_name, policy):
    check_policy("tiny", profile_name, policy)


@pytest.mark.parametrize("profile_name", PROFILES)
@pytest.mark.parametrize("policy", ordered(set(BUILTIN_POLICIES) - DYNAMIC))
def test_list_policies_on_e4b(profile_name, policy):
    check_policy("e4b", profile_name, policy)


@pytest.mark.slow
@pytest.mark.parametrize("profile_name", PROFILES)
@pytest.mark.parametrize("policy", sorted(DYNAMIC))
def test_dynamic_policies_on_e4b(profile_name, policy):
    check_policy("e4b", profile_name, policy)


def test_e4b_metrics_are_consistent_with_the_bounds_module():
    profile, graph, problem, bound, _ = decode_problem("e4b", "v002-spec")
    schedule = run_policy(problem, profile, policy="critical-path")
    m = schedule_metrics(schedule, problem, profile)
    assert m["reference_bound_cycles"] == bound.largest_cycles
    assert m["reference_bound"] == bound.largest_name
    assert m["bounds_cycles"]["critical_path"] == bound.critical_path_cycles
    assert m["largest_bound_cycles"] >= bound.largest_cycles
    assert schedule.makespan >= m["largest_bound_cycles"]
    assert set(m["laurel_overlap"]["per_layer"]) == set(range(35))
    assert set(m["ple_slack"]["per_layer"]) == set(range(35))
    assert sum(m["critical_path"]["blocked_cycles"].values()) <= schedule.makespan

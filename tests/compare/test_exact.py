"""CP-SAT optimum: proven on small instances, no heuristic beats it, no bound exceeds it."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from schedule.problems import heft_paper_problem  # tests/schedule; pytest puts tests/ on sys.path

from pccx_flow.compare.exact import ExactPolicy, ortools_available, solve_exact
from pccx_flow.compare.families import FAMILIES, random_dag
from pccx_flow.compare.run import instance_bounds
from pccx_flow.schedule.dagfile import problem_from_spec
from pccx_flow.schedule.registry import BUILTIN_POLICIES, run_on_problem, run_policy

pytestmark = pytest.mark.skipif(
    not ortools_available(), reason="ortools not installed (pip install 'pccx-flow[exact]')"
)


def test_heft_paper_example_optimum_is_below_heft():
    p = heft_paper_problem()
    res = solve_exact(p, seconds=20)
    assert res["status"] == "optimal" and res["lower_bound"] == res["makespan"]
    checked = run_on_problem(ExactPolicy(res["placement"]), p, label="exact", profile="x")
    assert checked.makespan == res["makespan"]
    assert run_policy(p, policy="heft").makespan == 80  # the paper's Fig. 3
    assert res["makespan"] < 80


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    family=st.sampled_from(FAMILIES),
    n=st.integers(2, 9),
    seed=st.integers(0, 10_000),
    pools=st.booleans(),
)
def test_optimum_is_proven_and_brackets_heuristics_and_bounds(family, n, seed, pools):
    p = problem_from_spec(random_dag(family, n, seed, pools=pools))
    res = solve_exact(p, seconds=20)
    assert res["status"] == "optimal"
    opt = run_on_problem(ExactPolicy(res["placement"]), p, label="exact", profile="x").makespan
    assert opt == res["makespan"] == res["lower_bound"]
    for name in BUILTIN_POLICIES:
        assert run_policy(p, policy=name).makespan >= opt, name
    for name, bound in instance_bounds(p, None).items():
        assert bound <= opt, name

"""`pccx-flow compare` end to end (in-process, no Dask) and its one-line errors."""

from __future__ import annotations

import json

import pytest

from pccx_flow.cli.main import main


def test_compare_random_decode_and_a_file(tmp_path, capsys):
    dag = tmp_path / "mine.json"
    dag.write_text(json.dumps({
        "lanes": ["p1", "p2"],
        "nodes": [{"id": "a", "costs": {"p1": 3, "p2": 4}}, {"id": "b", "costs": {"p2": 2}}],
        "links": [{"source": "a", "target": "b", "comm": 1}],
    }))  # fmt: skip
    out, plot = tmp_path / "c.json", tmp_path / "c.svg"
    argv = ["compare", "--dags", f"random:2,decode,file:{dag}", "--preset", "tiny",
            "--positions", "63", "--profiles", "v002-spec", "--policies",
            "heft,critical-path", "--workers", "0", "--json", str(out), "--plot", str(plot),
            "--exact-max-nodes", "0"]  # fmt: skip
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert "random DAGs: 2 instances" in text and "DAG files: 1 instances" in text
    assert "decode steps: 1 instances (makespans are model estimates on profiles v002-spec" in text
    data = json.loads(out.read_text())
    assert len(data["instances"]) == 4 and "model estimates" in data["note"]
    assert set(data["summary"]) == {"decode", "random", "dag"}
    assert plot.read_text().lstrip().startswith(("<?xml", "<svg"))
    assert len((tmp_path / "c.jsonl").read_text().splitlines()) == 4  # the journal


def test_decode_steps_are_compared_within_l2_as_schedule_makes_them(tmp_path, capsys):
    """The same makespan as `schedule` (L2 limit on, the stream read rule) by default;
    --read-ahead fixed takes the fixed rules, --no-memory drops the limit. The key names
    the rule, so a journal of the fixed rules' days ("/l2") never resumes as the default."""
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.hardware.profile import load_profile
    from pccx_flow.model.config import get_config
    from pccx_flow.schedule.problem import problem_from_graph
    from pccx_flow.schedule.registry import run_policy

    profile = load_profile("v002-spec")
    graph = build_decode_graph(get_config("tiny"), position=20, profile=profile)
    for flags, memory, rule, tail in (
        (["--memory"], True, None, "/l2/stream"),
        (["--read-ahead", "fixed"], True, {"rule": "fixed"}, "/l2"),
        (["--no-memory"], False, None, "/pos20"),
    ):
        out = tmp_path / f"{tail.replace('/', '_')}.json"
        argv = ["compare", "--dags", "decode", "--preset", "tiny", "--positions", "20",
                "--profiles", "v002-spec", "--policies", "critical-path", "--workers", "0",
                "--json", str(out), "--exact-max-nodes", "0", *flags]  # fmt: skip
        assert main(argv) == 0
        capsys.readouterr()
        (inst,) = json.loads(out.read_text())["instances"]
        assert inst["key"].endswith(tail)
        problem = problem_from_graph(graph, profile, memory=memory, read_ahead=rule)
        want = run_policy(problem, profile, "critical-path")
        assert inst["results"]["critical-path"]["makespan"] == want.makespan
        # measured against the same bounds as `schedule`: the capacity ones only within L2
        assert any(b.startswith("capacity_chain:") for b in inst["bounds"]) == memory
    from pccx_flow.compare.instances import build_problem, decode_instance

    for rule, holds_back in (("stream", True), ("fixed", False)):  # the rule reaches it
        built, _ = build_problem(decode_instance("v002-spec", 20, preset="tiny", read_ahead=rule))
        assert bool(built.admit) == holds_back


@pytest.mark.parametrize(
    "args, words",
    [
        (["--policies", "nope"], "nope"),
        (["--dags", "random:zz"], "random:COUNT"),
        (["--dags", "decode", "--positions", "0,x"], "comma-separated integers"),
        (["--dags", "decode", "--profiles", "no-such-board"], "no-such-board"),
        (["--dags", "file:/nonexistent.json"], "does not exist"),
        (["--plot", "out.txt"], ".svg"),
    ],
)
def test_bad_options_are_one_line(args, words, capsys):
    assert main(["compare", "--workers", "0", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pccx-flow: error:") and err.count("\n") == 1 and words in err

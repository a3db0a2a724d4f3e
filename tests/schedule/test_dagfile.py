"""DAG files: the HEFT paper example round-trips; every malformed file is one clear line."""

from __future__ import annotations

import json
import os

import networkx as nx
import pytest

from pccx_flow.cli.main import main
from pccx_flow.errors import GraphError
from pccx_flow.schedule.dagfile import load_dag, problem_to_spec, write_dag
from pccx_flow.schedule.registry import run_policy

from .problems import heft_paper_problem

GOOD = {
    "lanes": [{"name": "p1", "class": "cpu"}, {"name": "p2", "class": "gpu"}],
    "pools": {"port": 1},
    "nodes": [
        {"id": "a", "costs": {"p1": 3, "p2": 5}},
        {"id": "b", "costs": {"p1": 4, "p2": None}, "pools": ["port"]},
        {"id": "c", "costs": {"p2": 2}, "pools": ["port"]},
    ],
    "links": [{"source": "a", "target": "b", "comm": 2}, {"source": "a", "target": "c"}],
}


def _write(tmp_path, data, name="g.json"):
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else json.dumps(data))
    return path


def test_heft_paper_example_round_trips_with_the_same_heft_makespan(tmp_path):
    """The paper's Fig. 2 example gives makespan 80 with HEFT, also after a file round trip."""
    problem = heft_paper_problem()
    problem.edge_comm = {(u, v): problem.comm(u, v, "p1", "p2") for u, v in problem.graph.edges}
    path = tmp_path / "heft.json"
    write_dag(problem, path)
    loaded = load_dag(path)
    assert problem_to_spec(loaded)["nodes"] == problem_to_spec(problem)["nodes"]
    assert run_policy(loaded, policy="heft").makespan == 80


def test_costs_pools_and_comm_are_read(tmp_path):
    p = load_dag(_write(tmp_path, GOOD))
    assert p.lanes_for("b") == ("p1",) and p.lanes_for("c") == ("p2",)
    assert p.resources["c"] == ("port",) and p.pools == {"port": 1}
    assert p.comm("a", "b", "p1", "p2") == 2 and p.comm("a", "b", "p1", "p1") == 0
    assert p.comm("a", "c", "p1", "p2") == 0


def test_graphml_gives_the_same_problem(tmp_path):
    g = nx.DiGraph(lanes="p1:cpu,p2:gpu", pools="port:1")
    g.add_node("a", cost_p1=3, cost_p2=5)
    g.add_node("b", cost_p1=4, pools="port")
    g.add_node("c", cost_p2=2, pools="port")
    g.add_edge("a", "b", comm=2)
    g.add_edge("a", "c", comm=0)
    path = tmp_path / "g.graphml"
    nx.write_graphml(g, path)
    from_xml = problem_to_spec(load_dag(path))
    from_json = problem_to_spec(load_dag(_write(tmp_path, GOOD)))
    assert from_xml["nodes"] == from_json["nodes"] and from_xml["links"] == from_json["links"]
    assert from_xml["lanes"] == from_json["lanes"]


def _bad(**change):
    data = json.loads(json.dumps(GOOD))
    for key, value in change.items():
        data[key] = value
    return data


BAD = {
    "cycle": (
        _bad(links=[{"source": "a", "target": "b"}, {"source": "b", "target": "a"}]),
        "cycle",
    ),
    "unknown lane": (_bad(nodes=[{"id": "a", "costs": {"gpu9": 1}}]), "unknown lane 'gpu9'"),
    "negative cost": (_bad(nodes=[{"id": "a", "costs": {"p1": -1}}]), "negative"),
    "no cost": (_bad(nodes=[{"id": "a", "costs": {"p1": None}}]), "no cost on any lane"),
    "fractional cost": (_bad(nodes=[{"id": "a", "costs": {"p1": 1.5}}]), "whole number"),
    "unknown pool": (_bad(nodes=[{"id": "a", "costs": {"p1": 1}, "pools": ["x"]}]), "pool 'x'"),
    "dangling link": (_bad(links=[{"source": "a", "target": "z"}]), "'z', which is not listed"),
    "negative comm": (
        _bad(links=[{"source": "a", "target": "b", "comm": -3}]),
        "comm is negative",
    ),
    "bad json": ('{"lanes": [', "not valid JSON"),
    "not an object": ("[1, 2]", "top level must be an object"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_file_is_one_line_and_exit_2(case, tmp_path, capsys):
    data, words = BAD[case]
    path = _write(tmp_path, data)
    with pytest.raises(GraphError, match=words):
        load_dag(path)
    assert main(["schedule", "--dag", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("pccx-flow: error: DAG file") and err.count("\n") == 1
    assert words in err


def test_non_regular_files_are_refused(tmp_path, capsys):
    assert main(["schedule", "--dag", str(tmp_path)]) == 2
    assert "not a regular file" in capsys.readouterr().err
    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    assert main(["schedule", "--dag", str(fifo)]) == 2  # must not block reading the pipe
    assert "not a regular file" in capsys.readouterr().err
    assert main(["schedule", "--dag", str(tmp_path / "nope.json")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_schedule_dag_prints_and_writes_json(tmp_path, capsys):
    out = tmp_path / "s.json"
    assert main(["schedule", "--dag", str(_write(tmp_path, GOOD)), "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "DAG g" in text and "makespan" in text and "tok/s" not in text.split("lower")[0]
    data = json.loads(out.read_text())
    assert len(data["slots"]) == 3 and data["metrics"]["makespan_cycles"] == data["makespan_cycles"]

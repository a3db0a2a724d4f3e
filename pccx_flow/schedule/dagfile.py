"""DAGs from outside pccx: a JSON (node-link) or GraphML file turned into a `SchedulingProblem`.

So a scheduling researcher can run our policies, bounds and `compare` on their own graphs.
Both formats describe the same thing: lanes (processors, each with a class), optional shared
pools (a resource type with a number of instances), nodes with a cost per lane that can run
them and the pools they hold while running, and edges with a communication cost that is paid
only when the two ends run on different lanes (the HEFT paper's model). Costs are integers
(cycles, or whatever unit the file uses; `schedule --dag` prints them as is).

JSON (``format`` is optional; ``links`` may also be called ``edges``)::

    {"format": "pccx-flow-dag/1",
     "name": "heft-paper",
     "lanes": [{"name": "p1", "class": "cpu"}, {"name": "p2", "class": "cpu"}],
     "pools": {"port": 1},
     "nodes": [{"id": "n1", "costs": {"p1": 14, "p2": 16}},
               {"id": "n2", "costs": {"p1": 13, "p2": null}, "pools": ["port"]}],
     "links": [{"source": "n1", "target": "n2", "comm": 18}]}

A cost of ``null`` (or a lane left out) means that lane cannot run the node; every node needs
at least one cost. GraphML carries the same data as attributes: the graph has ``lanes``
(``"p1:cpu,p2:cpu"``) and optionally ``pools`` (``"port:1"``), a node has ``cost_<lane>``
for each lane that can run it and optionally ``pools`` (``"port"``, comma-separated), an edge
optionally ``comm``. `problem_to_spec` / `write_dag` write the JSON form back.

Every way a file can be wrong (not a file, bad JSON or XML, a cycle, an unknown lane or pool,
a negative or fractional cost, a node no lane can run) is one `GraphError` line naming the file
and the node.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import networkx as nx

from pccx_flow import atomic
from pccx_flow.errors import GraphError, PccxFlowError
from pccx_flow.schedule.model import Lane
from pccx_flow.schedule.problem import SchedulingProblem, comm_between_lanes

FORMAT = "pccx-flow-dag/1"
MAX_FILE_BYTES = 256 * 2**20  # a DAG file bigger than this is almost surely not one


def load_dag(path: str | Path) -> SchedulingProblem:
    """The problem in a ``.json`` or ``.graphml`` file (by suffix; JSON otherwise)."""
    path = Path(path)
    if not path.exists():
        raise GraphError(f"DAG file {path} does not exist")
    if not path.is_file():
        raise GraphError(f"DAG file {path} is not a regular file; give a .json or .graphml file")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise GraphError(f"DAG file {path} is over {MAX_FILE_BYTES >> 20} MiB; is it a DAG?")
    try:
        if path.suffix.lower() in (".graphml", ".xml"):
            spec = _graphml_spec(path)
        else:
            try:
                spec = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise GraphError(
                    f"not valid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}"
                ) from None
            except UnicodeDecodeError:
                raise GraphError("not UTF-8 text; is it a JSON file?") from None
        spec.setdefault("name", path.stem) if isinstance(spec, dict) else None
        return problem_from_spec(spec)
    except PccxFlowError as exc:
        raise GraphError(f"DAG file {path}: {exc}") from None
    except OSError as exc:
        raise GraphError(f"cannot read DAG file {path}: {exc.strerror or exc}") from None


def _graphml_spec(path: Path) -> dict:
    try:
        g = nx.read_graphml(path, node_type=str)
    except Exception as exc:  # ParseError, NetworkXError, KeyError... from a bad file
        raise GraphError(f"not readable GraphML: {' '.join(str(exc).split())[:200]}") from None
    if not g.is_directed():
        raise GraphError('the GraphML graph is undirected; set edgedefault="directed"')
    lanes = []
    for item in _split(g.graph.get("lanes")):
        name, _, cls = item.partition(":")
        lanes.append({"name": name.strip(), "class": cls.strip() or "lane"})
    if not lanes:
        raise GraphError('the graph has no "lanes" attribute; add one like "p1:cpu,p2:cpu"')
    pools = {}
    for item in _split(g.graph.get("pools")):
        name, _, count = item.partition(":")
        try:
            pools[name.strip()] = int(count)
        except ValueError:
            raise GraphError(f'pool {item!r}: write "name:count", e.g. "port:2"') from None
    nodes = []
    for n, attrs in g.nodes(data=True):
        costs = {k[len("cost_") :]: v for k, v in attrs.items() if k.startswith("cost_")}
        nodes.append({"id": n, "costs": costs, "pools": _split(attrs.get("pools"))})
    links = [{"source": u, "target": v, "comm": a.get("comm", 0)} for u, v, a in g.edges(data=True)]
    return {"lanes": lanes, "pools": pools, "nodes": nodes, "links": links}


def _split(text: Any) -> list[str]:
    return [x.strip() for x in str(text or "").split(",") if x.strip()]


def _count(value: Any, what: str) -> int:
    """A non-negative integer (a float is fine when whole: 3.0)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise GraphError(f"{what} is {value!r}; give a whole number >= 0")
    if isinstance(value, float) and (not math.isfinite(value) or value != int(value)):
        raise GraphError(f"{what} is {value!r}; give a whole number >= 0")
    if value < 0:
        raise GraphError(f"{what} is negative ({value!r}); give a whole number >= 0")
    return int(value)


def problem_from_spec(spec: Any) -> SchedulingProblem:
    """Check a parsed DAG description (the JSON form above) and build its problem."""
    if not isinstance(spec, Mapping):
        raise GraphError("the top level must be an object with lanes, nodes and links")
    fmt = spec.get("format", FORMAT)
    if fmt != FORMAT:
        raise GraphError(f"format {fmt!r} is not {FORMAT!r}")
    raw_lanes = spec.get("lanes")
    if not isinstance(raw_lanes, list) or not raw_lanes:
        raise GraphError('"lanes" must be a non-empty list like [{"name": "p1", "class": "cpu"}]')
    lanes = []
    for item in raw_lanes:
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, Mapping) or not isinstance(item.get("name"), str):
            raise GraphError(f'lane {item!r}: give an object with a string "name"')
        lanes.append(Lane(item["name"], str(item.get("class", "lane"))))
    lane_names = {ln.name for ln in lanes}
    if len(lane_names) != len(lanes):
        raise GraphError("two lanes have the same name; lane names are unique")
    raw_pools = spec.get("pools") or {}
    if not isinstance(raw_pools, Mapping):
        raise GraphError('"pools" must be an object like {"port": 2}')
    pools = {str(k): _count(v, f"pool {k!r} count") for k, v in raw_pools.items()}
    for name, count in pools.items():
        if count < 1:
            raise GraphError(f"pool {name!r} has no instances; give it a count >= 1")

    raw_nodes = spec.get("nodes")
    if not isinstance(raw_nodes, list):
        raise GraphError('"nodes" must be a list of {"id": ..., "costs": {lane: cost}}')
    graph = nx.DiGraph()
    costs: dict[Any, dict[str, int | None]] = {}
    resources: dict[Any, list[str]] = {}
    for item in raw_nodes:
        if not isinstance(item, Mapping) or "id" not in item:
            raise GraphError(f'node {str(item)[:60]}: give an object with an "id"')
        n = item["id"]
        if not isinstance(n, str | int) or isinstance(n, bool):
            raise GraphError(f"node id {n!r}: use a string or an integer")
        if n in graph:
            raise GraphError(f"node {n!r} appears twice; node ids are unique")
        graph.add_node(n)
        row = item.get("costs")
        if not isinstance(row, Mapping) or not any(v is not None for v in row.values()):
            raise GraphError(f'node {n!r} has no cost on any lane; give it "costs": {{lane: n}}')
        clean: dict[str, int | None] = {}
        for lane, c in row.items():
            if lane not in lane_names:
                raise GraphError(
                    f"node {n!r} has a cost on unknown lane {lane!r}; the lanes are "
                    + ", ".join(sorted(lane_names))
                )
            clean[lane] = None if c is None else _count(c, f"node {n!r} cost on lane {lane!r}")
        costs[n] = clean
        needs = item.get("pools") or []
        if isinstance(needs, str):
            needs = [needs]
        for pool in needs:
            if pool not in pools:
                raise GraphError(f'node {n!r} needs pool {pool!r}, which "pools" does not list')
        resources[n] = list(needs)

    raw_links = spec.get("links", spec.get("edges", []))
    if not isinstance(raw_links, list):
        raise GraphError('"links" must be a list of {"source": u, "target": v, "comm": c}')
    edge_comm: dict[tuple[Any, Any], int] = {}
    for item in raw_links:
        if not isinstance(item, Mapping) or "source" not in item or "target" not in item:
            raise GraphError(f"link {str(item)[:60]}: give an object with source and target")
        u, v = item["source"], item["target"]
        for end in (u, v):
            if not isinstance(end, str | int) or end not in graph:
                raise GraphError(f"link {u!r} -> {v!r} names node {end!r}, which is not listed")
        if u == v:
            raise GraphError(f"link {u!r} -> {v!r} is a self-loop; a DAG has no cycles")
        graph.add_edge(u, v)
        edge_comm[(u, v)] = _count(item.get("comm", 0), f"link {u!r} -> {v!r} comm")
    if not nx.is_directed_acyclic_graph(graph):
        cycle = " -> ".join(repr(u) for u, _ in nx.find_cycle(graph))
        raise GraphError(f"the graph has a cycle: {cycle}; a DAG has none")
    comm = comm_between_lanes(edge_comm) if any(edge_comm.values()) else None
    problem = SchedulingProblem(
        graph, lanes, costs, comm=comm, resources=resources, pools=pools,
        name=str(spec.get("name", "dag")),
    )  # fmt: skip
    problem.edge_comm = edge_comm  # kept so the problem can be written back or exported
    return problem


def problem_to_spec(problem: SchedulingProblem) -> dict:
    """The JSON form of a problem; its comm costs must be per edge (`problem.edge_comm`)."""
    edge_comm = getattr(problem, "edge_comm", None)
    if problem.has_comm and edge_comm is None:
        raise GraphError("this problem's comm is a function, not per-edge costs; cannot write it")
    edge_comm = edge_comm or {}
    return {
        "format": FORMAT,
        "name": problem.name,
        "lanes": [{"name": ln.name, "class": ln.lane_class} for ln in problem.lanes],
        "pools": dict(problem.pools),
        "nodes": [
            {"id": n, "costs": dict(problem.costs[n]), "pools": list(problem.resources[n])}
            for n in problem.order
        ],
        "links": [
            {"source": u, "target": v, "comm": int(edge_comm.get((u, v), 0))}
            for u in problem.order
            for v in problem.succs[u]
        ],
    }


def write_dag(problem: SchedulingProblem, path: str | Path) -> None:
    """Write `problem` as a JSON DAG file that `load_dag` reads back to the same problem."""
    atomic.write_text(Path(path), json.dumps(problem_to_spec(problem), indent=1) + "\n")

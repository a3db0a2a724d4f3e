"""Writing a decode graph to a file and reading it back, exactly.

Two formats, chosen by the file's suffix (or `fmt`):

- ``.json``: networkx node-link data inside a small envelope
  ``{"format": "pccx-flow-graph", "version": 1, "graph": {...}}``;
- ``.graphml``: GraphML for other tools. GraphML attributes are scalars only, so every
  node, edge and graph attribute is stored as its JSON text (type string) and decoded on load.

Every attribute of a built graph is JSON data (`pccx_flow.graph.nodes`), so
``read_graph(write_graph(g, p))`` equals `g`: same nodes in the same order, same edges, same
attributes. A file that is not such a graph raises `GraphError` with what is wrong.

>>> import tempfile, pathlib
>>> from pccx_flow.graph.build import build_decode_graph
>>> g = build_decode_graph("tiny", layers=(0, 1))
>>> p = pathlib.Path(tempfile.mkdtemp()) / "step.json"
>>> h = read_graph(write_graph(g, p))
>>> sorted(h.nodes) == sorted(g.nodes) and h.graph == g.graph
True
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import networkx as nx

from pccx_flow import atomic
from pccx_flow.errors import GraphError
from pccx_flow.files import file_kind

FORMAT = "pccx-flow-graph"
VERSION = 2  # 2: KV reads and new-row writes per KV head (params.kv_head)
FORMATS = ("json", "graphml")
_JSON_PREFIX = "json:"
# Graph attributes networkx's GraphML reader adds itself, plus our format marker.
_GRAPHML_OWN = ("pccx_flow_format", "node_default", "edge_default")


def graph_format(path: Path | str, fmt: str | None = None) -> str:
    """`fmt` if given, else the format named by the file suffix; `GraphError` otherwise."""
    if fmt is None:
        fmt = Path(path).suffix.lstrip(".").lower()
    if fmt not in FORMATS:
        raise GraphError(
            f"cannot tell the graph format of {str(path)!r}: use a .json or .graphml file "
            f"or pass a format ({', '.join(FORMATS)})"
        )
    return fmt


def write_graph(graph: nx.DiGraph, path: Path | str, fmt: str | None = None) -> Path:
    """Write `graph` to `path` as JSON or GraphML; returns the path."""
    path = Path(path)
    fmt = graph_format(path, fmt)
    try:
        if fmt == "json":
            data = {
                "format": FORMAT,
                "version": VERSION,
                "graph": nx.node_link_data(graph, edges="edges"),
            }
            atomic.write_text(path, json.dumps(data, allow_nan=False, separators=(",", ":")))
        else:
            with atomic.replacing(path) as tmp:
                nx.write_graphml(_encoded(graph), tmp, encoding="utf-8", prettyprint=False)
    except OSError as exc:
        raise GraphError(f"cannot write {path}: {exc.strerror or exc}") from None
    except (TypeError, ValueError) as exc:
        raise GraphError(f"graph has an attribute that is not JSON data: {exc}") from None
    return path


def read_graph(path: Path | str, fmt: str | None = None) -> nx.DiGraph:
    """Read a graph written by `write_graph`; `GraphError` for a missing or malformed file."""
    path = Path(path)
    kind = file_kind(path)
    if kind is not None:
        raise GraphError(
            f"{path} is {kind}, not a graph file; give a .json or .graphml file written by "
            "`pccx-flow graph export`"
        )
    fmt = graph_format(path, fmt)
    if not path.is_file():
        raise GraphError(f"no graph file at {path}; write one with `pccx-flow graph export`")
    return _read_json(path) if fmt == "json" else _read_graphml(path)


def _read_json(path: Path) -> nx.DiGraph:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GraphError(f"{path} is not valid JSON ({exc}); re-export the graph") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise GraphError(f"{path} is not a pccx-flow graph file (no format {FORMAT!r})")
    if data.get("version") != VERSION:
        raise GraphError(
            f"{path} is graph format version {data.get('version')!r}; this pccx-flow reads "
            f"version {VERSION}: re-export the graph"
        )
    body = data.get("graph")
    try:
        graph = nx.node_link_graph(body, directed=True, multigraph=False, edges="edges")
    except (KeyError, TypeError, AttributeError, nx.NetworkXError) as exc:
        raise GraphError(f"{path} has a malformed node-link body ({exc!r})") from None
    if not isinstance(graph, nx.DiGraph) or graph.is_multigraph():
        raise GraphError(f"{path} does not hold a directed graph")
    return graph


def _encode(value) -> str:
    return _JSON_PREFIX + json.dumps(value, allow_nan=False, separators=(",", ":"))


def _decode(value, where: str):
    if not isinstance(value, str) or not value.startswith(_JSON_PREFIX):
        raise GraphError(f"{where}: attribute value {value!r} was not written by pccx-flow")
    try:
        return json.loads(value[len(_JSON_PREFIX) :])
    except json.JSONDecodeError as exc:
        raise GraphError(f"{where}: attribute is not valid JSON ({exc})") from None


def _encoded(graph: nx.DiGraph) -> nx.DiGraph:
    out = nx.DiGraph()
    out.graph.update({k: _encode(v) for k, v in graph.graph.items()})
    out.graph["pccx_flow_format"] = f"{FORMAT}/{VERSION}"
    for n, a in graph.nodes(data=True):
        out.add_node(n, **{k: _encode(v) for k, v in a.items()})
    for u, v, a in graph.edges(data=True):
        out.add_edge(u, v, **{k: _encode(x) for k, x in a.items()})
    return out


def _read_graphml(path: Path) -> nx.DiGraph:
    try:
        raw = nx.read_graphml(path, node_type=str)
    except (ET.ParseError, nx.NetworkXError, ValueError, KeyError) as exc:
        raise GraphError(f"{path} is not a readable GraphML file ({exc})") from None
    if raw.graph.get("pccx_flow_format") != f"{FORMAT}/{VERSION}":
        raise GraphError(
            f"{path} is not a pccx-flow graph (version {VERSION}); re-export the graph"
        )
    if not raw.is_directed() or raw.is_multigraph():
        raise GraphError(f"{path} does not hold a simple directed graph")
    graph = nx.DiGraph()
    graph.graph.update(
        {
            k: _decode(v, f"{path} graph attribute {k}")
            for k, v in raw.graph.items()
            if k not in _GRAPHML_OWN
        }
    )
    for n, a in raw.nodes(data=True):
        graph.add_node(n, **{k: _decode(v, f"{path} node {n}") for k, v in a.items()})
    for u, v, a in raw.edges(data=True):
        graph.add_edge(u, v, **{k: _decode(x, f"{path} edge {u}->{v}") for k, x in a.items()})
    return graph

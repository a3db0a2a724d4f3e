import re
import shutil
import xml.etree.ElementTree as ET

import networkx as nx
import pytest

from pccx_flow.errors import RenderError
from pccx_flow.render.collapse import collapse
from pccx_flow.render.dag import build_dag_picture, layer_view, write_dag
from pccx_flow.render.dot import DOT_MISSING

from .toys import make_toy_graph

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed")
SVG = "{http://www.w3.org/2000/svg}"
BOLD = "3.5"


def parse_svg(path):
    """Clusters, nodes and edges of a Graphviz SVG, keyed by their DOT names."""
    root = ET.parse(path).getroot()
    out = {"clusters": {}, "nodes": {}, "edges": {}, "caption": []}
    for g in root.iter(f"{SVG}g"):
        kind = g.get("class")
        title = g.find(f"{SVG}title")
        if kind not in ("cluster", "node", "edge") or title is None:
            continue
        texts = [t.text or "" for t in g.iter(f"{SVG}text")]
        shapes = [e for e in g.iter() if e.tag in (f"{SVG}polygon", f"{SVG}path", f"{SVG}ellipse")]
        info = {
            "texts": texts,
            "widths": {e.get("stroke-width") for e in shapes},
            "dashed": any(e.get("stroke-dasharray") for e in shapes),
        }
        if kind == "edge":
            u, v = title.text.split("->")
            out["edges"][(u, v)] = info
        else:
            out[kind + "s"][title.text] = info
    graph_group = root.find(f"{SVG}g")
    out["caption"] = [t.text for t in graph_group.findall(f"{SVG}text")]
    return out


def drawn_nodes(svg):
    return {n for n in svg["nodes"] if not n.startswith("legend_")}


@needs_dot
def test_layers_and_blocks_are_clusters_with_a_legend(tmp_path):
    g = make_toy_graph(2)
    out = write_dag(build_dag_picture(g, level="none"), tmp_path / "g.svg")
    svg = parse_svg(out)
    clusters = set(svg["clusters"])
    assert {
        "cluster_pre",
        "cluster_L00",
        "cluster_L01",
        "cluster_post",
        "cluster_legend",
    } <= clusters
    for scope in ("L00", "L01"):
        for block in ("altup_pred", "attn", "laurel", "residual", "ffn", "altup_corr", "ple_mix"):
            assert f"cluster_{scope}_{block}" in clusters
    assert svg["clusters"]["cluster_L00_laurel"]["dashed"]
    assert svg["clusters"]["cluster_L00_ple_mix"]["dashed"]
    assert not svg["clusters"]["cluster_L00_ffn"]["dashed"]
    legend = {n for n in svg["nodes"] if n.startswith("legend_")}
    # Lane classes used by the toy graph (no GEMM) and every op kind it uses.
    assert {f"legend_lane_{c}" for c in ("gemv", "sfu", "dma", "ctrl", "host")} <= legend
    assert "legend_lane_gemm" not in legend
    assert {f"legend_op_{op}" for op in ("GEMV", "CVO", "MEMCPY", "MEMSET", "HOST")} <= legend
    assert {"legend_offpath", "legend_crit_a"} <= legend
    assert drawn_nodes(svg) == set(g.nodes)


@needs_dot
def test_the_critical_path_is_bold_and_nothing_else_is(tmp_path):
    g = make_toy_graph(1)
    path = ["pre.embed.fetch", "pre.altup_init.proj.t01", "L00.altup_pred.router"]
    path += ["L00.altup_pred.mix", "L00.attn.norm", "L00.laurel.left", "L00.laurel.right"]
    path += ["L00.residual.merge", "L00.ffn.gate.t02", "L00.ffn.gelu", "L00.ffn.down.t00"]
    assert nx.is_path(g, path)
    picture = build_dag_picture(g, level="none", critical_path=path, critical_note="bold: test")
    svg = parse_svg(write_dag(picture, tmp_path / "g.svg"))
    path_edges = set(zip(path, path[1:], strict=False))
    for edge, info in svg["edges"].items():
        if edge[0].startswith("legend_"):
            continue
        assert (BOLD in info["widths"]) == (edge in path_edges), edge
    for node in drawn_nodes(svg):
        assert (BOLD in svg["nodes"][node]["widths"]) == (node in path), node
    assert picture.critical_nodes == len(path)
    assert any("bold: test" in line for line in svg["caption"])


@needs_dot
def test_without_a_profile_the_longest_path_by_node_count_is_bold_and_said(tmp_path):
    g = make_toy_graph(1)
    svg = parse_svg(write_dag(build_dag_picture(g, level="none"), tmp_path / "g.svg"))
    bold = {n for n in drawn_nodes(svg) if BOLD in svg["nodes"][n]["widths"]}
    assert len(bold) == len(nx.dag_longest_path(g))
    assert nx.is_path(g, [n for n in nx.topological_sort(g) if n in bold])
    assert any(
        "longest path by node count (no hardware profile given)" in c for c in svg["caption"]
    )


@needs_dot
def test_schedule_labels_each_node_with_lane_and_start(tmp_path, toy_graph, toy_schedule):
    schedule, path = toy_schedule
    picture = build_dag_picture(toy_graph, level="none", schedule=schedule, critical_path=path)
    svg = parse_svg(write_dag(picture, tmp_path / "g.svg"))
    for node in toy_graph:
        slot = schedule.slots[node]
        assert f"{slot.lane} @ {slot.start:,}" in svg["nodes"][node]["texts"], node
    assert any("toy-asap schedule on toy-profile (model estimate)" in c for c in svg["caption"])
    # Folded: a tile group shows its lanes and its time span.
    picture = build_dag_picture(toy_graph, level="tiles", schedule=schedule, critical_path=path)
    svg = parse_svg(write_dag(picture, tmp_path / "t.svg"))
    tiles = [schedule.slots[f"L00.ffn.gate.t{i:02d}"] for i in range(4)]
    span = f"{min(s.start for s in tiles):,}-{max(s.finish for s in tiles):,}"
    assert any(span in t for t in svg["nodes"]["L00.ffn.gate"]["texts"])


@needs_dot
def test_laurel_and_ple_nodes_are_dashed(tmp_path):
    g = make_toy_graph(1)
    svg = parse_svg(write_dag(build_dag_picture(g, level="none"), tmp_path / "g.svg"))
    for node in drawn_nodes(svg):
        off_path = g.nodes[node]["block"] in ("laurel", "ple_pre", "ple_mix")
        assert svg["nodes"][node]["dashed"] == off_path, node


@needs_dot
@pytest.mark.parametrize("level", ["none", "tiles", "blocks", "layers"])
def test_collapse_levels_draw_the_folded_node_counts(tmp_path, level):
    g = make_toy_graph(2)
    picture = build_dag_picture(g, level=level)
    svg = parse_svg(write_dag(picture, tmp_path / f"{level}.svg"))
    folded, _ = collapse(g, level)
    assert drawn_nodes(svg) == set(folded.nodes)
    assert picture.nodes == folded.number_of_nodes() and not picture.level_picked
    if level == "tiles":
        assert "GEMV x4 tiles" in svg["nodes"]["L00.ffn.gate"]["texts"]
    if level == "blocks":
        assert "L00.ffn" in svg["nodes"] and "cluster_L00" in svg["clusters"]
        assert "cluster_L00_ffn" not in svg["clusters"]
    if level == "layers":
        assert not any(c.startswith("cluster_L") for c in svg["clusters"])
    assert any(f"collapse: {level} (as asked)" in c for c in svg["caption"])


def test_auto_level_is_said_in_the_caption():
    picture = build_dag_picture(make_toy_graph(1))
    assert picture.level_picked and picture.level == "none"
    assert "collapse: none (picked automatically for readability)" in picture.source


def test_fan_out_nodes_are_left_out_and_named():
    g = make_toy_graph(1, fanout=30)
    picture = build_dag_picture(g, level="none", fanout_limit=10)
    assert picture.omitted == ["pre.const.scale"]
    assert '"pre.const.scale" [' not in picture.source
    assert "left out 1 node(s) feeding more than 10 others: pre.const.scale" in picture.source


def test_dot_source_needs_no_graphviz_but_svg_does(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    picture = build_dag_picture(make_toy_graph(1), level="tiles")
    out = write_dag(picture, tmp_path / "g.dot")
    assert "subgraph cluster_L00 {" in out.read_text()
    with pytest.raises(RenderError) as err:
        write_dag(picture, tmp_path / "g.svg")
    assert str(err.value) == DOT_MISSING


def test_a_ranking_failure_is_laid_out_again_without_the_spine(tmp_path, monkeypatch):
    """Graphviz 2.43 gives up ranking some pictures with the spine's heavy invisible edges
    ("trouble in init_rank"); the spine is a hint, so the picture is laid out without it.
    Any other failure, or one of the picture without a spine, is the user's error."""
    from pccx_flow.render import dag

    picture = build_dag_picture(make_toy_graph(3), level="tiles")
    assert picture.source_without_spine and "weight=40" in picture.source
    assert "weight=40" not in picture.source_without_spine
    seen = []

    def layout(source, out, fmt, **kw):
        seen.append(source)
        if "weight=40" in source:
            raise RenderError("Graphviz 'dot' failed: Error: trouble in init_rank")
        return out

    monkeypatch.setattr(dag, "run_layout", layout)
    assert write_dag(picture, tmp_path / "g.svg") == tmp_path / "g.svg"
    assert seen == [picture.source, picture.source_without_spine]

    def broken(source, out, fmt, **kw):
        raise RenderError("Graphviz 'dot' failed: syntax error in line 1")

    monkeypatch.setattr(dag, "run_layout", broken)
    with pytest.raises(RenderError, match="syntax error"):
        write_dag(picture, tmp_path / "g.svg")


def test_bad_requests_are_render_errors(tmp_path):
    picture = build_dag_picture(make_toy_graph(1), level="tiles")
    with pytest.raises(RenderError, match=r"end the output name with \.svg, \.png, \.pdf, \.dot"):
        write_dag(picture, tmp_path / "g.jpeg")
    with pytest.raises(RenderError, match="empty"):
        build_dag_picture(nx.DiGraph())
    with pytest.raises(RenderError, match="unknown collapse level"):
        build_dag_picture(make_toy_graph(1), level="everything")


def test_layer_view_keeps_only_the_asked_layers():
    g = make_toy_graph(3)
    view = layer_view(g, (1, 3))
    assert {g.nodes[n]["layer"] for n in view} == {1, 2}
    assert all(g.nodes[n]["layer"] in (1, 2) for n in view)
    assert view.number_of_nodes() == sum(1 for n in g if g.nodes[n]["layer"] in (1, 2))
    assert {g.nodes[n]["layer"] for n in layer_view(g, (0, 1))} == {0}
    with pytest.raises(RenderError, match="no nodes in layers 5..5"):
        layer_view(g, (5, 6))


def test_edges_into_many_layers_are_not_drawn_and_the_label_says_so():
    g = make_toy_graph(5)  # pre.ple_pre.proj feeds the PLE mix of all 5 layers
    picture = build_dag_picture(g, level="none", critical_path=[])
    assert '"pre.ple_pre.proj" -> "L00.ple_mix.add"' not in picture.source
    assert "feeds 5 layers (edges not drawn)" in picture.source
    assert picture.edges == g.number_of_edges() - 5
    # Up to SCOPE_FANOUT_LIMIT layers the edges stay.
    small = build_dag_picture(make_toy_graph(3), level="none", critical_path=[])
    assert '"pre.ple_pre.proj" -> "L00.ple_mix.add"' in small.source


def _cluster_y_range(svg_path, name):
    root = ET.parse(svg_path).getroot()
    for g in root.iter(f"{SVG}g"):
        title = g.find(f"{SVG}title")
        if g.get("class") == "cluster" and title is not None and title.text == name:
            shape = g.find(f"{SVG}path")
            if shape is None:
                shape = g.find(f"{SVG}polygon")
            text = shape.get("d") or shape.get("points")
            numbers = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", text)]
            ys = numbers[1::2]
            return min(ys), max(ys)
    raise AssertionError(f"no cluster {name}")


@needs_dot
@pytest.mark.parametrize("level", ["none", "blocks"])
def test_layer_clusters_are_stacked_top_to_bottom(tmp_path, level):
    """Each layer sits wholly below the one before it (no two layers share a rank)."""
    out = write_dag(build_dag_picture(make_toy_graph(4), level=level), tmp_path / "g.svg")
    ranges = [_cluster_y_range(out, f"cluster_L{i:02d}") for i in range(4)]
    for (_, bottom), (top, _) in zip(ranges, ranges[1:], strict=False):
        assert bottom < top


def test_a_one_layer_picture_wraps_at_the_ffn():
    from pccx_flow.graph.build import build_decode_graph
    from pccx_flow.render.dag import build_dag_picture, layer_view

    g = build_decode_graph("tiny", position=5)
    one = build_dag_picture(layer_view(g, (3, 4)), level="macros").source
    into_ffn = [line for line in one.splitlines() if '-> "L03.ffn.' in line]
    from_ffn_block = [line for line in into_ffn if line.strip().startswith('"L03.ffn.')]
    wrapped = [line for line in into_ffn if "constraint=false" in line]
    assert wrapped and set(wrapped) == set(into_ffn) - set(from_ffn_block)
    two = build_dag_picture(layer_view(g, (3, 5)), level="macros").source
    assert "constraint=false" not in two  # several layers stack as before


LIBERATION = "/usr/share/fonts/truetype/liberation2/LiberationSans-Regular.ttf"


def _polygon_xs(el) -> list[tuple[float, float]]:
    return [tuple(map(float, p.split(","))) for p in el.get("points").split()]


@needs_dot
@pytest.mark.skipif(
    not shutil.os.path.exists(LIBERATION),
    reason="needs the Liberation Sans font (Graphviz's Helvetica here)",
)
def test_memcpy_and_folded_group_labels_stay_inside_their_shape(tmp_path):
    """Measured on the SVG: each text line's width (from the font Graphviz used) fits
    between a MEMCPY arrow's left edge and where its head starts, and right of a folded
    group's tabs; the last line's baseline is inside the shape."""
    from PIL import ImageFont

    from pccx_flow.cli.main import main

    out = tmp_path / "l7.svg"
    assert main(["render", "--layer", "7", "-o", str(out)]) == 0
    font = ImageFont.truetype(LIBERATION, 10)
    svg = "{http://www.w3.org/2000/svg}"
    checked = {"cds": 0, "component": 0}
    for node in ET.parse(out).getroot().iter(f"{svg}g"):
        if node.get("class") != "node":
            continue
        polygon = next(node.iter(f"{svg}polygon"), None)
        texts = list(node.iter(f"{svg}text"))
        if polygon is None or not texts:
            continue
        pts = _polygon_xs(polygon)
        xs, ys = [p[0] for p in pts], [p[1] for p in pts]
        tabs = list(node.iter(f"{svg}polyline"))
        if len(pts) == 6 and len(tabs) == 0:  # cds: a box and an arrow head to the right
            kind, left, right = "cds", min(xs), sorted(set(xs))[-2]
        elif len(tabs) == 2 and len(pts) == 13:  # component: two tabs on the left edge
            kind = "component"
            tab_xs = [float(p.split(",")[0]) for t in tabs for p in t.get("points").split()]
            assert min(tab_xs) <= min(xs) + 4.5  # the tabs are at the left edge
            tab_right = max(tab_xs)
            width = float(tabs[0].get("stroke-width") or 1)
            left, right = tab_right + width / 2, max(xs)
        else:
            continue
        for t in texts:
            half = font.getlength(t.text or "") / 2
            x = float(t.get("x"))
            assert left <= x - half and x + half <= right, (kind, t.text, left, x, right)
        assert float(texts[-1].get("y")) <= max(ys)  # the last line is inside
        checked[kind] += 1
    assert checked["cds"] >= 1 and checked["component"] >= 3, checked

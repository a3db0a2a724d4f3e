"""`pccx-flow render` end to end with the real graph builder, scheduler and `dot`."""

import re
import shutil
import xml.etree.ElementTree as ET

import pytest

from pccx_flow.cli.main import main
from pccx_flow.graph.build import build_decode_graph
from pccx_flow.hardware.profile import load_profile
from pccx_flow.render.dot import DOT_MISSING

from .test_dag import BOLD, drawn_nodes, parse_svg

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed")

TINY_LAST = 63  # the CLI's default position on tiny: its last KV slot


@needs_dot
def test_one_tiny_layer_in_full_detail(tmp_path, capsys):
    out = tmp_path / "l3.svg"
    assert main(["render", "--preset", "tiny", "--layer", "3", "-o", str(out)]) == 0
    seen = capsys.readouterr()
    assert "collapse level none (picked automatically)" in seen.err and not seen.out
    svg = parse_svg(out)
    graph = build_decode_graph("tiny", layers=(3, 4), position=TINY_LAST)
    assert drawn_nodes(svg) == {n for n, a in graph.nodes(data=True) if a["layer"] == 3}
    assert {"cluster_L03", "cluster_L03_attn", "cluster_L03_ffn", "cluster_legend"} <= set(
        svg["clusters"]
    )
    # the default profile (v002-spec) costs the graph: the bold path is the min-cost one
    assert any("bold: min-cost critical path" in c and "v002-spec" in c for c in svg["caption"])


@needs_dot
def test_whole_tiny_step_by_block(tmp_path, capsys):
    out = tmp_path / "step.svg"
    assert main(["render", "--preset", "tiny", "--collapse", "blocks", "-o", str(out)]) == 0
    assert "collapse level blocks (as asked)" in capsys.readouterr().err
    graph = build_decode_graph("tiny", position=TINY_LAST)
    blocks = {(n.split(".")[0], a["block"]) for n, a in graph.nodes(data=True)}
    svg = parse_svg(out)
    # the residual block's input norm (read by attention) is a node of its own: folded into
    # the residual block it drew two opposite arrows between attention and residual
    norms = {f"L{i:02d}.residual.input_norm" for i in range(10)}
    assert drawn_nodes(svg) == {f"{scope}.{block}" for scope, block in blocks} | norms
    assert {f"cluster_L{i:02d}" for i in range(10)} <= set(svg["clusters"])


@needs_dot
def test_policy_labels_lane_and_start_and_bolds_the_schedule_path(tmp_path):
    from pccx_flow.schedule.metrics import schedule_critical_path
    from pccx_flow.schedule.problem import problem_from_graph
    from pccx_flow.schedule.registry import run_policy

    out = tmp_path / "s.svg"
    argv = ["render", "--preset", "tiny", "--layer", "2", "--collapse", "none"]
    assert main(argv + ["--policy", "critical-path", "-o", str(out)]) == 0
    profile = load_profile("v002-spec")
    graph = build_decode_graph("tiny", layers=(2, 3), position=TINY_LAST, profile=profile)
    schedule = run_policy(graph, profile, "critical-path")
    path = schedule_critical_path(schedule, problem_from_graph(graph, profile))["nodes"]
    svg = parse_svg(out)
    for node in graph:
        slot = schedule.slots[node]
        assert f"{slot.lane} @ {slot.start:,}" in svg["nodes"][node]["texts"], node
    bold = {n for n in drawn_nodes(svg) if BOLD in svg["nodes"][n]["widths"]}
    assert bold == set(path)
    assert any("critical-path schedule on v002-spec" in c for c in svg["caption"])


@needs_dot
def test_profile_bolds_the_min_cost_critical_path(tmp_path):
    from pccx_flow.bounds import lower_bounds

    out = tmp_path / "p.svg"
    argv = ["render", "--preset", "tiny", "--layer", "1", "--profile", "v002-as-built"]
    assert main(argv + ["-o", str(out)]) == 0
    profile = load_profile("v002-as-built")
    graph = build_decode_graph("tiny", layers=(1, 2), position=TINY_LAST, profile=profile)
    path = lower_bounds(graph, profile).critical_path
    svg = parse_svg(out)
    bold = {n for n in drawn_nodes(svg) if BOLD in svg["nodes"][n]["widths"]}
    assert bold == set(path)
    assert any("min-cost critical path" in c and "v002-as-built" in c for c in svg["caption"])


@needs_dot
def test_one_e4b_layer_folds_tiles_and_macros_and_shows_shapes_and_costs(tmp_path, capsys):
    out = tmp_path / "l7.svg"
    assert main(["render", "--layer", "7", "-o", str(out)]) == 0
    assert "collapse level macros (picked automatically)" in capsys.readouterr().err
    svg = parse_svg(out)
    gate = svg["nodes"]["L07.ffn.gate"]["texts"]
    assert "GEMV x32 tiles" in gate  # 16384 rows / 512
    assert "-> 32 x [512]" in gate  # each tile writes 512 outputs
    assert any(t.endswith(" cyc") and "MB" in t for t in gate)  # costed on v002-spec
    assert "RMSNorm (7 instr.)" in svg["nodes"]["L07.ffn.pre_norm"]["texts"]


def test_missing_dot_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PATH", str(tmp_path))
    code = main(["render", "--preset", "tiny", "--layer", "0", "-o", str(tmp_path / "x.svg")])
    err = capsys.readouterr().err
    assert code == 2
    assert err == f"pccx-flow: error: {DOT_MISSING}\n"
    assert not (tmp_path / "x.svg").exists()
    # .dot needs no Graphviz.
    out = tmp_path / "x.dot"
    assert main(["render", "--preset", "tiny", "--layer", "0", "-o", str(out)]) == 0
    assert "subgraph cluster_L00 {" in out.read_text()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--layer", "10"], "--layer 10: the preset has layers 0..9"),
        (["--layers", "5:2"], "--layers '5:2': need 0 <= A < B <= 10"),
        (["--layers", "x"], "--layers 'x': write A:B with integers"),
        (["--position", "64"], "position 64 out of range"),
        (["--semantics", "hf"], "unknown semantics 'hf'"),
        (["--profile", "v003"], "unknown hardware profile 'v003'"),
        (["--policy", "no-such-policy"], "no-such-policy"),
    ],
)
def test_bad_options_are_one_line_errors(tmp_path, capsys, args, message):
    out = tmp_path / "x.dot"
    code = main(["render", "--preset", "tiny", *args, "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("pccx-flow: error: ") and err.count("\n") == 1
    assert message in err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    ("args", "message"), [(["--max-nodes", "0"], "--max-nodes"), (["--timeout", "-1"], "--timeout")]
)
def test_numbers_out_of_range_are_one_line_usage_errors(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as exc:
        main(["render", "--preset", "tiny", *args, "-o", str(tmp_path / "x.dot")])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.count("\n") == 1
    assert err.startswith("pccx-flow render: error: argument " + message) and "--help" in err


def test_pictures_too_big_to_lay_out_are_refused_but_dot_source_is_written(tmp_path, capsys):
    argv = ["render", "--preset", "tiny", "--layer", "0", "--collapse", "none"]
    assert main(argv + ["--max-nodes", "50", "-o", str(tmp_path / "x.svg")]) == 2
    err = capsys.readouterr().err
    assert "at collapse level none is more than Graphviz lays out" in err
    assert "--max-nodes 50" in err and not (tmp_path / "x.svg").exists()
    assert main(argv + ["--max-nodes", "50", "-o", str(tmp_path / "x.dot")]) == 0


def test_bad_output_names_are_refused_before_any_work(tmp_path, capsys):
    assert main(["render", "--preset", "tiny", "-o", str(tmp_path / "x.jpeg")]) == 2
    assert "end the output name with .svg, .png, .pdf, .dot" in capsys.readouterr().err
    assert main(["render", "--preset", "tiny", "-o", str(tmp_path / "no" / "x.dot")]) == 2
    assert "folder" in capsys.readouterr().err


def test_help_shows_examples(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["render", "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert "examples:" in text and "pccx-flow render --preset tiny --layer 3 -o tiny3.svg" in text


def _layer_boxes(path) -> dict[str, tuple[float, float, float, float]]:
    """(left, right, top, bottom) of each layer cluster of an SVG render."""
    svg = "{http://www.w3.org/2000/svg}"
    boxes = {}
    for g in ET.parse(path).getroot().iter(f"{svg}g"):
        title = g.find(f"{svg}title")
        if g.get("class") != "cluster" or not re.fullmatch(r"cluster_L\d\d", title.text or ""):
            continue
        shape = g.find(f"{svg}path")
        text = shape.get("d") if shape is not None else g.find(f"{svg}polygon").get("points")
        nums = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", text)]
        xs, ys = nums[0::2], nums[1::2]
        boxes[title.text] = (min(xs), max(xs), min(ys), max(ys))
    return boxes


@needs_dot
@pytest.mark.parametrize("preset", ["tiny", "e4b"])
def test_layers_read_top_to_bottom_not_as_a_staircase(preset, tmp_path):
    out = tmp_path / "s.svg"
    argv = ["render", "--preset", preset, "--layers", "0:2", "--policy", "critical-path",
            "-o", str(out)]  # fmt: skip
    assert main(argv) == 0
    boxes = _layer_boxes(out)
    (l0, r0, _, b0), (l1, r1, t1, _) = boxes["cluster_L00"], boxes["cluster_L01"]
    assert b0 <= t1  # layer 1 wholly below layer 0
    overlap = min(r0, r1) - max(l0, l1)
    assert overlap >= 0.5 * min(r0 - l0, r1 - l1)  # one above the other, not side by side

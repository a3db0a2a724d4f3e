"""`pccx-flow check` and `pccx-flow graph`: output, exit codes, one-line errors."""

from __future__ import annotations

import pytest

from pccx_flow.cli.main import main
from pccx_flow.graph.check import check_graph
from pccx_flow.graph.export import read_graph


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_check_tiny_prints_ok_counts_and_labelled_bounds(capsys):
    code, out, err = run(capsys, "check", "--preset", "tiny", "--position", "3")
    assert code == 0, err
    assert out.startswith("ok: built graph, preset tiny, semantics pccx, position 3")
    for op in ("GEMV", "CVO", "HOST", "MEMCPY", "MEMSET", "total"):
        assert f"\n{op}" in out
    assert out.count("model estimate") == 1 and "on v002-spec" in out and "tok/s" in out
    lines = out.splitlines()
    assert lines[1] == "invariants verified on this graph:"
    assert "  ok  LAuReL ∥ attention  no path between them in any of 10 layers (0-9)" in lines


def test_check_e4b_default(capsys):
    code, out, _ = run(capsys, "check", "--semantics", "gemma3n", "--profile", "v002-as-built")
    assert code == 0
    assert "preset e4b, semantics gemma3n, position 1023, layers 0..34" in out
    assert "lower bounds of one decode step on v002-as-built" in out


def test_check_names_the_same_binding_bound_as_schedule(capsys):
    step = ["--preset", "tiny", "--position", "3"]
    code, out, _ = run(capsys, "check", *step)
    assert code == 0
    (check_line,) = [line for line in out.splitlines() if "<- largest (binding)" in line]
    code, out, _ = run(capsys, "schedule", *step, "--no-progress")
    (schedule_line,) = [line for line in out.splitlines() if "<- largest" in line]
    assert check_line.split()[0] == schedule_line.split()[0]  # same bound name
    assert check_line.split()[1] == schedule_line.split()[1]  # same cycles


def test_check_a_cut_graph_and_an_exported_file(capsys, tmp_path):
    code, out, _ = run(capsys, "check", "--preset", "tiny", "--layers", "5:8")
    assert code == 0 and "layers 5..7" in out
    path = tmp_path / "t.json"
    assert run(capsys, "graph", "export", "--preset", "tiny", "-o", str(path))[0] == 0
    code, out, _ = run(capsys, "check", "--graph", str(path))
    assert code == 0 and out.startswith(f"ok: {path}")


def test_check_rejects_a_broken_file(capsys, tmp_path):
    path = tmp_path / "t.json"
    run(capsys, "graph", "export", "--preset", "tiny", "--position", "2", "-o", str(path))
    path.write_text(path.read_text().replace('"rows":[1,2,3]', '"rows":[0,1,2]'))
    code, out, err = run(capsys, "check", "--graph", str(path))
    assert code == 2 and out == ""
    assert err.startswith("pccx-flow: error: ") and "never row 0" in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize(
    ("argv", "fragment"),
    [
        (["check", "--preset", "e5b"], "unknown preset 'e5b'"),
        (["check", "--preset", "tiny", "--position", "64"], "position 64 out of range"),
        (["check", "--preset", "tiny", "--layers", "4:2"], "need 0 <= A < B <= 10"),
        (["check", "--preset", "tiny", "--layers", "x"], "write A:B with integers"),
        (["check", "--preset", "tiny", "--semantics", "hf"], "unknown semantics"),
        (["check", "--preset", "tiny", "--tile-rows", "3"], "tile_rows 3 out of range"),
        (["check", "--preset", "tiny", "--profile", "v9"], "v9"),
        (["check", "--graph", "missing.json"], "no graph file"),
        (["graph", "export", "--preset", "tiny", "-o", "x.csv"], "cannot tell the graph format"),
        (["graph", "kernels", "nope"], "unknown kernel 'nope'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(capsys, argv, fragment):
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert err.startswith("pccx-flow: error: ") and fragment in err
    assert err.count("\n") == 1


@pytest.mark.parametrize("fmt", ["json", "graphml"])
def test_export_writes_a_checkable_graph(capsys, tmp_path, fmt):
    path = tmp_path / f"g.{fmt}"
    code, out, _ = run(
        capsys, "graph", "export", "--preset", "tiny", "--layers", "3:6", "--semantics",
        "gemma3n", "--position", "7", "-o", str(path),
    )  # fmt: skip
    assert code == 0 and out.startswith(f"wrote {path} ({fmt})")
    g = read_graph(path)
    assert g.graph["layers"] == [3, 6] and g.graph["semantics"] == "gemma3n"
    check_graph(g)


def test_export_with_profile_carries_cycles(capsys, tmp_path):
    path = tmp_path / "c.txt"
    code, _, _ = run(
        capsys, "graph", "export", "--preset", "tiny", "--layers", "9:10", "--format", "json",
        "--profile", "v002-spec", "-o", str(path),
    )  # fmt: skip
    assert code == 0
    g = read_graph(path, fmt="json")
    assert g.graph["profile"] == "v002-spec"
    assert all(a["cycles"] >= 1 for _, a in g.nodes(data=True))


def test_kernels_listing(capsys):
    code, out, _ = run(capsys, "graph", "kernels", "attn_scores")
    assert code == 0 and out.startswith("attn_scores [GEMV]") and "findemax" in out


def test_help_shows_examples(capsys):
    for argv in (["check", "--help"], ["graph", "export", "--help"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 0
        assert "examples:" in capsys.readouterr().out


def test_each_graph_action_shows_its_own_examples(capsys):
    for action, other in (("kernels", "graph export"), ("export", "graph kernels")):
        with pytest.raises(SystemExit):
            main(["graph", action, "--help"])
        text = capsys.readouterr().out
        assert f"pccx-flow graph {action}" in text.split("examples:")[1]
        assert other not in text


def test_check_graph_file_refuses_build_options_it_would_ignore(capsys, tmp_path):
    out = tmp_path / "t.json"
    assert main(["graph", "export", "--preset", "tiny", "--no-progress", "-o", str(out)]) == 0
    capsys.readouterr()
    rc = main(["check", "--graph", str(out), "--layers", "0:3", "--no-progress"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and err.count("\n") == 0
    assert "--layers would be ignored" in err


def test_export_with_profile_labels_cycles_as_estimates(tmp_path):
    out = tmp_path / "c.json"
    argv = ["graph", "export", "--preset", "tiny", "--profile", "v002-spec", "-o", str(out)]
    assert main([*argv, "--no-progress"]) == 0
    assert read_graph(out).graph["cycles_are"] == "model estimate, profile v002-spec"

import shutil
import stat

import pytest

from pccx_flow.errors import RenderError
from pccx_flow.render.dot import DOT_MISSING, find_layout_program, run_layout

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz dot not installed")


def _fake_program(folder, name, body):
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_missing_dot_gives_the_install_hint(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RenderError) as err:
        find_layout_program("dot")
    assert str(err.value) == DOT_MISSING
    assert "apt-get install graphviz" in DOT_MISSING and "brew install graphviz" in DOT_MISSING
    with pytest.raises(RenderError, match="Graphviz 'neato' not found"):
        run_layout("digraph {}", tmp_path / "x.png", "png", program="neato")


def test_a_layout_that_runs_too_long_is_stopped(tmp_path, monkeypatch):
    _fake_program(tmp_path, "dot", "exec /bin/sleep 30")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RenderError, match="took longer than 0.3 s.*--collapse"):
        run_layout("digraph {}", tmp_path / "x.svg", "svg", timeout=0.3)


def test_a_failing_layout_reports_its_first_error_line(tmp_path, monkeypatch):
    _fake_program(
        tmp_path, "dot", 'echo "Error: syntax error in line 1" >&2; echo more >&2; exit 1'
    )
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(
        RenderError, match=r"^Graphviz 'dot' failed: Error: syntax error in line 1$"
    ):
        run_layout("digraph {", tmp_path / "x.svg", "svg")


def test_unknown_format_is_refused(tmp_path):
    with pytest.raises(RenderError, match="unknown picture format 'gif'"):
        run_layout("digraph {}", tmp_path / "x.gif", "gif")


@needs_dot
def test_real_dot_writes_svg_into_a_new_folder(tmp_path):
    out = run_layout('digraph { a -> b [label="x"] }', tmp_path / "sub" / "x.svg", "svg")
    text = out.read_text()
    assert text.lstrip().startswith("<?xml") and "<svg" in text and ">a</text>" in text

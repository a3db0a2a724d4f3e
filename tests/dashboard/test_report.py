"""The performance report and its lanes page: replaced whole, the lanes page first, and the
link to it in the real body, not in a script's string."""

from __future__ import annotations

from html.parser import HTMLParser

import pytest

from pccx_flow import atomic
from pccx_flow.dashboard import report as report_module
from pccx_flow.dashboard.report import add_lanes_page, body_insert_offset


def _parts(folder) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith(f".{atomic.PART_TAG}-")]


def test_the_report_is_renamed_in_last_and_links_the_new_lanes_page(tmp_path, monkeypatch):
    monkeypatch.setattr(report_module, "lanes_html", lambda snapshot: "<p>lanes</p>")
    out = tmp_path / "run.html"
    out.write_text("OLD REPORT")
    draft = atomic.temp_path(out)  # where Dask writes the report
    draft.write_text("<html><body>dask</body></html>")
    lanes = report_module.add_lanes_page(out, {"tasks": []}, draft=draft)
    assert lanes == tmp_path / "run.lanes.html" and lanes.read_text().endswith("<p>lanes</p>")
    text = out.read_text()
    assert text.startswith("<html><body><div") and 'href="run.lanes.html#run=' in text
    draft.unlink()
    assert _parts(tmp_path) == []


def test_a_failed_lanes_page_leaves_the_old_report(tmp_path, monkeypatch):
    def broken(snapshot):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(report_module, "lanes_html", broken)
    out = tmp_path / "run.html"
    out.write_text("OLD REPORT")
    draft = atomic.temp_path(out)
    draft.write_text("<html><body>dask</body></html>")
    with pytest.raises(OSError):
        report_module.add_lanes_page(out, {"tasks": []}, draft=draft)
    assert out.read_text() == "OLD REPORT"


def test_without_a_recorder_the_draft_becomes_the_report(tmp_path):
    out = tmp_path / "run.html"
    draft = atomic.temp_path(out)
    draft.write_text("<html><body>dask</body></html>")
    assert report_module.add_lanes_page(out, None, draft=draft) is None
    assert out.read_text() == "<html><body>dask</body></html>"


PAGE = (
    "<!DOCTYPE html>\n<html><head>\n<script>var t = '<body>'; // BokehJS has this\n"
    "const u = \"<body class='x'>\";</script>\n</head>\n"
    '  <body class="report">\n<div id="panel">dask</div>\n</body></html>\n'
)


class _Parents(HTMLParser):
    """The tag stack above the element with id pccx-lanes-link."""

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.parents: list[str] | None = None

    def handle_starttag(self, tag, attrs):
        if dict(attrs).get("id") == "pccx-lanes-link":
            self.parents = list(self.stack)
        self.stack.append(tag)

    def handle_endtag(self, tag):
        while self.stack and self.stack.pop() != tag:
            pass


def test_offset_is_after_the_real_body_tag():
    at = body_insert_offset(PAGE)
    assert PAGE[:at].endswith('<body class="report">')
    assert body_insert_offset("<p>no body tag</p>") is None


def test_the_link_is_an_element_of_the_body(tmp_path, monkeypatch):
    monkeypatch.setattr("pccx_flow.dashboard.report.lanes_html", lambda snap: "<html></html>")
    report = tmp_path / "run.html"
    report.write_text(PAGE)
    out = add_lanes_page(report, {"lanes": {}})
    assert out == tmp_path / "run.lanes.html" and out.is_file()
    text = report.read_text()
    assert "var t = '<body>';" in text  # the script is untouched
    parents = _Parents()
    parents.feed(text)
    assert parents.parents == ["html", "body"]


def test_no_recorder_no_page(tmp_path):
    report = tmp_path / "run.html"
    report.write_text(PAGE)
    assert add_lanes_page(report, None) is None
    assert report.read_text() == PAGE


def test_the_pair_carries_one_run_id_and_a_mix_is_refused(tmp_path, monkeypatch):
    """A kill between the two renames (the lanes page renamed in, the report not) leaves the
    old report beside another run's lanes page: `check_pair` refuses it in one line, the
    lanes page carries the script that says so when opened from that report, and the next
    write repairs the pair."""
    monkeypatch.setattr(report_module, "lanes_html", lambda snap: "<html><body></body></html>")
    out = tmp_path / "run.html"
    out.write_text("<html><body>dask</body></html>")
    lanes = add_lanes_page(out, {"tasks": []})
    run = report_module.run_id(out.read_text())
    assert run and report_module.run_id(lanes.read_text()) == run
    assert f'href="run.lanes.html#run={run}"' in out.read_text()
    assert report_module.check_pair(out) == lanes
    old = out.read_text()

    renames = []

    def killed_after_the_first(src, dst):
        if renames:
            raise KeyboardInterrupt
        renames.append(dst)
        real_replace(src, dst)

    real_replace = report_module.atomic.os.replace
    monkeypatch.setattr(report_module.atomic.os, "replace", killed_after_the_first)
    draft = atomic.temp_path(out)
    draft.write_text("<html><body>dask 2</body></html>")
    with pytest.raises(KeyboardInterrupt):
        add_lanes_page(out, {"tasks": []}, draft=draft)
    draft.unlink()
    assert renames == [lanes] and out.read_text() == old and _parts(tmp_path) == []
    other = report_module.run_id(lanes.read_text())
    assert other != run and f'm[1] === "{other}"' in lanes.read_text()
    with pytest.raises(report_module.ReportPairError, match="not the lanes page") as exc:
        report_module.check_pair(out)
    assert "\n" not in str(exc.value)
    lanes.unlink()
    with pytest.raises(report_module.ReportPairError):
        report_module.check_pair(out)
    monkeypatch.setattr(report_module.atomic.os, "replace", real_replace)
    add_lanes_page(out, {"tasks": []})
    assert report_module.check_pair(out) == lanes
    (tmp_path / "old.html").write_text("<html><body>a report without a lanes link")
    assert report_module.check_pair(tmp_path / "old.html") is None


def test_a_second_writer_waits_for_the_folder_lock(tmp_path, monkeypatch):
    """The renames of a pair hold the folder lock: while another writer holds it, neither
    file is replaced (two concurrent runs cannot interleave their renames)."""
    import threading

    monkeypatch.setattr(report_module, "lanes_html", lambda snap: "<html><body></body></html>")
    out = tmp_path / "run.html"
    out.write_text("<html><body>dask</body></html>")
    lanes = tmp_path / "run.lanes.html"
    lanes.write_text("OLD")
    writer = threading.Thread(target=add_lanes_page, args=(out, {"tasks": []}))
    with atomic.folder_lock(tmp_path):
        writer.start()
        writer.join(0.3)
        assert writer.is_alive() and lanes.read_text() == "OLD"
        assert "pccx-lanes-link" not in out.read_text()
    writer.join(10)
    assert report_module.check_pair(out) == lanes

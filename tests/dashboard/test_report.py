"""The performance report and its lanes page are replaced whole, the lanes page first."""

from __future__ import annotations

import pytest

from pccx_flow import atomic
from pccx_flow.dashboard import report as report_module


def _parts(folder) -> list[str]:
    return [p.name for p in folder.iterdir() if p.name.startswith(f".{atomic.PART_TAG}-")]


def test_the_report_is_renamed_in_last_and_links_the_new_lanes_page(tmp_path, monkeypatch):
    monkeypatch.setattr(report_module, "lanes_html", lambda snapshot: "<p>lanes</p>")
    out = tmp_path / "run.html"
    out.write_text("OLD REPORT")
    draft = atomic.temp_path(out)  # where Dask writes the report
    draft.write_text("<html><body>dask</body></html>")
    lanes = report_module.add_lanes_page(out, {"tasks": []}, draft=draft)
    assert lanes == tmp_path / "run.lanes.html" and lanes.read_text() == "<p>lanes</p>"
    text = out.read_text()
    assert text.startswith("<html><body><div") and 'href="run.lanes.html"' in text
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

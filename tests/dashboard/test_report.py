"""Where the report's link to the lanes page goes: the real body, not a script's string."""

from __future__ import annotations

from html.parser import HTMLParser

from pccx_flow.dashboard.report import add_lanes_page, body_insert_offset

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

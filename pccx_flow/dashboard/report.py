"""The lanes page's data beside Dask's performance report of a run.

Dask's report (`distributed.performance_report`, inline mode: it works offline) shows the
generic task stream, profile and bandwidth. `add_lanes_page` writes the pccx lanes picture
of the same run (`pccx_flow.dashboard.page.lanes_html`: measured tasks by lane, counters,
errors, the last planned step) to ``<report>.lanes.html`` and puts a link to it at the top
of the report's body.
"""

from __future__ import annotations

import html
from html.parser import HTMLParser
from pathlib import Path

from pccx_flow import atomic
from pccx_flow.dashboard.page import lanes_html


def lanes_path(report: str | Path) -> Path:
    """``run.html`` -> ``run.lanes.html``."""
    report = Path(report)
    return report.with_name(report.stem + ".lanes.html")


class _BodyFinder(HTMLParser):
    """Finds the document's ``<body ...>`` start tag.

    A parser, not a text search, because the report inlines BokehJS, whose source holds
    ``"<body>"`` in strings: the parser treats script content as raw text, so only the real
    tag is seen."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.found: tuple[int, int, str] | None = None

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag == "body" and self.found is None:
            line, col = self.getpos()
            self.found = (line, col, self.get_starttag_text() or "<body>")


def body_insert_offset(text: str) -> int | None:
    """Character offset just after the real ``<body ...>`` start tag of `text`, or None."""
    finder = _BodyFinder()
    finder.feed(text)
    finder.close()
    if finder.found is None:
        return None
    line, col, tag = finder.found
    starts = [0]
    for n, ch in enumerate(text):
        if ch == "\n":
            starts.append(n + 1)
    return starts[line - 1] + col + len(tag)


def link_html(lanes_name: str) -> str:
    """The banner the report gets: a visible link to the lanes page, above Dask's panels."""
    name = html.escape(lanes_name)
    return (
        '<div id="pccx-lanes-link" style="font:14px sans-serif;margin:8px;padding:6px 8px;'
        'background:#fff;position:relative;z-index:10">pccx lanes of this run (tasks by '
        f'pccx lane, counters, planned schedule): <a href="{name}">{name}</a></div>'
    )


def add_lanes_page(
    report: str | Path, snapshot: dict | None, draft: str | Path | None = None
) -> Path | None:
    """Write the lanes page of `snapshot` beside `report` and link it from the report.

    `draft` is where Dask wrote the report (a temporary beside `report`, default `report`
    itself); the linked report replaces `report` last, so a kill leaves the old report or
    the new one, and the new report never links to a lanes page that is not there yet.
    Returns the lanes page's path, or None when there was no recorder (`snapshot` None)."""
    report = Path(report)
    draft = report if draft is None else Path(draft)
    if snapshot is None:
        if draft != report:
            atomic.write_text(report, draft.read_text(encoding="utf-8"))
        return None
    out = lanes_path(report)
    atomic.write_text(out, lanes_html(snapshot))
    link = link_html(out.name)
    text = draft.read_text(encoding="utf-8")
    at = body_insert_offset(text)
    text = text[:at] + link + text[at:] if at is not None else link + text
    atomic.write_text(report, text)
    return out

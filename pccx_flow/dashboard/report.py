"""The lanes page's data beside Dask's performance report of a run.

Dask's report (`distributed.performance_report`, inline mode: it works offline) shows the
generic task stream, profile and bandwidth. `add_lanes_page` writes the pccx lanes picture
of the same run (`pccx_flow.dashboard.page.lanes_html`: measured tasks by lane, counters,
errors, the last planned step) to ``<report>.lanes.html`` and puts a link to it at the top
of the report's body.

The two files carry one run id (``data-pccx-run``; the link is ``NAME.lanes.html#run=ID``).
They are renamed into place one after the other under a lock on the folder, so concurrent
runs follow one another; a kill between the two renames can still leave the old report
beside the new lanes page: opened from that report's link, the lanes page sees another run
id and says so at its top (`check_pair` refuses such a pair in one line), and the next run
writes both again.
"""

from __future__ import annotations

import html
import re
import secrets
from html.parser import HTMLParser
from pathlib import Path

from pccx_flow import atomic
from pccx_flow.dashboard.page import lanes_html
from pccx_flow.errors import PccxFlowError

_RUN = re.compile(r'data-pccx-run="([0-9a-f]+)"')


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


def _insert(text: str, block: str) -> str:
    """`text` with `block` just after its ``<body>`` tag (at the start without one)."""
    at = body_insert_offset(text)
    return text[:at] + block + text[at:] if at is not None else block + text


def link_html(lanes_name: str, run: str) -> str:
    """The banner the report gets: a visible link to the lanes page of run `run`, above
    Dask's panels."""
    name = html.escape(lanes_name)
    return (
        f'<div id="pccx-lanes-link" data-pccx-run="{run}" style="font:14px sans-serif;'
        'margin:8px;padding:6px 8px;background:#fff;position:relative;z-index:10">pccx lanes '
        "of this run (tasks by pccx lane, counters, planned schedule): "
        f'<a href="{name}#run={run}">{name}</a></div>'
    )


def run_check_html(run: str) -> str:
    """The lanes page's mark of run `run`, and a script that says so at the top of the page
    when a report of another run linked here (``#run=ID`` of another id)."""
    note = (
        "This lanes page is not from the run of the report that links here (a --report "
        "interrupted between writing the two): run the report again."
    )
    return (
        f'<div id="pccx-run" data-pccx-run="{run}" hidden></div><script>(function () {{'
        "var m = /^#run=([0-9a-f]+)$/.exec(location.hash);"
        f'if (!m || m[1] === "{run}") return;'
        'var d = document.createElement("div"); d.id = "pccx-other-run";'
        'd.setAttribute("style", "font:14px sans-serif;margin:8px;padding:6px 8px;'
        'background:#fdd;position:relative;z-index:10");'
        f'd.textContent = "{note}";'
        "document.body.insertBefore(d, document.body.firstChild);})();</script>"
    )


def run_id(text: str) -> str | None:
    """The run id a report or a lanes page carries (None: written before run ids)."""
    m = _RUN.search(text)
    return m.group(1) if m else None


class ReportPairError(PccxFlowError):
    """A report whose lanes page is missing or from another run."""


def check_pair(report: str | Path) -> Path | None:
    """The lanes page `report` links to, checked to be of the same run; None when the report
    links none. Raises `ReportPairError` (one line) for a missing page or another run's."""
    report = Path(report)
    run = run_id(report.read_text(encoding="utf-8", errors="replace"))
    if run is None:
        return None
    lanes = lanes_path(report)
    try:
        other = run_id(lanes.read_text(encoding="utf-8", errors="replace"))
    except FileNotFoundError:
        other = "missing"
    if other != run:
        raise ReportPairError(
            f"{lanes} is not the lanes page of the run {report} shows (a --report interrupted "
            "between writing the two); run the report again"
        )
    return lanes


def add_lanes_page(
    report: str | Path, snapshot: dict | None, draft: str | Path | None = None
) -> Path | None:
    """Write the lanes page of `snapshot` beside `report` and link it from the report.

    `draft` is where Dask wrote the report (a temporary beside `report`, default `report`
    itself). Both files are complete temporaries before the lanes page is renamed in and then
    the report, under a lock on the folder (see the module's note on a kill between them).
    Returns the lanes page's path, or None when there was no recorder (`snapshot` None)."""
    report = Path(report)
    draft = report if draft is None else Path(draft)
    if snapshot is None:
        if draft != report:
            atomic.write_text(report, draft.read_text(encoding="utf-8"))
        return None
    out = lanes_path(report)
    run = secrets.token_hex(8)
    page = _insert(lanes_html(snapshot), run_check_html(run))
    text = _insert(draft.read_text(encoding="utf-8"), link_html(out.name, run))
    with atomic.folder_lock(report.parent), atomic.replacing_set([out, report]) as temps:
        atomic.write_temp(temps[0], page.encode("utf-8"))
        atomic.write_temp(temps[1], text.encode("utf-8"))
    return out

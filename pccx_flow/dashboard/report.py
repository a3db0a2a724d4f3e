"""The lanes page's data beside Dask's performance report of a run.

Dask's report (`distributed.performance_report`, inline mode: it works offline) shows the
generic task stream, profile and bandwidth. `add_lanes_page` writes the pccx lanes picture
of the same run (`pccx_flow.dashboard.page.lanes_html`: measured tasks by lane, counters,
errors, the last planned step) to ``<report>.lanes.html`` and puts a link to it at the top
of the report.
"""

from __future__ import annotations

import html
from pathlib import Path

from pccx_flow import atomic
from pccx_flow.dashboard.page import lanes_html


def lanes_path(report: str | Path) -> Path:
    """``run.html`` -> ``run.lanes.html``."""
    report = Path(report)
    return report.with_name(report.stem + ".lanes.html")


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
    link = (
        '<div style="font:14px sans-serif;margin:8px">pccx lanes of this run (tasks by pccx '
        f'lane, counters, planned schedule): <a href="{html.escape(out.name)}">'
        f"{html.escape(out.name)}</a></div>"
    )
    text = draft.read_text(encoding="utf-8")
    at = text.find("<body>")
    text = text[: at + 6] + link + text[at + 6 :] if at >= 0 else link + text
    atomic.write_text(report, text)
    return out

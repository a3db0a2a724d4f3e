"""A real browser loads the lanes page during a run and draws the task stream.

Needs Debian's ``chromium`` and ``chromium-driver`` (``make test`` installs them where apt
exists) and selenium; skips with the reason otherwise. The screenshot is saved under the
test's temporary directory, or into ``$PCCX_SCREENSHOT_DIR`` when set (that is how the
picture in graphs/ is made).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from pccx_flow.dashboard.client import PlanAnnouncer, fetch, page_url
from pccx_flow.execute.generate import generate
from pccx_flow.render import style

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
DRIVER = shutil.which("chromedriver")
selenium = pytest.importorskip("selenium", reason="selenium is not installed (pip: selenium)")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and DRIVER),
    reason="needs Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)",
)
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--window-size=1400,1500",
)  # fmt: skip
DRAWN = """
const doc = window.Bokeh && Bokeh.documents && Bokeh.documents[0];
if (!doc) return -1;
const src = doc.get_model_by_name("pccx-measured-tasks");
return src ? src.data.lane.length : -1;
"""


@pytest.fixture
def browser(tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    profile = tmp_path / "chromium-profile"
    profile.mkdir()
    options.add_argument(f"--user-data-dir={profile}")
    driver = webdriver.Chrome(service=Service(DRIVER), options=options)
    driver.set_page_load_timeout(60)
    yield driver
    driver.quit()


def _rows_with_bars(png: Path) -> int:
    """Horizontal bands of the picture holding block-coloured pixels: drawn lane rows."""
    from PIL import Image

    colours = {
        tuple(int(c[i : i + 2], 16) for i in (1, 3, 5)) for c in style.BLOCK_COLOURS.values()
    }
    img = Image.open(png).convert("RGB")
    w, h = img.size
    px = img.load()
    hit = [sum(1 for x in range(0, w, 2) if px[x, y] in colours) >= 3 for y in range(h)]
    bands, inside = 0, False
    for flag in hit:
        if flag and not inside:
            bands += 1
        inside = flag
    return bands


def test_browser_draws_lane_rows_during_a_run(lanes_cluster, tiny_ckpt, browser, tmp_path):
    from selenium.webdriver.support.ui import WebDriverWait

    _, client = lanes_cluster
    errors: list[BaseException] = []

    def run() -> None:
        try:
            generate(tiny_ckpt, [2], 3, policy="critical-path", client=client, fuse=True,
                     on_plan=PlanAnnouncer(client))  # fmt: skip
        except BaseException as exc:  # noqa: BLE001 - re-raised in the test
            errors.append(exc)

    before = sum(c["done"] for c in fetch(client)["lanes"].values())
    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    deadline = time.monotonic() + 120
    while sum(c["done"] for c in fetch(client)["lanes"].values()) <= before:
        assert runner.is_alive() and time.monotonic() < deadline, errors
        time.sleep(0.1)
    loaded_during_run = runner.is_alive()
    browser.get(page_url(client))
    drawn = WebDriverWait(browser, 60, poll_frequency=0.2).until(
        lambda d: (d.execute_script(DRAWN) or 0) > 0 and d.execute_script(DRAWN)
    )
    out_dir = Path(os.environ.get("PCCX_SCREENSHOT_DIR") or tmp_path)
    if runner.is_alive():  # the page while the run goes on (the docs show this picture)
        time.sleep(0.6)
        assert browser.save_screenshot(str(out_dir / "dashboard-lanes-mid-run.png"))
    runner.join(180)
    assert not runner.is_alive() and not errors, errors
    assert loaded_during_run, "the run ended before the page was opened"
    time.sleep(2 * 0.5)  # two polls of the page: the last rows streamed in and drawn
    lanes = browser.execute_script(
        'return Bokeh.documents[0].get_model_by_name("pccx-measured").y_range.factors;'
    )
    lanes_with_tasks = set(
        browser.execute_script(
            'return Bokeh.documents[0].get_model_by_name("pccx-measured-tasks").data.lane;'
        )
    )
    assert drawn > 0 and lanes_with_tasks <= set(lanes)
    assert {"gemv0", "sfu0", "dma0", "host0"} <= set(lanes)
    shot = out_dir / "dashboard-lanes.png"
    assert browser.save_screenshot(str(shot))
    # Drawn, not just served: block-coloured bars on screen in several rows (measured rows
    # of the longer tasks, and the planned view's rows; sub-pixel bars do not count).
    assert _rows_with_bars(shot) >= 3


DEVICE_BARS = """
const doc = window.Bokeh && Bokeh.documents && Bokeh.documents[0];
if (!doc) return null;
const src = doc.get_model_by_name("pccx-device-bars");
return src ? Array.from(src.data.side) : null;
"""


def test_browser_draws_planned_beside_device_bars(tiny_ckpt, tiny_ckpt_dir, browser, tmp_path):
    """`run --backend device`'s view: the plan and the fake device's times, lane by lane."""
    from selenium.webdriver.support.ui import WebDriverWait

    from pccx_flow.board.emulator.backend import emulator_graphs
    from pccx_flow.cluster.device_steps import DeviceSteps
    from pccx_flow.cluster.local import device_cluster
    from pccx_flow.cluster.npu_worker import NpuWorker
    from pccx_flow.dashboard.client import DeviceAnnouncer
    from pccx_flow.dashboard.device_page import COLOURS
    from pccx_flow.hardware.profile import load_profile

    profile = load_profile("v002-spec")
    with device_cluster(NpuWorker("fake")) as (_, client, worker):
        steps = DeviceSteps(client, str(tiny_ckpt_dir), profile, worker,
                            on_view=DeviceAnnouncer(client))  # fmt: skip
        graphs = emulator_graphs(tiny_ckpt.config, "pccx", "critical-path", profile)
        generate(tiny_ckpt, [2], 1, policy="critical-path", client=client,
                 graph_for_position=graphs, run_step=steps,
                 on_plan=PlanAnnouncer(client))  # fmt: skip
        browser.get(page_url(client))
        sides = WebDriverWait(browser, 60, poll_frequency=0.2).until(
            lambda d: d.execute_script(DEVICE_BARS)
        )
        summary = browser.execute_script(
            'return Bokeh.documents[0].get_model_by_name("pccx-device-summary").text;'
        )
        out_dir = Path(os.environ.get("PCCX_SCREENSHOT_DIR") or tmp_path)
        shot = out_dir / "dashboard-device.png"
        time.sleep(1.0)  # the page's next poll has drawn the figure
        assert browser.save_screenshot(str(shot))
    assert {"planned", "device"} == set(sides)
    assert "gemv0" in summary and "sfu0" in summary
    view = steps.views[-1]
    assert sides.count("device") == len(view["measured"])
    from PIL import Image

    img = Image.open(shot).convert("RGB")
    seen = {img.getpixel((x, y)) for x in range(0, img.width, 3) for y in range(0, img.height, 3)}
    for colour in COLOURS.values():  # both sides drawn, not only served (bars are thin:
        rgb = tuple(int(colour[i : i + 2], 16) for i in (1, 3, 5))  # edges blend)
        assert any(sum(abs(a - b) for a, b in zip(px, rgb, strict=True)) < 60 for px in seen)


LINK_AT_POINT = """
const a = document.querySelector('#pccx-lanes-link a');
if (!a) return null;
const r = a.getBoundingClientRect();
const hit = document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2);
return [r.width, r.height, hit === a];
"""


def test_browser_shows_the_reports_link_and_it_opens_the_lanes_page(handmade_report, browser,
                                                                   tmp_path):
    """The `--report` page, opened from disk: the link to the lanes page is on screen (in
    the body, not in Bokeh's inlined script), nothing covers it, and a click opens the page."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    report = handmade_report
    browser.get(report.as_uri())
    width, height, on_top = WebDriverWait(browser, 60, poll_frequency=0.2).until(
        lambda d: d.execute_script(LINK_AT_POINT)
    )
    link = browser.find_element(By.CSS_SELECTOR, "#pccx-lanes-link a")
    assert link.is_displayed() and width > 20 and height > 5 and on_top
    assert link.text == "run.lanes.html"
    out_dir = Path(os.environ.get("PCCX_SCREENSHOT_DIR") or tmp_path)
    time.sleep(1.0)  # Bokeh has laid out the report's panels
    assert browser.save_screenshot(str(out_dir / "dashboard-report.png"))
    link.click()
    WebDriverWait(browser, 30, poll_frequency=0.2).until(
        lambda d: (
            "/run.lanes.html#run=" in d.current_url and d.execute_script(DRAWN) not in (None, -1)
        )
    )
    other_run = "return document.getElementById('pccx-other-run') !== null;"
    assert browser.execute_script(other_run) is False  # the report's own run
    browser.get("about:blank")
    browser.get((tmp_path / "run.lanes.html").as_uri() + "#run=0123abcd")  # another run's
    assert browser.execute_script(other_run) is True
    assert "not from the run of the report" in browser.find_element(By.ID, "pccx-other-run").text


def _narrow_task_snapshot() -> dict:
    """Three steps of 0.3 ms tasks spread over 15 s on three lanes, one block per lane: the
    shape of a real CPU run, where tasks are far narrower than a pixel."""
    rows = []
    for step in (1, 2, 3):
        for lane, block in (("gemv0", "ffn"), ("sfu0", "attn"), ("host0", "final")):
            for i in range(10):
                start = 1000.0 + (step - 1) * 5.0 + i * 0.45 + (0.1 if lane == "sfu0" else 0)
                rows.append({"lane": lane, "lane_class": lane[:-1], "step": step,
                             "node": f"L0{i}.{block}.x", "layer": i, "block": block,
                             "op": "GEMV", "kernel": "k", "key": f"k{step}{lane}{i}",
                             "start": start, "stop": start + 0.0003})  # fmt: skip
    counters = {"submitted": 30, "running": 0, "done": 30, "erred": 0, "busy_s": 0.009}
    return {
        "lanes": {lane: dict(counters) for lane in ("gemv0", "sfu0", "host0")},
        "progress": {"layers_done": 10, "n_layers": 10, "tasks_done": 30, "tasks": 30,
                     "step": 3, "steps": 3},
        "errors": [], "rows": rows, "plan": None, "device": None,
    }  # fmt: skip


MEASURED_BOX = """
const doc = window.Bokeh && Bokeh.documents && Bokeh.documents[0];
if (!doc) return null;
const fig = doc.get_model_by_name("pccx-measured");
const view = fig && Bokeh.index.find_one(fig);
if (!view) return null;
const r = view.el.getBoundingClientRect();
const f = view.frame.bbox;
return [r.left + f.left, r.top + f.top, f.width, f.height];
"""


def test_browser_shows_every_measured_task_with_a_visible_width(browser, tmp_path):
    """A 0.3 ms task in a 15 s chart is 0.03 px: drawn as is, the chart was nearly white.
    On screen each lane now shows each of its tasks at least a few pixels wide."""
    from PIL import Image
    from selenium.webdriver.support.ui import WebDriverWait

    from pccx_flow.dashboard.page import MIN_BAR_PX, lanes_html

    page = tmp_path / "lanes.html"
    snapshot = _narrow_task_snapshot()
    page.write_text(lanes_html(snapshot), encoding="utf-8")
    browser.get(page.as_uri())
    left, top, width, height = WebDriverWait(browser, 60, poll_frequency=0.2).until(
        lambda d: d.execute_script(MEASURED_BOX)
    )
    time.sleep(0.5)
    shot = tmp_path / "narrow.png"
    assert browser.save_screenshot(str(shot))
    img = Image.open(shot).convert("RGB")
    scale = img.width / browser.execute_script("return window.innerWidth")
    box = [int(v * scale) for v in (left, top, left + width, top + height)]
    frame = img.crop(box)
    for block, n_tasks in (("ffn", 30), ("attn", 30), ("final", 30)):
        rgb = tuple(int(style.block_colour(block)[i : i + 2], 16) for i in (1, 3, 5))
        columns = {
            x for x in range(frame.width) for y in range(0, frame.height, 2)
            if sum(abs(a - b) for a, b in zip(frame.getpixel((x, y)), rgb, strict=True)) < 40
        }  # fmt: skip
        # each task's tick is MIN_BAR_PX CSS pixels wide (edges blend): most columns show
        assert len(columns) >= n_tasks * (MIN_BAR_PX - 1) * scale, (block, len(columns))
    marks = browser.execute_script(
        'return Array.from(Bokeh.documents[0].get_model_by_name("pccx-step-marks").data.x);'
    )
    assert len(marks) == 3  # one dashed line where each step starts

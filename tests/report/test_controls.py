"""The report's controls in headless Chromium: the axis-scale buttons, and the front table's sort and CSV.

The colour-by control is driven in test_browser.py. Skips when chromium is not installed.
"""

from __future__ import annotations

import csv
import io
import json
import re
import urllib.parse
from pathlib import Path

import pytest

from dse.report.html import write_html_report

from .browser import Browser, find_chromium
from .runs import write_run
from .test_browser import WAIT_FOR_PLOTS

CHROMIUM = find_chromium()
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None, reason="no chromium on PATH: apt-get install -y chromium"
)

MENU_BUTTON = """
(() => {
  const b = [...document.querySelectorAll('#pareto-plot .updatemenu-button')]
    .find((g) => g.textContent === %s);
  b.scrollIntoView({block: 'center'});
  const r = b.getBoundingClientRect();
  return {x: r.left + r.width / 2, y: r.top + r.height / 2};
})()
"""

# The table as the page shows it now: header texts, each row's cells (data-v when set, else text).
TABLE_STATE = """
(() => {
  const t = document.getElementById('front-table');
  const cell = (c) => (c.dataset.v !== undefined ? c.dataset.v : c.textContent);
  return {head: [...t.tHead.rows[0].cells].map((c) => c.textContent),
          sort: [...t.tHead.rows[0].cells].map((c) => c.getAttribute('aria-sort')),
          rows: [...t.tBodies[0].rows].map((r) => [...r.cells].map(cell))};
})()
"""


def _click_header(b: Browser, title: str) -> dict:
    b.evaluate(
        "[...document.querySelectorAll('#front-table th')]"
        f".find((th) => th.textContent === {json.dumps(title)}).click()"
    )
    return b.evaluate(TABLE_STATE)


def _column(state: dict, title: str) -> list[float]:
    k = state["head"].index(title)
    return [float(r[k]) for r in state["rows"]]


def test_front_table_puts_parameters_before_metrics(small_run: Path) -> None:
    page = write_html_report(small_run).read_text(encoding="utf-8")
    table = page[page.index('<table id="front-table">') :]
    head = table[: table.index("</thead>")]
    titles = [cell.rsplit(">", 1)[1] for cell in head.split("</th>")[:-1]]
    params = ["gpu.num_sms", "sm_clock_mhz (MHz)", "precision", "gpu.memory.technology"]
    assert titles[:2] == ["point", "selected"] and set(params) <= set(titles[2 : 2 + len(params) + 2])
    assert max(titles.index(t) for t in params) < titles.index("e2e latency (s)")
    assert not any(t.startswith(("metric.", "param.")) for t in titles)
    assert 'id="front-csv"' in page and 'download="front.csv"' in page


@needs_chromium
def test_axis_scale_buttons_switch_the_axis_type(tmp_path: Path) -> None:
    report = write_html_report(write_run(tmp_path, 300))
    assert CHROMIUM is not None
    with Browser(CHROMIUM, width=1280, height=900) as b:
        b.goto(report.resolve().as_uri())
        b.evaluate(WAIT_FOR_PLOTS)
        axis_type = "document.getElementById('pareto-plot')._fullLayout.%s.type"
        for axis in ("xaxis", "yaxis"):
            before = b.evaluate(axis_type % axis)
            other = "linear" if before == "log" else "log"
            target = b.evaluate(MENU_BUTTON % json.dumps(f"{axis[0]} {other}"))
            b.click(target["x"], target["y"])
            b.evaluate("new Promise((r) => setTimeout(r, 300))")
            assert b.evaluate(axis_type % axis) == other
            target = b.evaluate(MENU_BUTTON % json.dumps(f"{axis[0]} {before}"))
            b.click(target["x"], target["y"])
            b.evaluate("new Promise((r) => setTimeout(r, 300))")
            assert b.evaluate(axis_type % axis) == before
        assert b.console_errors == [], b.console_errors


@needs_chromium
def test_front_table_sorts_and_downloads_its_rows(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, 300)
    report = write_html_report(run_dir)
    url = report.resolve().as_uri()
    front_size = json.loads((run_dir / "summary.json").read_text())["front_size"]
    assert CHROMIUM is not None
    with Browser(CHROMIUM, width=1280, height=900) as b:
        b.goto(url)
        start = b.evaluate(TABLE_STATE)
        assert len(start["rows"]) == front_size > 5
        energy = next(t for t in start["head"] if t.startswith("energy per output token"))

        # First sorted by latency, so energy falls down the rows; one click sorts it up, a second down.
        up = _click_header(b, energy)
        assert _column(up, energy) == sorted(_column(start, energy)) != _column(start, energy)
        assert up["sort"][up["head"].index(energy)] == "ascending"
        down = _click_header(b, energy)
        assert _column(down, energy) == sorted(_column(start, energy), reverse=True)
        assert down["sort"][down["head"].index(energy)] == "descending"

        # A text column sorts alphabetically, digit runs as numbers (fp8 before fp16); numeric parameters
        # numerically.
        k = up["head"].index("precision")
        natural = sorted(
            (r[k] for r in start["rows"]),
            key=lambda s: [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)],
        )
        assert [r[k] for r in _click_header(b, "precision")["rows"]] == natural
        clocks = _column(_click_header(b, "sm_clock_mhz (MHz)"), "sm_clock_mhz (MHz)")
        assert clocks == sorted(clocks)

        # The CSV link holds the header and exactly the table's rows, in the order shown now.
        state = b.evaluate(TABLE_STATE)
        href = b.evaluate("document.getElementById('front-csv').href")
        assert href.startswith("data:text/csv;charset=utf-8,")
        text = urllib.parse.unquote(href.split(",", 1)[1])
        lines = text.splitlines()
        assert len(lines) == front_size + 1
        parsed = list(csv.reader(io.StringIO(text)))
        assert parsed[0] == state["head"]
        assert parsed[1:] == state["rows"]

        assert b.console_errors == [], b.console_errors
        assert b.requests == [url], b.requests

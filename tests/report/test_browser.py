"""The report in a real headless browser (Debian's chromium over the DevTools pipe; see browser.py).

Loads report.html from file://, then checks: no console errors, no request other than the file itself,
the scatter holds as many points as the log, hovering a point shows its parameters, the colour-by control
recolours the front. Saves screenshots under the test's tmp dir. Skips when chromium is not installed
(`apt-get install -y chromium`; .ci/run installs it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dse.report.html import write_html_report

from .browser import Browser, find_chromium
from .runs import write_run

CHROMIUM = find_chromium()
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="no chromium on PATH: apt-get install -y chromium")

WAIT_FOR_PLOTS = """
new Promise((resolve, reject) => {
  const t0 = Date.now();
  (function poll() {
    const divs = [...document.querySelectorAll('.js-plotly-plot')];
    if (divs.length && divs.every((d) => d._fullLayout && d.querySelector('.main-svg'))) {
      return setTimeout(() => resolve(divs.length), 300);
    }
    if (Date.now() - t0 > 15000) return reject(new Error('plots did not render'));
    setTimeout(poll, 50);
  })();
})
"""

SCATTER_COUNTS = """
(() => {
  // The first plot on the page is the scatter; _fullData has the decoded x arrays.
  const gd = document.querySelector('.js-plotly-plot');
  return gd._fullData.map((t) => ({name: t.name, type: t.type, n: t.x ? t.x.length : 0}));
})()
"""

FRONT_POINT_PIXEL = """
(() => {
  const gd = document.getElementById('pareto-plot');
  // _fullData holds decoded arrays (gd.data may keep plotly.py's base64 `bdata` form).
  const t = gd._fullData.find((tr) => tr.name.startsWith('Pareto front'));
  const k = 0;  // the best-latency end of the front
  const xa = gd._fullLayout.xaxis, ya = gd._fullLayout.yaxis, box = gd.getBoundingClientRect();
  return {x: box.left + xa._offset + xa.c2p(t.x[k]), y: box.top + ya._offset + ya.c2p(t.y[k]),
          id: t.customdata[k][0]};
})()
"""


def _log_counts(run_dir: Path) -> tuple[int, int]:
    """(points in the log, points with both objective values)."""
    total = with_values = 0
    for line in (run_dir / "points.jsonl").read_text().splitlines():
        rec = json.loads(line)
        total += 1
        m = rec["metrics"]
        with_values += m.get("e2e_latency_s") is not None and m.get("energy_per_output_token_j") is not None
    return total, with_values


def test_report_in_headless_chromium(tmp_path: Path, record_property: pytest.RecordProperty) -> None:
    run_dir = write_run(tmp_path, 2000, breakdowns=True)
    report = write_html_report(run_dir, color_by="sm_clock_mhz")
    url = report.resolve().as_uri()
    n_log, n_with_values = _log_counts(run_dir)
    shot = tmp_path / "report.png"
    full = tmp_path / "report-full.png"

    assert CHROMIUM is not None
    with Browser(CHROMIUM, width=1280, height=900) as b:
        b.goto(url)
        assert b.evaluate(WAIT_FOR_PLOTS) == 5

        traces = b.evaluate(SCATTER_COUNTS)
        drawn = {t["name"]: t["n"] for t in traces if t["name"] != "front line"}
        assert all(t["type"] == "scattergl" for t in traces)
        assert sum(drawn.values()) == n_with_values
        failed = n_log - n_with_values
        text = b.evaluate("document.body.innerText")
        assert f"{failed} point(s) have no objective values" in text
        assert "WebGL is not supported" not in text  # plotly's message when scattergl cannot draw
        assert b.evaluate("document.querySelectorAll('#pareto-plot canvas').length") > 0

        target = b.evaluate(FRONT_POINT_PIXEL)
        b.mouse_move(target["x"] - 30, target["y"] - 30)
        b.mouse_move(target["x"], target["y"])
        hover = b.evaluate(
            "new Promise((r) => setTimeout(() => r(document.querySelector('#pareto-plot .hoverlayer')"
            ".textContent), 300))"
        )
        assert "(front)" in hover, hover
        for label in ("gpu.num_sms = ", "sm_clock_mhz (MHz) = ", "precision = ", "gpu.memory.technology = "):
            assert label in hover, hover
        assert "avg power (W):" in hover and "workload.seq_len = 4096" in hover
        b.screenshot(shot)

        # The colour-by control recolours the front, and the dominated cloud when ticked.
        colored = b.evaluate(
            "(() => { const s = document.getElementById('color-by'); s.value = 'precision';"
            " s.dispatchEvent(new Event('change'));"
            " const c = document.getElementById('color-dominated'); c.checked = true;"
            " c.dispatchEvent(new Event('change'));"
            " const gd = document.getElementById('pareto-plot');"
            " const f = gd.data.find((tr) => tr.name.startsWith('Pareto front'));"
            " const d = gd.data.find((tr) => tr.name === 'dominated');"
            " return {front: f.marker.color.length, ticks: f.marker.colorbar.ticktext.join(','),"
            "         dominated: d.marker.color.length}; })()"
        )
        assert colored == {
            "front": drawn[next(k for k in drawn if k.startswith("Pareto front"))],
            "ticks": "bf16,fp8,fp16",
            "dominated": drawn["dominated"],
        }
        b.screenshot(full, full_page=True)

        assert b.console_errors == [], b.console_errors
        assert b.requests == [url], b.requests

    record_property("screenshot", str(shot))
    print(f"\nscreenshots: {shot} {full}")
    assert shot.stat().st_size > 20_000

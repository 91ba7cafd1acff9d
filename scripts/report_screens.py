"""Save one PNG per section of a run's HTML report, in headless Chromium (`make report-screens`).

    .venv/bin/python scripts/report_screens.py results/report-screens            # newest report.html under it
    .venv/bin/python scripts/report_screens.py results/<study>/<run>/report.html out/

Writes `<out>/<section>.png` for pareto, front (the table), parcoords, breakdown, bottleneck, dvfs and
settings, and prints each file's size. The browser client is tests/report/browser.py, loaded by path; the
page loads nothing from the network (the script fails if it requests anything but the file, or logs an error).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

SECTIONS = ("pareto", "front", "parcoords", "breakdown", "bottleneck", "dvfs", "settings")
BROWSER_PY = Path(__file__).resolve().parent.parent / "tests" / "report" / "browser.py"

WAIT_FOR_PLOTS = """
new Promise((resolve, reject) => {
  const t0 = Date.now();
  (function poll() {
    const divs = [...document.querySelectorAll('.js-plotly-plot')];
    if (divs.every((d) => d._fullLayout && d.querySelector('.main-svg'))) return setTimeout(resolve, 500);
    if (Date.now() - t0 > 20000) return reject(new Error('plots did not render'));
    setTimeout(poll, 50);
  })();
})
"""


def _browser_module():  # noqa: ANN202 - a module loaded by path
    spec = importlib.util.spec_from_file_location("report_browser", BROWSER_PY)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {BROWSER_PY}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _find_report(path: Path) -> Path:
    if path.is_file():
        return path
    reports = sorted(path.rglob("report.html"), key=lambda p: p.stat().st_mtime)
    if not reports:
        raise SystemExit(f"no report.html under {path}")
    return reports[-1]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("report", type=Path, help="a report.html, or a folder to search for the newest one")
    ap.add_argument("out", type=Path, nargs="?", help="where to write the PNGs (default: the folder given)")
    args = ap.parse_args(argv)
    report = _find_report(args.report)
    out = args.out or (args.report if args.report.is_dir() else report.parent)
    out.mkdir(parents=True, exist_ok=True)
    browser = _browser_module()
    binary = browser.find_chromium()
    if binary is None:
        print("no chromium on PATH (apt-get install -y chromium)", file=sys.stderr)
        return 2
    url = report.resolve().as_uri()
    with browser.Browser(binary, width=1280, height=900, timeout_s=60.0) as b:
        b.goto(url)
        b.evaluate(WAIT_FOR_PLOTS)
        for section in SECTIONS:
            b.evaluate(f"document.getElementById('{section}').scrollIntoView()")
            b.evaluate("new Promise((r) => setTimeout(r, 200))")
            path = b.screenshot(out / f"{section}.png", selector=f"#{section}")
            print(f"{path}  {path.stat().st_size:,} bytes")
        problems = b.console_errors + [r for r in b.requests if r != url]
    print(f"report: {report}")
    if problems:
        print("console errors or network requests:", *problems, sep="\n  ", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Reports of a search run: one offline, self-contained HTML page (Plotly) and a localhost server.

    frames        run directory -> trials DataFrame, summary, objectives, parameters (`load_run`)
    display       SI names -> human units (ms, mJ, W, GB, MHz) for labels and hover
    pareto_plot   `build_pareto_info(trials, objectives) -> ParetoInfo`, `plot_pareto(info) -> Figure`
    figures       parallel coordinates, energy breakdowns, DVFS curves
    html          `write_html_report(run_dir, *, color_by, out, breakdown_fn) -> Path`
    serve         `serve_report(run_dir, port, open_browser)` on 127.0.0.1

plotly is imported only here, behind a `try_import` guard: importing this package works without it, and
the functions that draw raise one error with the install command.
"""

from dse.report.figures.pareto import ParetoInfo, build_pareto_info, plot_pareto
from dse.report.frames import RunData, load_run
from dse.report.html import write_html_report
from dse.report.serve import serve_report

__all__ = [
    "ParetoInfo",
    "RunData",
    "build_pareto_info",
    "load_run",
    "plot_pareto",
    "serve_report",
    "write_html_report",
]

"""Text users wrote (study names, parameter values, reasons) is escaped wherever the report shows it."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from dse.report.html import script_json, write_html_report

from .browser import Browser, find_chromium
from .runs import write_run

HOSTILE = "</script><script>window.__pwned = 1</script><img src=x onerror=window.__pwned=2>\u2028&amp;"


def hostile_run(root: Path) -> Path:
    """A run whose study name, a categorical parameter's values and the infeasible reasons are hostile."""
    run_dir = write_run(root, 200, breakdowns=False)
    trials = pd.read_parquet(run_dir / "trials.parquet")
    trials.loc[trials["param.precision"] == "fp8", "param.precision"] = HOSTILE
    trials.loc[~trials["feasible"], "reason"] = HOSTILE
    trials.to_parquet(run_dir / "trials.parquet", index=False)
    summary = json.loads((run_dir / "summary.json").read_text())
    summary["study"] = HOSTILE
    summary["stop_reason"] = HOSTILE
    (run_dir / "summary.json").write_text(json.dumps(summary))
    return run_dir


def test_script_json_cannot_close_its_element() -> None:
    text = script_json({"name": HOSTILE})
    assert "<" not in text and ">" not in text and "&" not in text and "\u2028" not in text
    assert json.loads(text) == {"name": HOSTILE}
    with pytest.raises(ValueError):
        script_json({"x": float("nan")})  # strict: a NaN here is a bug, not a silent 'NaN' in the page


def test_hostile_text_adds_no_element_to_the_page(tmp_path: Path) -> None:
    benign = write_html_report(write_run(tmp_path / "a", 200)).read_text(encoding="utf-8")
    page = write_html_report(hostile_run(tmp_path / "b")).read_text(encoding="utf-8")
    assert page.count("<script") == benign.count("<script")
    assert "<img" not in page and "window.__pwned = 1</script>" not in page


@pytest.mark.skipif(find_chromium() is None, reason="no chromium on PATH: apt-get install -y chromium")
def test_hostile_text_does_not_execute_in_chromium(tmp_path: Path) -> None:
    report = write_html_report(hostile_run(tmp_path))
    chromium = find_chromium()
    assert chromium is not None
    with Browser(chromium, width=1024, height=768) as b:
        b.goto(report.resolve().as_uri())
        b.evaluate("new Promise((r) => setTimeout(r, 1500))")
        assert b.evaluate("typeof window.__pwned") == "undefined"
        assert HOSTILE.split("<img")[0] in b.evaluate("document.body.innerText")  # shown, as text


def test_the_header_says_how_the_study_served(tmp_path: Path) -> None:
    import yaml

    run_dir = write_run(tmp_path, 60)
    study = yaml.safe_load((run_dir / "study.resolved.yaml").read_text())
    study |= {
        "model": "llama-3.1-8b",
        "workload": {"mode": "request_rate", "request_rate_per_s": 4.0, "input_tokens": 512,
                     "output_tokens": 64, "engine": "sglang", "length_dist": "exponential"},
        "constraints": ["ttft_p90_s <= 0.5", "avg_power_w <= 700"],
    }  # fmt: skip
    (run_dir / "study.resolved.yaml").write_text(yaml.safe_dump(study))
    page = write_html_report(run_dir).read_text(encoding="utf-8")
    line = page.split('<p class="serving">', 1)[1].split("</p>", 1)[0]
    assert "mode: request_rate (Poisson arrivals), request_rate_per_s 4.0" in line
    assert "sglang engine" in line and "512 in / 64 out (exponential)" in line
    assert "SLO: ttft_p90_s &lt;= 0.5" in line and "avg_power_w" not in line


def test_an_unwritable_report_path_is_one_error_and_leaves_nothing(tmp_path: Path) -> None:
    """A directory, or a path under a file, as the report: one ConfigError (exit 2), no `*.tmp` left (it was a
    traceback and a 5 MB `/tmp.tmp`)."""
    from dse.errors import ConfigError

    run_dir = write_run(tmp_path / "runs", 40, breakdowns=False)
    with pytest.raises(ConfigError, match="is a directory"):
        write_html_report(run_dir, out=tmp_path)
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    with pytest.raises(ConfigError, match="a-file is a file, not a directory"):
        write_html_report(run_dir, out=blocker / "report.html")
    assert not list(tmp_path.glob("*.tmp")) and not list(tmp_path.parent.glob(f"{tmp_path.name}.tmp"))


def test_breakdown_figures_escape_names_and_labels() -> None:
    """Operator names carry the model's path and labels the study's text: Plotly reads tags in trace names
    and axis labels, and `%{...}` in a hover template, so both are escaped and the template only refers to
    the name (a `<b>"m&x` model directory bolded the legend, session 33)."""
    from dse.report.figures.breakdown import BreakdownRow, plot_breakdowns

    op = 'decode/<b>"m&x%{x}/layer[0-15]/mlp'
    rows = [BreakdownRow(label="<i>run", point_id="7", by_module={"dram": 1.0}, by_op={op: 2.0})]
    for fig in plot_breakdowns(rows):
        for trace in fig.data:
            assert "<" not in trace.name and "<" not in "".join(trace.y)
            assert trace.hovertemplate.startswith("%{fullData.name}") and "m&x" not in trace.hovertemplate
    names = [t.name for t in plot_breakdowns(rows)[1].data]
    # Plotly decodes &amp; &lt; &gt; but not &quot;: quotes stay as they are (they showed as "&quot;")
    assert any('&lt;b&gt;"m&amp;x' in n for n in names)


def test_sweep_compare_and_roofline_figures_escape_user_text() -> None:
    """A GPU file path or a model path reaches the legend, the hover and the roofline's kernel names."""
    from dse.report.figures.roofline import plot_roofline
    from dse.report.figures.sweep import plot_compare, plot_sweep

    row = {"params": {"gpu": '<b>"g%{x}.yaml'}, "reason": None, "status": "ok", "metrics": {}}
    rows = [
        {**row, "metrics": {"tpot_s": 0.01, "ttft_s": 0.1}},
        {**row, "metrics": {"tpot_s": 0.02, "ttft_s": 0.2}},
    ]
    fig = plot_compare(rows, title="<a href='x'>t</a>")
    for trace in fig.data:
        assert trace.name.startswith('&lt;b&gt;"g') and "%{x}.yaml" not in trace.hovertemplate
    assert "<" not in fig.layout.title.text + fig.layout.yaxis.title.text  # a model path, a GPU file name
    sweep = plot_sweep([{**rows[0], "params": {"sm_clock_mhz": 1000.0}}], ["sm_clock_mhz"], title="<b>m</b>")
    assert "<" not in sweep.layout.title.text
    kernel = {"name": "decode/<i>m/attn", "kind": "gemm", "phase": "decode", "flop": 1e9, "dram_bytes": 1e6,
              "latency_s": 1e-5, "count": 1, "bound_by": "tensor"}  # fmt: skip
    roofs = {"tensor_peak_flop_per_s": 1e15, "cuda_peak_flop_per_s": 6e13, "dram_bw_bytes_per_s": 3e12}
    fig = plot_roofline({"kernels": [kernel], **roofs}, "roofline")
    assert all("<i>" not in str(t.customdata) for t in fig.data)

"""The HTML report: self-contained, complete, and small enough for 50,000 points."""

from __future__ import annotations

import base64
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from dse.report.html import write_html_report

from .runs import write_run

EXTERNAL = re.compile(r"<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)\s*=\s*[\"']?(?:https?:)?//", re.I)


def _figure_json(page: str, div_id: str) -> list[dict]:
    """The `data` argument of the Plotly.newPlot call for one div."""
    start = page.index(f'Plotly.newPlot(                        "{div_id}",')
    arr = page[start:].split(",", 1)[1].lstrip()
    data, _ = json.JSONDecoder().raw_decode(arr)
    return data


def test_report_is_self_contained_and_complete(small_run: Path) -> None:
    path = write_html_report(small_run)
    assert path == small_run / "report.html"
    page = path.read_text(encoding="utf-8")
    assert not EXTERNAL.search(page), "the page must not load anything from the network"
    assert page.count("<script") - page.count("<script>") >= 1  # plotly.js inlined in <head>
    assert (
        page.index("</head>") > len(page) // 10
        and "cdn.plot.ly/plotly" not in page[: page.index("</head>")][:200]
    )
    assert page.count("Plotly.newPlot(") == 5  # scatter, parcoords, 2 breakdowns, DVFS
    for section in ("pareto", "front", "parcoords", "breakdown", "bottleneck", "dvfs", "settings"):
        assert f'<section id="{section}">' in page
    assert "point budget reached (300 points)" in page
    data = _figure_json(page, "pareto-plot")
    assert [t["name"] for t in data][:3] == ["dominated", "infeasible", "front line"]
    assert any('"ticktext":["bf16","fp8","fp16"]' in chunk for chunk in [page.replace(" ", "")])
    table = page[page.index('id="front-table"') :]
    table = table[: table.index("</table>")]
    front_size = json.loads((small_run / "summary.json").read_text())["front_size"]
    assert table.count("<tr") == front_size + 1
    assert "knee" in table


def test_color_by_and_out(small_run: Path, tmp_path: Path) -> None:
    out = tmp_path / "elsewhere" / "r.html"
    path = write_html_report(small_run, color_by="gpu.memory.technology", out=out)
    assert path == out and out.is_file() and not (small_run / "report.html").exists()
    page = out.read_text(encoding="utf-8")
    assert '<option value="gpu.memory.technology" selected>' in page


def test_breakdown_fn_is_called_for_selected_front_points(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, 300)
    calls: list[dict] = []

    def breakdown_fn(params: dict) -> dict:
        calls.append(params)
        if len(calls) == 2:
            raise RuntimeError("predictor blew up")
        return {
            "by_module": {"dram": 1.0, "tensor": 2.0, "idle": 0.5},
            "by_op": {
                f"decode/llama-3.1-8b/layer[{i}]/{'attn' if i % 2 else 'mlp'}/proj": 0.1 * i
                for i in range(14)
            },
        }

    page = write_html_report(run_dir, breakdown_fn=breakdown_fn).read_text(encoding="utf-8")
    assert 2 <= len(calls) <= 3
    assert all(type(c["gpu.num_sms"]) is int and c["workload.seq_len"] == 4096 for c in calls)
    assert "predictor blew up" in page  # the failure is reported, the report still written
    assert "breakdown-module-plot" in page and "breakdown-op-plot" in page
    ops = _figure_json(page, "breakdown-op-plot")
    assert len(ops) == 11 and ops[-1]["name"] == "other ops"  # 10 largest + the pooled rest
    assert ops[0]["name"] == "layer[13]/attn/proj"  # components every name shares are dropped


def test_killed_run_without_clock_or_breakdowns(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, 200, parquet=False, summary=False, clock_varies=False)
    page = write_html_report(run_dir).read_text(encoding="utf-8")
    assert "No summary.json" in page and "points.jsonl" in page
    assert "not a varying parameter" in page and "dvfs-plot" not in page
    assert "No energy breakdown" in page
    assert "front was computed for this report" in page


def test_50k_points_stay_under_15_mb(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, 50_000, jsonl=False)
    start = time.perf_counter()
    path = write_html_report(run_dir)
    elapsed = time.perf_counter() - start
    size_mb = path.stat().st_size / 1e6
    print(f"50k-point report: {size_mb:.2f} MB in {elapsed:.1f} s")
    assert size_mb < 15.0
    data = _figure_json(path.read_text(encoding="utf-8"), "pareto-plot")
    assert {t["type"] for t in data} == {"scattergl"}


def test_without_plotly_the_package_imports_and_says_how_to_install(small_run: Path) -> None:
    code = (
        "import sys; sys.modules['plotly'] = None\n"
        "import dse.report as r\n"
        "from dse.errors import DseError\n"
        "try:\n"
        f"    r.write_html_report({str(small_run)!r})\n"
        "except DseError as exc:\n"
        "    print('ERR', exc)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert "ERR" in res.stdout and "pip install" in res.stdout, res.stdout + res.stderr
    assert not (small_run / "report.html").exists()


def test_run_where_every_point_failed(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    recs = [
        {
            "point_id": f"p{i}",
            "params": {"gpu.num_sms": 100 + i, "sm_clock_mhz": 1000 + 15 * i, "precision": "fp8"},
            "metrics": {},
            "feasible": False,
            "reason": "error",
            "error": f"ConfigError: no power coefficients for point {i}",
            "t_eval_s": 0.001,
            "seq": i,
        }
        for i in range(20)
    ]
    (run_dir / "points.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    summary = {"objectives": [{"metric": "e2e_latency_s", "direction": "minimize"}, {"metric": "energy_j"}]}
    (run_dir / "summary.json").write_text(json.dumps(summary | {"stop_reason": "point budget reached"}))
    page = write_html_report(run_dir).read_text(encoding="utf-8")
    assert "No point has objective values" in page
    assert "No feasible point to draw DVFS curves from" in page  # the clock varies, but nothing to draw
    assert "ConfigError: no power coefficients for point #</td><td>20</td>" in page  # pooled by pattern


def test_bottleneck_section_tabulates_bounds_and_draws_a_roofline(tmp_path: Path) -> None:
    run_dir = write_run(tmp_path, 300)
    roofs = {"tensor_peak_flop_per_s": 1e15, "cuda_peak_flop_per_s": 6e13, "dram_bw_bytes_per_s": 3e12}
    kernels = [
        {"phase": "prefill", "name": "m/gemm", "kind": "gemm", "count": 32, "latency_s": 1e-3,
         "flop": 8e11, "dram_bytes": 2e8, "bound_by": "tensor"},
        {"phase": "decode", "name": "m/attn", "kind": "attention_decode", "count": 32, "latency_s": 5e-5,
         "flop": 1e8, "dram_bytes": 1.5e8, "bound_by": "dram"},
        {"phase": "decode", "name": "m/copy", "kind": "elementwise", "count": 1, "latency_s": 1e-6,
         "flop": 0.0, "dram_bytes": 1e6, "bound_by": "dram"},
    ]  # fmt: skip

    def breakdown_fn(params: dict) -> dict:
        return {
            "by_module": {"dram": 1.0},
            "by_op": {"decode/m/attn": 1.0},
            "bound_by": {"decode": {"bound_by": "dram", "shares": {"dram": 0.9, "cuda": 0.1}}},
            "roofline": {**roofs, "kernels": kernels},
        }

    page = write_html_report(run_dir, breakdown_fn=breakdown_fn).read_text(encoding="utf-8")
    assert '<section id="bottleneck">' in page and 'href="#bottleneck"' in page
    assert "decode: dram (dram 90%, cuda 10%)" in page
    traces = _figure_json(page, "roofline-plot")
    names = [t["name"] for t in traces]
    assert names[:2] == ["Tensor-Core roof", "CUDA-core roof"]
    assert "gemm (prefill)" in names and "attention_decode (decode)" in names
    assert not any("elementwise" in n for n in names)  # no FLOPs: cannot sit on a log axis
    gemm = traces[names.index("gemm (prefill)")]
    assert gemm["x"] == [4000.0] and gemm["y"] == [8e14]  # FLOP/byte and FLOP/s of the kernel
    roof_y = traces[0]["y"]  # plotly ships numpy arrays as typed base64
    roof_y = (
        np.frombuffer(base64.b64decode(roof_y["bdata"]), roof_y["dtype"])
        if isinstance(roof_y, dict)
        else roof_y
    )
    assert max(roof_y) == 1e15  # the Tensor-Core peak caps the roof


def test_no_bottleneck_view_without_breakdowns(tmp_path: Path) -> None:
    page = write_html_report(write_run(tmp_path, 100)).read_text(encoding="utf-8")
    assert '<section id="bottleneck">' in page and "roofline-plot" not in page


def test_a_training_studys_report_says_what_it_trains_and_shows_each_metric_once(tmp_path: Path) -> None:
    """A newcomer's findings: the training study's header read "serving llama-3.1-8b: mode: training ...
    vllm engine; ? in / ? out", and the clock showed twice (effective_clock_hz and its _mhz twin)."""
    from dse.search.runner import run_study

    study = Path(__file__).resolve().parents[2] / "studies" / "training.yaml"
    summary = run_study(study, out=tmp_path, n_points=4, executor="serial")
    page = write_html_report(Path(summary.run_dir)).read_text(encoding="utf-8")
    line = page.split('<p class="serving">', 1)[1].split("</p>", 1)[0]
    assert line.startswith("training llama-3.1-8b: 8 GPUs") and "engine" not in line and "?" not in line
    assert "precision searched" in line and "bf16" not in line  # the study searches bf16 and fp8
    table = page[page.index('<table id="front-table">') :]
    titles = [cell.rsplit(">", 1)[1] for cell in table[: table.index("</thead>")].split("</th>")[:-1]]
    assert titles.count("effective clock (MHz)") == 1 and len(titles) == len(set(titles))


def test_reason_counts_pool_numbers_but_keep_names() -> None:
    """Reasons that differ only in their numbers pool into one row; digits inside names (ttft_p90_s,
    h100-sxm) are part of the name, not numbers (they were shown as ttft_p#_s)."""
    import pandas as pd

    from dse.report.settings import _counts_table

    reasons = pd.Series(
        ["ttft_p90_s 0.41 violates <= 0.3", "ttft_p90_s 0.52 violates <= 0.3", "h100-sxm: no fit at 2 GPUs"]
    )
    html = _counts_table("infeasible", reasons)
    assert "ttft_p90_s # violates &lt;= #" in html and "<td>2</td>" in html
    assert "h100-sxm: no fit at # GPUs" in html and "p#" not in html


def test_front_table_shows_a_repeated_column_once(small_run: Path) -> None:
    """The logged `sm_clock_hz` repeats the searched `sm_clock_mhz` (same MHz on every row): one column.
    The effective clock (2% lower in these runs) is different data and stays."""
    page = write_html_report(small_run).read_text(encoding="utf-8")
    table = page[page.index('<table id="front-table">') : page.index("</thead>", page.index("front-table"))]
    heads = re.findall(r"<th[^>]*>(.*?)</th>", table)
    assert "sm_clock_mhz (MHz)" in heads and "sm clock (MHz)" not in heads
    assert "effective clock (MHz)" in heads
    assert "a percentile equal to its mean on every row, or the logged clock" in page


def test_a_static_studys_header_names_no_engine_as_such() -> None:
    """A static batch without an engine runs one kernel per operator; the header said "none engine"."""
    from types import SimpleNamespace

    from dse.report.html import _serving_line

    study = {"model": "llama-3.1-8b", "workload": {"batch": 32, "input_tokens": 1024, "output_tokens": 256}}
    line = _serving_line(SimpleNamespace(study=study))  # type: ignore[arg-type]
    assert "no serving engine (one kernel per operator)" in line and "none engine" not in line
    vllm = {**study, "workload": {**study["workload"], "engine": "vllm"}}
    assert "; vllm engine;" in _serving_line(SimpleNamespace(study=vllm))  # type: ignore[arg-type]


def test_a_static_studys_header_says_a_searched_batch_or_engine_is_searched() -> None:
    """h100_gddr7.yaml writes `batch: 32` as the workload's default and searches batch 8 and 64: the header
    read "batch 32", a batch no point ran; an engine searched read as the workload's one likewise."""
    from types import SimpleNamespace

    from dse.report.html import _serving_line

    workload = {"batch": 32, "input_tokens": 1024, "output_tokens": 256, "engine": "vllm"}
    space = {"batch": {"values": [8, 64]}, "eng": {"path": "engine", "values": ["none", "trtllm"]}}
    line = _serving_line(SimpleNamespace(study={"model": "m", "workload": workload, "space": space}))  # type: ignore[arg-type]
    assert "batch searched; engine searched;" in line and "32" not in line and "vllm" not in line
    kept = _serving_line(SimpleNamespace(study={"model": "m", "workload": workload, "space": {}}))  # type: ignore[arg-type]
    assert "batch 32; vllm engine;" in kept


def test_a_percentile_equal_to_its_mean_shows_once_unless_a_constraint_names_it(tmp_path: Path) -> None:
    """A static batch's tpot_p90_s equals tpot_s on every row: one column, unless the study constrains it
    (a reviewer found a constraint's column hidden). Other columns stay even where their values happen to
    equal another's (the effective clock of an unthrottled DVFS front)."""
    import pandas as pd
    import yaml

    run_dir = write_run(tmp_path, 100)
    trials = pd.read_parquet(run_dir / "trials.parquet")
    trials["metric.tpot_p90_s"] = trials["metric.tpot_s"]
    trials["metric.effective_clock_mhz"] = trials["param.sm_clock_mhz"]
    trials.to_parquet(run_dir / "trials.parquet", index=False)

    def heads() -> list[str]:
        page = write_html_report(run_dir).read_text(encoding="utf-8")
        table = page[
            page.index('<table id="front-table">') : page.index("</thead>", page.index("front-table"))
        ]
        return re.findall(r"<th[^>]*>(.*?)</th>", table)

    assert "tpot p90 (ms)" not in heads() and "tpot (ms)" in heads() and "effective clock (MHz)" in heads()
    study = yaml.safe_load((run_dir / "study.resolved.yaml").read_text())
    study["constraints"] = ["avg_power_w <= 700", "tpot_p90_s <= 5.0"]
    (run_dir / "study.resolved.yaml").write_text(yaml.safe_dump(study))
    assert "tpot p90 (ms)" in heads()


@pytest.mark.parametrize(
    ("model", "workload", "space", "expected"),
    [
        ("gpt-oss-20b", {}, {}, "; mxfp4 (the checkpoint's weights)"),  # no precision: what the points ran at
        ("llama-3.1-8b", {}, {}, "; bf16"),
        ("gpt-oss-20b", {"precision": "bf16"}, {}, "; bf16"),
        ("gpt-oss-20b", {}, {"precision": {"values": ["bf16", "mxfp4"]}}, "; precision searched"),
        (
            "gpt-oss-20b",
            {},
            {"model": {"values": ["gpt-oss-20b", "qwen3-8b"]}},
            "each model at its checkpoint",
        ),
    ],
)
def test_a_serving_studys_header_says_the_precision_its_points_ran_at(
    model: str, workload: dict, space: dict, expected: str
) -> None:
    """A study that writes no precision serves each model at its checkpoint's weights (gpt-oss: MXFP4): the
    report says so, where points.jsonl and the resolved study record no precision."""
    from types import SimpleNamespace

    from dse.report.html import _serving_line

    study = {"model": model, "space": space, "workload": {"input_tokens": 8, "output_tokens": 8, **workload}}
    assert expected in _serving_line(SimpleNamespace(study=study))  # type: ignore[arg-type]


def test_a_training_studys_header_names_its_default_precision() -> None:
    from types import SimpleNamespace

    from dse.report.html import _serving_line

    study = {"model": "gpt-oss-20b", "space": {}, "workload": {"mode": "training", "num_gpus": 8}}
    assert _serving_line(SimpleNamespace(study=study)).endswith(", bf16")  # type: ignore[arg-type]


ALIASED_BUS = """\
name: aliased-bus
model: llama-3.1-8b
gpu: h100-sxm
workload: {batch: 8, input_tokens: 128, output_tokens: 16}
space:
  gpu.memory.technology: {values: [hbm3, hbm3e, gddr7]}
  hbm_bus:
    {path: gpu.memory.bus_width_bits, values: [4096, 5120], when: {gpu.memory.technology: [hbm3, hbm3e]}}
  gddr_bus: {path: gpu.memory.bus_width_bits, value: 384, when: {gpu.memory.technology: gddr7}}
objectives: {e2e_latency_s: minimize, energy_per_output_token_j: minimize}
search: {sampler: grid, n_points: 10, executor: serial}
"""


def test_parameters_sharing_a_path_each_get_a_row_and_the_column_keeps_every_value(tmp_path: Path) -> None:
    """An architect's finding: the Parameters table was keyed by path, so of h100_gddr7.yaml's hbm_bus,
    gddr_bus and lpddr_bus (all on gpu.memory.bus_width_bits) only the last was listed. And a last alias
    that is a constant (`{value: 384}`) made the whole bus column a constant, though it holds 4096 and 5120
    too. A `when:` list read as Python's repr, ['hbm3', 'hbm3e']."""
    from dse.report.frames import load_run
    from dse.search.runner import run_study

    (tmp_path / "s.yaml").write_text(ALIASED_BUS)
    summary = run_study(tmp_path / "s.yaml", out=tmp_path, executor="serial")
    run_dir = Path(summary.run_dir)
    page = write_html_report(run_dir).read_text(encoding="utf-8")
    table = page[page.index("<h3>Parameters</h3>") :]
    rows = re.findall(r"<tr>(.*?)</tr>", table[: table.index("</table>")])
    cells = [re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row) for row in rows]
    # one row per parameter of the space, as the study declares them: name, path, kind, values
    assert cells == [
        ["parameter", "path", "kind", "range / values"],
        ["gpu.memory.technology", "gpu.memory.technology", "categorical", "hbm3, hbm3e, gddr7"],
        [
            "hbm_bus",
            "gpu.memory.bus_width_bits",
            "categorical",
            "4096, 5120 when gpu.memory.technology = hbm3 or hbm3e",
        ],
        ["gddr_bus", "gpu.memory.bus_width_bits", "constant", "384 when gpu.memory.technology = gddr7"],
    ]
    # the grid holds 4 HBM points and 1 GDDR7 one: the bus column varies (3 values), it is no constant
    bus = next(p for p in load_run(run_dir).parameters if p.path == "gpu.memory.bus_width_bits")
    assert bus.kind == "int"


def test_a_column_that_only_constants_under_disjoint_whens_fill_still_varies(tmp_path: Path) -> None:
    """Review of the fix above: with every parameter on the path a `{value: x}` constant, the declared kind
    (constant) still beat the data, so a bus width of 5120 and 384 dropped out of the front's table."""
    from dse.report.frames import load_run
    from dse.search.runner import run_study

    text = ALIASED_BUS.replace("values: [4096, 5120]", "value: 5120")
    assert "value: 5120" in text
    (tmp_path / "s.yaml").write_text(text)
    run_dir = Path(run_study(tmp_path / "s.yaml", out=tmp_path, executor="serial").run_dir)
    bus = next(p for p in load_run(run_dir).parameters if p.path == "gpu.memory.bus_width_bits")
    assert bus.kind == "int"  # 5120 on the HBM points, 384 on the GDDR7 one


def test_settings_say_why_the_hypervolume_is_0_and_where_the_reference_comes_from(tmp_path: Path) -> None:
    """ZDT1's points have f2 >= 1 - sqrt(f1), so none beats (0.1, 0.1): the run's hypervolume is 0, which
    the report showed without a word. Its settings repeat the run's warning; a run whose study gives no
    reference point says how its own was chosen."""
    from dse.search.runner import run_study

    from ..search.toy import zdt1

    base = "space: {x0: {type: float, low: 0, high: 1}, x1: {type: float, low: 0, high: 1}}\n"
    base += "objectives: {f1: minimize, f2: minimize}\n"
    base += "search: {sampler: random, n_points: 16, executor: serial}\n"
    (tmp_path / "ref.yaml").write_text("name: ref\n" + base + "reference_point: {f1: 0.1, f2: 0.1}\n")
    (tmp_path / "free.yaml").write_text("name: free\n" + base)
    pages = {}
    for name in ("ref", "free"):
        run_dir = run_study(tmp_path / f"{name}.yaml", out=tmp_path, evaluator=zdt1).run_dir
        settings = write_html_report(run_dir).read_text(encoding="utf-8").split('<section id="settings">')[1]
        pages[name] = settings[: settings.index("</section>")]
    warning = (
        "<b>Warning:</b> no feasible point is better than the reference point in every objective (f1 0.1"
    )
    assert warning in pages["ref"] and "Warning:" not in pages["free"]
    assert "worst values of the first batch with a feasible point" in pages["free"]
    assert "first batch with a feasible point" not in pages["ref"]

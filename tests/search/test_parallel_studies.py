"""Studies over GPU layouts: tp/pp/ep/dp as workload keys (defaults or parameters), checked at load time
as `dse predict --tp` checks them, and the shipped MoE study."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pandas as pd
import pytest

from dse.errors import ConfigError
from dse.search.objective import EvalContext, build_inputs, evaluate_point
from dse.search.runner import run_study
from dse.search.study import load_study

REPO = Path(__file__).resolve().parents[2]

LAYOUT = """\
name: layout
model: qwen3-30b-a3b
gpu: h100-sxm
workload: {mode: concurrency, concurrency: 8, input_tokens: 256, output_tokens: 16, num_requests: 16,
           precision: fp8}
space:
  tp: {values: [1, 2]}
  ep: {values: [1, 2]}
objectives:
  energy_per_output_token_j: minimize
  output_tokens_per_s: maximize
search: {sampler: grid, n_points: 4, executor: serial}
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "study.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_layout_keys_reach_the_load_request() -> None:
    ctx = EvalContext(model="qwen3-30b-a3b", mode="concurrency", concurrency=8, tp=2)
    load = build_inputs({"ep": 2, "dp": 2}, ctx)["load"]
    assert (load.tp, load.pp, load.ep, load.dp) == (2, 1, 2, 2)
    assert build_inputs({}, EvalContext(mode="concurrency", concurrency=8))["load"].tp == 1


def test_a_layout_the_model_cannot_take_is_an_infeasible_point() -> None:
    ctx = EvalContext(model="qwen3-30b-a3b", mode="concurrency", concurrency=4, num_requests=8,
                      input_tokens=128, output_tokens=8)  # fmt: skip
    m = evaluate_point({"ep": 2}, ctx)  # ep 2 on one GPU
    assert m["feasible"] is False and "ep 2 must divide" in m["infeasible_reason"]
    assert m["output_tokens_per_s"] is None


def test_layout_study_runs_and_counts_gpus(tmp_path: Path) -> None:
    s = run_study(write(tmp_path, LAYOUT), out=tmp_path / "results")
    df = pd.read_parquet(s.run_dir / "trials.parquet").set_index(["param.tp", "param.ep"])
    assert s.n_points == 4 and s.n_failed == 0 and s.n_feasible == 3
    assert not df.loc[(1, 2), "feasible"] and "ep 2 must divide" in df.loc[(1, 2), "reason"]
    assert df.loc[(2, 2), "metric.num_gpus"] == 2 and df.loc[(1, 1), "metric.num_gpus"] == 1
    assert df.loc[(2, 1), "metric.comm_time_fraction"] > 0 == df.loc[(1, 1), "metric.comm_time_fraction"]


@pytest.mark.parametrize(
    ("old", "new", "line", "needles"),
    [
        ("tp: {values: [1, 2]}", "tp: {values: [1, 3]}", 7, ["space.tp", "tp 3 fits no layout", "heads"]),
        ("ep: {values: [1, 2]}", "ep: {values: [1, 0]}", 8, ["space.ep", "integer >= 1"]),
        ("ep: {values: [1, 2]}", "ep: {values: [1, 16]}", 8, ["space.ep", "ep 16 fits no layout"]),
        ("precision: fp8}", "precision: fp8, dp: 0}", 5, ["workload.dp"]),
        # past the 1,000,000 GPUs of a layout: named as written (was 'workload.tp: tp 1 fits no layout')
        ("precision: fp8}", "precision: fp8, dp: 2000000}", 5, ["workload.dp", "1000000"]),
        # values every point would refuse at run time (each failed with the reason, 'no feasible point')
        ("concurrency: 8,", "concurrency: 20000,", 4, ["workload.concurrency", "above the 10,000"]),
        (
            "  ep: {values: [1, 2]}",
            "  concurrency: {values: [8, 40000]}",
            8,
            ["space.concurrency.values.1", "40000"],
        ),
        ("num_requests: 16,", "num_requests: 300000,", 4, ["workload.num_requests", "200,000"]),
    ],
)
def test_malformed_layouts_give_file_line_field(
    tmp_path: Path, old: str, new: str, line: int, needles: list[str]
) -> None:
    path = write(tmp_path, LAYOUT.replace(old, new))
    with pytest.raises(ConfigError) as info:
        load_study(path)
    msg = str(info.value)
    assert f"{path}:{line}:" in msg, msg
    for needle in needles:
        assert needle in msg, f"{needle!r} not in {msg!r}"


def test_sizes_are_checked_per_replica_and_a_precision_against_every_model(tmp_path: Path) -> None:
    # 20,000 clients over 4 replicas: 5,000 per simulation, within its 10,000
    text = LAYOUT.replace("concurrency: 8,", "concurrency: 20000,").replace("num_requests: 16,", "")
    load_study(write(tmp_path, text.replace("precision: fp8}", "precision: fp8, dp: 4}")))
    with pytest.raises(ConfigError, match="per replica at dp 2"):
        load_study(
            write(
                tmp_path, text.replace("precision: fp8}", "precision: fp8, dp: 2}").replace("20000", "30000")
            )
        )
    # a range whose upper end passes the bound loads: most of its draws run (its lower end decides)
    ranged = text.replace(
        "  ep: {values: [1, 2]}", "  concurrency: {type: int, low: 8, high: 16384, log: true}"
    )
    load_study(write(tmp_path, ranged))
    with pytest.raises(ConfigError, match="space.concurrency.low"):
        load_study(write(tmp_path, ranged.replace("low: 8,", "low: 12000,")))
    # mxfp4 quantizes expert weights: a dense model alone cannot run it (every point failed with the reason)
    dense = LAYOUT.replace("model: qwen3-30b-a3b", "model: llama-3.1-8b").replace(
        "precision: fp8", "precision: mxfp4"
    )
    path = write(tmp_path, dense.replace("  ep: {values: [1, 2]}\n", ""))
    with pytest.raises(ConfigError, match=rf"{path}:5: workload.precision: .*no experts"):
        load_study(path)
    # mxfp4 runs on the MoE model of the two the study compares: not refused
    mixed = LAYOUT.replace("precision: fp8", "precision: mxfp4").replace(
        "  ep: {values: [1, 2]}", "  model: {values: [llama-3.1-8b, qwen3-30b-a3b]}"
    )
    load_study(write(tmp_path, mixed))


def test_shipped_moe_study_loads_and_runs(tmp_path: Path) -> None:
    cfg = load_study(REPO / "studies" / "moe_serving.yaml").config
    assert cfg.model == "qwen3-30b-a3b" and len(cfg.slo()) == 2
    assert {"tp", "ep", "dp", "gpu.interconnect.link_bw_gb_per_s"} <= set(cfg.space)
    s = run_study(REPO / "studies" / "moe_serving.yaml", out=tmp_path, n_points=4, executor="serial")
    df = pd.read_parquet(s.run_dir / "trials.parquet")
    assert s.n_points == 4 and s.n_failed == 0
    ran = df[df["metric.num_gpus"].notna()]
    assert len(ran) >= 2 and (ran["metric.energy_per_output_token_j"] > 0).all()

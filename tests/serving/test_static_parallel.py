"""A static batch on several GPUs (issue 17): sharded graphs, communication per phase, GPU accounting,
the CLI and search points."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dse.cli import app
from dse.errors import ConfigError
from dse.hardware.catalog import load_gpu
from dse.search.objective import PARALLEL_KEYS, EvalContext, build_inputs, evaluate_point
from dse.search.runner import run_study
from dse.search.study import load_study, resolved_dict
from dse.serving.load import LOAD_KEYS, LoadRequest, predict_load
from dse.serving.static import ServingRequest, predict_serving
from dse.workload.models import load_model_config
from dse.workload.sharding import PARALLEL_FLAGS

GPU = load_gpu("h100-sxm")
DENSE = load_model_config("llama-3.1-8b")
MOE = load_model_config("qwen3-30b-a3b")
SMALL = dict(batch=4, input_tokens=128, output_tokens=8)


def _static(arch: object = DENSE, gpu: object = GPU, **kw: object) -> object:
    return predict_serving(arch, gpu, ServingRequest(**(SMALL | kw)))  # type: ignore[arg-type]


@pytest.mark.parametrize(("arch", "kw"), [(DENSE, {}), (MOE, {"precision": "fp8", "engine": "vllm"})])
def test_tp1_is_the_single_gpu_path_exactly(arch: object, kw: dict[str, object]) -> None:
    one = _static(arch, **kw)
    explicit = _static(arch, tp=1, pp=1, ep=1, dp=1, **kw)
    assert one.to_dict() == explicit.to_dict()  # type: ignore[attr-defined]
    m = one.metrics()  # type: ignore[attr-defined]
    assert m["num_gpus"] == 1.0 and m["comm_time_fraction"] == 0.0 and m["total_power_w"] == m["avg_power_w"]
    assert "communication" not in one.energy_j_by_module  # type: ignore[attr-defined]


@settings(max_examples=8, deadline=None)
@given(scale=st.floats(1.1, 8.0), tp=st.sampled_from([2, 4, 8]), pp=st.sampled_from([1, 2]))
def test_more_link_bandwidth_never_slows_the_static_batch(scale: float, tp: int, pp: int) -> None:
    assert GPU.interconnect is not None
    link = GPU.interconnect.model_copy(
        update={"link_bw_bytes_per_s": GPU.interconnect.link_bw_bytes_per_s * scale}
    )
    fast_gpu = GPU.model_copy(update={"interconnect": link})
    slow, fast = (_static(gpu=g, tp=tp, pp=pp) for g in (GPU, fast_gpu))
    for key in ("ttft_s", "tpot_s", "e2e_latency_s"):
        assert getattr(fast, key) <= getattr(slow, key) * (1 + 1e-12), key


@pytest.mark.parametrize(
    ("arch", "layout"),
    [(DENSE, {"tp": 4}), (DENSE, {"tp": 2, "pp": 2}), (DENSE, {"dp": 2}), (MOE, {"tp": 2, "ep": 4, "dp": 2})],
)
def test_energy_counts_every_gpu(arch: object, layout: dict[str, int]) -> None:
    est = _static(arch, **layout)
    m = est.metrics()  # type: ignore[attr-defined]
    n = layout.get("tp", 1) * layout.get("pp", 1) * layout.get("dp", 1)
    assert est.num_gpus == n and m["num_gpus"] == n  # type: ignore[attr-defined]
    assert m["total_power_w"] == pytest.approx(n * m["avg_power_w"])
    assert m["energy_j"] == pytest.approx(m["total_power_w"] * m["e2e_latency_s"])
    assert m["energy_per_output_token_j"] == pytest.approx(m["total_power_w"] / m["output_tokens_per_s"])
    assert m["energy_j"] == pytest.approx(m["prefill_energy_j"] + m["decode_energy_j"])
    for breakdown in ("energy_j_by_module", "energy_j_by_name"):
        assert sum(getattr(est, breakdown).values()) == pytest.approx(m["energy_j"]), breakdown
    replicas_only = layout == {"dp": 2}  # dense replicas exchange nothing
    assert (est.energy_j_by_module["communication"] > 0) != replicas_only  # type: ignore[attr-defined]
    assert (0 < m["comm_time_fraction"] < 0.6) != replicas_only
    if replicas_only:  # two GPUs, each one GPU's batch of 2
        half = _static(arch, batch=2)
        assert m["energy_j"] == pytest.approx(2 * half.energy_j) and m["tpot_s"] == half.tpot_s  # type: ignore[attr-defined]
    else:  # every GPU draws at least idle power, waiting in collectives included
        assert m["energy_j"] > _static(arch).energy_j  # type: ignore[attr-defined]


def test_tp_splits_memory_and_speeds_decode() -> None:
    big = load_model_config("llama-3.1-70b")
    one = predict_serving(big, GPU, ServingRequest(batch=32, input_tokens=1024, output_tokens=64))
    four = predict_serving(big, GPU, ServingRequest(batch=32, input_tokens=1024, output_tokens=64, tp=4))
    assert not one.feasible and four.feasible  # 70B in bf16 fits four GPUs, not one
    assert four.weight_bytes == pytest.approx(one.weight_bytes / 4, rel=0.01)
    assert four.memory_bytes < 0.3 * one.memory_bytes
    assert four.tpot_s < one.tpot_s / 2 and four.ttft_s < one.ttft_s / 2
    assert four.bound_by["decode"]["shares"]["communication"] > 0
    assert four.energy_per_output_token_j > one.energy_per_output_token_j  # four GPUs, communication


@pytest.mark.parametrize(("model", "tp"), [("llama-3.1-8b", 2), ("llama-3.1-8b", 4), ("llama-3.1-70b", 4)])
def test_tpot_agrees_with_the_load_model_at_concurrency_batch(model: str, tp: int) -> None:
    """One wave of `batch` requests under load, all prefilled in one step (batch x input within the
    step's token budget): its decode steps are the static batch's, so TPOT agrees within 1% (measured
    0.01% for these cases; the load model interpolates its step table over context lengths). TTFT too."""
    arch, batch, i, o = load_model_config(model), 16, 512, 64
    static = predict_serving(arch, GPU, ServingRequest(batch=batch, input_tokens=i, output_tokens=o, tp=tp))
    load = LoadRequest(mode="concurrency", concurrency=batch, num_requests=batch, input_tokens=i,
                       output_tokens=o, engine="none", sampling="none", tp=tp)  # fmt: skip
    m = predict_load(arch, GPU, load).metrics()
    assert m["tpot_s"] == pytest.approx(static.tpot_s, rel=0.01)
    assert m["ttft_s"] == pytest.approx(static.ttft_s, rel=0.01)
    assert m["comm_time_fraction"] == pytest.approx(static.comm_time_fraction, abs=0.05)


@pytest.mark.parametrize(
    ("layout", "flag"), [({"tp": 3}, "--tp 3"), ({"ep": 2}, "--ep 2"), ({"dp": 3}, "--dp 3")]
)
def test_layouts_that_do_not_fit_name_the_flag(layout: dict[str, int], flag: str) -> None:
    with pytest.raises(ConfigError, match=flag):
        _static(**layout)


def test_cli_static_batch_takes_the_layout() -> None:
    args = ["predict", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--batch", "32", "--input-tokens"]
    args += ["1024", "--output-tokens", "32", "--tp", "4", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["mode"] == "static" and out["tp"] == 4 and out["num_gpus"] == 4 and out["feasible"]
    for key in (
        "avg_power_w",
        "total_power_w",
        "energy_per_output_token_j",
        "energy_j",
        "comm_time_fraction",
    ):
        assert key in LOAD_KEYS and out[key] > 0, key
    assert out["usd_per_million_output_tokens"] > 0
    text = CliRunner().invoke(app, args[:-1])
    assert text.exit_code == 0 and "4 GPUs" in text.output


def test_cli_graph_prediction_still_rejects_the_layout() -> None:
    """One pass (--phase) or a kernel list has no layout; `--model --tp 2` alone is a serving prediction."""
    one_pass = CliRunner().invoke(
        app, ["predict", "--model", "llama-3.1-8b", "--phase", "decode", "--tp", "2"]
    )
    assert one_pass.exit_code == 2 and "--tp" in one_pass.output and "not --phase" in one_pass.output
    kernels = CliRunner().invoke(app, ["predict", "--kernels", "k.json", "--tp", "2"])
    assert kernels.exit_code == 2 and "--tp" in kernels.output


def test_search_points_take_the_layout() -> None:
    assert PARALLEL_KEYS == PARALLEL_FLAGS
    ctx = EvalContext(model="llama-3.1-8b", batch=4, input_tokens=128, output_tokens=8)
    inputs = build_inputs({"tp": 2, "pp": 2}, ctx)
    assert (inputs["tp"], inputs["pp"], inputs["ep"], inputs["dp"]) == (2, 2, 1, 1)
    m = evaluate_point({"tp": 2}, ctx)
    assert m["feasible"] is True and m["num_gpus"] == 2 and m["comm_time_fraction"] > 0
    bad = evaluate_point({"tp": 3}, ctx)
    assert bad["feasible"] is False and "tp 3 must divide" in bad["infeasible_reason"]
    assert bad["output_tokens_per_s"] is None and bad["tdp_w"] > 0


STATIC_LAYOUT = """\
name: static-layout
model: llama-3.1-8b
gpu: h100-sxm
workload: {batch: 4, input_tokens: 128, output_tokens: 8}
space:
  tp: {values: [1, 2]}
  dp: {values: [1, 3]}
objectives:
  energy_per_output_token_j: minimize
  tpot_s: minimize
search: {sampler: grid, n_points: 4, executor: serial}
"""


def test_static_study_over_tp(tmp_path: Path) -> None:
    path = tmp_path / "study.yaml"
    path.write_text(STATIC_LAYOUT.replace("2]", "5]"))
    with pytest.raises(ConfigError, match="tp 5 fits no layout"):
        load_study(path)
    path.write_text(STATIC_LAYOUT)
    s = run_study(path, out=tmp_path / "results")
    df = pd.read_parquet(s.run_dir / "trials.parquet").set_index(["param.tp", "param.dp"])
    assert s.n_points == 4 and s.n_failed == 0 and s.n_feasible == 2
    assert df.loc[(2, 1), "metric.num_gpus"] == 2 and df.loc[(2, 1), "metric.comm_time_fraction"] > 0
    assert not df.loc[(2, 3), "feasible"] and "dp 3 must divide the batch" in df.loc[(2, 3), "reason"]


def test_one_gpu_static_study_resolves_as_before() -> None:
    """A static study on one GPU writes no layout keys, so its hash (its run directory) is unchanged."""
    cfg = load_study(Path(__file__).resolve().parents[2] / "studies" / "llm_serving.yaml").config
    assert not {"tp", "pp", "ep", "dp"} & set(resolved_dict(cfg)["workload"])

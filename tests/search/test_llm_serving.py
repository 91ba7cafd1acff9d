"""The shipped llm_serving study with the real model (dse.serving.static.predict_serving).

The short run is part of the default suite; the 10,000-point NSGA-II acceptance run (Ray start included,
120 s budget on the project's 2-core machine) is marked slow: `make test-slow`.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
import pytest

from dse.errors import DseError
from dse.search.objective import EvalContext, evaluate_point
from dse.search.runner import run_study
from dse.search.study import load_study

STUDY = Path(__file__).resolve().parents[2] / "studies" / "llm_serving.yaml"


@pytest.fixture(scope="module")
def model_works() -> None:
    try:
        evaluate_point({"sm_clock_mhz": 1500}, EvalContext(batch=2, input_tokens=64, output_tokens=8))
    except (ImportError, DseError) as exc:  # the serving model is not in this checkout yet / no coefficients
        pytest.skip(f"dse.serving cannot evaluate a point here: {exc}")


def test_short_llm_serving_run(tmp_path: Path, model_works: None) -> None:
    s = run_study(STUDY, out=tmp_path, n_points=48, executor="serial")
    df = pd.read_parquet(s.run_dir / "trials.parquet")
    assert s.n_points == 48 and s.n_failed < 48
    ok = df[df["error"].isna()]
    assert (ok["metric.e2e_latency_s"] > 0).all() and (ok["metric.energy_per_output_token_j"] > 0).all()
    assert {"param.gpu.num_sms", "param.gpu.memory.data_rate_frac", "param.precision"} <= set(df.columns)
    infeasible = df[~df["feasible"] & df["error"].isna()]
    assert (infeasible["reason"] != "").all()
    if s.n_feasible:
        assert s.front_size >= 1


@pytest.mark.slow
def test_acceptance_10k_nsga2_with_ray_within_120_s(tmp_path: Path, model_works: None) -> None:
    t0 = time.perf_counter()
    s = run_study(STUDY, out=tmp_path, n_points=10_000, executor="ray")
    wall_s = time.perf_counter() - t0
    print(
        f"\n10k NSGA-II llm_serving with ray: {wall_s:.1f} s wall, {s.points_per_s:.1f} points/s, "
        f"stop: {s.stop_reason}"
    )
    assert s.n_points == 10_000 or "stalled" in s.stop_reason or "exhausted" in s.stop_reason
    assert wall_s < 120


@pytest.mark.parametrize("study", ["llm_serving.yaml", "h100_gddr7.yaml"])
def test_a_study_searching_precision_weighs_fp8_with_an_engines_fused_quantization(study: str) -> None:
    """An architect's finding: these studies search bf16 against fp8 with no engine, i.e. `none`'s eager
    per-operator kernels, where each fp8 GEMM has a quantize kernel of its own (4 per layer, ~0.5 ms a decode
    step): at batch 8 on 8 TB/s of HBM3e fp8 decoded slower than bf16 (TPOT 4.24 against 4.14 ms) though it
    reads 44% fewer weight bytes. With the quantization folded into the GEMMs, as engines run it, fewer
    bytes read is a shorter memory-bound decode step."""
    ctx = load_study(STUDY.parent / study).config.eval_context()
    point = {"gpu.memory.technology": "hbm3e", "gpu.memory.bus_width_bits": 8192, "batch": 8}
    bf16, fp8 = (evaluate_point(point | {"precision": p}, ctx) for p in ("bf16", "fp8"))
    assert fp8["weight_bytes"] < 0.6 * bf16["weight_bytes"]  # Llama-3.1-8B: 1-byte weights, bf16 LM head
    assert fp8["tpot_s"] < bf16["tpot_s"]

"""Measured-data loaders: row counts as documented in shared/data/README.md, SI units, and physical sanity."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dse.calibrate.data.aiconfigurator import (
    load_aiconfigurator_attention,
    load_aiconfigurator_gemm,
    load_aiconfigurator_silicon,
)
from dse.calibrate.data.common import DATA_DIR_ENV, data_root, split_holdout
from dse.calibrate.data.energaizer import load_energaizer_measurements
from dse.calibrate.data.llmcompass import load_llmcompass
from dse.calibrate.data.mlenergy import load_mlenergy
from dse.errors import ConfigError
from tests.shared_data import needs_shared_data as needs_data

# Datasheet dense peaks (no sparsity): H100 SXM bf16 989 TFLOP/s, fp8 1979; A100 bf16 312.
H100_BF16_PEAK_FLOP_PER_S = 989e12
H100_FP8_PEAK_FLOP_PER_S = 1979e12
A100_BF16_PEAK_FLOP_PER_S = 312e12


# --- data root and argument checks (no data needed) --------------------------------------------------------


def test_data_root_env_must_be_a_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="DSE_DATA_DIR"):
        data_root()


def test_data_root_env_wins_and_missing_file_is_config_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    assert data_root() == tmp_path.resolve()
    with pytest.raises(ConfigError, match="data file missing"):
        load_mlenergy()


def test_env_root_serves_a_copy_of_the_files(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "llmcompass").mkdir()
    (tmp_path / "llmcompass" / "a100_gelu.csv").write_text(
        "num_elements,throughput_gelem_per_s,latency_ms,dtype,effective_bw_gbps_2x_fp16\n"
        "1000000,100.0,0.01,fp16,400.0\n"
    )
    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path))
    df = load_llmcompass("gelu")
    assert df.loc[0, "latency_s"] == pytest.approx(1e-5)
    assert df.loc[0, "throughput_elem_per_s"] == pytest.approx(1e11)
    assert df.loc[0, "effective_bw_bytes_per_s"] == pytest.approx(4e11)


@pytest.mark.parametrize(
    ("call", "needle"),
    [
        (lambda: load_aiconfigurator_gemm("b200_sxm"), "a100_sxm, h100_sxm, h200_sxm"),
        (lambda: load_aiconfigurator_attention("a100_sxm", "context"), "h100_sxm, h200_sxm"),
        (lambda: load_aiconfigurator_attention("h100_sxm", "decode"), "context, generation"),
        (lambda: load_llmcompass("conv"), "gelu, gpt3_layer_tp4, layernorm, matmul, softmax"),
        (lambda: load_energaizer_measurements("h100"), "a10, a100, dvfs"),
    ],
)
def test_unknown_names_list_allowed_values(call: object, needle: str) -> None:
    with pytest.raises(ConfigError, match="allowed") as info:
        call()  # type: ignore[operator]
    assert needle in str(info.value)


def test_split_holdout_is_deterministic_disjoint_and_complete() -> None:
    df = pd.DataFrame({"x": np.arange(101)}, index=np.arange(101) * 3)
    train, test = split_holdout(df, frac=0.2, seed=7)
    train2, test2 = split_holdout(df, frac=0.2, seed=7)
    pd.testing.assert_frame_equal(train, train2)
    pd.testing.assert_frame_equal(test, test2)
    assert len(test) == 20 and len(train) == 81
    assert set(train.index).isdisjoint(test.index)
    assert sorted([*train.index, *test.index]) == list(df.index)
    assert train.index.is_monotonic_increasing and test.index.is_monotonic_increasing
    _, other = split_holdout(df, frac=0.2, seed=8)
    assert set(other.index) != set(test.index)
    with pytest.raises(ConfigError, match="fraction"):
        split_holdout(df, frac=1.5)


# --- the real files ---------------------------------------------------------------------------------------


@needs_data
@pytest.mark.parametrize(
    ("loader", "rows"),
    [
        (lambda: load_aiconfigurator_gemm("h200_sxm"), 65_268),
        (lambda: load_aiconfigurator_gemm("h100_sxm"), 71_484),
        (lambda: load_aiconfigurator_gemm("a100_sxm"), 44_982),
        (lambda: load_aiconfigurator_attention("h200_sxm", "context"), 50_830),
        (lambda: load_aiconfigurator_attention("h200_sxm", "generation"), 63_000),
        (lambda: load_aiconfigurator_attention("h100_sxm", "context"), 50_830),
        (lambda: load_aiconfigurator_attention("h100_sxm", "generation"), 60_300),
        (load_aiconfigurator_silicon, 83),
        (load_mlenergy, 331),
        (lambda: load_llmcompass("matmul"), 20),
        (lambda: load_llmcompass("softmax"), 22),
        (lambda: load_llmcompass("layernorm"), 22),
        (lambda: load_llmcompass("gelu"), 20),
        (lambda: load_llmcompass("gpt3_layer_tp4"), 24),
        (lambda: load_energaizer_measurements("a10"), 97),
        (lambda: load_energaizer_measurements("a100"), 133),
        (lambda: load_energaizer_measurements("dvfs"), 217),
    ],
)
def test_row_counts_match_readme(loader: object, rows: int) -> None:
    df = loader()  # type: ignore[operator]
    assert len(df) == rows
    assert not any(c.endswith(("_ms", "_mhz", "_gbps")) for c in df.columns)  # SI past the edge


@needs_data
def test_h100_gemm_units() -> None:
    df = load_aiconfigurator_gemm("h100-sxm")  # hyphenated catalog spelling works too
    assert set(df["gpu"]) == {"h100_sxm"}
    assert df.groupby("dtype").size().to_dict() == {"bf16": 35_742, "fp8": 35_742}
    rate = 2.0 * df["m"] * df["n"] * df["k"] / df["latency_s"]
    assert rate[df["dtype"] == "bf16"].max() <= H100_BF16_PEAK_FLOP_PER_S
    assert rate[df["dtype"] == "fp8"].max() <= H100_FP8_PEAK_FLOP_PER_S
    assert (
        rate[df["dtype"] == "bf16"].max() > 0.5 * H100_BF16_PEAK_FLOP_PER_S
    )  # not off by 1000 the other way
    assert df["power_w"].isna().all() and df["power_limit_w"].isna().all()


@needs_data
def test_h200_gemm_power_and_energy() -> None:
    df = load_aiconfigurator_gemm("h200_sxm")
    assert set(df["dtype"]) == {"bf16", "fp8_block"}
    assert df["power_w"].notna().all()
    assert df["power_w"].max() <= 720.0 and df["power_w"].min() > 50.0
    assert (df["power_limit_w"] == 700.0).all()
    big = df[(df["m"] == 8192) & (df["n"] == 8192) & (df["k"] == 8192) & (df["dtype"] == "bf16")]
    assert len(big) == 1  # README: 1.5525 ms at 691 W, about 1.07 J per GEMM
    energy_j = float(big["power_w"].iloc[0] * big["latency_s"].iloc[0])
    assert energy_j == pytest.approx(1.07, rel=0.02)


@needs_data
def test_a100_gemm_below_peak() -> None:
    df = load_aiconfigurator_gemm("a100_sxm")
    rate = 2.0 * df["m"] * df["n"] * df["k"] / df["latency_s"]
    assert rate.max() <= A100_BF16_PEAK_FLOP_PER_S
    assert set(df["framework"]) == {"VLLM", "SGLang"}


@needs_data
@pytest.mark.parametrize(("gpu", "hbm_bytes_per_s"), [("h100_sxm", 3.35e12), ("h200_sxm", 4.8e12)])
def test_attention_sequence_lengths_and_rates(gpu: str, hbm_bytes_per_s: float) -> None:
    context = load_aiconfigurator_attention(gpu, "context")
    assert (context["seq_len_q"] == context["seq_len_kv"]).all()
    assert set(context["attn_dtype"]) == {"bf16"} and set(context["kv_dtype"]) == {"bf16", "fp8"}
    assert set(context["window_size"]) == {0, 128, 1024, 8192}
    # Causal (query, key) pairs, limited to `window_size` keys per query on sliding-window rows. Counting
    # full causal work on windowed rows would give up to 15 PFLOP/s: the window must be honoured.
    s = context["seq_len_q"].astype(float)
    w = np.where(context["window_size"] > 0, context["window_size"], np.inf)
    pairs = np.where(s <= w, s * (s + 1) / 2, w * (w + 1) / 2 + (s - w) * w)
    flop = 4.0 * context["batch"] * context["num_heads"] * context["head_dim"] * pairs
    assert (flop / context["latency_s"]).max() <= H100_BF16_PEAK_FLOP_PER_S
    gen = load_aiconfigurator_attention(gpu, "generation")
    assert (gen["seq_len_q"] == 1).all() and gen["seq_len_kv"].min() == 2
    kv_len = np.minimum(gen["seq_len_kv"], np.where(gen["window_size"] > 0, gen["window_size"], np.inf))
    kv_bytes = np.where(gen["kv_dtype"] == "fp8", 1.0, 2.0)
    kv_read = 2.0 * gen["batch"] * kv_len * gen["num_kv_heads"] * gen["head_dim"] * kv_bytes
    assert (kv_read / gen["latency_s"]).max() <= hbm_bytes_per_s
    has_power = gpu == "h200_sxm"
    assert context["power_w"].notna().all() == has_power
    assert gen["power_w"].notna().all() == has_power


@needs_data
def test_llmcompass_units() -> None:
    mm = load_llmcompass("matmul")
    rate = 2.0 * mm["m"] * mm["n"] * mm["k"] / mm["latency_s"]
    np.testing.assert_allclose(rate, mm["flop_per_s"], rtol=2e-3)
    assert rate.max() <= A100_BF16_PEAK_FLOP_PER_S
    sm = load_llmcompass("softmax")
    np.testing.assert_allclose(
        sm["rows"] * sm["cols"] / sm["latency_s"], sm["throughput_elem_per_s"], rtol=1e-9
    )
    assert sm["effective_bw_bytes_per_s"].max() <= 2.04e12  # A100 80 GB HBM2e
    assert set(sm["dtype"]) == {"fp16"} and set(mm["dtype"]) == {"bf16"}
    layer = load_llmcompass("gpt3_layer_tp4")
    assert layer.loc[layer["phase"] == "prefill", "latency_s"].sum() == pytest.approx(0.0667, rel=0.01)


@needs_data
def test_energaizer_dvfs_clocks_in_hz() -> None:
    df = load_energaizer_measurements("dvfs")
    assert sorted(df["sm_clock_hz"].unique()) == [mhz * 1e6 for mhz in range(510, 1411, 90)]
    assert (df["avg_sm_clock_hz"] <= df["sm_clock_hz"] + 5e6).all()
    assert (df["power_cap_w"] == 250.0).all()
    assert df["avg_power_w"].max() <= 250.0
    assert (~df["valid"]).sum() == 10


@needs_data
@pytest.mark.parametrize(("which", "num_invalid", "cap_w"), [("a100", 1, 250.0), ("a10", 2, 150.0)])
def test_energaizer_fixed_clock_sets(which: str, num_invalid: int, cap_w: float) -> None:
    df = load_energaizer_measurements(which)
    assert (df["sm_clock_hz"] == 900e6).all()
    assert (~df["valid"]).sum() == num_invalid
    assert df.loc[df["valid"], "avg_power_w"].between(40.0, cap_w).all()
    np.testing.assert_allclose(df["energy_j"] / df["latency_s"], df["avg_power_w"], rtol=1e-9)
    np.testing.assert_allclose(df["latency_s"] * df["iterations"], df["total_run_s"], rtol=1e-6)


@needs_data
def test_energaizer_workload_paths_exist() -> None:
    frames = [load_energaizer_measurements(w) for w in ("a100", "a10", "dvfs")]
    paths = pd.concat(frames)["workload_path"]
    assert paths.isna().sum() == 31  # README: no JSON upstream for 31 of the 447 rows
    assert all(Path(p).is_absolute() and Path(p).is_file() for p in paths.dropna())


@needs_data
def test_serving_tables_in_si() -> None:
    ml = load_mlenergy()
    np.testing.assert_allclose(
        ml["energy_per_output_token_j"] * ml["output_throughput_tok_per_s"], ml["avg_power_w"], rtol=1e-9
    )
    assert ml["median_itl_s"].between(1e-3, 1.0).all()
    assert ml.loc[ml["gpu_model"] == "H100", "avg_power_w"].max() <= 700.0
    assert ml["num_params"].min() >= 1e9
    silicon = load_aiconfigurator_silicon()
    assert set(silicon["gpu"]) == {"h100_sxm", "h200_sxm"}
    assert silicon["tpot_s"].between(1e-3, 1.0).all()
    assert (silicon["tp_size"] == 1).all()


@needs_data
def test_loaders_return_copies() -> None:
    first = load_llmcompass("matmul")
    first["latency_s"] = -1.0
    assert (load_llmcompass("matmul")["latency_s"] > 0).all()

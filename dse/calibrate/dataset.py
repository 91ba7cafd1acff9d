"""Loaders for the third-party measurements in `shared/data` as tidy DataFrames with SI columns.

The files and their caveats are described in `shared/data/README.md`; read it before fitting anything.
Every loader converts units once, here, and names the unit in the column (`latency_s`, `power_w`,
`energy_j`, `sm_clock_hz`); empty cells become NaN (or `<NA>` in integer columns). Parsed CSVs are cached
per path and each call returns a fresh copy, so callers may modify what they get.

| loader | source folder | GPUs |
|---|---|---|
| `load_aiconfigurator_gemm(gpu)` | `aiconfigurator/` | h100_sxm, h200_sxm (with power), a100_sxm |
| `load_aiconfigurator_attention(gpu, phase)` | `aiconfigurator/` | h100_sxm, h200_sxm (with power) |
| `load_aiconfigurator_silicon()` | `aiconfigurator/` | end-to-end serving, h100_sxm and h200_sxm |
| `load_llmcompass(kind)` | `llmcompass/` | A100 80 GB (form factor not stated) |
| `load_energaizer_measurements(which)` | `energaizer/` | A10, A100 PCIe 40 GB (fixed clock and DVFS) |
| `load_mlenergy()` | `mlenergy/` | H100, B200 serving |

The data root is `$DSE_DATA_DIR` when set, else `shared/data` beside or inside the repository.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd

from dse.errors import ConfigError
from dse.units import MHZ, MILLI

DATA_DIR_ENV = "DSE_DATA_DIR"

AIC_GEMM_FILES: dict[str, str] = {
    "h100_sxm": "h100_sxm_vllm-0.24.0_gemm.csv",
    "h200_sxm": "h200_sxm_vllm-0.22.0_gemm_power.csv",
    "a100_sxm": "a100_sxm_gemm_vllm-0.14.0_sglang-0.5.10.csv",
}
AIC_ATTENTION_FILES: dict[tuple[str, str], str] = {
    ("h100_sxm", "context"): "h100_sxm_vllm-0.24.0_context_attention.csv",
    ("h100_sxm", "generation"): "h100_sxm_vllm-0.24.0_generation_attention.csv",
    ("h200_sxm", "context"): "h200_sxm_vllm-0.22.0_context_attention_power.csv",
    ("h200_sxm", "generation"): "h200_sxm_vllm-0.22.0_generation_attention_power.csv",
}
AIC_SILICON_FILE = "silicon_sample_tp1_dense_h100_h200.csv"
LLMCOMPASS_FILES: dict[str, str] = {
    "matmul": "a100_matmul.csv",
    "softmax": "a100_softmax.csv",
    "layernorm": "a100_layernorm.csv",
    "gelu": "a100_gelu.csv",
    "gpt3_layer_tp4": "a100_gpt3_175b_layer_tp4_breakdown.csv",
}
ENERGAIZER_FILES: dict[str, str] = {
    "a100": "measurements_a100pcie_nvml.csv",
    "a10": "measurements_a10_nvml.csv",
    "dvfs": "measurements_dvfs_a100pcie_nvml.csv",
}
MLENERGY_FILE = "llm_single_gpu_configs.csv"

# Upstream dtype spellings -> `dse` names (fp8_block is block-scaled FP8, kept distinct from per-tensor fp8).
DTYPE_NAMES: dict[str, str] = {
    "bfloat16": "bf16",
    "bf16": "bf16",
    "float16": "fp16",
    "fp16": "fp16",
    "float32": "fp32",
    "fp32": "fp32",
    "fp8": "fp8",
    "fp8_block": "fp8_block",
}

_GIGA = 1e9
_TERA = 1e12


def data_root() -> Path:
    """Directory holding the measured datasets (the `shared/data` of the project).

    Raises:
        ConfigError: `$DSE_DATA_DIR` is set but not a directory, or no default location exists.
    """
    env = os.environ.get(DATA_DIR_ENV)
    if env:
        root = Path(env).expanduser()
        if not root.is_dir():
            raise ConfigError(f"{DATA_DIR_ENV}={env!r} is not a directory")
        return root.resolve()
    repo = Path(__file__).resolve().parents[2]  # <repo>/dse/calibrate/dataset.py
    candidates = (repo.parent / "shared" / "data", repo / "shared" / "data")
    for candidate in candidates:
        if candidate.is_dir():
            return candidate.resolve()
    looked = ", ".join(str(c) for c in candidates)
    raise ConfigError(f"measured data not found (looked in {looked}); set {DATA_DIR_ENV} to its directory")


@functools.cache
def _read_csv_cached(path: Path) -> pd.DataFrame:
    return pd.read_csv(path)


def _read(*parts: str) -> tuple[pd.DataFrame, Path]:
    path = data_root().joinpath(*parts)
    if not path.is_file():
        raise ConfigError(f"{path}: data file missing (is {DATA_DIR_ENV} or the data root right?)")
    return _read_csv_cached(path).copy(), path


def _gpu_key(gpu: str) -> str:
    """aiconfigurator names systems `h100_sxm`; accept the catalog's hyphenated `h100-sxm` too."""
    return gpu.strip().lower().replace("-", "_")


def _choose(what: str, value: str, allowed: dict[str, str]) -> str:
    if value not in allowed:
        raise ConfigError(f"unknown {what} {value!r}; allowed: {', '.join(sorted(allowed))}")
    return allowed[value]


def _dtype_column(values: pd.Series, source: str) -> pd.Series:
    unknown = sorted(set(values.dropna().unique()) - DTYPE_NAMES.keys())
    if unknown:
        raise ConfigError(f"{source}: unknown dtype(s) {unknown}; known: {', '.join(DTYPE_NAMES)}")
    return values.map(DTYPE_NAMES)


def _optional(df: pd.DataFrame, column: str) -> pd.Series:
    return df[column].astype(float) if column in df else pd.Series(np.nan, index=df.index)


def load_aiconfigurator_gemm(gpu: str) -> pd.DataFrame:
    """aiconfigurator GEMM table of one GPU: one row per (m, n, k, dtype) of `activation[m,k] @ W[k,n]`.

    Columns: gpu, m, n, k, dtype (`bf16`, `fp8` per-tensor, `fp8_block`), latency_s (one call),
    power_w and power_limit_w (NaN where not measured: only h200_sxm has them), kernel_source,
    framework, version, source. Power is reliable only for kernels longer than about 0.2-1 ms (README).
    `gpu` may also be spelled with hyphens (`h100-sxm`); the column holds the underscore name.
    """
    gpu = _gpu_key(gpu)
    df, path = _read("aiconfigurator", _choose("gpu for GEMM data", gpu, AIC_GEMM_FILES))
    return pd.DataFrame(
        {
            "gpu": gpu,
            "m": df["m"].astype("int64"),
            "n": df["n"].astype("int64"),
            "k": df["k"].astype("int64"),
            "dtype": _dtype_column(df["gemm_dtype"], path.name),
            "latency_s": df["latency_ms"] * MILLI,
            "power_w": _optional(df, "power_w"),
            "power_limit_w": _optional(df, "power_limit_w"),
            "kernel_source": df["kernel_source"],
            "framework": df["framework"],
            "version": df["version"].astype(str),
            "source": path.name,
        }
    )


def load_aiconfigurator_attention(gpu: str, phase: Literal["context", "generation"]) -> pd.DataFrame:
    """aiconfigurator attention table of one GPU and phase (vLLM flash attention, all heads, one op).

    Columns: gpu, phase, batch, seq_len_q, seq_len_kv (context: both = isl; generation: q = 1 and
    kv = step + 1, the new token included), num_heads, num_kv_heads (per GPU), head_dim, window_size
    (tokens, 0 = full attention: filter on it), attn_dtype, kv_dtype, latency_s, power_w, power_limit_w
    (NaN on h100_sxm), kernel_source, source.
    """
    gpu = _gpu_key(gpu)
    gpus = sorted({g for g, _ in AIC_ATTENTION_FILES})
    if gpu not in gpus:
        raise ConfigError(f"unknown gpu for attention data {gpu!r}; allowed: {', '.join(gpus)}")
    if phase not in ("context", "generation"):
        raise ConfigError(f"unknown attention phase {phase!r}; allowed: context, generation")
    df, path = _read("aiconfigurator", AIC_ATTENTION_FILES[(gpu, phase)])
    if phase == "context":
        seq_len_q = df["isl"].astype("int64")
        seq_len_kv = seq_len_q
    else:
        seq_len_q = pd.Series(1, index=df.index, dtype="int64")
        seq_len_kv = df["step"].astype("int64") + 1
    return pd.DataFrame(
        {
            "gpu": gpu,
            "phase": phase,
            "batch": df["batch_size"].astype("int64"),
            "seq_len_q": seq_len_q,
            "seq_len_kv": seq_len_kv,
            "num_heads": df["num_heads"].astype("int64"),
            "num_kv_heads": df["num_key_value_heads"].astype("int64"),
            "head_dim": df["head_dim"].astype("int64"),
            "window_size": df["window_size"].astype("int64"),
            "attn_dtype": _dtype_column(df["attn_dtype"], path.name),
            "kv_dtype": _dtype_column(df["kv_cache_dtype"], path.name),
            "latency_s": df["latency_ms"] * MILLI,
            "power_w": _optional(df, "power_w"),
            "power_limit_w": _optional(df, "power_limit_w"),
            "kernel_source": df["kernel_source"],
            "source": path.name,
        }
    )


def load_llmcompass(kind: str) -> pd.DataFrame:
    """LLMCompass real-hardware sweeps on an A100 80 GB (latency includes launch and host overhead).

    Args:
        kind: `matmul` (bf16; m, n, k, flop_per_s), `softmax` / `layernorm` (fp16; rows, cols),
            `gelu` (fp16; num_elements), or `gpt3_layer_tp4` (per-op latency of one GPT-3 layer, TP4).

    Returns:
        latency_s plus the shape columns; kernels also get dtype, and the reductions and GELU
        throughput_elem_per_s and effective_bw_bytes_per_s (read + write of fp16, a DRAM lower bound).
    """
    df, path = _read("llmcompass", _choose("LLMCompass kind", kind, LLMCOMPASS_FILES))
    out = pd.DataFrame({"gpu": "a100_80gb"}, index=df.index)
    if kind == "matmul":
        out = out.assign(m=df["m"], n=df["n"], k=df["k"], flop_per_s=df["tflops"] * _TERA)
    elif kind in ("softmax", "layernorm"):
        out = out.assign(rows=df["m"], cols=df["n"])
    elif kind == "gelu":
        out = out.assign(num_elements=df["num_elements"])
    else:
        out = out.assign(phase=df["phase"], op=df["op"], source_file=df["source_file"])
    if "dtype" in df:
        out["dtype"] = _dtype_column(df["dtype"], path.name)
    out["latency_s"] = df["latency_ms"] * MILLI
    if "throughput_gelem_per_s" in df:
        out["throughput_elem_per_s"] = df["throughput_gelem_per_s"] * _GIGA
        out["effective_bw_bytes_per_s"] = df["effective_bw_gbps_2x_fp16"] * _GIGA
    out["source"] = path.name
    return out


def load_energaizer_measurements(which: str) -> pd.DataFrame:
    """EnergAIzer artifact end-to-end forward passes (eager PyTorch, locked SM clock, whole-board NVML).

    Args:
        which: `a100` (A100 PCIe 40 GB at 900 MHz), `a10` (A10 at 900 MHz) or `dvfs` (the same A100 at
            510-1410 MHz).

    Returns:
        One row per run. Per forward pass: latency_s (wall time, includes host overhead), energy_j
        (whole board, idle included), avg_power_w. Clocks: sm_clock_hz (requested lock) and
        avg_sm_clock_hz (polled mean; lower than requested when the 250 W cap throttles: use it as the
        actual clock). Also power_cap_w, avg_temp_c, total_run_s, iterations, the model/precision/batch/
        seq_len/mode/attention fields, workload_path (absolute path of the kernel-list JSON, or None when
        upstream has none), short_window_flag and valid (= not short_window_flag; invalid runs most likely
        failed early), source.
    """
    df, path = _read("energaizer", _choose("EnergAIzer measurement set", which, ENERGAIZER_FILES))
    energaizer_dir = path.parent
    workload_path = [
        None if pd.isna(rel) else str((energaizer_dir / rel).resolve()) for rel in df["workload_json"]
    ]
    out = df.drop(columns=["freq_mhz", "time_ms", "avg_sm_clock_mhz"])
    out["seq_len"] = df["seq_len"].astype("Int64")
    out["power_cap_w"] = df["power_cap_w"].astype(float)
    out["sm_clock_hz"] = df["freq_mhz"] * MHZ
    out["avg_sm_clock_hz"] = df["avg_sm_clock_mhz"] * MHZ
    out["latency_s"] = df["time_ms"] * MILLI
    out["workload_path"] = pd.Series(workload_path, index=df.index, dtype=object)
    out["short_window_flag"] = df["short_window_flag"].astype(bool)
    out["valid"] = ~out["short_window_flag"]
    out["source"] = path.name
    return out


def load_mlenergy() -> pd.DataFrame:
    """ML.ENERGY leaderboard v3 single-GPU LLM serving configurations (vLLM, H100 and B200).

    Columns as upstream with SI units: `*_itl_ms` become median_itl_s, p90_itl_s, p95_itl_s, p99_itl_s;
    `total_params_b`/`activated_params_b` (billions) become num_params/num_active_params. avg_power_w,
    energy_per_output_token_j and output_throughput_tok_per_s are one measurement, not three (README).
    No prompt lengths and no TTFT exist in this data.
    """
    df, path = _read("mlenergy", MLENERGY_FILE)
    renames = {f"{p}_itl_ms": f"{p}_itl_s" for p in ("median", "p90", "p95", "p99")}
    for old in renames:
        df[old] = df[old] * MILLI
    df["total_params_b"] = df["total_params_b"] * _GIGA
    df["activated_params_b"] = df["activated_params_b"] * _GIGA
    renames |= {"total_params_b": "num_params", "activated_params_b": "num_active_params"}
    out = df.rename(columns=renames)
    out["source"] = path.name
    return out


def load_aiconfigurator_silicon() -> pd.DataFrame:
    """aiconfigurator end-to-end serving samples (TP1 dense models on h100_sxm / h200_sxm; no power).

    Columns as upstream, plus gpu (= system) and source; silicon_ttft_ms and silicon_tpot_ms become
    ttft_s and tpot_s; integer-valued sizes (batch_size = concurrency, tp_size, ...) are nullable ints.
    TTFT at high concurrency includes queueing.
    """
    df, path = _read("aiconfigurator", AIC_SILICON_FILE)
    df["silicon_ttft_ms"] = df["silicon_ttft_ms"] * MILLI
    df["silicon_tpot_ms"] = df["silicon_tpot_ms"] * MILLI
    out = df.rename(columns={"silicon_ttft_ms": "ttft_s", "silicon_tpot_ms": "tpot_s"})
    for column in out.columns:
        if column.endswith(("_size", "_num_workers")) and pd.api.types.is_float_dtype(out[column]):
            out[column] = out[column].astype("Int64")  # raises if a value is fractional: none are
    out.insert(0, "gpu", out["system"])
    out["source"] = path.name
    return out


def split_holdout(df: pd.DataFrame, frac: float = 0.2, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Deterministic random hold-out split: (train, test) with round(frac * len(df)) test rows.

    Rows are drawn by `numpy.random.default_rng(seed).permutation`; both parts keep the original row
    order and index.
    """
    if not 0.0 <= frac <= 1.0:
        raise ConfigError(f"hold-out fraction must be in [0, 1], got {frac}")
    order = np.random.default_rng(seed).permutation(len(df))
    num_test = round(frac * len(df))
    test_pos = np.sort(order[:num_test])
    train_pos = np.sort(order[num_test:])
    return df.iloc[train_pos].copy(), df.iloc[test_pos].copy()

"""aiconfigurator tables (`shared/data/README.md` section 2): kernel GEMM and attention timings, with
NVML power for H200, and end-to-end serving ('silicon') rows of H100 and H200."""

from __future__ import annotations

from typing import Literal

import pandas as pd

from dse.calibrate.data.common import choose, dtype_column, gpu_key, optional_column, read_data_csv
from dse.errors import ConfigError
from dse.units import MILLI

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


def load_aiconfigurator_gemm(gpu: str) -> pd.DataFrame:
    """aiconfigurator GEMM table of one GPU: one row per (m, n, k, dtype) of `activation[m,k] @ W[k,n]`.

    Columns: gpu, m, n, k, dtype (`bf16`, `fp8` per-tensor, `fp8_block`), latency_s (one call),
    power_w and power_limit_w (NaN where not measured: only h200_sxm has them), kernel_source,
    framework, version, source. Power is reliable only for kernels longer than about 0.2-1 ms (README).
    `gpu` may also be spelled with hyphens (`h100-sxm`); the column holds the underscore name.
    """
    gpu = gpu_key(gpu)
    df, path = read_data_csv("aiconfigurator", choose("gpu for GEMM data", gpu, AIC_GEMM_FILES))
    return pd.DataFrame(
        {
            "gpu": gpu,
            "m": df["m"].astype("int64"),
            "n": df["n"].astype("int64"),
            "k": df["k"].astype("int64"),
            "dtype": dtype_column(df["gemm_dtype"], path.name),
            "latency_s": df["latency_ms"] * MILLI,
            "power_w": optional_column(df, "power_w"),
            "power_limit_w": optional_column(df, "power_limit_w"),
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
    gpu = gpu_key(gpu)
    gpus = sorted({g for g, _ in AIC_ATTENTION_FILES})
    if gpu not in gpus:
        raise ConfigError(f"unknown gpu for attention data {gpu!r}; allowed: {', '.join(gpus)}")
    if phase not in ("context", "generation"):
        raise ConfigError(f"unknown attention phase {phase!r}; allowed: context, generation")
    df, path = read_data_csv("aiconfigurator", AIC_ATTENTION_FILES[(gpu, phase)])
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
            "attn_dtype": dtype_column(df["attn_dtype"], path.name),
            "kv_dtype": dtype_column(df["kv_cache_dtype"], path.name),
            "latency_s": df["latency_ms"] * MILLI,
            "power_w": optional_column(df, "power_w"),
            "power_limit_w": optional_column(df, "power_limit_w"),
            "kernel_source": df["kernel_source"],
            "source": path.name,
        }
    )


def load_aiconfigurator_silicon() -> pd.DataFrame:
    """aiconfigurator end-to-end serving samples (TP1 dense models on h100_sxm / h200_sxm; no power).

    Columns as upstream, plus gpu (= system) and source; silicon_ttft_ms and silicon_tpot_ms become
    ttft_s and tpot_s; integer-valued sizes (batch_size = concurrency, tp_size, ...) are nullable ints.
    TTFT at high concurrency includes queueing.
    """
    df, path = read_data_csv("aiconfigurator", AIC_SILICON_FILE)
    df["silicon_ttft_ms"] = df["silicon_ttft_ms"] * MILLI
    df["silicon_tpot_ms"] = df["silicon_tpot_ms"] * MILLI
    out = df.rename(columns={"silicon_ttft_ms": "ttft_s", "silicon_tpot_ms": "tpot_s"})
    for column in out.columns:
        if column.endswith(("_size", "_num_workers")) and pd.api.types.is_float_dtype(out[column]):
            out[column] = out[column].astype("Int64")  # raises if a value is fractional: none are
    out.insert(0, "gpu", out["system"])
    out["source"] = path.name
    return out


AIC_MOE_FILES: dict[str, str] = {
    "h100_sxm": "h100_sxm_vllm-0.24.0_moe.csv",
    "h200_sxm": "h200_sxm_vllm-0.24.0_moe.csv",
}


def load_aiconfigurator_moe(gpu: str) -> pd.DataFrame:
    """aiconfigurator vLLM 0.24.0 fused-MoE layer table of one GPU (README section 5): one row per
    (tokens, shape, dtype, kernel, tp/ep shard, routing distribution), the layer on one GPU without
    the router GEMM, the TP all-reduce and the EP all-to-all.

    Columns: gpu, num_tokens (tokens on this rank before routing), hidden_size, inter_size (un-split),
    topk, num_experts (global), moe_tp_size, moe_ep_size, distribution (`balanced`, `power_law_*`),
    moe_dtype (as recorded: `bfloat16`, `fp8`, `fp8_block`, `w4a16_mxfp4`, `int4_wo`), kernel_source,
    latency_s (one layer), source.
    """
    gpu = gpu_key(gpu)
    df, path = read_data_csv("aiconfigurator", choose("gpu for MoE data", gpu, AIC_MOE_FILES))
    ints = ["num_tokens", "hidden_size", "inter_size", "topk", "num_experts", "moe_tp_size", "moe_ep_size"]
    out = df[ints].astype("int64")
    out.insert(0, "gpu", gpu)
    out["distribution"] = df["distribution"].astype(str)
    out["moe_dtype"] = df["moe_dtype"].astype(str)
    out["kernel_source"] = df["kernel_source"].astype(str)
    out["latency_s"] = df["latency_ms"] * MILLI
    out["source"] = path.name
    return out

"""LLMCompass real-hardware sweeps on an A100 (`shared/data/README.md`)."""

from __future__ import annotations

import pandas as pd

from dse.calibrate.data.common import choose, dtype_column, read_data_csv
from dse.units import GB, MILLI, TB

LLMCOMPASS_FILES: dict[str, str] = {
    "matmul": "a100_matmul.csv",
    "softmax": "a100_softmax.csv",
    "layernorm": "a100_layernorm.csv",
    "gelu": "a100_gelu.csv",
    "gpt3_layer_tp4": "a100_gpt3_175b_layer_tp4_breakdown.csv",
}


def load_llmcompass(kind: str) -> pd.DataFrame:
    """LLMCompass real-hardware sweeps on an A100 80 GB (latency includes launch and host overhead).

    Args:
        kind: `matmul` (bf16; m, n, k, flop_per_s), `softmax` / `layernorm` (fp16; rows, cols),
            `gelu` (fp16; num_elements), or `gpt3_layer_tp4` (per-op latency of one GPT-3 layer, TP4).

    Returns:
        latency_s plus the shape columns; kernels also get dtype, and the reductions and GELU
        throughput_elem_per_s and effective_bw_bytes_per_s (read + write of fp16, a DRAM lower bound).
    """
    df, path = read_data_csv("llmcompass", choose("LLMCompass kind", kind, LLMCOMPASS_FILES))
    out = pd.DataFrame({"gpu": "a100_80gb"}, index=df.index)
    if kind == "matmul":
        out = out.assign(m=df["m"], n=df["n"], k=df["k"], flop_per_s=df["tflops"] * TB)
    elif kind in ("softmax", "layernorm"):
        out = out.assign(rows=df["m"], cols=df["n"])
    elif kind == "gelu":
        out = out.assign(num_elements=df["num_elements"])
    else:
        out = out.assign(phase=df["phase"], op=df["op"], source_file=df["source_file"])
    if "dtype" in df:
        out["dtype"] = dtype_column(df["dtype"], path.name)
    out["latency_s"] = df["latency_ms"] * MILLI
    if "throughput_gelem_per_s" in df:
        out["throughput_elem_per_s"] = df["throughput_gelem_per_s"] * GB
        out["effective_bw_bytes_per_s"] = df["effective_bw_gbps_2x_fp16"] * GB
    out["source"] = path.name
    return out

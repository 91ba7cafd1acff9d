"""ML.ENERGY leaderboard serving measurements (`shared/data/README.md` section 3)."""

from __future__ import annotations

import pandas as pd

from dse.calibrate.data.common import read_data_csv
from dse.units import GB, MILLI

MLENERGY_FILE = "llm_single_gpu_configs.csv"


def load_mlenergy() -> pd.DataFrame:
    """ML.ENERGY leaderboard v3 single-GPU LLM serving configurations (vLLM, H100 and B200).

    Columns as upstream with SI units: `*_itl_ms` become median_itl_s, p90_itl_s, p95_itl_s, p99_itl_s;
    `total_params_b`/`activated_params_b` (billions) become num_params/num_active_params. avg_power_w,
    energy_per_output_token_j and output_throughput_tok_per_s are one measurement, not three (README).
    No prompt lengths and no TTFT exist in this data.
    """
    df, path = read_data_csv("mlenergy", MLENERGY_FILE)
    renames = {f"{p}_itl_ms": f"{p}_itl_s" for p in ("median", "p90", "p95", "p99")}
    for old in renames:
        df[old] = df[old] * MILLI
    df["total_params_b"] = df["total_params_b"] * GB
    df["activated_params_b"] = df["activated_params_b"] * GB
    renames |= {"total_params_b": "num_params", "activated_params_b": "num_active_params"}
    out = df.rename(columns=renames)
    out["source"] = path.name
    return out

"""Training datasets (`shared/data/README.md` section 7): LLM training throughput, CNN training throughput,
timm per-model training steps and forward passes, Zeus GPU training power and MLPerf node power. One reader
each; units in the column names as upstream (`step_time_s`, `tokens_per_s_per_gpu`, `avg_gpu_power_w`), ms
converted to s."""

from __future__ import annotations

import pandas as pd

from dse.calibrate.data.common import read_data_csv
from dse.units import MILLI

__all__ = [
    "load_cnn_training",
    "load_llm_training",
    "load_mlperf_power",
    "load_timm_inference",
    "load_timm_training",
    "load_zeus_power",
]

_DIR = "training"


def load_llm_training() -> pd.DataFrame:
    """`llm_training_throughput.csv`: one row per measured LLM training configuration (7 sources)."""
    df, _ = read_data_csv(_DIR, "llm_training_throughput.csv")
    return df


def load_cnn_training() -> pd.DataFrame:
    """`cnn_training_throughput_dle.csv`: DeepLearningExamples ConvNets on A100 / V100 (epoch averages)."""
    df, _ = read_data_csv(_DIR, "cnn_training_throughput_dle.csv")
    return df


def load_timm_training() -> pd.DataFrame:
    """`timm_train_rtx3090_pt112.csv` with `train_step_time_s` (upstream ms converted)."""
    df, _ = read_data_csv(_DIR, "timm_train_rtx3090_pt112.csv")
    df["train_step_time_s"] = df["train_step_time_ms"] * MILLI
    return df.drop(columns=["train_step_time_ms"])


def load_timm_inference() -> pd.DataFrame:
    """`timm_infer_rtx4090_pt291.csv` with `infer_step_time_s` (upstream ms converted)."""
    df, _ = read_data_csv(_DIR, "timm_infer_rtx4090_pt291.csv")
    df["infer_step_time_s"] = df["infer_step_time_ms"] * MILLI
    return df.drop(columns=["infer_step_time_ms"])


def load_zeus_power() -> pd.DataFrame:
    """`zeus_gpu_training_power.csv`: per (GPU, network, batch, power limit) epoch time and average power."""
    df, _ = read_data_csv(_DIR, "zeus_gpu_training_power.csv")
    return df


def load_mlperf_power() -> pd.DataFrame:
    """`mlperf_training_v4.0_smc_h100_power.csv`: whole-node power of MLPerf Training v4.0 runs."""
    df, _ = read_data_csv(_DIR, "mlperf_training_v4.0_smc_h100_power.csv")
    return df

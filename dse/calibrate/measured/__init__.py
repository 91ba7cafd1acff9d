"""Measurements we made ourselves with `dse`'s harness on a lent GPU (provenance in this folder's README.md).

kernels = own_h100_kernels_path()           # a `dse measure kernels` samples file (KernelSample schema)
runs = load_own_h100_whole_models()         # EnergAIzer-protocol whole models, one row per shape
steps = load_own_h100_training()            # eager PyTorch training steps and vision forward passes
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from dse.units import MHZ, MILLI

MEASURED_DIR = Path(__file__).resolve().parent
H100_GPU = "h100-sxm"


def own_h100_kernels_path() -> Path:
    """The H100 SXM kernel samples of 2026-11-26 (default clocks; throttled GEMMs record their clock)."""
    return MEASURED_DIR / "h100_sxm_kernels.csv"


def load_own_h100_whole_models() -> pd.DataFrame:
    """The H100 SXM whole-model runs of 2026-11-26 in the columns of `load_energaizer_measurements`.

    Columns added here: `latency_s`, `avg_sm_clock_hz`, `gpu_busy_s`, `workload_path` (absolute path of
    the matching kernel list under the data root, or None where the artifact has none), `valid` (True).
    """
    from dse.calibrate.data.common import data_root

    df = pd.read_csv(MEASURED_DIR / "h100_sxm_whole_models.csv")
    root = data_root() / "energaizer"
    out = df.copy()
    out["seq_len"] = df["seq_len"].astype("Int64")
    out["attention"] = df["attention"].fillna("")
    out["latency_s"] = df["time_ms"] * MILLI
    out["gpu_busy_s"] = df["gpu_busy_ms"] * MILLI
    out["avg_sm_clock_hz"] = df["avg_sm_clock_mhz"] * MHZ
    out["workload_path"] = pd.Series(
        [str(root / rel) if (root / rel).is_file() else None for rel in df["workload_json"]],
        index=df.index,
        dtype=object,
    )
    out["valid"] = True
    out["source"] = "dse/calibrate/measured/h100_sxm_whole_models.csv"
    return out


def load_own_h100_training() -> pd.DataFrame:
    """The H100 SXM training steps and vision forward passes of 2026-11-26 (evening session): runs 1, 2
    and 4, each shape once (its first measurement; run 3 repeated five shapes with 0.5 s windows under the
    profiler, and run 4 six more, README.md). Columns added: `step_time_s`, `forward_s`, `backward_s`,
    `optimizer_s`, `image_size` and `seq_len` as nullable integers, `memory_format` as dse's nhwc/nchw (""
    for transformers)."""
    df = pd.read_csv(MEASURED_DIR / "h100_sxm_training.csv")
    key = ["mode", "model", "precision", "batch", "image_size", "seq_len", "memory_format"]
    out = df[df["run"] != 3].drop_duplicates(subset=key, keep="first").reset_index(drop=True)
    for col in ("step_time", "forward", "backward", "optimizer"):
        out[f"{col}_s"] = out[f"{col}_ms"] * MILLI
    out["image_size"] = out["image_size"].astype("Int64")
    out["seq_len"] = out["seq_len"].astype("Int64")
    fmt = {"channels_last": "nhwc", "contiguous": "nchw"}
    out["memory_format"] = [fmt.get(str(v), "") for v in out["memory_format"].fillna("")]
    return out


def own_h100_training_kernels_path() -> Path:
    """Per-kernel GPU time of 15 of those shapes (torch profiler, 3 steps; runs 3 and 4, README.md)."""
    return MEASURED_DIR / "h100_sxm_training_kernels.csv"

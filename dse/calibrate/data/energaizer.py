"""EnergAIzer NVML measurements of whole forward passes on A100 PCIe and A10 (`shared/data/README.md`
section 1), at fixed clocks and in a DVFS sweep."""

from __future__ import annotations

import pandas as pd

from dse.calibrate.data.common import choose, read_data_csv
from dse.units import MHZ, MILLI

ENERGAIZER_FILES: dict[str, str] = {
    "a100": "measurements_a100pcie_nvml.csv",
    "a10": "measurements_a10_nvml.csv",
    "dvfs": "measurements_dvfs_a100pcie_nvml.csv",
}


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
    df, path = read_data_csv("energaizer", choose("EnergAIzer measurement set", which, ENERGAIZER_FILES))
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

"""ML.ENERGY rows nothing was fitted on: MoE, gemma-3, gpt-oss and Llama on H100, and every B200 row.

    df = mlenergy_transfer_frame()          # one row per configuration, the load model vs measured

`dse.calibrate.validate.serving` scores the 30 dense Qwen3 rows on one H100 that the serving mapping
(prompt lengths, the running-context fraction per task) was built on and that the transfer validation
uses. The rest of the ML.ENERGY file (`shared/data/README.md` section 3) holds models and a GPU that no
fit in this package has seen: they are scored here with the same mapping (`mlenergy_load_request`:
closed loop at concurrency = max_num_seqs, vLLM 0.11.1, the task's assumed prompt and length spread),
as a transfer test of the physics.

Rows: text tasks (lm-arena-chat, gpqa), models in the catalog (TRANSFER_MODELS), one GPU, minus the
in-sample rows, and max_num_seqs <= TRANSFER_MAX_SEQS (a simulation of thousands of running sequences
costs tens of seconds per row). Precision: bf16 (the configs' dtype), mxfp4 expert weights for gpt-oss
(its checkpoint; `auto` in the configs). Skipped: sourcegraph-fim (its prompts, fill-in-the-middle code
files, have no length in the data or an estimate of ours), image and video tasks, Nemotron-H (Mamba).

What the rows show (`dse validate serving`, source `mlenergy_transfer`):
- H100: TPOT 10.1% (bias -3%), power 6.5% (bias -3%), J/token 11.7% (bias -9%), with vLLM 0.11's host
  time per step (`dse.serving.presets.VLLM_SYNC_HOST_STEP_S`, fitted on the in-sample rows; without it
  TPOT 12.8%, bias -9%) and its eager steps' per-layer dispatch (`VLLM_EAGER_LAYER_HOST_S`; before it
  10.8% / 6.4% / 11.8%; B200 chat rows TPOT 12.4 -> 9.3%, throughput 28.5 -> 17.8%). gpt-oss was the
  largest power miss (120b: -19% to -29%) until the dequantization of its MXFP4 experts on the CUDA
  cores was counted (`dse.perf.gemm_steps.DEQUANT_SM_CYCLES_PER_WEIGHT`); 20b's and gemma-3-12b's TPOT
  stay 10-23% short, more so at larger batches.
- B200: vLLM 0.11.1 on Blackwell runs far below what the hardware allows in many rows: Qwen3-8B gpqa at
  8 sequences has a median ITL of 32 ms at 294 W (H100: 9.7 ms at 494 W) and Llama-3.1-8B goes from 9 ms
  at 64 sequences to 27 ms at 128 while its power falls from 617 W to 449 W. A GPU that slows down while
  its power falls is waiting for something off the GPU (host scheduling, attention planning, sampling).
  The kernel model prices the GPU's work, so it is fast on these rows and its power is high. The `gpu_bound`
  subset keeps the B200 rows the measurements show keep the GPU's pace: a median ITL at most 0.8 x that
  of the H100 row of the same model, task and max_num_seqs (`B200_GPU_BOUND_ITL_RATIO`; the 34 such rows
  read 0.52-0.73, the next 0.92). A row without an H100 twin (Qwen3-32B gpqa, Llama-3.1-8B, the larger
  batches) cannot show it and is left out, as are rows that gain less than that from B200's 2.3x rates.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from dse.calibrate.data.mlenergy import load_mlenergy
from dse.calibrate.validate.common import MLENERGY_TRANSFER, load_metrics
from dse.calibrate.validate.serving import (
    MLENERGY_GPU,
    MLENERGY_MODELS,
    MLENERGY_TASKS,
    mlenergy_load_requests,
)
from dse.perf.types import OperatingPoint

# ML.ENERGY model id -> catalog name: every text model of the file the catalog has.
TRANSFER_MODELS: dict[str, str] = {
    **MLENERGY_MODELS,
    "Qwen/Qwen3-30B-A3B-Instruct-2507": "qwen3-30b-a3b",
    "Qwen/Qwen3-30B-A3B-Thinking-2507": "qwen3-30b-a3b",
    "google/gemma-3-12b-it": "gemma-3-12b",
    "google/gemma-3-27b-it": "gemma-3-27b",
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "openai/gpt-oss-20b": "gpt-oss-20b",
    "openai/gpt-oss-120b": "gpt-oss-120b",
}
TRANSFER_GPUS: dict[str, str] = {"H100": "h100-sxm", "B200": "b200"}
TRANSFER_MAX_SEQS = 256


def transfer_rows() -> pd.DataFrame:
    """The ML.ENERGY rows scored here (module docstring), with `catalog_model` and `catalog_gpu` columns."""
    df = load_mlenergy()
    gpu = df["gpu_model"].map(lambda g: next((v for k, v in TRANSFER_GPUS.items() if k in str(g)), None))
    keep = (
        gpu.notna()
        & (df["num_gpus"] == 1)
        & df["model"].isin(list(TRANSFER_MODELS))
        & df["task"].isin(MLENERGY_TASKS)
        & (df["max_num_seqs"] <= TRANSFER_MAX_SEQS)
    )
    # the in-sample rows (`mlenergy_rows`): dense Qwen3 on one H100
    in_sample = (gpu == MLENERGY_GPU) & df["model"].isin(list(MLENERGY_MODELS))
    out = df[keep & ~in_sample].assign(catalog_model=df["model"].map(TRANSFER_MODELS), catalog_gpu=gpu)
    return out.assign(off_gpu_bound=_not_shown_gpu_bound(df, out)).reset_index(drop=True)


# A B200 step at most this fraction of its H100 twin's (module docstring): B200 has 2.3-2.4x H100's HBM
# bandwidth and Tensor-Core rate; the twins measured show 0.52-0.73 where the B200 keeps the GPU's pace, then
# a gap to 0.92 and more where it does not.
B200_GPU_BOUND_ITL_RATIO = 0.8


def _not_shown_gpu_bound(df: pd.DataFrame, rows: pd.DataFrame) -> pd.Series:
    """Per B200 row of `rows`: True unless its median ITL is at most `B200_GPU_BOUND_ITL_RATIO` x that of
    the H100 row of the same model, task and max_num_seqs in `df`: a step that gains less from 2.3x the
    GPU is bound by something off it, and a row without an H100 twin cannot show it is not. From the
    measurements alone, no prediction. H100 rows are never flagged."""
    key = ["model", "task", "max_num_seqs"]
    h100 = df[df["gpu_model"].str.contains("H100") & (df["num_gpus"] == 1)]
    h100_itl = h100.groupby(key)["median_itl_s"].min()
    joined = rows.join(h100_itl.rename("h100_itl_s"), on=key)
    shown = joined["median_itl_s"] <= B200_GPU_BOUND_ITL_RATIO * joined["h100_itl_s"]  # False without a twin
    return (joined["catalog_gpu"] == "b200") & ~shown


def mlenergy_transfer_frame(
    *, point: OperatingPoint | None = None, coeffs: Any = None, power_coeffs: Any = None
) -> pd.DataFrame:
    """Per row: the load model in the benchmark's mode against the measured metrics (module docstring)."""
    out = []
    for r, model, load in mlenergy_load_requests(transfer_rows(), model_column="catalog_model"):
        gpu = str(r["catalog_gpu"])
        m = load_metrics(model, gpu, load, point=point, coeffs=coeffs, power_coeffs=power_coeffs)
        out.append(
            {
                "source": MLENERGY_TRANSFER,
                "id": f"{gpu}/{model}/{r['task']}/seqs{int(r['max_num_seqs'])}",
                "model": model,
                "gpu": gpu,
                "task": r["task"],
                "gpu_task": f"{gpu}/{r['task']}",
                "max_num_seqs": int(r["max_num_seqs"]),
                "off_gpu_bound": bool(r["off_gpu_bound"]),
                "tpot_s": m["tpot_p50_s"],
                "avg_power_w": m["avg_power_w"],
                "energy_per_output_token_j": m["energy_per_output_token_j"],
                "output_tokens_per_s": m["output_tokens_per_s"],
                "avg_batch_size": m["avg_batch_size"],
                "median_itl_s": float(r["median_itl_s"]),
                "meas_avg_power_w": float(r["avg_power_w"]),
                "meas_energy_per_output_token_j": float(r["energy_per_output_token_j"]),
                "meas_output_tokens_per_s": float(r["output_throughput_tok_per_s"]),
                "meas_avg_batch_size": float(r["avg_batch_size"]),
            }
        )
    return pd.DataFrame(out)


__all__ = [
    "MLENERGY_TRANSFER",
    "TRANSFER_MAX_SEQS",
    "TRANSFER_MODELS",
    "mlenergy_transfer_frame",
    "transfer_rows",
]

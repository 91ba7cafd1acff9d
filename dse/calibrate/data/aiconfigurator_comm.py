"""aiconfigurator collective-communication tables (`shared/data/README.md` section 5): NCCL (nccl-tests),
the frameworks' custom all-reduce kernels, and DeepEP MoE dispatch/combine, on one node of H100, H200 and
B200 SXM GPUs (NVSwitch).

Each loader returns one row per measured point with the columns `table`, `gpu` (`h100_sxm`, ...),
`algorithm` and `collective` (the names of `dse.perf.collectives`), `num_gpus`, `message_bytes` (nccl-tests
convention; MoE rows carry their shape instead, see `load_comm_moe`), `latency_s` and `source`.
"""

from __future__ import annotations

import pandas as pd

from dse.calibrate.data.common import read_data_csv
from dse.units import MICRO, MILLI

COMM_NCCL_FILE = "comm_nccl_h100_h200_b200.csv"
COMM_CUSTOM_AR_FILE = "comm_custom_all_reduce_h100_h200_b200.csv"
COMM_MOE_FILE = "comm_moe_alltoall_deepep_h100_h200_b200.csv"

_NCCL_OPS = {
    "all_reduce": "all_reduce",
    "all_gather": "all_gather",
    "reduce_scatter": "reduce_scatter",
    "alltoall": "all_to_all",
}
# The newest graph-captured table of each framework (older versions agree within a few percent, README 5).
CUSTOM_AR_TABLES: dict[str, str] = {
    "vllm": "vllm/0.24.0",
    "trtllm": "trtllm/1.3.0rc20",
    "sglang": "sglang/0.5.10",  # 0.5.14 has 38 us outliers at 1 KiB on 8 GPUs
}
# vLLM 0.24.0 moe_a2a: the one MoE source with H100, H200 and B200 from one collection (2026-08-31).
MOE_TABLE = "vllm/0.24.0"
MOE_BACKENDS = ("deepep_ht", "deepep_ll")


def load_comm_nccl(default_tables_only: bool = True) -> pd.DataFrame:
    """NCCL collectives, the median of the 2-3 repeated runs per point (repeats differ by up to x4 on small
    messages, README 5). By default only the table each system's aiconfigurator config selects."""
    df, path = read_data_csv("aiconfigurator", COMM_NCCL_FILE)
    if default_tables_only:
        df = df[df["aic_default_table"].astype(bool)]
    keys = ["system", "nccl_table", "op_name", "nccl_dtype", "num_gpus", "message_bytes"]
    g = df.groupby(keys, as_index=False)["latency_ms"].median()
    return pd.DataFrame(
        {
            "table": "nccl/" + g["nccl_table"].astype(str),
            "gpu": g["system"],
            "algorithm": "nccl",
            "collective": g["op_name"].map(_NCCL_OPS),
            "dtype": g["nccl_dtype"],
            "num_gpus": g["num_gpus"].astype("int64"),
            "message_bytes": g["message_bytes"].astype(float),
            "latency_s": g["latency_ms"] * MILLI,
            "source": path.name,
        }
    )


def load_comm_custom_all_reduce(tables: dict[str, str] | None = None) -> pd.DataFrame:
    """Framework all-reduce inside CUDA graphs (what serving replays), one table per framework
    (default CUSTOM_AR_TABLES); bf16 messages. Eager rows add the framework's launch cost and are left out."""
    df, path = read_data_csv("aiconfigurator", COMM_CUSTOM_AR_FILE)
    chosen = tables or CUSTOM_AR_TABLES
    frames = []
    for algorithm, table in chosen.items():
        sub = df[(df["table"] == table) & df["cuda_graph"].astype(bool)]
        frames.append(
            pd.DataFrame(
                {
                    "table": table,
                    "gpu": sub["system"],
                    "algorithm": algorithm,
                    "collective": "all_reduce",
                    "dtype": "bf16",
                    "num_gpus": sub["num_gpus"].astype("int64"),
                    "message_bytes": sub["message_bytes"].astype(float),
                    "latency_s": sub["latency_ms"] * MILLI,
                    "source": path.name,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def load_comm_moe(table: str = MOE_TABLE) -> pd.DataFrame:
    """DeepEP dispatch and combine on one 8-GPU node, per phase (`moe_dispatch`, `moe_combine`).

    Extra columns: num_tokens (per rank, entering dispatch), hidden_size, topk, num_experts. The payload
    dtype is not recorded (README 5); `message_bytes` is left to the caller (`dse.perf.collectives.
    moe_exchange_bytes`), which assumes one and lets the fit absorb the difference.
    """
    df, path = read_data_csv("aiconfigurator", COMM_MOE_FILE)
    sub = df[(df["table"] == table) & df["comm_backend"].isin(MOE_BACKENDS) & (df["node_num"] == 1)]
    return pd.DataFrame(
        {
            "table": table,
            "gpu": sub["system"],
            "algorithm": sub["comm_backend"],
            "collective": "moe_" + sub["phase"],
            "num_gpus": sub["ep_size"].astype("int64"),
            "num_tokens": sub["num_tokens"].astype("int64"),
            "hidden_size": sub["hidden_size"].astype("int64"),
            "topk": sub["topk"].astype("int64"),
            "num_experts": sub["num_experts"].astype("int64"),
            "latency_s": sub["latency_us"] * MICRO,
            "source": path.name,
        }
    ).reset_index(drop=True)

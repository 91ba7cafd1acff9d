"""Synthetic run directories in the layout `dse.search` writes (results/<study>/<run_id>/), via numpy."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

CLOCKS_MHZ = np.arange(1005, 1981, 195)  # 1005, 1200, ..., 1980
PRECISIONS = ("bf16", "fp8", "fp16")
MEMORIES = ("hbm3", "hbm3e", "gddr7")
POWER_LIMIT_W = 700.0
MODULES = ("dram", "l2", "smem", "tensor", "cuda", "sfu", "idle")
OPS = ("attn/qkv_proj", "attn/flash_attn", "attn/o_proj", "mlp/gate_up_proj", "mlp/down_proj", "norm")


def synthetic_trials(n: int, seed: int = 0) -> pd.DataFrame:
    """`n` points with a smooth latency/energy trade-off, about 10% infeasible and 1% failed."""
    rng = np.random.default_rng(seed)
    num_sms = rng.integers(66, 145, n)
    clock = rng.choice(CLOCKS_MHZ, n)
    precision = rng.choice(np.array(PRECISIONS, dtype=object), n)
    memory = rng.choice(np.array(MEMORIES, dtype=object), n)
    batch = rng.choice(np.array([1, 8, 16, 32, 64]), n)
    energy_factor = rng.uniform(0.7, 1.3, n)
    # A conditional parameter (`when: {gpu.memory.technology: hbm3e}`): absent for the other memories.
    data_rate = np.where(memory == "hbm3e", rng.uniform(5.0, 9.8, n), np.nan)
    speed = {"bf16": 1.0, "fp16": 1.0, "fp8": 1.8}
    bw = {"hbm3": 3.35e12, "hbm3e": 4.8e12, "gddr7": 1.8e12}
    flop_s = np.array([speed[p] for p in precision]) * num_sms * clock * 1e6 * 4096
    mem_s = 16e9 / np.array([bw[m] for m in memory])
    tpot_s = np.maximum(batch * 16e9 / flop_s, mem_s) * rng.uniform(1.0, 1.15, n)
    power_w = 150 + 0.0021 * num_sms * clock * (1 + 0.2 * (precision == "fp8")) * rng.uniform(0.9, 1.1, n)
    e2e_s = tpot_s * 256 + 0.02
    energy_j = power_w * e2e_s
    df = pd.DataFrame(
        {
            "point_id": [f"{i:012x}" for i in rng.permutation(n) * 7919 + 0xA5A5],
            "seq": np.arange(n),
            "param.gpu.num_sms": num_sms,
            "param.sm_clock_mhz": clock,
            "param.precision": precision,
            "param.gpu.memory.technology": memory,
            "param.batch": batch,
            "param.workload.seq_len": np.full(n, 4096),
            "param.gpu.memory.energy_factor": energy_factor,
            "param.gpu.memory.data_rate_gbit_per_s": data_rate,
            "metric.e2e_latency_s": e2e_s,
            "metric.ttft_s": 0.02 + 0 * e2e_s,
            "metric.tpot_s": tpot_s,
            "metric.avg_power_w": power_w,
            "metric.energy_j": energy_j,
            "metric.energy_per_output_token_j": energy_j / (256 * batch),
            "metric.memory_bytes": 16e9 + batch * 5e8,
            # The rest of what the serving evaluator logs (some constant across points).
            "metric.output_tokens_per_s": batch * 256 / e2e_s,
            "metric.prefill_energy_j": power_w * 0.02,
            "metric.decode_energy_j": energy_j - power_w * 0.02,
            "metric.energy_per_request_j": energy_j / batch,
            "metric.peak_power_w": power_w * 1.2,
            "metric.effective_clock_mhz": clock * 0.98,
            "metric.weight_bytes": np.where(precision == "fp8", 8e9, 16e9),
            "metric.kv_cache_bytes": batch * 5e8,
            "metric.activation_bytes": batch * 1.1e7,
            "metric.memory_capacity_bytes": np.full(n, 80e9),
            "metric.tdp_w": np.full(n, 700.0),
            "metric.sm_clock_hz": clock * 1e6,
            "metric.memory_bw_bytes_per_s": np.array([bw[m] for m in memory]),
            "metric.power_cap_w": np.full(n, 700.0),
        }
    )
    df["feasible"] = power_w <= POWER_LIMIT_W
    df["reason"] = np.where(
        df["feasible"], "", [f"avg_power_w {p:.0f} W > {POWER_LIMIT_W:.0f} W" for p in power_w]
    )
    df["error"] = None
    failed = rng.random(n) < 0.01
    df.loc[failed, "error"] = "ValueError: tile does not fit in shared memory"
    df.loc[failed, [c for c in df.columns if c.startswith("metric.")]] = np.nan
    df.loc[failed, "feasible"] = False
    df.loc[failed, "reason"] = "error"
    return df


def naive_front(values: np.ndarray) -> np.ndarray:
    """O(n^2) non-dominated mask (all objectives minimised) to check the report against."""
    n = len(values)
    mask = np.ones(n, dtype=bool)
    for i in range(n):
        dominated = np.all(values <= values[i], axis=1) & np.any(values < values[i], axis=1)
        mask[i] = not dominated.any()
    return mask


def _objectives() -> list[dict[str, str]]:
    return [
        {"metric": "e2e_latency_s", "direction": "minimize"},
        {"metric": "energy_per_output_token_j", "direction": "minimize"},
    ]


def write_run(
    root: Path,
    n: int = 300,
    *,
    seed: int = 0,
    parquet: bool = True,
    summary: bool = True,
    breakdowns: bool = False,
    clock_varies: bool = True,
    jsonl: bool = True,
) -> Path:
    """Write a run directory like the search runner does and return its path."""
    from dse.search.pareto import pareto_mask

    run_dir = root / "results" / "h100-llama3-8b-decode" / f"run-{seed}-{n}"
    run_dir.mkdir(parents=True)
    df = synthetic_trials(n, seed)
    if not clock_varies:
        df["param.sm_clock_mhz"] = 1980
    objs = ["metric.e2e_latency_s", "metric.energy_per_output_token_j"]
    ok = (df["feasible"] & df["error"].isna()).to_numpy()
    on_front = np.zeros(n, dtype=bool)
    on_front[ok] = pareto_mask(df.loc[ok, objs].to_numpy(), ["minimize", "minimize"])
    df["on_front"] = on_front

    with (run_dir / "points.jsonl").open("w") as fh:
        for row in df.to_dict("records") if jsonl else ():
            rec = {
                "point_id": row["point_id"],
                "params": {
                    k.removeprefix("param."): _py(v) for k, v in row.items() if k.startswith("param.")
                },
                "metrics": {
                    k.removeprefix("metric."): _py(v) for k, v in row.items() if k.startswith("metric.")
                },
                "feasible": bool(row["feasible"]),
                "reason": row["reason"],
                "error": row["error"],
                "t_eval_s": 0.003,
                "seq": int(row["seq"]),
            }
            fh.write(json.dumps(rec) + "\n")
    if parquet:
        df.to_parquet(run_dir / "trials.parquet", index=False)
        df[df["on_front"]].to_csv(run_dir / "pareto.csv", index=False)
    (run_dir / "study.resolved.yaml").write_text(
        yaml.safe_dump(
            {
                "name": "h100-llama3-8b-decode",
                "gpu": "h100_sxm",
                "objectives": {"e2e_latency_s": "minimize", "energy_per_output_token_j": "minimize"},
                "constraints": ["avg_power_w <= 700"],
                "search": {"sampler": {"kind": "nsga2", "population": 64}, "n_trials": n},
            }
        )
    )
    (run_dir / "env.json").write_text(json.dumps({"python": "3.11.7", "dse": "0.1.0", "host": "ci"}))
    if summary:
        summary_obj = {
            "study": "h100-llama3-8b-decode",
            "run_id": run_dir.name,
            "objectives": _objectives(),
            "constraints": [{"metric": "avg_power_w", "op": "<=", "value": POWER_LIMIT_W}],
            "parameters": [
                {"path": "gpu.num_sms", "kind": "int", "low": 66, "high": 144},
                {"path": "sm_clock_mhz", "kind": "categorical", "values": [int(c) for c in CLOCKS_MHZ]},
                {"path": "precision", "kind": "categorical", "values": list(PRECISIONS)},
                {"path": "gpu.memory.technology", "kind": "categorical", "values": list(MEMORIES)},
                {"path": "batch", "kind": "categorical", "values": [1, 8, 16, 32, 64]},
                {"path": "workload.seq_len", "kind": "constant", "value": 4096},
                {"path": "gpu.memory.energy_factor", "kind": "float", "low": 0.7, "high": 1.3},
                {
                    "path": "gpu.memory.data_rate_gbit_per_s",
                    "kind": "float",
                    "low": 5.0,
                    "high": 9.8,
                    "when": {"gpu.memory.technology": "hbm3e"},
                },
            ],
            "n_points": n,
            "n_feasible": int(ok.sum()),
            "n_failed": int(df["error"].notna().sum()),
            "front_size": int(on_front.sum()),
            "hypervolume": 0.8123,
            "reference_point": [1.0, 1.0],
            "stop_reason": f"point budget reached ({n} points)",
            "elapsed_s": 12.5,
            "points_per_s": n / 12.5,
            "sampler": "nsga2",
            "executor": "process",
            "seed": seed,
        }
        (run_dir / "summary.json").write_text(json.dumps(summary_obj, indent=2))
    if breakdowns:
        out = {}
        for row in df[df["on_front"]].to_dict("records"):
            total = row["metric.energy_j"]
            mod = np.linspace(1, 2, len(MODULES))
            ops = np.linspace(1, 3, len(OPS))
            out[row["point_id"]] = {
                "by_module": dict(zip(MODULES, (total * mod / mod.sum()).tolist(), strict=True)),
                "by_op": {
                    f"llama-3.1-8b/layer[0-31]/{op}": e
                    for op, e in zip(OPS, (total * ops / ops.sum()).tolist(), strict=True)
                },
            }
        (run_dir / "breakdowns.json").write_text(json.dumps(out))
    return run_dir


def _py(value):
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and value != value:
        return None
    return value

"""Multi-GPU and MoE serving validation: aiconfigurator's `silicon_sample_moe_multigpu_h100_h200.csv`.

    df = multigpu_frame()                       # one row per measured configuration, predicted vs measured
    multigpu_summary(df)                        # TTFT and TPOT MAPE per engine

Rows (shared/data/README.md, aiconfigurator section): aggregated serving (`mode` agg), one node
(tp x attention_dp <= 8), no pipeline parallelism (no row has any), models in the catalog
(MULTIGPU_MODELS: every model of the file), and the parallelism
fields consistent (moe_tp x moe_ep = tp x attention_dp for MoE models: the 19 Qwen3-235B rows the
README flags are left out). Duplicated measurements are dropped on (system, backend, isl, osl, TTFT,
TPOT), as the README says.

Each row is `predict_load` in the benchmark's mode, as `dse.calibrate.validate.silicon` does for the
TP1 rows (closed loop at concurrency = batch_size, the row's engine, precision and KV dtype, the lengths
its benchmark drew (`silicon_lengths`: fixed for aiconfigurator's gap-analysis runs, spread for the
others), the TensorRT-LLM step budget), with tp = tp_size, dp = attention_dp_size and ep = moe_ep_size
(1 for dense models).

Where TTFT goes (issue 17; an even 60-row sample, `multigpu_frame(max_rows=60)`): the model was too
low almost everywhere (MAPE 65%, bias -56%). Decomposed per row into one isolated prefill step
(concurrency 1), communication inside it and the queueing of the closed loop:
- communication is 10-50% of a prefill step (tp 2-8), too little to explain 2-10x;
- the gap-analysis runs send fixed lengths (`silicon_lengths`), so waves stay together: their TTFT
  grows with concurrency x isl as whole waves of prompts queue (SGLang Qwen3-32B tp4: ~19 us per
  prompt token of the whole wave at concurrency 128). Spread lengths let waves drift apart and
  under-count that queueing. Fixed lengths there: TTFT MAPE 65% -> 56% (vllm 59 -> 56, trtllm 65 -> 54,
  sglang 79 -> 68), TPOT unchanged (37%);
- MoE prefill was under-priced by the kernel model before the fused-MoE correction (`dse.perf.moe`,
  fitted on the H100 table): vLLM's gpt-oss-120b MXFP4 layer is now 0.77 / 3.0 ms at 1024 / 8192 tokens
  against the H100 table's 0.86 / 2.9 ms (0.44 / 1.24 ms before). The vLLM gpt-oss-120b TTFT is still
  -45% to -78% on every row (113 rows; TPOT within ~10% except the concurrency-512 rows), so the rest is
  not the MoE kernel. On H200 at TP8 and concurrency 4 the measured excess over the simulation is ~24 ms
  at 1024 input tokens and ~82 ms at 8192 (about 16 ms + 8 us per prompt token); at 1024 tokens it is
  6-7 decode steps at every TP (60 / 40 / 29 / 24 ms at TP 1 / 2 / 4 / 8, TPOT 9 / 5 / 4 / 3.6 ms); since
  vLLM's eager steps wait for its per-layer host dispatch (`dse.serving.presets.VLLM_EAGER_LAYER_HOST_S`)
  the TP8 excess at 1,024 tokens is 8-12 ms and TP1's unchanged (its GPU time is longer than the host's).
  Counting each layer's kernel launches in that dispatch (session 27; MoE layers launch 14-29 against a dense
  layer's 10) took the MoE rows' low-concurrency excess down (vLLM MiniMax-M2.5 and Kimi-K2.5 TTFT 46 -> 37%
  and 48 -> 33%, all vLLM and SGLang rows 41.3 -> 36.5%); the rest is still short (SGLang DeepSeek-V3, GLM-5
  and Qwen3.5 by ~150-250 ms at 1,024 tokens), and the MoE rows' TPOT, already over, rose 1-2 points, so
  what remains is not in the engine step: per-request work outside it (tokenization, the API server) is a
  candidate the rows cannot separate.
  Candidates, not tested: gpt-oss's attention with sinks on a slower attention backend in prefill, or
  control tokens of its harmony reply format that clients do not count as the first token;
- rows no engine default explains: gpt-oss-120b vLLM at concurrency 512 (TTFT ~20 s with a TPOT of
  4-6 ms: ~100 running, a max_num_seqs the row does not record, and a TPOT below one weight read per
  step, i.e. speculative decoding); DeepSeek-R1 TensorRT-LLM with tp 8 / ep 8 (TPOT 35-45% above ours
  at low concurrency: MTP); Llama-3.1-8B TensorRT-LLM 1.0.0rc3, whose TTFT grows with osl at
  concurrency 8 (~ e2e / concurrency: one request's worth of waiting that the engine defaults do not
  produce).

aiconfigurator's gap-analysis runs take the engine limits its generator writes and the request count of its
benchmark script (`dse.calibrate.validate.silicon.silicon_engine_limits`, session 29). On all 404
TensorRT-LLM gap-analysis rows: TPOT 14.5% -> 12.4% (at concurrency 8 / 16 its bias -3% / -4% -> +2% /
0%), TTFT 45.1% -> 78.1% (bias -41% -> -69%). With one prompt a step the TTFT falls short by a latency per
request outside the simulated engine, at concurrency <= 16 (median): Llama-3.1-8B 100-270 ms (TP 8 to 2,
isl 1024-4096, isolated prefills of 9-56 ms), Qwen3-32B 100-120 ms at isl 1024 rising to 280-515 ms at
4096, Qwen3-235B 120-230 ms, the most at the shortest prompts (128 tokens): not GPU work (those rows'
TPOT fits within a few %), not produced by any engine setting the runs record; not modelled. SGLang's
generated settings (mixed chunks, max_prefill_tokens isl + 1500) are not taken: they move its rows of this
sample from TTFT 28.8% / TPOT 16.9% to 58.6% / 19.8%, where its prefill-first default fits them.

Session 30: most of that latency is when a client's next request can join a step (`dse.serving.scheduler`,
arrivals: it misses the step scheduled right after its predecessor's last token, and engines scheduling
ahead of the GPU have scheduled one more). All 1,225 rows: TTFT 53.0% -> 39.5% (bias -44% -> -28%;
TensorRT-LLM 71.1 -> 50.5%, vLLM 34.4 -> 25.2%, SGLang 43.4 -> 40.3%), TPOT 17.2% -> 17.5%; the 60-row
sample TTFT 44.9% -> 31.6%, TPOT 14.3% -> 14.8%.

Session 31 (`scripts/analyze_multigpu_ttft.py` breaks the error down; README, serving accuracy): the
context steps of TensorRT-LLM run without CUDA graphs and wait for the host's per-layer dispatch
(`dse.serving.presets`). All rows TTFT 39.5% -> 35.4% (TensorRT-LLM 50.5 -> 41.7%), TPOT 17.5% both; the
sample TTFT 31.6% -> 26.6%, TPOT 14.8% -> 13.6%. Left: TensorRT-LLM Llama-3.1-8B rows short by ~0.85 of
e2e / C at 8-32 clients (waiting, not GPU work), vLLM's 4-8k-token prompts of the MoE models and Qwen3-32B
(-20% to -47%, TPOT within ~10%), the SGLang MoE rows (85-180 ms at 1,024 tokens) and its Llama-3.1-8B
waves (over, +73%).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from dse.calibrate.data.aiconfigurator import read_data_csv
from dse.calibrate.validate.common import cached_arch, load_metrics
from dse.calibrate.validate.silicon import (
    SILICON_GPUS,
    SILICON_SAMPLING,
    silicon_engine_limits,
    silicon_host_step_s,
    silicon_kv_dtype,
    silicon_lengths,
    silicon_memory_fraction,
    silicon_requests,
)
from dse.errors import DseError
from dse.perf.types import OperatingPoint
from dse.serving.load import LoadRequest

SILICON_MULTIGPU = "aiconfigurator_silicon_multigpu"
MULTIGPU_FILE = "silicon_sample_moe_multigpu_h100_h200.csv"
# Rows `dse validate serving` scores by default: an even sample (random_state 0) that runs in ~1 minute
# on two cores; all 1,225 rows take ~11 minutes.
MULTIGPU_SAMPLE_ROWS = 60
MULTIGPU_MODELS: dict[str, str] = {
    "Qwen/Qwen3-32B": "qwen3-32b",
    "Qwen/Qwen3-235B-A22B-FP8": "qwen3-235b-a22b",
    "deepseek-ai/DeepSeek-R1": "deepseek-v3",
    "deepseek-ai/DeepSeek-V3": "deepseek-v3",
    "meta-llama/Llama-3.1-70B": "llama-3.1-70b",
    "meta-llama/Llama-3.1-8B-Instruct": "llama-3.1-8b",
    "nvidia/Llama-3.1-8B-Instruct-FP8": "llama-3.1-8b",
    "openai/gpt-oss-120b": "gpt-oss-120b",
    "MiniMaxAI/MiniMax-M2.5": "minimax-m2.5",
    "moonshotai/Kimi-K2.5": "kimi-k2.5",
    "zhipuai/GLM-5": "glm-5",
    "Qwen/Qwen3.5-397B-A17B": "qwen3.5-397b-a17b",
}
MAX_NODE_GPUS = 8


def _size(row: pd.Series, column: str) -> int:
    value = row.get(column)
    return 1 if pd.isna(value) or int(value) < 1 else int(value)


def _precision(row: pd.Series, model: str) -> str:
    quant = f"{row.get('gemm_quant_mode')} {row.get('moe_quant_mode')} {row.get('precision')}".lower()
    return cached_arch(model).checkpoint_precision or ("fp8" if "fp8" in quant else "bf16")


def multigpu_rows() -> pd.DataFrame:
    """The rows validated (module docstring), de-duplicated."""
    df, _ = read_data_csv("aiconfigurator", MULTIGPU_FILE)
    df = df[(df["mode"] == "agg") & df["model_path"].isin(list(MULTIGPU_MODELS))].copy()
    df = df[df["pp_size"].fillna(1) <= 1]
    gpus = df["tp_size"].fillna(1) * df["attention_dp_size"].fillna(1).clip(lower=1)
    df = df[gpus <= MAX_NODE_GPUS]
    moe = df["model_path"].map(MULTIGPU_MODELS).map(lambda m: cached_arch(m).is_moe)
    moe_gpus = df["moe_tp_size"].fillna(1).clip(lower=1) * df["moe_ep_size"].fillna(1).clip(lower=1)
    df = df[~moe | (moe_gpus == gpus.loc[df.index])]
    keys = ["system", "backend", "isl", "osl", "silicon_ttft_ms", "silicon_tpot_ms"]
    return df.drop_duplicates(subset=keys)


def multigpu_load_request(row: pd.Series) -> tuple[str, str, LoadRequest]:
    """(catalog model, catalog GPU, load request) of one row (module docstring)."""
    model = MULTIGPU_MODELS[str(row["model_path"])]
    arch = cached_arch(model)
    backend, prec = str(row["backend"]), _precision(row, model)
    n, i, o = int(row["batch_size"]), int(row["isl"]), int(row["osl"])
    ep = _size(row, "moe_ep_size") if arch.is_moe else 1
    load = LoadRequest(
        mode="concurrency", concurrency=n, num_requests=silicon_requests(row), input_tokens=i,
        output_tokens=o, precision=prec, engine=backend,
        kv_dtype=silicon_kv_dtype(backend, "fp8" if prec == "fp8" else "bf16"),
        sampling=SILICON_SAMPLING, tp=_size(row, "tp_size"), ep=ep,
        dp=_size(row, "attention_dp_size"), host_step_s=silicon_host_step_s(row),
        gpu_memory_utilization=silicon_memory_fraction(row), **silicon_lengths(row),
    )  # fmt: skip
    load = silicon_engine_limits(row, load, arch.max_position_embeddings)
    return model, SILICON_GPUS[str(row["system"])], load


def multigpu_frame(
    max_rows: int | None = None,
    *,
    point: OperatingPoint | None = None,
    coeffs: Any = None,
    power_coeffs: Any = None,
) -> pd.DataFrame:
    """Predicted vs measured TTFT and TPOT per row; `max_rows` takes an even sample (for quick runs).

    Rows the model cannot place (a layout the model does not split into, weights that leave no KV
    cache) keep their reason in `error` and `feasible` False; `point`, `coeffs` and `power_coeffs`
    (defaults: default clocks, shipped sets) apply to every prediction.
    """
    rows = multigpu_rows()
    if max_rows is not None and len(rows) > max_rows:
        rows = rows.sample(n=max_rows, random_state=0)
    out = []
    for _, r in rows.iterrows():
        model, gpu, load = multigpu_load_request(r)
        base = {
            "source": SILICON_MULTIGPU, "id": str(r["id"]), "model": model, "gpu": gpu,
            "backend": str(r["backend"]), "precision": load.precision, "tp": load.tp, "ep": load.ep,
            "dp": load.dp, "layout": f"tp{load.tp}/ep{load.ep}/dp{load.dp}", "concurrency": load.concurrency,
            "input_tokens": load.input_tokens, "output_tokens": load.output_tokens,
            "meas_ttft_s": float(r["silicon_ttft_ms"]) / 1e3,
            "meas_tpot_s": float(r["silicon_tpot_ms"]) / 1e3,
        }  # fmt: skip
        try:
            m = load_metrics(model, gpu, load, point=point, coeffs=coeffs, power_coeffs=power_coeffs)
        except DseError as exc:
            out.append({**base, "feasible": False, "error": str(exc)})
            continue
        out.append(
            {
                **base, "feasible": bool(m["feasible"]), "error": str(m["infeasible_reason"] or ""),
                "ttft_s": m["ttft_s"], "tpot_s": m["tpot_s"], "comm_time_fraction": m["comm_time_fraction"],
            }
        )  # fmt: skip
    return pd.DataFrame(out)


def multigpu_summary(df: pd.DataFrame) -> pd.DataFrame:
    """TTFT and TPOT MAPE (%) and row counts per engine and over all rows that ran."""
    ok = df[(df["error"] == "") & df["feasible"].astype(bool)].copy()
    for key in ("ttft", "tpot"):
        ok[f"{key}_ape"] = (ok[f"{key}_s"] / ok[f"meas_{key}_s"] - 1.0).abs() * 100
    per = ok.groupby("backend")[["ttft_ape", "tpot_ape"]].mean()
    per["rows"] = ok.groupby("backend").size()
    per.loc["all"] = [ok["ttft_ape"].mean(), ok["tpot_ape"].mean(), len(ok)]
    return per.rename(columns={"ttft_ape": "ttft_mape_pct", "tpot_ape": "tpot_mape_pct"})


__all__ = [
    "MULTIGPU_MODELS",
    "MULTIGPU_SAMPLE_ROWS",
    "SILICON_MULTIGPU",
    "multigpu_frame",
    "multigpu_load_request",
    "multigpu_rows",
    "multigpu_summary",
]

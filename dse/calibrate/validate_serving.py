"""Serving validation: predicted TPOT, TTFT, average power and J/token against measured serving runs.

    rows = validate_serving()              # MAPE per source, metric and model (list of dicts)
    df = serving_validation_frame()        # one row per measured configuration, predicted vs measured

Both sources are *continuous-batching* benchmarks in steady state, not the static batch that
`dse.serving.predict_serving` describes (all requests prefilled together, then decoded in lock step).
So each measured row is predicted with a steady-state engine step built from the same kernel model,
power model and shipped default coefficients (`steady_state`), described below. The static-batch
`predict_serving` numbers are reported beside them (`*_static` columns) for comparison.

The steady-state step (used for both sources)
----------------------------------------------
B sequences run; each request has i input and o output tokens. Every engine step emits one token per
running sequence, so B / o requests finish per step and as many new ones take their slots: arrivals per
step are lambda = B / o, taken as Poisson. A step with k arrivals is one fused forward pass (chunked
prefill, as vLLM and TensorRT-LLM schedule it): the weight GEMMs, norms and elementwise ops run on
(B - k) + k * i tokens, decode attention covers the B - k decoding sequences at a KV context of c, a
flash (causal) attention covers the k prompts of i tokens, and the LM head has B rows. Its latency t(k)
and energy e(k) come from `predict_graph` (default clocks, TDP cap, no host gaps: CUDA graphs).
Over the step mix P(k) = Poisson(lambda):

    mean step          sum P(k) t(k)                   = mean ITL; the per-request TPOT of a benchmark
    median step        t(k*), first k with CDF >= 0.5  = median ITL (every token of a step shares its t)
    average power      sum P(k) e(k) / sum P(k) t(k)
    J / output token   sum P(k) e(k) / B               (prefill energy is charged to the output tokens)
    TTFT               0.5 * mean step (waiting for the step in flight) + the mean duration of a step
                       holding this prompt and Poisson(lambda) others, + queueing (below)

KV context c = i + o / 2: a running sequence is on average half-way through its output. This is the
step-weighted mean for fixed output lengths; with spread-out lengths the long requests are over-
represented among the running ones (length-biased sampling: c = i + E[o^2] / (2 E[o])), so c is an
underestimate of the attention work for long-tailed outputs.

The engine prefills at most `max_num_batched_tokens` (8192) per step; a step's tokens above that spill
into the next step. This is ignored: the work is the same and time is near-linear in tokens at that size.

ML.ENERGY (`shared/data/README.md` section 3; `load_mlenergy`)
--------------------------------------------------------------
Rows: 1 x H100, dense text-only transformers with a catalog config: Qwen3-8B / 14B / 32B on lm-arena-chat
and gpqa (30 rows), bf16 (the configs' dtype), GPU `h100-sxm`. Skipped: MoE (Qwen3-30B-A3B, gpt-oss;
the graph builders have no expert routing), VLM / multimodal tasks (Qwen3-VL, image/video-chat: no
vision encoder, unknown image tokens), Mamba-hybrid (Nemotron-Nano v2: no SSM ops), gemma-3 (no gemma
model_type: sliding-window/global interleave, soft-capping), sourcegraph-fim (only a MoE model), B200
(the item asks for H100; no Blackwell kernel or power data entered the shipped coefficients).

- batch B = round(avg_batch_size): the running batch actually observed in the steady-state window.
  max_num_seqs is only its upper bound; at 8B/512, 8B/96 (gpqa), 14B/64 (gpqa) and 32B/32 the KV cache,
  not max_num_seqs, limits the batch (avg_batch_size well below max_num_seqs).
- output o = avg_output_len_tokens (rounded), capped so that i + o fits max_model_len / the model context.
- input i: not in the data (README: no prompt lengths). Assumed per task, `MLENERGY_INPUT_TOKENS`:
  * lm-arena-chat: 500 tokens (LMArena conversations with the Qwen3 chat template). Cross-check from the
    data itself, not from any metric being validated: in the KV-limited rows the cache holds
    avg_batch_size sequences of mean context c, so c ~= (0.9 * 80 GiB - weights - prefill activations)
    / (KV bytes per token * avg_batch_size) = ~860 tokens (8B, batch 474, o = 645) to ~1300 (32B, batch
    29, o = 629; less after vLLM's CUDA-graph and non-torch memory), while 8B at max_num_seqs 384 (batch
    383, not KV-limited) caps c at ~1060. With c = i + o/2 that is i ~= 500-750; 500 is the low end
    because length-biased sampling puts the real c above i + o/2.
  * gpqa: 300 tokens (a GPQA-diamond question, four choices and an answer-format instruction are
    ~150-300 words). Cross-check: the KV-limited rows (8B batch 82, 14B batch 59) hold c ~= 4800-5000
    tokens against i + o/2 = 3650-4330, consistent with a small prompt and length-biased outputs.
- measured vs predicted: median_itl_s vs the median step (`tpot_s`); avg_power_w vs average power;
  energy_per_output_token_j vs J / output token. The mean step is reported as `tpot_mean_s`.

aiconfigurator silicon (`shared/data/README.md` section 2; `load_aiconfigurator_silicon`)
----------------------------------------------------------------------------------------
Rows: all 83 (Qwen3-32B on h100_sxm, Llama-3.1-70B on h200_sxm; TP1, aggregated serving).
- concurrency N = batch_size; i = isl, o = osl; precision fp8 when gemm_quant_mode (or precision) says
  fp8, else bf16 (the SGLang Qwen3-32B rows name neither: the bf16 checkpoint); GPU h100-sxm / h200-sxm.
- running batch B = min(N, KV capacity / c) with the KV cache in bf16 (`dse.workload.llm`: fp8 runs keep
  a bf16 cache; an fp8 cache is not modelled) and the capacity of `dse.serving`'s memory model
  (USABLE_MEMORY_FRAC of the GPU minus weights and the activations of one 8192-token chunk). When N does
  not fit, the other N - B requests queue; by Little's law (closed loop: N requests in the system, B / o
  finishing per step) each waits (N / B - 1) * o * mean step before its prefill: added to TTFT.
- TPOT (silicon_tpot_ms: per-request (e2e - TTFT) / (osl - 1), averaged) vs the mean step. It is not
  the static decode step: other requests' prefills land in this request's decode steps (at 4096/128 and
  N = 64 the measured TPOT is 3x the one at 4096/512).
- TTFT vs the steady-state TTFT above (with queueing). The measured TTFT also depends on how the
  benchmark's requests arrive (its first wave of N requests is prefilled together, and fixed output
  lengths may keep later waves partly synchronized) and, at high concurrency, on queueing that depends on
  each engine's memory budget and scheduler (TensorRT-LLM reserves i + o per request; the SGLang rows
  queue at N = 16). So TTFT is bracketed rather than pinned: the queue-free steady-state TTFT is a lower
  bound and the static-batch TTFT (`ttft_static_s`, all N prompts prefilled together) an upper one;
  `ttft_bracketed` says whether the measurement lies between them. TTFT MAPE is reported on all rows and
  on the rows with N <= TTFT_MAX_CONCURRENCY (subset `concurrency<=16`).

Summary rows (`validate_serving`) are grouped over all rows and per model, plus per task (ML.ENERGY) and
per backend (silicon: trtllm, vllm, sglang differ in scheduler, kernels and KV-cache dtype).
MAPE values are fractions (0.08 = 8%); `bias` is the mean signed relative error (pred / meas - 1).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
import pandas as pd

from dse.calibrate.coeffs import load_default_coeffs
from dse.calibrate.dataset import load_aiconfigurator_silicon, load_mlenergy
from dse.hardware.catalog import load_gpu
from dse.hardware.spec import GpuSpec
from dse.perf.predict import predict_graph
from dse.perf.types import OperatingPoint
from dse.serving import USABLE_MEMORY_FRAC, ServingRequest, predict_serving
from dse.workload.graph import WorkloadGraph
from dse.workload.llm import (
    LlmArch,
    build_decode_graph,
    build_prefill_graph,
    kv_cache_bytes,
    prefill_activation_bytes,
    weight_bytes,
)
from dse.workload.models import load_model_config
from dse.workload.ops import AttentionOp, GemmOp

MLENERGY = "mlenergy"
SILICON = "aiconfigurator_silicon"
SOURCES: tuple[str, ...] = (MLENERGY, SILICON)

# ML.ENERGY model id -> catalog name (dense text transformers on 1 x H100 only; see the module docstring).
MLENERGY_MODELS: dict[str, str] = {
    "Qwen/Qwen3-8B": "qwen3-8b",
    "Qwen/Qwen3-14B": "qwen3-14b",
    "Qwen/Qwen3-32B": "qwen3-32b",
}
MLENERGY_TASKS: tuple[str, ...] = ("lm-arena-chat", "gpqa")
MLENERGY_GPU = "h100-sxm"
# Assumed prompt lengths (tokens) per task: the data has none (module docstring).
MLENERGY_INPUT_TOKENS: dict[str, int] = {"lm-arena-chat": 500, "gpqa": 300}

SILICON_MODELS: dict[str, str] = {
    "Qwen/Qwen3-32B": "qwen3-32b",
    "meta-llama/Llama-3.1-70B": "llama-3.1-70b",
}
SILICON_GPUS: dict[str, str] = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm"}
TTFT_MAX_CONCURRENCY = 16

# Tokens per engine step that the serving engines prefill at most (vLLM max_num_batched_tokens and
# TensorRT-LLM max_num_tokens defaults in these runs): the activation reserve of the capacity model.
CHUNK_TOKENS = 8192
# Share of the KV context c = i + output_context_frac * o (half-way through the output on average).
OUTPUT_CONTEXT_FRAC = 0.5
# The step mix is truncated where the Poisson tail is below this.
POISSON_TAIL = 1e-4

# Metrics: (source, metric) -> (predicted column, measured column).
METRICS: dict[tuple[str, str], tuple[str, str]] = {
    (MLENERGY, "tpot"): ("tpot_s", "median_itl_s"),
    (MLENERGY, "avg_power"): ("avg_power_w", "meas_avg_power_w"),
    (MLENERGY, "j_per_token"): ("energy_per_output_token_j", "meas_energy_per_output_token_j"),
    (SILICON, "tpot"): ("tpot_s", "meas_tpot_s"),
    (SILICON, "ttft"): ("ttft_s", "meas_ttft_s"),
    (SILICON, "tpot_static"): ("tpot_static_s", "meas_tpot_s"),
    (SILICON, "ttft_static"): ("ttft_static_s", "meas_ttft_s"),
}


# ----------------------------------------------------------------------------------- steady state


@dataclass(frozen=True, slots=True, kw_only=True)
class SteadyState:
    """Steady-state continuous batching at a running batch (see the module docstring)."""

    batch: int
    input_tokens: int
    output_tokens: int
    context_len: int
    arrivals_per_step: float
    decode_step_s: float  # t(0): a step with no prefill
    mean_step_s: float
    median_step_s: float
    avg_power_w: float
    energy_per_output_token_j: float
    ttft_s: float  # without queueing


def _poisson(lam: float) -> tuple[np.ndarray, np.ndarray]:
    """k = 0..K and P(k), truncated where the tail is below POISSON_TAIL and renormalized."""
    ks, ps = [0], [math.exp(-lam)]
    while 1.0 - sum(ps) > POISSON_TAIL:
        k = len(ks)
        ks.append(k)
        ps.append(ps[-1] * lam / k)
    p = np.array(ps)
    return np.array(ks), p / p.sum()


@cache
def _arch(name: str) -> LlmArch:
    return load_model_config(name)


@cache
def _gpu(name: str) -> GpuSpec:
    return load_gpu(name)


def step_graph(
    arch: LlmArch, *, decodes: int, prefills: int, input_tokens: int, context_len: int, precision: str
) -> WorkloadGraph:
    """One fused engine step: `decodes` sequences decode one token, `prefills` prompts of `input_tokens`."""
    tokens = decodes + prefills * input_tokens
    linear = build_decode_graph(arch, batch=tokens, context_len=context_len, precision=precision)
    ops = []
    for op in linear.ops:
        if isinstance(op, AttentionOp):
            if decodes:
                ops.append(dataclasses.replace(op, batch=decodes))
            if prefills:
                prefill = build_prefill_graph(arch, batch=prefills, seq_len=input_tokens, precision=precision)
                attn = next(o for o in prefill.ops if isinstance(o, AttentionOp))
                ops.append(
                    dataclasses.replace(attn, name=attn.name.replace("/attention", "/prefill_attention"))
                )
        elif isinstance(op, GemmOp) and op.name.endswith("/lm_head"):
            ops.append(dataclasses.replace(op, m=decodes + prefills))
        else:
            ops.append(op)
    meta = {**linear.meta, "phase": "mixed", "decodes": decodes, "prefills": prefills}
    return WorkloadGraph(name=f"{arch.name}/step", ops=tuple(ops), meta=meta)


def steady_state(
    arch: LlmArch,
    gpu: GpuSpec,
    *,
    batch: int,
    input_tokens: int,
    output_tokens: int,
    precision: str = "bf16",
    point: OperatingPoint | None = None,
    coeffs: Any = None,
    power_coeffs: Any = None,
    output_context_frac: float = OUTPUT_CONTEXT_FRAC,
) -> SteadyState:
    """Steady-state step mix of continuous batching (module docstring); no queueing."""
    point = point or OperatingPoint()
    context = max(1, round(input_tokens + output_context_frac * output_tokens))
    context = min(context, arch.max_position_embeddings - 1)
    lam = batch / output_tokens

    step_cache: dict[int, tuple[float, float]] = {}

    # None = the shipped latency corrections of the GPU's generation (as predict_serving does).
    latency_coeffs = load_default_coeffs(gpu) if coeffs is None else coeffs

    def step(k: int) -> tuple[float, float]:
        if k not in step_cache:
            g = step_graph(
                arch,
                decodes=max(batch - k, 0),
                prefills=k,
                input_tokens=input_tokens,
                context_len=context,
                precision=precision,
            )
            p = predict_graph(g, gpu, point, latency_coeffs, power_coeffs)
            step_cache[k] = (p.latency_s, p.energy_j)
        return step_cache[k]

    ks, pk = _poisson(lam)
    t = np.array([step(int(k))[0] for k in ks])
    e = np.array([step(int(k))[1] for k in ks])
    mean_t, mean_e = float(pk @ t), float(pk @ e)
    median_t = float(t[int(np.searchsorted(np.cumsum(pk), 0.5))])
    # TTFT: this prompt plus Poisson(lambda) others in its step, after half a step of waiting.
    t_with = np.array([step(int(k) + 1)[0] for k in ks])
    ttft = 0.5 * mean_t + float(pk @ t_with)
    return SteadyState(
        batch=batch,
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        context_len=context,
        arrivals_per_step=lam,
        decode_step_s=float(t[0]),
        mean_step_s=mean_t,
        median_step_s=median_t,
        avg_power_w=mean_e / mean_t,
        energy_per_output_token_j=mean_e / batch,
        ttft_s=ttft,
    )


def kv_capacity_tokens(arch: LlmArch, gpu: GpuSpec, precision: str) -> float:
    """KV-cache tokens that fit: usable memory minus weights minus one chunk's prefill activations."""
    free = (
        USABLE_MEMORY_FRAC * gpu.memory.capacity_bytes
        - weight_bytes(arch, precision)
        - prefill_activation_bytes(arch, precision, batch=1, seq_len=CHUNK_TOKENS, attention="flash")
    )
    return max(free, 0.0) / kv_cache_bytes(arch, precision, 1)


# ----------------------------------------------------------------------------------------- frames


def _precision(row: pd.Series) -> str:
    for column in ("gemm_quant_mode", "precision"):
        value = row.get(column)
        if isinstance(value, str) and "fp8" in value.lower():
            return "fp8"
    return "bf16"


def mlenergy_rows() -> pd.DataFrame:
    """The ML.ENERGY rows validated: 1 x H100, dense text models of MLENERGY_MODELS, MLENERGY_TASKS."""
    df = load_mlenergy()
    keep = (
        df["gpu_model"].str.contains("H100")
        & (df["num_gpus"] == 1)
        & df["model"].isin(list(MLENERGY_MODELS))
        & df["task"].isin(MLENERGY_TASKS)
        & (df["architecture"] == "Dense Transformer")
    )
    return df[keep].reset_index(drop=True)


def mlenergy_frame(
    *, point: OperatingPoint | None = None, coeffs: Any = None, power_coeffs: Any = None
) -> pd.DataFrame:
    """Per-row predicted vs measured for ML.ENERGY (module docstring for the mapping)."""
    gpu = _gpu(MLENERGY_GPU)
    out = []
    for _, r in mlenergy_rows().iterrows():
        arch = _arch(MLENERGY_MODELS[r["model"]])
        i = MLENERGY_INPUT_TOKENS[r["task"]]
        max_len = arch.max_position_embeddings
        if pd.notna(r.get("cfg_max_model_len")):
            max_len = min(max_len, int(r["cfg_max_model_len"]))
        o = max(2, min(round(float(r["avg_output_len_tokens"])), max_len - i - 1))
        b = max(1, round(float(r["avg_batch_size"])))
        ss = steady_state(
            arch, gpu, batch=b, input_tokens=i, output_tokens=o, precision="bf16",
            point=point, coeffs=coeffs, power_coeffs=power_coeffs,
        )  # fmt: skip
        out.append(
            {
                "source": MLENERGY,
                "id": f"{arch.name}/{r['task']}/seqs{int(r['max_num_seqs'])}",
                "model": arch.name,
                "gpu": gpu.name,
                "task": r["task"],
                "precision": "bf16",
                "max_num_seqs": int(r["max_num_seqs"]),
                "batch": b,
                "input_tokens": i,
                "output_tokens": o,
                "context_len": ss.context_len,
                "arrivals_per_step": ss.arrivals_per_step,
                "tpot_s": ss.median_step_s,
                "tpot_mean_s": ss.mean_step_s,
                "tpot_decode_only_s": ss.decode_step_s,
                "avg_power_w": ss.avg_power_w,
                "energy_per_output_token_j": ss.energy_per_output_token_j,
                "median_itl_s": float(r["median_itl_s"]),
                "meas_avg_power_w": float(r["avg_power_w"]),
                "meas_energy_per_output_token_j": float(r["energy_per_output_token_j"]),
            }
        )
    return pd.DataFrame(out)


def silicon_frame(
    *, point: OperatingPoint | None = None, coeffs: Any = None, power_coeffs: Any = None
) -> pd.DataFrame:
    """Per-row predicted vs measured for the aiconfigurator silicon rows (module docstring)."""
    out = []
    for _, r in load_aiconfigurator_silicon().iterrows():
        arch = _arch(SILICON_MODELS[r["model_path"]])
        gpu = _gpu(SILICON_GPUS[r["gpu"]])
        prec = _precision(r)
        n, i, o = int(r["batch_size"]), int(r["isl"]), int(r["osl"])
        context = i + OUTPUT_CONTEXT_FRAC * o
        fits = int(kv_capacity_tokens(arch, gpu, prec) // context)
        b = max(1, min(n, fits))
        ss = steady_state(
            arch, gpu, batch=b, input_tokens=i, output_tokens=o, precision=prec,
            point=point, coeffs=coeffs, power_coeffs=power_coeffs,
        )  # fmt: skip
        queue_s = (n / b - 1.0) * o * ss.mean_step_s
        static = predict_serving(
            arch, gpu, ServingRequest(batch=n, input_tokens=i, output_tokens=o, precision=prec),
            point, coeffs=coeffs, power_coeffs=power_coeffs,
        )  # fmt: skip
        out.append(
            {
                "source": SILICON,
                "id": str(r["id"]),
                "model": arch.name,
                "gpu": gpu.name,
                "backend": str(r["backend"]),
                "precision": prec,
                "concurrency": n,
                "batch": b,
                "input_tokens": i,
                "output_tokens": o,
                "context_len": ss.context_len,
                "arrivals_per_step": ss.arrivals_per_step,
                "tpot_s": ss.mean_step_s,
                "tpot_decode_only_s": ss.decode_step_s,
                "ttft_s": ss.ttft_s + queue_s,
                "ttft_queue_s": queue_s,
                "tpot_static_s": static.tpot_s,
                "ttft_static_s": static.ttft_s,
                "ttft_bracketed": ss.ttft_s <= float(r["ttft_s"]) <= static.ttft_s,
                "static_feasible": static.feasible,
                "meas_tpot_s": float(r["tpot_s"]),
                "meas_ttft_s": float(r["ttft_s"]),
            }
        )
    return pd.DataFrame(out)


def serving_validation_frame(
    sources: Iterable[str] = SOURCES,
    *,
    point: OperatingPoint | None = None,
    coeffs: Any = None,
    power_coeffs: Any = None,
) -> pd.DataFrame:
    """Per-row predicted vs measured of the sources, one frame; `ape_<metric>` = |pred / meas - 1|."""
    frames = []
    for source in sources:
        make = {MLENERGY: mlenergy_frame, SILICON: silicon_frame}[source]
        df = make(point=point, coeffs=coeffs, power_coeffs=power_coeffs)
        for (src, metric), (pred, meas) in METRICS.items():
            if src == source:
                df[f"err_{metric}"] = df[pred] / df[meas] - 1.0
        frames.append(df)
    return pd.concat(frames, ignore_index=True)


# ----------------------------------------------------------------------------------------- summary


def _subsets(source: str, metric: str, df: pd.DataFrame) -> list[tuple[str, pd.Series]]:
    subsets = [("all", pd.Series(True, index=df.index))]
    if source == SILICON and metric.startswith("ttft"):
        subsets.append((f"concurrency<={TTFT_MAX_CONCURRENCY}", df["concurrency"] <= TTFT_MAX_CONCURRENCY))
    return subsets


# Columns whose values group the summary rows, per source (besides all rows together).
GROUP_COLUMNS: dict[str, tuple[str, ...]] = {MLENERGY: ("model", "task"), SILICON: ("model", "backend")}


def validate_serving(
    sources: Iterable[str] = SOURCES,
    *,
    frame: pd.DataFrame | None = None,
    point: OperatingPoint | None = None,
    coeffs: Any = None,
    power_coeffs: Any = None,
) -> list[dict[str, object]]:
    """MAPE rows {source, metric, subset, group, model, n, mape, bias, worst_id, worst_err}.

    Per source x metric (METRICS) x subset: one row over all rows (group "all", model "all"), one per
    model (group "model=<name>", model "<name>") and one per task or backend (GROUP_COLUMNS; model "all").

    Args:
        sources: which of SOURCES.
        frame: a `serving_validation_frame()` result to summarize (else it is computed).
        point, coeffs, power_coeffs: passed to the predictions (defaults: default clocks, shipped sets).
    """
    sources = tuple(sources)
    df = frame if frame is not None else serving_validation_frame(
        sources, point=point, coeffs=coeffs, power_coeffs=power_coeffs
    )  # fmt: skip
    rows: list[dict[str, object]] = []
    for source, metric in METRICS:
        if source not in sources:
            continue
        part = df[df["source"] == source]
        err = part[f"err_{metric}"]
        groups: list[tuple[str, str, pd.Series]] = [("all", "all", pd.Series(True, index=part.index))]
        for column in GROUP_COLUMNS[source]:
            for value in sorted(part[column].unique()):
                model = value if column == "model" else "all"
                groups.append((f"{column}={value}", model, part[column] == value))
        for subset, mask in _subsets(source, metric, part):
            for group, model, in_group in groups:
                sel = mask & in_group
                e = err[sel].to_numpy(dtype=float)
                if e.size == 0:
                    continue
                worst = int(np.argmax(np.abs(e)))
                rows.append(
                    {
                        "source": source,
                        "metric": metric,
                        "subset": subset,
                        "group": group,
                        "model": model,
                        "n": int(e.size),
                        "mape": float(np.mean(np.abs(e))),
                        "bias": float(np.mean(e)),
                        "worst_id": str(part.loc[sel, "id"].iloc[worst]),
                        "worst_err": float(e[worst]),
                    }
                )
    return rows


def format_rows(rows: list[dict[str, object]]) -> str:
    """A plain-text table of `validate_serving` rows."""
    head = (
        f"{'source':<24} {'metric':<12} {'subset':<16} {'group':<24} {'n':>4} {'MAPE':>7} {'bias':>7}  worst"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r['source']:<24} {r['metric']:<12} {r['subset']:<16} {r['group']:<24} {r['n']:>4} "
            f"{100 * float(r['mape']):>6.1f}% {100 * float(r['bias']):>+6.1f}%  "
            f"{r['worst_id']} ({100 * float(r['worst_err']):+.0f}%)"
        )
    return "\n".join(lines)


__all__ = [
    "GROUP_COLUMNS",
    "METRICS",
    "MLENERGY_INPUT_TOKENS",
    "MLENERGY_MODELS",
    "SILICON_MODELS",
    "SOURCES",
    "SteadyState",
    "format_rows",
    "kv_capacity_tokens",
    "mlenergy_frame",
    "serving_validation_frame",
    "silicon_frame",
    "steady_state",
    "step_graph",
    "validate_serving",
]

"""Serving validation against the aiconfigurator silicon rows: the closed-loop benchmark simulation.

    df = silicon_frame()                   # one row per measured configuration, predicted vs measured

The shared pieces (the steady-state step mix, the KV capacity rules, the ML.ENERGY rows and the summary)
are in `dse.calibrate.validate.serving`, whose `serving_validation_frame` and `validate_serving` include
these rows.

aiconfigurator silicon (`shared/data/README.md` section 2; `load_aiconfigurator_silicon`)
----------------------------------------------------------------------------------------
Rows: all 83 (Qwen3-32B on h100_sxm, Llama-3.1-70B on h200_sxm; TP1, aggregated serving).
- concurrency N = batch_size; i = isl, o = osl; precision fp8 when gemm_quant_mode (or precision) says
  fp8, else bf16 (the SGLang Qwen3-32B rows name neither: the bf16 checkpoint); GPU h100-sxm / h200-sxm.
- engine = the row's backend (`dse.workload.engine`: each engine's kernel fusions), greedy sampling (the
  benchmark clients ask for temperature 0 with ignore_eos), KV cache in fp8 when the GEMMs are fp8
  (`silicon_kv_dtype` gives the evidence), KV capacity by each engine's documented sizing rule
  (`kv_capacity_tokens`): vLLM 0.9 of the GPU minus weights and the activations of one 8192-token
  chunk; TensorRT-LLM 0.9 of the memory left after those (free_gpu_memory_fraction; 0.8 in the configs
  aiconfigurator generates for its gap-analysis runs, `silicon_memory_fraction`); SGLang its
  automatic mem_fraction_static (0.836 on an 80 GiB GPU) minus the weights. For the KV-limited
  TensorRT-LLM Llama-3.1-70B rows Little's law on the rows' TTFT and TPOT gives ~49 running at 1024x8192
  and concurrency 64; the rule admits 45 (vLLM's rule: 40).
- The benchmark is simulated (`dse.serving.continuous.simulate_closed_loop`): N clients in a closed loop
  send SILICON_WAVES x N requests (InferenceMAX, where the Llama-3.1-70B rows come from, sends 10 x
  concurrency prompts), the first N at once. The engine admits requests while the KV cache has room
  (TensorRT-LLM reserves i + o per request, vLLM and SGLang allocate as they go), prefills prompts within
  an 8192-token step budget (chunked in vLLM and SGLang, whole prompts in TensorRT-LLM, whose chunked
  prefill is off by default) and decodes every admitted request one token per step. Without chunking
  a whole prompt runs only where the step's decode and prompt tokens stay within the budget; for
  TensorRT-LLM the budget is raised to hold one whole prompt beside all decodes, as the Llama-3.1-70B
  8192x1024 rows show their runs' max_num_tokens did (`silicon_token_budget`). Step times are the
  kernel model's predictions of the engine step (`engine_step_graph`) for d decode tokens and p prompt
  tokens, interpolated over a grid of d (powers of two) and p (whole prompts in powers of two up to the
  step budget, and the budget itself; p tokens are costed as the fewest equal prompts of <= i tokens).
- Output lengths spread +-10% around o (SILICON_OUTPUT_SPREAD = 0.2): benchmark clients draw lengths from
  a range, and with exactly equal lengths the simulated waves stay synchronized forever (every request
  waits for the whole wave's prefill), which no measured row shows (at concurrency 4-64 the vLLM TTFTs are
  about one prefill plus the first wave's share). The figures hardly depend on the width: TTFT MAPE
  37.2% / 38.4% / 39.9% at spreads 0.1 / 0.2 / 0.4, against 63.2% with no spread.
- TPOT (silicon_tpot_ms: per-request (e2e - TTFT) / (osl - 1), averaged) vs the simulated per-request
  mean; TTFT vs the simulated mean TTFT. So the first wave (all N prompts at once), the later
  desynchronized waves, the prefills landing in a request's decode steps and the queueing of requests
  that do not fit the KV cache come out of one simulation rather than separate corrections.
- Beside them: the steady-state Poisson mix at the running batch that fits (`tpot_steady_s`,
  `ttft_steady_s`, `batch_steady`) and the static batch of `predict_serving` (`*_static_s`: all N
  prompts prefilled together, an upper bound on TTFT without queueing).
- Known misses (TTFT 40.4%, bias -34%, 45.4% at concurrency <= 16 since the latency fit moved to the
  cap-rule clock; 40.5% / 45.4% before; once fp8 activation quantization is
  counted once per engine: vLLM's dynamic quantization in the GEMM's account, none for TensorRT-LLM's
  static scales; 38.4% / 43.9% when TensorRT-LLM's GEMMs still paid vLLM's quantization, 38.2% at
  69fc26e, 40.6% with vLLM's rule for every engine at 6d28209; vLLM rows 14.8%, 7.1% at concurrency
  <= 16):
  * SGLang (6 rows, -92%): TTFTs of 7-89 s growing in proportion to osl, i.e. queueing behind whole
    requests. Little's law on the rows' own TTFT and osl x TPOT gives R ~= 5.1 requests running at isl
    1024 for every osl (128, 256, 512) and 2.1-2.8 at isl 2048, so R x (i + o / 2) ~= 5-7k tokens in every
    row: a KV pool of ~6k tokens (~1.5 GiB of Qwen3-32B's bf16 cache) that reserves little for future
    output (SGLang's decaying new-token ratio). SGLang's automatic mem_fraction_static (0.836) leaves
    ~24k tokens (it queues the isl-2048 rows: 11 running, TTFT -83% to -91%; the isl-1024 rows all fit).
    Next to 61 GiB of bf16 weights on an 80 GiB H100 every 0.01 of that fraction is ~0.8 GiB (~3k
    tokens), and ~6k tokens needs ~0.79: a setting (or a larger activation / CUDA-graph reserve) the
    rows do not record; fitting it to these six rows would be a knob.
  * TensorRT-LLM Qwen3-32B (43 rows, -43%): at concurrency 8-16 the measured TTFT exceeds ours by about
    two isolated prefills of the prompt (130-160 ms at isl 1024, 260-300 ms at 2048, 650-770 ms at 4096)
    whatever the osl, while the TPOT of the same rows, which pays on the GPU for every prefill landing
    among the decode steps, is within 12% (MAPE 4%, bias +2%): a 3x slower prefill would add ~10 ms to TPOT at
    concurrency 8. So the excess is latency outside the GPU's work. The Llama-3.1-70B TensorRT-LLM rows
    of one source and date show the same engine with and without it: 1024x8192 and 8192x1024 within
    -15% to +11% at concurrency 4-32, 1024x1024 at 1.8-3.1x the prediction (a per-configuration engine
    setting). Not modelled. The KV-limited rows of the former (concurrency 64 and 128, 45 running) are
    +27% to +41%: the queueing behind whole requests is overestimated there.
  * the two 4000x1000 rows of the dynamo gap analysis: vLLM's TPOT (16.9 ms at concurrency 24) equals the
    floor of every decode step at peak HBM bandwidth (32.8 GB of fp8 weights + 14 GB of fp8 cache: 14.0
    ms) plus, per 1000 steps, 24 prefills of 4000 tokens at the dense fp8 Tensor-Core peak (2.8 ms). Our
    decode step alone is 21.8 ms (the fp8 GEMMs and the fp8-cache decode attention at the 65-72% of peak
    bandwidth that the aiconfigurator kernel tables measure at these shapes), and the prefills landing
    in it make our TPOT +63% and, through the simulated queueing, TTFT +110% (one isolated prefill is 280
    ms against the measured TTFT of 295 ms). Prefix caching (on by default in vLLM V1) or outputs shorter
    than osl would explain the row; neither is recorded.

The load model on these rows (`silicon_load_request`, `silicon_load_frame`; `*_load` metrics)
-----------------------------------------------------------------------------------------------
`dse.serving.load.predict_load` in the mode the benchmark ran: mode "concurrency" with concurrency C =
batch_size, num_requests = SILICON_WAVES x C, engine = the row's backend (its preset: KV block size,
chunked prefill, admission reservation - none for vLLM, 0.7 of the output for SGLang, the whole sequence
for TensorRT-LLM -, CUDA-graph padding, KV sizing rule), precision and KV dtype as above (`_precision`,
`silicon_kv_dtype`), greedy sampling (SILICON_SAMPLING), the engine's default max_num_seqs (far above
every C) and, for TensorRT-LLM, a step budget holding the longest drawn prompt beside C decodes
(`silicon_token_budget`; 8192 for the chunked engines). Lengths: lognormal around isl and osl with
log-space sigma SILICON_LENGTH_SIGMA = 0.058, the coefficient of variation (0.2 / sqrt(12)) of the +-10%
uniform output spread above, which desynchronizes the waves for the same reason; `LoadRequest` has one
sigma, so the prompts spread as much (a +-6% spread of isl, which the clients' random prompts plausibly
have too; it is why the TensorRT-LLM budget is taken at the longest drawn prompt: a prompt a few tokens
over the budget left by the decodes waits for the batch to drain). TTFT and TPOT are the per-request
means (`ttft_load_s`, `tpot_load_s`), as the rows measure them.
Lengths as each run drew them (`silicon_lengths`): fixed for the 50 rows of aiconfigurator's gap
analysis (TensorRT-LLM and SGLang Qwen3-32B, one vLLM row), spread as above for the InferenceMAX rows.
The gap-analysis runs also take the request count of aiconfigurator's benchmark script (AIC_BENCH_ROUNDS x
C, `silicon_requests`) and the engine limits its generator writes (`silicon_engine_limits`: TensorRT-LLM
128 sequences and 128 + isl + 500 tokens a step, vLLM 512 and 512 + isl + 1500). Against 10 x C requests
and 8192-token steps (before session 29): TPOT 11.2% -> 10.0% (TensorRT-LLM 10.9 -> 9.2%), TTFT 35.8% ->
49.1% (bias -12% -> -42%; TensorRT-LLM 34.3 -> 54.1%, vLLM 22.5 -> 16.1%). With 8192 tokens a step a
wave's prompts ran in one step and the waves stayed in step, which the TPOT of those rows rules out
(`silicon_engine_limits`); the TTFT it gave was too long at concurrency 8 (+79% to +85% at isl 1024) and
too short at 4096 (-63% to -66%), errors that partly cancelled. With one prompt a step the TensorRT-LLM
Qwen3-32B TTFT falls short by a latency per request that depends on neither the concurrency nor the output
length: at concurrency <= 16 ~175 / 320 / 750 ms at isl 1024 / 2048 / 4096 (2.5-2.9 isolated prefills, the
same at osl 128, 256 and 512), and on the same runs' multi-GPU rows ~0.1-0.2 s even at 128-token prompts
(`dse.calibrate.validate.silicon_multigpu`). It is not GPU work: a prefill 3.7x longer would add ~10 ms to
the TPOT at concurrency 8 and osl 128, predicted within 1% of the measured. No engine setting the runs
record produces it, so it is not modelled; aiconfigurator's own TensorRT-LLM estimate carries an empirical
factor of 2-4 prefills on TTFT for it (`_ttft_queuing_factor`). Session 30 found most of it in when a
request can join a step (`dse.serving.scheduler`, arrivals): a client's next request misses the step the
engine schedules right after its predecessor's last token, and TensorRT-LLM's overlap scheduler has
scheduled one more by then, so in the staggered closed loop a new prompt waits for the two steps before
its own, each carrying another client's prompt (three prefill steps, not one). Modelled for every engine
(vLLM before 0.18 one step, SGLang, TensorRT-LLM and vLLM from 0.18 two): TTFT 49.1% -> 32.4% (bias -42% ->
-20%; TensorRT-LLM 54.1 -> 30.6%, concurrency <= 16 54.4 -> 27.5%; vLLM 16.1 -> 19.3% through its 4000x1000
row, 11.2 -> 7.9% without it, 6.3 -> 3.1% at concurrency <= 16; SGLang 85.6% unchanged), TPOT 10.0% ->
10.7%. What remains of the Qwen3-32B TensorRT-LLM shortfall at concurrency <= 16 is about one more
prefill step (77-89 / 133-146 / 388-454 ms at isl 1024 / 2048 / 4096, -21% to -35%), not explained; the
InferenceMAX Llama-3.1-70B TensorRT-LLM 1024x8192 rows at concurrency 4 and 8 go from -8% / -2% to +17%
(two decode steps of ~21 ms more). The Llama-3.1-70B TensorRT-LLM 1024x1024
rows (InferenceMAX) exceed the simulation by 19-24 of their measured TPOTs at every concurrency from 4 to
128, as a first response held back ~20 engine iterations would (TensorRT-LLM's `stream_interval`); the
same source's 1024x8192 and 8192x1024 rows show nothing of it and the runs record no such setting.
Results before session 29: TPOT 11.8% (vLLM 11.3%, TensorRT-LLM 10.9%, SGLang 22.6%), TTFT 36.7% (bias
-14%; vLLM 23.4%, TensorRT-LLM 35.0%, SGLang 89.2%), 40.4% at concurrency <= 16. With spread lengths for
every row (before issue 17): TPOT 11.3%, TTFT 40.4% (bias -33%; vLLM 18.6%, TensorRT-LLM 41.1%, SGLang
91.3%); the vLLM figure moves only through its one gap-analysis row (4000x1000, the prefix-caching suspect
below), whose waves now queue together. Close to the closed-loop simulation above (11.6%, 40.4%), with the
same misses:
  * SGLang: the KV pool. With gpu_memory_utilization 0.78-0.79 (a pool of ~6-9k tokens, as Little's law
    says) these rows' TTFT MAPE is 28-38% and TPOT 4-8%, against the preset rule's ~24k tokens (91%,
    27%): a setting the rows do not record, not fitted.
  * TensorRT-LLM Qwen3-32B: the measured TTFT lies between desynchronized waves (this spread: bias
    -37%) and synchronized ones (fixed lengths: every wave prefilled in one step, TTFT MAPE 42.9%, bias
    +8%) while the TPOT stays within a few % either way; the vLLM rows follow desynchronized waves (fixed
    lengths: +132%). How far the benchmark clients' timing keeps waves together is not recorded.
  * vLLM KV-limited rows (Llama-3.1-70B at concurrency 64): +37% and +23%, where the simulation runs out
    of blocks and preempts by recompute (365 and 141 preemptions); the simulation above, which admits by
    KV room and never preempts, has +4% and +11%.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pandas as pd

from dse.calibrate.data.aiconfigurator import load_aiconfigurator_silicon
from dse.calibrate.validate.common import SILICON, cached_arch, cached_gpu, load_metrics
from dse.perf.types import OperatingPoint
from dse.serving.continuous import max_running_requests, simulate_closed_loop
from dse.serving.load import LoadRequest, draw_lengths
from dse.serving.memory import CHUNK_TOKENS, kv_capacity_tokens
from dse.serving.presets import vllm_host_step_s
from dse.serving.static import ServingRequest, predict_serving
from dse.serving.steady import OUTPUT_CONTEXT_FRAC, steady_state
from dse.serving.steps import reserved_tokens_per_request, step_predictor, step_time_table
from dse.workload.engine import ENGINES

SILICON_MODELS: dict[str, str] = {
    "Qwen/Qwen3-32B": "qwen3-32b",
    "meta-llama/Llama-3.1-70B": "llama-3.1-70b",
}
SILICON_GPUS: dict[str, str] = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm"}
# Requests per benchmark run = SILICON_WAVES x concurrency: InferenceMAX (the Llama-3.1-70B rows) sends
# 10 x concurrency prompts; for the Qwen3-32B rows, whose runs do not record it, the same is an assumption.
SILICON_WAVES = 10
# Benchmark clients ask for greedy decoding (temperature 0) with ignore_eos and fixed lengths.
SILICON_SAMPLING = "greedy"
# Spread of output lengths around osl in the simulated benchmark (module docstring).
SILICON_OUTPUT_SPREAD = 0.2
# Log-space sigma of the lengths in the load model: the CV of a +-10% uniform spread (module docstring).
SILICON_LENGTH_SIGMA = round(SILICON_OUTPUT_SPREAD / 12**0.5, 3)
# aiconfigurator's own gap-analysis runs (`silicon_data_source` prefix): fixed lengths (`silicon_lengths`).
GAP_ANALYSIS_SOURCE = "source_file=aic-auto-gap-analysis/"
# The KV-cache share of free memory in the TensorRT-LLM configs aiconfigurator generates for its runs
# (`silicon_memory_fraction`): its generator templates' `kv_cache_config.free_gpu_memory_fraction` default,
# 0.80 in every TensorRT-LLM version's `extra_engine_args.*.yaml.j2` (aiconfigurator 0.12.0 on PyPI,
# `generator/config/backend_templates/trtllm/`, 1.0.0rc3's among them), against the engine's own 0.9.
AIC_TRTLLM_FREE_GPU_MEMORY_FRACTION = 0.80
# aiconfigurator's benchmark script for the deployments it generates (`generator/config/backend_templates/
# benchmark/bench_run.sh.j2`, aiconfigurator 0.12.0): aiperf with `--num-requests` concurrency x
# BENCH_MULTI_ROUND (20) after `--warmup-request-count` concurrency x 2, a phase aiperf lets drain before
# the profiled one starts (its phases' `seamless` default, False): the profiled requests are a closed loop
# started afresh, and the warm-up leaves nothing behind (block reuse off), so it is not simulated.
AIC_BENCH_ROUNDS = 20
# The engine limits aiconfigurator's generator rules give an aggregated worker whose sweep names no batch
# size (`generator/rule_plugin/trtllm.rule`, `vllm.rule`, aiconfigurator 0.12.0): max_batch_size 128 for
# TensorRT-LLM, 512 for vLLM (its max-num-seqs), and a step budget of max_batch_size + isl + 500 tokens
# (TensorRT-LLM max_num_tokens, rounded up to its 32-token blocks) or + 1500 (vLLM
# max-num-batched-tokens): one whole prompt per step beside the decodes. (engine: (max_batch_size, extra
# tokens, rounding)). SGLang's rule (mixed chunks, max_prefill_tokens isl + 1500) is not taken: its rows
# run as its prefill-first default does (`silicon_engine_limits`).
AIC_ENGINE_LIMITS: dict[str, tuple[int, int, int]] = {"trtllm": (128, 500, 32), "vllm": (512, 1500, 1)}
# Engines whose chunked prefill splits prompts over steps (TensorRT-LLM's is off by default).
CHUNKED_PREFILL: dict[str, bool] = {"vllm": True, "sglang": True, "trtllm": False}


# ------------------------------------------------------------------------------- step prediction


# ------------------------------------------------------------------------------------------ frame


def _precision(row: pd.Series) -> str:
    for column in ("gemm_quant_mode", "precision"):
        value = row.get(column)
        if isinstance(value, str) and "fp8" in value.lower():
            return "fp8"
    return "bf16"


def silicon_kv_dtype(backend: str, precision: str) -> str | None:
    """KV-cache dtype of a silicon row: fp8 when the GEMMs are fp8, else the activation dtype (None).

    The rows do not record it. TensorRT-LLM takes it from the checkpoint, and NVIDIA ModelOpt fp8
    checkpoints quantize the KV cache too (`kv_cache_quant_algo: FP8`). For vLLM the rows themselves rule
    a bf16 cache out: Llama-3.1-70B at 8192/1024 and concurrency 32 runs without queueing (TTFT 3.1 s), which
    needs >= 32 x 8.7k tokens of cache, more than the ~190k bf16 tokens that fit on an H200 next to the
    weights; Qwen3-32B at 4000/1000 and concurrency 24 has a TPOT (16.9 ms) below the time to stream the
    fp8 weights plus a bf16 cache of its context at full HBM bandwidth (~18.5 ms). `backend` is kept for
    engines that differ.
    """
    del backend
    return "fp8" if precision == "fp8" else None


def silicon_lengths(row: pd.Series) -> dict[str, Any]:
    """`LoadRequest` length fields of a silicon row: as its benchmark drew them.

    aiconfigurator's gap-analysis runs (`GAP_ANALYSIS_SOURCE`, Dynamo's benchmarking recipe: genai-perf /
    aiperf synthetic prompts with `--synthetic-input-tokens-stddev 0`, `--output-tokens-stddev 0` and
    ignore_eos) send every request with exactly isl and osl tokens, so the closed loop's waves stay
    together: a wave's requests finish in the same step and their successors arrive together, each
    waiting for the prompts of its wave-mates (the module docstring has the TP1 evidence; the multi-GPU
    evidence is in `dse.calibrate.validate.silicon_multigpu`). The InferenceMAX-style runs (the other
    sources; vLLM `benchmark_serving` random prompts over a range of lengths) spread them: lognormal of
    sigma SILICON_LENGTH_SIGMA.
    """
    if gap_analysis(row):
        return {"length_dist": "fixed"}
    return {"length_dist": "lognormal", "length_sigma": SILICON_LENGTH_SIGMA}


def silicon_memory_fraction(row: pd.Series) -> float | None:
    """The KV-cache memory fraction of a row's run when it is not the engine's default (None): the
    TensorRT-LLM runs of aiconfigurator's gap analysis take its generated configs'
    AIC_TRTLLM_FREE_GPU_MEMORY_FRACTION. It decides only KV-limited rows: the Qwen3-32B fp8 run at isl 2048,
    osl 512 and concurrency 128 (~118 running instead of 128: TTFT 1.23 -> 3.60 s, measured 6.39 s)."""
    trtllm = str(row["backend"]) == "trtllm"
    return AIC_TRTLLM_FREE_GPU_MEMORY_FRACTION if gap_analysis(row) and trtllm else None


def gap_analysis(row: pd.Series) -> bool:
    """Whether a silicon row comes from aiconfigurator's own gap-analysis runs (GAP_ANALYSIS_SOURCE)."""
    return str(row.get("silicon_data_source", "")).startswith(GAP_ANALYSIS_SOURCE)


def silicon_requests(row: pd.Series) -> int:
    """Requests of a row's benchmark run: AIC_BENCH_ROUNDS x concurrency for the gap-analysis runs (their
    aiperf script), SILICON_WAVES x concurrency for the others."""
    return (AIC_BENCH_ROUNDS if gap_analysis(row) else SILICON_WAVES) * int(row["batch_size"])


def aic_engine_limits(backend: str, input_tokens: int) -> tuple[int, int] | None:
    """(max running sequences, tokens per step) of `backend` as aiconfigurator generates its aggregated
    configs (AIC_ENGINE_LIMITS), None for an engine whose rule is not taken."""
    if backend not in AIC_ENGINE_LIMITS:
        return None
    batch, extra, block = AIC_ENGINE_LIMITS[backend]
    return batch, -(-(batch + input_tokens + extra) // block) * block


def silicon_engine_limits(row: pd.Series, load: LoadRequest, max_tokens: int) -> LoadRequest:
    """`load` with the engine limits of the row's run: the gap-analysis runs' generated settings
    (`aic_engine_limits`; TensorRT-LLM and vLLM), else for TensorRT-LLM a budget holding the longest prompt
    drawn beside every client's decode (`silicon_token_budget`; `max_tokens` is the model's context).

    Evidence for the generated TensorRT-LLM budget (one prompt per step), independent of TTFT: the TPOT of
    its Qwen3-32B TP1 rows at concurrency 8 falls with the output length (18.7 / 17.0 / 16.2 ms at osl 128 /
    256 / 512, isl 1024) by the other clients' prefills landing in fewer steps, as staggered requests do
    (predicted 18.5 / 16.9 / 16.4 ms); with 8192 tokens a step, the waves' prompts run together, the decodes
    never meet a prefill and the TPOT is flat (16 ms at every osl). SGLang's generated rule (mixed chunks)
    is not taken: it moves its multi-GPU rows' TTFT from 29% to 59% and TPOT from 17% to 20% (prefill-first
    waves, its default, fit them), so it was not in force for those runs.
    """
    backend, n = str(row["backend"]), int(row["batch_size"])
    limits = aic_engine_limits(backend, load.input_tokens) if gap_analysis(row) else None
    if limits is not None:
        return dataclasses.replace(load, max_num_seqs=limits[0], max_batched_tokens=limits[1])
    if backend != "trtllm":
        return load
    longest = int(draw_lengths(load, silicon_requests(row), max_tokens)[0].max())
    return dataclasses.replace(load, max_batched_tokens=silicon_token_budget(backend, longest, n))


def silicon_token_budget(backend: str, input_tokens: int, concurrency: int) -> int:
    """Tokens per engine step (prompt + decode) of a silicon row's engine at its defaults (the load model
    takes it outside the gap-analysis runs, `silicon_engine_limits`; `silicon_frame` for every row):
    CHUNK_TOKENS, and for TensorRT-LLM (chunked prefill off) at least one whole prompt beside the decodes
    of all clients.

    Assumption, from the rows: without chunking TensorRT-LLM schedules a prompt only where the step's
    tokens stay within max_num_tokens (`dse.serving.continuous`), so with the 8192 default an 8192-token
    prompt would wait until no request decodes and every request would queue behind whole requests
    (simulated TTFT 60-270x the measured one at concurrency 4-32 of the Llama-3.1-70B 8192x1024 rows).
    The measured TTFTs there (1.2-2.7 s: a few prefills) show the prompts running beside the decodes, so
    those runs set max_num_tokens above isl + concurrency; the exact setting is not recorded.
    """
    if backend == "trtllm":
        return max(CHUNK_TOKENS, input_tokens + concurrency)
    return CHUNK_TOKENS


def silicon_frame(
    *, point: OperatingPoint | None = None, coeffs: Any = None, power_coeffs: Any = None
) -> pd.DataFrame:
    """Per-row predicted vs measured for the aiconfigurator silicon rows (module docstring).

    TTFT and TPOT come from the closed-loop benchmark simulation (`dse.serving.continuous`) over step times
    of the row's engine; `point`, `coeffs` and `power_coeffs` (defaults: default clocks, shipped sets)
    apply to them as to the steady-state and static columns.
    """
    predict_step = step_predictor(point, coeffs, power_coeffs)
    out = []
    for _, r in load_aiconfigurator_silicon().iterrows():
        arch = cached_arch(SILICON_MODELS[r["model_path"]])
        gpu = cached_gpu(SILICON_GPUS[r["gpu"]])
        prec, backend = _precision(r), str(r["backend"])
        engine = ENGINES[backend]
        kv_dtype = silicon_kv_dtype(backend, prec)
        n, i, o = int(r["batch_size"]), int(r["isl"]), int(r["osl"])
        context = min(round(i + OUTPUT_CONTEXT_FRAC * o), arch.max_position_embeddings - 1)
        frac = silicon_memory_fraction(r)
        capacity = kv_capacity_tokens(arch, gpu, prec, kv_dtype, engine=backend, memory_frac=frac)
        # the steady-state columns' running batch; the simulation admits by KV room itself
        max_running = min(n, max_running_requests(capacity, reserved_tokens_per_request(backend, i, o)))
        # step times over decode and prompt tokens per step, up to the most a step holds: the token budget
        # (a chunked step's prompt tokens fill what the decodes leave), or one whole prompt longer than it
        chunked, budget = CHUNKED_PREFILL[backend], silicon_token_budget(backend, i, n)
        top = budget if chunked else max(budget, i)
        key = (arch.name, gpu.name, prec, engine.name, SILICON_SAMPLING, kv_dtype)
        host_s = silicon_host_step_s(r)  # the engine's CPU time per step, in series with the GPU's
        step_time = _with_host_time(step_time_table(key, max_decodes=n, input_tokens=i, context_len=context,
                                    max_prompt_tokens=top, predict_step=predict_step), host_s)  # fmt: skip
        alone = simulate_closed_loop(
            step_time, concurrency=1, requests=1, input_tokens=i, output_tokens=o, max_running=1,
            token_budget=budget, chunked=chunked,
        )  # fmt: skip
        sim = simulate_closed_loop(
            step_time, concurrency=n, requests=SILICON_WAVES * n, input_tokens=i, output_tokens=o,
            max_running=n, token_budget=budget, chunked=chunked,
            output_spread=SILICON_OUTPUT_SPREAD, kv_capacity_tokens=capacity,
            reserve_output=backend == "trtllm",
        )  # fmt: skip
        ss = steady_state(
            arch, gpu, batch=max_running, input_tokens=i, output_tokens=o, precision=prec,
            point=point, coeffs=coeffs, power_coeffs=power_coeffs,
            engine=engine, sampling=SILICON_SAMPLING, kv_dtype=kv_dtype, host_step_s=host_s,
        )  # fmt: skip
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
                "backend": backend,
                "precision": prec,
                "kv_dtype": kv_dtype or "auto",
                "concurrency": n,
                "batch": sim.max_admitted,
                "batch_steady": max_running,
                "input_tokens": i,
                "output_tokens": o,
                "context_len": ss.context_len,
                "arrivals_per_step": ss.arrivals_per_step,
                "tpot_s": sim.tpot_mean_s,
                "ttft_s": sim.ttft_mean_s,
                "ttft_alone_s": alone.ttft_mean_s,
                "tpot_steady_s": ss.mean_step_s,
                "ttft_steady_s": ss.ttft_s,
                "tpot_decode_only_s": ss.decode_step_s,
                "tpot_static_s": static.tpot_s,
                "ttft_static_s": static.ttft_s,
                "static_feasible": static.feasible,
                "meas_tpot_s": float(r["tpot_s"]),
                "meas_ttft_s": float(r["ttft_s"]),
            }
        )
    return pd.DataFrame(out)


def _with_host_time(step_time: Callable[[int, int], float], host_s: float) -> Callable[[int, int], float]:
    """A step-time function that adds the engine's host time to every step."""

    def timed(decodes: int, prompt_tokens: int) -> float:
        return step_time(decodes, prompt_tokens) + host_s

    return timed


def silicon_host_step_s(r: pd.Series) -> float:
    """The engine's host time per step in a row's run (`dse.serving.presets`): vLLM's by the row's
    `backend_version` (async scheduling on by default from 0.18, where it is 0; unknown versions as 0.12),
    0 for SGLang and TensorRT-LLM, which overlap it."""
    if str(r["backend"]) != "vllm":
        return 0.0
    version = r.get("backend_version")
    return vllm_host_step_s(None if pd.isna(version) else str(version))


def silicon_load_request(r: pd.Series) -> tuple[str, str, LoadRequest]:
    """(catalog model, catalog GPU, load request) of a silicon row for `predict_load` (module docstring)."""
    arch = cached_arch(SILICON_MODELS[r["model_path"]])
    gpu = SILICON_GPUS[r["gpu"]]
    prec, backend = _precision(r), str(r["backend"])
    n, i, o = int(r["batch_size"]), int(r["isl"]), int(r["osl"])
    load = LoadRequest(
        mode="concurrency", concurrency=n, num_requests=silicon_requests(r), input_tokens=i, output_tokens=o,
        precision=prec, kv_dtype=silicon_kv_dtype(backend, prec), engine=backend, sampling=SILICON_SAMPLING,
        host_step_s=silicon_host_step_s(r), gpu_memory_utilization=silicon_memory_fraction(r),
        **silicon_lengths(r),
    )  # fmt: skip
    return arch.name, gpu, silicon_engine_limits(r, load, arch.max_position_embeddings)


def silicon_load_frame(
    *, point: OperatingPoint | None = None, coeffs: Any = None, power_coeffs: Any = None
) -> pd.DataFrame:
    """Per silicon row (by `id`): the load model's TTFT and TPOT in the benchmark's mode (module doc)."""
    out = []
    for _, r in load_aiconfigurator_silicon().iterrows():
        model, gpu, load = silicon_load_request(r)
        m = load_metrics(model, gpu, load, point=point, coeffs=coeffs, power_coeffs=power_coeffs)
        out.append(
            {
                "id": str(r["id"]),
                "concurrency_load": load.concurrency,
                "max_batched_tokens_load": load.max_batched_tokens,
                "ttft_load_s": m["ttft_s"],
                "tpot_load_s": m["tpot_s"],
                "ttft_p90_load_s": m["ttft_p90_s"],
                "avg_batch_size_load": m["avg_batch_size"],
                "preemptions_load": m["preemptions"],
            }
        )
    return pd.DataFrame(out)


__all__ = [
    "AIC_BENCH_ROUNDS",
    "AIC_ENGINE_LIMITS",
    "AIC_TRTLLM_FREE_GPU_MEMORY_FRACTION",
    "CHUNKED_PREFILL",
    "SILICON_GPUS",
    "SILICON_LENGTH_SIGMA",
    "SILICON_MODELS",
    "SILICON_OUTPUT_SPREAD",
    "SILICON_SAMPLING",
    "SILICON_WAVES",
    "aic_engine_limits",
    "gap_analysis",
    "reserved_tokens_per_request",
    "silicon_frame",
    "silicon_host_step_s",
    "silicon_kv_dtype",
    "silicon_lengths",
    "silicon_memory_fraction",
    "silicon_load_frame",
    "silicon_load_request",
    "silicon_engine_limits",
    "silicon_requests",
    "silicon_token_budget",
]

"""Serving-engine presets: the scheduler defaults of vLLM, SGLang and TensorRT-LLM, each overridable.

vllm (V1, 0.10-0.12, OpenAI server):
    max_num_seqs 1024 and max_batched_tokens 8192 on GPUs with >= 70 GiB that are not A100s, else 256 and
    2048; KV blocks of 16 tokens; chunked prefill on; no output reserved at admission (blocks are
    allocated as tokens come, recompute preemption when they run out); decode steps padded to a captured
    CUDA-graph batch (1, 2, 4, 8..248 by 8, 256..512 by 16); vLLM's top-k/top-p sampler; KV cache in the
    activation dtype (`--kv-cache-dtype auto`); `gpu_memory_utilization` 0.9; 0.7 ms of host time per
    step (async scheduling off, below). Piecewise CUDA graphs hold any step of at most min(2 x
    max_num_seqs, 512) tokens, prompt chunks included; a larger step runs eagerly and lasts at least
    0.8 ms of host dispatch per dense layer, more for layers of more kernels (`VLLM_EAGER_LAYER_HOST_S`,
    below).
sglang (0.4-0.5):
    max_running_requests 4096 (its automatic limit is far above what the KV pool holds here);
    chunked_prefill_size and cuda_graph_max_bs by GPU memory (`SGLANG_MEMORY_TIERS`: 8192 and 256 on
    60-160 GiB GPUs); page_size 1; chunked prefill on; 0.7 of the remaining
    output reserved at admission (init_new_token_ratio); prefill first: a step runs prompt chunks only
    whenever any can be scheduled, else the decodes (`enable_mixed_chunk` off); CUDA graphs up to
    cuda_graph_max_bs, padded; greedy sampling; KV in the activation dtype; memory by its automatic
    mem_fraction_static; prompt steps and decode steps above cuda_graph_max_bs run eagerly, at least 0.8 ms
    of host dispatch per dense layer (below).
trtllm (1.x, PyTorch backend):
    max_batch_size 2048; max_num_tokens 8192; tokens_per_block 32; chunked prefill off; the whole sequence
    reserved at admission (GUARANTEED_NO_EVICT); CUDA graphs for generation-only steps at every batch up to
    max_batch_size (no padding); steps with prompt tokens run eagerly, at least 0.8 ms of host dispatch per
    dense layer (below); greedy sampling; fp8 KV cache with fp8 weights (ModelOpt checkpoints quantize the
    KV cache); free_gpu_memory_fraction 0.9 of what the weights and activations leave.
none:
    a generic continuous batcher: 256 sequences, 8192 tokens per step, blocks of 16, chunked prefill, no
    kernel fusion, CUDA graphs or sampler, vLLM's memory rule.

Sources: vLLM `EngineArgs._set_default_args` (OpenAI server usage context) and `CompilationConfig`
capture sizes; SGLang `ServerArgs` (`chunked_prefill_size`, `page_size`, `cuda_graph_max_bs`,
`schedule_conservativeness` / `init_new_token_ratio`, `enable_mixed_chunk`; `Scheduler.get_next_batch_to_run`
tries a new prefill batch before the decode batch); TensorRT-LLM `LlmArgs` (`max_batch_size`,
`max_num_tokens`, `KvCacheConfig`, `CapacitySchedulerPolicy.GUARANTEED_NO_EVICT`, chunked prefill off).
The KV-cache sizing rules are in `dse.serving.memory.kv_capacity_tokens`. `none` is a generic continuous
batcher with vLLM's block size and no kernel fusion, CUDA graphs or sampler.

Per-step host time (`host_step_s`: the engine core's scheduling, input preparation and output handling on
the CPU while the GPU waits). vLLM 0.10-0.12 runs them in series with the GPU step: its
`SchedulerConfig.async_scheduling` defaults to False (read in the 0.11.1 and 0.12.0 sources, "async
scheduling ... helps to avoid gaps in GPU utilization"), and `EngineCore.step` schedules, runs the model and
waits for the sampled tokens before it updates the requests and schedules again; so the vllm preset pays
VLLM_SYNC_HOST_STEP_S per step, the GPU idle meanwhile. vLLM 0.18 turns async scheduling on by default
(`VllmConfig`: None -> True unless speculative decoding or the executor forbids it), and SGLang's overlap
scheduler and TensorRT-LLM's executor loop overlap that work with the GPU step: 0 there, and
`--host-step-us 0` models a vLLM run with async scheduling.

Scheduling ahead (`EnginePreset.schedule_ahead`): the same overlap means the engine schedules step k + 1 while
the GPU runs step k, so a request that reaches a busy engine joins one step later than a synchronous engine
would take it (`dse.serving.scheduler`, arrivals). TensorRT-LLM's PyTorch executor
(`PyExecutor._executor_loop_overlap`, the default: `disable_overlap_scheduler` False in 1.x) fetches new
requests, schedules and launches batch k + 1, and only then waits for batch k's tokens; SGLang's overlap
schedule (on unless `--disable-overlap-schedule`, since 0.4) runs its event loop the same way; vLLM's async
scheduling does from 0.18 (0 host time here), not before.

Per-layer host time of eager steps (`eager_layer_host_s`): a step the engine runs without a CUDA graph
dispatches every layer's kernels from Python (module calls, custom-op wrappers, attention metadata,
launches). The launches run ahead of the GPU, so the step takes max(GPU time, the host's dispatch) and the
GPU idles at idle power while the host is behind: short prompts on fast or many GPUs (1,024 tokens at TP 8)
wait for the host, long prompts do not. The dispatch costs `eager_layer_host_s` per dense decoder layer of
REFERENCE_LAYER_LAUNCHES kernel launches and grows with a model's launches (`dse.serving.step_table.
layer_launches`): an MoE layer launches 14-29 (router, top-k, expert GEMMs, shared experts; MLA's extra
projections), so MiniMax-M2.5 and Kimi-K2.5 layers cost 1.4x and 2.3x a Llama layer in vLLM (other dense
layers move too: gemma-3's pre- and post-norms 1.2x, GPT-2-style layers without rotary 0.9x). On
aiconfigurator's multi-GPU rows (vLLM and SGLang, 653) this took TTFT from 41.3% to 36.5% (MiniMax 46 -> 37%,
Kimi 48 -> 33%, DeepSeek-V3 48 -> 37%; TPOT 18.4 -> 19.0%) and ML.ENERGY's H100 transfer rows' throughput
from 13.9% to 12.7% (gemma-3's rows much of it) where one cost per layer had left them. Decode-only steps of
more sequences than the largest graph run eagerly
too (ML.ENERGY's B200 runs slow down past vLLM's 512-token graphs: Qwen3-30B-A3B's median ITL goes from 38 ms
at 512 sequences to 87 ms at 768, its throughput falls). vLLM (the published figure) and SGLang, whose model
forward is the same Python-dispatched PyTorch (its prompt batches never run in graphs; checked on
aiconfigurator's Llama-3.1-8B SGLang rows at 240-512 clients, a flat ~30 ms per step at TP 2-8: TPOT 46 ->
24%). TensorRT-LLM's PyTorch backend (its default from 1.0) too: its model forward is Python-dispatched
PyTorch modules and its CUDA graphs hold generation-only batches (`cuda_graph_config`; aiconfigurator's
generator names their sizes `agg_decode cuda_graph_batch_sizes`), so its context steps dispatch each layer.
On aiconfigurator's multi-GPU TensorRT-LLM rows (572) that took TTFT from 50.5% to 41.7% and TPOT from 16.1%
to 16.0% (dense Llama-3.1-8B 13.0 -> 8.3% and Qwen3-32B 12.2 -> 9.1%, whose decodes meet the other clients'
longer prefills; Qwen3-235B 12.3 -> 20.6% while its 94 MoE layers counted 13 launches each, ~100 ms a
step). TensorRT-LLM's fused-MoE op is one call from Python (`EngineProfile.one_call_moe` in
`dse.workload.engine`: 9 launches a Qwen3 MoE layer): on its 246 MoE rows TPOT 24.8 -> 20.9% (Qwen3-235B
20.6 -> 12.9%), TTFT 38.5% either way (Qwen3-235B 23.4 -> 19.7%, DeepSeek-V3 59.2 -> 61.3%, gpt-oss-120b
52.5 -> 57.4%, both predicted short already). The TP1 rows do not move (their prefills outlast the dispatch).
"""

from __future__ import annotations

import bisect
import dataclasses
from dataclasses import dataclass

from dse.errors import ConfigError
from dse.hardware.spec import GpuSpec
from dse.units import GIB

# vLLM's larger defaults apply to GPUs with at least this much memory that are not A100s.
VLLM_LARGE_GPU_BYTES = 70 * GIB
# NOTE(dse): vLLM 0.10-0.12's CPU time per engine step with async scheduling off (module docstring). No
# published figure: fitted on the 30 in-sample ML.ENERGY H100 rows (vLLM 0.11.1; TPOT MAPE 7.2% with none,
# 5.3 / 4.8 / 4.8 / 5.0% at 0.5 / 0.7 / 0.8 / 1.0 ms) and checked on rows no fit uses: ML.ENERGY transfer
# H100 TPOT 12.8 -> 10.8% and throughput 17.4 -> 13.7%, B200 chat TPOT 16.7 -> 12.4%; aiconfigurator vLLM
# rows (0.12 and unversioned) about even: TP1 TPOT 11.1 -> 12.0%, TP1-8 24.2 -> 24.1%.
VLLM_SYNC_HOST_STEP_S = 0.7e-3
# NOTE(dse): vLLM's CPU time per (dense) decoder layer in a step that runs without CUDA graphs (more tokens
# than its largest captured graph: a long prompt chunk, or more decodes than that graph; SGLang's presets take
# it too, module docstring). Source: aiconfigurator 0.12.0
# (`VLLMBackend._prefill_dispatch_overhead_ms`, "~0.8ms/layer against the full silicon corpus across
# hardware platforms and model families", there added to every prefill). Here the launches are asynchronous:
# the step takes max(GPU time, layers x this), the GPU idle while the host is behind, and a layer of more
# launches than a dense one's REFERENCE_LAYER_LAUNCHES costs more in proportion (module docstring).
VLLM_EAGER_LAYER_HOST_S = 0.8e-3
# Kernel launches of the dense decoder layer the per-layer host time is quoted for: a Llama / Qwen3 layer as
# vLLM runs it (fused residual-add + RMSNorm twice, QKV, rotary, KV-cache write, attention, o_proj, gate_up,
# SiLU-and-mul, down), in 16-bit weights: the quoted figure comes from a silicon corpus of mostly fp8 runs,
# so it already holds the quantization launches a layer adds, and they are not counted again.
REFERENCE_LAYER_LAUNCHES = 10
# The first vLLM release read with async scheduling on by default (0.12.0's source still has it off).
VLLM_ASYNC_DEFAULT_FROM: tuple[int, int] = (0, 18)


def vllm_host_step_s(version: str | None) -> float:
    """vLLM's host time per step for a run of `version` ("0.12.0") at its defaults: 0 from
    VLLM_ASYNC_DEFAULT_FROM on (async scheduling), VLLM_SYNC_HOST_STEP_S before it (read for 0.11.1 and
    0.12.0; 0.13-0.17 not read, taken as 0.12) and where the version is not known."""
    parts = str(version or "").split(".")
    try:
        release = (int(parts[0]), int(parts[1]))
    except (IndexError, ValueError):
        return VLLM_SYNC_HOST_STEP_S
    return 0.0 if release >= VLLM_ASYNC_DEFAULT_FROM else VLLM_SYNC_HOST_STEP_S


# TensorRT-LLM's max_batch_size; its PyTorch backend captures generation-only batches up to it (module doc).
TRTLLM_MAX_BATCH = 2048
VLLM_GRAPH_SIZES: tuple[int, ...] = (1, 2, 4, *range(8, 256, 8), *range(256, 513, 16))
# SGLang's defaults by GPU memory at TP < 4 (`ServerArgs._handle_gpu_memory_settings`, 0.4.7-0.5, as read in
# its source, not re-checked against a run): (memory below, GiB; chunked_prefill_size; cuda_graph_max_bs).
SGLANG_MEMORY_TIERS: tuple[tuple[float, int, int], ...] = (
    (20.0, 2048, 8),  # T4, RTX 4080
    (35.0, 2048, 24),  # A10, L4, RTX 4090
    (60.0, 4096, 32),  # A100 40GB, L40S
    (90.0, 8192, 256),  # H100, A100 80GB
    (160.0, 8192, 256),  # H200
    (float("inf"), 16384, 512),  # B200
)


def sglang_tier(gpu: GpuSpec) -> tuple[int, int]:
    """(chunked_prefill_size, cuda_graph_max_bs) SGLang picks for `gpu`'s memory (`SGLANG_MEMORY_TIERS`)."""
    gib = gpu.memory.capacity_bytes / GIB
    return next((chunk, graphs) for below, chunk, graphs in SGLANG_MEMORY_TIERS if gib < below)


@dataclass(frozen=True, slots=True, kw_only=True)
class EnginePreset:
    """One engine's scheduler defaults (module docstring); every field can be overridden."""

    name: str
    max_num_seqs: int
    max_batched_tokens: int
    block_size_tokens: int
    chunked_prefill: bool
    reserve_output_frac: float
    cuda_graph_sizes: tuple[int, ...]
    sampling: str
    fp8_kv_with_fp8_weights: bool
    gpu_memory_utilization: float | None  # None: the engine's own rule (dse.serving.memory)
    host_step_s: float = 0.0
    mixed_prefill: bool = True  # False: prefill-first steps, decodes pause (`dse.serving.scheduler`)
    graphs_hold_prompts: bool = False  # steps with prompt tokens captured too (vLLM's piecewise graphs)
    eager_layer_host_s: float = 0.0  # CPU time per 10 launches (a dense layer) of a step without CUDA graphs
    graph_tokens_per_seq: int = 0  # > 0: no graph above this many tokens per max_num_seqs (vLLM: 2)

    @property
    def schedule_ahead(self) -> bool:
        """Whether the engine schedules each step while the GPU runs the previous one (module docstring):
        SGLang and TensorRT-LLM, and vLLM with async scheduling (no host time per step)."""
        return self.name in OVERLAPPED_ENGINES or (self.name == "vllm" and self.host_step_s == 0.0)

    def launch_mode(self, decodes: int, prefill_tokens: int = 0) -> str:
        """The step's launch mode: CUDA graphs for steps the engine has captured (decode-only steps up to
        its largest graph; with `graphs_hold_prompts`, any step of at most that many tokens), eager
        (each layer's kernels dispatched from Python) otherwise."""
        tokens = decodes + prefill_tokens if self.graphs_hold_prompts else decodes
        captured = bool(self.cuda_graph_sizes) and tokens <= self.cuda_graph_sizes[-1]
        return "graphs" if captured and (prefill_tokens == 0 or self.graphs_hold_prompts) else "eager"

    def with_graph_limit(self) -> EnginePreset:
        """The preset with the graphs its max_num_seqs allows: vLLM captures up to min(2 x max_num_seqs,
        512) tokens unless told otherwise (`max_cudagraph_capture_size`'s default, vLLM 0.10-0.11)."""
        if not self.graph_tokens_per_seq:
            return self
        limit = self.graph_tokens_per_seq * self.max_num_seqs
        sizes = tuple(s for s in self.cuda_graph_sizes if s <= limit)
        return dataclasses.replace(self, cuda_graph_sizes=sizes)

    def padded_decodes(self, decodes: int) -> int:
        """Decode-only steps run as the smallest captured CUDA graph that holds them (eager above)."""
        sizes = self.cuda_graph_sizes
        if not sizes or decodes > sizes[-1]:
            return decodes
        return sizes[bisect.bisect_left(sizes, decodes)]

    def kv_dtype(self, precision: str, kv_dtype: str | None) -> str | None:
        """The KV-cache dtype the engine uses: the one asked for, else its default for `precision`."""
        if kv_dtype is not None:
            return kv_dtype
        return "fp8" if precision == "fp8" and self.fp8_kv_with_fp8_weights else None


ENGINE_NAMES: tuple[str, ...] = ("vllm", "sglang", "trtllm", "none")
# Engines that always schedule a step ahead of the GPU (module docstring); vLLM does with async scheduling.
OVERLAPPED_ENGINES: tuple[str, ...] = ("sglang", "trtllm")


def engine_preset(name: str, gpu: GpuSpec) -> EnginePreset:
    """The defaults of engine `name` on `gpu`; ConfigError naming the engines for another name."""
    if name == "vllm":
        large = gpu.memory.capacity_bytes >= VLLM_LARGE_GPU_BYTES and not gpu.name.startswith("a100")
        return EnginePreset(
            name="vllm",
            max_num_seqs=1024 if large else 256,
            max_batched_tokens=8192 if large else 2048,
            block_size_tokens=16,
            chunked_prefill=True,
            reserve_output_frac=0.0,
            cuda_graph_sizes=VLLM_GRAPH_SIZES,
            sampling="top_k_top_p",
            fp8_kv_with_fp8_weights=False,
            gpu_memory_utilization=0.9,
            host_step_s=VLLM_SYNC_HOST_STEP_S,
            graphs_hold_prompts=True,
            eager_layer_host_s=VLLM_EAGER_LAYER_HOST_S,
            graph_tokens_per_seq=2,
        )
    if name == "sglang":
        chunk, graphs = sglang_tier(gpu)
        return EnginePreset(
            name="sglang",
            max_num_seqs=4096,
            max_batched_tokens=chunk,
            block_size_tokens=1,
            chunked_prefill=True,
            reserve_output_frac=0.7,
            cuda_graph_sizes=tuple(range(1, graphs + 1)),
            sampling="greedy",
            fp8_kv_with_fp8_weights=False,
            gpu_memory_utilization=None,
            mixed_prefill=False,
            eager_layer_host_s=VLLM_EAGER_LAYER_HOST_S,
        )
    if name == "trtllm":
        return EnginePreset(
            name="trtllm",
            max_num_seqs=TRTLLM_MAX_BATCH,
            max_batched_tokens=8192,
            block_size_tokens=32,
            chunked_prefill=False,
            reserve_output_frac=1.0,
            cuda_graph_sizes=tuple(range(1, TRTLLM_MAX_BATCH + 1)),
            sampling="greedy",
            fp8_kv_with_fp8_weights=True,
            gpu_memory_utilization=None,
            eager_layer_host_s=VLLM_EAGER_LAYER_HOST_S,
        )
    if name == "none":
        return EnginePreset(
            name="none",
            max_num_seqs=256,
            max_batched_tokens=8192,
            block_size_tokens=16,
            chunked_prefill=True,
            reserve_output_frac=0.0,
            cuda_graph_sizes=(),
            sampling="none",
            fp8_kv_with_fp8_weights=False,
            gpu_memory_utilization=0.9,
        )
    raise ConfigError(f"engine '{name}' is not one of {', '.join(ENGINE_NAMES)}")

"""Memory of a serving engine: the share of the GPU it may use and the KV-cache tokens that fit; and of one
LLM pass (`pass_memory_bytes`, for `dse predict --phase`).

Each engine sizes its KV cache by its own documented rule (`kv_capacity_tokens`); the static-batch model
checks its footprint against `USABLE_MEMORY_FRAC` of the capacity (vLLM's default).
"""

from __future__ import annotations

from collections.abc import Mapping

from dse.hardware.spec import GpuSpec
from dse.workload.engine import engine_profile, kv_bytes_per_token
from dse.workload.llm import LlmArch, prefill_activation_bytes, weight_bytes

# Tokens per engine step that the serving engines prefill at most (vLLM max_num_batched_tokens and
# TensorRT-LLM max_num_tokens defaults in these runs): the activation reserve of the capacity model.
CHUNK_TOKENS = 8192
# TensorRT-LLM's KvCacheConfig.free_gpu_memory_fraction default: the share of the memory free after the
# weights and the profiling pass that goes to the KV cache.
TRTLLM_FREE_GPU_MEMORY_FRACTION = 0.9
# SGLang's reserved-memory heuristic for its automatic mem_fraction_static (`sglang_mem_fraction_static`).
SGLANG_RESERVED_MIB = 512.0
SGLANG_ACTIVATION_MIB_PER_TOKEN = 1.5
SGLANG_MIB_PER_GRAPH_BATCH = 2.0


def sglang_mem_fraction_static(gpu: GpuSpec) -> float:
    """SGLang's automatic `mem_fraction_static` (weights + KV pool share of the GPU memory) at TP 1.

    SGLang (`server_args.py`, `_handle_gpu_memory_settings`, 0.5.x) reserves, in MiB, 512 for constant
    metadata + 1.5 per token of `chunked_prefill_size` for prefill activations + 2 per CUDA-graph batch
    size up to `cuda_graph_max_bs` + 1024 x tp / 8, and gives the rest to weights and KV pool:
    (gpu_mem - reserved) / gpu_mem. Both sizes follow the GPU's memory (`presets.sglang_tier`: 8192 and
    256 on 60-160 GiB GPUs, 2048 and 24 on an L4). Assumption: this is the heuristic as read in the SGLang
    0.5 source, not re-checked against the rows' 0.5.8.post1; it ignores the CUDA context and other memory
    SGLang measures at start-up.
    """
    from dse.serving.presets import sglang_tier

    chunk, graphs = sglang_tier(gpu)
    gpu_mib = gpu.memory.capacity_bytes / 2**20
    reserved_mib = (
        SGLANG_RESERVED_MIB
        + SGLANG_ACTIVATION_MIB_PER_TOKEN * chunk
        + SGLANG_MIB_PER_GRAPH_BATCH * graphs
        + 1024 / 8
    )
    return (gpu_mib - reserved_mib) / gpu_mib


def kv_capacity_tokens(
    arch: LlmArch,
    gpu: GpuSpec,
    precision: str,
    kv_dtype: str | None = None,
    engine: str = "vllm",
    memory_frac: float | None = None,
    layers_frac: float = 1.0,
) -> float:
    """KV-cache tokens that fit, by the engine's rule for sizing its cache:

    - vllm (the default; also "none"): `gpu_memory_utilization` (0.9, USABLE_MEMORY_FRAC) of the GPU minus
      the weights minus the activations of its profiling pass (one CHUNK_TOKENS chunk).
    - trtllm: `free_gpu_memory_fraction` (KvCacheConfig default 0.9) of the memory left after the
      weights and the activations of its max_num_tokens profiling pass.
    - sglang: `mem_fraction_static` of the GPU minus the weights (`sglang_mem_fraction_static`; the
      activations live in the reserved rest).

    `memory_frac` (the user's `--gpu-memory-utilization`) replaces the engine's fraction in its rule.
    `layers_frac` is the share of the model's weights and KV cache on this GPU (1 / pipeline stages; the
    activations of one layer are reserved whole).
    `engine` must name a profile of `dse.workload.engine.ENGINES` (ConfigError otherwise).
    """
    engine_profile(engine)
    total = gpu.memory.capacity_bytes
    weights = weight_bytes(arch, precision) * layers_frac
    activations = prefill_activation_bytes(arch, precision, batch=1, seq_len=CHUNK_TOKENS, attention="flash")
    if engine == "trtllm":
        frac = TRTLLM_FREE_GPU_MEMORY_FRACTION if memory_frac is None else memory_frac
        free = frac * (total - weights - activations)
    elif engine == "sglang":
        frac = sglang_mem_fraction_static(gpu) if memory_frac is None else memory_frac
        free = frac * total - weights
    else:
        frac = USABLE_MEMORY_FRAC if memory_frac is None else memory_frac
        free = frac * total - weights - activations
    return max(free, 0.0) / (kv_bytes_per_token(arch, precision, kv_dtype) * layers_frac)


# vLLM's default gpu_memory_utilization: the share of device memory the engine may use.
USABLE_MEMORY_FRAC = 0.9


def pass_memory_bytes(arch: LlmArch, meta: Mapping[str, object]) -> dict[str, float]:
    """GPU memory of one LLM pass as `dse predict --phase` builds it (`meta`: its graph's phase, batch,
    seq_len or context_len and precision): the weights, a decoder's KV cache after the pass (the prompt's
    tokens, or the context and the new token; an encoder keeps none), and the pass's peak activations
    (`prefill_activation_bytes`; one token per sequence in a decode step). Keys `weight_bytes`,
    `kv_cache_bytes`, `activation_bytes`, `memory_bytes`."""
    precision, batch = str(meta["precision"]), int(str(meta["batch"]))
    decode = meta["phase"] == "decode"
    tokens = int(str(meta["context_len"])) + 1 if decode else int(str(meta["seq_len"]))
    w = weight_bytes(arch, precision)
    kv = batch * tokens * kv_bytes_per_token(arch, precision) if arch.family == "decoder" else 0.0
    act = prefill_activation_bytes(
        arch, precision, batch=batch, seq_len=1 if decode else tokens, attention=str(meta["attention"])
    )
    return {"weight_bytes": w, "kv_cache_bytes": kv, "activation_bytes": act, "memory_bytes": w + kv + act}

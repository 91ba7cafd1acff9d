"""What a serving engine runs per step beyond the model's layers: kernel fusion, KV-cache dtype, sampling.

    step = engine_step_graph(arch, decodes=60, prefills=1, input_tokens=1024, context_len=1500,
                             precision="fp8", engine=ENGINES["trtllm"], sampling="greedy")

`dse.workload.llm` builds a model's forward pass as one kernel per operator (`attn/norm`, `attn/rotary`,
`mlp/residual_add`, ...), the way eager PyTorch launches them. Serving engines launch fewer kernels: small
elementwise and normalization ops are fused into their neighbours. In a decode step every such kernel is
launch- and tail-bound (a few microseconds each, whatever its size), so at small batch the un-fused graph
over-counts ~10-15% of the step. An `EngineProfile` lists the ops an engine folds into a neighbouring
kernel (by the last component of the op name); a fused op is dropped and its neighbour keeps its own cost
(the fused kernel's extra traffic, e.g. the residual read of fused add+RMSNorm, is a few percent of a
launch-bound kernel and is neglected).

Fusions per engine (what their model code and compilers do for Llama/Qwen-style layers):

- vllm (V1, torch.compile with Inductor, CUDA graphs): the model code calls RMSNorm with the residual
  (`fused_add_rms_norm`: residual add + norm in one kernel) and Inductor fuses Qwen3's per-head q/k
  RMSNorm with the rotary embedding into one kernel (the graph's `rotary` op stands for it: `q_norm` and
  `k_norm` are dropped, so a model without q/k norm, e.g. Llama, keeps its rotary kernel). The KV-cache
  write (`reshape_and_cache_flash`) and the quantization of the attention output stay separate:
  attention is a split point of vLLM's piecewise CUDA graphs. The graph's separate fp8 quantization ops
  before the qkv, gate/up and down GEMMs are replaced by the kernel model's own account of vLLM's dynamic
  per-tensor activation quantization (`GemmOp.act_quant`, `dse.perf.gemm_quant.activation_quant`: the
  abs-max and convert kernels, as the aiconfigurator vLLM fp8 measurements include them).
- trtllm (PyTorch backend): fused add+RMSNorm with fp8 output, SwiGLU with fp8 output, fp8 attention
  output, and the attention op's own QKV preprocessing kernel applies the rotary embedding and writes the
  KV cache (q/k norm fused with it for Qwen3): the graph's `rotary` op stands for that kernel, and
  `q_norm`, `k_norm` and `kv_cache_write` are dropped. With static (calibrated) activation scales the
  fp8 GEMMs need no quantization kernels: the graph's `*_quant` ops are dropped and the GEMMs are costed
  without one.
- sglang: fused add+RMSNorm (sgl-kernel); other ops as separate kernels.
- none: the operator graph as built (one kernel per operator).

Sampling (`sampling`): the engine samples one token per sequence that emits one in this step, from fp32
logits [rows, vocab]:

- "greedy": argmax over the vocabulary (one read of the logits after their cast to fp32).
- "top_k_top_p": vLLM's native top-k/top-p sampler, used when a request carries top-k and top-p (the
  Qwen3 generation configs do: top_k 20, top_p 0.95, which vLLM applies by default): cast to fp32,
  temperature scaling, a full sort of each row (keys fp32 + int64 indices; a radix sort makes 4 passes of
  8-bit digits, each reading and writing key and index, plus the index initialization), the top-k
  compare and masked fill, softmax and cumulative sum over the sorted row, the top-p compare and masked
  fill, a scatter back, the final softmax, exponential noise, division and argmax (vLLM's
  `apply_top_k_top_p` and `random_sample`). Each is a streaming kernel over [rows, vocab] modelled with
  the existing ops (sort passes as copies of 12-byte elements, i.e. 3 fp32 words).
  The sort is `torch.sort` along the vocabulary, whose algorithm depends on the row count (ATen
  `launch_stable_sort_kernel`, PyTorch 2.x): below SEGMENTED_SORT_MIN_ROWS rows it sorts all rows' keys
  at once (`segmented_sort_pairs_by_full_sort`: cub's onesweep radix sort, one digit-histogram read of
  the keys and 4 passes of 8-bit digits moving key + (row, position) pair), then radix-sorts the pairs
  back into rows by row id (one pass over 8-byte keys for < 256 rows) and gathers keys and int64 indices
  (`sort_postprocess_kernel`: reads the pair and the key, writes value and index). From
  SEGMENTED_SORT_MIN_ROWS rows on it calls cub's DeviceSegmentedRadixSort, one thread block per row,
  whose segmented policy takes 6-bit digits on 32-bit keys (6 passes), each pass reading the row's keys
  for its histogram before moving key + index. Every pass is costed at the streaming kernels'
  bandwidth, optimistic for the segmented sort while it has only one or two rows (blocks) per SM.

KV-cache dtype (`kv_dtype`): the dtype of the cache that decode attention reads and the KV write stores;
fp8 halves the KV bytes per token (and so the attention traffic and the cache capacity in tokens).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import cast

from dse.errors import ConfigError
from dse.workload.graph import WorkloadGraph
from dse.workload.linear_attention import RECURRENCE
from dse.workload.llm import LlmArch, build_decode_graph, build_prefill_graph
from dse.workload.ops import BYTES_PER_ELEMENT, AttentionOp, Dtype, ElementwiseOp, GemmOp, Op, SoftmaxOp

SAMPLINGS: tuple[str, ...] = ("none", "greedy", "top_k_top_p")
KV_DTYPES: tuple[str, ...] = ("bf16", "fp16", "fp8", "fp32")

# Radix sort of fp32 keys with int64 indices: 4 passes of 8-bit digits, each reading and writing the key
# (4 B) and the index (8 B) = 3 fp32 words per element per pass (module docstring).
SORT_PASSES = 4
SORT_WORDS_PER_ELEMENT = 3
# torch.sort switches to cub's segmented radix sort (one block per row, 6-bit digits) at this many rows.
SEGMENTED_SORT_MIN_ROWS = 128
SEGMENTED_SORT_PASSES = 6  # ceil(32 bits / 6 bits per digit)


@dataclass(frozen=True, slots=True, kw_only=True)
class EngineProfile:
    """A serving engine's per-step structure (module docstring): the ops it fuses away."""

    name: str
    fused_ops: frozenset[str]
    note: str = ""
    # The fp8 GEMM after a dropped `*_quant` op quantizes its activation dynamically (vLLM) rather than
    # reading one quantized by a fused producer (TensorRT-LLM's static scales).
    dynamic_act_quant: bool = False
    # The routed experts (pair sorting, both grouped GEMMs, activation, quantization, combine) are one
    # custom op whose kernels C++ launches (TensorRT-LLM's `torch.ops.trtllm.fused_moe`): one host
    # dispatch in an eager step (`dse.serving.step_table.layer_launches`), where vLLM and SGLang call each.
    one_call_moe: bool = False


ENGINES: dict[str, EngineProfile] = {
    "none": EngineProfile(name="none", fused_ops=frozenset(), note="one kernel per operator"),
    "vllm": EngineProfile(
        name="vllm",
        # q/k norm (Qwen3) folds into the rotary kernel, which every RoPE model keeps
        fused_ops=frozenset({"residual_add", "qkv_quant", "gate_up_quant", "down_quant", "q_norm", "k_norm"}),
        note="fused add+RMSNorm, dynamic fp8 quant in the GEMM's account, q/k-norm+RoPE (Inductor)",
        dynamic_act_quant=True,
    ),
    "trtllm": EngineProfile(
        name="trtllm",
        fused_ops=frozenset(
            {
                "residual_add",
                "qkv_quant",
                "o_quant",
                "gate_up_quant",
                "down_quant",
                "q_norm",
                "k_norm",
                "kv_cache_write",
            }
        ),
        note="fused add+RMSNorm(+fp8), SwiGLU(+fp8), fp8 attention output, RoPE+KV write in preprocessing",
        one_call_moe=True,
    ),
    "sglang": EngineProfile(name="sglang", fused_ops=frozenset({"residual_add"}), note="fused add+RMSNorm"),
}


def engine_profile(name: str) -> EngineProfile:
    """The profile called `name`; ConfigError naming the allowed ones otherwise."""
    if name not in ENGINES:
        raise ConfigError(f"engine '{name}' is not one of {', '.join(ENGINES)}")
    return ENGINES[name]


def _check(field: str, value: str, allowed: tuple[str, ...]) -> str:
    if value not in allowed:
        raise ConfigError(f"{field} '{value}' is not one of {', '.join(allowed)}")
    return value


def check_engine_options(
    *, engine: str = "none", sampling: str = "none", kv_dtype: str | None = None
) -> None:
    """ConfigError unless `engine`, `sampling` and `kv_dtype` (None: the precision's own) are known."""
    engine_profile(engine)
    _check("sampling", sampling, SAMPLINGS)
    if kv_dtype is not None:
        _check("kv_dtype", kv_dtype, KV_DTYPES)


def is_sampler_op(op: Op) -> bool:
    """Whether `op` is one of `sampler_ops`' kernels (they sit under the model's `sampler` block)."""
    return op.name.rpartition("/")[0].endswith("/sampler")


def sampler_ops(arch: LlmArch, *, rows: int, sampling: str) -> tuple[Op, ...]:
    """The sampling kernels of one step for `rows` sequences emitting a token (module docstring)."""
    _check("sampling", sampling, SAMPLINGS)
    if sampling == "none" or rows < 1:
        return ()
    root = f"{arch.name}/sampler"
    n = rows * arch.vocab_size
    ops: list[Op] = [ElementwiseOp(name=f"{root}/logits_fp32", kind="cast", num_elements=n, dtype="bf16",
                                   out_dtype="fp32")]  # fmt: skip
    if sampling == "greedy":
        ops.append(SoftmaxOp(name=f"{root}/argmax", rows=rows, cols=arch.vocab_size, dtype="fp32"))
        return tuple(ops)
    ops += [
        ElementwiseOp(name=f"{root}/temperature", kind="scale", num_elements=n, dtype="fp32"),
        *_sort_ops(root, rows=rows, n=n),
        ElementwiseOp(
            name=f"{root}/top_k_compare", kind="cast", num_elements=n, dtype="fp32", out_dtype="int8"
        ),
        ElementwiseOp(name=f"{root}/top_k_fill", kind="scale", num_elements=n, dtype="fp32"),
        SoftmaxOp(name=f"{root}/top_p_softmax", rows=rows, cols=arch.vocab_size, dtype="fp32"),
        ElementwiseOp(name=f"{root}/top_p_cumsum", kind="copy", num_elements=n, dtype="fp32"),
        ElementwiseOp(
            name=f"{root}/top_p_compare", kind="cast", num_elements=n, dtype="fp32", out_dtype="int8"
        ),
        ElementwiseOp(name=f"{root}/top_p_fill", kind="scale", num_elements=n, dtype="fp32"),
        ElementwiseOp(name=f"{root}/scatter", kind="add", num_elements=n, dtype="fp32"),
        SoftmaxOp(name=f"{root}/softmax", rows=rows, cols=arch.vocab_size, dtype="fp32"),
        ElementwiseOp(name=f"{root}/exponential_noise", kind="exp", num_elements=n, dtype="fp32"),
        ElementwiseOp(name=f"{root}/divide", kind="mul", num_elements=n, dtype="fp32"),
        SoftmaxOp(name=f"{root}/argmax", rows=rows, cols=arch.vocab_size, dtype="fp32"),
    ]
    return tuple(ops)


def _sort_ops(root: str, *, rows: int, n: int) -> list[Op]:
    """torch.sort of `rows` rows of n / rows fp32 logits with int64 indices (module docstring)."""
    segmented = rows >= SEGMENTED_SORT_MIN_ROWS
    passes = SEGMENTED_SORT_PASSES if segmented else SORT_PASSES
    ops: list[Op] = [
        ElementwiseOp(name=f"{root}/sort_index_init", kind="copy", num_elements=2 * n, dtype="fp32"),
        # digit histograms: a read of the keys (once for onesweep, per pass for the segmented sort)
        ElementwiseOp(
            name=f"{root}/sort_histogram",
            kind="cast",
            num_elements=n,
            dtype="fp32",
            out_dtype="int8",
            count=passes if segmented else 1,
        ),
        ElementwiseOp(
            name=f"{root}/sort_pass",
            kind="copy",
            num_elements=SORT_WORDS_PER_ELEMENT * n,
            dtype="fp32",
            count=passes,
        ),
    ]
    if not segmented:
        ops += [
            # (row, position) pairs radix-sorted back into rows: one pass over 8-byte keys
            ElementwiseOp(name=f"{root}/sort_row_pass", kind="copy", num_elements=2 * n, dtype="fp32"),
            # gather: read pair and key, write value and int64 index (24 bytes, as 3 fp32 words moved)
            ElementwiseOp(name=f"{root}/sort_gather", kind="copy", num_elements=3 * n, dtype="fp32"),
        ]
    return ops


def with_kv_dtype(op: Op, kv_dtype: str | None) -> Op:
    """`op` reading (attention) or writing (KV-cache write) the cache in `kv_dtype`; other ops unchanged."""
    if kv_dtype is None:
        return op
    dtype = cast(Dtype, kv_dtype)  # the ops' own validation rejects an unknown dtype
    leaf = op.name.rsplit("/", 1)[-1]
    if leaf.endswith("indexer") or RECURRENCE in leaf:
        return op  # the sparse indexer's fp8 keys and linear attention's state are no KV cache
    if isinstance(op, AttentionOp):
        return dataclasses.replace(op, kv_dtype=dtype)
    if isinstance(op, ElementwiseOp) and op.name.endswith("/kv_cache_write"):
        return dataclasses.replace(op, out_dtype=dtype)
    return op


def fuse_ops(ops: tuple[Op, ...] | list[Op], profile: EngineProfile) -> list[Op]:
    """`ops` without the ones `profile` fuses away; with `dynamic_act_quant`, the fp8 GEMM behind a dropped
    `*_quant` op accounts for that quantization itself (`GemmOp.act_quant`)."""
    dropped = {op.name for op in ops if op.name.rsplit("/", 1)[-1] in profile.fused_ops}
    # `dse.workload.llm` names the quantization of `x_proj`'s input `x_quant`.
    quantized = {name.removesuffix("_quant") + "_proj" for name in dropped if name.endswith("_quant")}
    return [
        dataclasses.replace(op, act_quant=True)
        if profile.dynamic_act_quant and isinstance(op, GemmOp) and op.name in quantized
        else op
        for op in ops
        if op.name not in dropped
    ]


def apply_engine(
    graph: WorkloadGraph, arch: LlmArch, *, engine: str = "none", sampling: str = "none", rows: int = 0
) -> WorkloadGraph:
    """`graph` (a model pass of `arch`) as `engine` runs it: fused ops dropped, a sampler for `rows` tokens.

    The defaults return `graph` itself, so callers that do not ask for an engine pay nothing.
    """
    profile = engine_profile(engine)
    _check("sampling", sampling, SAMPLINGS)
    if not profile.fused_ops and (sampling == "none" or rows < 1):
        return graph
    ops = fuse_ops(graph.ops, profile) + list(sampler_ops(arch, rows=rows, sampling=sampling))
    meta = {**graph.meta, "engine": engine, "sampling": sampling}
    return WorkloadGraph(name=graph.name, ops=tuple(ops), meta=meta)


def engine_step_graph(
    arch: LlmArch,
    *,
    decodes: int,
    prefills: int,
    input_tokens: int,
    context_len: int,
    precision: str = "bf16",
    engine: EngineProfile | None = None,
    sampling: str = "none",
    kv_dtype: str | None = None,
) -> WorkloadGraph:
    """One fused engine step: `decodes` sequences decode one token, `prefills` prompts of `input_tokens`.

    The weight GEMMs, norms and elementwise ops run on decodes + prefills * input_tokens tokens; decode
    attention covers the decoding sequences at a KV context of `context_len`, a causal flash attention the
    prompts; the LM head and the sampler have one row per sequence emitting a token (all of them: a
    prompt's last token gives its first output token). With the default engine ("none"), sampling "none"
    and kv_dtype None this is the model's own graph (`build_decode_graph` when prefills == 0).
    """
    engine = engine or ENGINES["none"]
    if kv_dtype is not None:
        _check("kv_dtype", kv_dtype, KV_DTYPES)
    if decodes < 0 or prefills < 0 or decodes + prefills < 1:
        raise ConfigError(f"a step needs decodes + prefills >= 1, got {decodes} + {prefills}")
    tokens = decodes + prefills * input_tokens
    linear = build_decode_graph(arch, batch=tokens, context_len=context_len, precision=precision)
    prompt_attention: list[Op] = []
    if prefills:
        prefill = build_prefill_graph(arch, batch=prefills, seq_len=input_tokens, precision=precision)
        prompt_attention = [o for o in prefill.ops if per_sequence_op(o)]
    ops: list[Op] = []
    for op in fuse_ops(linear.ops, engine):
        if per_sequence_op(op):
            if decodes:
                ops.append(with_kv_dtype(_rebatch(op, decodes, tokens), kv_dtype))
            # the prompts' attention in the same layers (local layers may split it into several ops)
            for attn in (o for o in prompt_attention if o.name.startswith(op.name)):
                head, _, kernel = attn.name.rpartition("/")
                ops.append(dataclasses.replace(attn, name=f"{head}/prefill_{kernel}"))
        elif isinstance(op, GemmOp) and op.name.endswith("/lm_head"):
            ops.append(dataclasses.replace(op, m=decodes + prefills))
        else:
            ops.append(with_kv_dtype(op, kv_dtype))
    ops += sampler_ops(arch, rows=decodes + prefills, sampling=sampling)
    meta = {**linear.meta, "phase": "mixed", "decodes": decodes, "prefills": prefills,
            "engine": engine.name, "sampling": sampling, "kv_dtype": kv_dtype}  # fmt: skip
    return WorkloadGraph(name=f"{arch.name}/step", ops=tuple(ops), meta=meta)


def per_sequence_op(op: Op) -> bool:
    """Ops whose work follows the sequences, not the step's tokens: attention over each sequence's keys
    (the sparse-attention indexer's too, a GEMM in prefill) and the linear-attention recurrence over its
    state (`dse.workload.linear_attention`)."""
    leaf = op.name.rpartition("/")[2]
    return isinstance(op, AttentionOp) or RECURRENCE in leaf or leaf == "indexer"


def _rebatch(op: Op, decodes: int, tokens: int) -> Op:
    """A per-sequence op of the step's decode graph (built for `tokens` rows) for its `decodes` sequences."""
    if isinstance(op, AttentionOp):
        return dataclasses.replace(op, batch=decodes)
    assert isinstance(op, ElementwiseOp)  # the decode recurrence: one state per row
    return dataclasses.replace(op, num_elements=op.num_elements // tokens * decodes)


def kv_bytes_per_token(arch: LlmArch, precision: str, kv_dtype: str | None = None) -> float:
    """KV-cache bytes per token: the activation dtype of `precision`, or `kv_dtype` when given."""
    from dse.workload.llm import kv_cache_bytes

    if kv_dtype is None:
        return kv_cache_bytes(arch, precision, 1)
    _check("kv_dtype", kv_dtype, KV_DTYPES)
    return arch.kv_cache_elements_per_token * BYTES_PER_ELEMENT[kv_dtype] + arch.indexer_cache_bytes_per_token


__all__ = [
    "ENGINES",
    "KV_DTYPES",
    "SEGMENTED_SORT_MIN_ROWS",
    "SAMPLINGS",
    "EngineProfile",
    "apply_engine",
    "check_engine_options",
    "engine_profile",
    "engine_step_graph",
    "is_sampler_op",
    "kv_bytes_per_token",
    "per_sequence_op",
    "sampler_ops",
    "with_kv_dtype",
]

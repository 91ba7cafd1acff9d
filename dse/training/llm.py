"""Training steps of transformer language models: one rank's graphs under tensor and pipeline parallelism.

    est = predict_llm_training(load_model_config("mpt-7b"), load_gpu("h100-sxm"),
                               TrainingRequest(micro_batch=8, global_batch=512, seq_len=2048,
                                               layout=ParallelLayout(num_gpus=8, fsdp=True)))

A tensor-parallel rank holds `1/t` of every layer (Megatron split: heads, KV heads, MLP width and the
vocabulary; its graph is the model's with those dimensions divided), a pipeline stage `L/p` layers (each
stage's graph keeps the embedding and the head: an over-count of one head per stage, small beside the
layers; a split that is not even is priced at its busiest stage, ceil(L / p) layers, as Megatron's
uneven first or last stages are). A
tensor-parallel rank runs sequence parallel (Megatron's `--sequence-parallel`, on with TP in NeMo's recipes;
Korthikanti et al. 2022, section 4.2.2): the norms, residual adds, the embedding output and the
quantization of a GEMM's d-wide input run on tokens / t rows, gathered before the column-parallel GEMMs
(the all-gather and reduce-scatter pair moves an all-reduce's bytes, `dse.training.parallel`). A
context-parallel rank runs `seq / cp` tokens of each sequence through every layer; its attention is
priced as `seq / cp` queries over `seq / 2` keys without a mask, the share of the causal work that
Megatron's load-balanced chunks give each rank, and the ring sends cp - 1 K/V chunks per layer forward,
K/V and dK/dV backward (`dse.training.parallel`). MPT's learned position table is sized by the run's
sequence length, as llm-foundry's `max_seq_len` does, so sequences past the shipped config's length are
accepted for it.

Encoders (BERT) pre-train with the masked-LM head on the masked positions only: BERT masks 15% of the
positions (Devlin et al. 2019, section 3.1) and gathers them before the head (google-research/bert
`run_pretraining.py` `gather_indexes`; NVIDIA's implementations the same, `dense_seq_output`): a d x d
transform, GELU and LayerNorm, the decoder tied to the token table ([positions, d] x [d, vocab]) and the
fp32 cross-entropy. The next-sentence classifier (d x 2 on the pooled token) is negligible and omitted;
`objective="finetune"` (SQuAD and the like) has only such a task head.

Packed sequences (`packed_sample_len` L, `--packed-sample-len`): fine-tuning sets of short samples are packed
into each sequence (NeMo's packed SFT on SQuAD, Hugging Face's packing with flash-attention's variable-length
kernels), and attention runs within each sample: a sequence of S tokens costs S // L attentions of L tokens
(and one of the remainder), not one of S, split as the prefill of such sequences splits it (sliding
windows and chunks within a sample). Every other op sees the S tokens as before. Eager attention computes
the whole sequence's scores under a block mask, so packing saves it nothing (refused there).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import replace
from typing import Any

from dse.errors import ConfigError
from dse.hardware.spec import GpuSpec
from dse.perf.host import DEFAULT_HOST
from dse.perf.types import OperatingPoint
from dse.training.autocast import (
    autocast_activation_bytes_per_layer,
    autocast_graph,
    autocast_memory,
    half_weight_elements,
)
from dse.training.eager import eager_activation_bytes_per_layer, eager_graph
from dse.training.lora import freeze_weights, with_adapters
from dse.training.memory import (
    RESERVED_BYTES,
    MemoryEstimate,
    llm_activation_bytes_per_layer,
    model_state_bytes_per_param,
)
from dse.training.parallel import ep_exchange_bytes
from dse.training.step import StepParts, TrainingCoeffs, TrainingEstimate, TrainingRequest, estimate_step
from dse.workload.arch import LlmArch
from dse.workload.backward import build_backward_graph, build_recompute_graph, training_forward
from dse.workload.graph import WorkloadGraph
from dse.workload.llm import activation_dtype, build_prefill_graph
from dse.workload.ops import (
    BYTES_PER_ELEMENT,
    AttentionOp,
    Dtype,
    ElementwiseOp,
    GemmOp,
    NormOp,
    Op,
    SoftmaxOp,
    weight_gemm_ops,
)
from dse.workload.sharding import check_kv_heads, shard_experts

__all__ = ["MLM_MASKED_FRACTION", "llm_step_parts", "predict_llm_training", "training_arch"]

MLM_MASKED_FRACTION = 0.15  # module docstring


def training_arch(arch: LlmArch, seq_len: int) -> LlmArch:
    """`arch` with MPT's learned position table grown to `seq_len` (module docstring)."""
    if (
        arch.model_type == "mpt"
        and arch.position_embedding == "learned"
        and seq_len > arch.max_position_embeddings
    ):
        return arch.model_copy(
            update={"max_position_embeddings": seq_len, "num_position_embeddings": seq_len}
        )
    return arch


def _rank_arch(arch: LlmArch, tp: int, pp: int, ep: int = 1) -> LlmArch:
    """One tensor-parallel rank of one pipeline stage (module docstring); with expert parallelism the
    routed experts stay whole (expert tensor parallel 1)."""
    if arch.num_heads % tp:
        raise ConfigError(f"tp {tp} does not divide {arch.name}'s {arch.num_heads} attention heads")
    if ep > 1 and not arch.is_moe:
        raise ConfigError(f"ep {ep} (--ep) needs a mixture-of-experts model; {arch.name} is dense")
    if arch.is_moe and arch.num_experts % ep:
        raise ConfigError(f"ep {ep} (--ep) must divide {arch.name}'s {arch.num_experts} experts")
    if tp == 1 and pp == 1:
        return arch
    update: dict[str, Any] = {
        "num_heads": arch.num_heads // tp,
        "num_kv_heads": max(1, arch.num_kv_heads // tp),
        "intermediate_size": math.ceil(arch.intermediate_size / tp),
        "vocab_size": math.ceil(arch.vocab_size / tp),
        "num_layers": math.ceil(arch.num_layers / pp),
    }
    if arch.is_moe:
        update["moe_intermediate_size"] = math.ceil(arch.moe_intermediate_size / (1 if ep > 1 else tp))
        update["shared_expert_intermediate_size"] = math.ceil(arch.shared_expert_intermediate_size / tp)
    if arch.linear_layers:  # Gated DeltaNet heads split like attention heads
        update["linear_num_key_heads"] = max(1, arch.linear_num_key_heads // tp)
        update["linear_num_value_heads"] = max(1, arch.linear_num_value_heads // tp)
    # a stage holds the first num_layers of the pattern: its layer lists keep the indices below that
    for key in ("dense_layers", "linear_layers", "local_layers"):
        layers = getattr(arch, key)
        if layers is not None:
            update[key] = tuple(i for i in layers if i < update["num_layers"])
    return arch.model_copy(update=update)


def _context_parallel(graph: WorkloadGraph, seq_len: int, cp: int, balanced: bool = True) -> WorkloadGraph:
    """`graph` (built over seq_len / cp tokens per sequence) with each full-sequence attention priced as one
    context-parallel rank's share of the causal attention (module docstring): balanced, seq / cp queries over
    seq / 2 keys; unbalanced, the last rank's (cp - 1/2) blocks of (seq / cp)^2, seq / cp queries over
    seq (2 cp - 1) / (2 cp) keys (`dse.training.parallel`). Sliding-window and chunked attention
    (`local_attention*` ops) keep their windows over the rank's tokens: already about 1/cp of their work."""
    if cp == 1:
        return graph
    keys = seq_len // 2 if balanced else seq_len * (2 * cp - 1) // (2 * cp)
    ops = tuple(
        dataclasses.replace(op, seq_len_q=seq_len // cp, seq_len_kv=keys, causal=False)
        if isinstance(op, AttentionOp) and op.name.endswith("/attention")
        else op
        for op in graph.ops
    )
    return WorkloadGraph(name=graph.name, ops=ops, meta=graph.meta)


def _packed(forward: WorkloadGraph, arch: LlmArch, req: TrainingRequest, batch: int) -> WorkloadGraph:
    """`forward` (over `batch` sequences of `req.seq_len` tokens) with its attention ops replaced by those
    of the packed samples (module docstring): the prefill's attention over `batch x (S // L)` sequences of L
    tokens and `batch` of the remainder, so that sliding-window, chunked and latent attention split as
    they do for sequences of that length. The ops keep the first attention op's place in the graph."""
    sample, seq = req.packed_sample_len, req.seq_len
    if not sample or sample >= seq:
        return forward
    whole, rest = divmod(seq, sample)
    shapes = [(batch * whole, sample, "")] + ([(batch, rest, "/rest")] if rest else [])
    attention: list[Op] = []
    for n, length, suffix in shapes:
        graph = build_prefill_graph(
            arch, batch=n, seq_len=length, precision=req.precision, attention=req.attention
        )
        attention += [replace(op, name=op.name + suffix) for op in graph.ops if isinstance(op, AttentionOp)]
    first = next(i for i, op in enumerate(forward.ops) if isinstance(op, AttentionOp))
    others = [op for op in forward.ops if not isinstance(op, AttentionOp)]
    ops = (*others[:first], *attention, *others[first:])
    return WorkloadGraph(name=forward.name, ops=ops, meta=forward.meta)


def _sequence_parallel(graph: WorkloadGraph, hidden: int, tp: int) -> WorkloadGraph:
    """`graph` with the ops over [tokens, hidden] rows on tokens / tp rows (module docstring): the layers'
    and the final norms, the residual adds, the embedding output and the fp8 cast of a norm's output (the
    input TE quantizes before its all-gather). An encoder's masked-LM head (on the gathered masked rows)
    keeps its rows."""
    if tp == 1:
        return graph
    ops = list(graph.ops)
    for i, op in enumerate(ops):
        if "/mlm/" in op.name:
            continue
        after_norm = i > 0 and isinstance(graph.ops[i - 1], NormOp)
        if isinstance(op, NormOp) and op.cols == hidden:
            ops[i] = dataclasses.replace(op, rows=math.ceil(op.rows / tp))
        elif isinstance(op, ElementwiseOp) and (
            op.name.endswith(("/residual_add", "/embed/tokens")) or (op.kind == "cast" and after_norm)
        ):
            ops[i] = dataclasses.replace(op, num_elements=math.ceil(op.num_elements / tp))
    return WorkloadGraph(name=graph.name, ops=tuple(ops), meta=graph.meta)


def _expert_parallel(graph: WorkloadGraph, arch: LlmArch, ep: int, tp: int) -> WorkloadGraph:
    """`graph` with its routed experts as one expert-parallel rank runs them (`dse.training.parallel`): its
    E / ep experts over the copies ep ranks route to them, each rank routing its tokens / tp (sequence
    parallel) tokens; the experts' row-wise kernels on this rank's share of the copies."""
    if ep == 1 or not arch.is_moe:
        return graph
    tokens = int(graph.meta["num_tokens"])  # type: ignore[call-overload]
    return shard_experts(
        graph, arch, routed_tokens=ep * math.ceil(tokens / tp), ep=ep,
        rowwise=lambda n: max(1, math.ceil(n / tp)),
    )  # fmt: skip


def _check_layout(arch: LlmArch, req: TrainingRequest) -> None:
    """ConfigError naming the flag where `req`'s layout does not fit `arch` (Megatron's rules)."""
    lay = req.layout
    if req.seq_len > arch.max_position_embeddings:
        raise ConfigError(
            f"seq_len {req.seq_len} (--seq-len) exceeds {arch.name}'s max_position_embeddings "
            f"{arch.max_position_embeddings}"
        )
    if lay.cp > 1:
        if arch.family == "encoder":
            raise ConfigError(
                "--cp: context parallelism splits a causal decoder's sequences, not an encoder's"
            )
        if req.attention == "eager":
            raise ConfigError("--cp: context parallelism runs flash (ring) attention, not --attention eager")
        if arch.is_sparse_attention or arch.linear_layers:
            raise ConfigError(
                f"--cp: context parallelism of {arch.name}'s sparse or linear attention (an indexer over the "
                "whole context, a recurrent state passed along the sequence) is not modelled"
            )
        if req.seq_len % (2 * lay.cp):
            raise ConfigError(
                f"--seq-len {req.seq_len} is not a multiple of 2 x cp = {2 * lay.cp} (context parallelism "
                "splits each sequence into 2 x cp load-balanced chunks)"
            )
    if req.packed_sample_len:
        if lay.cp > 1:
            raise ConfigError(
                "--packed-sample-len with --cp: packed samples under context parallelism are not modelled"
            )
        if req.attention == "eager":
            raise ConfigError(
                "--packed-sample-len with --attention eager: eager attention computes the whole sequence's "
                "scores under a block mask, so packing saves it nothing (drop --packed-sample-len)"
            )
        if req.packed_sample_len > req.seq_len:
            raise ConfigError(
                f"--packed-sample-len {req.packed_sample_len} exceeds --seq-len {req.seq_len} (samples are "
                "packed into each sequence)"
            )
    if req.lora_rank > arch.hidden_size:
        raise ConfigError(
            f"--lora-rank {req.lora_rank} exceeds {arch.name}'s hidden size {arch.hidden_size} (an adapter "
            "of that rank is no low-rank adapter)"
        )
    if req.autocast:
        _check_autocast(req)
    check_kv_heads(arch, lay.tp)  # as serving
    if lay.pp > arch.num_layers:
        raise ConfigError(
            f"--pp {lay.pp} exceeds {arch.name}'s {arch.num_layers} layers (a stage holds one or more)"
        )
    if lay.pp * lay.vp > arch.num_layers:
        raise ConfigError(
            f"--vp {lay.vp}: a virtual-pipeline chunk holds at least one layer, and {arch.name}'s "
            f"{arch.num_layers} layers make fewer than pp x vp = {lay.pp * lay.vp} chunks"
        )
    if lay.vp > 1 and req.num_microbatches < lay.pp:
        raise ConfigError(
            f"--vp {lay.vp}: the interleaved schedule needs at least pp = {lay.pp} micro-batches per step, "
            f"got {req.num_microbatches} (raise --global-batch)"
        )


def _check_autocast(req: TrainingRequest) -> None:
    """ConfigError where `req` asks for autocast (`dse.training.autocast`) beyond what it models."""
    lay = req.layout
    if req.precision not in ("bf16", "fp16"):
        raise ConfigError(
            f"--autocast casts to bf16 or fp16 over fp32 weights; --precision {req.precision} is not one"
        )
    sharded = lay.fsdp or lay.distributed_optimizer or max(lay.tp, lay.pp, lay.cp, lay.ep) > 1
    if sharded or req.lora_rank:
        raise ConfigError(
            "--autocast models a data-parallel eager loop over whole fp32 weights (a plain PyTorch loop, "
            "Hugging Face's Trainer): drop --fsdp, --distributed-optimizer, --tp, --pp, --cp, --ep and "
            "--lora-rank, or --autocast"
        )


def _pretraining_heads(arch: LlmArch, req: TrainingRequest, batch: int, gemm_dtype: str) -> list[Op]:
    """An encoder's masked-LM head over `batch` sequences' masked positions (module docstring)."""
    act = activation_dtype(req.precision)
    dtype: Dtype = gemm_dtype  # type: ignore[assignment]
    rows = batch * max(1, round(MLM_MASKED_FRACTION * req.seq_len))  # encoders run no context parallelism
    d, root = arch.hidden_size, f"{arch.name}/mlm"
    return [
        *weight_gemm_ops(f"{root}/transform", m=rows, n=d, k=d, dtype=dtype, act_dtype=act),
        ElementwiseOp(name=f"{root}/act", kind="gelu", num_elements=rows * d, dtype=act),
        NormOp(name=f"{root}/norm", rows=rows, cols=d, dtype=act),
        *weight_gemm_ops(f"{root}/decoder", m=rows, n=arch.vocab_size, k=d, dtype=dtype, act_dtype=act),
        SoftmaxOp(name=f"{root}/cross_entropy", rows=rows, cols=arch.vocab_size, dtype="fp32"),
    ]


def _training_forward(arch: LlmArch, req: TrainingRequest, batch: int, seq_len: int = 0) -> WorkloadGraph:
    """The forward of `batch` sequences of `seq_len` tokens (default `req.seq_len`; one context-parallel
    rank's share): the prefill, the LM head on every token (decoders) or the pre-training heads (encoders
    with `objective="pretrain"`)."""
    prefill = build_prefill_graph(
        arch, batch=batch, seq_len=seq_len or req.seq_len, precision=req.precision, attention=req.attention
    )
    forward = _packed(training_forward(prefill), arch, req, batch)
    if arch.family != "encoder" or req.objective != "pretrain":
        return forward
    heads = _pretraining_heads(arch, req, batch, req.precision)
    return WorkloadGraph(name=forward.name, ops=(*forward.ops, *heads), meta=forward.meta)


def _model_flop_per_sample(arch: LlmArch, req: TrainingRequest) -> float:
    """Forward + backward model FLOPs of one sequence: 3x the forward's GEMMs and attention (the GEMMs 2x
    under LoRA: the frozen weights have no weight gradients; the adapters' few FLOPs are not counted)."""
    fwd = _training_forward(arch, req, 1)
    gemm = sum(op.flop * op.count for op in fwd.ops if isinstance(op, GemmOp))
    attention = sum(op.flop * op.count for op in fwd.ops if isinstance(op, AttentionOp))
    return (2.0 if req.lora_rank else 3.0) * gemm + 3.0 * attention


def _adapted(forward: WorkloadGraph, arch: LlmArch, req: TrainingRequest) -> tuple[WorkloadGraph, float]:
    """`forward` with the request's LoRA adapters and their parameter count (unchanged and 0 without)."""
    if not req.lora_rank:
        return forward, 0.0
    forward, adapters = with_adapters(forward, req.lora_rank, req.lora_targets)
    if not adapters:
        raise ConfigError(f"lora_targets {', '.join(req.lora_targets)}: {arch.name} has no such projection")
    return forward, adapters


def llm_step_parts(arch: LlmArch, req: TrainingRequest) -> tuple[StepParts, MemoryEstimate]:
    """One rank's graphs and sizes for `req` (capacity left 0: `predict_llm_training` fills it in)."""
    lay = req.layout
    arch = training_arch(arch, req.seq_len)
    _check_layout(arch, req)
    rank = _rank_arch(arch, lay.tp, lay.pp, lay.ep)
    local_seq = req.seq_len // lay.cp  # one context-parallel rank's tokens of each sequence
    forward = _training_forward(rank, req, req.micro_batch, local_seq)
    forward = _expert_parallel(forward, arch, lay.ep, lay.tp)
    forward = _sequence_parallel(
        _context_parallel(forward, req.seq_len, lay.cp, lay.cp_load_balance), arch.hidden_size, lay.tp
    )
    act = activation_dtype(req.precision)
    fp32_norm_bytes = 0.0  # read off the norms before --eager-ops expands RMSNorms
    if req.autocast:
        forward = autocast_graph(forward, act)
        fp32_norm_bytes = autocast_activation_bytes_per_layer(forward, rank.num_layers, act)
    forward, adapters = _adapted(forward, arch, req)
    backward = build_backward_graph(forward)
    if req.lora_rank:
        backward = freeze_weights(backward, forward)
    # torchtitan's modules call q, k, v and w1, w3 as separate mm's (`op` recomputation counts them apart)
    mm_splits = {"qkv_proj": (rank.q_dim, rank.kv_dim, rank.kv_dim), "gate_up_proj": (1, 1)}
    recompute = build_recompute_graph(forward, req.recompute, mm_splits=mm_splits)
    if req.eager_ops:  # Hugging Face GPT-2's GELU is its tanh formula (`gelu_new`, dse.training.eager)
        eager = {"gelu_formula": rank.model_type == "gpt2", "autocast": req.autocast}
        forward, backward, recompute = (eager_graph(g, **eager) for g in (forward, backward, recompute))
    act_b = BYTES_PER_ELEMENT[act]
    tokens = req.micro_batch * local_seq
    layers = rank.num_layers
    eager_bytes = eager_activation_bytes_per_layer(forward, rank.num_layers) if req.eager_ops else 0.0
    eager_bytes += fp32_norm_bytes
    memory = _memory(arch, rank, req, tokens, adapters, eager_bytes)
    if req.autocast:
        memory = autocast_memory(
            memory, params=_params_per_rank(arch, lay), half_weights=half_weight_elements(forward), act=act,
            logits=tokens * rank.vocab_size, optimizer=req.optimizer, microbatches=req.num_microbatches,
        )  # fmt: skip
    # Megatron: 2 forward + 2 backward per layer, full recomputation 2 more; `op` recomputation re-runs the
    # two all-gathers (not on its save list; the reduce-scatters are) and the experts' exchanges
    passes = 4 + (2 if req.recompute == "full" else 0)
    tp_passes = passes + (1 if req.recompute == "op" else 0)
    ep_passes = passes + (2 if req.recompute == "op" else 0)
    moe_layers = len(rank.moe_layers) if lay.ep > 1 else 0
    ep_bytes = (0.0, 0.0)
    if moe_layers:
        ep_bytes = ep_exchange_bytes(
            math.ceil(tokens / lay.tp), hidden_bytes=arch.hidden_size * act_b, num_experts=arch.num_experts,
            topk=arch.num_experts_per_tok, ep=lay.ep, dispatcher=lay.ep_dispatcher,
        )  # fmt: skip
    parts = StepParts(
        name=arch.name,
        kind="llm",
        forward=forward,
        backward=backward,
        recompute=recompute,
        params_per_rank=_params_per_rank(arch, lay),
        trainable_params_per_rank=adapters if req.lora_rank else None,
        num_layers_per_rank=layers,
        activation_bytes=memory.activations_bytes,
        model_flop_per_sample=_model_flop_per_sample(arch, req),
        tokens_per_sample=req.seq_len,
        gemm_dtype=req.precision,
        tp_allreduce_bytes=tokens * arch.hidden_size * act_b,
        num_tp_allreduces=tp_passes * layers,
        pp_handoff_bytes=tokens * arch.hidden_size * act_b / lay.tp,
        # cp - 1 K/V chunks per layer forward, K/V and dK/dV backward: 3 x (cp - 1) x 2 [tokens, kv] / tp
        cp_ring_bytes=3 * (lay.cp - 1) * 2 * tokens * rank.kv_dim * act_b * layers,
        # this rank's tokens / tp, dispatched and combined (`dse.training.parallel.ep_exchange_bytes`)
        ep_alltoall_bytes=ep_bytes[0],
        ep_network_bytes=ep_bytes[1],
        num_ep_alltoalls=ep_passes * moe_layers,
        dispatch_s=_expert_dispatch_s(forward, backward, recompute),
    )
    return parts, memory


def _expert_dispatch_s(*graphs: WorkloadGraph) -> float:
    """Seconds per micro-batch the GPU waits for the launches of the experts' GEMMs: Megatron's grouped expert
    MLP (Transformer Engine's GroupedLinear) runs one GEMM per local expert, forward (gate/up, down) and
    backward (their data and weight gradients), each a launch of its own, each priced at one eager GEMM
    dispatch (`dse.perf.host.DEFAULT_HOST.eager_gemm_s`, fitted on other workloads). The kernel model
    prices a grouped GEMM as one kernel. The Megatron-Bridge MoE rows show such a cost, and that it does
    not hide behind the GPU work: per local expert, layer and micro-batch, gpt-oss-120b (16 local experts)
    loses 236-272 us at 4,096 tokens per micro-batch and 220 us at 16,384, Qwen3-30B-A3B (8) 241-259 us;
    six dispatches are 244 us."""
    grouped = (op for g in graphs for op in g.ops if isinstance(op, GemmOp) and op.grouped)
    return sum(op.batch * op.count for op in grouped) * DEFAULT_HOST.eager_gemm_s


def _params_per_rank(arch: LlmArch, lay: Any) -> float:
    """Parameters one rank holds (before FSDP): the layers split tp x pp ways, routed experts ep x pp ways
    under expert parallelism."""
    if lay.ep == 1:
        return arch.num_params / (lay.tp * lay.pp)
    experts = arch.param_counts()["experts"]
    return (arch.num_params - experts) / (lay.tp * lay.pp) + experts / (lay.ep * lay.pp)


def _memory(
    arch: LlmArch, rank: LlmArch, req: TrainingRequest, tokens: int, adapters: float = 0.0, eager: float = 0.0
) -> MemoryEstimate:
    """Model states and activations of one rank (capacity left 0); under LoRA the frozen weights alone,
    in the GEMM dtype's storage (no master copy), and the `adapters` with gradients and optimizer states."""
    lay = req.layout
    act = activation_dtype(req.precision)
    act_b = BYTES_PER_ELEMENT[act]
    layers = rank.num_layers
    per_layer = llm_activation_bytes_per_layer(
        arch, tokens=tokens, act_dtype=act, attention=req.attention, recompute=req.recompute, tp=lay.tp,
        batch=req.micro_batch,
    )  # fmt: skip
    # 1F1B: the first stage holds p micro-batches; interleaved, (1 + (p - 1) / (p vp)) times as many
    # (Korthikanti et al. 2022, section 4.2.3)
    interleave = 1.0 + (lay.pp - 1) / (lay.pp * lay.vp) if lay.vp > 1 else 1.0
    in_flight = min(lay.pp, req.num_microbatches) * interleave
    if req.recompute == "none":  # `eager` bytes per layer: recomputation re-runs them (dse.training.eager)
        per_layer += eager
    activations = per_layer * layers * in_flight + tokens * rank.vocab_size * (act_b + 4.0)
    if req.recompute == "full":  # one layer's activations while it is recomputed
        activations += llm_activation_bytes_per_layer(
            arch, tokens=tokens, act_dtype=act, attention=req.attention, recompute="none", tp=lay.tp,
            batch=req.micro_batch,
        )  # fmt: skip
    params = _params_per_rank(arch, lay)
    state = model_state_bytes_per_param(req.precision, req.optimizer)
    shard = lay.grad_ranks if lay.fsdp else 1
    gathered = 2 * arch.num_layer_params / lay.tp * state["weights"] if lay.fsdp and shard > 1 else 0.0
    # the distributed optimizer shards expert states over the expert-data-parallel ranks, tp x cp x dp / ep
    optimizer = params * state["optimizer"] / lay.optimizer_shards
    if lay.ep > 1 and lay.distributed_optimizer:
        experts = arch.param_counts()["experts"] / (lay.ep * lay.pp)
        expert_dp = lay.tp * lay.cp * lay.dp // lay.ep
        optimizer += experts * state["optimizer"] * (1 / expert_dp - 1 / lay.optimizer_shards)
    if req.lora_rank:
        return MemoryEstimate(
            weights_bytes=params * state["weights"] + adapters * state["weights"],
            grads_bytes=adapters * state["grads"],
            optimizer_bytes=adapters * state["optimizer"] / lay.optimizer_shards,
            activations_bytes=activations,
            reserved_bytes=RESERVED_BYTES,
            capacity_bytes=0.0,
        )
    return MemoryEstimate(
        weights_bytes=params * state["weights"] / shard + gathered,
        grads_bytes=params * state["grads"] / shard,
        optimizer_bytes=optimizer,
        activations_bytes=activations,
        reserved_bytes=RESERVED_BYTES,
        capacity_bytes=0.0,
    )


def predict_llm_training(
    arch: LlmArch,
    gpu: GpuSpec,
    req: TrainingRequest,
    point: OperatingPoint | None = None,
    coeffs: Any = None,
    power_coeffs: Any = None,
    train_coeffs: TrainingCoeffs | None = None,
) -> TrainingEstimate:
    """A language model's training step on `req.layout.num_gpus` GPUs like `gpu` (`dse.training.step`)."""
    parts, memory = llm_step_parts(arch, req)
    memory = replace(memory, capacity_bytes=gpu.memory.capacity_bytes)
    # packed samples attend within themselves: splitting the sequence (--cp) is no remedy there (refused)
    long_context = req.seq_len >= 16384 and not req.packed_sample_len
    memory = memory.with_advice(req, moe=arch.is_moe, long_context=long_context)
    return estimate_step(parts, gpu, req, memory, point, coeffs, power_coeffs, train_coeffs)

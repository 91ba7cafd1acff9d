"""One training step across data/tensor/pipeline ranks: time, energy, power, MFU and memory per GPU.

A model builder (`dse.training.llm`, `dse.training.vision`) gives `StepParts`: one rank's forward,
backward and recomputation graphs for one micro-batch, its parameters, activation bytes and the model
FLOPs. The step, per GPU (DESIGN.md section 14; the layout rules are in `dse.training.parallel`):

    per micro-batch   t_mb = forward + recompute + backward (kernel model) + exposed TP all-reduces
                      + pipeline hand-offs + the context-parallel ring's time beyond the attention's
                      + MoE experts' GEMM dispatch (`StepParts.dispatch_s`, `dse.training.llm`)
    compute           (m + (p - 1) / vp) t_mb with m = global_batch / (micro_batch x dp) micro-batches
                      (the 1F1B bubble is the (p - 1) / vp t_mb)
    data parallel     FSDP: per micro-batch max(0, gathers + reduce-scatter - (forward + backward)) plus
                      the first layer's gather; DDP: max(0, all-reduce - last backward) plus the last
                      bucket's all-reduce
    optimizer         one streaming update over this rank's parameters (`dse.training.optimizer`)
    input             with a loader rate R (`loader_samples_per_s`), at least global_batch / (dp R): the
                      pipeline prefetches while the GPU computes, and the GPU idles for what it lacks

Energy: the kernels' energy from the kernel model (with DVFS and the power cap), plus idle power for
every exposed wait (bubble, communication, input) and the link energy of every byte sent. MFU = model FLOPs
(forward + backward GEMMs and attention, 3x the forward's, recomputation excluded) / (step time x the
dense tensor peak of the GEMM dtype at the datasheet clock).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

import numpy as np

from dse.errors import ConfigError
from dse.hardware.spec import GpuSpec
from dse.perf.coeffs import CoeffSet, load_default_coeffs
from dse.perf.dvfs import power_cap_w, requested_clock_hz
from dse.perf.power import gpu_power_terms
from dse.perf.predict import GraphTotals, predict_graph_totals
from dse.perf.rates import arch_family, check_tensor_dtype
from dse.perf.types import CoeffTable, OperatingPoint
from dse.training.lora import check_lora_targets
from dse.training.memory import OPTIMIZERS, RECOMPUTE_MODES, MemoryEstimate
from dse.training.optimizer import build_optimizer_graph
from dse.training.parallel import (
    GPUS_PER_NODE,
    ParallelLayout,
    ep_exchange_time_s,
    group_collective_time_s,
    link_energy_j,
    p2p_time_s,
)
from dse.units import MAX_COUNT, MHZ
from dse.workload.graph import WorkloadGraph
from dse.workload.llm import PRECISIONS
from dse.workload.ops import AttentionOp
from dse.workload.vision import MEMORY_FORMATS

TRAINING_PRECISIONS: tuple[str, ...] = tuple(p for p in PRECISIONS if p != "mxfp4")

__all__ = [
    "ATTENTION_KERNELS",
    "DEFAULT_ATTENTION_KERNEL",
    "FA2_ON_HOPPER",
    "attention_scale_of",
    "StepParts",
    "TrainingCoeffs",
    "TrainingEstimate",
    "TrainingRequest",
    "default_training_coeffs",
    "estimate_step",
]

OBJECTIVES = ("pretrain", "finetune")
MIN_LOADER_SAMPLES_PER_S = 1e-3  # a sample every 1,000 s per rank: below it a step is no longer a number
_RATE_TEXT = f"0 (no limit) or a finite number >= {MIN_LOADER_SAMPLES_PER_S:g}"
_DDP_BUCKET_BYTES = 25 * 2**20  # torch DDP's default bucket_cap_mb: the last bucket reduces after backward


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingCoeffs:
    """Ratios of a training framework's kernel time to the kernel model's (library kernels alone).

    `kernel_scale` multiplies every kernel but attention, `attention_scale` the attention kernels (forward,
    backward, recomputed); energies scale with them (the stretched kernels run at the modelled power).
    `kernel_scale` absorbs NCCL kernels sharing SMs with overlapped compute, unfused eager elementwise
    kernels, allocator and host gaps: fitted per architecture by
    `dse.calibrate.validate.training.fit_training_coeffs` on the shared LLM rows (eager frameworks).
    `attention_scale` is the attention kernel's (`attention_scale_of`). Vision steps
    (`dse.training.vision.VISION_TRAINING_COEFFS`) and tuned software (CUDA graphs, fused kernels: MLPerf's
    closed division) run the library kernels, unit ratios.
    """

    kernel_scale: float = 1.0
    attention_scale: float = 1.0


# The attention kernel of LLM training (`TrainingRequest.attention_kernel`, `--attention-kernel`):
#   fa2     FlashAttention-2, PyTorch's SDPA flash backend (torchtitan, FSDP scripts, HF): the default;
#   fa3     FlashAttention-3 or cuDNN's fused attention on Hopper and later (Megatron / NeMo through
#           Transformer Engine);
#   triton  llm-foundry's Triton flash-attention kernel (MPT: ALiBi, which FlashAttention-2 lacked before
#           2.4), fitted.
# A training step's attention is the kernel model's analytical flash kernel (`training_latency_coeffs`
# leaves the serving attention corrections out). It stands for FA3 on Hopper and for FA2 on Ampere, where
# FlashAttention-2 reaches about the share of peak FA3 reaches on Hopper (~70% forward, FlashAttention-2
# paper): ratio 1. On Hopper, FA2 has no wgmma / TMA pipeline: FA3 is
# 1.5-2.0x faster forward and 1.5-1.75x backward (Shah et al., "FlashAttention-3", 2024, H100 FP16),
# so FA2 costs FA2_ON_HOPPER x the model's time there.
ATTENTION_KERNELS: tuple[str, ...] = ("fa2", "fa3", "triton")
DEFAULT_ATTENTION_KERNEL = "fa2"
FA2_ON_HOPPER = 1.75

# Fitted on the shared LLM rows of the eager frameworks without tensor or context parallelism (README
# section 7.1; `dse.calibrate.validate.training.ratio_fit_rows`) by `fit_training_coeffs`, one set per
# ratio class (`ratio_class`), with the attention ratios above held and the Triton ratio fitted on the
# llm-foundry rows: hopper (Hopper and Blackwell, where FA3 runs, with Hopper's latency corrections) from the
# H100 / H200 rows (llm-foundry: triton, torchtitan: fa2); ampere (Ampere's corrections) from the A100 rows
# (llm-foundry: triton, DeepLearningExamples BERT: eager attention, ratio 1); uncorrected (a GPU whose
# generation ships no latency corrections: Volta, Ada) from the A100 rows and the 8 V100 BERT rows predicted
# with the uncorrected kernel model. The NVIDIA recipe rows (Megatron-Bridge, NeMo) are held out.
TRAINING_KERNEL_SCALE: dict[str, float] = {"hopper": 1.352, "ampere": 1.180, "uncorrected": 1.375}
TRITON_ATTENTION_SCALE: dict[str, float] = {"hopper": 3.728, "ampere": 1.669, "uncorrected": 1.650}


def ratio_class(gpu: GpuSpec) -> str:
    """The training-ratio class of `gpu` (above): its kernel-library generation (`arch_family`) where its
    generation ships latency corrections, else `uncorrected` (a ratio fitted on corrected kernels would
    not fit the uncorrected model those GPUs run)."""
    return arch_family(gpu) if training_latency_coeffs(gpu).table.groups else "uncorrected"


def training_latency_coeffs(gpu: GpuSpec) -> CoeffSet:
    """The latency corrections a training step runs with: the shipped set of `gpu`'s generation, as
    `dse predict` runs a forward pass or a serving phase (so a step's forward costs what the same forward
    costs alone), without its attention groups. Those are fitted on vLLM's FlashAttention-3 serving kernels
    (H100, forward only); a training step's attention keeps the analytical flash kernel and the ratios
    above, which are fitted or held on it (on the A100 llm-foundry rows the serving corrections bent the
    sequence-length trend: +29% too fast at 64k tokens, +2% at 2k). The fused-MoE correction (`moe`, fitted
    on vLLM's grouped expert GEMMs) stays: those kernels are GEMMs, forward and backward alike (the
    Megatron-Bridge MoE rows: 40% with it, 45% without)."""
    return _training_latency_coeffs(gpu.architecture)


@cache
def _training_latency_coeffs(architecture: str) -> CoeffSet:
    shipped = load_default_coeffs(architecture)
    kept = {k: v for k, v in shipped.table.groups.items() if not k.startswith("attention")}
    return replace(shipped, table=CoeffTable(groups=kept))


def attention_scale_of(gpu: GpuSpec, attention_kernel: str, attention: str = "flash") -> float:
    """The training attention kernel's time over the kernel model's on `gpu` (the table above); 1 for
    eager attention (`attention`), whose GEMMs and softmax are no flash kernel."""
    if attention_kernel not in ATTENTION_KERNELS:
        raise ConfigError(
            f"attention kernel '{attention_kernel}' is not one of {', '.join(ATTENTION_KERNELS)}"
        )
    hopper_class = arch_family(gpu) == "hopper"
    if attention_kernel == "fa3" and not hopper_class:
        raise ConfigError(
            f"attention kernel fa3 (FlashAttention-3, or cuDNN's fused attention as fast) is priced on "
            f"Hopper and later; on {gpu.name} ({gpu.architecture}) use the default fa2 (ratio 1 there)"
        )
    if attention == "eager":
        return 1.0
    if attention_kernel == "triton":
        return TRITON_ATTENTION_SCALE[ratio_class(gpu)]
    return FA2_ON_HOPPER if attention_kernel == "fa2" and hopper_class else 1.0


def default_training_coeffs(
    gpu: GpuSpec, attention_kernel: str = DEFAULT_ATTENTION_KERNEL, attention: str = "flash"
) -> TrainingCoeffs:
    """The shipped training ratios of `gpu`'s architecture class with `attention_kernel`'s attention ratio."""
    return TrainingCoeffs(
        kernel_scale=TRAINING_KERNEL_SCALE[ratio_class(gpu)],
        attention_scale=attention_scale_of(gpu, attention_kernel, attention),
    )


def _split_attention(graph: WorkloadGraph) -> tuple[WorkloadGraph, WorkloadGraph]:
    """(every op but attention, attention ops) of `graph`, so the two can be scaled apart."""
    attn = tuple(op for op in graph.ops if isinstance(op, AttentionOp))
    rest = tuple(op for op in graph.ops if not isinstance(op, AttentionOp))
    return (
        WorkloadGraph(name=graph.name, ops=rest, meta=graph.meta),
        WorkloadGraph(name=graph.name + "/attention", ops=attn, meta=graph.meta),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingRequest:
    """What one training step runs: batch sizes, sequence length or image size, precision, layout."""

    micro_batch: int
    global_batch: int
    seq_len: int = 2048
    image_size: int = 224
    precision: str = "bf16"
    recompute: str = "none"
    optimizer: str = "adamw"
    attention: str = "flash"
    attention_kernel: str = DEFAULT_ATTENTION_KERNEL  # LLMs: the flash-attention implementation (above)
    memory_format: str = "nchw"  # vision: PyTorch's default layout, or nhwc (channels_last)
    objective: str = "pretrain"  # encoders: pre-training heads, or finetune: a task head (dse.training.llm)
    lora_rank: int = 0  # LLMs: 0 trains every weight; r > 0 freezes them and trains rank-r LoRA adapters
    lora_targets: tuple[str, ...] = ()  # LLMs: the projections with adapters (training.lora; (): all)
    # LLMs: 0, one sample per sequence; L > 0, samples of L tokens packed in each sequence (dse.training.llm)
    packed_sample_len: int = 0
    eager_ops: bool = False  # LLMs: RMSNorm, rotary, SwiGLU (GPT-2's GELU) as eager PyTorch's kernels
    autocast: bool = False  # LLMs: torch.autocast over fp32 weights, fp32 gradients (dse.training.autocast)
    loader_samples_per_s: float = 0.0  # what the input pipeline feeds each dp rank (0: no limit; docstring)
    layout: ParallelLayout = field(default_factory=ParallelLayout)

    def __post_init__(self) -> None:
        if self.attention_kernel not in ATTENTION_KERNELS:
            raise ConfigError(
                f"attention_kernel '{self.attention_kernel}' is not one of {', '.join(ATTENTION_KERNELS)}"
            )
        if self.attention == "eager" and self.attention_kernel != DEFAULT_ATTENTION_KERNEL:
            raise ConfigError(
                f"attention_kernel {self.attention_kernel}: a flash-attention implementation, but attention "
                "is eager (GEMMs and a softmax)"
            )
        choices = (  # (field, allowed, its flag in the message); mxfp4 is a checkpoint format, not trained in
            ("precision", TRAINING_PRECISIONS, " (--precision)"), ("optimizer", OPTIMIZERS, " (--optimizer)"),
            ("recompute", RECOMPUTE_MODES, ""), ("objective", OBJECTIVES, ""),
            ("memory_format", MEMORY_FORMATS, ""),
        )  # fmt: skip
        for name, allowed, flag in choices:
            if (value := getattr(self, name)) not in allowed:
                raise ConfigError(f"{name} '{value}'{flag} is not one of {', '.join(allowed)}")
        for name in ("lora_rank", "packed_sample_len", "loader_samples_per_s"):
            value, real = getattr(self, name), name == "loader_samples_per_s"  # a rate, else a count
            typed = isinstance(value, (int | float) if real else int) and not isinstance(value, bool)
            slow = typed and real and 0 < value < MIN_LOADER_SAMPLES_PER_S  # 1e-308 made an infinite step
            if not typed or not 0 <= value < float("inf") or slow:  # NaN and inf fail the range
                kind = _RATE_TEXT if real else "an integer >= 0"
                raise ConfigError(f"{name} (--{name.replace('_', '-')}) must be {kind}, got {value!r}")
        for name in ("eager_ops", "autocast"):
            if not isinstance(value := getattr(self, name), bool):
                raise ConfigError(f"{name} (--{name.replace('_', '-')}) must be true or false, got {value!r}")
        check_lora_targets(self.lora_targets, self.lora_rank)
        if self.lora_rank and self.layout.fsdp:
            raise ConfigError(
                "--lora-rank with --fsdp: LoRA keeps the frozen weights whole on each rank (split them with "
                "--tp / --pp); its adapters are all a rank trains"
            )
        # bounded as a serving batch is: a 10^30 global batch was a 10^19 s step, 10^308 a traceback
        for name, count in (("micro_batch", self.micro_batch), ("global_batch", self.global_batch)):
            if not 1 <= count <= MAX_COUNT:
                raise ConfigError(
                    f"{name} (--{name.replace('_', '-')}) must be in [1, {MAX_COUNT}], got {count}"
                )
        per_step = self.micro_batch * self.layout.dp
        if self.global_batch % per_step:
            raise ConfigError(
                f"global batch {self.global_batch} is not a multiple of micro batch x dp = "
                f"{self.micro_batch} x {self.layout.dp}"
            )

    @property
    def num_microbatches(self) -> int:
        """Micro-batches per rank and step (gradient accumulation steps, or the pipeline's m)."""
        return self.global_batch // (self.micro_batch * self.layout.dp)


@dataclass(frozen=True, slots=True, kw_only=True)
class StepParts:
    """One rank's share of a model for one micro-batch (what the model builders hand the step model)."""

    name: str
    kind: str  # "llm" or "vision"
    forward: WorkloadGraph
    backward: WorkloadGraph
    recompute: WorkloadGraph
    params_per_rank: float  # after the TP / PP split, before FSDP sharding
    num_layers_per_rank: int
    activation_bytes: float  # kept for the backward per micro-batch on this rank
    model_flop_per_sample: float  # whole model, forward + backward
    tokens_per_sample: int  # seq_len for LLMs, 1 for vision
    gemm_dtype: str
    trainable_params_per_rank: float | None = None  # what gradients and the optimizer cover (None: all)
    tp_allreduce_bytes: float = 0.0  # one Megatron all-reduce ([tokens, d] activations)
    num_tp_allreduces: int = 0  # per micro-batch, forward and backward
    pp_handoff_bytes: float = 0.0
    cp_ring_bytes: float = 0.0  # per micro-batch: K/V (and dK/dV) chunks sent round the context-parallel ring
    ep_alltoall_bytes: float = 0.0  # one MoE dispatch or combine per rank (expert parallel)
    ep_network_bytes: float = 0.0  # of which each GPU sends over its NIC (deepep past one node)
    num_ep_alltoalls: int = 0  # per micro-batch, forward and backward
    dispatch_s: float = 0.0  # per micro-batch: launch costs the GPU waits out (`dse.training.llm`)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingEstimate:
    """A training step's prediction; times in s, energies in J, powers in W (per GPU unless `total_`)."""

    model: str
    gpu: str
    kind: str
    request: TrainingRequest
    step_time_s: float
    samples_per_step: int
    tokens_per_step: int
    energy_per_step_j: float  # all GPUs
    avg_power_w: float
    model_flop_per_step: float
    peak_flop_per_s: float
    memory: MemoryEstimate
    phase_time_s: dict[str, float]
    phase_energy_j: dict[str, float]  # per GPU
    link_energy_j: float = 0.0  # per GPU: the links' wire energy (in `phase_energy_j["communication"]`)
    effective_clock_hz: float = 0.0  # the kernels' busy-time-weighted SM clock (under the power cap)
    requested_clock_hz: float = 0.0  # --clock-mhz, or the GPU's boost clock
    power_cap_w: float = float("inf")  # the board limit in force (--power-cap-w, else the TDP)

    @property
    def feasible(self) -> bool:
        return self.memory.fits

    @property
    def num_gpus(self) -> int:
        return self.request.layout.num_gpus

    def metrics(self) -> dict[str, Any]:
        """The `dse predict --training --json` keys (issue 20)."""
        n = self.num_gpus
        per_gpu_flop_s = self.model_flop_per_step / n / self.step_time_s
        out: dict[str, Any] = {
            "model": self.model,
            "gpu": self.gpu,
            "num_gpus": n,
            "dp": self.request.layout.dp,
            "tp": self.request.layout.tp,
            "pp": self.request.layout.pp,
            "cp": self.request.layout.cp,
            "ep": self.request.layout.ep,
            "vp": self.request.layout.vp,
            "fsdp": self.request.layout.fsdp,
            "distributed_optimizer": self.request.layout.distributed_optimizer,
            "lora_rank": self.request.lora_rank,
            "packed_sample_len": self.request.packed_sample_len,
            "eager_ops": self.request.eager_ops,
            "autocast": self.request.autocast,
            "loader_samples_per_s": self.request.loader_samples_per_s,
            "tp_comm_overlap": self.request.layout.tp_comm_overlap,
            "cp_load_balance": self.request.layout.cp_load_balance,
            "ep_dispatcher": self.request.layout.ep_dispatcher,
            "num_microbatches": self.request.num_microbatches,
            "step_time_s": self.step_time_s,
            "samples_per_s": self.samples_per_step / self.step_time_s,
            "mfu": per_gpu_flop_s / self.peak_flop_per_s,
            "model_tflops_per_gpu": per_gpu_flop_s / 1e12,
            "energy_per_step_j": self.energy_per_step_j,
            "avg_power_w": self.avg_power_w,
            "total_power_w": self.avg_power_w * n,
            "memory_bytes": self.memory.total_bytes,
            "memory_by_part_bytes": self.memory.to_dict(),
            "effective_clock_hz": self.effective_clock_hz,
            "effective_clock_mhz": self.effective_clock_hz / MHZ,
            "requested_clock_hz": self.requested_clock_hz,
            "power_cap_w": self.power_cap_w,
            # the cap cannot be held even at the minimum clock (idle and static power alone exceed it)
            "cap_exceeded": self.avg_power_w > self.power_cap_w * (1.0 + 1e-6),
            "feasible": self.feasible,
            "infeasible_reason": self.memory.reason(),
        }
        if self.kind == "llm":
            out["tokens_per_s_per_gpu"] = self.tokens_per_step / self.step_time_s / n
            out["energy_per_token_j"] = self.energy_per_step_j / self.tokens_per_step
        else:
            out["samples_per_s_per_gpu"] = self.samples_per_step / self.step_time_s / n
            out["energy_per_sample_j"] = self.energy_per_step_j / self.samples_per_step
        return out

    def breakdown(self) -> dict[str, dict[str, float]]:
        """Time (s, per step) and energy (J, per GPU and step) by phase."""
        return {"time_s": dict(self.phase_time_s), "energy_j": dict(self.phase_energy_j)}


def _trainable(parts: StepParts) -> float:
    """Parameters one rank trains (all it holds, or its LoRA adapters)."""
    return (
        parts.params_per_rank if parts.trainable_params_per_rank is None else parts.trainable_params_per_rank
    )


def _dp_comm(
    parts: StepParts, req: TrainingRequest, gpu: GpuSpec, fb_s: float, bwd_s: float
) -> tuple[float, float, float]:
    """(total, exposed) seconds of data-parallel communication per step, and its link energy per GPU."""
    lay, m = req.layout, req.num_microbatches
    dp = lay.grad_ranks
    if dp <= 1:
        return 0.0, 0.0, 0.0
    w_b = 4.0 if req.precision in ("fp32", "tf32") else 2.0
    grads = _trainable(parts) * w_b
    per_node = lay.grad_ranks_per_node
    if lay.fsdp:
        gather = group_collective_time_s("all_gather", grads, dp, gpu, per_node)
        scatter = group_collective_time_s("reduce_scatter", grads, dp, gpu, per_node)
        comm = 2 * gather + scatter
        exposed = max(0.0, comm - fb_s) + comm / max(parts.num_layers_per_rank, 1)
        link = 2 * link_energy_j("all_gather", grads, dp, gpu) + link_energy_j(
            "reduce_scatter", grads, dp, gpu
        )
        return m * comm, m * exposed, m * link
    comm = group_collective_time_s("all_reduce", grads, dp, gpu, per_node)
    last = group_collective_time_s("all_reduce", min(grads, _DDP_BUCKET_BYTES), dp, gpu, per_node)
    exposed = max(0.0, comm - bwd_s) + last
    return comm, exposed, link_energy_j("all_reduce", grads, dp, gpu)


def _exposed_per_microbatch(
    parts: StepParts, lay: ParallelLayout, gpu: GpuSpec, compute_s: float, attention_s: float
) -> tuple[float, float, float]:
    """(TP collectives and CP ring s, PP hand-off s) of one micro-batch on one rank that its `compute_s` of
    kernels (`attention_s` of them attention) does not hide, and the link energy J of all of it."""
    tp_s, pp_s, cp_s, link_j = _comm_per_microbatch(parts, lay, gpu)
    ep_s = 0.0
    if lay.ep > 1 and parts.num_ep_alltoalls:  # Megatron's dispatchers: on the critical path
        ep_s = parts.num_ep_alltoalls * ep_exchange_time_s(
            parts.ep_alltoall_bytes, parts.ep_network_bytes, lay.ep, lay.ep_dispatcher, gpu
        )
        link_j += parts.num_ep_alltoalls * link_energy_j("all_to_all", parts.ep_alltoall_bytes, lay.ep, gpu)
    if lay.tp_comm_overlap:
        # split into tp chunks pipelined with the GEMM's chunks (ring exchange): an all-gather's first chunk
        # is local, so nothing shows; a reduce-scatter's last chunk does, 1/tp of it. Half the collectives
        # are each, so 1/(2 tp) of the time shows, or what the GEMMs cannot cover.
        tp_s = max(tp_s / (2 * lay.tp), tp_s - (compute_s - attention_s))
    if lay.vp > 1:
        # the interleaved schedule overlaps its hand-offs with the other chunks' compute (Megatron's
        # overlap_p2p_comm, on by default with virtual pipelines): one chunk's hand-offs show
        pp_s = max(pp_s / lay.vp, pp_s - compute_s)
    # the ring's time beyond the attention kernels it overlaps
    return tp_s + max(0.0, cp_s - attention_s) + ep_s, pp_s, link_j


def _comm_per_microbatch(
    parts: StepParts, lay: ParallelLayout, gpu: GpuSpec
) -> tuple[float, float, float, float]:
    """(TP collectives s, PP hand-offs s, CP ring s, link energy J) of one micro-batch on one rank."""
    tp_s = tp_j = pp_s = cp_s = 0.0
    link_j_per_byte = 8.0 * gpu.interconnect.energy_j_per_bit if gpu.interconnect is not None else 0.0
    if lay.tp > 1 and parts.num_tp_allreduces:
        # sequence parallel: each all-reduce's worth is an all-gather and a reduce-scatter of [tokens, d]
        # (NCCL's 8-GPU all-reduce reduces in the NVSwitch, which the pair cannot: 10-19% slower)
        pair = ("all_gather", "reduce_scatter")
        one = sum(group_collective_time_s(c, parts.tp_allreduce_bytes, lay.tp, gpu) for c in pair)
        tp_s = parts.num_tp_allreduces * one
        tp_j = parts.num_tp_allreduces * sum(
            link_energy_j(c, parts.tp_allreduce_bytes, lay.tp, gpu) for c in pair
        )
    if lay.pp > 1:
        # ranks are ordered tp, cp, dp, pp (Megatron): stages sit a node apart once tp x cp x pp > a node
        across = lay.tp * lay.cp * lay.pp > GPUS_PER_NODE
        pp_s = 2 * lay.vp * p2p_time_s(parts.pp_handoff_bytes, gpu, across_nodes=across)
        tp_j += 2 * lay.vp * parts.pp_handoff_bytes * link_j_per_byte
    if lay.cp > 1 and parts.cp_ring_bytes > 0:
        cp_s = p2p_time_s(parts.cp_ring_bytes, gpu, across_nodes=lay.tp * lay.cp > GPUS_PER_NODE)
        tp_j += parts.cp_ring_bytes * link_j_per_byte
    return tp_s, pp_s, cp_s, tp_j


def estimate_step(
    parts: StepParts,
    gpu: GpuSpec,
    req: TrainingRequest,
    memory: MemoryEstimate,
    point: OperatingPoint | None = None,
    coeffs: Any = None,
    power_coeffs: Any = None,
    train_coeffs: TrainingCoeffs | None = None,
) -> TrainingEstimate:
    """The step model of the module docstring over one rank's `parts`.

    The power cap bounds the board, links included: where the links' energy (collectives overlapped with
    compute) takes the step's mean power over the cap, the kernels run again under the cap less that link
    power, as the board's power manager would clock them down.
    """
    point = point or OperatingPoint()
    coeffs = training_latency_coeffs(gpu) if coeffs is None else coeffs  # None: the shipped corrections
    args = (parts, gpu, req, memory)
    est = _estimate_step_at(*args, point, coeffs, power_coeffs, train_coeffs)
    cap_w = power_cap_w(gpu, point)
    if est.avg_power_w <= cap_w * (1.0 + 1e-9):
        return replace(est, power_cap_w=cap_w)
    link_w = est.link_energy_j / est.step_time_s
    # The kernels' share of the board limit may lie below the lowest limit a user can set: the clock floor
    # then bounds it (the cap search reports kernels over the cap at the minimum clock).
    # (A 1 W minimum limit lets `power_cap_w` take any share, below idle power too, without refusing it.)
    kernels_gpu = gpu.model_copy(update={"power": gpu.power.model_copy(update={"power_cap_min_w": 1.0})})
    inner = OperatingPoint(sm_clock_hz=point.sm_clock_hz, power_cap_w=max(cap_w - link_w, 1.0))
    est = _estimate_step_at(parts, kernels_gpu, req, memory, inner, coeffs, power_coeffs, train_coeffs)
    return replace(est, power_cap_w=cap_w)


def _step_kernels(
    parts: StepParts, gpu: GpuSpec, req: TrainingRequest, point: OperatingPoint, coeffs: Any,
    power_coeffs: Any, coeffs_t: TrainingCoeffs, scale: np.ndarray,
) -> GraphTotals:  # fmt: skip
    """Kernel latency, energy and latency x clock of forward, backward and recompute (non-attention,
    attention each) and of the optimizer update, unscaled, as one pass under the cap (`dse.perf.pass_cap`):
    each graph weighted by its runs per step and its time scale (which scales its energy alike). The pipeline
    bubble and exposed communication idle outside that mean: they give the kernels no headroom under the cap
    (a board limiter acts over windows shorter than a bubble; crediting the bubble's idle power let the
    compute phases of a deep pipeline draw 925 W under a 700 W cap)."""
    lay, m = req.layout, req.num_microbatches
    params_updated = _trainable(parts) / lay.optimizer_shards
    opt = build_optimizer_graph(parts.name, params_updated, req.precision, req.optimizer)
    graphs = [
        g for graph in (parts.forward, parts.backward, parts.recompute) for g in _split_attention(graph)
    ]
    return predict_graph_totals(
        [*graphs, opt], gpu, point, coeffs, power_coeffs,
        passes=[list(range(len(graphs) + 1))], runs=[*(m * scale), coeffs_t.kernel_scale],
        idle_share=0.0,
    )  # fmt: skip


def _estimate_step_at(
    parts: StepParts,
    gpu: GpuSpec,
    req: TrainingRequest,
    memory: MemoryEstimate,
    point: OperatingPoint,
    coeffs: Any,
    power_coeffs: Any,
    train_coeffs: TrainingCoeffs | None,
) -> TrainingEstimate:
    """`estimate_step` with the kernels under `point`'s cap."""
    check_tensor_dtype(gpu, parts.gemm_dtype)  # Volta: fp16 only
    coeffs_t = train_coeffs or default_training_coeffs(gpu, req.attention_kernel, req.attention)
    lay, m = req.layout, req.num_microbatches
    scale = np.tile([coeffs_t.kernel_scale, coeffs_t.attention_scale], 3)
    lat, en, clk = _step_kernels(parts, gpu, req, point, coeffs, power_coeffs, coeffs_t, scale)
    lat_s, en_j = lat[:-1] * scale, en[:-1] * scale
    fwd_s, bwd_s, rec_s = (float(lat_s[i] + lat_s[i + 1]) for i in (0, 2, 4))
    fwd_j, bwd_j, rec_j = (float(en_j[i] + en_j[i + 1]) for i in (0, 2, 4))
    opt_s, opt_j = float(lat[-1]) * coeffs_t.kernel_scale, float(en[-1]) * coeffs_t.kernel_scale
    # the kernels' busy-time-weighted clock: microbatch graphs m times, the optimizer once
    kernel_s = m * float(lat_s.sum()) + opt_s
    requested_hz = requested_clock_hz(gpu, point)
    clock_s = m * float(np.dot(clk[:-1], scale)) + float(clk[-1]) * coeffs_t.kernel_scale
    clock_hz = float(round(clock_s / kernel_s)) if kernel_s > 0 else requested_hz  # to the hertz
    attention_s = m * float(lat_s[1] + lat_s[3] + lat_s[5])
    tp_s, pp_s, tp_pp_j = _exposed_per_microbatch(parts, lay, gpu, fwd_s + bwd_s + rec_s, attention_s / m)
    t_mb = fwd_s + bwd_s + rec_s + tp_s + pp_s + parts.dispatch_s
    bubble_s = (lay.pp - 1) / lay.vp * t_mb
    dp_total_s, dp_exposed_s, dp_link_j = _dp_comm(parts, req, gpu, fwd_s + bwd_s + rec_s, bwd_s)
    step_s = m * t_mb + bubble_s + dp_exposed_s + opt_s
    rate = req.loader_samples_per_s  # the docstring's input rule
    wait_s = max(0.0, req.global_batch / (lay.dp * rate) - step_s) if rate else 0.0
    step_s += wait_s
    clock = point.sm_clock_hz or gpu.clocks.boost_clock_hz
    idle_w = float(gpu_power_terms(gpu).idle_power_w(np.asarray(clock, dtype=float)))
    time_s = {
        "forward": m * fwd_s,
        "backward": m * (bwd_s + rec_s),
        "optimizer": opt_s,
        "communication": m * (tp_s + pp_s) + dp_exposed_s,
        "pipeline_bubble": bubble_s,
        "expert_dispatch": m * parts.dispatch_s,
        "communication_overlapped": max(0.0, dp_total_s - dp_exposed_s),
        "attention_in_forward_backward": attention_s,
        "input_wait": wait_s,
    }
    energy_j = {
        "forward": m * fwd_j,
        "backward": m * (bwd_j + rec_j),
        "optimizer": opt_j,
        "communication": idle_w * (m * (tp_s + pp_s) + dp_exposed_s) + m * tp_pp_j + dp_link_j,
        "pipeline_bubble": idle_w * bubble_s,
        "expert_dispatch": idle_w * m * parts.dispatch_s,
        "input_wait": idle_w * wait_s,
    }
    per_gpu_j = sum(energy_j.values())
    samples = req.global_batch
    dtype = parts.gemm_dtype
    peak = gpu.fp32_peak_flop_per_s() if dtype == "fp32" else gpu.tensor_peak_flop_per_s(dtype)
    return TrainingEstimate(
        model=parts.name,
        gpu=gpu.name,
        kind=parts.kind,
        request=req,
        step_time_s=step_s,
        samples_per_step=samples,
        tokens_per_step=samples * parts.tokens_per_sample,
        energy_per_step_j=per_gpu_j * lay.num_gpus,
        avg_power_w=per_gpu_j / step_s,
        model_flop_per_step=samples * parts.model_flop_per_sample,
        peak_flop_per_s=peak,
        memory=memory,
        phase_time_s=time_s,
        phase_energy_j=energy_j,
        link_energy_j=m * tp_pp_j + dp_link_j,
        effective_clock_hz=clock_hz,
        requested_clock_hz=requested_hz,
    )

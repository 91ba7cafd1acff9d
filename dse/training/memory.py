"""Training memory per GPU: weights, gradients, optimizer states and activations, against capacity.

Model states per parameter (ZeRO, Rajbhandari et al. 2020, section 3.1: mixed-precision Adam holds 2 + 2 +
12 = 16 bytes per parameter): the low-precision weights and gradients (2 + 2) and the fp32 master weights
plus the optimizer's fp32 moments (AdamW: master + m + v = 12; SGD with momentum: master + momentum = 8).
In fp32 / tf32 training the weights are the master copy (4 + 4 + moments). FSDP (ZeRO-3) shards all of
them across the data-parallel ranks and gathers one layer's weights at a time.

Activations kept for the backward per layer and token (Korthikanti et al. 2022, "Reducing Activation
Recomputation in Large Transformer Models", section 4: `sbh (34 + 5 a s / h)` bytes per layer in 16-bit
with dropout) are counted from the layer's tensors here, without the dropout masks modern LLM recipes do
not use: the two norm inputs, the q/k/v projection input and outputs, the attention output, the MLP
input, the up/gate outputs and the activation output; eager attention adds the `a s^2` score matrix.
Selective recomputation drops the score matrix (its only saving under flash attention, which never stores
it); torchtitan's per-op checkpointing (`op`, `dse.workload.backward.op_checkpoint_gemms`) keeps each layer's
input, the outputs of the mm's it saves (q, v, w1 and w2 of a Llama layer) and the attention output; full
recomputation keeps only each layer's input (`2 sbh`) plus one layer's activations while it is
recomputed. Tensor parallelism with sequence parallelism divides them by t (Korthikanti section 4.2.2).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from dse.workload.arch import LlmArch
from dse.workload.ops import BYTES_PER_ELEMENT

__all__ = [
    "OPTIMIZERS",
    "RECOMPUTE_MODES",
    "MemoryEstimate",
    "llm_activation_bytes_per_layer",
    "model_state_bytes_per_param",
]

# adamw-foreach: torch.optim.AdamW's default (foreach) implementation; AdamW's states (dse.training.optimizer)
OPTIMIZERS: tuple[str, ...] = ("adamw", "sgd", "adamw-foreach")
RECOMPUTE_MODES: tuple[str, ...] = ("none", "selective", "op", "full")

# fp32 optimizer state per parameter besides the master weights: AdamW m and v, SGD the momentum.
_MOMENT_BYTES = {"adamw": 8.0, "sgd": 4.0, "adamw-foreach": 8.0}
# CUDA context, cuBLAS/NCCL workspaces and allocator fragmentation (E: ~2-3 GiB is typical of PyTorch jobs).
RESERVED_BYTES = 2.5 * 2**30


def model_state_bytes_per_param(precision: str, optimizer: str) -> dict[str, float]:
    """Bytes per parameter of weights, gradients and optimizer states (master copy included there)."""
    if optimizer not in _MOMENT_BYTES:
        raise ValueError(f"optimizer '{optimizer}' is not one of {', '.join(OPTIMIZERS)}")
    moments = _MOMENT_BYTES[optimizer]
    if precision in ("fp32", "tf32"):
        return {"weights": 4.0, "grads": 4.0, "optimizer": moments}
    return {"weights": 2.0, "grads": 2.0, "optimizer": 4.0 + moments}


def llm_activation_bytes_per_layer(
    arch: LlmArch, *, tokens: int, act_dtype: str, attention: str, recompute: str, tp: int = 1, batch: int = 1
) -> float:
    """Bytes one transformer layer keeps for its backward over `tokens` tokens (module docstring)."""
    b = BYTES_PER_ELEMENT[act_dtype]
    d = arch.hidden_size
    if recompute == "full":
        return tokens * d * b / tp
    width = arch.intermediate_size
    if arch.is_moe:
        width = arch.num_experts_per_tok * arch.moe_intermediate_size + arch.shared_expert_intermediate_size
    mlp = (3 if arch.gated_mlp else 2) * width
    per_token = 3 * d + arch.q_dim + 2 * arch.kv_dim + arch.q_dim + d + mlp
    if recompute == "op":  # the layer input, the saved mm outputs (q, v, w1, w2) and the attention output
        per_token = d + arch.q_dim + arch.kv_dim + width + (d if arch.gated_mlp else 0) + arch.q_dim
    kept = tokens * per_token * b
    if attention == "eager" and recompute == "none":
        seq = tokens // max(batch, 1)
        kept += batch * arch.num_heads * seq * seq * b
    return kept / tp


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryEstimate:
    """Peak bytes per GPU by part; `total_bytes` against `capacity_bytes` decides feasibility."""

    weights_bytes: float
    grads_bytes: float
    optimizer_bytes: float
    activations_bytes: float
    reserved_bytes: float
    capacity_bytes: float
    advice: str = ""  # what would make it fit, for this run (`training_advice`); a generic list when empty

    @property
    def total_bytes(self) -> float:
        return (
            self.weights_bytes
            + self.grads_bytes
            + self.optimizer_bytes
            + self.activations_bytes
            + self.reserved_bytes
        )

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes

    def reason(self) -> str:
        """Why the step does not fit ('' when it does)."""
        if self.fits:
            return ""
        gib = 2.0**30
        return (
            f"needs {self.total_bytes / gib:.1f} GiB per GPU (weights {self.weights_bytes / gib:.1f}, grads "
            f"{self.grads_bytes / gib:.1f}, optimizer {self.optimizer_bytes / gib:.1f}, activations "
            f"{self.activations_bytes / gib:.1f}, reserved {self.reserved_bytes / gib:.1f}) but the GPU has "
            f"{self.capacity_bytes / gib:.1f} GiB: "
            + (
                self.advice
                or "shard (--fsdp or --distributed-optimizer, --tp, --pp, --ep for MoE models), recompute or "
                "lower --micro-batch"
            )
        )

    def with_advice(
        self, req: Any, *, moe: bool = False, long_context: bool = False, model_parallel: bool = True
    ) -> MemoryEstimate:
        """This estimate with the options that would shrink its largest parts, among those `req` (a
        `TrainingRequest`) has not taken yet (`model_parallel`: an LLM, which --tp / --pp can split)."""
        lay, tips = req.layout, []
        states = self.weights_bytes + self.grads_bytes + self.optimizer_bytes
        # only options the request could take: --autocast keeps whole fp32 states on each data-parallel
        # rank (no sharding, no model parallelism), FSDP refuses LoRA (frozen weights stay whole) and --ep
        autocast = req.autocast
        shard = [] if autocast else ["--distributed-optimizer"]
        if not (autocast or req.lora_rank or lay.ep > 1):
            shard.insert(0, "--fsdp")
        if lay.num_gpus == 1:  # nothing to shard or split over: more GPUs, or less memory on this one
            # LoRA's frozen weights are what is large, which only splitting the model spreads
            spread = ([] if req.lora_rank else shard) + (
                ["--tp", "--pp"] if model_parallel and not autocast else []
            )
            if spread and states > self.activations_bytes:
                tips.append(f"more GPUs (--num-gpus N with {', '.join(spread)})")
            model_parallel = False
        elif not (lay.fsdp or lay.distributed_optimizer) and states > self.activations_bytes:
            tips.append(f"shard the model states ({' or '.join(shard)})" if shard else "drop --autocast")
        if model_parallel and not autocast:
            split = ["--tp", "--pp"] + (["--ep"] if moe and lay.ep == 1 else [])
            tips.append("split the model (" + ", ".join(split) + ")")
        if self.activations_bytes > 0.25 * self.total_bytes:
            if req.recompute != "full":
                tips.append("recompute activations (--recompute full)")
            if req.micro_batch > 1:
                tips.append("lower --micro-batch")
            if long_context and lay.cp == 1:
                tips.append("split each sequence (--cp)")
        return replace(self, advice="; ".join(tips))

    def to_dict(self) -> dict[str, float]:
        return {
            "weights_bytes": self.weights_bytes,
            "grads_bytes": self.grads_bytes,
            "optimizer_bytes": self.optimizer_bytes,
            "activations_bytes": self.activations_bytes,
            "reserved_bytes": self.reserved_bytes,
        }

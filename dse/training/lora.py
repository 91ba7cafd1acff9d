"""LoRA fine-tuning of an LLM rank's graphs: frozen weights, trained low-rank adapters (Hu et al. 2021).

Each dense projection of attention and MLP (qkv, o, gate/up, down: NeMo 2.0's `LoRA` default targets
linear_qkv, linear_proj, linear_fc1, linear_fc2; an MoE model's router and routed experts stay frozen without
one), or those of `targets` alone (`LORA_TARGETS`, `TrainingRequest.lora_targets`), gets
an adapter `x A B` of rank r beside its frozen weight: two more
GEMMs forward, [t, k] x [k, r] and [t, r] x [r, n], each with its data and weight gradient backward. The
frozen weights keep their data gradients (the backward must reach the layers below) but lose their weight
gradients, the embedding its gradient scatter, and only the adapters have gradients and optimizer states.
"""

from __future__ import annotations

import dataclasses

from dse.errors import ConfigError
from dse.workload.graph import WorkloadGraph
from dse.workload.ops import GemmOp, Op
from dse.workload.sharding import EXPERT_GEMMS

__all__ = ["LORA_TARGETS", "check_lora_targets", "freeze_weights", "with_adapters"]

_LAYER = "/layer["
# The projections an adapter may target, by their names in the graphs (NeMo's linear_qkv, linear_proj,
# linear_fc1, linear_fc2; Megatron fuses q, k, v and gate, up).
LORA_TARGETS: tuple[str, ...] = ("qkv_proj", "o_proj", "gate_up_proj", "down_proj")


def check_lora_targets(targets: object, rank: int) -> None:
    """ConfigError unless `targets` is a tuple of `LORA_TARGETS` names, and empty without adapters."""
    if not isinstance(targets, tuple):
        raise ConfigError(f"lora_targets must be a tuple of {', '.join(LORA_TARGETS)} (empty: all of them)")
    unknown = [str(t) for t in targets if t not in LORA_TARGETS]
    if unknown:
        known, names = ", ".join(LORA_TARGETS), ", ".join(unknown)
        raise ConfigError(f"lora_targets (--lora-targets): {names} is not a projection of {known}")
    if targets and not rank:
        raise ConfigError("lora_targets name adapters, but lora_rank (--lora-rank) is 0 (no LoRA)")


def _is_weight_gemm(op: Op) -> bool:
    """A GEMM by a weight matrix (a projection, the LM head, routed experts), not of two activations."""
    return isinstance(op, GemmOp) and (op.b_shared or op.name.rsplit("/", 1)[-1] in EXPERT_GEMMS)


def with_adapters(
    forward: WorkloadGraph, rank: int, targets: tuple[str, ...] = ()
) -> tuple[WorkloadGraph, float]:
    """`forward` with a rank-`rank` adapter after each dense layer projection, or after those named in
    `targets` (`LORA_TARGETS`; empty: all), as bf16 GEMMs (the adapters are not quantized), and the
    adapters' parameter count on this rank (with tp, Megatron's parallel adapters keep the unsplit side
    whole: the rank's k + n)."""
    ops: list[Op] = []
    params = 0.0
    for op in forward.ops:
        ops.append(op)
        if isinstance(op, GemmOp) and op.b_shared and _LAYER in op.name and not op.name.endswith("/router"):
            if targets and op.name.rsplit("/", 1)[-1] not in targets:
                continue
            # the adapters stay unquantized
            plain = dataclasses.replace(
                op,
                dtype="bf16" if op.dtype in ("fp8", "int8", "fp4") else op.dtype,
                out_dtype=None,
                b_dtype=None,
                act_quant=False,
            )
            down = dataclasses.replace(plain, name=f"{op.name}/lora_a", n=rank)
            up = dataclasses.replace(plain, name=f"{op.name}/lora_b", k=rank)
            ops += [down, up]
            params += rank * (op.k + op.n) * op.count
    return WorkloadGraph(name=forward.name, ops=tuple(ops), meta=forward.meta), params


def freeze_weights(backward: WorkloadGraph, forward: WorkloadGraph) -> WorkloadGraph:
    """`backward` without the weight gradients of `forward`'s frozen weight GEMMs (not the adapters) and
    without the embedding's gradient."""
    frozen = {f"{op.name}_wgrad" for op in forward.ops if _is_weight_gemm(op) and "/lora_" not in op.name}
    kept = tuple(
        op
        for op in backward.ops
        if op.name not in frozen and not (op.name.endswith("_bwd") and "/embed/" in op.name)
    )
    return WorkloadGraph(name=backward.name, ops=kept, meta=backward.meta)

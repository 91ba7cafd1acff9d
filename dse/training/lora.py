"""LoRA fine-tuning of an LLM rank's graphs: frozen weights, trained low-rank adapters (Hu et al. 2021).

Each dense projection of attention and MLP (qkv, o, gate/up, down: NeMo's default LoRA targets linear_qkv,
linear_proj, linear_fc1, linear_fc2; an MoE model's router and routed experts stay frozen without one) gets
an adapter `x A B` of rank r beside its frozen weight: two more
GEMMs forward, [t, k] x [k, r] and [t, r] x [r, n], each with its data and weight gradient backward. The
frozen weights keep their data gradients (the backward must reach the layers below) but lose their weight
gradients, the embedding its gradient scatter, and only the adapters have gradients and optimizer states.
"""

from __future__ import annotations

import dataclasses

from dse.workload.graph import WorkloadGraph
from dse.workload.ops import GemmOp, Op
from dse.workload.sharding import EXPERT_GEMMS

__all__ = ["freeze_weights", "with_adapters"]

_LAYER = "/layer["


def _is_weight_gemm(op: Op) -> bool:
    """A GEMM by a weight matrix (a projection, the LM head, routed experts), not of two activations."""
    return isinstance(op, GemmOp) and (op.b_shared or op.name.rsplit("/", 1)[-1] in EXPERT_GEMMS)


def with_adapters(forward: WorkloadGraph, rank: int) -> tuple[WorkloadGraph, float]:
    """`forward` with a rank-`rank` adapter after each dense layer projection (bf16 GEMMs, the adapters are
    not quantized), and the adapters' parameter count on this rank (with tp, Megatron's parallel adapters
    keep the unsplit side whole: the rank's k + n)."""
    ops: list[Op] = []
    params = 0.0
    for op in forward.ops:
        ops.append(op)
        if isinstance(op, GemmOp) and op.b_shared and _LAYER in op.name and not op.name.endswith("/router"):
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

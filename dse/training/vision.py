"""Training steps of vision models (`dse.workload.vision`): data parallel only (DDP or FSDP).

Activations kept for the backward: every forward op's output (conv, norm, activation, pool, GEMM and
attention outputs; batch norm's statistics pass has none), as eager PyTorch autograd keeps them, but for
in-place ops, which write into their input's storage (torchvision's and timm's `ReLU(inplace=True)`, whose
gradient needs only its output; MobileNet-V2's ReLU6 and EfficientNet's SiLU, whose autograd keeps a copy
of their input instead, an op of the graph: `INPUT_CLONE_SUFFIX`; and ResNet's residual `out += identity`),
cuDNN's NCHW layout transposes (temporaries freed after each convolution) and outputs read only by an op
that saves nothing (autocast's
cast of a ViT LayerNorm's fp32 output, whose cast copy the Linear keeps instead; a ViT projection's output
added to the residual stream; in eager attention the QKV projection and the context before their copies and
the scores before their scale and softmax); `full` recomputation keeps only
the graph's input plus the largest op output. Throughput is images per second.
`TrainingRequest.memory_format` picks NCHW (PyTorch's default: cuDNN's layout transposes around tensor-core
convolutions) or NHWC; `TrainingRequest.attention` a ViT's attention (flash or eager).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from dse.errors import ConfigError
from dse.hardware.spec import GpuSpec
from dse.perf.types import OperatingPoint
from dse.training.memory import RESERVED_BYTES, MemoryEstimate, model_state_bytes_per_param
from dse.training.step import StepParts, TrainingCoeffs, TrainingEstimate, TrainingRequest, estimate_step
from dse.workload.backward import (
    CONTIGUOUS_SUFFIX,
    LAYOUT_SUFFIX,
    build_backward_graph,
    build_recompute_graph,
)
from dse.workload.ops import AttentionOp, ElementwiseOp, GemmOp, NormOp, Op, SoftmaxOp
from dse.workload.vision import VisionModel, build_vision_graph, op_output_bytes

__all__ = ["VISION_TRAINING_COEFFS", "predict_vision_training"]

# Library kernels alone. The fitted ratios of `dse.training.step.default_training_coeffs` come from
# transformer LLM rows and absorb what those frameworks add around the modelled kernels (NCCL sharing SMs
# under FSDP, unfused transformer elementwise kernels; and each attention implementation's own speed); a
# vision graph lists every kernel eager PyTorch runs (convolution, batch norm, ReLU, add, cuDNN's NCHW
# transposes). With the LLM ratios the sets that isolate the kernels were 16-40% slow: timm RTX 3090
# (synthetic input) NCHW and NHWC, Zeus V100 fp32 ResNet-50, MLPerf H100 ResNet-50; with unit ratios they
# are -15..+8% (bias; -12..+11% before batch norm's second pass).
VISION_TRAINING_COEFFS = TrainingCoeffs()


# Families whose residual add writes in place: torchvision's ResNet `out += identity` and EfficientNet's
# MBConv `result += input`; MobileNet-V2 (`x + self.conv(x)`) and ViT (`x = x + input`) make new tensors.
IN_PLACE_RESIDUAL_FAMILIES = ("resnet", "efficientnet")


def _saves_no_input(op: Op | None) -> bool:
    """An op whose backward needs none of its inputs: a cast, a scale by a constant, a residual add, a
    contiguous copy, or a softmax (it saves its output)."""
    if isinstance(op, SoftmaxOp):
        return True
    return isinstance(op, ElementwiseOp) and (
        op.kind in ("cast", "scale")
        or op.name.endswith("/residual_add")
        or op.name.endswith(CONTIGUOUS_SUFFIX)
    )


def _kept(op: Op, consumer: Op | None, in_place_residual: bool) -> bool:
    """Whether autograd keeps a tensor of its own for `op`'s output, `consumer` the op after it in the graph
    (its only reader in the chains this rule covers: a ViT layer's; a branch such as ResNet's downsample
    goes to ops this rule leaves alone). See the module docstring."""
    needs_own_output = isinstance(op, SoftmaxOp | AttentionOp)  # softmax and SDPA save their outputs
    no_output_grad = isinstance(op, GemmOp | NormOp) or (
        isinstance(op, ElementwiseOp) and op.kind in ("cast", "scale", "copy")
    )
    if no_output_grad and not needs_own_output and _saves_no_input(consumer):
        return False  # read only by an op that saves none of its inputs: it dies with that op
    if isinstance(op, ElementwiseOp):
        in_place = op.kind in ("relu", "silu") or (in_place_residual and op.name.endswith("/residual_add"))
        return op.num_outputs > 0 and not (in_place or op.name.endswith(LAYOUT_SUFFIX))
    return True


def predict_vision_training(
    model: VisionModel,
    gpu: GpuSpec,
    req: TrainingRequest,
    point: OperatingPoint | None = None,
    coeffs: Any = None,
    power_coeffs: Any = None,
    train_coeffs: TrainingCoeffs | None = None,
) -> TrainingEstimate:
    """One data-parallel training step of a vision model (`dse.training.step`)."""
    lay = req.layout
    if lay.tp > 1 or lay.pp > 1 or lay.cp > 1 or lay.ep > 1:
        raise ConfigError("vision models train data parallel only (--tp 1 --pp 1 --cp 1 --ep 1)")
    forward, params = build_vision_graph(
        model, batch=req.micro_batch, image_size=req.image_size, precision=req.precision,
        memory_format=req.memory_format, training=True, attention=req.attention,
    )  # fmt: skip
    backward = build_backward_graph(forward, skip_first_dgrad=True)
    # `full` keeps only the input (and the largest output while recomputing, below): the backward re-runs
    # the whole forward, convolutions and stem included, not only the layers an LLM would checkpoint.
    recompute = build_recompute_graph(forward, "full" if req.recompute == "full" else "none", layer_marker="")
    in_place = model.family in IN_PLACE_RESIDUAL_FAMILIES
    ops = forward.ops
    kept = [op for op, consumer in zip(ops, (*ops[1:], None), strict=True) if _kept(op, consumer, in_place)]
    # `full`: the input and the largest single output (an op of a repeated layer counts once, not per layer)
    activations = (
        sum(op_output_bytes(op) * op.count for op in kept)
        if req.recompute != "full"
        else max(op_output_bytes(op) for op in kept) * 2
    )
    state = model_state_bytes_per_param(req.precision, req.optimizer)
    shard = lay.dp if lay.fsdp else 1
    memory = MemoryEstimate(
        weights_bytes=params * state["weights"] / shard, grads_bytes=params * state["grads"] / shard,
        optimizer_bytes=params * state["optimizer"] / lay.optimizer_shards, activations_bytes=activations,
        reserved_bytes=RESERVED_BYTES, capacity_bytes=gpu.memory.capacity_bytes,
    ).with_advice(req, model_parallel=False)  # fmt: skip
    flop = sum(op.flop * op.count for op in forward.ops if isinstance(op, GemmOp | AttentionOp))
    # FSDP's exposed gather per layer: layers counted as before batch norm had two passes (ops / 4)
    num_ops = sum(not (isinstance(op, ElementwiseOp) and op.kind == "bn_stats") for op in forward.ops)
    parts = StepParts(
        name=model.name, kind="vision", forward=forward, backward=backward, recompute=recompute,
        params_per_rank=float(params), num_layers_per_rank=max(1, num_ops // 4),
        activation_bytes=activations, model_flop_per_sample=3.0 * flop / req.micro_batch, tokens_per_sample=1,
        gemm_dtype=req.precision,
    )  # fmt: skip
    train_coeffs = train_coeffs or VISION_TRAINING_COEFFS
    return estimate_step(parts, gpu, replace(req), memory, point, coeffs, power_coeffs, train_coeffs)

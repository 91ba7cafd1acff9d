"""Training graphs: the forward pass of a training step, its backward graph and the recomputation ops.

    fwd = training_forward(build_prefill_graph(arch, batch=8, seq_len=2048))   # + loss, LM head on all tokens
    bwd = build_backward_graph(fwd)                                             # reversed, gradient ops

Rules, per forward op (DESIGN.md section 14):

- GEMM `C[m, n] = A[m, k] B[k, n]`: a data-gradient GEMM `dA = dC B^T` ([m, n] x [n, k]) and a
  weight-gradient GEMM `dB = A^T dC` ([k, m] x [m, n]), so backward GEMM FLOPs are twice the forward's.
  A batched GEMM of two activations (no `b_shared` weight) has the same two GEMMs, one per input.
- Attention: FlashAttention-2's backward runs five matmuls per tile against the forward's two (2.5x the
  FLOPs) at about 0.86 of the forward's throughput (Dao 2023, "FlashAttention-2", section 3.2 and the A100
  benchmark figures: ~73% of peak forward, ~63% backward), so its time is about 3x the forward's: the
  backward is the forward op repeated `ATTENTION_BWD_PASSES` times.
- Norms: the backward reads x and dy, writes dx and reduces the affine weight's gradient: twice the
  forward (its op repeated twice). Training batch norm's two passes (`bn_stats`, `bn_apply`) have a
  reduction over x and dy and a pass writing dx from them. Softmax backward streams y and dy into dx (a
  two-input elementwise op).
- Elementwise: activations read their input(s) and dy and write dx (`act_mul`-shaped ops; a gated
  activation writes two gradients); the residual add's gradient accumulation is one add; an embedding
  gather becomes a scatter-add of the same size; a cast casts the gradient back to its input's dtype
  (autocast's fp32 -> bf16 before a Linear: bf16 -> fp32) and scales mirror themselves; a strided view
  made contiguous (`CONTIGUOUS_SUFFIX` copies) copies its gradient back once.
- Layout transposes (`LAYOUT_SUFFIX` copies: cuDNN turning an NCHW tensor into NHWC for the tensor cores
  and back): the backward copies the forward's once. The data- and weight-gradient convolutions are
  separate cuDNN calls, but our H100 kernel profile (cuDNN 9.19, `dse/calibrate/measured/
  h100_sxm_training_kernels.csv`) times these kernels at 53 ms per step over its four NCHW training runs
  (ResNet-50 bf16: 248 calls, the filters' among them, 14.6 ms; fp16 13.0; TF32 17.4; ResNet-18 bf16 7.6),
  where copying twice gave 104 ms and once gives 69 (per run -53%, ResNet-18, whose 3x3 convolutions are
  transposed more often, to +86%, TF32, whose fp32 tensors less often: cuDNN does not transpose every
  convolution alike); on timm's RTX 3090 NCHW rows (cuDNN 8) once takes the throughput error from 11.5%
  to 6.2%, though there ResNet-50's NHWC/NCHW gap (1.47 measured) is then under-predicted (1.29).
- Loss: the forward ends with the fp32 cross-entropy softmax over the logits, the backward starts with its
  gradient (softmax minus one-hot) written in the activation dtype.

The forward of a training step is a prefill without KV-cache writes whose LM head runs on every token.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping

from dse.workload.graph import WorkloadGraph
from dse.workload.ops import (
    BYTES_PER_ELEMENT,
    AttentionOp,
    ElementwiseOp,
    GemmOp,
    NormOp,
    Op,
    SoftmaxOp,
)

__all__ = [
    "ATTENTION_BWD_PASSES",
    "CONTIGUOUS_SUFFIX",
    "INPUT_CLONE_SUFFIX",
    "LAYOUT_SUFFIX",
    "build_backward_graph",
    "build_recompute_graph",
    "op_checkpoint_gemms",
    "training_forward",
]

ATTENTION_BWD_PASSES = 3
LAYOUT_SUFFIX = "/nchw_nhwc_transpose"
# Autograd's copy of an in-place op's input that its gradient reads (`dse.workload.vision`: in-place SiLU
# and ReLU6): saved for the backward, with no gradient of its own.
INPUT_CLONE_SUFFIX = "/input_clone"
# A strided view made contiguous (`.contiguous()`, `reshape` of a transposed tensor): its gradient is the
# same copy the other way.
CONTIGUOUS_SUFFIX = "/contiguous"

# A vision graph's global average pools (`dse.workload.vision`: an SE block's squeeze, MobileNet's and
# EfficientNet's head) and an SE block's channel scale `x * gate` (`_pool_scale_grads`)
GLOBAL_POOL_SUFFIXES = ("/se/pool", "/avgpool")
SE_SCALE_SUFFIX = "/se/scale"

_ACT_GRAD_KIND = {
    "gelu": "gelu_mul",
    "silu": "silu_mul",
    "relu": "mul",
    "tanh": "mul",
    "exp": "mul",
    "silu_mul": "silu_mul",
    "gelu_mul": "gelu_mul",
}


def _tokens(graph: WorkloadGraph) -> int:
    return int(str(graph.meta.get("num_tokens", 0)) or 0)


def training_forward(prefill: WorkloadGraph) -> WorkloadGraph:
    """The forward of a training step from a decoder or encoder prefill graph (`build_prefill_graph`).

    KV-cache writes are dropped (training keeps no cache), the LM head runs on all `batch * seq_len`
    tokens (the loss needs every position's logits), and the fp32 cross-entropy softmax is appended.
    """
    tokens = _tokens(prefill)
    ops: list[Op] = []
    vocab = 0
    for op in prefill.ops:
        if isinstance(op, ElementwiseOp) and op.name.endswith("/kv_cache_write"):
            continue
        if isinstance(op, GemmOp) and op.name.endswith("/lm_head"):
            op = dataclasses.replace(op, m=tokens)
            vocab = op.n
        ops.append(op)
    if vocab:
        root = prefill.name.rsplit("/", 1)[0]
        # torch cross_entropy under autocast runs in fp32 over [tokens, vocab]
        ops.append(SoftmaxOp(name=f"{root}/loss/cross_entropy", rows=tokens, cols=vocab, dtype="fp32"))
    name = prefill.name.rsplit("/", 1)[0] + "/forward"
    return WorkloadGraph(name=name, ops=tuple(ops), meta={**prefill.meta, "phase": "train_forward"})


def _gemm_grads(op: GemmOp) -> list[Op]:
    # dA = dC B^T ([m, n] x [n, k]); dB = A^T dC ([k, m] x [m, n]): the weight gradient reduces over m
    dgrad = dataclasses.replace(op, name=f"{op.name}_dgrad", n=op.k, k=op.n, act_quant=False)
    wgrad = dataclasses.replace(op, name=f"{op.name}_wgrad", m=op.k, k=op.m, b_shared=False, act_quant=False)
    return [dgrad, wgrad]


def _depthwise_grads(op: ElementwiseOp) -> list[Op]:
    """Data gradient (the filter transposed: reads dy, writes dx, the forward's traffic) and weight
    gradient (reads x and dy) of a depthwise convolution (`dse.workload.vision`: `num_elements` is
    (I + O) / 2), priced by `dse.perf.depthwise`, by the library that runs it (its kind).

    cuDNN's kernels read x and dy once for the weight gradient. PyTorch's own (`_aten` kinds)
    `conv_depthwise2d_grad_weight_kernel` (aten/src/ATen/native/cuda/DepthwiseConv2d.cu) gives each
    thread block one (channel, kh, kw) weight and reduces it over the whole N x H x W plane ("Each Block
    is responsible for accumulating over a permutation of (channels x kH x kW)"), so x and dy stream
    R x S times; nothing in the plane is reused across blocks (a channel's plane, batch x H x W, is
    megabytes). Priced as a copy of R S (I + O) / 2 elements (its DRAM traffic; the 2 R S O FLOP are
    negligible).
    """
    dgrad = dataclasses.replace(op, name=f"{op.name}_dgrad", kind=f"{op.kind}_dgrad")
    if not op.kind.endswith("_aten"):
        return [dgrad, dataclasses.replace(op, name=f"{op.name}_wgrad", kind=f"{op.kind}_wgrad")]
    taps = int(op.kind.removeprefix("depthwise").split("x")[0]) ** 2
    wgrad = dataclasses.replace(op, name=f"{op.name}_wgrad", kind="copy", num_elements=taps * op.num_elements)
    return [dgrad, wgrad]


def _pool_scale_grads(op: ElementwiseOp) -> list[Op]:
    """Gradients of a global average pool and of an SE block's channel scale, as autograd runs them (the
    kernels of our H100 EfficientNet-B0 profile, `dse/calibrate/measured`): the pool's (`mean`'s)
    backward writes dy / (H W) expanded over the whole input (a scalar multiply), which an SE block then
    adds to its scale's input gradient (x feeds both); the scale's backward writes dx = dy * gate and
    reduces dgate = sum over H W of dy * x (a multiply, then a sum). Before, each was one gradient add:
    6 passes over the block's tensor where autograd makes 12."""
    name, n = f"{op.name}_bwd", op.num_elements

    def ew(suffix: str, kind: str) -> ElementwiseOp:
        return ElementwiseOp(
            name=f"{name}{suffix}", kind=kind, num_elements=n, dtype=op.dtype, count=op.count
        )

    if op.kind == "mul":
        return [ew("", "mul"), ew("_gate", "mul"), ew("_gate_sum", "reduce")]
    return [ew("", "scale"), *([ew("_accumulate", "add")] if op.name.endswith("/se/pool") else [])]


def _elementwise_grad(op: ElementwiseOp) -> list[Op]:
    name, n = f"{op.name}_bwd", op.num_elements
    kind = op.kind
    if op.name.endswith(INPUT_CLONE_SUFFIX):
        return []
    if op.name.endswith(LAYOUT_SUFFIX):
        return [dataclasses.replace(op, name=name)]
    if op.name.endswith(CONTIGUOUS_SUFFIX):
        return [dataclasses.replace(op, name=name)]
    if kind == "cast" and op.out_dtype and BYTES_PER_ELEMENT[op.out_dtype] >= 2:
        # autocast's casts: the gradient is cast back to the input's dtype (an 8-bit quantization keeps the
        # mirrored pass below)
        return [dataclasses.replace(op, name=name, dtype=op.out_dtype, out_dtype=op.dtype)]
    if (kind == "reduce" and op.name.endswith(GLOBAL_POOL_SUFFIXES)) or (
        kind == "mul" and op.name.endswith(SE_SCALE_SUFFIX)
    ):
        return _pool_scale_grads(op)
    if kind == "bn_stats":
        return []  # its gradient is part of the normalize pass's pair below
    if kind == "bn_apply":
        # Training batch norm (`dse.workload.vision`): PyTorch's backward reduces over x and dy first,
        # then writes dx from them.
        # (same elements, dtype, count and ATen launch fields as the forward pass)
        reduce = dataclasses.replace(op, name=f"{name}_reduce", kind="bn_bwd_reduce", out_dtype=None)
        return [reduce, dataclasses.replace(op, name=name, kind="bn_bwd_apply", out_dtype=None)]
    if kind in _ACT_GRAD_KIND:
        # gated activations write d(gate) and d(up): twice the elements
        n = n * 2 if kind.endswith("_mul") else n
        kind = _ACT_GRAD_KIND[kind]
    elif kind == "copy":
        kind = "add"  # gather -> scatter-add into the table's gradient
    elif kind in ("add", "mul"):
        kind = "add"  # gradient accumulation of the branch
    elif kind.startswith("depthwise"):
        return _depthwise_grads(op)
    return [ElementwiseOp(name=name, kind=kind, num_elements=n, dtype=op.dtype, count=op.count)]


def backward_ops(op: Op) -> list[Op]:
    """The gradient ops of one forward op (module docstring), in execution order."""
    if isinstance(op, GemmOp):
        return _gemm_grads(op)
    if isinstance(op, AttentionOp):
        return [dataclasses.replace(op, name=f"{op.name}_bwd", count=op.count * ATTENTION_BWD_PASSES)]
    if isinstance(op, NormOp):
        return [dataclasses.replace(op, name=f"{op.name}_bwd", count=op.count * 2)]
    if isinstance(op, SoftmaxOp):
        dtype = "bf16" if op.dtype == "fp32" and op.name.endswith("/cross_entropy") else op.dtype
        grad = ElementwiseOp(
            name=f"{op.name}_bwd", kind="mul", num_elements=op.rows * op.cols, dtype=op.dtype, count=op.count
        )
        return [dataclasses.replace(grad, out_dtype=dtype)]
    return _elementwise_grad(op)


def build_backward_graph(forward: WorkloadGraph, *, skip_first_dgrad: bool = False) -> WorkloadGraph:
    """The backward pass of `forward`: every op's gradient ops, in reverse order.

    Args:
        forward: a training forward (`training_forward`) or any forward graph.
        skip_first_dgrad: drop the data gradient of the first GEMM (its input needs none: a vision model's
            stem convolution on the images).
    """
    ops: list[Op] = []
    first_gemm = next((op for op in forward.ops if isinstance(op, GemmOp)), None)
    for op in reversed(forward.ops):
        grads = backward_ops(op)
        if skip_first_dgrad and op is first_gemm:
            grads = [g for g in grads if not g.name.endswith("_dgrad")]
        ops += grads
    name = forward.name.rsplit("/", 1)[0] + "/backward"
    return WorkloadGraph(name=name, ops=tuple(ops), meta={**forward.meta, "phase": "train_backward"})


def build_recompute_graph(
    forward: WorkloadGraph,
    mode: str,
    layer_marker: str = "/layer[",
    mm_splits: Mapping[str, tuple[int, ...]] | None = None,
) -> WorkloadGraph:
    """The forward ops the backward re-runs: `full` every layer op (Megatron full recomputation: only each
    layer's input is kept), `selective` the attention cores (Korthikanti et al. 2022), `op` the GEMMs that
    torchtitan's per-op checkpointing re-runs (`op_checkpoint_gemms`), `none` nothing.
    Layer ops are those whose names hold `layer_marker` ("": every op, a whole-graph checkpoint)."""
    ops: tuple[Op, ...] = ()
    if mode == "full":
        ops = tuple(op for op in forward.ops if layer_marker in op.name)
    elif mode == "selective":
        ops = tuple(
            op for op in forward.ops if isinstance(op, AttentionOp | SoftmaxOp) and layer_marker in op.name
        )
    elif mode == "op":
        ops = op_checkpoint_gemms(forward, layer_marker, mm_splits or {})
    name = forward.name.rsplit("/", 1)[0] + "/recompute"
    return WorkloadGraph(name=name, ops=ops, meta={**forward.meta, "phase": "train_recompute"})


def op_checkpoint_gemms(
    forward: WorkloadGraph, layer_marker: str, mm_splits: Mapping[str, tuple[int, ...]]
) -> tuple[Op, ...]:
    """The GEMMs torchtitan's per-op selective checkpointing re-runs (`selective_ac_option = "op"`, the
    default of its Llama configs): its policy saves the outputs of matrix multiplies, attention and
    reduce-scatters, "except every second mm" of a block, counted in call order per layer; the grouped
    expert GEMMs (`torch._grouped_mm`, not on its save list) are re-run too. A fused GEMM of the graph is
    the separate mm's the model calls (`mm_splits`: leaf name -> column shares, e.g. q, k, v), so a Llama
    layer re-runs wk, wo and w3. The elementwise ops it also re-runs are not priced: under torch.compile
    they fuse into the backward's kernels (and `dse.training.eager` says why eager steps leave them out)."""
    ops: list[Op] = []
    layer, count = "", 0
    for op in forward.ops:
        if layer_marker not in op.name or not isinstance(op, GemmOp):
            continue
        group = op.name.split(layer_marker, 1)[1].split("]", 1)[0]
        if group != layer:  # a new layer (a graph groups identical layers into one op with a count)
            layer, count = group, 0
        if op.grouped:
            ops.append(op)
            continue
        parts = mm_splits.get(op.name.rsplit("/", 1)[-1], (1,))
        for i, part in enumerate(parts):
            count += 1
            if count % 2 == 0:
                share = math.ceil(op.n * part / sum(parts))
                ops.append(
                    op if len(parts) == 1 else dataclasses.replace(op, name=f"{op.name}/mm{i}", n=share)
                )
    return tuple(ops)

"""Mixed precision by `torch.autocast` over fp32 weights (`TrainingRequest.autocast`): an LLM step as a plain
PyTorch loop or Hugging Face's Trainer runs bf16 / fp16 (PyTorch's automatic mixed precision recipe).

    forward = autocast_graph(training_forward_graph)     # before the backward is built from it

The parameters stay fp32; autocast casts at each op by its lists (torch.amp documentation):

- Weights: each Linear casts its fp32 weight to half precision once per forward (autocast caches the copy
  inside its region, and autograd keeps it for the data gradient): a cast of the weight's elements before
  every weight GEMM. Its gradient, the backward's mirrored cast (`dse.workload.backward`), writes the fp32
  `.grad`: the gradients are fp32.
- An fp32 residual stream: the embedding tables are fp32 and `embedding` is on no autocast list, so the
  embeddings, their add and every residual add (a half-precision branch into the fp32 stream) run in fp32;
  `layer_norm` is on the fp32 list, so each norm reads and writes fp32 and the Linear after it casts its
  output (a cast after each norm).
- The loss: `cross_entropy` is on the fp32 list (Hugging Face also calls `logits.float()`): the logits
  are cast to fp32 before the log-softmax.

Memory (`autocast_memory`; fitted on nothing, checked against the peaks of our H100 runs of Hugging Face
GPT-2 modules, `dse validate training`, group `own-h100/hf-eager-llm-train`):

- Model states: fp32 weights (4 B per parameter) and the half copies of the GEMM weights (2 B each, the
  forward's casts), fp32 gradients (4 B) and the optimizer's moments. `zero_grad(set_to_none=True)`
  (PyTorch's default) frees the gradients after each step, and the backward allocates a layer's weight
  gradients as it frees that layer's activations, so a step of one micro-batch peaks at the start of
  the backward (every activation, no gradient yet) or in the optimizer step (the gradients and, for
  `adamw-foreach`, one fp32 temporary per parameter: `torch._foreach_sqrt` of the second moments). The
  gradients count for what the optimizer step's peak exceeds the backward's; with gradient accumulation
  (several micro-batches) they stay through the next forward and count whole.
- Activations: each norm keeps its fp32 input (4 B per element where a half-precision stream keeps 2),
  `autocast_activation_bytes_per_layer`.
- The loss: PyTorch's `cross_entropy` is a log-softmax and an `nll_loss`; at its backward the fp32
  log-probabilities, the dense fp32 gradient `nll_loss` writes and the log-softmax's fp32 gradient are
  alive at once: 12 B per logit (the half-precision logits are freed by then; the fused cross-entropy of
  the training stacks keeps the half logits and one fp32 copy, 6 B).

Not modelled (our H100 profile, MPT-1B width: ~3% of the kernel time and ~8% of the activations): Hugging
Face GPT-2's dropout (its config's 0.1 defaults: a mask per residual branch), its key/value cache (on by
default, concatenated even in training) and the copy of the attention output back to tokens.
"""

from __future__ import annotations

import dataclasses

from dse.training.memory import MemoryEstimate
from dse.workload.graph import WorkloadGraph
from dse.workload.ops import BYTES_PER_ELEMENT, Dtype, ElementwiseOp, GemmOp, NormOp, Op, SoftmaxOp

__all__ = [
    "LOSS_BYTES_PER_LOGIT",
    "autocast_activation_bytes_per_layer",
    "autocast_graph",
    "autocast_memory",
    "half_weight_elements",
]

LOSS_BYTES_PER_LOGIT = 12.0  # module docstring
_FP32_STREAM = ("/embed/tokens", "/embed/positions", "/embed/add", "/residual_add")
# per parameter at the optimizer step beyond the gradients: torch's foreach AdamW's sqrt of the moments
_OPTIMIZER_TEMP_BYTES = {"adamw-foreach": 4.0}
WEIGHT_CAST_SUFFIX = "/weight_cast"


def _cast(name: str, elements: int, src: Dtype, dst: Dtype, count: int) -> ElementwiseOp:
    return ElementwiseOp(name=name, kind="cast", num_elements=elements, dtype=src, out_dtype=dst, count=count)


def _rewrite(op: Op, act: Dtype) -> list[Op]:
    if isinstance(op, NormOp):
        cast = _cast(f"{op.name}/autocast_cast", op.rows * op.cols, "fp32", act, op.count)
        return [dataclasses.replace(op, dtype="fp32"), cast]
    if isinstance(op, ElementwiseOp) and op.name.endswith(_FP32_STREAM):
        return [dataclasses.replace(op, dtype="fp32")]
    if isinstance(op, GemmOp) and op.b_shared and not op.grouped:
        weight = _cast(op.name + WEIGHT_CAST_SUFFIX, op.batch * op.k * op.n, "fp32", op.dtype, op.count)
        return [weight, op]
    if isinstance(op, SoftmaxOp) and op.name.endswith("/cross_entropy") and act != "fp32":
        return [_cast(f"{op.name}/autocast_cast", op.rows * op.cols, act, "fp32", op.count), op]
    return [op]


def autocast_graph(forward: WorkloadGraph, act: Dtype) -> WorkloadGraph:
    """A training forward (half-precision activations `act`) as autocast over fp32 weights runs it
    (module docstring): fp32 embeddings, norms and residual adds, a cast after each norm, a weight cast
    before each weight GEMM and the logits cast for the loss."""
    ops = tuple(new for op in forward.ops for new in _rewrite(op, act))
    return dataclasses.replace(forward, ops=ops)


def half_weight_elements(forward: WorkloadGraph) -> float:
    """Elements of the half-precision weight copies an autocast forward casts (`autocast_graph`)."""
    return float(
        sum(
            op.num_elements * op.count
            for op in forward.ops
            if isinstance(op, ElementwiseOp) and op.name.endswith(WEIGHT_CAST_SUFFIX)
        )
    )


def autocast_activation_bytes_per_layer(forward: WorkloadGraph, num_layers: int, act: Dtype) -> float:
    """Bytes a layer's fp32 norms keep beyond a half-precision stream's: each norm's fp32 input."""
    extra = 4.0 - BYTES_PER_ELEMENT[act]
    total = sum(
        op.rows * op.cols * extra * op.count
        for op in forward.ops
        if isinstance(op, NormOp) and "/layer[" in op.name
    )
    return total / max(num_layers, 1)


def autocast_memory(
    memory: MemoryEstimate, *, params: float, half_weights: float, act: Dtype, logits: float, optimizer: str,
    microbatches: int,
) -> MemoryEstimate:  # fmt: skip
    """`memory` (the fused stacks' accounting of `dse.training.llm`) with autocast's model states and loss
    (module docstring): `params` fp32 parameters, `half_weights` elements of half copies, `logits` the
    loss's [tokens, vocab] elements."""
    act_b = BYTES_PER_ELEMENT[act]
    half = half_weights * act_b
    activations = memory.activations_bytes + logits * (LOSS_BYTES_PER_LOGIT - (act_b + 4.0))
    grads = params * 4.0
    if microbatches == 1:  # freed after each step, allocated as the backward frees the activations
        grads = max(0.0, grads + params * _OPTIMIZER_TEMP_BYTES.get(optimizer, 0.0) - activations - half)
    return dataclasses.replace(
        memory,
        weights_bytes=params * 4.0 + half,
        grads_bytes=grads,
        optimizer_bytes=memory.optimizer_bytes - params * 4.0,  # the master copy is the weights
        activations_bytes=activations,
    )

"""Eager PyTorch's elementwise kernels in an LLM training step (`TrainingRequest.eager_ops`, `--eager-ops`).

    graph = eager_graph(forward)      # the fused RMSNorm, rotary and SwiGLU ops as eager PyTorch runs them

The training graphs (`dse.training.llm`) run each normalization, rotary embedding and gated activation
as one fused kernel: what Megatron / Transformer Engine, llm-foundry's and torchtitan's `torch.compile`
runs give. Plain eager PyTorch (no `torch.compile`: torchtitan without `--compile`, Hugging Face models,
Meta's reference code) runs them as the ATen ops they are written in, each a kernel reading and writing
whole tensors, several of them in fp32. This rewrite replaces every such fused op (forward, backward and
recomputed) by those kernels; N = the op's elements, R = its rows, a = the activation dtype:

- RMSNorm, `x.float()`, `pow(2).mean(-1)`, `+ eps`, `rsqrt`, `x * rstd`, `.type_as(x)`, `* weight`
  (HF `LlamaRMSNorm`; Meta's and torchtitan's `RMSNorm._norm`; ATen's composite `rms_norm` of PyTorch
  2.4-2.7 upcasts the same way): forward cast a->fp32 (N), square (N, fp32), mean (a reduction over N),
  eps and rsqrt (R each), scale by rstd (N, fp32), cast fp32->a (N), scale by the weight (N, a): 36
  bytes per element in bf16 against the fused kernel's 4. Autograd's backward runs each op's gradient:
  dy * weight and the weight's gradient (a product and a reduction over rows, a), the cast back to fp32,
  g * rstd and the rstd gradient (a product and a reduction, fp32), the rsqrt and eps gradients (R), the
  mean's gradient broadcast (N, fp32), the square's gradient 2 x g (N, two inputs, fp32), the sum of the
  two paths into x (N, fp32) and the cast to a.
- Rotary embedding (Meta's reference `apply_rotary_emb`, torchtitan: a complex product): cast a->fp32,
  the product with the (broadcast) frequencies in fp32, cast back: 20 bytes per element in bf16, the same
  as Hugging Face's `rotate_half` form in a (q cos, the negated half, the concatenation, x sin, the sum).
  Backward the same three with the conjugate frequencies.
- SwiGLU, `silu(gate) * up`: forward `silu` and the product (two kernels); backward dy x up, dy x
  silu(gate) and `silu_backward` (three).

- GELU as Hugging Face's GPT-2 writes it (`gelu_new`, `NewGELUActivation`: `0.5 * x * (1 + tanh(sqrt(2 /
  pi) * (x + 0.044715 * pow(x, 3))))`, GPT-2's `activation_function`): eight kernels forward (pow, two
  constant products, the add of x, tanh, the add of one, 0.5 x and the product), eleven backward (each
  op's gradient, pow's as `3 * x.pow(2)` times the gradient, the three paths into x summed): 36 bytes
  per element forward in bf16 against the fused kernel's 4. Under `torch.autocast`
  (`TrainingRequest.autocast`) `pow` is on autocast's fp32 list: x is cast to fp32 first and the chain
  runs in fp32 to the product, which the next Linear casts back (`dse.training.autocast`). Our H100
  profile of Hugging Face GPT-2 modules (`dse/calibrate/measured/h100_sxm_training_kernels.csv`) shows
  these fp32 kernels (MPT-1B width: ~90 of its 307 ms of kernels).

LayerNorm and `nn.GELU` (the other GELU models) are single ATen kernels in eager mode too and stay as they
are; the cross-entropy is the same fp32 softmax pass. Activations the eager ops save for the backward
(`eager_activation_bytes_per_layer`, read off the eager forward graph: every RMSNorm of a layer, q/k and
sandwich norms included, and every SwiGLU, dense or expert): each norm's fp32 upcast (4 bytes per element; its
normalized output in a takes the place of the input a fused norm keeps; where x is fp32 already, in fp32
training or autocast's fp32 stream, no upcast runs and `* weight` keeps the fp32 x * rstd instead), each
silu(gate) (the gate's elements in a) and the GELU formula's tanh, 1 + tanh and 0.5 x (its pow keeps x, or
under autocast x's fp32 copy in x's place), without recomputation; a fused kernel recomputes them. `full`
recomputation re-runs each layer's forward, eager kernels included. With `selective` or `op` they are taken as
re-run for memory but free in time: the eager stack with `op` is torchtitan's per-op checkpointing, which
re-runs elementwise ops (and every second matmul, priced: `dse.workload.backward.op_checkpoint_gemms`), and
its Llama-3.1-8B tables show both sides: its eager step peaks 5.4 GiB above the compiled one (82.4 / 77.0 GiB;
keeping these would add ~30 GiB), and the compile gain is 1.157 where pricing the eager kernels once gives
1.146 and pricing their re-run too 1.22. The elementwise re-runs of per-op checkpointing are not priced.
"""

from __future__ import annotations

import dataclasses

from dse.workload.graph import WorkloadGraph
from dse.workload.ops import BYTES_PER_ELEMENT, Dtype, ElementwiseOp, NormOp, Op

__all__ = ["eager_activation_bytes_per_layer", "eager_graph", "eager_ops"]

# (suffix, kind, elements: "n" (N) or "r" (rows), dtype: "a" (activation), "fp32" or "c" (the GELU chain's:
# fp32 under autocast, else a), out dtype or None)
_Step = tuple[str, str, str, str, str | None]
_RMSNORM_FWD: tuple[_Step, ...] = (
    ("upcast", "cast", "n", "a", "fp32"),
    ("square", "scale", "n", "fp32", None),
    ("mean", "reduce", "n", "fp32", None),
    ("add_eps", "scale", "r", "fp32", None),
    ("rsqrt", "scale", "r", "fp32", None),
    ("mul_rstd", "scale", "n", "fp32", None),
    ("downcast", "cast", "n", "fp32", "a"),
    ("mul_weight", "scale", "n", "a", None),
)
_RMSNORM_BWD: tuple[_Step, ...] = (
    ("mul_weight_dx", "scale", "n", "a", None),
    ("mul_weight_dw", "mul", "n", "a", None),
    ("mul_weight_dw_sum", "reduce", "n", "a", None),
    ("downcast_grad", "cast", "n", "a", "fp32"),
    ("mul_rstd_dx", "scale", "n", "fp32", None),
    ("mul_rstd_drstd", "mul", "n", "fp32", None),
    ("mul_rstd_drstd_sum", "reduce", "n", "fp32", None),
    ("rsqrt_grad", "scale", "r", "fp32", None),
    ("add_eps_grad", "scale", "r", "fp32", None),
    ("mean_grad", "scale", "n", "fp32", None),
    ("square_grad", "mul", "n", "fp32", None),
    ("sum_paths", "add", "n", "fp32", None),
    ("upcast_grad", "cast", "n", "fp32", "a"),
)
_ROTARY: tuple[_Step, ...] = (
    ("upcast", "cast", "n", "a", "fp32"),
    ("complex_mul", "scale", "n", "fp32", None),
    ("downcast", "cast", "n", "fp32", "a"),
)
_SWIGLU_FWD: tuple[_Step, ...] = (("silu", "silu", "n", "a", None), ("mul", "mul", "n", "a", None))
_SWIGLU_BWD: tuple[_Step, ...] = (
    ("mul_dsilu", "mul", "n", "a", None),
    ("mul_dup", "mul", "n", "a", None),
    ("silu_backward", "silu_mul", "n", "a", None),
)
# Hugging Face's `gelu_new` (module docstring); its `gelu_` suffixes name what the backward keeps
_GELU_TANH_FWD: tuple[_Step, ...] = (
    ("gelu_upcast", "cast", "n", "a", "c"),
    ("gelu_pow", "scale", "n", "c", None),
    ("gelu_mul_coef", "scale", "n", "c", None),
    ("gelu_add_x", "add", "n", "c", None),
    ("gelu_mul_sqrt", "scale", "n", "c", None),
    ("gelu_tanh", "tanh", "n", "c", None),
    ("gelu_add_one", "scale", "n", "c", None),
    ("gelu_half_x", "scale", "n", "a", None),
    ("gelu_mul", "mul", "n", "c", None),
    ("gelu_downcast", "cast", "n", "c", "a"),
)
_GELU_TANH_BWD: tuple[_Step, ...] = (
    ("gelu_downcast_grad", "cast", "n", "a", "c"),
    ("gelu_mul_dhalf", "mul", "n", "c", None),
    ("gelu_mul_dtanh", "mul", "n", "c", None),
    ("gelu_half_x_grad", "scale", "n", "a", None),
    ("gelu_tanh_grad", "mul", "n", "c", None),
    ("gelu_mul_sqrt_grad", "scale", "n", "c", None),
    ("gelu_mul_coef_grad", "scale", "n", "c", None),
    ("gelu_pow_grad_square", "scale", "n", "c", None),
    ("gelu_pow_grad_times3", "scale", "n", "c", None),
    ("gelu_pow_grad_mul", "mul", "n", "c", None),
    ("gelu_upcast_grad", "cast", "n", "c", "a"),
    ("gelu_sum_paths", "add", "n", "a", None),
    ("gelu_sum_paths2", "add", "n", "a", None),
)
# what the formula keeps for its backward beyond the fused GELU's input: the tanh, 1 + tanh and 0.5 x
# outputs (the fp32 upcast, kept in x's place, is counted apart)
_GELU_KEPT = ("/eager_gelu_tanh", "/eager_gelu_add_one", "/eager_gelu_half_x")
BWD_SUFFIX = "_bwd"


def _expand(
    op: Op, steps: tuple[_Step, ...], elements: int, rows: int, count: int, chain: Dtype | None = None
) -> list[Op]:
    act: Dtype = op.dtype
    out: list[Op] = []
    dtypes: dict[str, Dtype] = {"a": act, "fp32": "fp32", "c": chain or act}
    for suffix, kind, size, dtype, out_dtype in steps:
        if kind == "cast" and out_dtype is not None and dtypes[dtype] == dtypes[out_dtype]:
            continue  # `.float()` and `.type_as()` of a tensor already in that dtype return it: no kernel
        out.append(
            ElementwiseOp(
                name=f"{op.name}/eager_{suffix}", kind=kind, num_elements=elements if size == "n" else rows,
                dtype=dtypes[dtype], out_dtype=None if out_dtype is None else dtypes[out_dtype], count=count,
            )
        )  # fmt: skip
    return out


def eager_ops(op: Op, *, gelu_formula: bool = False, autocast: bool = False) -> list[Op]:
    """The eager kernels of one op of a training graph (module docstring), or [op] when it has none.
    `gelu_formula`: a GELU is Hugging Face's `gelu_new` (GPT-2), in fp32 under `autocast`.

    Backward ops are told by their `_bwd` name: a norm's gradient op is the forward op repeated twice
    (`dse.workload.backward`), SwiGLU's covers both gradients (2N elements)."""
    backward = op.name.endswith(BWD_SUFFIX)
    # a plain GELU's gradient op is `gelu_mul` over its N elements (a gated one's forward is `gelu_mul`)
    if gelu_formula and isinstance(op, ElementwiseOp) and op.kind == ("gelu_mul" if backward else "gelu"):
        chain: Dtype = "fp32" if autocast else op.dtype
        steps = _GELU_TANH_BWD if backward else _GELU_TANH_FWD
        return _expand(op, steps, op.num_elements, 1, op.count, chain)
    if isinstance(op, NormOp) and op.kind == "rmsnorm":
        n = op.rows * op.cols
        if backward:
            return _expand(op, _RMSNORM_BWD, n, op.rows, max(1, op.count // 2))
        return _expand(op, _RMSNORM_FWD, n, op.rows, op.count)
    if isinstance(op, ElementwiseOp) and op.kind == "rotary":
        return _expand(op, _ROTARY, op.num_elements, 1, op.count)
    if isinstance(op, ElementwiseOp) and op.kind == "silu_mul":
        if backward:
            return _expand(op, _SWIGLU_BWD, max(1, op.num_elements // 2), 1, op.count)
        return _expand(op, _SWIGLU_FWD, op.num_elements, 1, op.count)
    return [op]


def eager_graph(graph: WorkloadGraph, *, gelu_formula: bool = False, autocast: bool = False) -> WorkloadGraph:
    """`graph` with every fused RMSNorm, rotary and SwiGLU op (and GELU, `gelu_formula`) replaced by its
    eager kernels (`eager_ops`)."""
    ops = tuple(
        new for op in graph.ops for new in eager_ops(op, gelu_formula=gelu_formula, autocast=autocast)
    )
    return dataclasses.replace(graph, ops=ops)


def eager_activation_bytes_per_layer(forward: WorkloadGraph, num_layers: int) -> float:
    """Bytes one layer's eager kernels keep for the backward beyond the fused kernels' (module docstring),
    read off the eager forward graph (every RMSNorm of a layer: the block norms, q/k norms, Gemma's
    sandwich norms; SwiGLU of dense and expert MLPs): each norm's fp32 tensor and each silu(gate)."""
    total = 0.0
    for op in forward.ops:
        if not isinstance(op, ElementwiseOp) or "/layer[" not in op.name:
            continue
        if op.name.endswith("/eager_mul_rstd"):  # one fp32 tensor per RMSNorm (module docstring)
            total += op.num_elements * 4.0 * op.count
        elif op.name.endswith("/eager_silu"):
            total += op.num_elements * BYTES_PER_ELEMENT[op.dtype] * op.count  # silu(gate), for the product
        elif op.name.endswith("/eager_gelu_upcast"):  # pow keeps x's fp32 copy in x's place
            total += op.num_elements * (4.0 - BYTES_PER_ELEMENT[op.dtype]) * op.count
        elif op.name.endswith(_GELU_KEPT):
            total += op.num_elements * BYTES_PER_ELEMENT[op.dtype] * op.count
    return total / max(num_layers, 1)

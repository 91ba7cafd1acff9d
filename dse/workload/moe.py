"""Mixture-of-experts MLP layers as ops: router, top-k, grouped expert GEMMs, shared experts, combine.

    distinct_experts(num_experts=128, k=8, num_tokens=4)     # 29.1 experts touched by 4 tokens
    expert_gemm_shape(num_experts=128, k=8, num_tokens=4)    # (29, 2): 29 expert GEMMs of 2 rows each

One MoE layer, for `t` tokens, `E` experts, top-`k`, expert width `f` (the kernels of vLLM's fused-MoE
path, which SGLang and TensorRT-LLM follow in kind):

    mlp/router            [t, d] x [d, E] in the activation dtype (checkpoints keep the router unquantized)
    mlp/topk              softmax (or sigmoid) and top-k over E logits per token, one fused kernel
    mlp/shared_*          the shared experts (DeepSeek, Llama-4): one dense gated MLP of their summed width
    mlp/experts_align     sorting the t*k (token, expert) pairs by expert (`moe_align_block_size`)
    mlp/experts_gate_up   grouped GEMM: n_e experts x [m_e, d] x [d, 2f], each expert its own weights
    mlp/experts_act       act(gate) * up over the t*k rows
    mlp/experts_down      grouped GEMM: n_e experts x [m_e, f] x [f, d]
    mlp/experts_combine   the router-weighted sum of each token's k expert outputs (k > 1)
    mlp/shared_add        routed + shared output (when there are shared experts)

Grouped GEMMs are one `GemmOp` with `batch` = n_e experts that receive tokens and `b_shared=False`, so
the estimator reads every touched expert's weights once and runs n_e GEMMs of m_e rows:

- n_e = E (1 - (1 - k/E)^t), the expected number of distinct experts that t tokens choosing k of E
  uniformly touch (DESIGN section 13): k for one token, E for many. A decode step thus reads the
  weights of n_e experts, not all E.
- m_e = ceil(imbalance x t k / n_e), at most t: the t k token copies spread over the touched experts.
  With `imbalance` 1 (the default) every expert gets the mean: on one GPU a grouped GEMM's work is the
  sum over experts, so uneven loads cost only their tile padding. An imbalance > 1 prices every expert
  at a busier expert's load: the straggler of expert parallelism, where each rank waits for its
  busiest expert. Measured routing is uneven: aiconfigurator's fused-MoE tables (shared data,
  `aiconfigurator/h100_sxm_vllm-0.24.0_moe.csv`, `distribution` column) sample expert loads from power
  laws with alpha 1.01 and 1.2 beside `balanced`; DeepSeek-V3 balances its experts with a bias term
  (arXiv:2412.19437, section 2.1.2) and its serving stack re-places hot experts (EPLB).
  NOTE(dse): the rounding of n_e and m_e to integers over-counts the FLOPs of small batches (29 experts
  x 2 rows for 32 token copies); those GEMMs are bound by their weight reads, which n_e gets right.
"""

from __future__ import annotations

import math

from dse.workload.arch import LlmArch
from dse.workload.ops import Dtype, ElementwiseOp, Op, SoftmaxOp, weight_gemm_ops

# MXFP4 (OCP Microscaling v1.0): 32 e2m1 elements (4 bits each) share one e8m0 scale (8 bits).
MXFP4_BITS_PER_PARAM = 4.0 + 8.0 / 32


def distinct_experts(*, num_experts: int, k: int, num_tokens: int) -> float:
    """Expected distinct experts touched when `num_tokens` tokens each pick `k` of `num_experts` uniformly:
    `E (1 - (1 - k/E)^T)`, between k (one token) and E, increasing in T."""
    if not 1 <= k <= num_experts or num_tokens < 1:
        raise ValueError(
            f"need 1 <= k <= num_experts and num_tokens >= 1, got {k}, {num_experts}, {num_tokens}"
        )
    return num_experts * (1.0 - (1.0 - k / num_experts) ** num_tokens)


def expert_gemm_shape(
    *, num_experts: int, k: int, num_tokens: int, imbalance: float = 1.0
) -> tuple[int, int]:
    """(experts that receive tokens, tokens per expert) of one grouped expert GEMM (module docstring)."""
    if imbalance < 1.0:
        raise ValueError(f"imbalance is the busiest expert's load over the mean, >= 1; got {imbalance}")
    touched = distinct_experts(num_experts=num_experts, k=k, num_tokens=num_tokens)
    num_active = min(num_experts, max(k, round(touched)))
    rows = min(num_tokens, math.ceil(imbalance * num_tokens * k / num_active - 1e-9))
    return num_active, max(1, rows)


def build_moe_ops(
    arch: LlmArch,
    *,
    prefix: str,
    tokens: int,
    count: int,
    gemm_dtype: Dtype,
    expert_dtype: Dtype,
    act_dtype: Dtype,
    imbalance: float = 1.0,
) -> list[Op]:
    """The MoE MLP of `count` layers named `prefix`, for `tokens` tokens (module docstring).

    Args:
        arch: an MoE model.
        prefix: the layers' name, e.g. `deepseek-v3/layer[3-60]`.
        tokens: tokens in this pass (t).
        count: how many such layers.
        gemm_dtype: dtype of the shared experts' GEMMs.
        expert_dtype: dtype of the routed experts' GEMMs (`fp4` for MXFP4 experts).
        act_dtype: dtype of activations, the router and the elementwise ops.
        imbalance: the busiest expert's load over the mean (>= 1).
    """
    d, t, num_e, k = arch.hidden_size, tokens, arch.num_experts, arch.num_experts_per_tok
    f, fs, pre = arch.moe_intermediate_size, arch.shared_expert_intermediate_size, f"{prefix}/mlp"
    ops: list[Op] = []
    ops += weight_gemm_ops(
        f"{pre}/router", m=t, n=num_e, k=d, dtype=act_dtype, act_dtype=act_dtype, count=count
    )
    ops.append(SoftmaxOp(name=f"{pre}/topk", rows=t, cols=num_e, dtype=act_dtype, count=count))  # [t, E]
    if fs:
        ops += weight_gemm_ops(
            f"{pre}/shared_gate_up", m=t, n=2 * fs, k=d, dtype=gemm_dtype, act_dtype=act_dtype, count=count
        )
        ops.append(_elementwise(f"{pre}/shared_act", f"{arch.activation}_mul", t * fs, act_dtype, count))
        ops += weight_gemm_ops(
            f"{pre}/shared_down", m=t, n=d, k=fs, dtype=gemm_dtype, act_dtype=act_dtype, count=count
        )
    ops += routed_expert_ops(
        pre,
        hidden_size=d,
        expert_width=f,
        num_experts=num_e,
        k=k,
        tokens=t,
        expert_dtype=expert_dtype,
        act_dtype=act_dtype,
        activation=arch.activation,
        count=count,
        imbalance=imbalance,
    )
    if fs:
        ops.append(_elementwise(f"{pre}/shared_add", "add", t * d, act_dtype, count))  # [t, d] + [t, d]
    return ops


def routed_expert_ops(
    pre: str,
    *,
    hidden_size: int,
    expert_width: int,
    num_experts: int,
    k: int,
    tokens: int,
    expert_dtype: Dtype,
    act_dtype: Dtype,
    activation: str = "silu",
    count: int = 1,
    imbalance: float = 1.0,
    ep_size: int = 1,
    balanced: bool = False,
) -> list[Op]:
    """The routed experts of one MoE MLP named `pre` (`.../mlp`): align, grouped gate/up, activation,
    grouped down and combine (module docstring), as vLLM's fused-MoE layer runs them.

    `expert_dtype` `fp4` is MXFP4 weights with `act_dtype` activations: weight-only GEMMs (`b_dtype`),
    which `dse.perf.moe.math_dtype` multiplies in fp4 only where the GPU has fp4 Tensor Cores.
    `ep_size` > 1: the experts on one GPU of an expert-parallel group of that size, as
    `dse.workload.sharding.shard_graph` places them (the touched experts / ep, each with the same rows;
    1 / ep of the token copies), for per-GPU tables such as aiconfigurator's.
    `balanced`: routing that spreads the token copies evenly over the experts (min(E, t k) experts touched,
    as aiconfigurator's `balanced` tables route) instead of the expected uniform-random choice.
    """
    d, f, t = hidden_size, expert_width, tokens
    copies = math.ceil(t * k / ep_size)
    if balanced:
        n_e = min(num_experts // ep_size or 1, copies)
        m_e = math.ceil(copies / n_e)
    else:
        n_e, m_e = expert_gemm_shape(num_experts=num_experts, k=k, num_tokens=t, imbalance=imbalance)
        n_e = max(1, math.ceil(n_e / ep_size - 1e-9))
    ops: list[Op] = []
    # (token, expert) pairs sorted by expert: int32 ids, counted as 4-byte copies [t*k]
    ops.append(_elementwise(f"{pre}/experts_align", "copy", copies, "fp32", count))
    weight_only = expert_dtype == "fp4"
    gemm_dtype: Dtype = act_dtype if weight_only else expert_dtype

    def grouped(name: str, n: int, k_dim: int) -> list[Op]:  # n_e experts x [m_e, k_dim] x [k_dim, n]
        return weight_gemm_ops(
            f"{pre}/{name}",
            m=m_e,
            n=n,
            k=k_dim,
            batch=n_e,
            b_shared=False,
            dtype=gemm_dtype,
            act_dtype=act_dtype,
            b_dtype="fp4" if weight_only else None,
            grouped=True,
            count=count,
        )

    ops += grouped("experts_gate_up", 2 * f, d)
    ops.append(_elementwise(f"{pre}/experts_act", f"{activation}_mul", copies * f, act_dtype, count))
    ops += grouped("experts_down", d, f)
    if k > 1:
        # Reads the k outputs of each token [t, k, d] and writes their sum [t, d]: a one-input streaming
        # kernel over (k + 1) / 2 x t d elements moves exactly those bytes.
        ops.append(
            _elementwise(f"{pre}/experts_combine", "copy", math.ceil(t * d * (k + 1) / 2), act_dtype, count)
        )
    return ops


def _elementwise(name: str, kind: str, num_elements: int, dtype: Dtype, count: int) -> ElementwiseOp:
    return ElementwiseOp(name=name, kind=kind, num_elements=num_elements, dtype=dtype, count=count)

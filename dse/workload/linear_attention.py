"""Gated DeltaNet linear attention (Qwen3-Next, Qwen3.5) as ops, from the input projection to the output.

Gated DeltaNet (Yang, Kautz and Hatamizadeh, arXiv:2412.06464) keeps per sequence and value head a state
S of dk x dv; each token decays it (gate alpha), applies the delta rule with strength beta and reads it
with its query: S <- alpha S (I - beta k k^T) + beta k v^T, o = S^T q. Qwen3-Next's layer (transformers
`Qwen3NextGatedDeltaNet`, vLLM's `qwen3_next.py`): `linear_num_key_heads` q/k heads of
`linear_key_head_dim`, `linear_num_value_heads` v heads of `linear_value_head_dim` (each k head serves
Hv / Hk v heads), a causal depthwise conv1d of `linear_conv_kernel` over q, k and v, an RMSNorm over dv
gated by SiLU(z), and the output projection. With key = Hk dk and value = Hv dv:

    attn/in_proj        [t, d] x [d, 2 key + 2 value + 2 Hv]   (q, k, v, z and the beta / decay inputs)
    attn/conv1d         conv + SiLU over [t, 2 key + value] (its last kernel - 1 inputs are cached)
    attn/gating         beta = sigmoid(b), decay = exp(-exp(A) softplus(a + dt_bias)): [t, 2 Hv]
    decode (one token per sequence): the fused recurrent kernel
    attn/recurrence     the state [b, Hv, dk, dv] read, updated and written (`linear_state_dtype`: fp32
                        unless the config's mamba_ssm_dtype says otherwise)
    prefill (FLA's chunked form, chunks of 64 tokens):
    attn/recurrence_chunks  the masked q k^T / k k^T products inside each chunk: an `AttentionOp` over
                            64-token causal blocks (Hv query heads on Hk key heads)
    attn/recurrence_state   per chunk and value head, the state's pass ([64, dk] x [dk, dv] three times:
                            the chunk's state update, its correction and the queries' read), Tensor Cores
    attn/recurrence_final   the final state written for the decode steps that follow
    attn/norm_gate          RMSNorm over dv per value head, times SiLU(z)
    attn/out_proj           [t, value] x [value, d]

The state replaces a KV cache in these layers: memory per sequence, not per token (`state_bytes`: Qwen3.5-
397B holds 45 layers x 4 MiB in fp32 per sequence, split over tp), taken from the KV pool while the sequence
runs (`dse.serving.load`).
"""

from __future__ import annotations

from dse.workload.arch import LlmArch
from dse.workload.ops import (
    BYTES_PER_ELEMENT,
    AttentionBackend,
    AttentionOp,
    Dtype,
    ElementwiseOp,
    GemmOp,
    NormOp,
    Op,
    weight_gemm_ops,
)

CHUNK_TOKENS = 64  # FLA's chunk_gated_delta_rule chunk size
RECURRENCE = "recurrence"  # decode op leaf name; the prefill ops extend it (`dse.workload.engine`)


def state_bytes(arch: LlmArch, act_dtype: Dtype = "bf16") -> float:
    """Bytes one sequence keeps in all linear-attention layers: the recurrent state (`linear_state_dtype`)
    and the conv1d's last kernel - 1 inputs (`act_dtype`); 0 without linear layers."""
    key = arch.linear_num_key_heads * arch.linear_key_head_dim
    conv = (arch.linear_conv_kernel - 1) * (
        2 * key + arch.linear_num_value_heads * arch.linear_value_head_dim
    )
    per_layer = (
        arch.linear_state_elements * BYTES_PER_ELEMENT[arch.linear_state_dtype]
        + conv * BYTES_PER_ELEMENT[act_dtype]
    )
    return float(len(arch.linear_layers) * per_layer)


def build_gated_deltanet_ops(
    arch: LlmArch,
    *,
    prefix: str,
    batch: int,
    q_len: int,
    count: int,
    gemm_dtype: Dtype,
    act_dtype: Dtype,
    backend: AttentionBackend,
) -> list[Op]:
    """The linear attention of `count` layers named `prefix` (module docstring), through `attn/out_proj`.

    Args:
        arch: a model with `linear_layers`.
        prefix: the layers' name.
        batch: sequences.
        q_len: new tokens per sequence (1 = a decode step, the recurrent kernel; else the chunked one).
        count: how many such layers.
        gemm_dtype: the projections' dtype.
        act_dtype: activations and norms.
        backend: the backend of the chunk `AttentionOp`.
    """
    a, t, pre = arch, batch * q_len, f"{prefix}/attn"
    hk, dk, hv, dv = (
        a.linear_num_key_heads,
        a.linear_key_head_dim,
        a.linear_num_value_heads,
        a.linear_value_head_dim,
    )
    key, value = hk * dk, hv * dv

    def gemm(name: str, n: int, k: int) -> list[Op]:
        return weight_gemm_ops(
            f"{pre}/{name}", m=t, n=n, k=k, dtype=gemm_dtype, act_dtype=act_dtype, count=count
        )

    def elementwise(name: str, kind: str, elements: int, dtype: Dtype = act_dtype) -> ElementwiseOp:
        return ElementwiseOp(name=f"{pre}/{name}", kind=kind, num_elements=elements, dtype=dtype, count=count)

    ops = gemm("in_proj", 2 * key + 2 * value + 2 * hv, a.hidden_size)
    ops += [
        elementwise("conv1d", "conv4_silu", t * (2 * key + value)),
        elementwise("gating", "silu", t * 2 * hv),
    ]
    state = batch * a.linear_state_elements
    if q_len == 1:
        ops.append(elementwise(RECURRENCE, "delta_rule", state, a.linear_state_dtype))
    else:
        chunk = min(q_len, CHUNK_TOKENS)
        chunks = batch * -(-q_len // chunk)
        ops.append(
            AttentionOp(
                name=f"{pre}/{RECURRENCE}_chunks", batch=chunks, num_heads=hv, num_kv_heads=hk, head_dim=dk,
                seq_len_q=chunk, seq_len_kv=chunk, causal=True, backend=backend, dtype=act_dtype, count=count,
            )
        )  # fmt: skip
        ops.append(
            GemmOp(name=f"{pre}/{RECURRENCE}_state", m=chunk, n=dv, k=3 * dk, batch=chunks * hv,
                   dtype=act_dtype, count=count)
        )  # fmt: skip
        ops.append(elementwise(f"{RECURRENCE}_final", "copy", state, a.linear_state_dtype))
    ops.append(
        NormOp(name=f"{pre}/norm_gate", rows=t * hv, cols=dv, kind="rmsnorm", dtype=act_dtype, count=count)
    )
    ops.append(elementwise("norm_gate_mul", "silu_mul", t * value))
    return ops + gemm("out_proj", a.hidden_size, value)

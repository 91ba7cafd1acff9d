"""Multi-head latent attention (DeepSeek-V2/V3) as ops, from the projections to the output projection.

MLA (arXiv:2405.04434, section 2.1) compresses each token's keys and values into one latent `c_kv` of
`kv_lora_rank` (512) plus a shared RoPE key of `qk_rope_head_dim` (64): the KV cache holds those 576
elements per token and layer instead of 2 x heads x head_dim. Queries go through a latent of
`q_lora_rank` (1536). Per head, q and k have a no-RoPE part (`qk_nope_head_dim`, 128) and a RoPE part
(64); v has `v_head_dim` (128).

    attn/qkv_a_proj    [t, d] x [d, q_lora + kv_lora + rope]   (q_a and kv_a fused, as vLLM does)
    attn/q_a_norm      RMSNorm over q_lora; attn/kv_a_norm over kv_lora
    attn/q_b_proj      [t, q_lora] x [q_lora, h (nope + rope)]
    attn/rotary        the RoPE parts of q [t, h, rope] and of the shared key [t, rope]
    attn/kv_cache_write  the latent and RoPE key [t, kv_lora + rope]

Prefill (the "naive" form serving engines use when many queries share the keys) expands the latent to
per-head keys and values and runs ordinary multi-head attention:

    attn/kv_b_proj     [t, kv_lora] x [kv_lora, h (nope + v)]
    attn/attention     h heads, q/k of nope + rope = 192, v of 128: one `AttentionOp` with head_dim
                       (192 + 128) / 2 = 160 has exactly its FLOPs (2 x 192 + 2 x 128 per pair and head)
                       and its compulsory bytes (q + o, k + v per token and head)

Decode uses the absorbed form (FlashMLA, vLLM's MLA backends): the key up-projection is folded into the
query and the value up-projection applied after attention, so attention runs over the cached latents
as multi-query attention (one KV head shared by all h heads):

    attn/q_absorb      per head: [t, nope] x [nope, kv_lora] (h GEMMs, each head its own W_UK slice)
    attn/attention     h query heads, 1 KV head over the cached [kv_lora + rope] latents
    attn/v_absorb      per head: [t, kv_lora] x [kv_lora, v] (W_UV)

NOTE(dse): an `AttentionOp` has one head_dim for q, k and v; the absorbed kernel's q.k spans 576 and its
p.v 512 over one shared 576-wide cache row. We use head_dim (kv_lora + rope) / 2 = 288, which reads the
cache's exact bytes (2 x 288 per token), the traffic that bounds decode; its FLOPs are then 53% of the
kernel's (2 x 288 instead of 576 + 512 per pair and head). Measured FlashMLA is memory-bound at decode
(3000 GB/s on H800, its README), where this error does not show.
"""

from __future__ import annotations

from dataclasses import dataclass

from dse.workload.arch import LlmArch
from dse.workload.ops import (
    AttentionBackend,
    AttentionOp,
    Dtype,
    ElementwiseOp,
    GemmOp,
    NormKind,
    NormOp,
    Op,
    weight_gemm_ops,
)


def build_mla_ops(
    arch: LlmArch,
    *,
    prefix: str,
    batch: int,
    q_len: int,
    kv_len: int,
    count: int,
    gemm_dtype: Dtype,
    act_dtype: Dtype,
    attn_dtype: Dtype,
    backend: AttentionBackend,
) -> list[Op]:
    """The MLA attention of `count` layers named `prefix` (module docstring), through `attn/o_proj`.

    Args:
        arch: a model with `kv_lora_rank` > 0.
        prefix: the layers' name.
        batch: sequences.
        q_len: new tokens per sequence (1 = a decode step, which takes the absorbed form).
        kv_len: keys each sequence's last query sees.
        count: how many such layers.
        gemm_dtype: the projections' dtype.
        act_dtype: activations, norms and the cache.
        attn_dtype: the attention kernel's dtype.
        backend: the `AttentionOp` backend.
    """
    a, t, pre = arch, batch * q_len, f"{prefix}/attn"
    d, h, rope, nope = a.hidden_size, a.num_heads, a.qk_rope_head_dim, a.qk_nope_head_dim
    lat, ql = a.kv_lora_rank, a.q_lora_rank
    q_out = h * (nope + rope)
    e = _Emit(pre=pre, rows=t, count=count, gemm_dtype=gemm_dtype, act_dtype=act_dtype, norm_kind=a.norm)
    gemm, norm, copy = e.gemm, e.norm, e.copy
    ops = gemm("qkv_a_proj", t, (ql or q_out) + lat + rope, d)  # [t, d] x [d, q_lora + kv_lora + rope]
    if ql:
        ops += [norm("q_a_norm", ql), norm("kv_a_norm", lat)]
        ops += gemm("q_b_proj", t, q_out, ql)  # [t, q_lora] x [q_lora, h (nope + rope)]
    else:
        ops.append(norm("kv_a_norm", lat))
    ops.append(copy("rotary", "rotary", t * (h + 1) * rope))  # q [t, h, rope] and the shared key [t, rope]
    ops.append(copy("kv_cache_write", "copy", t * (lat + rope)))  # [t, kv_lora + rope]
    absorbed = q_len == 1
    if absorbed:
        ops += gemm("q_absorb", t, lat, nope, batch=h)  # h x [t, nope] x [nope, kv_lora]
    else:
        ops += gemm("kv_b_proj", t, h * (nope + a.v_head_dim), lat)  # [t, kv_lora] x [kv_lora, h (nope + v)]
    if a.is_sparse_attention:
        ops += _indexer_ops(a, e, batch=batch, q_len=q_len, kv_len=kv_len, backend=backend)
    heads = _attention_heads(a, absorbed=absorbed)
    for suffix, seqs, q, kv, causal in _attended(a, q_len, kv_len):
        ops.append(
            AttentionOp(
                name=f"{pre}/attention{suffix}", batch=batch * seqs, num_heads=h, seq_len_q=q, seq_len_kv=kv,
                causal=causal, backend=backend, dtype=attn_dtype, kv_dtype=act_dtype, count=count, **heads,
            )
        )  # fmt: skip
    if absorbed:
        ops += gemm("v_absorb", t, a.v_head_dim, lat, batch=h)  # h x [t, kv_lora] x [kv_lora, v]
    ops += gemm("o_proj", t, d, h * a.v_head_dim)  # [t, h v] x [h v, d]
    return ops


# NOTE(dse): sparse prefill keeps the expanded form above (per-head keys and values, 2 x 192 + 2 x 256 FLOP
# per pair and head for GLM-5) over the selected keys; DeepSeek-V3.2's sparse kernels (FlashMLA) attend over
# the latents in the absorbed form (2 x 576 + 2 x 512), about twice the FLOPs per pair: past 2,048 tokens the
# prefill's attention may be under-priced up to 2x.
def _attended(arch: LlmArch, q_len: int, kv_len: int) -> list[tuple[str, int, int, int, bool]]:
    """(name suffix, sequences per sequence, queries, keys, causal) of the attention ops: one causal op, or
    under sparse attention the queries that see at most `index_topk` keys (causal) and those that see
    exactly `index_topk` (`_sparse`, in blocks of index_topk queries, as an `AttentionOp` has no more
    queries than keys: the same query-key pairs as the indexer's selection)."""
    topk = arch.index_topk
    if not topk or kv_len <= topk:
        return [("", 1, q_len, kv_len, True)]
    if q_len == 1:
        return [("", 1, 1, topk, False)]
    dense = max(0, min(q_len, topk - (kv_len - q_len)))  # queries at positions <= topk
    sparse = q_len - dense
    parts = [("", 1, dense, kv_len - q_len + dense, True), ("_sparse", sparse // topk, topk, topk, False)]
    parts.append(("_sparse_tail", 1, sparse % topk, topk, False))
    return [p for p in parts if p[1] and p[2]]


def _indexer_ops(
    arch: LlmArch, e: _Emit, *, batch: int, q_len: int, kv_len: int, backend: AttentionBackend
) -> list[Op]:
    """The lightning indexer of DeepSeek sparse attention (DeepSeek-V3.2-Exp technical report, section 2.1):
    per token `index_n_heads` queries from the q latent, one key and a weight per head from x; scores
    ReLU(q.k) weighted over the heads for every earlier key, in fp8; then the top `index_topk` per query.

        attn/indexer_q_proj    [t, q_lora] x [q_lora, n_idx x idx]
        attn/indexer_k_proj    [t, d] x [d, idx + n_idx] (the key and the head weights)
        attn/indexer_k_norm    LayerNorm over idx; attn/indexer_rotary on the RoPE parts of q and k
        attn/indexer_cache_write  the fp8 key [t, idx]
        attn/indexer           n_idx heads of fp8 q.k over the fp8 keys (DeepGEMM's fp8 MQA logits), ReLU'd
                               and weighted into one fp32 score per query and key. Decode reads each
                               sequence's keys: an `AttentionOp` with one KV head of head_dim idx / 2 has its
                               FLOPs (2 idx per pair and head) and its key bytes. Prefill is compute-bound: a
                               GEMM [q, n_idx idx] x [n_idx idx, mean causal keys] has its fp8 FLOPs and
                               writes its scores (no softmax, unlike an attention kernel); its key reads are
                               counted n_idx times, a few microseconds beside the math.

    NOTE(dse): the top-k selection is not an op of its own: it reads the scores the indexer wrote (~2% of a
    prefill step's attention time, ~6% of a decode step's indexer traffic).
    """
    a, t, pre = arch, e.rows, e.pre
    n_idx, idx, rope = a.index_n_heads, a.index_head_dim, a.qk_rope_head_dim
    ops = e.gemm("indexer_q_proj", t, n_idx * idx, a.q_lora_rank)
    ops += e.gemm("indexer_k_proj", t, idx + n_idx, a.hidden_size)
    ops.append(NormOp(name=f"{pre}/indexer_k_norm", rows=t, cols=idx, kind="layernorm", dtype=e.act_dtype,
                      count=e.count))  # fmt: skip
    ops.append(e.copy("indexer_rotary", "rotary", t * (n_idx + 1) * rope))
    ops.append(ElementwiseOp(name=f"{pre}/indexer_cache_write", kind="cast", num_elements=t * idx,
                             dtype="fp8", count=e.count))  # fmt: skip
    if q_len == 1:  # decode: reading each sequence's fp8 keys bounds it
        ops.append(
            AttentionOp(
                name=f"{pre}/indexer", batch=batch, num_heads=n_idx, num_kv_heads=1, head_dim=-(-idx // 2),
                seq_len_q=1, seq_len_kv=kv_len, causal=True, backend=backend, dtype="fp8", kv_dtype="fp8",
                count=e.count,
            )
        )  # fmt: skip
    else:  # prefill: fp8 Tensor-Core math over the causal pairs, fp32 scores written
        mean_keys = kv_len - q_len + (q_len + 1) // 2
        ops.append(
            GemmOp(
                name=f"{pre}/indexer", m=q_len, n=mean_keys, k=n_idx * idx, batch=batch, dtype="fp8",
                out_dtype="fp32", count=e.count,
            )
        )  # fmt: skip
    return ops


def _attention_heads(arch: LlmArch, *, absorbed: bool) -> dict[str, int]:
    """KV heads and head_dim of the attention op, absorbed (decode) or expanded (prefill)."""
    if absorbed:
        return {"num_kv_heads": 1, "head_dim": -(-(arch.kv_lora_rank + arch.qk_rope_head_dim) // 2)}
    qk_v = arch.qk_nope_head_dim + arch.qk_rope_head_dim + arch.v_head_dim
    return {"num_kv_heads": arch.num_heads, "head_dim": -(-qk_v // 2)}


@dataclass(frozen=True, slots=True, kw_only=True)
class _Emit:
    """Builds the ops of `count` layers under `pre` for `rows` tokens."""

    pre: str
    rows: int
    count: int
    gemm_dtype: Dtype
    act_dtype: Dtype
    norm_kind: NormKind

    def gemm(self, name: str, m: int, n: int, k: int, batch: int = 1) -> list[Op]:
        # NOTE(dse): the absorbed per-head GEMMs (batch = h) run in the activation dtype: vLLM dequantizes
        # the fp8 kv_b_proj weight into bf16 W_UK / W_UV when it loads the model.
        dtype = self.gemm_dtype if batch == 1 else self.act_dtype
        return weight_gemm_ops(
            f"{self.pre}/{name}", m=m, n=n, k=k, dtype=dtype, act_dtype=self.act_dtype, count=self.count,
            batch=batch, b_shared=batch == 1,
        )  # fmt: skip

    def norm(self, name: str, cols: int) -> Op:
        pre, count = self.pre, self.count
        return NormOp(
            name=f"{pre}/{name}",
            rows=self.rows,
            cols=cols,
            kind=self.norm_kind,
            dtype=self.act_dtype,
            count=count,
        )

    def copy(self, name: str, kind: str, num_elements: int) -> Op:
        pre, dtype, count = self.pre, self.act_dtype, self.count
        return ElementwiseOp(
            name=f"{pre}/{name}", kind=kind, num_elements=num_elements, dtype=dtype, count=count
        )

"""Transformer language models as workload graphs: the prefill / decode builders and memory footprints.

    arch = load_model_config("llama-3.1-8b")                  # dse.workload.models: HF config -> LlmArch
    g = build_prefill_graph(arch, batch=8, seq_len=2048)       # one forward pass over 8 x 2048 tokens
    g = build_decode_graph(arch, batch=32, context_len=4096)   # one new token per sequence, KV cache of 4096

`LlmArch` (`dse.workload.arch`, re-exported here) is the normalized form of a Hugging-Face config: its
docstring lists the families and the optional parts (mixture of experts, latent attention, local layers).

Graph conventions (one op per distinct kernel; a repeated layer is one op with `count = num_layers`):

- Names are hierarchical, `<model>/layer[0-31]/attn/qkv_proj`; each block's norm and residual add live
  under its block (`attn/norm`, `mlp/residual_add`) whether the model is pre-LN or post-LN. Ops that
  only some layers run are named after those layers: `layer[3-60]/mlp/experts_down` (DeepSeek-V3's MoE
  layers), `layer[0-34:2]/attn/local_attention` (gpt-oss's sliding-window layers: every 2nd from 0 to
  34); a set that is no such progression keeps the all-layers name (Gemma-3's local layers:
  `layer[0-61]/attn/local_attention`, count 52). Local layers' attention ops are `local_attention*`
  (`decode_keys_of` gives the keys a decoding token reads on any attention op).
- q, k and v are one fused GEMM, gate and up one fused GEMM, weights are `b_shared`, and the tokens of
  all sequences form the GEMM's `m` (`batch=1`). Biases are fused into the GEMM epilogue (cuBLASLt), so
  they cost no extra kernel.
- Attention is one `AttentionOp` whatever the backend: `eager` (QK^T, softmax, PV with the score matrix in
  DRAM) is expanded by the kernel model, not here. Latent attention (DeepSeek) is `dse.workload.mla`.
- MoE layers' MLPs are `dse.workload.moe`: router, top-k, grouped expert GEMMs over the experts the
  step's tokens touch, shared experts and the combine; `moe_imbalance` prices uneven expert loads.
- The LM head of a prefill runs on the last token of each sequence only (`batch` rows), as serving engines
  do (vLLM, TensorRT-LLM); HF `generate` in eager mode computes all `batch * seq_len` rows. A decode step
  also has `batch` rows. Encoders end with BERT's pooler instead (first token of each sequence).
- Decoders write the k and v of the new tokens into the KV cache with one copy kernel per layer
  (`attn/kv_cache_write`, vLLM's `reshape_and_cache`), in prefill and decode alike.
- Precision: GEMM inputs in `precision` (`fp32` runs on CUDA cores, `tf32` on Tensor Cores); activations,
  norms, elementwise ops and the KV cache in fp32 for fp32/tf32, in bf16 for fp8 and mxfp4, else in
  `precision`. fp8 GEMMs write bf16 and each is preceded by the cast that quantizes its activation input
  (`attn/qkv_quant` ...); the LM head stays in bf16 and attention runs in bf16 under fp8. `mxfp4` is
  gpt-oss's published checkpoint: routed-expert weights in MXFP4 (4.25 bits per weight), everything else
  bf16; it applies to MoE models only.

NOTE(dse): MXFP4 expert GEMMs are `fp4` GemmOps (weights read at 4 bits, output bf16, no activation
quantization op). On Blackwell they run on the fp4 Tensor Cores (TensorRT-LLM / FlashInfer's MXFP4 MoE).
Hopper has no fp4 Tensor Cores: vLLM's gpt-oss path there (Triton `matmul_ogs`, the `w4a16_mxfp4` rows
of aiconfigurator's MoE tables) reads the 4-bit weights and multiplies in bf16. The GEMM estimator runs an
`fp4` GEMM on a GPU without fp4 on its next Tensor-Core dtype (`dse.perf.rates`: fp8 on Hopper), so on
Hopper the weight traffic is right, the activation traffic (t x d per expert GEMM, small beside the
weights) is under-counted 4x, and compute-bound expert GEMMs (long prefills) run at the fp8 rate, 2x
the bf16 rate vLLM gets. A GemmOp with a separate weight dtype would fix both; it needs the estimator.

Local attention (`LlmArch.local_attention_layers`): a decoding token on a sliding-window layer attends to
the last `sliding_window` keys, on a chunked layer (Llama-4) to the keys of its own chunk. In a prefill,
a model whose layers alternate (gpt-oss, Gemma-3, Llama-4) has its local layers' attention split into
ops an `AttentionOp` can express exactly: chunked attention as independent causal chunks; a window `w`
as a causal block over the first `w` tokens plus non-causal `w`-query blocks that each see `w` keys
(the same query-key pairs as the band). NOTE(dse): a model whose every layer is windowed
(Mistral-7B-v0.1) keeps full causal attention in its prefill, an overestimate past the window kept so
that its results stay as they were. The KV-cache footprint counts the full context on every layer
(vLLM's hybrid allocator frees the blocks that fall out of a window: it needs less).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, cast

from dse.errors import ConfigError
from dse.workload.arch import LlmArch, layer_label
from dse.workload.graph import WorkloadGraph
from dse.workload.linear_attention import build_gated_deltanet_ops
from dse.workload.mla import build_mla_ops
from dse.workload.moe import MXFP4_BITS_PER_PARAM, build_moe_ops
from dse.workload.ops import (
    BYTES_PER_ELEMENT,
    AttentionBackend,
    AttentionOp,
    Dtype,
    ElementwiseOp,
    NormOp,
    Op,
    weight_gemm_ops,
)

__all__ = [
    "ATTENTION_IMPLS",
    "ATTENTION_PART_SUFFIXES",
    "LOCAL_ATTENTION",
    "PRECISIONS",
    "LlmArch",
    "Precision",
    "activation_dtype",
    "build_decode_graph",
    "build_prefill_graph",
    "check_numerics",
    "decode_keys_of",
    "decode_keys_rule",
    "kv_cache_bytes",
    "prefill_activation_bytes",
    "weight_bytes",
]

# Attention ops of local (sliding-window or chunked) layers are named `.../attn/local_attention*`.
LOCAL_ATTENTION = "local_attention"
# Name suffixes of the parts one local-attention call is priced in (`attention_ops`): one kernel launch
ATTENTION_PART_SUFFIXES = ("_chunks", "_window", "_tail")

Precision = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "mxfp4"]
PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8", "mxfp4")
ATTENTION_IMPLS: tuple[str, ...] = ("flash", "eager")


def decode_keys_of(arch: LlmArch, op: AttentionOp, kv_len: int) -> int:
    """Keys `op`, an attention op of `arch`'s graphs, reads for a decoding token with `kv_len` tokens
    in the sequence: the window or chunk on local layers' ops, else `arch.decode_keys` (for a model whose
    every layer is windowed, the window)."""
    return decode_keys_rule(arch, op)(kv_len)


def decode_keys_rule(arch: LlmArch, op: AttentionOp) -> Callable[[int], int]:
    """`decode_keys_of` for `op` as a function of kv_len: the op's name is read once (the static predictor
    regrows each attention op at every decode step)."""
    leaf = op.name.rsplit("/", 1)[-1]
    if arch.is_sparse_attention and leaf == "attention":
        topk = arch.index_topk  # the indexer (`indexer`) itself scores every key
        return lambda kv_len: min(kv_len, topk)
    local = True if leaf.startswith(LOCAL_ATTENTION) else None
    return lambda kv_len: arch.decode_keys(kv_len, local=local)


# ---- memory footprint (bytes), used by the serving predictor's capacity check


def weight_bytes(arch: LlmArch, precision: str) -> float:
    """Bytes of all weights (every expert included): transformer layers in the GEMM precision, the rest in
    the activation dtype.

    Embeddings, norms and the LM head stay in the activation dtype under fp8 (as fp8 checkpoints ship them).
    Under mxfp4 the routed experts take 4.25 bits per weight (their biases, 0.03% of gpt-oss's, too) and
    the rest bf16, as the gpt-oss checkpoints ship them.
    """
    prec = _check_precision(precision)
    _check_mxfp4(arch, prec)
    counts = arch.param_counts()
    gemm_b = BYTES_PER_ELEMENT[gemm_dtype(prec)]
    act_b = BYTES_PER_ELEMENT[_act_dtype(prec)]
    expert_b = MXFP4_BITS_PER_PARAM / 8 if prec == "mxfp4" else gemm_b
    layers, experts = counts["layers"], counts["experts"]
    return layers * gemm_b + experts * expert_b + (arch.num_params - layers - experts) * act_b


def kv_cache_bytes(arch: LlmArch, precision: str, num_tokens: int) -> float:
    """KV cache of `num_tokens` tokens (summed over sequences) in the activation dtype (and the sparse
    indexer's fp8 keys)."""
    act_b = BYTES_PER_ELEMENT[_act_dtype(_check_precision(precision))]
    return float(num_tokens) * (arch.kv_cache_elements_per_token * act_b + arch.indexer_cache_bytes_per_token)


def prefill_activation_bytes(
    arch: LlmArch, precision: str, *, batch: int, seq_len: int, attention: str
) -> float:
    """Peak transient activations of one prefill layer (layers run one after another) plus fp32 logits.

    Per token: residual, normed input, attention output and MLP output (4 d), Q/K/V, and the MLP's up/gate
    outputs and activation (3 ff; an MoE layer's k routed copies and shared experts, 3 (k f + f_shared),
    where that is wider). Eager attention also materializes one layer's score matrix.
    """
    act_b = BYTES_PER_ELEMENT[_act_dtype(_check_precision(precision))]
    tokens = batch * seq_len
    mlp_width = arch.intermediate_size
    if arch.is_moe:
        moe_width = (
            arch.num_experts_per_tok * arch.moe_intermediate_size + arch.shared_expert_intermediate_size
        )
        mlp_width = max(moe_width, arch.intermediate_size if arch.dense_layers else 0)
    per_token = 4 * arch.hidden_size + arch.q_dim + 2 * arch.kv_dim + 3 * mlp_width
    scores = batch * arch.num_heads * seq_len * seq_len if attention == "eager" else 0
    logits = batch * arch.vocab_size * 4.0
    return (tokens * per_token + scores) * act_b + logits


# ---- builders


def _check_count(field: str, value: object, minimum: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise ConfigError(f"{field} must be an integer >= {minimum}, got {value!r}")
    return value


def _check_precision(value: object) -> Precision:
    if value not in PRECISIONS:
        four_bit = value in ("int4", "w4a16")
        hint = " (4-bit weight-only MoE experts, int4 or MXFP4, are mxfp4)" if four_bit else ""
        raise ConfigError(f"precision '{value}' is not one of {', '.join(PRECISIONS)}{hint}")
    return cast(Precision, value)


def _check_mxfp4(arch: LlmArch, precision: Precision) -> None:
    if precision == "mxfp4" and not arch.is_moe:
        raise ConfigError(f"precision mxfp4 quantizes MoE expert weights; {arch.name} has no experts")


def _check_attention(value: object) -> str:
    if value not in ATTENTION_IMPLS:
        raise ConfigError(f"attention '{value}' (--attention) is not one of {', '.join(ATTENTION_IMPLS)}")
    return str(value)


def check_numerics(arch: LlmArch, precision: object, attention: object) -> None:
    """ConfigError unless `arch` can run at `precision` with `attention` on any GPU (what the graph
    builders check), for callers that check a workload once before running it at many points."""
    _check_mxfp4(arch, _check_precision(precision))
    _check_attention(attention)


def _check_imbalance(value: object) -> float:
    if not isinstance(value, int | float) or isinstance(value, bool) or not 1.0 <= value < float("inf"):
        raise ConfigError(f"moe_imbalance is the busiest expert's load over the mean, >= 1; got {value!r}")
    return float(value)


def activation_dtype(precision: str) -> Dtype:
    """Dtype of activations and of the KV cache at `precision` (ConfigError for an unknown precision)."""
    return _act_dtype(_check_precision(precision))


def _act_dtype(precision: Precision) -> Dtype:
    """Dtype of activations, norms, elementwise ops and the KV cache."""
    if precision in ("fp32", "tf32"):
        return "fp32"
    if precision == "fp8" or precision == "mxfp4":
        return "bf16"
    return precision


def gemm_dtype(precision: Precision) -> Dtype:
    """Dtype of the GEMMs other than the routed experts (mxfp4 quantizes only those)."""
    return "bf16" if precision == "mxfp4" else precision


class _Builder:
    """Collects the ops of one graph. In shape comments t = tokens in this pass (prefill b*s, decode b)."""

    def __init__(
        self,
        arch: LlmArch,
        *,
        batch: int,
        q_len: int,
        kv_len: int,
        precision: Precision,
        backend: AttentionBackend,
        moe_imbalance: float = 1.0,
    ) -> None:
        self.arch, self.batch, self.q_len, self.kv_len = arch, batch, q_len, kv_len
        self.tokens = batch * q_len
        self.precision: Dtype = gemm_dtype(precision)
        self.expert_dtype: Dtype = "fp4" if precision == "mxfp4" else self.precision
        self.act = _act_dtype(precision)
        # fp8 attention (FA3) is not the default anywhere: attention runs in bf16 then.
        self.attn_dtype: Dtype = "bf16" if self.precision == "fp8" else self.precision
        self.backend = backend
        self.moe_imbalance = moe_imbalance
        self.ops: list[Op] = []
        self.layer = self._prefix(tuple(range(arch.num_layers)))

    def _prefix(self, layers: tuple[int, ...]) -> str:
        return f"{self.arch.name}/{layer_label(layers)}"

    def gemm(self, name: str, *, m: int, n: int, k: int, count: int = 1, dtype: Dtype | None = None) -> None:
        """A weight GEMM [m, k] x [k, n]; fp8 inputs are first quantized from the bf16 activations."""
        self.ops += weight_gemm_ops(
            name, m=m, n=n, k=k, dtype=dtype or self.precision, act_dtype=self.act, count=count
        )

    def elementwise(self, name: str, kind: str, num_elements: int, count: int = 1) -> None:
        self.ops.append(
            ElementwiseOp(name=name, kind=kind, num_elements=num_elements, dtype=self.act, count=count)
        )

    def norm(self, name: str, rows: int, count: int = 1, cols: int | None = None) -> None:
        self.ops.append(
            NormOp(
                name=name,
                rows=rows,
                cols=cols or self.arch.hidden_size,
                kind=self.arch.norm,
                dtype=self.act,
                count=count,
            )
        )

    def embeddings(self) -> None:
        a, t, root = self.arch, self.tokens, self.arch.name
        self.elementwise(f"{root}/embed/tokens", "copy", t * a.embed_dim)  # gather [t, e] from [vocab, e]
        if a.embedding_scale:
            self.elementwise(f"{root}/embed/scale", "scale", t * a.embed_dim)  # x sqrt(d) (Gemma) [t, e]
        if a.embed_dim != a.hidden_size:
            self.gemm(f"{root}/embed/project_in", m=t, n=a.hidden_size, k=a.embed_dim)  # [t, e] x [e, d]
        num_tables = 1
        if a.position_embedding == "learned":
            self.elementwise(f"{root}/embed/positions", "copy", t * a.hidden_size)  # gather [t, d]
            num_tables += 1
        if a.type_vocab_size:
            self.elementwise(f"{root}/embed/token_types", "copy", t * a.hidden_size)  # gather [t, d]
            num_tables += 1
        if num_tables > 1:
            self.elementwise(f"{root}/embed/add", "add", t * a.hidden_size, count=num_tables - 1)  # [t, d]
        if a.embedding_norm:
            self.norm(f"{root}/embed/norm", t)  # [t, d]

    def attention_block(self) -> None:
        a, t, n, pre = self.arch, self.tokens, self.arch.num_layers, self.layer
        d = a.hidden_size
        if a.norm_position == "pre":
            self.norm(f"{pre}/attn/norm", t, count=n)  # [t, d]
        if a.is_mla:
            self.ops += build_mla_ops(
                a,
                prefix=pre,
                batch=self.batch,
                q_len=self.q_len,
                kv_len=self.kv_len,
                count=n,
                gemm_dtype=self.precision,
                act_dtype=self.act,
                attn_dtype=self.attn_dtype,
                backend=self.backend,
            )
        elif a.linear_layers:
            full, linear = a.full_attention_layers, a.linear_layers
            if full:  # a pipeline stage may hold linear layers only
                self.attention_core(self._prefix(full), len(full))
            label = layer_label(linear)  # three of every four layers: no progression, the all-layers name
            self.ops += build_gated_deltanet_ops(
                a, prefix=pre if "," in label else self._prefix(linear), batch=self.batch, q_len=self.q_len,
                count=len(linear), gemm_dtype=self.precision, act_dtype=self.act, backend=self.backend,
            )  # fmt: skip
        else:
            self.attention_core(pre, n)
        if a.sandwich_norm:
            self.norm(f"{pre}/attn/post_norm", t, count=n)  # [t, d] (Gemma-3)
        self.elementwise(f"{pre}/attn/residual_add", "add", t * d, count=n)  # [t, d] + [t, d]
        if a.norm_position == "post":
            self.norm(f"{pre}/attn/norm", t, count=n)  # [t, d]

    def attention_core(self, pre: str, n: int) -> None:
        """q/k/v projection through the output projection of the `n` (multi-head/GQA) layers named `pre`."""
        a, t = self.arch, self.tokens
        gate = a.q_dim if a.attn_output_gate else 0  # the output gate's logits come with q (Qwen3-Next)
        # [t, d] x [d, (h+2kv)*hd (+ h*hd)]
        self.gemm(f"{pre}/attn/qkv_proj", m=t, n=a.q_dim + 2 * a.kv_dim + gate, k=a.hidden_size, count=n)
        if a.qk_norm:
            # per-head RMSNorm of q and k over head_dim (Qwen3): [t*h, hd] and [t*kv, hd]
            for part, heads in (("q", a.num_heads), ("k", a.num_kv_heads)):
                self.ops.append(
                    NormOp(
                        name=f"{pre}/attn/{part}_norm",
                        rows=t * heads,
                        cols=a.head_dim,
                        kind="rmsnorm",
                        dtype=self.act,
                        count=n,
                    )
                )
        if a.position_embedding == "rope":
            # q and k: [t, (h+kv)*hd]
            self.elementwise(f"{pre}/attn/rotary", "rotary", t * (a.q_dim + a.kv_dim), count=n)
        if a.causal:
            # k, v of the new tokens into the cache: [t, 2*kv*hd] (vLLM `reshape_and_cache`)
            self.elementwise(f"{pre}/attn/kv_cache_write", "copy", t * 2 * a.kv_dim, count=n)
        local = a.local_attention_layers
        if 0 < len(local) < n:
            glob = tuple(i for i in range(n) if i not in set(local))
            for layers in sorted((local, glob)):
                # a layer set that is no arithmetic progression (Gemma-3's five of six) keeps the name of
                # all layers: `local_attention` and the op's count tell it apart
                label = layer_label(layers)
                prefix = self._prefix(layers) if "," not in label else pre
                self.attention_ops(prefix, len(layers), local=layers == local)
        else:
            # softmax(q k^T) v: q [b, h, s_q, hd] against k, v [b, kv, s_kv, hd]
            kv_len = a.decode_keys(self.kv_len) if self.q_len == 1 else self.kv_len
            self.ops.append(self.attention_op(f"{pre}/attn/attention", self.batch, self.q_len, kv_len, n))
        if gate:
            self.elementwise(f"{pre}/attn/output_gate", "silu_mul", t * gate, count=n)  # sigmoid(g) * o
        self.gemm(f"{pre}/attn/o_proj", m=t, n=a.hidden_size, k=a.q_dim, count=n)  # [t, h*hd] x [h*hd, d]

    def attention_op(
        self, name: str, batch: int, q_len: int, kv_len: int, count: int, causal: bool | None = None
    ) -> AttentionOp:
        a = self.arch
        return AttentionOp(
            name=name,
            batch=batch,
            num_heads=a.num_heads,
            num_kv_heads=a.num_kv_heads,
            head_dim=a.head_dim,
            seq_len_q=q_len,
            seq_len_kv=kv_len,
            causal=a.causal if causal is None else causal,
            backend=self.backend,
            dtype=self.attn_dtype,
            kv_dtype=self.act,
            count=count,
        )

    def attention_ops(self, prefix: str, count: int, *, local: bool) -> None:
        """Attention of `count` layers of one kind; local prefills split as the module docstring says."""
        a, b, s = self.arch, self.batch, self.q_len
        pre = f"{prefix}/attn/{LOCAL_ATTENTION if local else 'attention'}"
        if not local or self.q_len == 1 or self.kv_len > self.q_len:
            # decode, global layers, and chunks of a chunked prefill (which see the cached context)
            kv_len = a.decode_keys(self.kv_len, local=local) if s == 1 else self.kv_len
            self.ops.append(self.attention_op(pre, b, s, kv_len, count))
            return
        parts: list[tuple[str, int, int, int, bool]] = []  # name suffix, sequences, queries, keys, causal
        if a.attention_chunk_size is not None:
            c = a.attention_chunk_size
            parts += [("", b, s % c, s % c, True), (ATTENTION_PART_SUFFIXES[0], b * (s // c), c, c, True)]
        else:
            w, (_, window, tail) = a.sliding_window or s, ATTENTION_PART_SUFFIXES
            rest = max(0, s - w)
            parts.append(("", b, min(s, w), min(s, w), True))
            parts += [(window, b * (rest // w), w, w, False), (tail, b, rest % w, w, False)]
        for suffix, seqs, q, kv, causal in parts:
            if seqs and q:
                self.ops.append(self.attention_op(pre + suffix, seqs, q, kv, count, causal=causal))

    def mlp_block(self) -> None:
        a, t, n, pre = self.arch, self.tokens, self.arch.num_layers, self.layer
        if a.norm_position == "pre":
            self.norm(f"{pre}/mlp/norm", t, count=n)  # [t, d]
        dense = a.dense_mlp_layers
        if dense:
            self.dense_mlp(pre if len(dense) == n else self._prefix(dense), len(dense))
        if a.moe_layers:  # a pipeline stage may hold dense layers only
            self.ops += build_moe_ops(
                a,
                prefix=self._prefix(a.moe_layers),
                tokens=t,
                count=len(a.moe_layers),
                gemm_dtype=self.precision,
                expert_dtype=self.expert_dtype,
                act_dtype=self.act,
                imbalance=self.moe_imbalance,
            )
        if a.sandwich_norm:
            self.norm(f"{pre}/mlp/post_norm", t, count=n)  # [t, d] (Gemma-3)
        self.elementwise(f"{pre}/mlp/residual_add", "add", t * a.hidden_size, count=n)  # [t, d] + [t, d]
        if a.norm_position == "post":
            self.norm(f"{pre}/mlp/norm", t, count=n)  # [t, d]

    def dense_mlp(self, pre: str, n: int) -> None:
        a, t = self.arch, self.tokens
        d, ff = a.hidden_size, a.intermediate_size
        if a.gated_mlp:
            self.gemm(f"{pre}/mlp/gate_up_proj", m=t, n=2 * ff, k=d, count=n)  # [t, d] x [d, 2*ff]
            self.elementwise(f"{pre}/mlp/act", f"{a.activation}_mul", t * ff, count=n)  # act(gate)*up [t, ff]
        else:
            self.gemm(f"{pre}/mlp/up_proj", m=t, n=ff, k=d, count=n)  # [t, d] x [d, ff]
            self.elementwise(f"{pre}/mlp/act", a.activation, t * ff, count=n)  # [t, ff]
        self.gemm(f"{pre}/mlp/down_proj", m=t, n=d, k=ff, count=n)  # [t, ff] x [ff, d]

    def head(self) -> None:
        a, t, b, root = self.arch, self.tokens, self.batch, self.arch.name
        if a.final_norm:
            self.norm(f"{root}/final_norm", t)  # [t, d]
        if a.embed_dim != a.hidden_size:
            self.gemm(f"{root}/project_out", m=t, n=a.embed_dim, k=a.hidden_size)  # [t, d] x [d, e]
        if a.family == "decoder":
            # NOTE(dse): fp8 checkpoints keep the LM head in bf16 (llm-compressor `ignore: [lm_head]`,
            # TensorRT-LLM's default), so its GEMM runs in the activation dtype.
            head_dtype = self.act if self.precision == "fp8" else self.precision
            # [b, e] x [e, vocab]
            self.gemm(f"{root}/lm_head", m=b, n=a.vocab_size, k=a.embed_dim, dtype=head_dtype)
        if a.pooler:
            # first token of each sequence: [b, d] x [d, d]
            self.gemm(f"{root}/pooler/dense", m=b, n=a.hidden_size, k=a.hidden_size)
            self.elementwise(f"{root}/pooler/act", "tanh", b * a.hidden_size)  # [b, d]

    def graph(self, name: str, meta: dict[str, object]) -> WorkloadGraph:
        self.embeddings()
        self.attention_block()
        self.mlp_block()
        self.head()
        return WorkloadGraph(name=name, ops=tuple(self.ops), meta=meta)


def _meta(arch: LlmArch, imbalance: float, **fields: object) -> dict[str, object]:
    meta: dict[str, object] = {"model": arch.name, "num_params": arch.num_params, **fields}
    if arch.is_moe:
        meta |= {"num_active_params": arch.num_active_params, "moe_imbalance": imbalance}
    return meta


def build_prefill_graph(
    arch: LlmArch,
    *,
    batch: int,
    seq_len: int,
    precision: str = "bf16",
    attention: str = "flash",
    moe_imbalance: float = 1.0,
) -> WorkloadGraph:
    """One forward pass over `batch` sequences of `seq_len` tokens (a decoder's prefill, or an encoder pass).

    Args:
        arch: the model.
        batch: sequences in the batch.
        seq_len: tokens per sequence, at most `arch.max_position_embeddings`.
        precision: GEMM precision, one of PRECISIONS (the module docstring gives the other dtypes).
        attention: `flash` (one fused kernel) or `eager` (score matrix materialized in DRAM).
        moe_imbalance: MoE models: the busiest expert's token load over the mean, >= 1
            (`dse.workload.moe`); 1 spreads the tokens evenly.
    """
    prec, attn = _check_precision(precision), _check_attention(attention)
    batch, seq_len = _check_count("batch", batch), _check_count("seq_len", seq_len)
    _check_mxfp4(arch, prec)
    imbalance = _check_imbalance(moe_imbalance)
    if seq_len > arch.max_position_embeddings:
        raise ConfigError(
            f"seq_len {seq_len} (--seq-len) exceeds {arch.name}'s max_position_embeddings "
            f"{arch.max_position_embeddings}"
        )
    backend: AttentionBackend = "flash" if attn == "flash" else "eager"
    builder = _Builder(
        arch,
        batch=batch,
        q_len=seq_len,
        kv_len=seq_len,
        precision=prec,
        backend=backend,
        moe_imbalance=imbalance,
    )
    meta = _meta(
        arch,
        imbalance,
        phase="prefill",
        batch=batch,
        seq_len=seq_len,
        num_tokens=batch * seq_len,
        precision=prec,
        attention=attn,
    )
    return builder.graph(f"{arch.name}/prefill", meta)


def build_decode_graph(
    arch: LlmArch,
    *,
    batch: int,
    context_len: int,
    precision: str = "bf16",
    attention: str = "flash",
    moe_imbalance: float = 1.0,
) -> WorkloadGraph:
    """One decode step: one new token per sequence, attending to a KV cache of `context_len` tokens.

    The new token sees `context_len + 1` keys (the cache and itself; fewer on local layers). `attention=
    "flash"` selects the flash-decoding kernel (backend `decode`), `"eager"` the eager one.

    Args:
        arch: a decoder.
        batch: sequences decoding together, one new token each.
        context_len: tokens already in each sequence's KV cache (prompt plus tokens generated so far), >= 1.
        precision: GEMM precision, one of PRECISIONS.
        attention: `flash` or `eager`.
        moe_imbalance: MoE models: the busiest expert's token load over the mean, >= 1.
    """
    prec, attn = _check_precision(precision), _check_attention(attention)
    batch, context_len = _check_count("batch", batch), _check_count("context_len", context_len)
    _check_mxfp4(arch, prec)
    imbalance = _check_imbalance(moe_imbalance)
    if arch.family != "decoder":
        raise ConfigError(f"{arch.name} is an encoder ({arch.model_type}): it has no decode phase")
    if context_len + 1 > arch.max_position_embeddings:
        raise ConfigError(
            f"context_len {context_len} + 1 new token exceeds {arch.name}'s "
            f"max_position_embeddings {arch.max_position_embeddings}"
        )
    backend: AttentionBackend = "decode" if attn == "flash" else "eager"
    builder = _Builder(
        arch,
        batch=batch,
        q_len=1,
        kv_len=context_len + 1,
        precision=prec,
        backend=backend,
        moe_imbalance=imbalance,
    )
    meta = _meta(
        arch,
        imbalance,
        phase="decode",
        batch=batch,
        context_len=context_len,
        num_tokens=batch,
        precision=prec,
        attention=attn,
    )
    return builder.graph(f"{arch.name}/decode", meta)

"""Transformer language models as workload graphs: `LlmArch` and the prefill / decode builders.

    arch = load_model_config("llama-3.1-8b")                  # dse.workload.models: HF config -> LlmArch
    g = build_prefill_graph(arch, batch=8, seq_len=2048)       # one forward pass over 8 x 2048 tokens
    g = build_decode_graph(arch, batch=32, context_len=4096)   # one new token per sequence, KV cache of 4096

`LlmArch` is the normalized form of a Hugging-Face config: three families share one layer template.

    llama / mistral / qwen2   decoder, pre-RMSNorm, RoPE, GQA, gated SiLU MLP (qwen2: q/k/v biases)
    qwen3                     the same, no q/k/v biases, explicit head_dim, and an RMSNorm over the head
                              dim of every q and k head before RoPE (`qk_norm`: ops attn/q_norm, k_norm)
    gpt2 / opt                decoder, pre-LayerNorm (OPT may be post-LN), learned positions, GELU/ReLU
                              MLP, biases everywhere, tied LM head
    bert                      encoder, post-LayerNorm, learned positions + token types, GELU MLP, pooler

Graph conventions (one op per distinct kernel; a repeated layer is one op with `count = num_layers`):

- Names are hierarchical, `<model>/layer[0-31]/attn/qkv_proj`; each block's norm and residual add live
  under its block (`attn/norm`, `mlp/residual_add`) whether the model is pre-LN or post-LN.
- q, k and v are one fused GEMM, gate and up one fused GEMM, weights are `b_shared`, and the tokens of
  all sequences form the GEMM's `m` (`batch=1`). Biases are fused into the GEMM epilogue (cuBLASLt), so
  they cost no extra kernel.
- Attention is one `AttentionOp` whatever the backend: `eager` (QK^T, softmax, PV with the score matrix in
  DRAM) is expanded by the kernel model, not here.
- The LM head of a prefill runs on the last token of each sequence only (`batch` rows), as serving engines
  do (vLLM, TensorRT-LLM); HF `generate` in eager mode computes all `batch * seq_len` rows. A decode step
  also has `batch` rows. Encoders end with BERT's pooler instead (first token of each sequence).
- Decoders write the k and v of the new tokens into the KV cache with one copy kernel per layer
  (`attn/kv_cache_write`, vLLM's `reshape_and_cache`), in prefill and decode alike.
- Precision: GEMM inputs in `precision` (`fp32` runs on CUDA cores, `tf32` on Tensor Cores); activations,
  norms, elementwise ops and the KV cache in fp32 for fp32/tf32, in bf16 for fp8, else in `precision`.
  fp8 GEMMs write bf16 and each is preceded by the cast that quantizes its activation input
  (`attn/qkv_quant` ...); the LM head stays in bf16 and attention runs in bf16 under fp8.

Sliding-window attention (Mistral-7B-v0.1: `LlmArch.sliding_window` = 4096): a decoding token attends
to the last `sliding_window` keys, so decode attention reads at most that many. NOTE(dse): a prefill
longer than the window is still modelled as full causal attention (`AttentionOp` has no window), an
overestimate of its attention work; the KV-cache footprint is the full context's (engines that free
blocks outside the window need less).
"""

from __future__ import annotations

from typing import Literal, cast

from pydantic import BaseModel, ConfigDict, Field, model_validator

from dse.errors import ConfigError
from dse.workload.graph import WorkloadGraph
from dse.workload.ops import (
    BYTES_PER_ELEMENT,
    AttentionBackend,
    AttentionOp,
    Dtype,
    ElementwiseOp,
    GemmOp,
    NormKind,
    NormOp,
    Op,
)

Precision = Literal["fp32", "tf32", "bf16", "fp16", "fp8"]
PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8")
ATTENTION_IMPLS: tuple[str, ...] = ("flash", "eager")


class LlmArch(BaseModel):
    """A transformer's architecture, normalized from a Hugging-Face `config.json` (see `dse.workload.models`).

    Dimensions use the HF meanings: `intermediate_size` is the MLP width (per branch for gated MLPs),
    `head_dim` may differ from `hidden_size / num_heads` (given explicitly in some configs).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, description="catalog name or file stem; prefixes every op name")
    model_type: str = Field(description="HF model_type the config was read as (llama, gpt2, bert ...)")
    family: Literal["decoder", "encoder"]
    hidden_size: int = Field(gt=0)
    num_layers: int = Field(gt=0)
    num_heads: int = Field(gt=0)
    num_kv_heads: int = Field(gt=0)
    head_dim: int = Field(gt=0)
    intermediate_size: int = Field(gt=0)
    vocab_size: int = Field(gt=0)
    max_position_embeddings: int = Field(gt=0, description="longest sequence (context) the model accepts")
    embed_dim: int = Field(gt=0, description="token-embedding width (OPT word_embed_proj_dim, else hidden)")
    norm: NormKind
    norm_eps: float = Field(gt=0)
    norm_position: Literal["pre", "post"]
    activation: Literal["silu", "gelu", "relu"]
    gated_mlp: bool
    position_embedding: Literal["rope", "learned"]
    num_position_embeddings: int = Field(default=0, ge=0, description="rows of a learned table (OPT: +2)")
    type_vocab_size: int = Field(default=0, ge=0, description="BERT token-type (segment) embeddings")
    qkv_bias: bool
    o_bias: bool
    mlp_bias: bool
    tie_word_embeddings: bool
    embedding_norm: bool = Field(default=False, description="LayerNorm after the embeddings (BERT)")
    final_norm: bool = Field(default=True, description="norm after the last layer (pre-LN decoders)")
    qk_norm: bool = Field(default=False, description="RMSNorm of each q and k head over head_dim (Qwen3)")
    pooler: bool = Field(default=False, description="BERT pooler: dense + tanh on the first token")
    rope_theta: float | None = None
    sliding_window: int | None = Field(default=None, gt=0)

    @model_validator(mode="after")
    def _check(self) -> LlmArch:
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"num_heads {self.num_heads} is no multiple of num_kv_heads {self.num_kv_heads}")
        if (self.position_embedding == "learned") != (self.num_position_embeddings > 0):
            raise ValueError("num_position_embeddings must be > 0 exactly when position_embedding is learned")
        if self.num_position_embeddings and self.num_position_embeddings < self.max_position_embeddings:
            raise ValueError("num_position_embeddings is smaller than max_position_embeddings")
        if self.gated_mlp and self.activation == "relu":
            raise ValueError("a gated MLP needs activation silu or gelu")
        if self.family == "encoder" and (self.position_embedding != "learned" or self.final_norm):
            raise ValueError("encoders (BERT) have learned positions and no final norm")
        if self.pooler and self.family != "encoder":
            raise ValueError("only encoders have a pooler")
        return self

    # ---- derived dimensions
    @property
    def causal(self) -> bool:
        return self.family == "decoder"

    @property
    def q_dim(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_dim(self) -> int:
        return self.num_kv_heads * self.head_dim

    def decode_keys(self, kv_len: int) -> int:
        """Keys a decoding token attends to with `kv_len` tokens cached: all, or the last
        `sliding_window` (Mistral-7B-v0.1)."""
        return kv_len if self.sliding_window is None else min(kv_len, self.sliding_window)

    @property
    def kv_cache_elements_per_token(self) -> int:
        """K and V elements cached per token over all layers (multiply by the KV dtype's bytes)."""
        return 2 * self.num_layers * self.kv_dim

    # ---- parameter counts
    def _norm_params(self) -> int:
        return self.hidden_size * (2 if self.norm == "layernorm" else 1)

    @property
    def num_layer_params(self) -> int:
        """Parameters of one transformer layer: attention, MLP and its two norms."""
        d, ff = self.hidden_size, self.intermediate_size
        attn = d * (self.q_dim + 2 * self.kv_dim) + self.q_dim * d
        attn += (self.q_dim + 2 * self.kv_dim) * self.qkv_bias + d * self.o_bias
        num_up = 2 if self.gated_mlp else 1
        mlp = (num_up + 1) * d * ff + (num_up * ff + d) * self.mlp_bias
        qk_norm = 2 * self.head_dim * self.qk_norm  # one weight of head_dim each, shared by all heads
        return attn + mlp + 2 * self._norm_params() + qk_norm

    def param_counts(self) -> dict[str, int]:
        """Exact parameter counts by part; tied embeddings are counted once (under `embedding`).

        `embedding`: token, position and token-type tables; `layers`: all transformer layers;
        `other`: embedding / final norms and OPT's embedding projections; `lm_head`: 0 when tied or for
        encoders; `pooler`: BERT's pooler. BERT is counted as `BertModel` (the backbone every BERT head
        shares, with its pooler); the masked-LM head is not part of the graph.
        """
        d, e = self.hidden_size, self.embed_dim
        embedding = self.vocab_size * e + self.num_position_embeddings * d + self.type_vocab_size * d
        other = self._norm_params() * (self.embedding_norm + self.final_norm) + (2 * d * e if e != d else 0)
        has_head = self.family == "decoder" and not self.tie_word_embeddings
        return {
            "embedding": embedding,
            "layers": self.num_layers * self.num_layer_params,
            "other": other,
            "lm_head": self.vocab_size * e if has_head else 0,
            "pooler": d * d + d if self.pooler else 0,
        }

    @property
    def num_params(self) -> int:
        """All parameters, embeddings included, tied embeddings once."""
        return sum(self.param_counts().values())


# ---- memory footprint (bytes), used by the serving predictor's capacity check


def weight_bytes(arch: LlmArch, precision: str) -> float:
    """Bytes of all weights: transformer layers in the GEMM precision, the rest in the activation dtype.

    Embeddings, norms and the LM head stay in the activation dtype under fp8 (as fp8 checkpoints ship them).
    """
    prec = _check_precision(precision)
    counts = arch.param_counts()
    gemm_b = BYTES_PER_ELEMENT[prec]
    act_b = BYTES_PER_ELEMENT[_act_dtype(prec)]
    return counts["layers"] * gemm_b + (arch.num_params - counts["layers"]) * act_b


def kv_cache_bytes(arch: LlmArch, precision: str, num_tokens: int) -> float:
    """KV cache of `num_tokens` tokens (summed over sequences) in the activation dtype."""
    return (
        float(num_tokens)
        * arch.kv_cache_elements_per_token
        * BYTES_PER_ELEMENT[_act_dtype(_check_precision(precision))]
    )


def prefill_activation_bytes(
    arch: LlmArch, precision: str, *, batch: int, seq_len: int, attention: str
) -> float:
    """Peak transient activations of one prefill layer (layers run one after another) plus fp32 logits.

    Per token: residual, normed input, attention output and MLP output (4 d), Q/K/V, and the MLP's up/gate
    outputs and activation (3 ff). Eager attention also materializes one layer's score matrix.
    """
    act_b = BYTES_PER_ELEMENT[_act_dtype(_check_precision(precision))]
    tokens = batch * seq_len
    per_token = 4 * arch.hidden_size + arch.q_dim + 2 * arch.kv_dim + 3 * arch.intermediate_size
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
        raise ConfigError(f"precision '{value}' is not one of {', '.join(PRECISIONS)}")
    return cast(Precision, value)


def _check_attention(value: object) -> str:
    if value not in ATTENTION_IMPLS:
        raise ConfigError(f"attention '{value}' is not one of {', '.join(ATTENTION_IMPLS)}")
    return str(value)


def activation_dtype(precision: str) -> Dtype:
    """Dtype of activations and of the KV cache at `precision` (ConfigError for an unknown precision)."""
    return _act_dtype(_check_precision(precision))


def _act_dtype(precision: Precision) -> Dtype:
    """Dtype of activations, norms, elementwise ops and the KV cache."""
    if precision in ("fp32", "tf32"):
        return "fp32"
    return "bf16" if precision == "fp8" else precision


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
    ) -> None:
        self.arch, self.batch, self.q_len, self.kv_len = arch, batch, q_len, kv_len
        self.tokens = batch * q_len
        self.precision: Dtype = precision
        self.act = _act_dtype(precision)
        # fp8 attention (FA3) is not the default anywhere: attention runs in bf16 then.
        self.attn_dtype: Dtype = "bf16" if precision == "fp8" else precision
        self.backend = backend
        self.ops: list[Op] = []
        last = arch.num_layers - 1
        self.layer = f"{arch.name}/layer[0-{last}]" if last else f"{arch.name}/layer[0]"

    def gemm(self, name: str, *, m: int, n: int, k: int, count: int = 1, dtype: Dtype | None = None) -> None:
        """A weight GEMM [m, k] x [k, n]; fp8 inputs are first quantized from the bf16 activations."""
        dtype = dtype or self.precision
        if dtype == "fp8":
            # NOTE(dse): dynamic per-tensor fp8 quantization of the activation is a kernel of its own unless a
            # compiler fuses it into the producer (vLLM `scaled_fp8_quant`); the weights are stored in fp8.
            quant = name.removesuffix("_proj") + "_quant"
            self.ops.append(
                ElementwiseOp(
                    name=quant, kind="cast", num_elements=m * k, dtype=self.act, out_dtype="fp8", count=count
                )
            )
        out_dtype: Dtype | None = "bf16" if dtype == "fp8" else None
        self.ops.append(
            GemmOp(name=name, m=m, n=n, k=k, dtype=dtype, out_dtype=out_dtype, b_shared=True, count=count)
        )

    def elementwise(self, name: str, kind: str, num_elements: int, count: int = 1) -> None:
        self.ops.append(
            ElementwiseOp(name=name, kind=kind, num_elements=num_elements, dtype=self.act, count=count)
        )

    def norm(self, name: str, rows: int, count: int = 1) -> None:
        self.ops.append(
            NormOp(
                name=name,
                rows=rows,
                cols=self.arch.hidden_size,
                kind=self.arch.norm,
                dtype=self.act,
                count=count,
            )
        )

    def embeddings(self) -> None:
        a, t, root = self.arch, self.tokens, self.arch.name
        self.elementwise(f"{root}/embed/tokens", "copy", t * a.embed_dim)  # gather [t, e] from [vocab, e]
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
        # [t, d] x [d, (h+2kv)*hd]
        self.gemm(f"{pre}/attn/qkv_proj", m=t, n=a.q_dim + 2 * a.kv_dim, k=d, count=n)
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
        # softmax(q k^T) v: q [b, h, s_q, hd] against k, v [b, kv, s_kv, hd]
        kv_len = a.decode_keys(self.kv_len) if self.q_len == 1 else self.kv_len
        self.ops.append(
            AttentionOp(
                name=f"{pre}/attn/attention",
                batch=self.batch,
                num_heads=a.num_heads,
                num_kv_heads=a.num_kv_heads,
                head_dim=a.head_dim,
                seq_len_q=self.q_len,
                seq_len_kv=kv_len,
                causal=a.causal,
                backend=self.backend,
                dtype=self.attn_dtype,
                kv_dtype=self.act,
                count=n,
            )
        )
        self.gemm(f"{pre}/attn/o_proj", m=t, n=d, k=a.q_dim, count=n)  # [t, h*hd] x [h*hd, d]
        self.elementwise(f"{pre}/attn/residual_add", "add", t * d, count=n)  # [t, d] + [t, d]
        if a.norm_position == "post":
            self.norm(f"{pre}/attn/norm", t, count=n)  # [t, d]

    def mlp_block(self) -> None:
        a, t, n, pre = self.arch, self.tokens, self.arch.num_layers, self.layer
        d, ff = a.hidden_size, a.intermediate_size
        if a.norm_position == "pre":
            self.norm(f"{pre}/mlp/norm", t, count=n)  # [t, d]
        if a.gated_mlp:
            self.gemm(f"{pre}/mlp/gate_up_proj", m=t, n=2 * ff, k=d, count=n)  # [t, d] x [d, 2*ff]
            self.elementwise(f"{pre}/mlp/act", f"{a.activation}_mul", t * ff, count=n)  # act(gate)*up [t, ff]
        else:
            self.gemm(f"{pre}/mlp/up_proj", m=t, n=ff, k=d, count=n)  # [t, d] x [d, ff]
            self.elementwise(f"{pre}/mlp/act", a.activation, t * ff, count=n)  # [t, ff]
        self.gemm(f"{pre}/mlp/down_proj", m=t, n=d, k=ff, count=n)  # [t, ff] x [ff, d]
        self.elementwise(f"{pre}/mlp/residual_add", "add", t * d, count=n)  # [t, d] + [t, d]
        if a.norm_position == "post":
            self.norm(f"{pre}/mlp/norm", t, count=n)  # [t, d]

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


def build_prefill_graph(
    arch: LlmArch, *, batch: int, seq_len: int, precision: str = "bf16", attention: str = "flash"
) -> WorkloadGraph:
    """One forward pass over `batch` sequences of `seq_len` tokens (a decoder's prefill, or an encoder pass).

    Args:
        arch: the model.
        batch: sequences in the batch.
        seq_len: tokens per sequence, at most `arch.max_position_embeddings`.
        precision: GEMM precision, one of PRECISIONS (the module docstring gives the other dtypes).
        attention: `flash` (one fused kernel) or `eager` (score matrix materialized in DRAM).
    """
    prec, attn = _check_precision(precision), _check_attention(attention)
    batch, seq_len = _check_count("batch", batch), _check_count("seq_len", seq_len)
    if seq_len > arch.max_position_embeddings:
        raise ConfigError(
            f"seq_len {seq_len} exceeds {arch.name}'s max_position_embeddings {arch.max_position_embeddings}"
        )
    backend: AttentionBackend = "flash" if attn == "flash" else "eager"
    builder = _Builder(arch, batch=batch, q_len=seq_len, kv_len=seq_len, precision=prec, backend=backend)
    meta: dict[str, object] = {
        "model": arch.name,
        "num_params": arch.num_params,
        "phase": "prefill",
        "batch": batch,
        "seq_len": seq_len,
        "num_tokens": batch * seq_len,
        "precision": prec,
        "attention": attn,
    }
    return builder.graph(f"{arch.name}/prefill", meta)


def build_decode_graph(
    arch: LlmArch, *, batch: int, context_len: int, precision: str = "bf16", attention: str = "flash"
) -> WorkloadGraph:
    """One decode step: one new token per sequence, attending to a KV cache of `context_len` tokens.

    The new token sees `context_len + 1` keys (the cache and itself). `attention="flash"` selects the
    flash-decoding kernel (backend `decode`), `"eager"` the eager one.

    Args:
        arch: a decoder.
        batch: sequences decoding together, one new token each.
        context_len: tokens already in each sequence's KV cache (prompt plus tokens generated so far), >= 1.
        precision: GEMM precision, one of PRECISIONS.
        attention: `flash` or `eager`.
    """
    prec, attn = _check_precision(precision), _check_attention(attention)
    batch, context_len = _check_count("batch", batch), _check_count("context_len", context_len)
    if arch.family != "decoder":
        raise ConfigError(f"{arch.name} is an encoder ({arch.model_type}): it has no decode phase")
    if context_len + 1 > arch.max_position_embeddings:
        raise ConfigError(
            f"context_len {context_len} + 1 new token exceeds {arch.name}'s "
            f"max_position_embeddings {arch.max_position_embeddings}"
        )
    backend: AttentionBackend = "decode" if attn == "flash" else "eager"
    builder = _Builder(arch, batch=batch, q_len=1, kv_len=context_len + 1, precision=prec, backend=backend)
    meta: dict[str, object] = {
        "model": arch.name,
        "num_params": arch.num_params,
        "phase": "decode",
        "batch": batch,
        "context_len": context_len,
        "num_tokens": batch,
        "precision": prec,
        "attention": attn,
    }
    return builder.graph(f"{arch.name}/decode", meta)

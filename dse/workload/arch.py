"""`LlmArch`: a transformer's architecture, normalized from a Hugging-Face config, and its parameter counts.

Four families share one layer template (`dse.workload.llm` builds the graphs, `dse.workload.models` reads
the configs):

    llama / mistral / qwen2   decoder, pre-RMSNorm, RoPE, GQA, gated SiLU MLP (qwen2: q/k/v biases)
    qwen3                     the same, no q/k/v biases, explicit head_dim, and an RMSNorm over the head
                              dim of every q and k head before RoPE (`qk_norm`)
    gpt2 / opt                decoder, pre-LayerNorm (OPT may be post-LN), learned positions, GELU/ReLU
                              MLP, biases everywhere, tied LM head
    bert                      encoder, post-LayerNorm, learned positions + token types, GELU MLP, pooler

On top of that template, the newer architectures switch on optional parts (all off by default, so a
dense model reads exactly as before):

- Mixture of experts (`num_experts` > 0: Mixtral, Qwen3-MoE, DeepSeek-V3, gpt-oss, Llama-4): the MLP of
  the MoE layers is a router over `num_experts` gated MLPs of width `moe_intermediate_size`, of which
  each token uses `num_experts_per_tok`, plus an always-on shared expert of width
  `shared_expert_intermediate_size` (DeepSeek, Llama-4). `dense_layers` lists the layers that keep a
  dense MLP of `intermediate_size` (DeepSeek's first 3, Llama-4 Maverick's even layers).
- Multi-head latent attention (`kv_lora_rank` > 0: DeepSeek-V2/V3): q and kv are projected through
  low-rank latents; the KV cache holds one latent of `kv_lora_rank + qk_rope_head_dim` per token and layer.
  DeepSeek sparse attention (`index_topk` > 0: DeepSeek-V3.2, GLM-5) adds a lightning indexer that picks
  the `index_topk` (2048) keys each query attends to; it caches one fp8 key of `index_head_dim` per token.
- Local attention on some layers (`local_layers`): a sliding window (`sliding_window`: gpt-oss every other
  layer, 128; Gemma-3 five of every six, 1024) or chunked attention (`attention_chunk_size`: Llama-4,
  three of every four layers, 8192). With a window and `local_layers` None every layer is local
  (Mistral-7B-v0.1).
- Linear attention on some layers (`linear_layers`: Qwen3-Next and Qwen3.5, three of every four): Gated
  DeltaNet, whose per-sequence recurrent state (dk x dv per value head) replaces the KV cache of those
  layers (`dse.workload.linear_attention`); the full-attention layers of these models gate their output
  (`attn_output_gate`).
- Gemma-3's extra norms after attention and after the MLP (`sandwich_norm`) and its sqrt(d) embedding
  scale; gpt-oss's attention sinks (one learned logit per head) and expert biases.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from dse.workload.ops import NormKind


def layer_label(indices: tuple[int, ...]) -> str:
    """Hierarchical label of a set of layers: `layer[0-31]`, `layer[1-47:2]` (every 2nd), `layer[0,1,5]`."""
    if len(indices) == 1:
        return f"layer[{indices[0]}]"
    steps = {b - a for a, b in zip(indices, indices[1:], strict=False)}
    if len(steps) == 1:
        (step,) = steps
        return (
            f"layer[{indices[0]}-{indices[-1]}]" if step == 1 else f"layer[{indices[0]}-{indices[-1]}:{step}]"
        )
    return "layer[" + ",".join(str(i) for i in indices) + "]"


class LlmArch(BaseModel):
    """A transformer's architecture, normalized from a Hugging-Face `config.json` (see `dse.workload.models`).

    Dimensions use the HF meanings: `intermediate_size` is the dense MLP width (per branch for gated MLPs),
    `head_dim` may differ from `hidden_size / num_heads` (given explicitly in some configs). The optional
    MoE, MLA and local-attention parts are described in the module docstring.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str = Field(min_length=1, description="catalog name or file stem; prefixes every op name")
    model_type: str = Field(description="HF model_type the config was read as (llama, gpt2, bert ...)")
    family: Literal["decoder", "encoder"]
    hidden_size: int = Field(gt=0)
    num_layers: int = Field(gt=0, le=10_000)  # the deepest model is ~200 layers; a bound keeps lists small
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
    # ---- local attention on some layers (module docstring)
    attention_chunk_size: int | None = Field(default=None, gt=0, description="Llama-4 chunked attention")
    local_layers: tuple[int, ...] | None = Field(
        default=None, description="layers with the window or chunk; None = all (when either is set)"
    )
    # ---- Gemma-3 and gpt-oss details
    sandwich_norm: bool = Field(default=False, description="norms after attention and MLP too (Gemma-3)")
    embedding_scale: bool = Field(default=False, description="embeddings scaled by sqrt(hidden) (Gemma)")
    attention_sinks: bool = Field(default=False, description="one learned softmax logit per head (gpt-oss)")
    # ---- multi-head latent attention (DeepSeek); kv_lora_rank 0 = ordinary attention
    q_lora_rank: int = Field(default=0, ge=0, description="0: q projected directly (no q latent)")
    kv_lora_rank: int = Field(default=0, ge=0)
    qk_rope_head_dim: int = Field(default=0, ge=0)
    qk_nope_head_dim: int = Field(default=0, ge=0)
    v_head_dim: int = Field(default=0, ge=0)
    # ---- DeepSeek sparse attention (DeepSeek-V3.2, GLM-5) on top of MLA; index_topk 0 = dense attention
    index_topk: int = Field(default=0, ge=0, description="keys each query attends to, picked by the indexer")
    index_n_heads: int = Field(default=0, ge=0, description="the lightning indexer's query heads")
    index_head_dim: int = Field(default=0, ge=0, description="the indexer's q/k width (one cached key)")
    # ---- linear-attention layers (Gated DeltaNet: Qwen3-Next, Qwen3.5); linear_layers () = none
    linear_layers: tuple[int, ...] = Field(default=(), description="layers with Gated DeltaNet attention")
    linear_num_key_heads: int = Field(default=0, ge=0)
    linear_key_head_dim: int = Field(default=0, ge=0)
    linear_num_value_heads: int = Field(default=0, ge=0)
    linear_value_head_dim: int = Field(default=0, ge=0)
    linear_conv_kernel: int = Field(default=0, ge=0, description="causal conv1d width before the recurrence")
    linear_state_dtype: Literal["fp32", "bf16", "fp16"] = Field(
        default="fp32", description="the recurrent state's dtype (the config's mamba_ssm_dtype)"
    )
    attn_output_gate: bool = Field(default=False, description="sigmoid gate on the attention output")
    # ---- mixture of experts; num_experts 0 = dense
    num_experts: int = Field(default=0, ge=0, description="routed experts per MoE layer")
    num_experts_per_tok: int = Field(default=0, ge=0, description="routed experts each token uses (top-k)")
    moe_intermediate_size: int = Field(default=0, ge=0, description="width of one routed expert")
    shared_expert_intermediate_size: int = Field(default=0, ge=0, description="all shared experts, summed")
    dense_layers: tuple[int, ...] = Field(default=(), description="MoE models: layers with a dense MLP")
    moe_bias: bool = Field(default=False, description="router and experts have biases (gpt-oss)")
    # ---- the published checkpoint's weights (`dse.workload.quantization`); None: 16-bit
    checkpoint_scheme: Literal["fp8", "mxfp4", "4-bit", "int8"] | None = Field(
        default=None, description="how the checkpoint stores its weights (quantization_config, Hub-id suffix)"
    )
    checkpoint_precision: Literal["fp8", "mxfp4"] | None = Field(
        default=None, description="the precision that scheme is priced at (fp8 weights, 4-bit MoE experts)"
    )

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
        self._check_variants()
        return self

    def _check_variants(self) -> None:
        """The optional parts: each either off or complete and consistent."""
        layers = range(self.num_layers)
        if self.sliding_window is not None and self.attention_chunk_size is not None:
            raise ValueError("a model has a sliding window or attention chunks, not both")
        if self.local_layers is not None:
            if self.sliding_window is None and self.attention_chunk_size is None:
                raise ValueError("local_layers needs a sliding_window or an attention_chunk_size")
            if not set(self.local_layers) <= set(layers) or list(self.local_layers) != sorted(
                set(self.local_layers)
            ):
                raise ValueError(f"local_layers must be ascending layer indices in 0..{self.num_layers - 1}")
        if self.is_mla and min(self.qk_rope_head_dim, self.qk_nope_head_dim, self.v_head_dim) <= 0:
            raise ValueError("MLA (kv_lora_rank > 0) needs qk_rope_head_dim, qk_nope_head_dim and v_head_dim")
        linear: tuple[int, ...] = (self.linear_num_key_heads, self.linear_key_head_dim)
        linear += (self.linear_num_value_heads, self.linear_value_head_dim, self.linear_conv_kernel)
        ordered = list(self.linear_layers) == sorted(set(self.linear_layers))
        if self.linear_layers and not (
            min(linear) > 0
            and self.linear_num_value_heads % self.linear_num_key_heads == 0
            and ordered
            and set(self.linear_layers) < set(layers)
        ):
            raise ValueError(
                "linear_layers need their head counts and widths, and some full-attention layers"
            )
        indexer = (self.index_topk, self.index_n_heads, self.index_head_dim)
        if any(indexer) and not (min(indexer) > 0 and self.is_mla and self.q_lora_rank):
            raise ValueError(
                "sparse attention needs index_topk, index_n_heads, index_head_dim, MLA and a q latent"
            )
        if not self.is_moe:
            if self.num_experts_per_tok or self.moe_intermediate_size or self.dense_layers or self.moe_bias:
                raise ValueError("MoE fields are set but num_experts is 0")
            return
        if not 1 <= self.num_experts_per_tok <= self.num_experts:
            raise ValueError(f"num_experts_per_tok must be in 1..num_experts {self.num_experts}")
        if self.moe_intermediate_size <= 0 or not self.gated_mlp:
            raise ValueError("an MoE model needs moe_intermediate_size > 0 and gated experts")
        if not set(self.dense_layers) <= set(layers) or list(self.dense_layers) != sorted(
            set(self.dense_layers)
        ):
            raise ValueError(f"dense_layers must be ascending layer indices in 0..{self.num_layers - 1}")
        if len(self.dense_layers) == self.num_layers:
            raise ValueError("an MoE model needs at least one MoE layer")

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

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def serving_precision(self) -> str:
        """What an engine serves this checkpoint at when no precision is asked for: its priced scheme, or
        bf16 (`dse.workload.quantization`)."""
        return self.checkpoint_precision or "bf16"

    @property
    def is_mla(self) -> bool:
        return self.kv_lora_rank > 0

    @property
    def qk_head_dim(self) -> int:
        """Per-head q/k width: MLA's nope + rope parts, else head_dim."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim if self.is_mla else self.head_dim

    @property
    def moe_layers(self) -> tuple[int, ...]:
        """Indices of the layers whose MLP is a mixture of experts (empty for dense models)."""
        if not self.is_moe:
            return ()
        dense = set(self.dense_layers)
        return tuple(i for i in range(self.num_layers) if i not in dense)

    @property
    def dense_mlp_layers(self) -> tuple[int, ...]:
        """Indices of the layers with a dense MLP of `intermediate_size`."""
        return self.dense_layers if self.is_moe else tuple(range(self.num_layers))

    @property
    def local_attention_layers(self) -> tuple[int, ...]:
        """Indices of the layers with sliding-window or chunked attention."""
        if self.sliding_window is None and self.attention_chunk_size is None:
            return ()
        return tuple(range(self.num_layers)) if self.local_layers is None else self.local_layers

    def decode_keys(self, kv_len: int, *, local: bool | None = None) -> int:
        """Keys a decoding token attends to with `kv_len` tokens in the cache (itself included).

        Args:
            kv_len: tokens in the sequence so far.
            local: whether the layer is a local one (`local_attention_layers`). None: the model's only
                kind of layer when all layers are alike (Mistral-7B-v0.1's window on every layer), else
                a global layer.
        """
        if local is None:
            local = len(self.local_attention_layers) == self.num_layers
        if not local:
            return kv_len
        if self.attention_chunk_size is not None:
            return (kv_len - 1) % self.attention_chunk_size + 1  # the keys of the token's own chunk
        return kv_len if self.sliding_window is None else min(kv_len, self.sliding_window)

    @property
    def full_attention_layers(self) -> tuple[int, ...]:
        """Layers with softmax attention and a KV cache: all but `linear_layers`."""
        linear = set(self.linear_layers)
        return tuple(i for i in range(self.num_layers) if i not in linear)

    @property
    def linear_state_elements(self) -> int:
        """Recurrent-state elements of one sequence in one linear-attention layer: a dk x dv matrix per
        value head (`dse.workload.linear_attention`)."""
        return self.linear_num_value_heads * self.linear_key_head_dim * self.linear_value_head_dim

    @property
    def is_sparse_attention(self) -> bool:
        """DeepSeek sparse attention: an indexer picks `index_topk` keys per query (`dse.workload.mla`)."""
        return self.index_topk > 0

    @property
    def kv_cache_elements_per_token(self) -> int:
        """Elements cached per token over all layers in the KV dtype (multiply by its bytes): K and V, or
        MLA's one latent of `kv_lora_rank + qk_rope_head_dim` (K and V are both recovered from it). The
        sparse-attention indexer's keys are `indexer_cache_bytes_per_token`, fp8 whatever the KV dtype."""
        if self.is_mla:
            return self.num_layers * (self.kv_lora_rank + self.qk_rope_head_dim)
        return 2 * len(self.full_attention_layers) * self.kv_dim

    @property
    def indexer_cache_bytes_per_token(self) -> int:
        """Sparse attention's indexer keys per token over all layers: fp8 with an fp32 scale per 128
        (vLLM and SGLang's DeepSeek-V3.2 layout); 0 without sparse attention."""
        idx = self.index_head_dim
        return self.num_layers * (idx + 4 * -(-idx // 128)) if self.is_sparse_attention else 0

    # ---- parameter counts
    def _norm_params(self) -> int:
        return self.hidden_size * (2 if self.norm == "layernorm" else 1)

    def _attention_params(self) -> int:
        """Attention projections (with biases, q/k norms, sinks) of one layer, without its block norms."""
        d, h = self.hidden_size, self.num_heads
        if self.is_mla:
            q_out = h * self.qk_head_dim
            q = d * q_out if not self.q_lora_rank else (d + 1 + q_out) * self.q_lora_rank  # + q_a norm
            kv_latent = self.kv_lora_rank + self.qk_rope_head_dim
            kv = d * kv_latent + self.kv_lora_rank * (1 + h * (self.qk_nope_head_dim + self.v_head_dim))
            # the indexer: q from the q latent, one key (LayerNorm'd) and a weight per head from x
            n_idx, idx = self.index_n_heads, self.index_head_dim
            indexer = self.q_lora_rank * n_idx * idx + d * (idx + n_idx) + 2 * idx
            return q + kv + h * self.v_head_dim * d + indexer
        attn = d * (self.q_dim + 2 * self.kv_dim) + self.q_dim * d + d * self.q_dim * self.attn_output_gate
        attn += (self.q_dim + 2 * self.kv_dim) * self.qkv_bias + d * self.o_bias
        return attn + 2 * self.head_dim * self.qk_norm + h * self.attention_sinks

    def _linear_attention_params(self) -> int:
        """A Gated DeltaNet layer: q, k, v, z and the beta / decay inputs from x, the conv1d over q, k and v,
        the decay's A and bias per value head, the gated norm over dv, the output projection."""
        d, hv = self.hidden_size, self.linear_num_value_heads
        key, value = self.linear_num_key_heads * self.linear_key_head_dim, hv * self.linear_value_head_dim
        conv = (2 * key + value) * self.linear_conv_kernel
        return d * (2 * key + 2 * value + 2 * hv) + conv + 2 * hv + self.linear_value_head_dim + value * d

    def _mlp_params(self, width: int, bias: bool) -> int:
        d, num_up = self.hidden_size, (2 if self.gated_mlp else 1)
        return (num_up + 1) * d * width + (num_up * width + d) * bias

    @property
    def num_layer_params(self) -> int:
        """Parameters of one dense transformer layer: attention, MLP and its norms."""
        d, ff = self.hidden_size, self.intermediate_size
        attn = d * (self.q_dim + 2 * self.kv_dim) + self.q_dim * d
        attn += (self.q_dim + 2 * self.kv_dim) * self.qkv_bias + d * self.o_bias
        num_up = 2 if self.gated_mlp else 1
        mlp = (num_up + 1) * d * ff + (num_up * ff + d) * self.mlp_bias
        qk_norm = 2 * self.head_dim * self.qk_norm  # one weight of head_dim each, shared by all heads
        return attn + mlp + 2 * self._norm_params() + qk_norm

    @property
    def num_expert_params(self) -> int:
        """Parameters of one routed expert (0 for dense models)."""
        return self._mlp_params(self.moe_intermediate_size, self.moe_bias) if self.is_moe else 0

    def _layers_params(self) -> int:
        """All layers without their routed experts."""
        if not (
            self.is_moe or self.is_mla or self.sandwich_norm or self.attention_sinks or self.linear_layers
        ):
            return self.num_layers * self.num_layer_params  # the plain template, counted as it always was
        norms = (2 + 2 * self.sandwich_norm) * self._norm_params()
        total = self.num_layers * norms + len(self.full_attention_layers) * self._attention_params()
        total += len(self.linear_layers) * self._linear_attention_params()
        total += len(self.dense_mlp_layers) * self._mlp_params(self.intermediate_size, self.mlp_bias)
        router = self.hidden_size * self.num_experts + self.num_experts * self.moe_bias
        shared = self._mlp_params(self.shared_expert_intermediate_size, False)
        return total + len(self.moe_layers) * (router + shared * (self.shared_expert_intermediate_size > 0))

    def param_counts(self) -> dict[str, int]:
        """Exact parameter counts by part; tied embeddings are counted once (under `embedding`).

        `embedding`: token, position and token-type tables; `layers`: all transformer layers except their
        routed experts (routers and shared experts included); `experts`: the routed experts of all MoE
        layers; `other`: embedding / final norms and OPT's embedding projections; `lm_head`: 0 when tied
        or for encoders; `pooler`: BERT's pooler. BERT is counted as `BertModel` (the backbone every BERT
        head shares, with its pooler); the masked-LM head is not part of the graph. Multimodal models
        (Llama-4, Gemma-3) are counted without their vision encoder, DeepSeek-V3 without its
        multi-token-prediction module (neither is part of text generation).
        """
        d, e = self.hidden_size, self.embed_dim
        embedding = self.vocab_size * e + self.num_position_embeddings * d + self.type_vocab_size * d
        other = self._norm_params() * (self.embedding_norm + self.final_norm) + (2 * d * e if e != d else 0)
        has_head = self.family == "decoder" and not self.tie_word_embeddings
        return {
            "embedding": embedding,
            "layers": self._layers_params(),
            "experts": len(self.moe_layers) * self.num_experts * self.num_expert_params,
            "other": other,
            "lm_head": self.vocab_size * e if has_head else 0,
            "pooler": d * d + d if self.pooler else 0,
        }

    @property
    def num_params(self) -> int:
        """All parameters, embeddings and every expert included, tied embeddings once."""
        return sum(self.param_counts().values())

    @property
    def num_active_params(self) -> int:
        """Parameters one token uses: all but the routed experts, plus `num_experts_per_tok` of them per
        MoE layer (the embedding table counted whole, as most model cards do; equals `num_params` for
        dense models)."""
        routed = len(self.moe_layers) * self.num_experts_per_tok * self.num_expert_params
        return self.num_params - self.param_counts()["experts"] + routed

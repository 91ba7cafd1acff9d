"""Hugging-Face config readers of the mixture-of-experts families (`dse.workload.models` registers them).

Each reader returns the `LlmArch` fields of one `model_type`, with the defaults of its transformers
`*Config` class; the MoE, latent-attention and local-attention fields are described in `dse.workload.arch`.
"""

from __future__ import annotations

from typing import Any

from dse.errors import ConfigError
from dse.workload.hf_fields import MISSING, Fields, layers_where, llama_like, rmsnorm_decoder


def qwen_moe(f: Fields, model_type: str) -> dict[str, Any]:
    """Qwen2MoeConfig / Qwen3MoeConfig: layer i is MoE unless listed in mlp_only_layers or (i + 1) is not a
    multiple of decoder_sparse_step; experts of moe_intermediate_size, a shared expert of
    shared_expert_intermediate_size (Qwen2-MoE; Qwen3 has none; its sigmoid gate's d weights are not
    counted)."""
    fields = llama_like(f, model_type)
    n, step = fields["num_layers"], f.int("decoder_sparse_step", 1)
    dense_only = set(f.layer_list("mlp_only_layers", n) or [])
    shared = f.count("shared_expert_intermediate_size")
    return fields | {
        "num_experts": f.int("num_experts"),
        "num_experts_per_tok": f.int("num_experts_per_tok"),
        "moe_intermediate_size": f.int("moe_intermediate_size"),
        "shared_expert_intermediate_size": shared,
        "dense_layers": layers_where(n, lambda i: i not in dense_only and (i + 1) % step == 0),
    }


def mixtral(f: Fields, model_type: str) -> dict[str, Any]:
    """MixtralConfig: every layer is MoE, num_local_experts experts of intermediate_size each."""
    fields = llama_like(f, model_type)
    return fields | {
        "num_experts": f.int("num_local_experts"),
        "num_experts_per_tok": f.int("num_experts_per_tok"),
        "moe_intermediate_size": fields["intermediate_size"],
    }


def deepseek(f: Fields, model_type: str) -> dict[str, Any]:
    """DeepseekV2/V3Config: MLA attention; layer i is MoE when i >= first_k_dense_replace and i is a
    multiple of moe_layer_freq; n_shared_experts shared experts of moe_intermediate_size each."""
    d, num_heads, n = f.int("hidden_size"), f.int("num_attention_heads"), f.int("num_hidden_layers")
    nope, rope, moe_ff = f.int("qk_nope_head_dim"), f.int("qk_rope_head_dim"), f.int("moe_intermediate_size")
    first_dense, freq = f.count("first_k_dense_replace"), f.int("moe_layer_freq", 1)
    return {
        **rmsnorm_decoder(f, d, num_heads, n),
        "num_kv_heads": num_heads,  # MLA: every head has its own k and v, recovered from the latent
        "head_dim": nope + rope,
        "intermediate_size": f.int("intermediate_size"),
        "q_lora_rank": f.count("q_lora_rank"),  # null in DeepSeek-V2-Lite: q is projected directly
        "kv_lora_rank": f.int("kv_lora_rank"),
        "qk_rope_head_dim": rope,
        "qk_nope_head_dim": nope,
        "v_head_dim": f.int("v_head_dim"),
        "num_experts": f.int("n_routed_experts"),
        "num_experts_per_tok": f.int("num_experts_per_tok"),
        "moe_intermediate_size": moe_ff,
        "shared_expert_intermediate_size": f.count("n_shared_experts") * moe_ff,
        "dense_layers": layers_where(n, lambda i: i >= first_dense and i % freq == 0),
    }


def gpt_oss(f: Fields, model_type: str) -> dict[str, Any]:
    """GptOssConfig: every layer MoE (num_local_experts of intermediate_size, biases on router and experts),
    q/k/v/o biases, one attention sink per head, sliding_window on the layer_types marked sliding."""
    d, num_heads, n = f.int("hidden_size"), f.int("num_attention_heads"), f.int("num_hidden_layers")
    layer_types = f.layer_kinds("layer_types", n, ("sliding_attention", "full_attention")) or [
        "sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)
    ]
    bias = f.bool("attention_bias", True)
    return {
        **rmsnorm_decoder(f, d, num_heads, n),
        "head_dim": f.int("head_dim", 64),
        "qkv_bias": bias,
        "o_bias": bias,
        "attention_sinks": True,
        "sliding_window": f.int("sliding_window", 128),
        "local_layers": tuple(i for i, kind in enumerate(layer_types) if kind == "sliding_attention"),
        "num_experts": f.int("num_local_experts"),
        "num_experts_per_tok": f.int("num_experts_per_tok", MISSING, "experts_per_token"),
        "moe_intermediate_size": f.int("intermediate_size"),
        "moe_bias": True,
    }


def llama4_text(f: Fields, model_type: str) -> dict[str, Any]:
    """Llama4TextConfig: MoE layers every interleave_moe_layer_step-th (from step - 1), experts and one
    shared expert of intermediate_size, dense layers of intermediate_size_mlp; chunked attention on the
    RoPE layers (all but every no_rope_layer_interval-th, 4). Its q/k norm is an L2 norm without weights
    (counted as qk_norm's 2 x head_dim per layer, 12k parameters too many)."""
    d, num_heads, n = f.int("hidden_size"), f.int("num_attention_heads"), f.int("num_hidden_layers")
    step, expert_ff = f.int("interleave_moe_layer_step", 1), f.int("intermediate_size")
    # an empty list means the default, as Llama4TextConfig reads it
    moe_layers = set(
        (f.raw.get("moe_layers") != [] and f.layer_list("moe_layers", n)) or range(step - 1, n, step)
    )
    interval = f.int("no_rope_layer_interval", 4)
    # 1 for a RoPE layer, 0 for a NoPE one
    uses_rope = (f.raw.get("no_rope_layers") != [] and f.layer_kinds("no_rope_layers", n, (0, 1))) or [
        int((i + 1) % interval != 0) for i in range(n)
    ]
    chunk = f.int("attention_chunk_size") if f.raw.get("attention_chunk_size") is not None else None
    return {
        **rmsnorm_decoder(f, d, num_heads, n),
        "head_dim": f.int("head_dim", d // num_heads),
        "intermediate_size": f.int("intermediate_size_mlp"),
        "qk_norm": f.bool("use_qk_norm", True),
        "attention_chunk_size": chunk,
        "local_layers": tuple(i for i in range(n) if uses_rope[i]) if chunk else None,
        "num_experts": f.int("num_local_experts"),
        "num_experts_per_tok": f.int("num_experts_per_tok"),
        "moe_intermediate_size": expert_ff,
        "shared_expert_intermediate_size": expert_ff,
        "dense_layers": layers_where(n, lambda i: i in moe_layers),
    }


def minimax_m2(f: Fields, model_type: str) -> dict[str, Any]:
    """MiniMaxM2Config (MiniMax-M2, M2.5): GQA whose q and k are RMS-normed over all heads of the layer
    (`qk_norm_type` per_layer: the same elements as per-head norms), RoPE on `rotary_dim` of each head (the
    same cost), every layer MoE: num_local_experts experts of intermediate_size, a sigmoid router with a
    bias, no shared expert unless shared_intermediate_size. The multi-token-prediction modules
    (`use_mtp`) are speculative decoding, not part of the graph."""
    fields = llama_like(f, model_type)
    return fields | {
        "qk_norm": f.bool("use_qk_norm", True),
        "num_experts": f.int("num_local_experts"),
        "num_experts_per_tok": f.int("num_experts_per_tok"),
        "moe_intermediate_size": fields["intermediate_size"],
        "shared_expert_intermediate_size": f.count("shared_intermediate_size"),
    }


def deepseek_sparse(f: Fields, model_type: str) -> dict[str, Any]:
    """DeepSeek sparse attention models (DeepSeek-V3.2 `deepseek_v32`, GLM-5 `glm_moe_dsa`): DeepSeek-V3's
    MLA and MoE layout (GLM-5: q latent 2048, q/k 192 + 64, v 256, first 3 layers dense) plus the lightning
    indexer (index_topk, index_n_heads, index_head_dim; `dse.workload.mla`)."""
    fields = deepseek(f, model_type)
    return fields | {
        "index_topk": f.int("index_topk"),
        "index_n_heads": f.int("index_n_heads"),
        "index_head_dim": f.int("index_head_dim"),
    }


# config mamba_ssm_dtype -> LlmArch.linear_state_dtype (absent: fp32, the engines' default)
_STATE_DTYPES: dict[str, str] = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16"}


def qwen3_next(f: Fields, model_type: str) -> dict[str, Any]:
    """Qwen3NextConfig and Qwen3.5's text configs (`qwen3_next`, `qwen3_5_moe_text`, `qwen3_5_text`):
    Qwen3-MoE's experts (plus a shared expert, its sigmoid gate's d weights not counted; a dense MLP
    without num_experts) and q/k norms, with Gated DeltaNet linear attention on the `layer_types` marked
    linear_attention (by default all but every full_attention_interval-th, 4) and an output gate on the
    full-attention layers (`dse.workload.linear_attention`). RoPE on partial_rotary_factor of each head
    costs the same here."""
    dense = not f.raw.get("num_experts")  # Qwen3.5-27B (`qwen3_5_text`): the same layers, a dense MLP
    if not dense and f.raw.get("intermediate_size") is None:  # Qwen3.5 MoE has no dense MLP width
        f = Fields({**f.raw, "intermediate_size": f.int("moe_intermediate_size")}, f.source)
    fields = llama_like(f, "qwen3") if dense else qwen_moe(f, "qwen3_moe")
    n, interval = fields["num_layers"], f.int("full_attention_interval", 4)
    layer_types = f.layer_kinds("layer_types", n, ("linear_attention", "full_attention")) or [
        "linear_attention" if (i + 1) % interval else "full_attention" for i in range(n)
    ]
    state = f.raw.get("mamba_ssm_dtype") or "float32"  # null or absent: the engines' default
    if not isinstance(state, str) or state not in _STATE_DTYPES:
        raise ConfigError(f"{f.source}: field 'mamba_ssm_dtype' must be one of {', '.join(_STATE_DTYPES)}")
    return fields | {
        "linear_layers": tuple(i for i, kind in enumerate(layer_types) if kind == "linear_attention"),
        "linear_num_key_heads": f.int("linear_num_key_heads"),
        "linear_key_head_dim": f.int("linear_key_head_dim"),
        "linear_num_value_heads": f.int("linear_num_value_heads"),
        "linear_value_head_dim": f.int("linear_value_head_dim"),
        "linear_conv_kernel": f.int("linear_conv_kernel_dim", 4),
        "attn_output_gate": f.bool("attn_output_gate", True),
        "linear_state_dtype": _STATE_DTYPES[state],
    }


def glm4_moe(f: Fields, model_type: str) -> dict[str, Any]:
    """Glm4MoeConfig (GLM-4.5, GLM-4.6): GQA with q/k/v biases (attention_bias, default True) and optional
    q/k norms (use_qk_norm), DeepSeek-style MoE: the first first_k_dense_replace layers dense, then
    n_routed_experts of moe_intermediate_size and n_shared_experts shared ones. RoPE on
    partial_rotary_factor of each head costs the same here; the multi-token-prediction layers
    (num_nextn_predict_layers) are speculative decoding, not part of the graph."""
    fields = llama_like(f, model_type)
    n, moe_ff = fields["num_layers"], f.int("moe_intermediate_size")
    first_dense = f.count("first_k_dense_replace")
    bias = f.bool("attention_bias", True)
    return fields | {
        "qkv_bias": bias,
        "o_bias": False,
        "qk_norm": f.bool("use_qk_norm", False),
        "num_experts": f.int("n_routed_experts"),
        "num_experts_per_tok": f.int("num_experts_per_tok"),
        "moe_intermediate_size": moe_ff,
        "shared_expert_intermediate_size": f.count("n_shared_experts") * moe_ff,
        "dense_layers": layers_where(n, lambda i: i >= first_dense),
    }

"""The model catalog: Hugging-Face `config.json` files, as published, read into `LlmArch`.

    list_models()                             # ['bert-large', 'gpt2', 'llama-3.1-70b', ...]
    load_model_config("llama-3.1-8b")         # catalog entry; also "Llama_3.1_8B", "meta-llama/Llama-3.1-8B"
    load_model_config("path/to/config.json")  # any local HF config (or the folder holding it)

Catalog files live in `data/models/<name>.json`: the published config with an added `_source` key naming
the Hub repository (and how the file was obtained) and, where other checkpoints share the architecture,
an `_aliases` list of their Hub ids (DeepSeek-R1 and V3.1 -> deepseek-v3).

Supported `model_type`s: llama, mistral, qwen2, qwen3 (RMSNorm, RoPE, GQA, gated SiLU MLP; qwen3 adds
per-head q/k RMSNorms and drops qwen2's q/k/v biases), gpt2 and opt (LayerNorm, learned positions,
GELU/ReLU MLP), bert (encoder), and the mixture-of-experts and newer families: qwen2_moe, qwen3_moe,
mixtral, deepseek_v2 / deepseek_v3 (latent attention), gpt_oss, llama4 and gemma3 (multimodal configs:
their `text_config` is read; llama4_text and gemma3_text directly), mpt and nemotron (LayerNorm, RoPE,
squared-ReLU MLP). Each family has its own field names
(GPT-2: n_embd/n_layer/n_head/n_positions; OPT: ffn_dim/word_embed_proj_dim/do_layer_norm_before;
DeepSeek: n_routed_experts/first_k_dense_replace; Llama-4: interleave_moe_layer_step) and its own
defaults, copied from the transformers `*Config` classes.

An HF config carries many keys irrelevant here (dropout, token ids), so unknown keys are ignored, unlike
`dse`'s own files; the resulting `LlmArch` is strict.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dse.config.jsonio import read_json_file
from dse.errors import ConfigError, did_you_mean, format_validation_error
from dse.workload.llm import LlmArch

_MISSING = object()

# HF hidden_act / activation_function -> LlmArch.activation
_ACTIVATIONS: dict[str, str] = {
    "silu": "silu",
    "swish": "silu",
    "gelu": "gelu",
    "gelu_new": "gelu",
    "gelu_fast": "gelu",
    "gelu_pytorch_tanh": "gelu",
    "gelu_python": "gelu",
    "relu": "relu",
    # NOTE(dse): squared ReLU (Nemotron) is priced as ReLU: one streaming elementwise kernel either way,
    # the same bytes, one multiply more per element.
    "relu2": "relu",
}


def _models_dir() -> Any:
    return resources.files("dse.workload").joinpath("data/models")


MAX_CONFIG_INT = 2**31 - 1  # a config dimension past 2^31 - 1 is a typo or a hostile file, not a model


def _key(name: str) -> str:
    """Lookup key: case, separators and dots do not matter ("Llama_3.1-8B" == "llama-3.1-8b")."""
    return re.sub(r"[\s._/-]", "", name.lower())


def list_models() -> list[str]:
    """Names of the catalog models."""
    return sorted(p.name.removesuffix(".json") for p in _models_dir().iterdir() if p.name.endswith(".json"))


@cache
def _catalog_index() -> dict[str, str]:
    """Lookup key -> catalog name, for each name and for the Hub repository named in `_source`."""
    index: dict[str, str] = {}
    for name in list_models():
        index[_key(name)] = name
        raw = _read_json(_models_dir().joinpath(f"{name}.json"), f"{name}.json")
        repo = re.search(r"huggingface\.co/([\w.-]+)/([\w.-]+)", str(raw.get("_source", "")))
        # `_aliases`: other Hub ids (or short names) of the same architecture, e.g. DeepSeek-R1 -> deepseek-v3
        ids = [f"{repo.group(1)}/{repo.group(2)}"] if repo else []
        for repo_id in ids + [str(alias) for alias in raw.get("_aliases", [])]:
            index.setdefault(_key(repo_id.rsplit("/", 1)[-1]), name)
            index.setdefault(_key(repo_id), name)
    return index


def _read_json(path: Any, source: str) -> dict[str, Any]:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"model config '{source}' cannot be read: {exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: not UTF-8 text (byte {exc.start}); a config.json is UTF-8") from exc
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}: not valid JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: expected a JSON object of config fields at the top level")
    return raw


def _resolve(name_or_path: str | Path) -> tuple[dict[str, Any], str, str]:
    """(raw config, source for messages, model name)."""
    path = Path(name_or_path)
    looks_like_path = isinstance(name_or_path, Path) or path.suffix == ".json" or path.exists()
    if looks_like_path:
        if path.is_dir():
            path = path / "config.json"
        name = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
        return read_json_file(path, "model config", expect=dict), str(path), name
    known = _catalog_index().get(_key(str(name_or_path)))
    if known is None:
        from dse.workload.vision import VISION_MODELS  # named beside the LLMs: one namespace for --model

        raise ConfigError(
            f"unknown model '{name_or_path}'"
            f"{did_you_mean(str(name_or_path), [*list_models(), *VISION_MODELS], _key)}; known LLMs: "
            f"{', '.join(list_models())} (or a path to a "
            f"config.json); vision models: {', '.join(VISION_MODELS)} (`dse models` lists both)"
        )
    name = known
    return _read_json(_models_dir().joinpath(f"{name}.json"), f"{name}.json"), f"{name}.json", name


class _Fields:
    """Typed reads from a raw HF config; every error names the file and the field."""

    def __init__(self, raw: Mapping[str, Any], source: str) -> None:
        self.raw, self.source = raw, source

    def _get(self, key: str, default: Any, aliases: tuple[str, ...]) -> Any:
        for k in (key, *aliases):
            if self.raw.get(k) is not None:
                return self.raw[k]
        if default is _MISSING:
            also = f" (or {', '.join(aliases)})" if aliases else ""
            model_type = self.raw.get("model_type")
            raise ConfigError(
                f"{self.source}: missing required field '{key}'{also} for model_type '{model_type}'"
            )
        return default

    def int(self, key: str, default: Any = _MISSING, *aliases: str) -> int:
        value = self._get(key, default, aliases)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0 or value > MAX_CONFIG_INT:
            raise ConfigError(
                f"{self.source}: field '{key}' must be a positive integer up to {MAX_CONFIG_INT}, "
                f"got {value!r}"
            )
        return value

    def float(self, key: str, default: Any = _MISSING) -> float:
        value = self._get(key, default, ())
        if not isinstance(value, int | float) or isinstance(value, bool) or not 0 < value < 1e300:
            raise ConfigError(f"{self.source}: field '{key}' must be a positive number, got {value!r}")
        return float(value)

    def bool(self, key: str, default: Any = _MISSING) -> bool:
        value = self._get(key, default, ())
        if not isinstance(value, bool):
            raise ConfigError(f"{self.source}: field '{key}' must be true or false, got {value!r}")
        return value

    def activation(self, key: str, default: str) -> str:
        value = self._get(key, default, ())
        if value not in _ACTIVATIONS:
            supported = ", ".join(_ACTIVATIONS)
            raise ConfigError(f"{self.source}: field '{key}' is '{value}'; supported: {supported}")
        return _ACTIVATIONS[value]


def _llama_like(f: _Fields, model_type: str) -> dict[str, Any]:
    """llama, mistral, qwen2, qwen3: defaults of LlamaConfig / MistralConfig / Qwen2Config / Qwen3Config.

    Qwen3Config: head_dim defaults to 128 (not hidden / heads), attention_bias to False, a sliding window
    only if use_sliding_window; every layer has q_norm / k_norm (RMSNorm over head_dim).
    """
    d = f.int("hidden_size")
    num_heads = f.int("num_attention_heads")
    qwen2 = model_type in ("qwen2", "qwen2_moe")
    qwen3 = model_type in ("qwen3", "qwen3_moe")
    # MistralConfig defaults to a 4096 window, `null` disables it; Qwen2 uses one only if use_sliding_window.
    sliding_window: int | None = None
    if "sliding_window" in f.raw and f.raw["sliding_window"] is None:
        sliding_window = None
    elif model_type == "mistral":
        sliding_window = f.int("sliding_window", 4096)
    elif (qwen2 or qwen3) and f.bool("use_sliding_window", False):
        sliding_window = f.int("sliding_window")
    elif model_type == "mixtral":  # MixtralConfig has no window unless one is given
        sliding_window = f.raw.get("sliding_window") and f.int("sliding_window")
    attention_bias = f.bool("attention_bias", False)
    return {
        "family": "decoder",
        "hidden_size": d,
        "num_layers": f.int("num_hidden_layers"),
        "num_heads": num_heads,
        "num_kv_heads": f.int("num_key_value_heads", num_heads),
        "head_dim": f.int("head_dim", 128 if qwen3 else d // num_heads),
        "intermediate_size": f.int("intermediate_size"),
        "vocab_size": f.int("vocab_size"),
        "max_position_embeddings": f.int("max_position_embeddings"),
        "embed_dim": d,
        "norm": "rmsnorm",
        "norm_eps": f.float("rms_norm_eps", 1e-6),
        "norm_position": "pre",
        "activation": f.activation("hidden_act", "silu"),
        "gated_mlp": True,
        "position_embedding": "rope",
        "qkv_bias": True if qwen2 else attention_bias,
        "o_bias": False if qwen2 else attention_bias,
        "mlp_bias": f.bool("mlp_bias", False),
        "tie_word_embeddings": f.bool("tie_word_embeddings", False),
        "rope_theta": f.float("rope_theta", 10000.0),
        "sliding_window": sliding_window,
        "qk_norm": qwen3,
    }


def _gpt2(f: _Fields, model_type: str) -> dict[str, Any]:
    """GPT2Config: n_embd, n_layer, n_head, n_inner (None = 4 x n_embd), n_positions."""
    d = f.int("n_embd", _MISSING, "hidden_size")
    num_heads = f.int("n_head", _MISSING, "num_attention_heads")
    num_positions = f.int("n_positions", _MISSING, "max_position_embeddings")
    return {
        "family": "decoder",
        "hidden_size": d,
        "num_layers": f.int("n_layer", _MISSING, "num_hidden_layers"),
        "num_heads": num_heads,
        "num_kv_heads": num_heads,
        "head_dim": d // num_heads,
        "intermediate_size": f.int("n_inner", 4 * d),
        "vocab_size": f.int("vocab_size"),
        "max_position_embeddings": num_positions,
        "embed_dim": d,
        "norm": "layernorm",
        "norm_eps": f.float("layer_norm_epsilon", 1e-5),
        "norm_position": "pre",
        "activation": f.activation("activation_function", "gelu_new"),
        "gated_mlp": False,
        "position_embedding": "learned",
        "num_position_embeddings": num_positions,
        "qkv_bias": True,
        "o_bias": True,
        "mlp_bias": True,
        "tie_word_embeddings": f.bool("tie_word_embeddings", True),
    }


def _opt(f: _Fields, model_type: str) -> dict[str, Any]:
    """OPTConfig: ffn_dim, word_embed_proj_dim, do_layer_norm_before; positions offset by 2 rows."""
    d = f.int("hidden_size")
    num_heads = f.int("num_attention_heads")
    max_positions = f.int("max_position_embeddings")
    pre_ln = f.bool("do_layer_norm_before", True)
    bias = f.bool("enable_bias", True)
    return {
        "family": "decoder",
        "hidden_size": d,
        "num_layers": f.int("num_hidden_layers"),
        "num_heads": num_heads,
        "num_kv_heads": num_heads,
        "head_dim": d // num_heads,
        "intermediate_size": f.int("ffn_dim"),
        "vocab_size": f.int("vocab_size"),
        "max_position_embeddings": max_positions,
        "embed_dim": f.int("word_embed_proj_dim", d),
        "norm": "layernorm",
        "norm_eps": 1e-5,  # nn.LayerNorm default; OPTConfig has no eps field
        "norm_position": "pre" if pre_ln else "post",
        "activation": f.activation("activation_function", "relu"),
        "gated_mlp": False,
        "position_embedding": "learned",
        # NOTE(dse): OPTLearnedPositionalEmbedding keeps 2 extra rows (a fairseq padding offset).
        "num_position_embeddings": max_positions + 2,
        "qkv_bias": bias,
        "o_bias": bias,
        "mlp_bias": bias,
        "tie_word_embeddings": f.bool("tie_word_embeddings", True),
        "final_norm": pre_ln and not f.bool("_remove_final_layer_norm", False),
    }


def _bert(f: _Fields, model_type: str) -> dict[str, Any]:
    """BertConfig: post-LN encoder with token-type embeddings and a pooler (counted as BertModel)."""
    d = f.int("hidden_size")
    num_heads = f.int("num_attention_heads")
    max_positions = f.int("max_position_embeddings")
    return {
        "family": "encoder",
        "hidden_size": d,
        "num_layers": f.int("num_hidden_layers"),
        "num_heads": num_heads,
        "num_kv_heads": num_heads,
        "head_dim": d // num_heads,
        "intermediate_size": f.int("intermediate_size"),
        "vocab_size": f.int("vocab_size"),
        "max_position_embeddings": max_positions,
        "embed_dim": d,
        "norm": "layernorm",
        "norm_eps": f.float("layer_norm_eps", 1e-12),
        "norm_position": "post",
        "activation": f.activation("hidden_act", "gelu"),
        "gated_mlp": False,
        "position_embedding": "learned",
        "num_position_embeddings": max_positions,
        "type_vocab_size": f.int("type_vocab_size", 2),
        "qkv_bias": True,
        "o_bias": True,
        "mlp_bias": True,
        "tie_word_embeddings": f.bool("tie_word_embeddings", True),
        "embedding_norm": True,
        "final_norm": False,
        "pooler": True,
    }


def _layers_where(num_layers: int, is_moe: Callable[[int], bool]) -> tuple[int, ...]:
    """The dense-MLP layers of an MoE model: those `is_moe` rejects."""
    return tuple(i for i in range(num_layers) if not is_moe(i))


def _qwen_moe(f: _Fields, model_type: str) -> dict[str, Any]:
    """Qwen2MoeConfig / Qwen3MoeConfig: layer i is MoE unless listed in mlp_only_layers or (i + 1) is not a
    multiple of decoder_sparse_step; experts of moe_intermediate_size, a shared expert of
    shared_expert_intermediate_size (Qwen2-MoE; Qwen3 has none; its sigmoid gate's d weights are not
    counted)."""
    fields = _llama_like(f, model_type)
    n, step = fields["num_layers"], f.int("decoder_sparse_step", 1)
    dense_only = set(f.raw.get("mlp_only_layers") or [])
    shared = f.raw.get("shared_expert_intermediate_size") or 0
    return fields | {
        "num_experts": f.int("num_experts"),
        "num_experts_per_tok": f.int("num_experts_per_tok"),
        "moe_intermediate_size": f.int("moe_intermediate_size"),
        "shared_expert_intermediate_size": shared,
        "dense_layers": _layers_where(n, lambda i: i not in dense_only and (i + 1) % step == 0),
    }


def _mixtral(f: _Fields, model_type: str) -> dict[str, Any]:
    """MixtralConfig: every layer is MoE, num_local_experts experts of intermediate_size each."""
    fields = _llama_like(f, model_type)
    return fields | {
        "num_experts": f.int("num_local_experts"),
        "num_experts_per_tok": f.int("num_experts_per_tok"),
        "moe_intermediate_size": fields["intermediate_size"],
    }


def _deepseek(f: _Fields, model_type: str) -> dict[str, Any]:
    """DeepseekV2/V3Config: MLA attention; layer i is MoE when i >= first_k_dense_replace and i is a
    multiple of moe_layer_freq; n_shared_experts shared experts of moe_intermediate_size each."""
    d, num_heads, n = f.int("hidden_size"), f.int("num_attention_heads"), f.int("num_hidden_layers")
    nope, rope, moe_ff = f.int("qk_nope_head_dim"), f.int("qk_rope_head_dim"), f.int("moe_intermediate_size")
    first_dense, freq = f.raw.get("first_k_dense_replace") or 0, f.int("moe_layer_freq", 1)
    return {
        **_rmsnorm_decoder(f, d, num_heads, n),
        "num_kv_heads": num_heads,  # MLA: every head has its own k and v, recovered from the latent
        "head_dim": nope + rope,
        "intermediate_size": f.int("intermediate_size"),
        "q_lora_rank": f.raw.get("q_lora_rank") or 0,  # null in DeepSeek-V2-Lite: q is projected directly
        "kv_lora_rank": f.int("kv_lora_rank"),
        "qk_rope_head_dim": rope,
        "qk_nope_head_dim": nope,
        "v_head_dim": f.int("v_head_dim"),
        "num_experts": f.int("n_routed_experts"),
        "num_experts_per_tok": f.int("num_experts_per_tok"),
        "moe_intermediate_size": moe_ff,
        "shared_expert_intermediate_size": (f.raw.get("n_shared_experts") or 0) * moe_ff,
        "dense_layers": _layers_where(n, lambda i: i >= first_dense and i % freq == 0),
    }


def _gpt_oss(f: _Fields, model_type: str) -> dict[str, Any]:
    """GptOssConfig: every layer MoE (num_local_experts of intermediate_size, biases on router and experts),
    q/k/v/o biases, one attention sink per head, sliding_window on the layer_types marked sliding."""
    d, num_heads, n = f.int("hidden_size"), f.int("num_attention_heads"), f.int("num_hidden_layers")
    layer_types = f.raw.get("layer_types") or [
        "sliding_attention" if i % 2 == 0 else "full_attention" for i in range(n)
    ]
    bias = f.bool("attention_bias", True)
    return {
        **_rmsnorm_decoder(f, d, num_heads, n),
        "head_dim": f.int("head_dim", 64),
        "qkv_bias": bias,
        "o_bias": bias,
        "attention_sinks": True,
        "sliding_window": f.int("sliding_window", 128),
        "local_layers": tuple(i for i, kind in enumerate(layer_types) if kind == "sliding_attention"),
        "num_experts": f.int("num_local_experts"),
        "num_experts_per_tok": f.int("num_experts_per_tok", _MISSING, "experts_per_token"),
        "moe_intermediate_size": f.int("intermediate_size"),
        "moe_bias": True,
    }


def _llama4_text(f: _Fields, model_type: str) -> dict[str, Any]:
    """Llama4TextConfig: MoE layers every interleave_moe_layer_step-th (from step - 1), experts and one
    shared expert of intermediate_size, dense layers of intermediate_size_mlp; chunked attention on the
    RoPE layers (all but every no_rope_layer_interval-th, 4). Its q/k norm is an L2 norm without weights
    (counted as qk_norm's 2 x head_dim per layer, 12k parameters too many)."""
    d, num_heads, n = f.int("hidden_size"), f.int("num_attention_heads"), f.int("num_hidden_layers")
    step, expert_ff = f.int("interleave_moe_layer_step", 1), f.int("intermediate_size")
    moe_layers = set(f.raw.get("moe_layers") or range(step - 1, n, step))
    interval = f.int("no_rope_layer_interval", 4)
    uses_rope = f.raw.get("no_rope_layers") or [int((i + 1) % interval != 0) for i in range(n)]
    chunk = f.raw.get("attention_chunk_size")
    return {
        **_rmsnorm_decoder(f, d, num_heads, n),
        "head_dim": f.int("head_dim", d // num_heads),
        "intermediate_size": f.int("intermediate_size_mlp"),
        "qk_norm": f.bool("use_qk_norm", True),
        "attention_chunk_size": chunk,
        "local_layers": tuple(i for i in range(n) if uses_rope[i]) if chunk else None,
        "num_experts": f.int("num_local_experts"),
        "num_experts_per_tok": f.int("num_experts_per_tok"),
        "moe_intermediate_size": expert_ff,
        "shared_expert_intermediate_size": expert_ff,
        "dense_layers": _layers_where(n, lambda i: i in moe_layers),
    }


def _gemma3_text(f: _Fields, model_type: str) -> dict[str, Any]:
    """Gemma3TextConfig (defaults from transformers): gated tanh-GELU MLP, q/k RMSNorms, norms before and
    after attention and MLP, embeddings scaled by sqrt(hidden), tied LM head, and sliding_window on all
    layers but every sliding_window_pattern-th (6: five local per global; Gemma 3 report, arXiv:2503.19786).
    """
    d, num_heads, n = f.int("hidden_size"), f.int("num_attention_heads"), f.int("num_hidden_layers")
    pattern = f.int("sliding_window_pattern", 6)
    layer_types = f.raw.get("layer_types") or [
        "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n)
    ]
    return {
        **_rmsnorm_decoder(f, d, num_heads, n),
        "head_dim": f.int("head_dim", 256),
        "intermediate_size": f.int("intermediate_size"),
        "vocab_size": f.int("vocab_size", 262208),
        "max_position_embeddings": f.int("max_position_embeddings", 131072),
        "activation": f.activation("hidden_activation", "gelu_pytorch_tanh"),
        "tie_word_embeddings": f.bool("tie_word_embeddings", True),
        "rope_theta": f.float("rope_theta", 1_000_000.0),
        "qk_norm": True,
        "sandwich_norm": True,
        "embedding_scale": True,
        "sliding_window": f.int("sliding_window", 4096),
        "local_layers": tuple(i for i, kind in enumerate(layer_types) if kind == "sliding_attention"),
    }


def _rmsnorm_decoder(f: _Fields, d: int, num_heads: int, num_layers: int) -> dict[str, Any]:
    """The fields every newer decoder shares: pre-RMSNorm, RoPE, gated MLP, no biases, untied head."""
    return {
        "family": "decoder",
        "hidden_size": d,
        "num_layers": num_layers,
        "num_heads": num_heads,
        "num_kv_heads": f.int("num_key_value_heads", num_heads),
        "intermediate_size": f.int("intermediate_size"),
        "vocab_size": f.int("vocab_size"),
        "max_position_embeddings": f.int("max_position_embeddings"),
        "embed_dim": d,
        "norm": "rmsnorm",
        "norm_eps": f.float("rms_norm_eps", 1e-6),
        "norm_position": "pre",
        "activation": f.activation("hidden_act", "silu"),
        "gated_mlp": True,
        "position_embedding": "rope",
        "qkv_bias": f.bool("attention_bias", False),
        "o_bias": f.bool("attention_bias", False),
        "mlp_bias": False,
        "tie_word_embeddings": f.bool("tie_word_embeddings", False),
        "rope_theta": f.float("rope_theta", 10000.0),
    }


def _nemotron(f: _Fields, model_type: str) -> dict[str, Any]:
    """NemotronConfig (Nemotron-3 / Nemotron-4): pre-LayerNorm (layernorm1p: the same kernel), RoPE on
    `partial_rotary_factor` of each head (the same attention cost), GQA, a non-gated squared-ReLU MLP, no
    biases by default, untied embeddings."""
    d, num_heads = f.int("hidden_size"), f.int("num_attention_heads")
    head_dim = f.raw.get("head_dim")
    return {
        **_rmsnorm_decoder(f, d, num_heads, f.int("num_hidden_layers")),
        "head_dim": f.int("head_dim") if head_dim is not None else d // num_heads,
        "norm": "layernorm",
        "norm_eps": f.float("norm_eps", 1e-5),
        "activation": f.activation("hidden_act", "relu2"),
        "gated_mlp": False,
        "mlp_bias": f.bool("mlp_bias", False),
    }


def _mpt(f: _Fields, model_type: str) -> dict[str, Any]:
    """MptConfig (MosaicML): d_model, n_heads, n_layers, expansion_ratio, max_seq_len; pre-LayerNorm, GELU
    MLP of expansion_ratio x d, no biases (`no_bias`), tied embeddings. Learned positions only: ALiBi
    (`attn_config.alibi`) has no position table and is not modelled, so such a config is refused."""
    attn = f.raw.get("attn_config") or {}
    if isinstance(attn, dict) and attn.get("alibi", False):
        raise ConfigError(f"{f.source}: MPT with ALiBi is not modelled; set attn_config.alibi false")
    d, num_heads = f.int("d_model"), f.int("n_heads")
    seq = f.int("max_seq_len", 2048)
    bias = not f.bool("no_bias", True)
    return {
        "family": "decoder",
        "hidden_size": d,
        "num_layers": f.int("n_layers"),
        "num_heads": num_heads,
        "num_kv_heads": num_heads,
        "head_dim": d // num_heads,
        "intermediate_size": f.int("expansion_ratio", 4) * d,
        "vocab_size": f.int("vocab_size"),
        "max_position_embeddings": seq,
        "embed_dim": d,
        "norm": "layernorm",
        "norm_eps": 1e-5,
        "norm_position": "pre",
        "activation": "gelu",
        "gated_mlp": False,
        "position_embedding": "learned",
        "num_position_embeddings": seq,
        "qkv_bias": bias,
        "o_bias": bias,
        "mlp_bias": bias,
        "tie_word_embeddings": True,
    }


_READERS: dict[str, Callable[[_Fields, str], dict[str, Any]]] = {
    "llama": _llama_like,
    "mistral": _llama_like,
    "qwen2": _llama_like,
    "qwen3": _llama_like,
    "gpt2": _gpt2,
    "opt": _opt,
    "bert": _bert,
    "qwen2_moe": _qwen_moe,
    "qwen3_moe": _qwen_moe,
    "mixtral": _mixtral,
    "deepseek_v2": _deepseek,
    "deepseek_v3": _deepseek,
    "gpt_oss": _gpt_oss,
    "llama4_text": _llama4_text,
    "gemma3_text": _gemma3_text,
    "mpt": _mpt,
    "nemotron": _nemotron,
}
# Multimodal configs: the language model's config is their `text_config`.
_WRAPPERS: dict[str, str] = {"llama4": "llama4_text", "gemma3": "gemma3_text"}


def arch_from_hf_config(raw: Mapping[str, Any], *, name: str, source: str = "") -> LlmArch:
    """Normalize a Hugging-Face config mapping into an `LlmArch`.

    Args:
        raw: the parsed `config.json`.
        name: the model's name in op names and reports.
        source: where the config came from, for error messages (defaults to `name`).
    """
    source = source or name
    model_type = raw.get("model_type")
    if model_type in _WRAPPERS:
        text = raw.get("text_config")
        if not isinstance(text, dict):
            raise ConfigError(f"{source}: model_type '{model_type}' needs a 'text_config' object")
        raw, source = {"model_type": _WRAPPERS[str(model_type)], **text}, f"{source} (text_config)"
        model_type = raw["model_type"]
    if model_type is None:
        raise ConfigError(f"{source}: missing required field 'model_type'; supported: {', '.join(_READERS)}")
    if model_type not in _READERS:
        supported = ", ".join(_READERS)
        raise ConfigError(f"{source}: model_type '{model_type}' is not supported; supported: {supported}")
    fields = _READERS[model_type](_Fields(raw, source), model_type)
    if fields["hidden_size"] % fields["num_heads"] and "head_dim" not in raw:
        raise ConfigError(
            f"{source}: hidden_size {fields['hidden_size']} is not a multiple of the number of "
            f"heads {fields['num_heads']} and no head_dim is given"
        )
    try:
        return LlmArch(name=name, model_type=model_type, **fields)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source)) from exc


def load_model_config(name_or_path: str | Path) -> LlmArch:
    """An `LlmArch` from the catalog (case, `_`, `.` and `-` ignored; Hub repo ids accepted) or a local file.

    Args:
        name_or_path: a catalog name (`list_models()`), the Hub id named in a catalog entry's `_source`
            (`meta-llama/Llama-3.1-8B`), or the path of an HF `config.json` or of the folder holding it.
    """
    raw, source, name = _resolve(name_or_path)
    return arch_from_hf_config(raw, name=name, source=source)

"""The model catalog: Hugging-Face `config.json` files, as published, read into `LlmArch`.

    list_models()                             # ['bert-large', 'gpt2', 'llama-3.1-70b', ...]
    load_model_config("llama-3.1-8b")         # catalog entry; also "Llama_3.1_8B", "meta-llama/Llama-3.1-8B"
    load_model_config("path/to/config.json")  # any local HF config (or the folder holding it)

Catalog files live in `data/models/<name>.json`: the published config with an added `_source` key naming
the Hub repository (and how the file was obtained) and, where other checkpoints share the architecture,
an `_aliases` list of their Hub ids (DeepSeek-R1 and V3.1 -> deepseek-v3).

Supported `model_type`s: llama, mistral, qwen2, qwen3 (RMSNorm, RoPE, GQA, gated SiLU MLP; qwen3 adds
per-head q/k RMSNorms and drops qwen2's q/k/v biases), gpt2 and opt (LayerNorm, learned positions,
GELU/ReLU MLP), bert (encoder), mpt and nemotron (LayerNorm, RoPE, squared-ReLU MLP), and the
mixture-of-experts and newer families (readers in `dse.workload.hf_moe`): qwen2_moe, qwen3_moe, mixtral,
deepseek_v2 / deepseek_v3 / kimi_k2 (latent attention), deepseek_v32 and glm_moe_dsa (latent attention with
DeepSeek sparse attention: DeepSeek-V3.2, GLM-5), qwen3_next (Gated DeltaNet linear attention on three of
four layers), glm4_moe (GLM-4.5 / 4.6), gpt_oss, minimax_m2, and the multimodal configs llama4, gemma3,
kimi_k25, qwen3_5_moe and qwen3_5 (their `text_config` is read; llama4_text, gemma3_text, qwen3_5_moe_text
and qwen3_5_text directly). Each family has its own field names
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
from dse.workload import hf_moe
from dse.workload.hf_fields import MISSING, Fields, llama_like, rmsnorm_decoder
from dse.workload.llm import LlmArch
from dse.workload.quantization import (
    checkpoint_precision,
    checkpoint_schemes,
    modelopt_schemes,
    name_quantization,
    narrowest_scheme,
)

# NVIDIA ModelOpt's quantization file beside an exported checkpoint's config.json (`_with_modelopt_quant`).
MODELOPT_QUANT_FILE = "hf_quant_config.json"


def _models_dir() -> Any:
    return resources.files("dse.workload").joinpath("data/models")


def _key(name: str) -> str:
    """Lookup key: case and separators do not matter ("Llama_3.1-8B" == "llama-3.1-8b"); dots do (OPT-13B is
    not OPT-1.3B)."""
    return re.sub(r"[\s_/-]", "", name.lower())


def _dotted_key(name: str) -> str:
    """The second lookup key: a separator may stand for a dot ("qwen2_5_7b" == "qwen2.5-7b"), so every
    separator is one; "opt-13b" is still not "opt-1.3b"."""
    return re.sub(r"[\s_/.-]+", ".", name.lower()).strip(".")


def _lookup(name: str) -> str | None:
    index = _catalog_index()
    return index.get(_key(name)) or index.get("." + _dotted_key(name))


def list_models() -> list[str]:
    """Names of the catalog models."""
    return sorted(p.name.removesuffix(".json") for p in _models_dir().iterdir() if p.name.endswith(".json"))


@cache
def _catalog_index() -> dict[str, str]:
    """Lookup key -> catalog name, for each name and for the Hub repository named in `_source`."""
    index: dict[str, str] = {}
    for name in list_models():
        index[_key(name)] = name
        index.setdefault("." + _dotted_key(name), name)  # "." keeps the two kinds of key apart
        raw = _read_json(_models_dir().joinpath(f"{name}.json"), f"{name}.json")
        repo = re.search(r"huggingface\.co/([\w.-]+)/([\w.-]+)", str(raw.get("_source", "")))
        # `_aliases`: other Hub ids (or short names) of the same architecture, e.g. DeepSeek-R1 -> deepseek-v3
        ids = [f"{repo.group(1)}/{repo.group(2)}"] if repo else []
        for repo_id in ids + [str(alias) for alias in raw.get("_aliases", [])]:
            for key in (repo_id.rsplit("/", 1)[-1], repo_id):
                index.setdefault(_key(key), name)
                index.setdefault("." + _dotted_key(key), name)
    return index


# Suffixes of Hub checkpoints that keep their base model's architecture: instruction and reasoning
# fine-tunes, re-quantized weights, release dates (Qwen3-30B-A3B-Instruct-2507, Llama-3.1-8B-Instruct,
# Qwen3-235B-A22B-FP8, Kimi-K2-Instruct-0905); a quantization suffix names the checkpoint's weights
# (`dse.workload.quantization`).
_VARIANT_SUFFIX = re.compile(
    r"[-_.](instruct|it|chat|thinking|base|hf|fp8|fp4|nvfp4|mxfp4|awq|gptq|int4|int8|w4a16|w8a8|bf16|"
    r"fp16|dynamic|\d{4})$",
    re.IGNORECASE,
)


def checkpoint_base(name: str) -> str:
    """`name` without its trailing fine-tune / quantization / date suffixes ("Llama-3.1-8B-Instruct" ->
    "Llama-3.1-8B")."""
    while (shorter := _VARIANT_SUFFIX.sub("", name)) != name:
        name = shorter
    return name


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


def _with_modelopt_quant(raw: dict[str, Any], path: Path) -> dict[str, Any]:
    """A checkpoint folder's config with NVIDIA ModelOpt's scheme where its config.json names none (no or a
    null quantization_config): older ModelOpt exports keep it in `hf_quant_config.json` beside it
    (`{"quantization": {"quant_algo": "FP8", ...}}`), which vLLM and TensorRT-LLM read in its place
    (`dse.workload.quantization.modelopt_schemes`, whose errors name that file). Only a file named
    config.json has a sidecar: another JSON file may share its folder with other models' files."""
    side = path.parent / MODELOPT_QUANT_FILE
    if raw.get("quantization_config") is not None or path.name != "config.json" or not side.is_file():
        return raw
    quant = read_json_file(side, "ModelOpt quantization file", expect=dict).get("quantization")
    if not isinstance(quant, dict):
        raise ConfigError(f"{side}: expected a 'quantization' object with a 'quant_algo' string or null")
    if not modelopt_schemes(quant, str(side), "quantization"):  # a KV-cache-only export: 16-bit weights
        return raw
    return {**raw, "quantization_config": {**quant, "quant_method": "modelopt"}}


def _resolve(name_or_path: str | Path) -> tuple[dict[str, Any], str, str]:
    """(raw config, source for messages, model name)."""
    if not str(name_or_path).strip():
        raise ConfigError(
            "--model is empty: give a catalog name (`dse models`), a Hub id or a config.json path"
        )
    path = Path(name_or_path)
    try:
        exists = path.exists()
    except (OSError, ValueError):  # a name too long for the file system, or with a NUL: not a file
        exists = False
    looks_like_path = isinstance(name_or_path, Path) or path.suffix == ".json" or exists
    if looks_like_path:
        if path.is_dir():
            path = path / "config.json"
        name = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
        raw = read_json_file(path, "model config", expect=dict)
        return _with_modelopt_quant(raw, path), str(path), name
    matched = stem = str(name_or_path).rsplit("/", 1)[-1]
    known = _lookup(str(name_or_path))
    if known is None:  # a fine-tune or re-quantized checkpoint of a catalog architecture
        matched = checkpoint_base(stem)
        known = _lookup(matched)
    keys = (_key(str(name_or_path)), _key(matched))
    named, quant = name_quantization(stem, keys, _VARIANT_SUFFIX)
    if known is None:
        from dse.workload.vision import VISION_MODELS  # named beside the LLMs: one namespace for --model

        if str(name_or_path) in VISION_MODELS:  # a vision model where an LLM is read (a serving study)
            raise ConfigError(
                f"'{name_or_path}' is a vision model, not an LLM: serving takes LLMs; a vision model runs "
                "as a forward pass (dse predict --model NAME --batch B) or a training step"
            )
        raise ConfigError(
            f"unknown model '{name_or_path}'"
            f"{did_you_mean(str(name_or_path), [*list_models(), *VISION_MODELS], _key)}; known LLMs: "
            f"{', '.join(list_models())} (or a path to a "
            f"config.json); vision models: {', '.join(VISION_MODELS)} (`dse models` lists both)"
        )
    name = known
    raw = _read_json(_models_dir().joinpath(f"{name}.json"), f"{name}.json")
    if named:  # the name says how this checkpoint's weights are stored, not the catalog entry's config
        text = raw.get("text_config")
        if isinstance(text, dict):
            raw = {**raw, "text_config": {k: v for k, v in text.items() if k != "quantization_config"}}
        raw = {k: v for k, v in raw.items() if k != "quantization_config"}
        raw |= {"quantization_config": quant} if quant is not None else {}
    return raw, f"{name}.json", name


def _gpt2(f: Fields, model_type: str) -> dict[str, Any]:
    """GPT2Config: n_embd, n_layer, n_head, n_inner (None = 4 x n_embd), n_positions."""
    d = f.int("n_embd", MISSING, "hidden_size")
    num_heads = f.int("n_head", MISSING, "num_attention_heads")
    num_positions = f.int("n_positions", MISSING, "max_position_embeddings")
    return {
        "family": "decoder",
        "hidden_size": d,
        "num_layers": f.int("n_layer", MISSING, "num_hidden_layers"),
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


def _opt(f: Fields, model_type: str) -> dict[str, Any]:
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


def _bert(f: Fields, model_type: str) -> dict[str, Any]:
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


def _gemma3_text(f: Fields, model_type: str) -> dict[str, Any]:
    """Gemma3TextConfig (defaults from transformers): gated tanh-GELU MLP, q/k RMSNorms, norms before and
    after attention and MLP, embeddings scaled by sqrt(hidden), tied LM head, and sliding_window on all
    layers but every sliding_window_pattern-th (6: five local per global; Gemma 3 report, arXiv:2503.19786).
    """
    d, num_heads, n = f.int("hidden_size"), f.int("num_attention_heads"), f.int("num_hidden_layers")
    pattern = f.int("sliding_window_pattern", 6)
    layer_types = f.layer_kinds("layer_types", n, ("sliding_attention", "full_attention")) or [
        "sliding_attention" if (i + 1) % pattern else "full_attention" for i in range(n)
    ]
    return {
        **rmsnorm_decoder(f, d, num_heads, n),
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


def _nemotron(f: Fields, model_type: str) -> dict[str, Any]:
    """NemotronConfig (Nemotron-3 / Nemotron-4): pre-LayerNorm (layernorm1p: the same kernel), RoPE on
    `partial_rotary_factor` of each head (the same attention cost), GQA, a non-gated squared-ReLU MLP, no
    biases by default, untied embeddings."""
    d, num_heads = f.int("hidden_size"), f.int("num_attention_heads")
    head_dim = f.raw.get("head_dim")
    return {
        **rmsnorm_decoder(f, d, num_heads, f.int("num_hidden_layers")),
        "head_dim": f.int("head_dim") if head_dim is not None else d // num_heads,
        "norm": "layernorm",
        "norm_eps": f.float("norm_eps", 1e-5),
        "activation": f.activation("hidden_act", "relu2"),
        "gated_mlp": False,
        "mlp_bias": f.bool("mlp_bias", False),
    }


def _mpt(f: Fields, model_type: str) -> dict[str, Any]:
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


_READERS: dict[str, Callable[[Fields, str], dict[str, Any]]] = {
    "llama": llama_like,
    "mistral": llama_like,
    "qwen2": llama_like,
    "qwen3": llama_like,
    "gpt2": _gpt2,
    "opt": _opt,
    "bert": _bert,
    "qwen2_moe": hf_moe.qwen_moe,
    "qwen3_moe": hf_moe.qwen_moe,
    "mixtral": hf_moe.mixtral,
    "deepseek_v2": hf_moe.deepseek,
    "deepseek_v3": hf_moe.deepseek,
    "gpt_oss": hf_moe.gpt_oss,
    "llama4_text": hf_moe.llama4_text,
    "minimax_m2": hf_moe.minimax_m2,
    "kimi_k2": hf_moe.deepseek,
    "deepseek_v32": hf_moe.deepseek_sparse,
    "glm_moe_dsa": hf_moe.deepseek_sparse,
    "qwen3_next": hf_moe.qwen3_next,
    "glm4_moe": hf_moe.glm4_moe,
    "qwen3_5_moe_text": hf_moe.qwen3_next,
    "qwen3_5_text": hf_moe.qwen3_next,
    "gemma3_text": _gemma3_text,
    "mpt": _mpt,
    "nemotron": _nemotron,
}
# Multimodal configs: the language model's config is their `text_config`.
_WRAPPERS: dict[str, str] = {
    "llama4": "llama4_text",
    "gemma3": "gemma3_text",
    "kimi_k25": "kimi_k2",
    "qwen3_5_moe": "qwen3_5_moe_text",
    "qwen3_5": "qwen3_5_text",
}


def _model_type(raw: Mapping[str, Any], source: str) -> str | None:
    """The config's model_type; one of no string is an error (a list was a TypeError in the lookups)."""
    model_type = raw.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise ConfigError(f"{source}: field 'model_type' must be a string, got {model_type!r}")
    return model_type


def arch_from_hf_config(raw: Mapping[str, Any], *, name: str, source: str = "") -> LlmArch:
    """Normalize a Hugging-Face config mapping into an `LlmArch`.

    Args:
        raw: the parsed `config.json`.
        name: the model's name in op names and reports.
        source: where the config came from, for error messages (defaults to `name`).
    """
    source = source or name
    model_type = _model_type(raw, source)
    # a multimodal wrapper may carry it outside text_config
    outer_quant, outer_source = raw.get("quantization_config"), source
    if model_type in _WRAPPERS:
        text = raw.get("text_config")
        if not isinstance(text, dict):
            raise ConfigError(f"{source}: model_type '{model_type}' needs a 'text_config' object")
        raw, source = {"model_type": _WRAPPERS[str(model_type)], **text}, f"{source} (text_config)"
        model_type = _model_type(raw, source)
    if model_type is None:
        raise ConfigError(f"{source}: missing required field 'model_type'; supported: {', '.join(_READERS)}")
    if model_type not in _READERS:
        supported = ", ".join(_READERS)
        raise ConfigError(f"{source}: model_type '{model_type}' is not supported; supported: {supported}")
    fields = _READERS[model_type](Fields(raw, source), model_type)
    if fields["hidden_size"] % fields["num_heads"] and "head_dim" not in raw:
        raise ConfigError(
            f"{source}: hidden_size {fields['hidden_size']} is not a multiple of the number of "
            f"heads {fields['num_heads']} and no head_dim is given"
        )
    inner = "quantization_config" in raw
    schemes = checkpoint_schemes(
        raw["quantization_config"] if inner else outer_quant, source if inner else outer_source
    )
    fields["checkpoint_scheme"] = narrowest_scheme(schemes)
    fields["checkpoint_precision"] = checkpoint_precision(schemes, moe=bool(fields.get("num_experts")))
    try:
        return LlmArch(name=name, model_type=model_type, **fields)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source)) from exc


def load_model_config(name_or_path: str | Path) -> LlmArch:
    """An `LlmArch` from the catalog (case, `_` and `-` ignored, dots not; Hub repo ids accepted) or a file.

    Args:
        name_or_path: a catalog name (`list_models()`), the Hub id named in a catalog entry's `_source`
            (`meta-llama/Llama-3.1-8B`), or the path of an HF `config.json` or of the folder holding it.
    """
    raw, source, name = _resolve(name_or_path)
    return arch_from_hf_config(raw, name=name, source=source)

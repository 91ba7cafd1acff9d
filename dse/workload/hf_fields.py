"""Typed reads of Hugging-Face `config.json` fields and the field sets several model families share.

`dse.workload.models` (dense families, the registry) and `dse.workload.hf_moe` (mixture-of-experts
families) build an `LlmArch`'s fields from these; every error names the file and the field.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Mapping
from typing import Any

from dse.errors import ConfigError
from dse.units import MAX_COUNT

MISSING = object()

# HF hidden_act / activation_function -> LlmArch.activation
ACTIVATIONS: dict[str, str] = {
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

MAX_CONFIG_INT = MAX_COUNT  # a config dimension past it is a typo or a hostile file, not a model


class Fields:
    """Typed reads from a raw HF config; every error names the file and the field."""

    def __init__(self, raw: Mapping[str, Any], source: str) -> None:
        self.raw, self.source = raw, source

    def _get(self, key: str, default: Any, aliases: tuple[str, ...]) -> Any:
        for k in (key, *aliases):
            if self.raw.get(k) is not None:
                return self.raw[k]
        if default is MISSING:
            also = f" (or {', '.join(aliases)})" if aliases else ""
            model_type = self.raw.get("model_type")
            raise ConfigError(
                f"{self.source}: missing required field '{key}'{also} for model_type '{model_type}'"
            )
        return default

    def int(self, key: str, default: Any = MISSING, *aliases: str) -> int:
        value = self._get(key, default, aliases)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0 or value > MAX_CONFIG_INT:
            raise ConfigError(
                f"{self.source}: field '{key}' must be a positive integer up to {MAX_CONFIG_INT}, "
                f"got {value!r}"
            )
        return value

    def count(self, key: str) -> builtins.int:
        """A field that may be 0 or absent (null or missing: 0): shared experts, dense layers."""
        value = self._get(key, 0, ())
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_CONFIG_INT:
            raise ConfigError(
                f"{self.source}: field '{key}' must be an integer from 0 to {MAX_CONFIG_INT}, got {value!r}"
            )
        return value

    def layer_list(self, key: str, num_layers: builtins.int) -> list[builtins.int] | None:
        """Layer indices (0 .. num_layers - 1), or None when absent."""
        value = self.raw.get(key)
        if value is None:
            return None
        ok = isinstance(value, list) and all(
            isinstance(i, int) and not isinstance(i, bool) and 0 <= i < num_layers for i in value
        )
        if not ok:
            raise ConfigError(
                f"{self.source}: field '{key}' must be a list of layer indices 0..{num_layers - 1}"
            )
        return value

    def layer_kinds(self, key: str, num_layers: builtins.int, kinds: tuple[Any, ...]) -> list[Any] | None:
        """One of `kinds` (strings, or integer flags) per layer, or None when absent."""
        value = self.raw.get(key)
        if value is None:
            return None
        ok = isinstance(value, list) and len(value) == num_layers
        # typed: True == 1 would pass a membership test of integer flags
        if not (ok and all(type(v) in {type(k) for k in kinds} and v in kinds for v in value)):
            raise ConfigError(
                f"{self.source}: field '{key}' must list one of {', '.join(map(str, kinds))} for each of the "
                f"{num_layers} layers"
            )
        return value

    def rope_theta(self) -> builtins.float:
        """`rope_theta`, or transformers 5's `rope_parameters.rope_theta` (GLM-5, Qwen3.5); 10,000 when
        neither is given."""
        nested = self.raw.get("rope_parameters")
        if self.raw.get("rope_theta") is None and isinstance(nested, Mapping):
            return Fields(nested, f"{self.source} (rope_parameters)").float("rope_theta", 10000.0)
        return self.float("rope_theta", 10000.0)

    def float(self, key: str, default: Any = MISSING) -> float:
        value = self._get(key, default, ())
        if not isinstance(value, int | float) or isinstance(value, bool) or not 0 < value < 1e300:
            raise ConfigError(f"{self.source}: field '{key}' must be a positive number, got {value!r}")
        return float(value)

    def bool(self, key: str, default: Any = MISSING) -> bool:
        value = self._get(key, default, ())
        if not isinstance(value, bool):
            raise ConfigError(f"{self.source}: field '{key}' must be true or false, got {value!r}")
        return value

    def activation(self, key: str, default: str) -> str:
        value = self._get(key, default, ())
        if not isinstance(value, str) or value not in ACTIVATIONS:  # a list was unhashable: a TypeError
            supported = ", ".join(ACTIVATIONS)
            raise ConfigError(f"{self.source}: field '{key}' is {value!r}; supported: {supported}")
        return ACTIVATIONS[value]


def llama_like(f: Fields, model_type: str) -> dict[str, Any]:
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
    return rmsnorm_decoder(f, d, num_heads, f.int("num_hidden_layers")) | {
        "head_dim": f.int("head_dim", 128 if qwen3 else d // num_heads),
        "qkv_bias": True if qwen2 else attention_bias,
        "o_bias": False if qwen2 else attention_bias,
        "mlp_bias": f.bool("mlp_bias", False),
        "sliding_window": sliding_window,
        "qk_norm": qwen3,
    }


def rmsnorm_decoder(f: Fields, d: int, num_heads: int, num_layers: int) -> dict[str, Any]:
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
        "rope_theta": f.rope_theta(),
    }


def layers_where(num_layers: int, is_moe: Callable[[int], bool]) -> tuple[int, ...]:
    """The dense-MLP layers of an MoE model: those `is_moe` rejects."""
    return tuple(i for i in range(num_layers) if not is_moe(i))

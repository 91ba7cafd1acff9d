"""How a published checkpoint stores its weights, and the precision `dse` prices that at by default.

    checkpoint_scheme({"quant_method": "fp8", ...})      # "fp8": the config's quantization_config
    name_quantization("Llama-3.1-8B-Instruct-FP8", ...)  # (True, {"quant_method": "fp8"}): a Hub id's
    priced_precision("4-bit", moe=True)                  # "mxfp4"

vLLM, SGLang and TensorRT-LLM read a checkpoint's `quantization_config` and serve its weights as stored, so
`dse` does the same when --precision is not given (`LlmArch.checkpoint_scheme`, `.checkpoint_precision`).
Schemes as stored: "fp8" (8-bit float weights), "mxfp4" (MXFP4 experts), "4-bit" (other 4-bit weights:
int4 AWQ / GPTQ / compressed-tensors, NVFP4), "int8", None (16-bit). What they are priced at: fp8 as
`--precision fp8` (GEMMs in fp8 with quantized activations), 4-bit MoE experts as `mxfp4` (4.25 bits per
weight, dequantized into 16-bit math); 4-bit weights of a dense model and int8 are not modelled: bf16, and
the CLI's note says so.

A Hub id resolved to a catalog entry by its base name (`dse.workload.models.checkpoint_base`) may name
another quantization than the entry's config: its suffix wins ("-FP8", "-MXFP4", "-AWQ", "-BF16" ...), then
the model cards of checkpoints sharing an entry (`ALIAS_METHODS`).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from dse.errors import ConfigError

__all__ = [
    "ALIAS_METHODS",
    "SUFFIX_METHODS",
    "checkpoint_precision",
    "checkpoint_scheme",
    "checkpoint_schemes",
    "modelopt_scheme",
    "modelopt_schemes",
    "name_quantization",
    "narrowest_scheme",
    "priced_precision",
]

# Quantization suffixes of Hub ids -> the quant_method they name (`checkpoint_scheme` reads them); None:
# 16-bit weights (the catalog entry's own quantization does not apply to such a re-upload).
SUFFIX_METHODS: dict[str, str | None] = {
    "fp8": "fp8", "mxfp4": "mxfp4", "bf16": None, "fp16": None, "fp4": "4-bit", "nvfp4": "4-bit",
    "awq": "4-bit", "gptq": "4-bit", "int4": "4-bit", "w4a16": "4-bit", "int8": "int8", "w8a8": "int8",
}  # fmt: skip
# Checkpoints that share a catalog entry's architecture (`_aliases`) but not its weights, by their model
# cards: Kimi-K2 (Base, Instruct, Instruct-0905) ships block-fp8 weights, where K2-Thinking and K2.5 (the
# entry) ship int4 experts. Keys lower case without separators or dots.
ALIAS_METHODS: dict[str, str] = {"kimik2": "fp8", "kimik2instruct": "fp8", "moonshotaikimik2instruct": "fp8"}
# quant_method values of fp8 weights: DeepSeek's and Qwen's own releases ("fp8"), Meta's Llama-3.1-405B
# FP8 ("fbgemm_fp8"); 4-bit methods; NVIDIA ModelOpt ("modelopt") names its scheme in quant_algo.
_FP8_METHODS = ("fp8", "fbgemm_fp8")
_FOUR_BIT_METHODS = ("awq", "gptq", "4-bit", "bitsandbytes_4bit")
_SCHEME_BITS = {"4-bit": 4.0, "mxfp4": 4.25, "fp8": 8.0, "int8": 8.0}  # weight bits, to find the narrowest


def checkpoint_schemes(quant: Any, source: str = "") -> tuple[str, ...]:
    """How a `quantization_config` stores the weights, one entry per scheme it uses: "fp8" (DeepSeek-V3's
    128x128 block-scaled e4m3, Meta's fbgemm_fp8, ModelOpt FP8, compressed-tensors 8-bit float weights as
    llm-compressor's FP8 releases store them), "mxfp4" (gpt-oss), "4-bit" (AWQ, GPTQ, ModelOpt NVFP4 /
    INT4_AWQ, compressed-tensors 4-bit weights such as Kimi-K2.5's int4 experts), "int8"; () for none,
    16-bit, or a method not recognised. A ModelOpt MIXED_PRECISION export lists its layers' schemes. A
    config of the wrong shape is a ConfigError naming the field in `source`: Transformers and vLLM refuse
    to load it (no quant_method to read), so pricing it as 16-bit weights hid a broken file."""
    if quant is None:
        return ()
    method = _method(quant, source)
    if method in _FP8_METHODS:
        return ("fp8",)
    if method == "mxfp4":
        return ("mxfp4",)
    if method in ("int8", "bitsandbytes_8bit"):
        return ("int8",)
    if method in _FOUR_BIT_METHODS:
        return ("4-bit",)
    if method == "modelopt":
        return modelopt_schemes(quant, source)
    scheme = _compressed_tensors_scheme(quant, source) if method == "compressed-tensors" else None
    return (scheme,) if scheme else ()


def checkpoint_scheme(quant: Any, source: str = "") -> str | None:
    """The narrowest scheme of `checkpoint_schemes` (None: 16-bit weights)."""
    return narrowest_scheme(checkpoint_schemes(quant, source))


def narrowest_scheme(schemes: tuple[str, ...]) -> str | None:
    """The scheme of the fewest weight bits (None: none, 16-bit)."""
    return min(schemes, key=_SCHEME_BITS.__getitem__) if schemes else None


def modelopt_schemes(
    quant: Mapping[str, Any], source: str, field: str = "quantization_config"
) -> tuple[str, ...]:
    """The weight schemes of a ModelOpt quantization (a config's `quantization_config` or the `quantization`
    object of an `hf_quant_config.json`): its quant_algo's, or each layer's of a MIXED_PRECISION export;
    () for a null quant_algo (a KV-cache-only export). A missing quant_algo, malformed or missing layers
    and an algorithm not known here are errors naming `source` and `field` (the object's path there): read
    as 16-bit, they priced the weights at two to four times their stored bytes."""
    where = f"{source}: {field}." if source else f"{field}."
    if "quant_algo" not in quant or not isinstance(quant["quant_algo"], str | None):
        raise ConfigError(f"{where}quant_algo must be a string or null, got {quant.get('quant_algo')!r}")
    algo = quant["quant_algo"]
    if algo is None:
        return ()
    algos = [algo]
    if algo.upper() == "MIXED_PRECISION":
        layers = quant.get("quantized_layers")
        entries: list[Any] = list(layers.values()) if isinstance(layers, Mapping) else [layers]
        # a list, a layer given as a string or a quant_algo of another type read as 16-bit weights unsaid
        well_formed = isinstance(layers, Mapping) and all(
            isinstance(v, Mapping) and isinstance(v.get("quant_algo"), str | None) for v in entries
        )
        algos = [v["quant_algo"] for v in entries if well_formed and v.get("quant_algo")]
        if not algos:
            raise ConfigError(
                f"{where}quantized_layers of a MIXED_PRECISION export must be an object of layer names to "
                f"{{'quant_algo': string}}, got {str(layers)[:200]}"
            )
    schemes = [modelopt_scheme(a.upper()) for a in algos]
    for a, scheme in zip(algos, schemes, strict=True):
        if scheme is None:
            raise ConfigError(
                f"{where}quant_algo: unknown ModelOpt algorithm '{a}' (known: FP8*, NVFP4*, MXFP4, "
                "INT4_AWQ, W4A8_AWQ, W4A16_AWQ, INT8_SQ, W8A8_SQ_PER_CHANNEL, W8A16, MIXED_PRECISION)"
            )
    return tuple(sorted({s for s in schemes if s}, key=_SCHEME_BITS.__getitem__))


def _malformed(source: str, field: str, expected: str, got: Any) -> ConfigError:
    path = ".".join(part for part in ("quantization_config", field) if part)
    return ConfigError(f"{source + ': ' if source else ''}{path} must be {expected}, got {got!r}")


def _method(quant: Any, source: str) -> str:
    """The config's quant_method, lower case; bitsandbytes configs may name theirs by `load_in_4bit` /
    `load_in_8bit` alone, as Transformers reads them."""
    if not isinstance(quant, Mapping):
        raise _malformed(source, "", "an object with a 'quant_method' (or null)", quant)
    method = quant.get("quant_method")
    if method is None and (quant.get("load_in_4bit") is True or quant.get("load_in_8bit") is True):
        method = "bitsandbytes_4bit" if quant.get("load_in_4bit") is True else "bitsandbytes_8bit"
    if not isinstance(method, str) or not method.strip():  # "" names no method, as a missing one
        raise _malformed(
            source, "quant_method", "a string (fp8, mxfp4, awq, compressed-tensors, ...)", method
        )
    return method.lower()


def _compressed_tensors_scheme(quant: Mapping[str, Any], source: str) -> str | None:
    """The first weight scheme of 4 or 8 bits among a compressed-tensors config's `config_groups`."""
    groups = quant.get("config_groups")
    if not isinstance(groups, Mapping | None):
        raise _malformed(source, "config_groups", "an object of named schemes", groups)
    for name, scheme in (groups or {}).items():
        weights = scheme.get("weights", {}) if isinstance(scheme, Mapping) else None
        if not isinstance(weights, Mapping | None) or not isinstance(scheme, Mapping):
            raise _malformed(source, f"config_groups.{name}", "an object with a 'weights' object", scheme)
        weights = weights or {}
        bits = weights.get("num_bits")
        if bits is not None and (isinstance(bits, bool) or not isinstance(bits, int)):
            raise _malformed(source, f"config_groups.{name}.weights.num_bits", "an integer", bits)
        if bits in (4, 8):
            return "4-bit" if bits == 4 else "fp8" if weights.get("type") == "float" else "int8"
    return None


def modelopt_scheme(algo: str) -> str | None:
    """A ModelOpt quant_algo's weights: FP8 (per tensor, FP8_PER_CHANNEL_PER_TOKEN, FP8_BLOCK_SCALES), 4-bit
    (NVFP4, NVFP4_AWQ, MXFP4, INT4_AWQ, W4A8_AWQ, W4A16_AWQ), int8 (INT8_SQ, W8A8_SQ_PER_CHANNEL, W8A16)."""
    if algo.startswith("FP8"):
        return "fp8"
    if any(tag in algo for tag in ("FP4", "INT4", "W4A")):
        return "4-bit"
    return "int8" if ("INT8" in algo or "W8A" in algo) else None


def checkpoint_precision(schemes: tuple[str, ...], *, moe: bool) -> str | None:
    """The narrowest precision the stored `schemes` are priced at (`priced_precision`; None: bf16): a dense
    model's mixed export of 4-bit MLPs beside fp8 attention is priced fp8 (its 4-bit weights are not
    modelled), an MoE's of NVFP4 experts beside fp8 attention mxfp4."""
    priced = [p for p in (priced_precision(s, moe=moe) for s in schemes) if p]
    return min(priced, key=_SCHEME_BITS.__getitem__) if priced else None


def priced_precision(scheme: str | None, *, moe: bool) -> str | None:
    """The precision a stored scheme is priced at (module docstring); None: bf16. MXFP4 and other 4-bit
    weights of MoE experts are `mxfp4` (Kimi-K2.5's int4 groups of 32 with a 16-bit scale, 4.5 bits per
    weight, priced as MXFP4's 4.25: its expert bytes 6% short); a dense model's 4-bit weights and int8 are not
    modelled."""
    if scheme == "fp8":
        return "fp8"
    return "mxfp4" if scheme in ("mxfp4", "4-bit") and moe else None


def name_quantization(
    stem: str, keys: tuple[str, ...], suffix: re.Pattern[str]
) -> tuple[bool, dict[str, str] | None]:
    """(whether the name fixes the quantization, the quantization_config it names; None: 16-bit) of a model
    named by Hub id or alias: its last part `stem`, the lookup keys of the names it matched the catalog by
    (`keys`); `suffix` matches one trailing variant suffix (`dse.workload.models._VARIANT_SUFFIX`)."""
    name = stem
    while match := suffix.search(name):
        tag = match.group(1).lower()
        if tag in SUFFIX_METHODS:
            method = SUFFIX_METHODS[tag]
            return True, None if method is None else {"quant_method": method}
        name = name[: match.start()]
    for key in keys:
        if (method := ALIAS_METHODS.get(key.replace(".", ""))) is not None:
            return True, {"quant_method": method}
    return False, None

"""The precision a published checkpoint's weights fix: what a serving engine runs a model at by default.

    checkpoint_precision({"quant_method": "fp8", ...})    # "fp8": the config's quantization_config
    name_quantization("Llama-3.1-8B-Instruct-FP8", ...)   # (True, {"quant_method": "fp8"}): a Hub id's suffix

vLLM, SGLang and TensorRT-LLM read a checkpoint's `quantization_config` and serve its weights as stored, so
`dse` does the same when --precision is not given (`LlmArch.checkpoint_precision`): "fp8" for fp8 weights
(GEMMs in fp8 with quantized activations), "mxfp4" for 4-bit weight-only MoE experts, None (bf16) for 16-bit
weights and for schemes the model does not price (int8, AWQ / GPTQ int4 of dense layers, NVFP4).

A Hub id resolved to a catalog entry by its base name (`dse.workload.models.checkpoint_base`) may name
another quantization than the entry's config: its suffix wins ("-FP8" fp8, "-MXFP4" mxfp4, "-BF16" 16-bit,
"-AWQ" not priced, so bf16), then the model cards of checkpoints sharing an entry (`ALIAS_METHODS`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["ALIAS_METHODS", "SUFFIX_METHODS", "checkpoint_precision", "name_quantization"]

# Quantization suffixes of Hub ids -> the quant_method they name; None: 16-bit weights or a scheme not
# priced (the catalog entry's own quantization does not apply to such a re-upload either).
SUFFIX_METHODS: dict[str, str | None] = {
    "fp8": "fp8", "mxfp4": "mxfp4", "bf16": None, "fp16": None, "fp4": None, "nvfp4": None, "awq": None,
    "gptq": None, "int4": None, "int8": None, "w4a16": None, "w8a8": None,
}  # fmt: skip
# Checkpoints that share a catalog entry's architecture (`_aliases`) but not its weights, by their model
# cards: Kimi-K2 (Base, Instruct, Instruct-0905) ships block-fp8 weights, where K2-Thinking and K2.5 (the
# entry) ship int4 experts. Keys as `dse.workload.models._key` makes them (lower case, no separators).
ALIAS_METHODS: dict[str, str] = {"kimik2": "fp8", "kimik2instruct": "fp8", "moonshotaikimik2instruct": "fp8"}
# quant_method values of fp8 weights: DeepSeek's and Qwen's own releases ("fp8"), Meta's Llama-3.1-405B
# FP8 ("fbgemm_fp8"); NVIDIA ModelOpt's ("modelopt") says its scheme in quant_algo.
_FP8_METHODS = ("fp8", "fbgemm_fp8")


def checkpoint_precision(quant: Any) -> str | None:
    """The precision a `quantization_config` fixes: "fp8" (DeepSeek-V3's and MiniMax-M2.5's 128x128
    block-scaled e4m3 weights, Meta's fbgemm_fp8, ModelOpt's FP8, compressed-tensors 8-bit float weights as
    llm-compressor's FP8 releases store them), "mxfp4" (gpt-oss's MXFP4 experts; also a compressed-tensors
    4-bit weight-only scheme such as Kimi-K2.5's int4 experts: groups of 32 with a 16-bit scale, 4.5 bits
    per weight, priced as MXFP4's 4.25, its expert bytes 6% short), None for anything else (bf16)."""
    if not isinstance(quant, Mapping):
        return None
    method = str(quant.get("quant_method", "")).lower()
    if method in _FP8_METHODS or method == "mxfp4":
        return "fp8" if method in _FP8_METHODS else "mxfp4"
    if method == "modelopt":
        return "fp8" if str(quant.get("quant_algo", "")).upper() == "FP8" else None
    if method != "compressed-tensors":
        return None
    groups = quant.get("config_groups")
    for scheme in groups.values() if isinstance(groups, Mapping) else ():
        weights = scheme.get("weights") if isinstance(scheme, Mapping) else None
        if not isinstance(weights, Mapping):
            continue
        if weights.get("num_bits") == 8 and weights.get("type") == "float":
            return "fp8"
        if weights.get("num_bits") == 4 and not scheme.get("input_activations"):
            return "mxfp4"
    return None


def name_quantization(stem: str, keys: tuple[str, ...], suffix: Any) -> tuple[bool, dict[str, str] | None]:
    """(whether the name fixes the quantization, the quantization_config it names; None: 16-bit) of a model
    named by Hub id or alias: its last part `stem`, the `dse.workload.models._key`s of the names it matched
    the catalog by (`keys`); `suffix` is the compiled pattern of one trailing variant suffix there."""
    name = stem
    while match := suffix.search(name):
        tag = match.group(1).lower()
        if tag in SUFFIX_METHODS:
            method = SUFFIX_METHODS[tag]
            return True, None if method is None else {"quant_method": method}
        name = name[: match.start()]
    for key in keys:
        if key in ALIAS_METHODS:
            return True, {"quant_method": ALIAS_METHODS[key]}
    return False, None

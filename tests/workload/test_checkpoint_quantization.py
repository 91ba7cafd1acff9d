"""How a checkpoint stores its weights and the precision it is priced at by default: the catalog's
configs, local configs' quantization_config, Hub-id suffixes, model cards and NVIDIA ModelOpt files
(`dse.workload.quantization`, `dse.workload.models`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dse.errors import ConfigError
from dse.workload.models import load_model_config
from tests.workload.model_files import catalog_json, write_config


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # the published configs' quantization_config: gpt-oss quant_method mxfp4; DeepSeek-V3 and MiniMax-M2.5
        # fp8 (128x128 blocks); Kimi-K2.5 compressed-tensors 4-bit weight-only experts; the others none
        ("gpt-oss-120b", "mxfp4"),
        ("gpt-oss-20b", "mxfp4"),
        ("deepseek-v3", "fp8"),
        ("minimax-m2.5", "fp8"),
        ("kimi-k2.5", "mxfp4"),
        ("llama-3.1-8b", None),
        ("qwen3-235b-a22b", None),
    ],
)
def test_checkpoint_precision_of_catalog_models(name: str, expected: str | None) -> None:
    assert load_model_config(name).checkpoint_precision == expected


W4A16 = {"weights": {"num_bits": 4, "type": "int"}, "input_activations": None}
W8A8 = {"weights": {"num_bits": 8, "type": "float"}, "input_activations": {"num_bits": 8}}
W4A4 = {"weights": {"num_bits": 4, "type": "float"}, "input_activations": {"num_bits": 4}}
W8A8_INT = {"weights": {"num_bits": 8, "type": "int"}, "input_activations": {"num_bits": 8, "type": "int"}}


@pytest.mark.parametrize(
    ("quant", "expected"),
    [
        ({"quant_method": "fp8", "weight_block_size": [128, 128]}, "fp8"),
        ({"quant_method": "FP8"}, "fp8"),
        ({"quant_method": "mxfp4"}, "mxfp4"),
        ({"quant_method": "compressed-tensors", "config_groups": {"g": W4A16}}, "mxfp4"),
        # fp8 as Meta (Llama-3.1-405B-FP8), NVIDIA ModelOpt and llm-compressor (W8A8 float) store it
        ({"quant_method": "fbgemm_fp8", "activation_scale_ub": 1200.0}, "fp8"),
        ({"quant_method": "modelopt", "quant_algo": "FP8"}, "fp8"),
        ({"quant_method": "compressed-tensors", "config_groups": {"g": W8A8}}, "fp8"),
        # other 4-bit weights of MoE experts are priced as MXFP4's (4.25 bits per weight)
        ({"quant_method": "modelopt", "quant_algo": "NVFP4"}, "mxfp4"),
        ({"quant_method": "modelopt", "quant_algo": "W4A16_AWQ"}, "mxfp4"),
        ({"quant_method": "compressed-tensors", "config_groups": {"g": W4A4}}, "mxfp4"),
        ({"quant_method": "awq", "bits": 4}, "mxfp4"),
        # int8 is not priced: bf16
        ({"quant_method": "compressed-tensors", "config_groups": {"g": W8A8_INT}}, None),
        # bitsandbytes configs of older Transformers name the method by their flags alone
        ({"load_in_4bit": True, "bnb_4bit_quant_type": "nf4"}, "mxfp4"),
        # a method dse does not know leaves 16-bit weights; a malformed config is an error
        # (tests/cli/test_fuzz_round_28.py): Transformers and vLLM refuse to load it
        ({"quant_method": "hqq"}, None),
        (None, None),
    ],
)
def test_checkpoint_precision_of_a_local_config(tmp_path: Path, quant: object, expected: str | None) -> None:
    raw = catalog_json("qwen3-30b-a3b")  # an MoE model: 4-bit weight-only experts are priced
    if quant is not None:
        raw["quantization_config"] = quant
    assert load_model_config(write_config(tmp_path, raw)).checkpoint_precision == expected


@pytest.mark.parametrize(
    ("hub_id", "name", "expected"),
    [
        # a -FP8 Hub id is the FP8 re-quantization of the catalog architecture (NVIDIA ModelOpt, Red Hat
        # llm-compressor, Qwen's and Z.ai's own releases); -AWQ and instruction tunes change nothing priced
        ("nvidia/Llama-3.1-8B-Instruct-FP8", "llama-3.1-8b", "fp8"),
        ("RedHatAI/Llama-3.3-70B-Instruct-FP8-dynamic", "llama-3.3-70b", "fp8"),
        ("Qwen/Qwen3-235B-A22B-Instruct-2507-FP8", "qwen3-235b-a22b", "fp8"),
        ("zai-org/GLM-5-FP8", "glm-5", "fp8"),
        ("Qwen/Qwen3-8B-AWQ", "qwen3-8b", None),
        ("meta-llama/Llama-3.1-8B-Instruct", "llama-3.1-8b", None),
        # a suffix names this upload's weights, over the entry's own scheme: 16-bit, or not priced (bf16)
        ("unsloth/gpt-oss-20b-BF16", "gpt-oss-20b", None),
        ("opensourcerelease/DeepSeek-V3-bf16", "deepseek-v3", None),
        # 4-bit experts of an MoE model as MXFP4's; a dense model's 4-bit weights are not priced (bf16)
        ("nvidia/DeepSeek-R1-NVFP4", "deepseek-v3", "mxfp4"),
        ("cognitivecomputations/DeepSeek-V3-AWQ", "deepseek-v3", "mxfp4"),
        ("nvidia/Llama-3.3-70B-Instruct-FP4", "llama-3.3-70b", None),
        ("Kimi.K2.Instruct.0905", "kimi-k2.5", "fp8"),  # dots as separators
        ("unsloth/Kimi-K2-Instruct-BF16", "kimi-k2.5", None),
        # Kimi-K2 (Instruct, 0905) ships block-fp8 weights; K2-Thinking, like K2.5, int4 experts
        ("moonshotai/Kimi-K2-Instruct", "kimi-k2.5", "fp8"),
        ("moonshotai/Kimi-K2-Instruct-0905", "kimi-k2.5", "fp8"),
        ("moonshotai/Kimi-K2-Thinking", "kimi-k2.5", "mxfp4"),
        ("deepseek-ai/DeepSeek-R1", "deepseek-v3", "fp8"),
    ],
)
def test_a_hub_checkpoint_brings_its_quantization(hub_id: str, name: str, expected: str | None) -> None:
    arch = load_model_config(hub_id)
    assert (arch.name, arch.checkpoint_precision) == (name, expected)


def test_checkpoint_precision_of_wrappers_and_dense_4_bit(tmp_path: Path) -> None:
    """A multimodal wrapper's quantization_config may sit outside its text_config (Llama-4's FP8 release);
    4-bit weight-only weights are priced on MoE experts only, so a dense model's are costed as bf16."""
    wrapper = catalog_json("llama-4-scout")
    wrapper["quantization_config"] = {"quant_method": "fp8"}
    (tmp_path / "scout").mkdir()
    assert load_model_config(write_config(tmp_path / "scout", wrapper)).checkpoint_precision == "fp8"
    dense = catalog_json("llama-3.1-8b")
    dense["quantization_config"] = {"quant_method": "compressed-tensors", "config_groups": {"g": W4A16}}
    (tmp_path / "dense").mkdir()
    assert load_model_config(write_config(tmp_path / "dense", dense)).checkpoint_precision is None


@pytest.mark.parametrize(
    ("name", "scheme", "precision"),
    [
        ("Qwen/Qwen3-8B-AWQ", "4-bit", None),  # stored 4-bit, not priced for a dense model: bf16
        ("x/Llama-3.1-8B-Instruct-W8A8", "int8", None),
        ("meta-llama/Llama-3.1-8B-Instruct-MXFP4", "mxfp4", None),
        ("kimi-k2.5", "4-bit", "mxfp4"),
        ("gpt-oss-20b", "mxfp4", "mxfp4"),
        ("llama-3.1-8b", None, None),
    ],
)
def test_the_stored_scheme_and_the_priced_precision_are_kept_apart(
    name: str, scheme: str | None, precision: str | None
) -> None:
    arch = load_model_config(name)
    assert (arch.checkpoint_scheme, arch.checkpoint_precision) == (scheme, precision)
    assert arch.serving_precision == (precision or "bf16")


@pytest.mark.parametrize(("algo", "expected"), [("FP8", "fp8"), ("NVFP4", None), ("W4A16_AWQ", None)])
def test_a_modelopt_export_names_its_scheme_beside_the_config(
    tmp_path: Path, algo: str, expected: str | None
) -> None:
    # Older ModelOpt exports (nvidia/*-FP8 on the Hub before mid-2025) keep the scheme in
    # hf_quant_config.json, which vLLM and TensorRT-LLM read; a dense model's 4-bit weights price as bf16.
    path = write_config(tmp_path, catalog_json("llama-3.1-8b"))
    (path.parent / "hf_quant_config.json").write_text(
        json.dumps({"producer": {"name": "modelopt"}, "quantization": {"quant_algo": algo}})
    )
    arch = load_model_config(path.parent)
    assert arch.checkpoint_precision == expected
    assert arch.checkpoint_scheme == ("fp8" if algo == "FP8" else "4-bit")


def test_the_config_s_own_quantization_wins_over_the_modelopt_file(tmp_path: Path) -> None:
    raw = catalog_json("llama-3.1-8b") | {"quantization_config": {"quant_method": "fp8"}}
    path = write_config(tmp_path, raw)
    (path.parent / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": "NVFP4"}}))
    assert load_model_config(path).checkpoint_scheme == "fp8"


@pytest.mark.parametrize(
    "content",
    [
        '{"quantization": "FP8"}',
        "[1]",
        "{",
        '{"quantization": {"quant_algo": 8}}',
        # read as 16-bit, these priced the weights at two to four times their stored bytes
        '{"quantization": {}}',
        '{"quantization": {"quant_algo": "FP6_TYPO"}}',
        '{"quantization": {"quant_algo": "MIXED_PRECISION"}}',
        '{"quantization": {"quant_algo": "MIXED_PRECISION", "quantized_layers": [1]}}',
        '{"quantization": {"quant_algo": "MIXED_PRECISION", "quantized_layers": {"a": {"quant_algo": "X"}}}}',
    ],
)
def test_a_malformed_modelopt_file_is_named(tmp_path: Path, content: str) -> None:
    path = write_config(tmp_path, catalog_json("llama-3.1-8b"))
    (path.parent / "hf_quant_config.json").write_text(content)
    with pytest.raises(ConfigError, match="hf_quant_config.json"):
        load_model_config(path)


def test_modelopt_files_without_weight_quantization_or_with_mixed_layers(tmp_path: Path) -> None:
    # a KV-cache-only export (quant_algo null) keeps 16-bit weights; a mixed-precision one is priced at its
    # narrowest layers (NVFP4 experts beside FP8 attention: the MoE experts as MXFP4's 4.25 bits)
    path = write_config(tmp_path, catalog_json("qwen3-30b-a3b") | {"quantization_config": None})
    side = path.parent / "hf_quant_config.json"
    side.write_text(json.dumps({"quantization": {"quant_algo": None, "kv_cache_quant_algo": "FP8"}}))
    assert load_model_config(path).checkpoint_scheme is None
    layers = {
        "model.layers.0.mlp.experts": {"quant_algo": "NVFP4"},
        "model.layers.0.self_attn": {"quant_algo": "FP8"},
    }
    side.write_text(
        json.dumps({"quantization": {"quant_algo": "MIXED_PRECISION", "quantized_layers": layers}})
    )
    arch = load_model_config(
        path
    )  # a null quantization_config in config.json counts as none: the file is read
    assert (arch.checkpoint_scheme, arch.checkpoint_precision) == ("4-bit", "mxfp4")
    side.write_text(json.dumps({"quantization": {"quant_algo": "W8A16"}}))
    assert load_model_config(path).checkpoint_scheme == "int8"


@pytest.mark.parametrize(
    ("experts", "attention"),
    [("W4A16_AWQ", "FP8"), ("W4A8_AWQ", "W8A8_SQ_PER_CHANNEL"), ("INT4_AWQ", "INT8_SQ"), ("NVFP4", "FP8")],
)
def test_a_mixed_export_is_priced_at_its_4_bit_layers_whatever_their_name(
    tmp_path: Path, experts: str, attention: str
) -> None:
    # every W4A* and *4* scheme stores 4-bit weights, whatever the other layers store: AWQ experts beside
    # FP8 or int8 attention were read as their 8-bit layers (twice the expert bytes)
    path = write_config(tmp_path, catalog_json("qwen3-30b-a3b"))
    layers = {
        "model.layers.0.self_attn": {"quant_algo": attention},
        "model.layers.0.mlp": {"quant_algo": experts},
    }
    (path.parent / "hf_quant_config.json").write_text(
        json.dumps({"quantization": {"quant_algo": "MIXED_PRECISION", "quantized_layers": layers}})
    )
    arch = load_model_config(path)
    assert (arch.checkpoint_scheme, arch.checkpoint_precision) == ("4-bit", "mxfp4")


def test_only_a_config_json_reads_the_modelopt_file_beside_it(tmp_path: Path) -> None:
    # a folder of several models' JSON files: llama.json is not that folder's checkpoint
    other = tmp_path / "llama.json"
    other.write_text(json.dumps(catalog_json("llama-3.1-8b")))
    (tmp_path / "hf_quant_config.json").write_text(json.dumps({"quantization": {"quant_algo": "FP8"}}))
    assert load_model_config(other).checkpoint_scheme is None


def test_a_mixed_export_written_inside_config_json_is_read_as_the_sidecar_is(tmp_path: Path) -> None:
    # newer ModelOpt exports put the same object in config.json's quantization_config: its layers were never
    # read (16-bit weights, four times the expert bytes), nor was an unknown algorithm refused
    layers = {
        "model.layers.0.mlp.experts": {"quant_algo": "NVFP4"},
        "model.layers.0.attn": {"quant_algo": "FP8"},
    }
    quant = {"quant_method": "modelopt", "quant_algo": "MIXED_PRECISION", "quantized_layers": layers}
    path = write_config(tmp_path, catalog_json("qwen3-30b-a3b") | {"quantization_config": quant})
    arch = load_model_config(path)
    assert (arch.checkpoint_scheme, arch.checkpoint_precision) == ("4-bit", "mxfp4")
    path.write_text(
        json.dumps(catalog_json("qwen3-30b-a3b") | {"quantization_config": quant | {"quant_algo": "FP6"}})
    )
    with pytest.raises(ConfigError, match=r"config.json: quantization_config.quant_algo: unknown ModelOpt"):
        load_model_config(path)


def test_a_dense_mixed_export_is_priced_at_the_narrowest_scheme_the_model_prices(tmp_path: Path) -> None:
    # a dense model's 4-bit weights are not modelled (bf16): beside fp8 attention the export prices as fp8,
    # the narrowest precision of its layers the model has, not as bf16 (the narrowest stored scheme's price)
    path = write_config(tmp_path, catalog_json("llama-3.1-8b"))
    layers = {
        "model.layers.0.mlp": {"quant_algo": "W4A16_AWQ"},
        "model.layers.0.self_attn": {"quant_algo": "FP8"},
    }
    (path.parent / "hf_quant_config.json").write_text(
        json.dumps({"quantization": {"quant_algo": "MIXED_PRECISION", "quantized_layers": layers}})
    )
    arch = load_model_config(path)
    assert (arch.checkpoint_scheme, arch.checkpoint_precision) == ("4-bit", "fp8")

"""A newcomer's and a fuzzer's findings (session 28): each was a silent default, a traceback, or a message
naming a value the user did not write. Each now gives one clear line naming the field and exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dse.cli import app
from tests.workload.test_models import _catalog_json

runner = CliRunner()
SERVE = ["--model", "llama-3.1-8b", "--input-tokens", "128", "--output-tokens", "16"]


def refused(args: list[str], *needles: str) -> str:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    for needle in needles:
        assert needle in result.output, result.output
    return result.output


@pytest.mark.parametrize(
    ("quant", "needle"),
    [
        # Transformers' AutoQuantizationConfig and vLLM read quant_method from this object and refuse a
        # config without one: these were priced as 16-bit weights without a word
        ("fp8", "quantization_config must be an object"),
        ([{"quant_method": "fp8"}], "quantization_config must be an object"),
        ({"bits": 4}, "quantization_config.quant_method must be a string"),
        (
            {"quant_method": 8},
            "quant_method must be a string (fp8, mxfp4, awq, compressed-tensors, ...), got 8",
        ),
        ({"quant_method": "modelopt", "quant_algo": 8}, "quantization_config.quant_algo"),
        ({"quant_method": "compressed-tensors", "config_groups": "w4a16"}, "config_groups must be an object"),
        ({"quant_method": "compressed-tensors", "config_groups": {"g": [4]}}, "config_groups.g must be"),
        (
            {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": "4"}}}},
            "config_groups.g.weights.num_bits must be an integer, got '4'",
        ),
    ],
)
def test_a_malformed_quantization_config_is_named_not_priced_as_bf16(
    tmp_path: Path, quant: object, needle: str
) -> None:
    raw = _catalog_json("qwen3-30b-a3b") | {"quantization_config": quant}
    (tmp_path / "config.json").write_text(json.dumps(raw))
    refused(["predict", "--model", str(tmp_path), *SERVE[2:], "--json"], "config.json", needle)

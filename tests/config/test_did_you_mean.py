"""Unknown GPU and model names get the closest catalog names in their error (`dse.errors.did_you_mean`)."""

from __future__ import annotations

import pytest

from dse.errors import ConfigError, did_you_mean
from dse.hardware.catalog import list_gpus, load_gpu
from dse.workload.models import list_models, load_model_config


@pytest.mark.parametrize(
    ("name", "suggested"),
    [("h100", "h100-sxm"), ("a100", "a100-sxm-80gb"), ("b300", "b200"), ("H200", "h200-sxm")],
)
def test_unknown_gpu_names_suggest_the_catalog_ones(name: str, suggested: str) -> None:
    with pytest.raises(ConfigError, match=rf"unknown GPU '{name}' \(did you mean [^)]*{suggested}"):
        load_gpu(name)


@pytest.mark.parametrize(
    ("name", "suggested"),
    [
        # a catalog name the input extends with more than a fine-tune suffix (those resolve: test_models)
        ("llama-3.1-8b-long-context", "llama-3.1-8b"),
        ("meta-llama/Llama-3.1-8B-Instruct-128k", "llama-3.1-8b"),  # a Hugging Face id
        ("Qwen/Qwen3-8B-Reranker", "qwen3-8b"),
        ("deepseek-v4", "deepseek-v3 or deepseek-v3.2"),  # similar
    ],
)
def test_unknown_model_names_suggest_the_catalog_ones(name: str, suggested: str) -> None:
    with pytest.raises(ConfigError, match=rf"\(did you mean {suggested}\?\)"):
        load_model_config(name)


def test_nothing_close_suggests_nothing() -> None:
    assert did_you_mean("zzzz", list_gpus()) == ""
    assert did_you_mean("", list_models()) == ""
    with pytest.raises(ConfigError) as info:
        load_model_config("foo")
    assert "did you mean" not in str(info.value)

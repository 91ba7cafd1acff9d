"""Qwen3 dense models: the `qwen3` reader, published parameter counts, q/k norms in the graph."""

from __future__ import annotations

import pytest

from dse.errors import ConfigError
from dse.workload.llm import build_decode_graph, build_prefill_graph
from dse.workload.models import arch_from_hf_config, list_models, load_model_config
from dse.workload.ops import NormOp

# Qwen/Qwen3-*B model cards: "Number of Parameters: 8.2B / 14.8B / 32.8B; Non-Embedding: 6.95B / 13.2B /
# 31.2B"; the HF safetensors metadata reads 8.19B, 14.8B, 32.8B.
PUBLISHED = {
    "qwen3-8b": (8.19e9, 6.95e9),
    "qwen3-14b": (14.8e9, 13.2e9),
    "qwen3-32b": (32.8e9, 31.2e9),
}


def test_catalog_has_the_qwen3_dense_models() -> None:
    assert set(PUBLISHED) <= set(list_models())
    assert load_model_config("Qwen/Qwen3-32B").name == "qwen3-32b"


@pytest.mark.parametrize(("name", "published"), sorted(PUBLISHED.items()))
def test_param_counts_match_the_model_cards(name: str, published: tuple[float, float]) -> None:
    total, non_embedding = published
    arch = load_model_config(name)
    counts = arch.param_counts()
    assert arch.num_params == pytest.approx(total, rel=0.01)
    assert counts["layers"] + counts["other"] == pytest.approx(non_embedding, rel=0.01)


def test_qwen3_fields() -> None:
    a = load_model_config("qwen3-8b")
    assert (a.model_type, a.head_dim, a.num_kv_heads, a.hidden_size) == ("qwen3", 128, 8, 4096)
    assert a.qk_norm and not a.qkv_bias and not a.o_bias and not a.tie_word_embeddings
    assert a.sliding_window is None and a.max_position_embeddings == 40960
    # q_norm and k_norm weights: head_dim each per layer
    without = a.model_copy(update={"qk_norm": False})
    assert a.num_params - without.num_params == a.num_layers * 2 * a.head_dim


def test_head_dim_defaults_to_128_for_qwen3() -> None:
    raw = {
        "model_type": "qwen3",
        "hidden_size": 1024,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "num_hidden_layers": 2,
        "intermediate_size": 3072,
        "vocab_size": 1000,
        "max_position_embeddings": 4096,
    }
    a = arch_from_hf_config(raw, name="tiny-qwen3")
    assert a.head_dim == 128 and a.q_dim == 2048  # not hidden / heads = 64
    with pytest.raises(ConfigError, match="sliding_window"):
        arch_from_hf_config({**raw, "use_sliding_window": True}, name="bad")


@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_graph_has_per_head_q_k_norms(phase: str) -> None:
    a = load_model_config("qwen3-14b")
    if phase == "prefill":
        g, tokens = build_prefill_graph(a, batch=2, seq_len=100), 200
    else:
        g, tokens = build_decode_graph(a, batch=8, context_len=500), 8
    norms = {op.name.rsplit("/", 1)[-1]: op for op in g.ops if isinstance(op, NormOp)}
    q, k = norms["q_norm"], norms["k_norm"]
    assert (q.rows, q.cols, q.count, q.kind) == (tokens * a.num_heads, 128, a.num_layers, "rmsnorm")
    assert (k.rows, k.cols) == (tokens * a.num_kv_heads, 128)
    names = [op.name.rsplit("/", 1)[-1] for op in g.ops]
    assert names.index("qkv_proj") < names.index("q_norm") < names.index("k_norm") < names.index("rotary")


def test_other_models_have_no_q_k_norms() -> None:
    g = build_decode_graph(load_model_config("qwen2.5-7b"), batch=4, context_len=100)
    assert not any(op.name.endswith(("q_norm", "k_norm")) for op in g.ops)

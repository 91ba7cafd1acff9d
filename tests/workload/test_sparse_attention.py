"""DeepSeek sparse attention (GLM-5): the indexer's ops and keys capped at index_topk per query."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.serving.static import _attention_over_steps, _split_decode_graph
from dse.workload.engine import engine_step_graph, kv_bytes_per_token
from dse.workload.llm import build_decode_graph, build_prefill_graph
from dse.workload.models import load_model_config
from dse.workload.ops import AttentionOp, GemmOp

GLM5 = load_model_config("glm-5")


def _attention(graph) -> list[AttentionOp]:  # type: ignore[no-untyped-def]
    return [op for op in graph.ops if isinstance(op, AttentionOp) and "/attn/attention" in op.name]


def test_glm5_fields_from_its_config() -> None:
    a = GLM5
    assert (a.index_topk, a.index_n_heads, a.index_head_dim) == (2048, 32, 128)
    assert (a.q_lora_rank, a.kv_lora_rank, a.qk_nope_head_dim, a.qk_rope_head_dim, a.v_head_dim) == (
        2048, 512, 192, 64, 256,
    )  # fmt: skip
    # the MLA latent (512 + 64 elements in the KV dtype) and the indexer's fp8 key with its fp32 scale
    assert a.kv_cache_elements_per_token == 78 * (512 + 64)
    assert a.indexer_cache_bytes_per_token == 78 * (128 + 4)
    assert kv_bytes_per_token(a, "bf16", "fp8") == 78 * (576 + 132)  # an fp8 cache leaves the indexer's as is
    assert kv_bytes_per_token(a, "bf16") == 78 * (2 * 576 + 132)


def test_decode_reads_at_most_topk_keys_but_the_indexer_scores_all() -> None:
    short = build_decode_graph(GLM5, batch=4, context_len=1000)
    long = build_decode_graph(GLM5, batch=4, context_len=20000)
    assert [op.seq_len_kv for op in _attention(short)] == [1001]  # the cached context and the new token
    assert [op.seq_len_kv for op in _attention(long)] == [2048]
    indexer = [op for op in long.ops if op.name.endswith("/attn/indexer")]
    assert len(indexer) == 1 and indexer[0].seq_len_kv == 20001 and indexer[0].num_heads == 32


@settings(max_examples=25, deadline=None)
@given(seq_len=st.integers(2, 9000))  # one token takes the decode (absorbed) form
def test_prefill_pairs_are_the_sum_of_min_position_topk(seq_len: int) -> None:
    """Query at position p (1-based) attends to min(p, topk) keys: the split ops hold exactly those pairs."""
    graph = build_prefill_graph(GLM5, batch=2, seq_len=seq_len)
    pairs = sum(op.batch * op.num_score_pairs for op in _attention(graph))
    expected = 2 * sum(min(p, GLM5.index_topk) for p in range(1, seq_len + 1))
    assert pairs == pytest.approx(expected)
    (indexer,) = [op for op in graph.ops if op.name.endswith("/attn/indexer")]
    # the indexer scores every causal pair: 2 x 32 heads x 128 FLOP each, in fp8
    assert isinstance(indexer, GemmOp) and indexer.dtype == "fp8"
    assert indexer.flop == pytest.approx(2 * 2 * 32 * 128 * seq_len * (seq_len + 1) / 2, rel=1 / seq_len)


def test_dense_mla_model_is_unchanged() -> None:
    ds = load_model_config("deepseek-v3")
    graph = build_decode_graph(ds, batch=4, context_len=20000)
    assert [op.seq_len_kv for op in _attention(graph)] == [20001]
    assert not any("indexer" in op.name for op in graph.ops)


def test_engine_kv_dtype_leaves_the_indexer_keys_fp8() -> None:
    step = engine_step_graph(GLM5, decodes=4, prefills=0, input_tokens=1, context_len=8000, kv_dtype="bf16")
    (indexer,) = [op for op in step.ops if op.name.endswith("/attn/indexer")]
    assert isinstance(indexer, AttentionOp) and indexer.kv_dtype == "fp8"


def test_static_decode_steps_keep_the_topk_and_the_windows() -> None:
    """The static predictor regrows each decode step's attention: capped keys stay capped (GLM-5's
    top-k, gpt-oss's 128-token window), the indexer and global layers read the whole context."""
    for name, leaf, keys in (("glm-5", "attention", 2048), ("gpt-oss-120b", "local_attention", 128)):
        arch = load_model_config(name)
        _, attention = _split_decode_graph(build_decode_graph(arch, batch=2, context_len=100))
        grown = _attention_over_steps(attention, range(9999, 10000), arch).ops
        assert {op.name.rsplit("/", 1)[-1]: op.seq_len_kv for op in grown}[leaf] == keys
        assert max(op.seq_len_kv for op in grown) == 10000


def test_deepseek_v32_is_deepseek_v3_with_the_indexer() -> None:
    v32, v3 = load_model_config("deepseek-v3.2"), load_model_config("deepseek-v3")
    assert v32.model_type == "deepseek_v32" and (v32.index_topk, v32.index_n_heads) == (2048, 64)
    assert v32.model_copy(update={"index_topk": 0, "index_n_heads": 0, "index_head_dim": 0}).num_params == (
        v3.num_params
    )

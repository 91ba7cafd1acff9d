"""Latent attention (DeepSeek), alternating local attention (gpt-oss, Gemma-3, Llama-4) and Gemma's norms."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.workload.arch import layer_label
from dse.workload.engine import ENGINES, engine_step_graph
from dse.workload.graph import WorkloadGraph
from dse.workload.llm import build_decode_graph, build_prefill_graph, decode_keys_of, kv_cache_bytes
from dse.workload.models import load_model_config
from dse.workload.ops import AttentionOp, GemmOp, NormOp


def _attention(graph: WorkloadGraph) -> list[AttentionOp]:
    return [op for op in graph if isinstance(op, AttentionOp)]


def _op(graph: WorkloadGraph, suffix: str):  # noqa: ANN202
    (op,) = [op for op in graph if op.name.endswith(suffix)]
    return op


def test_layer_labels() -> None:
    assert layer_label((0, 1, 2, 3)) == "layer[0-3]"
    assert layer_label((1, 3, 5)) == "layer[1-5:2]"
    assert layer_label((0, 1, 5)) == "layer[0,1,5]"
    assert layer_label((7,)) == "layer[7]"


# ---- MLA


def test_mla_kv_cache_is_one_latent_per_token_and_layer() -> None:
    ds = load_model_config("deepseek-v3")
    assert ds.is_mla and ds.kv_cache_elements_per_token == 61 * (512 + 64)
    assert kv_cache_bytes(ds, "bf16", 1000) == 1000 * 61 * 576 * 2


def test_mla_decode_is_absorbed_multi_query_attention() -> None:
    ds = load_model_config("deepseek-v3")
    graph = build_decode_graph(ds, batch=4, context_len=999)
    (attn,) = _attention(graph)
    assert (attn.num_heads, attn.num_kv_heads, attn.head_dim, attn.seq_len_kv) == (128, 1, 288, 1000)
    # the cache read is exact: one 576-element latent per token (K and V share it)
    assert attn.min_dram_bytes - 2 * 4 * 128 * 288 * 2 == 4 * 1000 * 576 * 2
    q_absorb, v_absorb = _op(graph, "/attn/q_absorb"), _op(graph, "/attn/v_absorb")
    assert (q_absorb.batch, q_absorb.m, q_absorb.n, q_absorb.k) == (128, 4, 512, 128)
    assert (v_absorb.batch, v_absorb.m, v_absorb.n, v_absorb.k) == (128, 4, 128, 512)
    assert not any(op.name.endswith("kv_b_proj") for op in graph)
    assert _op(graph, "/attn/qkv_a_proj").n == 1536 + 512 + 64


def test_mla_prefill_expands_keys_and_values() -> None:
    ds = load_model_config("deepseek-v3")
    graph = build_prefill_graph(ds, batch=1, seq_len=256, precision="fp8")
    (attn,) = _attention(graph)
    assert (attn.num_heads, attn.num_kv_heads, attn.head_dim) == (128, 128, 160)
    assert attn.flop == 128 * (2 * 192 + 2 * 128) * attn.num_score_pairs  # q.k over 192, p.v over 128
    kv_b = _op(graph, "/attn/kv_b_proj")
    assert (kv_b.m, kv_b.n, kv_b.k, kv_b.dtype) == (256, 128 * 256, 512, "fp8")
    norms = {op.name.rsplit("/", 1)[1]: op.cols for op in graph if isinstance(op, NormOp)}
    assert norms["q_a_norm"] == 1536 and norms["kv_a_norm"] == 512


# ---- local attention


@pytest.mark.parametrize("context_len", [10, 127, 128, 5000])
def test_gpt_oss_decode_window_on_alternate_layers(context_len: int) -> None:
    arch = load_model_config("gpt-oss-20b")
    local, glob = _attention(build_decode_graph(arch, batch=2, context_len=context_len))
    assert local.name == "gpt-oss-20b/layer[0-22:2]/attn/local_attention" and local.count == 12
    assert glob.name == "gpt-oss-20b/layer[1-23:2]/attn/attention" and glob.count == 12
    assert local.seq_len_kv == min(context_len + 1, 128) and glob.seq_len_kv == context_len + 1


def test_llama4_decode_chunks() -> None:
    arch = load_model_config("llama-4-scout")
    assert arch.local_attention_layers == tuple(i for i in range(48) if (i + 1) % 4)
    assert arch.decode_keys(8192, local=True) == 8192 and arch.decode_keys(8193, local=True) == 1
    assert arch.decode_keys(20000, local=True) == 20000 - 2 * 8192 and arch.decode_keys(20000) == 20000
    chunked = _attention(build_decode_graph(arch, batch=1, context_len=9000))
    assert sorted((op.count, op.seq_len_kv) for op in chunked) == [(12, 9001), (36, 9001 - 8192)]


def test_gemma3_five_local_per_global() -> None:
    arch = load_model_config("gemma-3-27b")
    assert arch.sliding_window == 1024 and len(arch.local_attention_layers) == 52
    assert [i for i in range(62) if i not in arch.local_attention_layers] == list(range(5, 62, 6))
    graph = build_decode_graph(arch, batch=1, context_len=4000)
    assert sorted((op.count, op.seq_len_kv) for op in _attention(graph)) == [(10, 4001), (52, 1024)]
    names = {op.name.rsplit("/", 2)[-2] + "/" + op.name.rsplit("/", 1)[1] for op in graph}
    assert {"attn/post_norm", "mlp/post_norm", "embed/scale", "attn/q_norm"} <= names


def _pairs(ops: list[AttentionOp]) -> float:
    return sum(op.batch * op.num_score_pairs * op.count for op in ops)


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(["gpt-oss-20b", "gemma-3-12b", "llama-4-scout"]),
    batch=st.integers(1, 4),
    seq_len=st.integers(1, 20000),
)
def test_local_prefill_has_the_band_pairs(name: str, batch: int, seq_len: int) -> None:
    """The split ops of a local layer's prefill hold exactly the query-key pairs of its band or chunks."""
    arch = load_model_config(name)
    graph = build_prefill_graph(arch, batch=batch, seq_len=seq_len)
    local = [op for op in _attention(graph) if "/attn/local_attention" in op.name]
    glob = [op for op in _attention(graph) if "/attn/local_attention" not in op.name]
    n_local, s = len(arch.local_attention_layers), seq_len
    if arch.attention_chunk_size:
        c = arch.attention_chunk_size
        band = (s // c) * c * (c + 1) / 2 + (s % c) * (s % c + 1) / 2
    else:
        w = min(s, arch.sliding_window or s)
        band = w * (w + 1) / 2 + (s - w) * w
    assert _pairs(local) == pytest.approx(batch * band * n_local)
    assert _pairs(glob) == pytest.approx(batch * s * (s + 1) / 2 * (arch.num_layers - n_local))
    assert all(op.seq_len_q <= op.seq_len_kv for op in local)


def test_mistral_keeps_full_prefill_attention() -> None:
    # every layer windowed: prefill unchanged (module docstring of dse.workload.llm), decode windowed
    arch = load_model_config("mistral-7b")
    (attn,) = _attention(build_prefill_graph(arch, batch=1, seq_len=5000))
    assert attn.seq_len_kv == 5000 and attn.count == 32
    (attn,) = _attention(build_decode_graph(arch, batch=1, context_len=5000))
    assert attn.seq_len_kv == 4096


def test_gpt_oss_attention_biases_and_sinks_in_params() -> None:
    arch = load_model_config("gpt-oss-120b")
    qkv = _op(build_prefill_graph(arch, batch=1, seq_len=16), "/attn/qkv_proj")
    assert isinstance(qkv, GemmOp) and qkv.n == (64 + 2 * 8) * 64
    no_sinks = arch.model_copy(update={"attention_sinks": False})
    assert arch.num_params - no_sinks.num_params == 36 * 64


@pytest.mark.parametrize("name", ["gpt-oss-20b", "gemma-3-12b", "llama-4-scout", "mistral-7b"])
def test_decode_keys_of_each_attention_op(name: str) -> None:
    arch = load_model_config(name)
    for op in _attention(build_decode_graph(arch, batch=1, context_len=9000)):
        assert decode_keys_of(arch, op, 9001) == op.seq_len_kv


def test_engine_step_keeps_each_layer_kinds_prompt_attention() -> None:
    arch = load_model_config("gpt-oss-20b")
    step = engine_step_graph(
        arch, decodes=3, prefills=1, input_tokens=1000, context_len=500, engine=ENGINES["vllm"]
    )
    attention = _attention(step)
    assert len({op.name for op in attention}) == len(attention)
    prompt = [op for op in attention if "/prefill_" in op.name]
    alone = _attention(build_prefill_graph(arch, batch=1, seq_len=1000))
    assert _pairs(prompt) == _pairs(alone) and len(prompt) == len(alone)
    gemma = load_model_config("gemma-3-12b")
    (local,) = [op for op in _attention(build_decode_graph(gemma, batch=1, context_len=10)) if op.count == 40]
    assert local.name == "gemma-3-12b/layer[0-47]/attn/local_attention"

"""Gated DeltaNet linear attention (Qwen3.5): the hybrid layers, the recurrent state, engine steps, TP."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import pytest

from dse.errors import ConfigError
from dse.workload.engine import engine_step_graph
from dse.workload.llm import build_decode_graph, build_prefill_graph
from dse.workload.models import load_model_config
from dse.workload.ops import AttentionOp, ElementwiseOp, GemmOp
from dse.workload.sharding import Parallelism, check_parallelism, shard_arch

QWEN35 = load_model_config("qwen3.5-397b-a17b")
STATE = 64 * 128 * 128  # value heads x dk x dv of one layer (its config.json)


def test_card_and_layer_split() -> None:
    # huggingface.co/Qwen/Qwen3.5-397B-A17B: "397B in total and 17B activated" (with its ~0.4B vision encoder,
    # not counted here)
    assert QWEN35.num_params == pytest.approx(397e9, rel=0.01)
    assert QWEN35.num_active_params == pytest.approx(17e9, rel=0.03)
    assert QWEN35.full_attention_layers == tuple(range(3, 60, 4)) and len(QWEN35.linear_layers) == 45
    # only the 15 full-attention layers cache keys and values: 2 KV heads of 256
    assert QWEN35.kv_cache_elements_per_token == 15 * 2 * 2 * 256
    assert QWEN35.linear_state_elements == STATE and QWEN35.attn_output_gate


def _op(graph, leaf: str):  # type: ignore[no-untyped-def]
    (op,) = [o for o in graph.ops if o.name.endswith(f"/attn/{leaf}")]
    return op


def test_decode_reads_and_writes_each_sequences_state() -> None:
    graph = build_decode_graph(QWEN35, batch=8, context_len=4000)
    rec = _op(graph, "recurrence")
    assert isinstance(rec, ElementwiseOp) and rec.count == 45 and rec.num_elements == 8 * STATE
    assert rec.min_dram_bytes == pytest.approx(2 * 4 * 8 * STATE)  # fp32, read and written once
    attention = _op(graph, "attention")
    assert isinstance(attention, AttentionOp) and attention.count == 15 and attention.seq_len_kv == 4001
    # the gated full-attention layers project q, its gate, k and v in one GEMM
    qkv = _op(graph, "qkv_proj")
    assert isinstance(qkv, GemmOp) and qkv.n == 2 * 32 * 256 + 2 * 2 * 256


def test_prefill_runs_the_chunked_form() -> None:
    graph = build_prefill_graph(QWEN35, batch=2, seq_len=1000)
    chunks = _op(graph, "recurrence_chunks")
    assert isinstance(chunks, AttentionOp) and chunks.batch == 2 * 16 and chunks.seq_len_q == 64
    assert not [o for o in graph.ops if o.name.endswith("/attn/recurrence")]


def test_engine_step_prices_the_recurrence_per_decoding_sequence() -> None:
    step = engine_step_graph(QWEN35, decodes=5, prefills=1, input_tokens=300, context_len=2000)
    rec = _op(step, "recurrence")
    assert isinstance(rec, ElementwiseOp) and rec.num_elements == 5 * STATE  # not the step's 305 tokens
    assert [o for o in step.ops if o.name.endswith("/attn/prefill_recurrence_chunks")]
    decode_only = engine_step_graph(QWEN35, decodes=5, prefills=0, input_tokens=1, context_len=2000)
    assert decode_only.ops == build_decode_graph(QWEN35, batch=5, context_len=2000).ops


def test_tensor_parallel_splits_the_linear_heads(tmp_path: Path) -> None:
    gpu = shard_arch(QWEN35, Parallelism(tp=8, ep=8))
    assert (gpu.linear_num_key_heads, gpu.linear_num_value_heads) == (2, 8)
    assert gpu.linear_state_elements == STATE // 8
    shipped = resources.files("dse.workload").joinpath("data/models/qwen3.5-397b-a17b.json")
    raw = json.loads(shipped.read_text())["text_config"]
    tiny = tmp_path / "config.json"
    tiny.write_text(json.dumps({**raw, "linear_num_key_heads": 4, "linear_num_value_heads": 8}))
    with pytest.raises(ConfigError, match="linear-attention key heads"):
        check_parallelism(load_model_config(tiny), Parallelism(tp=8, ep=8))


def test_the_state_is_charged_to_the_kv_pool_per_running_sequence() -> None:
    """Per GPU at tp 8: 45 layers x (8 value heads x 128 x 128 fp32 state + 3 conv inputs of 2 x 2 x 128
    + 8 x 128 channels in bf16), in 16-token blocks of the 15 full-attention layers' bf16 KV (one
    replicated KV head of 256): the blocks one running sequence holds."""
    from dse.serving.load import _state_blocks

    state = 45 * (8 * 128 * 128 * 4 + 3 * (2 * 2 * 128 + 8 * 128) * 2)
    block = 16 * 15 * 2 * 256 * 2
    assert _state_blocks(QWEN35, Parallelism(tp=8, ep=8), "bf16", None, 16) == -(-state // block)
    assert _state_blocks(load_model_config("qwen3-8b"), Parallelism(), "bf16", None, 16) == 0


def test_the_state_dtype_follows_the_config(tmp_path: Path) -> None:
    shipped = resources.files("dse.workload").joinpath("data/models/qwen3.5-397b-a17b.json")
    raw = json.loads(shipped.read_text())["text_config"]
    assert QWEN35.linear_state_dtype == "fp32"  # its config: mamba_ssm_dtype float32
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**raw, "mamba_ssm_dtype": "bfloat16"}))
    half = load_model_config(path)
    rec = _op(build_decode_graph(half, batch=2, context_len=10), "recurrence")
    assert half.linear_state_dtype == "bf16" and rec.min_dram_bytes == pytest.approx(2 * 2 * 2 * STATE)
    path.write_text(json.dumps({**raw, "mamba_ssm_dtype": None}))  # null: absent, the fp32 default
    assert load_model_config(path).linear_state_dtype == "fp32"


@pytest.mark.parametrize(
    ("name", "total", "active", "linear"),
    [
        # huggingface.co/Qwen/Qwen3.5-122B-A10B: "122B in total and 10B activated"
        ("qwen3.5-122b-a10b", 122e9, 10e9, 36),
        # huggingface.co/Qwen/Qwen3.5-35B-A3B: "35B in total and 3B activated"
        ("qwen3.5-35b-a3b", 35e9, 3e9, 30),
        # huggingface.co/Qwen/Qwen3.5-27B: 27B, dense (its MLP is no mixture of experts)
        ("qwen3.5-27b", 27e9, 27e9, 48),
    ],
)
def test_the_other_qwen35_sizes(name: str, total: float, active: float, linear: int) -> None:
    """Model cards' totals within 2%; the active counts are the names' round numbers (A10B, A3B: ours
    9.8B and 3.5B with the embedding table, 9.0B and 2.9B without), so within 20%; three of four layers
    linear."""
    arch = load_model_config(name)
    assert arch.num_params == pytest.approx(total, rel=0.02)
    assert arch.num_active_params == pytest.approx(active, rel=0.2)
    assert arch.is_moe == (active < total)
    assert len(arch.linear_layers) == linear == 3 * len(arch.full_attention_layers)

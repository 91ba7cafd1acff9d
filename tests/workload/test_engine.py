"""Engine step graphs: fusions, KV-cache dtype and sampler ops."""

from __future__ import annotations

import dataclasses

import pytest

from dse.errors import ConfigError
from dse.hardware.catalog import load_gpu
from dse.perf.coeffs import load_default_coeffs
from dse.perf.predict import predict_graph
from dse.perf.types import OperatingPoint
from dse.workload.engine import (
    ENGINES,
    SEGMENTED_SORT_MIN_ROWS,
    engine_profile,
    engine_step_graph,
    kv_bytes_per_token,
    sampler_ops,
)
from dse.workload.graph import WorkloadGraph
from dse.workload.llm import build_decode_graph, kv_cache_bytes
from dse.workload.models import load_model_config
from dse.workload.ops import AttentionOp, GemmOp


@pytest.fixture(scope="module")
def arch():
    return load_model_config("qwen3-8b")


def _step(arch, **kw):
    args = dict(decodes=32, prefills=0, input_tokens=512, context_len=1000, precision="fp8")
    args.update(kw)
    return engine_step_graph(arch, **args)


def test_defaults_are_the_model_graph(arch):
    step = _step(arch, precision="bf16")
    assert step.ops == build_decode_graph(arch, batch=32, context_len=1000, precision="bf16").ops


@pytest.mark.parametrize("engine", ["vllm", "trtllm", "sglang"])
def test_fusions_drop_kernels_and_time(arch, engine):
    gpu = load_gpu("h100-sxm")
    coeffs = load_default_coeffs(gpu)
    plain = _step(arch)
    fused = _step(arch, engine=ENGINES[engine])
    leaves = {op.name.rsplit("/", 1)[-1] for op in fused.ops}
    assert not leaves & ENGINES[engine].fused_ops
    assert {"qkv_proj", "o_proj", "gate_up_proj", "down_proj", "lm_head"} <= leaves  # GEMMs never fused
    assert any(isinstance(op, AttentionOp) for op in fused.ops)
    assert fused.num_kernels < plain.num_kernels
    # fewer launch-bound kernels in a decode step: a shorter step
    t_plain = predict_graph(plain, gpu, OperatingPoint(), coeffs).latency_s
    t_fused = predict_graph(fused, gpu, OperatingPoint(), coeffs).latency_s
    assert t_fused < t_plain


def test_fp8_kv_cache_halves_cache_bytes(arch):
    bf16 = next(op for op in _step(arch).ops if isinstance(op, AttentionOp))
    fp8 = next(op for op in _step(arch, kv_dtype="fp8").ops if isinstance(op, AttentionOp))
    kv_b16 = 2 * 32 * 1001 * arch.num_kv_heads * arch.head_dim * 2
    assert bf16.min_dram_bytes - fp8.min_dram_bytes == pytest.approx(kv_b16 / 2)
    assert kv_bytes_per_token(arch, "bf16") == kv_cache_bytes(arch, "bf16", 1)
    assert kv_bytes_per_token(arch, "bf16", "fp8") == pytest.approx(kv_cache_bytes(arch, "bf16", 1) / 2)


def test_sampler_rows_and_traffic(arch):
    assert sampler_ops(arch, rows=8, sampling="none") == ()
    vocab_fp32_bytes = arch.vocab_size * 4
    greedy = sum(op.min_dram_bytes * op.count for op in sampler_ops(arch, rows=8, sampling="greedy"))
    topp = sum(op.min_dram_bytes * op.count for op in sampler_ops(arch, rows=8, sampling="top_k_top_p"))
    # greedy: the bf16 -> fp32 cast and one pass over the fp32 logits
    assert greedy >= 8 * (arch.vocab_size * 2 + 2 * vocab_fp32_bytes)
    # top-k/top-p: at least the 4 sort passes over key + index (24 bytes per element each) on top
    assert topp - greedy >= 8 * 4 * 24 * arch.vocab_size
    topp16 = sum(op.min_dram_bytes * op.count for op in sampler_ops(arch, rows=16, sampling="top_k_top_p"))
    assert topp16 == pytest.approx(2 * topp)
    # one sampled row per sequence emitting a token: decodes plus prompts ending in the step
    step = _step(arch, decodes=5, prefills=2, sampling="greedy")
    cast = next(op for op in step.ops if op.name.endswith("/sampler/logits_fp32"))
    assert cast.num_elements == 7 * arch.vocab_size


def test_sort_algorithm_follows_the_row_count(arch):
    def sort_bytes_per_element(rows):
        ops = sampler_ops(arch, rows=rows, sampling="top_k_top_p")
        sort = [op for op in ops if "/sampler/sort_" in op.name]
        return sum(op.min_dram_bytes * op.count for op in sort) / (rows * arch.vocab_size)

    few, many = (
        sort_bytes_per_element(SEGMENTED_SORT_MIN_ROWS - 1),
        sort_bytes_per_element(SEGMENTED_SORT_MIN_ROWS),
    )
    # full sort of all rows: 4 passes of 8-bit digits over key (4 B) + pair (8 B), read and written, then the
    # pairs' pass back into rows and the gather of key and int64 index
    assert few >= 4 * 24 + 16 + 24
    # cub's segmented sort: 6 passes of 6-bit digits, each re-reading the keys for its histogram
    assert many >= 6 * (24 + 4)
    assert many > few
    assert sort_bytes_per_element(8) == pytest.approx(
        few
    )  # per element, independent of rows below the switch


def test_bad_names(arch):
    with pytest.raises(ConfigError, match="engine 'tgi' is not one of"):
        engine_profile("tgi")
    with pytest.raises(ConfigError, match="sampling 'beam'"):
        _step(arch, sampling="beam")
    with pytest.raises(ConfigError, match="kv_dtype 'int4'"):
        _step(arch, kv_dtype="int4")
    with pytest.raises(ConfigError, match="decodes \\+ prefills >= 1"):
        _step(arch, decodes=0, prefills=0)


def _attn_leaves(step):
    return [op.name.rsplit("/", 1)[-1] for op in step.ops if "/attn/" in op.name]


def test_vllm_folds_qk_norm_into_rotary_and_keeps_rotary_without_it(arch):
    # Llama has no q/k norm: its RoPE kernel still runs under vLLM (one per layer, as in the plain graph)
    llama = load_model_config("llama-3.1-8b")
    assert not llama.qk_norm and llama.position_embedding == "rope"
    plain = _step(llama)
    fused = _step(llama, engine=ENGINES["vllm"])
    rotary = [op for op in fused.ops if op.name.endswith("/attn/rotary")]
    assert rotary == [op for op in plain.ops if op.name.endswith("/attn/rotary")]
    assert len(rotary) == 1 and rotary[0].count == llama.num_layers
    # Qwen3: Inductor's fused q/k-norm + RoPE kernel is one rotary kernel, no separate norms
    leaves = _attn_leaves(_step(arch, engine=ENGINES["vllm"]))
    assert leaves.count("rotary") == 1
    assert "q_norm" not in leaves and "k_norm" not in leaves
    assert {"q_norm", "k_norm", "rotary"} <= set(_attn_leaves(_step(arch)))


def test_trtllm_preprocessing_kernel_holds_rope_qk_norm_and_kv_write(arch):
    leaves = _attn_leaves(_step(arch, engine=ENGINES["trtllm"]))
    assert leaves.count("rotary") == 1
    assert not {"q_norm", "k_norm", "kv_cache_write"} & set(leaves)


def test_fp8_activation_quantization_is_counted_once(arch):
    """vLLM quantizes each fp8 GEMM's activation dynamically (the GEMM's own account replaces the graph's
    `*_quant` op); TensorRT-LLM's static scales need no quantization kernel; the plain graph keeps its
    `*_quant` ops and so its GEMMs must not count the quantization again."""
    gpu = load_gpu("h100-sxm")
    coeffs = load_default_coeffs(gpu)

    def gemms(step):
        return {op.name.rsplit("/", 1)[-1]: op for op in step.ops if isinstance(op, GemmOp)}

    plain, vllm, trt = _step(arch), _step(arch, engine=ENGINES["vllm"]), _step(arch, engine=ENGINES["trtllm"])
    quantized = {"qkv_proj", "gate_up_proj", "down_proj"}  # o_proj's input is quantized by its own op in vLLM
    assert {n for n, op in gemms(vllm).items() if op.act_quant} == quantized
    assert not any(op.act_quant for op in gemms(plain).values())
    assert not any(op.act_quant for op in gemms(trt).values())
    assert {"qkv_quant", "gate_up_quant", "down_quant"} <= {op.name.rsplit("/", 1)[-1] for op in plain.ops}
    # The same GEMM costs more with the quantization in its account, by a few microseconds per kernel.
    down = gemms(vllm)["down_proj"]
    t_quant = predict_graph(WorkloadGraph(name="q", ops=(down,)), gpu, OperatingPoint(), coeffs).latency_s
    bare = dataclasses.replace(down, act_quant=False)
    t_bare = predict_graph(WorkloadGraph(name="b", ops=(bare,)), gpu, OperatingPoint(), coeffs).latency_s
    assert 1e-6 < (t_quant - t_bare) / down.count < 50e-6

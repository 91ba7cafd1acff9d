"""LLM graph builders: FLOPs against the 2 x params x tokens rule, shapes, dtypes, counts and errors."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.errors import ConfigError
from dse.workload.graph import WorkloadGraph
from dse.workload.llm import LlmArch, build_decode_graph, build_prefill_graph
from dse.workload.models import list_models, load_model_config
from dse.workload.ops import AttentionOp, ElementwiseOp, GemmOp, NormOp


def _one_template(name: str) -> bool:
    """Every layer alike (no experts, latent attention, alternating local layers, linear-attention layers or
    Gemma's extra norms): the models these tests cover; the others are tested in test_moe.py,
    test_arch_variants.py and test_linear_attention.py."""
    a = load_model_config(name)
    alternating = 0 < len(a.local_attention_layers) < a.num_layers
    return not (a.is_moe or a.is_mla or alternating or a.sandwich_norm or a.linear_layers)


MODELS = [m for m in list_models() if _one_template(m)]
DECODERS = [m for m in MODELS if not m.startswith("bert-")]  # encoders have no decode


def _arch(name: str) -> LlmArch:
    return load_model_config(name)


def _ops(graph: WorkloadGraph, kind: type) -> list:
    return [op for op in graph if isinstance(op, kind)]


def _op(graph: WorkloadGraph, suffix: str):  # noqa: ANN202
    (op,) = [op for op in graph if op.name.endswith(suffix)]
    return op


def _reference_flop(arch: LlmArch, *, batch: int, q_len: int, kv_len: int) -> float:
    """2 x non-embedding params x tokens + attention score/value FLOPs + LM head (or pooler) rows."""
    counts = arch.param_counts()
    non_embedding = arch.num_params - counts["embedding"] - counts["lm_head"] - counts["pooler"]
    tokens = batch * q_len
    # causal: query i of the last q_len positions sees kv_len - q_len + i + 1 keys
    pairs = q_len * (kv_len - q_len) + q_len * (q_len + 1) / 2 if arch.causal else q_len * kv_len
    attention = 4 * batch * arch.num_heads * arch.head_dim * pairs * arch.num_layers
    head = 2 * batch * arch.vocab_size * arch.embed_dim if arch.causal else 2 * batch * arch.hidden_size**2
    return 2 * non_embedding * tokens + attention + head


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize(("batch", "seq_len"), [(1, 128), (4, 512), (2, 500)])
def test_prefill_flop_matches_parameter_rule(name: str, batch: int, seq_len: int) -> None:
    arch = _arch(name)
    graph = build_prefill_graph(arch, batch=batch, seq_len=seq_len)
    reference = _reference_flop(arch, batch=batch, q_len=seq_len, kv_len=seq_len)
    assert graph.total_flop() == pytest.approx(reference, rel=0.03)


@pytest.mark.parametrize("name", DECODERS)
def test_decode_flop_matches_parameter_rule(name: str) -> None:
    arch = _arch(name)
    graph = build_decode_graph(arch, batch=16, context_len=1000)
    reference = _reference_flop(arch, batch=16, q_len=1, kv_len=1001)
    assert graph.total_flop() == pytest.approx(reference, rel=0.03)


def test_llama_layer_ops_and_shapes() -> None:
    arch = _arch("llama-3.1-8b")
    graph = build_prefill_graph(arch, batch=2, seq_len=256)
    qkv = _op(graph, "/attn/qkv_proj")
    assert qkv.name == "llama-3.1-8b/layer[0-31]/attn/qkv_proj" and qkv.count == 32
    assert (qkv.m, qkv.n, qkv.k, qkv.batch, qkv.b_shared) == (512, (32 + 2 * 8) * 128, 4096, 1, True)
    gate_up = _op(graph, "/mlp/gate_up_proj")
    assert (gate_up.m, gate_up.n, gate_up.k) == (512, 2 * 14336, 4096)
    assert _op(graph, "/mlp/act").kind == "silu_mul"
    assert _op(graph, "/attn/rotary").num_elements == 512 * (32 + 8) * 128
    assert {op.kind for op in _ops(graph, NormOp)} == {"rmsnorm"}
    lm_head = _op(graph, "/lm_head")
    assert (lm_head.m, lm_head.n, lm_head.count) == (2, 128256, 1)  # last token of each sequence
    assert all(op.name.startswith("llama-3.1-8b/") for op in graph)


@pytest.mark.parametrize("name", DECODERS)
def test_attention_carries_gqa_heads(name: str) -> None:
    arch = _arch(name)
    prefill = build_prefill_graph(arch, batch=1, seq_len=64)
    for graph in (prefill, build_decode_graph(arch, batch=1, context_len=64)):
        (attn,) = _ops(graph, AttentionOp)
        assert (attn.num_heads, attn.num_kv_heads) == (arch.num_heads, arch.num_kv_heads)
        assert attn.head_dim == arch.head_dim
        assert attn.causal and attn.count == arch.num_layers


@pytest.mark.parametrize(("attention", "backend"), [("flash", "decode"), ("eager", "eager")])
def test_decode_step_shapes(attention: str, backend: str) -> None:
    arch = _arch("mistral-7b")
    graph = build_decode_graph(arch, batch=8, context_len=3000, attention=attention)
    (attn,) = _ops(graph, AttentionOp)
    assert (attn.batch, attn.seq_len_q, attn.seq_len_kv, attn.backend) == (8, 1, 3001, backend)
    assert all(op.m == 8 for op in _ops(graph, GemmOp))
    assert graph.meta["phase"] == "decode" and graph.meta["context_len"] == 3000


def test_prefill_attention_backends() -> None:
    arch = _arch("qwen2-1.5b")
    for attention in ("flash", "eager"):
        (attn,) = _ops(build_prefill_graph(arch, batch=3, seq_len=100, attention=attention), AttentionOp)
        assert (attn.seq_len_q, attn.seq_len_kv, attn.backend) == (100, 100, attention)


def test_gpt_and_opt_style_layers() -> None:
    gpt2 = build_prefill_graph(_arch("gpt2"), batch=1, seq_len=1024)
    names = [op.name.removeprefix("gpt2/") for op in gpt2]
    assert "embed/positions" in names and "layer[0-11]/mlp/up_proj" in names
    assert not any("rotary" in n or "gate_up" in n for n in names)
    assert _op(gpt2, "/mlp/act").kind == "gelu" and {op.kind for op in _ops(gpt2, NormOp)} == {"layernorm"}
    opt = build_prefill_graph(_arch("opt-1.3b"), batch=1, seq_len=64)
    assert _op(opt, "/mlp/act").kind == "relu"


def test_bert_is_a_post_ln_encoder() -> None:
    arch = _arch("bert-large")
    graph = build_prefill_graph(arch, batch=8, seq_len=512)
    (attn,) = _ops(graph, AttentionOp)
    assert not attn.causal and attn.num_score_pairs == 512 * 512
    names = [op.name.removeprefix("bert-large/") for op in graph]
    assert "lm_head" not in names and "pooler/dense" in names and "embed/token_types" in names
    assert not any("kv_cache" in n for n in names)
    # post-LN: each block's norm follows its residual add
    assert names.index("layer[0-23]/attn/norm") == names.index("layer[0-23]/attn/residual_add") + 1
    assert names.index("layer[0-23]/mlp/norm") == names.index("layer[0-23]/mlp/residual_add") + 1
    with pytest.raises(ConfigError, match="encoder"):
        build_decode_graph(arch, batch=1, context_len=10)


def test_fp8_gemms_write_bf16() -> None:
    graph = build_prefill_graph(_arch("llama-3.1-8b"), batch=1, seq_len=512, precision="fp8")
    fp8 = [op for op in _ops(graph, GemmOp) if op.dtype == "fp8"]
    assert len(fp8) == 4 and all(op.out_dtype == "bf16" for op in fp8)
    assert _op(graph, "/lm_head").dtype == "bf16"  # fp8 checkpoints keep the LM head in bf16
    quants = [op for op in _ops(graph, ElementwiseOp) if op.kind == "cast"]
    assert len(quants) == 4 and all(op.out_dtype == "fp8" for op in quants)
    assert {op.dtype for op in _ops(graph, NormOp)} == {"bf16"}
    (attn,) = _ops(graph, AttentionOp)
    assert attn.dtype == "bf16" and attn.cache_dtype == "bf16"


@pytest.mark.parametrize(
    ("precision", "gemm", "act"),
    [("fp32", "fp32", "fp32"), ("tf32", "tf32", "fp32"), ("bf16", "bf16", "bf16"), ("fp16", "fp16", "fp16")],
)
def test_precision_dtypes(precision: str, gemm: str, act: str) -> None:
    graph = build_decode_graph(_arch("qwen2-1.5b"), batch=4, context_len=128, precision=precision)
    assert {op.dtype for op in _ops(graph, GemmOp)} == {gemm}
    assert all(op.out_dtype is None for op in _ops(graph, GemmOp))
    assert {op.dtype for op in _ops(graph, NormOp)} | {op.dtype for op in _ops(graph, ElementwiseOp)} == {act}
    (attn,) = _ops(graph, AttentionOp)
    assert attn.cache_dtype == act


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"precision": "int4"}, "precision 'int4'.*fp32, tf32, bf16, fp16, fp8"),
        ({"attention": "sdpa"}, "attention 'sdpa'.*flash, eager"),
        ({"batch": 0}, "batch must be an integer >= 1"),
        ({"batch": True}, "batch must be an integer"),
        ({"batch": 2.0}, "batch must be an integer"),
        ({"seq_len": -5}, "seq_len must be an integer >= 1"),
        ({"seq_len": 1025}, r"seq_len 1025 \(--seq-len\) exceeds gpt2's max_position_embeddings 1024"),
    ],
)
def test_prefill_rejects_bad_inputs(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"batch": 1, "seq_len": 16, **kwargs}
    with pytest.raises(ConfigError, match=message):
        build_prefill_graph(_arch("gpt2"), **args)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"context_len": 0}, "context_len must be an integer >= 1"),
        ({"context_len": 1024}, "context_len 1024 \\+ 1 new token exceeds"),
        ({"precision": "fp64"}, "precision 'fp64'"),
    ],
)
def test_decode_rejects_bad_inputs(kwargs: dict[str, object], message: str) -> None:
    args: dict[str, object] = {"batch": 1, "context_len": 16, **kwargs}
    with pytest.raises(ConfigError, match=message):
        build_decode_graph(_arch("gpt2"), **args)  # type: ignore[arg-type]


def test_single_layer_name() -> None:
    arch = _arch("gpt2").model_copy(update={"num_layers": 1})
    graph = build_decode_graph(arch, batch=1, context_len=1)
    assert _op(graph, "/attn/qkv_proj").name == "gpt2/layer[0]/attn/qkv_proj"


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(MODELS),
    batch=st.integers(1, 64),
    seq_len=st.integers(1, 511),
    precision=st.sampled_from(["fp32", "tf32", "bf16", "fp16", "fp8"]),
)
def test_prefill_flop_strictly_increases(name: str, batch: int, seq_len: int, precision: str) -> None:
    arch = _arch(name)
    base = build_prefill_graph(arch, batch=batch, seq_len=seq_len, precision=precision).total_flop()
    more_batch = build_prefill_graph(arch, batch=batch + 1, seq_len=seq_len, precision=precision).total_flop()
    more_seq = build_prefill_graph(arch, batch=batch, seq_len=seq_len + 1, precision=precision).total_flop()
    assert more_batch > base and more_seq > base


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(DECODERS), batch=st.integers(1, 256), context_len=st.integers(1, 1000))
def test_decode_flop_strictly_increases(name: str, batch: int, context_len: int) -> None:
    arch = _arch(name)
    base = build_decode_graph(arch, batch=batch, context_len=context_len).total_flop()
    assert build_decode_graph(arch, batch=batch + 1, context_len=context_len).total_flop() > base
    assert build_decode_graph(arch, batch=batch, context_len=context_len + 1).total_flop() > base


@settings(max_examples=40, deadline=None)
@given(
    name=st.sampled_from(MODELS),
    batch=st.integers(1, 16),
    seq_len=st.integers(1, 512),
    precision=st.sampled_from(["fp32", "bf16", "fp8"]),
    attention=st.sampled_from(["flash", "eager"]),
)
def test_counts_multiply(name: str, batch: int, seq_len: int, precision: str, attention: str) -> None:
    arch = _arch(name)
    graph = build_prefill_graph(arch, batch=batch, seq_len=seq_len, precision=precision, attention=attention)
    layer_ops = [op for op in graph if "/layer[" in op.name]
    other_ops = [op for op in graph if "/layer[" not in op.name]
    assert all(op.count == arch.num_layers for op in layer_ops)
    num_embed_adds = sum(op.count - 1 for op in other_ops)  # BERT adds two embedding tables: one op, count 2
    assert graph.num_kernels == arch.num_layers * len(layer_ops) + len(other_ops) + num_embed_adds
    assert graph.total_flop() == pytest.approx(sum(op.flop * op.count for op in graph))
    assert len({op.name for op in graph}) == len(graph)  # one op per distinct kernel

"""Mixture-of-experts models: parameter counts against model cards, the MoE graph, distinct experts, mxfp4."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.errors import ConfigError
from dse.workload.graph import WorkloadGraph
from dse.workload.llm import LlmArch, build_decode_graph, build_prefill_graph, weight_bytes
from dse.workload.models import list_models, load_model_config
from dse.workload.moe import MXFP4_BITS_PER_PARAM, distinct_experts, expert_gemm_shape
from dse.workload.ops import GemmOp, Op

SHARED_MODELS = Path(__file__).resolve().parents[3] / "shared" / "data" / "models"

# (total, active) parameters as the model cards state them, and the relative tolerance their rounding
# allows (a card's "30.5B" is exact to +-0.05B; "17B" only to +-0.5B).
CARDS: dict[str, tuple[float, float, float]] = {
    # huggingface.co/Qwen/Qwen3-30B-A3B: "Number of Parameters: 30.5B in total and 3.3B activated"
    "qwen3-30b-a3b": (30.5e9, 3.3e9, 0.02),
    # huggingface.co/Qwen/Qwen3-Coder-30B-A3B-Instruct: "30.5B in total and 3.3B activated"
    "qwen3-coder-30b-a3b": (30.5e9, 3.3e9, 0.02),
    # huggingface.co/Qwen/Qwen3-235B-A22B: "235B in total and 22B activated"
    "qwen3-235b-a22b": (235e9, 22e9, 0.02),
    # huggingface.co/Qwen/Qwen3-Coder-480B-A35B-Instruct: "480B in total and 35B activated"
    "qwen3-coder-480b-a35b": (480e9, 35e9, 0.02),
    # huggingface.co/deepseek-ai/DeepSeek-V3: "671B total parameters with 37B activated for each token"
    # (the Hub's 685B adds the 14B multi-token-prediction module, not counted here)
    "deepseek-v3": (671e9, 37e9, 0.02),
    # Mixtral of Experts (arXiv:2401.04088), section 2: "47B parameters ... only uses 13B active";
    # mistral.ai's announcement: 46.7B total, 12.9B per token
    "mixtral-8x7b": (46.7e9, 12.9e9, 0.01),
    # huggingface.co/meta-llama/Llama-4-Scout-17B-16E: "17B activated, 109B total" (the total includes the
    # vision encoder, about 1B, which is not counted here)
    "llama-4-scout": (109e9, 17e9, 0.03),
    # huggingface.co/meta-llama/Llama-4-Maverick-17B-128E: "17B activated, 400B total"
    "llama-4-maverick": (400e9, 17e9, 0.03),
    # huggingface.co/moonshotai/Kimi-K2.5: "1T total parameters, 32B activated" (rounded: 1.03T / 32.9B here,
    # without the MoonViT vision encoder, ~0.4B)
    "kimi-k2.5": (1.0e12, 32e9, 0.03),
    # huggingface.co/zai-org/GLM-5: "744B parameters (40B active)"; the 0.95B embedding table is counted
    # among the active parameters here, without the multi-token-prediction layer
    "glm-5": (744e9, 40e9, 0.05),
}
# huggingface.co/MiniMaxAI/MiniMax-M2.5 (M2's architecture): "230B total parameters with 10B active"; the
# active count without the 0.6B embedding table (a lookup)
MINIMAX: tuple[float, float] = (230e9, 10e9)
# gpt-oss model card (arXiv:2508.10925), Table 1: total 116.83B / 20.91B; "active parameters per token"
# 5.13B / 3.61B count the unembedding but not the embedding table (a lookup).
GPT_OSS: dict[str, tuple[float, float]] = {
    "gpt-oss-120b": (116.83e9, 5.13e9),
    "gpt-oss-20b": (20.91e9, 3.61e9),
}
DENSE_CARDS: dict[str, tuple[float, float]] = {
    # huggingface.co/meta-llama/Llama-3.1-405B: "405B"; the Llama 3 paper (arXiv:2407.21783) Table 3
    "llama-3.1-405b": (405e9, 0.01),
    # huggingface.co/meta-llama/Llama-3.3-70B-Instruct: "70B" (the 3.1 70B architecture: 70.6B)
    "llama-3.3-70b": (70.6e9, 0.01),
    # huggingface.co/google/gemma-3-27b-it: 27.4B with the ~0.42B SigLIP vision tower, not counted here
    "gemma-3-27b": (27.4e9 - 0.42e9, 0.01),
    # huggingface.co/google/gemma-3-12b-it: 12.2B with the vision tower
    "gemma-3-12b": (12.2e9 - 0.42e9, 0.01),
    # huggingface.co/google/gemma-3-4b-it: 4.3B with the vision tower
    "gemma-3-4b": (4.3e9 - 0.42e9, 0.01),
    # huggingface.co/google/gemma-3-1b-it: "1B" (a text-only model; 1.00B here)
    "gemma-3-1b": (1.0e9, 0.01),
}
# Cards that count active parameters without the embedding table and the LM head: (total, active, rel).
# huggingface.co/zai-org/GLM-4.5: "355 billion total parameters and 32 billion active parameters"; GLM-4.6
# the same architecture; GLM-4.5-Air "106 billion total parameters and 12 billion active parameters". The
# totals here leave out the multi-token-prediction layer (speculative decoding).
CARDS_WITHOUT_EMBEDDINGS: dict[str, tuple[float, float, float]] = {
    "glm-4.5": (355e9, 32e9, 0.02),
    "glm-4.6": (355e9, 32e9, 0.02),
    "glm-4.5-air": (106e9, 12e9, 0.02),
}
ISSUE_NAMES = [*CARDS, *GPT_OSS, *DENSE_CARDS, *CARDS_WITHOUT_EMBEDDINGS]


def test_catalog_lists_the_new_models() -> None:
    assert set(ISSUE_NAMES) <= set(list_models())


@pytest.mark.parametrize("name", sorted(CARDS))
def test_total_and_active_params_match_cards(name: str) -> None:
    total, active, rel = CARDS[name]
    arch = load_model_config(name)
    assert arch.num_params == pytest.approx(total, rel=rel)
    assert arch.num_active_params == pytest.approx(active, rel=rel)


@pytest.mark.parametrize("name", sorted(GPT_OSS))
def test_gpt_oss_params_match_card(name: str) -> None:
    total, active = GPT_OSS[name]
    arch = load_model_config(name)
    assert arch.num_params == pytest.approx(total, rel=0.001)
    without_embedding = arch.num_active_params - arch.param_counts()["embedding"]
    assert without_embedding == pytest.approx(active, rel=0.005)


@pytest.mark.parametrize("name", sorted(CARDS_WITHOUT_EMBEDDINGS))
def test_glm4_moe_params_match_cards(name: str) -> None:
    total, active, rel = CARDS_WITHOUT_EMBEDDINGS[name]
    arch = load_model_config(name)
    counts = arch.param_counts()
    assert arch.model_type == "glm4_moe" and arch.qkv_bias and arch.num_experts_per_tok == 8
    assert arch.num_params == pytest.approx(total, rel=rel)
    assert arch.num_active_params - counts["embedding"] - counts["lm_head"] == pytest.approx(active, rel=rel)


def test_qwen3_next_params_match_card() -> None:
    """Qwen/Qwen3-Next-80B-A3B-Instruct card: 80B total, 79B without embeddings, "3B activated" (rounded:
    3.25B here, embeddings aside); Gated DeltaNet on three of every four of its 48 layers."""
    arch = load_model_config("qwen3-next-80b-a3b")
    counts = arch.param_counts()
    assert arch.num_params == pytest.approx(80e9, rel=0.01)
    assert arch.num_params - counts["embedding"] - counts["lm_head"] == pytest.approx(79e9, rel=0.01)
    assert 3.0e9 <= arch.num_active_params - counts["embedding"] - counts["lm_head"] < 3.5e9
    assert len(arch.linear_layers) == 36 and arch.num_experts == 512 and arch.num_experts_per_tok == 10


def test_minimax_params_match_card() -> None:
    arch = load_model_config("minimax-m2.5")
    assert arch.num_params == pytest.approx(MINIMAX[0], rel=0.01)
    without_embedding = arch.num_active_params - arch.param_counts()["embedding"]
    assert without_embedding == pytest.approx(MINIMAX[1], rel=0.05)
    assert (
        arch.qk_norm and arch.num_experts == 256 and arch.num_experts_per_tok == 8 and not arch.dense_layers
    )


def test_kimi_reads_its_text_config_as_deepseek_v3() -> None:
    kimi, ds = load_model_config("kimi-k2.5"), load_model_config("deepseek-v3")
    assert kimi.model_type == "kimi_k2" and kimi.is_mla and kimi.num_experts == 384
    assert kimi.kv_cache_elements_per_token == ds.kv_cache_elements_per_token  # same MLA cache, 61 layers
    assert kimi.dense_layers == (0,) and kimi.num_heads == 64


@pytest.mark.parametrize("name", sorted(DENSE_CARDS))
def test_dense_params_match_cards(name: str) -> None:
    published, rel = DENSE_CARDS[name]
    arch = load_model_config(name)
    assert arch.num_params == pytest.approx(published, rel=rel) and arch.num_active_params == arch.num_params


def test_moe_layer_structure() -> None:
    ds = load_model_config("deepseek-v3")
    assert ds.dense_layers == (0, 1, 2) and len(ds.moe_layers) == 58
    assert ds.shared_expert_intermediate_size == 2048 and ds.num_experts == 256
    maverick = load_model_config("llama-4-maverick")
    assert maverick.moe_layers == tuple(range(1, 48, 2)) and maverick.intermediate_size == 16384
    scout = load_model_config("llama-4-scout")
    assert scout.dense_layers == () and scout.shared_expert_intermediate_size == scout.moe_intermediate_size
    mixtral = load_model_config("mixtral-8x7b")
    assert (mixtral.num_experts, mixtral.num_experts_per_tok, mixtral.moe_intermediate_size) == (8, 2, 14336)
    oss = load_model_config("gpt-oss-120b")
    assert oss.moe_bias and oss.attention_sinks and oss.qkv_bias and oss.num_experts_per_tok == 4


@pytest.mark.parametrize("stem", ["qwen3-30b-a3b", "mixtral-8x7b", "deepseek-v3", "llama-4-scout-17b-16e"])
def test_hf_config_file_with_moe_fields(stem: str, tmp_path: Path) -> None:
    source = SHARED_MODELS / f"{stem}.config.json"
    if not source.is_file():
        pytest.skip(f"shared data not present: {source}")
    folder = tmp_path / stem
    folder.mkdir()
    (folder / "config.json").write_text(source.read_text())
    by_file = load_model_config(folder / "config.json")
    assert by_file.name == stem and by_file.is_moe
    assert load_model_config(folder) == by_file  # the folder holding config.json


def test_hf_config_minimal_qwen3_moe(tmp_path: Path) -> None:
    raw = {
        "model_type": "qwen3_moe",
        "hidden_size": 256,
        "num_hidden_layers": 4,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "intermediate_size": 1024,
        "moe_intermediate_size": 64,
        "num_experts": 16,
        "num_experts_per_tok": 2,
        "decoder_sparse_step": 2,
        "mlp_only_layers": [3],
        "vocab_size": 1000,
        "max_position_embeddings": 4096,
    }
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(raw))
    arch = load_model_config(path)
    assert arch.moe_layers == (1,) and arch.dense_layers == (0, 2, 3)  # (i + 1) % 2 == 0, minus layer 3
    bad = path.with_name("bad.json")
    bad.write_text(json.dumps({**raw, "num_experts_per_tok": 17}))
    with pytest.raises(ConfigError, match="num_experts_per_tok"):
        load_model_config(bad)


# ---- distinct experts and the grouped GEMM's shape


@settings(max_examples=200, deadline=None)
@given(num_experts=st.integers(1, 512), data=st.data(), tokens=st.integers(1, 100_000))
def test_distinct_experts_between_k_and_e_and_monotone(
    num_experts: int, data: st.DataObject, tokens: int
) -> None:
    k = data.draw(st.integers(1, num_experts))
    touched = distinct_experts(num_experts=num_experts, k=k, num_tokens=tokens)
    assert k * (1 - 1e-12) <= touched <= num_experts * (1 + 1e-12)
    assert distinct_experts(num_experts=num_experts, k=k, num_tokens=tokens + 1) >= touched
    assert distinct_experts(num_experts=num_experts, k=k, num_tokens=1) == pytest.approx(k)
    n_e, m_e = expert_gemm_shape(num_experts=num_experts, k=k, num_tokens=tokens)
    assert k <= n_e <= num_experts and 1 <= m_e <= tokens
    assert n_e * m_e >= tokens * k  # every token copy has a row
    assert n_e == min(num_experts, max(k, round(touched)))


def test_expert_gemm_shape_examples() -> None:
    assert expert_gemm_shape(num_experts=128, k=8, num_tokens=1) == (8, 1)  # one token: its k experts
    assert expert_gemm_shape(num_experts=128, k=8, num_tokens=4096) == (128, 256)  # all experts, t k / E rows
    assert expert_gemm_shape(num_experts=128, k=8, num_tokens=4096, imbalance=1.5) == (128, 384)
    with pytest.raises(ValueError, match="imbalance"):
        expert_gemm_shape(num_experts=8, k=2, num_tokens=4, imbalance=0.5)


def _expert_gemms(graph: WorkloadGraph) -> list[GemmOp]:
    return [op for op in graph if isinstance(op, GemmOp) and "/mlp/experts_" in op.name]


@pytest.mark.parametrize("batch", [1, 4, 64, 512])
def test_decode_reads_the_weights_of_the_touched_experts(batch: int) -> None:
    arch = load_model_config("qwen3-30b-a3b")
    graph = build_decode_graph(arch, batch=batch, context_len=100)
    gate_up, down = _expert_gemms(graph)
    touched = round(distinct_experts(num_experts=128, k=8, num_tokens=batch))
    for op in (gate_up, down):
        assert op.batch == touched and not op.b_shared and op.count == 48
        assert op.name.startswith("qwen3-30b-a3b/layer[0-47]/mlp/")
    assert (gate_up.n, gate_up.k, down.n, down.k) == (2 * 768, 2048, 2048, 768)
    weights = touched * 3 * 2048 * 768 * 2  # bf16 bytes of the touched experts, one layer
    assert gate_up.min_dram_bytes + down.min_dram_bytes >= weights


def test_imbalance_raises_rows_per_expert() -> None:
    arch = load_model_config("mixtral-8x7b")
    even = _expert_gemms(build_prefill_graph(arch, batch=1, seq_len=4096))[0]
    busy = _expert_gemms(build_prefill_graph(arch, batch=1, seq_len=4096, moe_imbalance=1.25))[0]
    assert (even.batch, even.m) == (8, 1024) and (busy.batch, busy.m) == (8, 1280)
    with pytest.raises(ConfigError, match="moe_imbalance"):
        build_prefill_graph(arch, batch=1, seq_len=16, moe_imbalance=0.9)


@pytest.mark.parametrize("name", sorted(CARDS) + sorted(GPT_OSS))
def test_moe_prefill_flop_matches_active_params(name: str) -> None:
    """2 x active non-embedding params x tokens + attention + LM head, with every expert getting t k / E
    rows (4096 tokens: exact for E dividing t k)."""
    arch = load_model_config(name)
    batch, seq_len = 2, 2048
    graph = build_prefill_graph(arch, batch=batch, seq_len=seq_len)
    counts = arch.param_counts()
    tokens = batch * seq_len
    non_embedding = arch.num_active_params - counts["embedding"] - counts["lm_head"]
    attention = 0.0
    for layer in range(arch.num_layers):
        s = seq_len
        pairs = s * (s + 1) / 2
        if layer in arch.local_attention_layers and arch.attention_chunk_size:
            c = arch.attention_chunk_size
            pairs = (s // c) * c * (c + 1) / 2 + (s % c) * (s % c + 1) / 2
        elif layer in arch.local_attention_layers:
            w = min(s, arch.sliding_window or s)
            pairs = w * (w + 1) / 2 + (s - w) * w
        per_pair = 2 * arch.qk_head_dim + 2 * (arch.v_head_dim if arch.is_mla else arch.head_dim)
        attention += batch * arch.num_heads * per_pair * pairs
    reference = 2 * non_embedding * tokens + attention + 2 * batch * arch.vocab_size * arch.hidden_size
    assert graph.total_flop() == pytest.approx(reference, rel=0.03)


@pytest.mark.parametrize("name", sorted(CARDS) + sorted(GPT_OSS) + ["gemma-3-27b"])
@pytest.mark.parametrize("precision", ["bf16", "fp8"])
def test_moe_graph_names_and_counts(name: str, precision: str) -> None:
    arch = load_model_config(name)
    for graph in (
        build_prefill_graph(arch, batch=2, seq_len=300, precision=precision),
        build_decode_graph(arch, batch=3, context_len=300, precision=precision),
    ):
        assert len({op.name for op in graph}) == len(graph)
        layer_kernels = sum(op.count for op in graph if "/layer[" in op.name)
        per_layer = {op.name.split("/layer[")[1].split("]/", 1)[1] for op in graph if "/layer[" in op.name}
        assert layer_kernels <= arch.num_layers * len(per_layer)
        for op in graph:
            if "/mlp/experts_" in op.name or "/mlp/router" in op.name:
                assert op.count == len(arch.moe_layers)


# ---- one expert, top-1: the dense model


def _as_one_expert_moe(dense: LlmArch) -> LlmArch:
    return dense.model_copy(
        update={"num_experts": 1, "num_experts_per_tok": 1, "moe_intermediate_size": dense.intermediate_size}
    )


def _without_routing(graph: WorkloadGraph) -> list[Op]:
    return [op for op in graph if not op.name.endswith(("/mlp/router", "/mlp/topk", "/mlp/experts_align"))]


@settings(max_examples=30, deadline=None)
@given(
    name=st.sampled_from(["llama-3.1-8b", "qwen3-8b", "mistral-7b", "qwen2.5-7b"]),
    phase=st.sampled_from(["prefill", "decode"]),
    batch=st.integers(1, 32),
    seq_len=st.integers(1, 700),
    precision=st.sampled_from(["bf16", "fp8", "fp32"]),
)
def test_one_expert_top1_equals_dense(
    name: str, phase: str, batch: int, seq_len: int, precision: str
) -> None:
    dense = load_model_config(name)
    moe = _as_one_expert_moe(dense)
    if phase == "prefill":
        a = build_prefill_graph(dense, batch=batch, seq_len=seq_len, precision=precision)
        b = build_prefill_graph(moe, batch=batch, seq_len=seq_len, precision=precision)
    else:
        a = build_decode_graph(dense, batch=batch, context_len=seq_len, precision=precision)
        b = build_decode_graph(moe, batch=batch, context_len=seq_len, precision=precision)
    kept = _without_routing(b)
    assert sum(op.flop * op.count for op in kept) == a.total_flop()
    assert sum(op.min_dram_bytes * op.count for op in kept) == a.total_min_dram_bytes()
    dense_mlp = [op for op in a if isinstance(op, GemmOp) and "/mlp/" in op.name]
    shape = [(op.m, op.n, op.k, op.batch, op.dtype) for op in dense_mlp]
    expert = [(op.m, op.n, op.k, op.batch, op.dtype) for op in _expert_gemms(b)]
    assert expert == shape
    d = dense.hidden_size
    assert moe.num_params == dense.num_params + dense.num_layers * d  # + the router's [d, 1] per layer
    assert moe.num_active_params == moe.num_params
    assert weight_bytes(moe, precision) == pytest.approx(weight_bytes(dense, precision), rel=1e-3)


# ---- mxfp4 (gpt-oss)


def test_mxfp4_weights_and_dtypes() -> None:
    arch = load_model_config("gpt-oss-120b")
    counts = arch.param_counts()
    expected = counts["experts"] * MXFP4_BITS_PER_PARAM / 8 + (arch.num_params - counts["experts"]) * 2
    assert weight_bytes(arch, "mxfp4") == pytest.approx(expected)
    assert weight_bytes(arch, "mxfp4") == pytest.approx(65.2e9, rel=0.01)  # fits one 80 GB GPU, as published
    graph = build_decode_graph(arch, batch=8, context_len=1000, precision="mxfp4")
    gemms = [op for op in graph if isinstance(op, GemmOp)]
    # MXFP4 experts are weight-only: 4-bit weights, bf16 activations (the GPU decides the MMA dtype)
    assert {(op.dtype, op.b_dtype, op.grouped) for op in _expert_gemms(graph)} == {("bf16", "fp4", True)}
    assert {op.out_dtype for op in _expert_gemms(graph)} == {"bf16"}
    assert {op.dtype for op in gemms if op not in _expert_gemms(graph)} == {"bf16"}
    assert not any(op.name.endswith("_quant") for op in graph)
    with pytest.raises(ConfigError, match="mxfp4"):
        build_decode_graph(load_model_config("llama-3.1-8b"), batch=1, context_len=10, precision="mxfp4")
    with pytest.raises(ConfigError, match="mxfp4"):
        weight_bytes(load_model_config("llama-3.1-8b"), "mxfp4")


def test_fp8_quantizes_expert_inputs_but_not_the_router() -> None:
    graph = build_prefill_graph(load_model_config("qwen3-30b-a3b"), batch=1, seq_len=64, precision="fp8")
    names = {op.name.rsplit("/", 1)[1] for op in graph}
    assert {"experts_gate_up_quant", "experts_down_quant"} <= names and "router_quant" not in names
    router = next(op for op in graph if op.name.endswith("/mlp/router"))
    assert isinstance(router, GemmOp) and router.dtype == "bf16"


def test_combine_moves_k_outputs_per_token() -> None:
    arch = load_model_config("qwen3-30b-a3b")
    graph = build_prefill_graph(arch, batch=1, seq_len=100)
    combine = next(op for op in graph if op.name.endswith("/experts_combine"))
    assert combine.min_dram_bytes == pytest.approx(100 * 2048 * (8 + 1) * 2)  # read t k d, write t d (bf16)
    assert math.isclose(combine.count, 48)


def test_glm4_moe_config_reads_its_deepseek_style_layout(tmp_path: Path) -> None:
    """A GLM-4.5-shaped config (Glm4MoeConfig's field names): GQA with biases, first 3 layers dense."""
    raw = {
        "model_type": "glm4_moe", "hidden_size": 512, "num_hidden_layers": 6, "num_attention_heads": 8,
        "num_key_value_heads": 2, "head_dim": 64, "intermediate_size": 2048, "moe_intermediate_size": 128,
        "n_routed_experts": 16, "num_experts_per_tok": 4, "n_shared_experts": 1, "first_k_dense_replace": 3,
        "use_qk_norm": True, "vocab_size": 1000, "max_position_embeddings": 4096,
    }  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    arch = load_model_config(path)
    assert arch.dense_layers == (0, 1, 2) and arch.moe_layers == (3, 4, 5)
    assert arch.qkv_bias and not arch.o_bias and arch.qk_norm
    assert arch.shared_expert_intermediate_size == 128 and arch.num_experts == 16


def test_int4_points_to_mxfp4() -> None:
    """Kimi-K2.5 ships int4 weight-only experts: the precision error names the flag that prices them."""
    with pytest.raises(ConfigError, match=r"int4 or MXFP4, are mxfp4"):
        weight_bytes(load_model_config("kimi-k2.5"), "int4")

"""Memory footprint helpers used by the serving capacity check."""

from __future__ import annotations

import pytest

from dse.workload.llm import kv_cache_bytes, prefill_activation_bytes, weight_bytes
from dse.workload.models import load_model_config


def test_llama8b_weights_and_kv_cache() -> None:
    arch = load_model_config("llama-3.1-8b")
    # 8.03 B parameters x 2 bytes (model card); fp8 checkpoints keep embeddings and LM head in bf16
    assert weight_bytes(arch, "bf16") == pytest.approx(8.03e9 * 2, rel=0.01)
    embed_and_head = 2 * 128256 * 4096
    assert weight_bytes(arch, "fp8") == pytest.approx(
        (8.03e9 - embed_and_head) * 1 + embed_and_head * 2, rel=0.01
    )
    # 2 (K, V) x 32 layers x 8 KV heads x 128 head dim x 2 bytes = 128 KiB per token
    assert kv_cache_bytes(arch, "bf16", 1) == 2 * 32 * 8 * 128 * 2
    assert kv_cache_bytes(arch, "bf16", 1000) == 1000 * kv_cache_bytes(arch, "bf16", 1)


def test_eager_attention_materializes_scores() -> None:
    arch = load_model_config("llama-3.1-8b")
    flash = prefill_activation_bytes(arch, "bf16", batch=2, seq_len=2048, attention="flash")
    eager = prefill_activation_bytes(arch, "bf16", batch=2, seq_len=2048, attention="eager")
    # one layer's [b, heads, s, s] bf16 score matrix
    assert eager - flash == pytest.approx(2 * 32 * 2048 * 2048 * 2)

"""Our GPT-2 builder against the kernels EnergAIzer recorded from the real model (b1, s1024)."""

from __future__ import annotations

from collections import Counter

import pytest

from dse.workload.llm import build_prefill_graph
from dse.workload.models import load_model_config
from dse.workload.ops import AttentionOp, GemmOp

pytest.importorskip("pandas")
from dse.calibrate.data.common import data_root  # noqa: E402


def _kernel_file():
    try:
        root = data_root()
    except Exception as exc:  # pragma: no cover - CI has ../shared/data beside the repo
        pytest.skip(f"measured data not found: {exc}")
    return root / "energaizer" / "workloads" / "all" / "gpt2model_gpt2_pbf16_b1_s1024_modeprefill.json"


def test_gpt2_prefill_gemm_shapes_match_energaizer_trace() -> None:
    from dse.workload.energaizer import load_kernel_list

    trace = load_kernel_list(_kernel_file())
    traced = Counter()
    for op in trace.ops:
        if isinstance(op, GemmOp):
            traced[(op.batch, op.m, op.n, op.k)] += op.count

    ours = build_prefill_graph(load_model_config("gpt2"), batch=1, seq_len=1024, attention="eager")
    built = Counter()
    for op in ours.ops:
        if isinstance(op, GemmOp) and "layer[" in op.name:
            built[(op.batch, op.m, op.n, op.k)] += op.count
        elif isinstance(op, AttentionOp):
            # eager attention = QK^T [b*h, sq, d] x [b*h, d, skv] and PV [b*h, sq, skv] x [b*h, skv, d]
            bh = op.batch * op.num_heads
            built[(bh, op.seq_len_q, op.seq_len_kv, op.head_dim)] += op.count
            built[(bh, op.seq_len_q, op.head_dim, op.seq_len_kv)] += op.count
    # The trace is GPT2Model (no LM head), so every traced GEMM must be one of ours, count for count.
    assert traced == built

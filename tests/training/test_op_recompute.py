"""torchtitan's per-op activation checkpointing (`--recompute op`): what it re-runs, against hand counts,
and the torchtitan rows of the shared training data it was built for."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.errors import ConfigError
from dse.hardware.catalog import load_gpu
from dse.training.llm import llm_step_parts, predict_llm_training
from dse.training.parallel import ParallelLayout
from dse.training.predict import check_model_options
from dse.training.step import TrainingRequest
from dse.workload.models import load_model_config
from dse.workload.ops import AttentionOp, GemmOp

GPU = load_gpu("h100-sxm")
LLAMA = load_model_config("llama-3.1-8b")


def _request(recompute: str = "none", seq: int = 8192, micro: int = 1, **layout: object) -> TrainingRequest:
    lay = ParallelLayout(**layout)  # type: ignore[arg-type]
    return TrainingRequest(
        micro_batch=micro, global_batch=micro * lay.dp, seq_len=seq, recompute=recompute, layout=lay
    )


def _layer_gemm_flop(graph) -> float:
    return sum(op.flop * op.count for op in graph.ops if isinstance(op, GemmOp) and "/layer[" in op.name)


def test_op_recompute_reruns_wk_wo_and_w3_of_each_llama_layer() -> None:
    """torchtitan's policy saves every mm output "except every second mm" of a block; a Llama block calls
    wq, wk, wv, wo, w1, w3, w2 in that order, so wk, wo and w3 run again: for Llama-3.1-8B (d 4096, kv 1024,
    ffn 14336) (1024 + 4096 + 14336) / (4096 + 2 x 1024 + 4096 + 3 x 14336) = 19456 / 53248 of a layer's
    forward GEMM FLOPs. Attention is on its save list: not re-run."""
    parts, _ = llm_step_parts(LLAMA, _request("op"))
    share = _layer_gemm_flop(parts.recompute) / _layer_gemm_flop(parts.forward)
    assert share == pytest.approx(19456 / 53248, rel=1e-6)
    assert not any(isinstance(op, AttentionOp) for op in parts.recompute.ops)


def test_op_recompute_reruns_the_tensor_parallel_all_gathers() -> None:
    """Under TP the recomputed column-parallel mm's need their gathered inputs again: the two all-gathers
    of a layer (one all-reduce's bytes) run again, its reduce-scatters are saved: 5 per layer, not 4."""
    none, _ = llm_step_parts(LLAMA, _request("none", num_gpus=8, tp=8))
    op, _ = llm_step_parts(LLAMA, _request("op", num_gpus=8, tp=8))
    assert none.num_tp_allreduces == 4 * LLAMA.num_layers
    assert op.num_tp_allreduces == 5 * LLAMA.num_layers


@settings(max_examples=12, deadline=None)
@given(
    model=st.sampled_from(["llama-3.1-8b", "qwen3-8b", "mpt-7b"]),
    micro=st.integers(1, 4),
    seq=st.sampled_from([1024, 2048, 4096, 8192]),
)
def test_op_recompute_lies_between_none_and_full(model: str, micro: int, seq: int) -> None:
    """Per-op checkpointing re-runs part of the forward and keeps part of its activations: its step time
    lies strictly between no recomputation and full, its activation memory between full and none."""
    arch = load_model_config(model)
    est = {
        mode: predict_llm_training(arch, GPU, _request(mode, seq=seq, micro=micro, num_gpus=8, fsdp=True))
        for mode in ("none", "op", "full")
    }
    assert est["none"].step_time_s < est["op"].step_time_s < est["full"].step_time_s
    act = {mode: e.memory.activations_bytes for mode, e in est.items()}
    assert act["full"] < act["op"] < act["none"]


def test_op_recompute_is_refused_for_vision_models() -> None:
    req = TrainingRequest(micro_batch=8, global_batch=8, recompute="op")
    with pytest.raises(ConfigError, match="--recompute op"):
        check_model_options("resnet-50", req)


def test_torchtitan_selective_rows_run_per_op_checkpointing() -> None:
    from dse.calibrate.validate.training import _recompute

    assert _recompute("selective (op)", "torchtitan-benchmarks") == "op"
    assert _recompute("selective (default llama3_8b.toml)", "torchtitan-benchmarks") == "op"
    assert _recompute("selective", "megatron-bridge-perf-summary") == "selective"
    assert _recompute("full", "torchtitan-benchmarks") == "full"

"""Eager PyTorch elementwise kernels in LLM training (`--eager-ops`, `dse.training.eager`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dse.cli import app
from dse.hardware.catalog import load_gpu
from dse.search.objective import evaluate_point
from dse.search.study import study_from_dict
from dse.training.eager import eager_graph, eager_ops
from dse.training.llm import llm_step_parts, predict_llm_training
from dse.training.parallel import ParallelLayout
from dse.training.step import TrainingRequest
from dse.workload.graph import WorkloadGraph
from dse.workload.ops import ElementwiseOp, GemmOp, NormOp
from tests.shared_data import needs_shared_data

GPU = load_gpu("h100-sxm")


def _request(eager: bool, **kw: object) -> TrainingRequest:
    base = {"micro_batch": 2, "global_batch": 16, "seq_len": 4096, "recompute": "selective"}
    base |= {"layout": ParallelLayout(num_gpus=8, fsdp=True), "eager_ops": eager}
    return TrainingRequest(**{**base, **kw})  # type: ignore[arg-type]


def _bytes(ops: list) -> float:
    return sum(op.min_dram_bytes * op.count for op in ops)


def test_eager_rmsnorm_and_rotary_move_the_bytes_of_their_aten_ops() -> None:
    """Forward RMSNorm as HF's `LlamaRMSNorm` / ATen's composite runs it in bf16: x.float() (2 + 4 bytes per
    element), pow (4 + 4), mean (4), x * rstd (4 + 4), .type_as (4 + 2), * weight (2 + 2) = 36 bytes per
    element; the rotary embedding's float() / complex product / type_as 6 + 8 + 6 = 20. The per-row eps and
    rsqrt kernels add 2 x (4 + 4) bytes per row."""
    rows, cols = 4096, 4096
    norm = NormOp(
        name="m/layer[0-31]/attn/norm", rows=rows, cols=cols, kind="rmsnorm", dtype="bf16", count=32
    )
    ops = eager_ops(norm)
    assert all(op.count == 32 for op in ops) and len(ops) == 8
    assert _bytes(ops) / 32 == pytest.approx(36 * rows * cols + 16 * rows)
    rotary = ElementwiseOp(name="m/attn/rotary", kind="rotary", num_elements=rows * 6144, dtype="bf16")
    assert _bytes(eager_ops(rotary)) == pytest.approx(20 * rows * 6144)


def test_backward_ops_keep_their_layer_count_and_other_ops_pass_through() -> None:
    """A norm's fused backward op is the forward op twice (`dse.workload.backward`); its eager kernels run
    once per layer. GEMMs, attention and LayerNorms (one ATen kernel in eager mode too) are unchanged."""
    bwd = NormOp(name="m/layer[0-31]/mlp/norm_bwd", rows=64, cols=128, kind="rmsnorm", count=64)
    assert {op.count for op in eager_ops(bwd)} == {32}
    gemm = GemmOp(name="m/q", m=64, n=64, k=64)
    layernorm = NormOp(name="m/ln", rows=64, cols=128, kind="layernorm")
    gelu = ElementwiseOp(name="m/act", kind="gelu", num_elements=4096)
    graph = WorkloadGraph(name="m/forward", ops=(gemm, layernorm, gelu))
    assert eager_graph(graph).ops == graph.ops


def test_eager_step_is_slower_at_the_same_model_flops() -> None:
    """The same GEMMs and attention, more elementwise traffic: a longer step, the same model FLOPs (so a
    lower MFU); a LayerNorm / GELU model (MPT) has nothing eager mode runs differently."""
    llama = llm_step_parts(_arch("llama-3.1-8b"), _request(False))[0]
    eager = llm_step_parts(_arch("llama-3.1-8b"), _request(True))[0]
    gemms = [op for op in llama.forward.ops if isinstance(op, GemmOp)]
    assert [op for op in eager.forward.ops if isinstance(op, GemmOp)] == gemms
    assert eager.model_flop_per_sample == llama.model_flop_per_sample
    fused_m = predict_llm_training(_arch("llama-3.1-8b"), GPU, _request(False)).metrics()
    eager_m = predict_llm_training(_arch("llama-3.1-8b"), GPU, _request(True)).metrics()
    assert eager_m["step_time_s"] > 1.05 * fused_m["step_time_s"]
    assert eager_m["mfu"] < fused_m["mfu"] and eager_m["eager_ops"] is True
    mpt = [predict_llm_training(_arch("mpt-1b"), GPU, _request(e)).step_time_s for e in (False, True)]
    assert mpt[0] == mpt[1]


def test_eager_ops_keep_more_activations_only_without_recomputation() -> None:
    arch = _arch("llama-3.1-8b")
    mem = {
        (e, r): llm_step_parts(arch, _request(e, recompute=r))[1].activations_bytes
        for e in (False, True)
        for r in ("none", "selective")
    }
    assert mem[(True, "none")] > mem[(False, "none")]
    assert mem[(True, "selective")] == mem[(False, "selective")]


def test_cli_flag_and_refusal_for_vision_models() -> None:
    runner = CliRunner()
    args = ["predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--training", "--num-gpus", "8"]
    args += ["--fsdp", "--micro-batch", "2", "--seq-len", "4096", "--json"]
    fused = json.loads(runner.invoke(app, args).output)
    result = runner.invoke(app, [*args, "--eager-ops"])
    assert result.exit_code == 0, result.output
    eager = json.loads(result.output)
    assert eager["eager_ops"] is True and fused["eager_ops"] is False
    assert eager["step_time_s"] > fused["step_time_s"]
    refused = runner.invoke(
        app, ["predict", "--model", "resnet-50", "--gpu", "h100-sxm", "--training", "--eager-ops"]
    )
    assert refused.exit_code == 2 and "vision model" in refused.output


def test_a_study_searches_eager_ops(tmp_path: Path) -> None:
    cfg = study_from_dict(
        {
            "name": "eager", "model": "llama-3.1-8b", "gpu": "h100-sxm",
            "workload": {"mode": "training", "num_gpus": 8, "fsdp": True, "micro_batch": 1, "seq_len": 4096},
            "space": {"eager_ops": {"values": [False, True]}},
            "objectives": {"step_time_s": "minimize"},
            "search": {"sampler": "grid", "n_points": 2, "executor": "serial"},
        }
    )  # fmt: skip
    times = [evaluate_point({"eager_ops": e}, cfg.eval_context())["step_time_s"] for e in (False, True)]
    assert times[1] > times[0]


@needs_shared_data
def test_torchtitan_compile_gain_is_predicted_from_the_eager_kernels() -> None:
    """torchtitan's Llama-3.1-8B tables measure the same FSDP step with and without torch.compile (8 and 128
    H100s: 6,667 / 5,762 and 6,514 / 5,605 tokens/s, 1.157 and 1.162). Eager mode is priced from the ATen
    ops' traffic, nothing fitted on these rows: the predicted ratio is within 3 points of the measured."""
    from dse.calibrate.validate.training import validate_llm_training

    frame, _ = validate_llm_training()
    rows = frame[
        (frame["source"] == "torchtitan-benchmarks") & (frame["precision"] == "bf16") & (frame["tp"] == 1)
    ]
    for n, group in rows.groupby("num_gpus"):
        eager, compiled = group.sort_values("tokens_per_s_per_gpu")[
            ["tokens_per_s_per_gpu", "pred_tokens_per_s_per_gpu"]
        ].to_numpy()
        measured, predicted = compiled[0] / eager[0], compiled[1] / eager[1]
        assert predicted == pytest.approx(measured, abs=0.03), n


def _arch(name: str):  # noqa: ANN202
    from dse.workload.models import load_model_config

    return load_model_config(name)


def test_eager_memory_counts_every_norm_and_fp32_runs_no_casts() -> None:
    """The kept fp32 upcasts are read off the eager graph: Qwen3's per-head q/k norms count beside the two
    block norms; at fp32 `.float()` / `.type_as()` return their input and no cast kernel runs."""
    from dse.training.eager import eager_activation_bytes_per_layer

    qwen = _arch("qwen3-8b")
    req = _request(True, recompute="none", layout=ParallelLayout(num_gpus=1), global_batch=2)
    forward = llm_step_parts(qwen, req)[0].forward
    tokens = 2 * 4096
    block_norms = 2 * qwen.hidden_size * 4.0 * tokens
    qk_norms = (qwen.num_heads + qwen.num_kv_heads) * qwen.head_dim * 4.0 * tokens
    silu = qwen.intermediate_size * 2.0 * tokens
    assert eager_activation_bytes_per_layer(forward, qwen.num_layers) == pytest.approx(
        block_norms + qk_norms + silu
    )
    fp32 = llm_step_parts(_arch("llama-3.1-8b"), _request(True, precision="fp32"))[0]
    casts = [
        op
        for op in fp32.forward.ops
        if isinstance(op, ElementwiseOp) and op.kind == "cast" and "eager" in op.name
    ]
    assert not casts

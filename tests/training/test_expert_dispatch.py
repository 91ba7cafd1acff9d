"""The experts' GEMM dispatch of an MoE training step (`dse.training.llm._expert_dispatch_s`): one launch per
local expert and expert GEMM, forward and backward, each an eager GEMM dispatch the GPU waits out."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.hardware.catalog import load_gpu
from dse.perf.host import DEFAULT_HOST
from dse.training.llm import llm_step_parts, predict_llm_training
from dse.training.parallel import ParallelLayout
from dse.training.step import TrainingRequest
from dse.workload.models import load_model_config
from tests.shared_data import needs_shared_data

GPU = load_gpu("h100-sxm")
GPT_OSS = load_model_config("gpt-oss-120b")


def _request(micro: int = 1, **kw: object) -> TrainingRequest:
    layout = ParallelLayout(num_gpus=64, pp=4, ep=8, distributed_optimizer=True)
    return TrainingRequest(
        micro_batch=micro, global_batch=16 * micro * 4, seq_len=4096, layout=layout,
        attention_kernel="fa3", **kw,
    )  # fmt: skip


def test_gpt_oss_pays_six_dispatches_per_local_expert_and_layer() -> None:
    """gpt-oss-120b on Megatron-Bridge's layout (pp 4, ep 8): a stage holds 36 / 4 = 9 layers, a rank
    128 / 8 = 16 experts of each; each expert runs gate/up and down forward and their data and weight
    gradients backward: 6 x 16 x 9 launches per micro-batch."""
    parts, _ = llm_step_parts(GPT_OSS, _request())
    assert parts.dispatch_s == pytest.approx(6 * 16 * 9 * DEFAULT_HOST.eager_gemm_s, rel=1e-12)


@settings(max_examples=6, deadline=None)
@given(micro=st.sampled_from([1, 2, 4]))
def test_the_dispatch_does_not_grow_with_the_tokens(micro: int) -> None:
    """Every local expert receives tokens at any of these batches: the launches, not their rows, set it."""
    one, many = (llm_step_parts(GPT_OSS, _request(m))[0].dispatch_s for m in (1, micro))
    assert many == pytest.approx(one, rel=1e-12)


def test_frozen_experts_and_full_recomputation_change_the_launch_count() -> None:
    """LoRA freezes the experts (no weight gradients: 4 launches per expert); full recomputation re-runs
    the forward (8); a dense model launches none."""
    base = llm_step_parts(GPT_OSS, _request())[0].dispatch_s
    lora = llm_step_parts(GPT_OSS, _request(lora_rank=16))[0].dispatch_s
    full = llm_step_parts(GPT_OSS, _request(recompute="full"))[0].dispatch_s
    assert lora == pytest.approx(base * 4 / 6, rel=1e-12)
    assert full == pytest.approx(base * 8 / 6, rel=1e-12)
    dense = TrainingRequest(micro_batch=1, global_batch=8, seq_len=4096, layout=ParallelLayout(num_gpus=8))
    assert llm_step_parts(load_model_config("llama-3.1-8b"), dense)[0].dispatch_s == 0.0


def test_the_gpu_idles_through_the_dispatch() -> None:
    """The dispatch adds m x dispatch_s to the step (plus its share of the pipeline bubble) at idle power."""
    req = _request()
    est = predict_llm_training(GPT_OSS, GPU, req)
    parts, _ = llm_step_parts(GPT_OSS, req)
    wait_s = req.num_microbatches * parts.dispatch_s
    assert est.phase_time_s["expert_dispatch"] == pytest.approx(wait_s, rel=1e-12)
    idle_w = est.phase_energy_j["pipeline_bubble"] / est.phase_time_s["pipeline_bubble"]
    assert est.phase_energy_j["expert_dispatch"] == pytest.approx(idle_w * wait_s, rel=1e-9)


@needs_shared_data
def test_megatron_bridge_moe_rows_are_no_longer_fast() -> None:
    """The Megatron-Bridge MoE rows (held out) read 25.6% fast in the median without the dispatch; with it
    the median is within 5% and gpt-oss-120b at micro-batch 1 and 4 within 5% each."""
    from dse.calibrate.data.training import load_llm_training
    from dse.calibrate.validate.training import validate_llm_training

    data = load_llm_training()
    frame, _ = validate_llm_training(
        data[(data["source"] == "megatron-bridge-perf-summary") & (data["arch"] == "moe")]
    )
    ratio = frame["pred_tokens_per_s_per_gpu"] / frame["tokens_per_s_per_gpu"]
    assert abs(ratio.median() - 1.0) < 0.05
    assert (abs(ratio[frame["model"] == "gpt-oss-120b"] - 1.0) < 0.05).all()

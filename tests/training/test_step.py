"""Training-step properties (issue 20): backward ~2x forward, recompute trade-off, infeasibility, DP, MFU."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dse.cli import app
from dse.errors import ConfigError
from dse.hardware.catalog import load_gpu
from dse.perf.types import OperatingPoint
from dse.training.llm import predict_llm_training
from dse.training.parallel import ParallelLayout, bubble_frac
from dse.training.step import FA2_ON_HOPPER, TrainingRequest, attention_scale_of
from dse.workload.backward import build_backward_graph, training_forward
from dse.workload.llm import build_prefill_graph
from dse.workload.models import load_model_config
from dse.workload.ops import GemmOp

GPU = load_gpu("h100-sxm")


def _gemm_flop(graph) -> float:
    return sum(op.flop * op.count for op in graph.ops if isinstance(op, GemmOp))


@pytest.mark.parametrize("model", ["mpt-1b", "llama-3.1-8b", "qwen3-8b"])
def test_backward_gemm_flops_twice_forward(model: str) -> None:
    fwd = training_forward(build_prefill_graph(load_model_config(model), batch=2, seq_len=1024))
    bwd = build_backward_graph(fwd)
    assert _gemm_flop(bwd) == pytest.approx(2.0 * _gemm_flop(fwd), rel=1e-9)
    assert not any(op.name.endswith("kv_cache_write") for op in fwd.ops)


def _predict(model: str = "mpt-1b", **kw: object):
    layout = ParallelLayout(**{k: kw.pop(k) for k in ("num_gpus", "tp", "pp", "fsdp") if k in kw})
    req = TrainingRequest(layout=layout, **{"micro_batch": 4, "global_batch": 4 * layout.dp, **kw})
    return predict_llm_training(load_model_config(model), GPU, req)


@pytest.mark.parametrize("mode", ["selective", "full"])
def test_recompute_raises_time_and_lowers_activations(mode: str) -> None:
    base, rec = _predict(recompute="none"), _predict(recompute=mode)
    assert rec.step_time_s > base.step_time_s
    assert rec.memory.activations_bytes <= base.memory.activations_bytes
    if mode == "full":
        assert rec.memory.activations_bytes < 0.5 * base.memory.activations_bytes


def test_step_that_does_not_fit_is_infeasible_with_reason() -> None:
    est = _predict("llama-3.1-70b", micro_batch=1, global_batch=1, seq_len=4096)
    m = est.metrics()
    assert not m["feasible"] and "GiB" in m["infeasible_reason"]
    assert _predict().metrics()["feasible"]


def test_dp1_has_no_gradient_communication() -> None:
    est = _predict(num_gpus=1)
    assert est.phase_time_s["communication"] == 0.0
    assert est.phase_time_s["communication_overlapped"] == 0.0
    multi = _predict(num_gpus=8)
    assert multi.phase_time_s["communication"] + multi.phase_time_s["communication_overlapped"] > 0.0


def test_fsdp_shards_model_states() -> None:
    ddp, fsdp = _predict(num_gpus=8), _predict(num_gpus=8, fsdp=True)
    assert fsdp.memory.optimizer_bytes == pytest.approx(ddp.memory.optimizer_bytes / 8)


def test_pipeline_bubble() -> None:
    assert bubble_frac(4, 12) == pytest.approx(3 / 15)
    est = _predict("llama-3.1-8b", num_gpus=4, pp=4, micro_batch=1, global_batch=8, seq_len=1024)
    assert est.phase_time_s["pipeline_bubble"] > 0


@settings(max_examples=12, deadline=None)
@given(
    micro=st.sampled_from([1, 2, 8]),
    seq=st.sampled_from([256, 2048, 8192]),
    precision=st.sampled_from(["bf16", "fp8", "fp16"]),
    num_gpus=st.sampled_from([1, 8, 64]),
    recompute=st.sampled_from(["none", "selective", "full"]),
)
def test_mfu_never_above_one(micro: int, seq: int, precision: str, num_gpus: int, recompute: str) -> None:
    est = _predict(
        "mpt-125m", micro_batch=micro, global_batch=micro * num_gpus, seq_len=seq, precision=precision,
        num_gpus=num_gpus, fsdp=True, recompute=recompute,
    )  # fmt: skip
    m = est.metrics()
    assert 0.0 < m["mfu"] <= 1.0
    assert m["avg_power_w"] <= GPU.power.tdp_w * 1.05


def test_cli_training_json_keys() -> None:
    args = "predict --model mpt-1b --gpu h100-sxm --training --num-gpus 8 --fsdp --micro-batch 4 "
    args += "--global-batch 64 --seq-len 2048 --precision bf16 --recompute selective --json --breakdown"
    result = CliRunner().invoke(app, args.split())
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    for key in (
        "step_time_s", "tokens_per_s_per_gpu", "mfu", "model_tflops_per_gpu", "energy_per_step_j",
        "energy_per_token_j", "avg_power_w", "total_power_w", "memory_bytes", "feasible", "infeasible_reason",
    ):  # fmt: skip
        assert key in out
    assert set(out["breakdown"]["time_s"]) >= {"forward", "backward", "optimizer", "communication"}


def _cli_json(args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, args.split())
    return result.exit_code, result.output


def test_cli_memory_format_and_objective() -> None:
    # channels_last skips cuDNN's NCHW<->NHWC transposes around tensor-core convolutions: never slower;
    # fine-tuning drops BERT's masked-LM head (vocabulary-wide GEMM and loss): never slower either.
    base = "predict --model resnet-50 --gpu a100-sxm-80gb --training --micro-batch 128 --precision bf16"
    base += " --json"
    rc_nchw, out_nchw = _cli_json(base)
    rc_nhwc, out_nhwc = _cli_json(base + " --memory-format nhwc")
    assert rc_nchw == rc_nhwc == 0, out_nchw + out_nhwc
    assert json.loads(out_nhwc)["samples_per_s"] > json.loads(out_nchw)["samples_per_s"]
    bert = "predict --model bert-large --gpu a100-sxm-80gb --training --micro-batch 16 --seq-len 384 --json"
    rc_pre, out_pre = _cli_json(bert)
    rc_fine, out_fine = _cli_json(bert + " --objective finetune")
    assert rc_pre == rc_fine == 0, out_pre + out_fine
    assert json.loads(out_fine)["step_time_s"] < json.loads(out_pre)["step_time_s"]
    for flag, value in (("--memory-format", "nchx"), ("--objective", "bogus")):
        rc, out = _cli_json(f"{base} {flag} {value}")
        assert rc == 2 and value in out and "Traceback" not in out


@pytest.mark.parametrize("cap_w", [200.0, 300.0, 450.0])
def test_multi_gpu_training_power_stays_under_the_cap(cap_w: float) -> None:
    # The board limit includes the links: overlapped collectives' wire energy must not lift the mean
    # power per GPU over the cap (it did by ~5 W with FSDP on 8 GPUs).
    from dse.perf.types import OperatingPoint

    req = TrainingRequest(
        micro_batch=1, global_batch=8, seq_len=2048, layout=ParallelLayout(num_gpus=8, fsdp=True)
    )
    est = predict_llm_training(load_model_config("llama-3.1-8b"), GPU, req, OperatingPoint(power_cap_w=cap_w))
    assert est.avg_power_w <= cap_w * (1 + 1e-9)
    assert est.link_energy_j > 0


def test_a_cap_just_above_idle_power_is_accepted_on_several_gpus() -> None:
    # The kernels' share of the cap (the cap less the links' power) may fall below idle power: the clock
    # floor bounds it, the user's cap is not refused (h200 publishes no minimum limit).
    from dse.perf.dvfs import idle_power_w
    from dse.perf.types import OperatingPoint

    h200 = load_gpu("h200-sxm")
    cap_w = float(idle_power_w(h200, h200.clocks.sm_clock_min_hz)) + 1.0
    req = TrainingRequest(micro_batch=1, global_batch=8, seq_len=2048, layout=ParallelLayout(num_gpus=8))
    point = OperatingPoint(power_cap_w=cap_w)
    est = predict_llm_training(load_model_config("llama-3.1-8b"), h200, req, point)
    assert est.step_time_s > 0


def test_image_size_is_refused_for_language_models() -> None:
    cmd = "predict --model llama-3.1-8b --gpu h100-sxm --training --micro-batch 1 --image-size 100"
    rc, out = _cli_json(cmd)
    assert rc == 2 and "--image-size" in out


def test_attention_kernels_order_and_scale_only_the_attention() -> None:
    """On Hopper FA3 (the kernel model's own attention) < FA2 (FA2_ON_HOPPER x, the FA3 paper's speedup)
    < llm-foundry's Triton kernel; the other kernels do not move; FA3 does not exist before Hopper."""
    h100 = load_gpu("h100-sxm")
    assert attention_scale_of(h100, "fa3") == 1.0 and attention_scale_of(h100, "fa2") == FA2_ON_HOPPER
    assert attention_scale_of(h100, "triton") > FA2_ON_HOPPER
    a100 = load_gpu("a100-sxm-80gb")
    assert attention_scale_of(a100, "fa2") == 1.0 < attention_scale_of(a100, "triton")
    with pytest.raises(ConfigError, match="fa3"):
        attention_scale_of(a100, "fa3")
    with pytest.raises(ConfigError, match="attention_kernel"):
        TrainingRequest(micro_batch=1, global_batch=1, attention_kernel="fa4")
    with pytest.raises(ConfigError, match="eager"):  # a flash implementation for eager attention
        TrainingRequest(micro_batch=1, global_batch=1, attention="eager", attention_kernel="fa3")
    assert attention_scale_of(h100, "fa2", attention="eager") == 1.0
    # Blackwell takes Hopper's ratios (FA3 runs there; no Blackwell training rows to fit)
    b200 = load_gpu("b200")
    assert [attention_scale_of(b200, k) for k in ("fa3", "fa2", "triton")] == [
        attention_scale_of(h100, k) for k in ("fa3", "fa2", "triton")
    ]

    def step(kernel: str):
        req = TrainingRequest(micro_batch=1, global_batch=8, seq_len=8192, attention_kernel=kernel,
                              layout=ParallelLayout(num_gpus=8, fsdp=True))  # fmt: skip
        # no power cap: the three steps run at one clock, so the kernels' times compare directly
        return predict_llm_training(
            load_model_config("llama-3.1-8b"), h100, req, OperatingPoint(power_cap_w=1e4)
        )

    fa3, fa2, triton = step("fa3"), step("fa2"), step("triton")
    assert fa3.step_time_s < fa2.step_time_s < triton.step_time_s
    on_b200 = [
        predict_llm_training(
            load_model_config("llama-3.1-8b"), b200,
            TrainingRequest(micro_batch=1, global_batch=8, seq_len=8192, attention_kernel=k,
                            layout=ParallelLayout(num_gpus=8, fsdp=True)),
        ).step_time_s
        for k in ("fa3", "fa2", "triton")
    ]  # fmt: skip
    assert on_b200[0] < on_b200[1] < on_b200[2]
    attn = {k: e.phase_time_s["attention_in_forward_backward"] for k, e in (("fa3", fa3), ("fa2", fa2))}
    assert attn["fa2"] == pytest.approx(FA2_ON_HOPPER * attn["fa3"], rel=1e-6)
    t3, t2 = fa3.phase_time_s, fa2.phase_time_s
    others = [t["forward"] + t["backward"] - t["attention_in_forward_backward"] for t in (t3, t2)]
    assert others[0] == pytest.approx(others[1], rel=1e-6)


def test_the_step_reports_the_clock_its_kernels_ran_at() -> None:
    """A locked clock is the clock every kernel runs at; under a binding cap the busy-time mean falls below
    the request, and a tighter cap never raises it (the cap search clocks down to fit)."""
    gpu = load_gpu("h100-sxm")
    arch = load_model_config("llama-3.1-8b")
    req = TrainingRequest(micro_batch=2, global_batch=16, seq_len=2048, layout=ParallelLayout(num_gpus=8))
    locked = predict_llm_training(arch, gpu, req, OperatingPoint(sm_clock_hz=1.2e9)).metrics()
    assert locked["effective_clock_hz"] == locked["requested_clock_hz"] == 1.2e9
    assert locked["effective_clock_mhz"] == 1200.0
    clocks = [
        predict_llm_training(arch, gpu, req, OperatingPoint(power_cap_w=cap)).metrics()["effective_clock_hz"]
        for cap in (700.0, 450.0, 300.0)
    ]
    assert clocks[2] <= clocks[1] <= clocks[0] <= gpu.clocks.boost_clock_hz and clocks[2] < clocks[0]


def test_a_cap_the_step_cannot_hold_is_flagged() -> None:
    """A cap below what the step draws at the lowest clock (idle and static power alone) is reported, not
    silently exceeded; a cap the cap search can meet is not flagged."""
    gpu = load_gpu("a100-sxm-80gb")
    req = TrainingRequest(micro_batch=64, global_batch=64, precision="fp16", optimizer="sgd")
    from dse.training.predict import predict_training

    low = predict_training("resnet-50", gpu, req, OperatingPoint(power_cap_w=100.0)).metrics()
    ok = predict_training("resnet-50", gpu, req, OperatingPoint(power_cap_w=300.0)).metrics()
    assert low["power_cap_w"] == 100.0 and low["cap_exceeded"] and low["avg_power_w"] > 100.0
    assert ok["power_cap_w"] == 300.0 and not ok["cap_exceeded"] and ok["avg_power_w"] <= 300.0 * (1 + 1e-6)

"""The report's per-point data: energy breakdown, bounds per phase and the roofline kernels."""

from __future__ import annotations

import pytest

from dse.errors import ConfigError
from dse.hardware.catalog import load_gpu
from dse.search.breakdown import breakdown_for_point
from dse.search.objective import EvalContext, evaluate_point


def test_static_point_has_bounds_and_roofline_kernels() -> None:
    ctx = EvalContext(batch=16, input_tokens=512, output_tokens=64, engine="vllm")
    data = breakdown_for_point({"sm_clock_mhz": 1500}, ctx)
    assert set(data) == {"by_module", "by_op", "bound_by", "roofline"}
    assert data["bound_by"]["decode"]["bound_by"] == "dram"  # batch-16 decode streams the weights
    roof = data["roofline"]
    h100 = load_gpu("h100-sxm")
    assert roof["tensor_peak_flop_per_s"] == pytest.approx(4096 * 132 * 1.5e9)
    assert roof["dram_bw_bytes_per_s"] == h100.memory.bw_bytes_per_s
    phases = {k["phase"] for k in roof["kernels"]}
    assert phases == {"prefill", "decode"}
    gemms = [k for k in roof["kernels"] if k["kind"] == "gemm" and k["phase"] == "prefill"]
    assert gemms and all(k["flop"] > 0 and k["latency_s"] > 0 for k in gemms)
    # no kernel beats the roofs it is drawn under
    for k in roof["kernels"]:
        if k["flop"] > 0:
            achieved = k["flop"] / k["latency_s"]
            assert achieved <= roof["tensor_peak_flop_per_s"] * 1.001


def test_load_point_gives_its_decode_step_per_token() -> None:
    ctx = EvalContext(mode="concurrency", concurrency=4, input_tokens=128, output_tokens=16, num_requests=8)
    data = breakdown_for_point({}, ctx)
    assert set(data) == {"by_module", "by_op", "bound_by", "note"}
    assert data["bound_by"]["decode"]["bound_by"] == "dram"
    assert all(k.startswith("decode/") for k in data["by_op"])
    # module and operator views split the same energy
    assert sum(data["by_module"].values()) == pytest.approx(sum(data["by_op"].values()), rel=1e-9)
    # a decode step's kernel energy per token is part of the run's J per output token (no idle gaps, prefill)
    run = evaluate_point({}, ctx)
    assert 0 < sum(data["by_module"].values()) < run["energy_per_output_token_j"]


def test_roofline_kernels_are_priced_as_the_point_is() -> None:
    """The report's roofline figure draws each kernel at the time the point's own prediction gives it: the
    prefill kernels add up to the static batch's TTFT (its prefill, on one GPU). Before, the figure ran
    the uncorrected analytical model, ~25% faster here."""
    from dse.search.breakdown import roofline_for_inputs
    from dse.search.objective import EvalContext, build_inputs, predict_inputs

    ctx = EvalContext(gpu="h100-sxm", model="llama-3.1-8b", mode="static", batch=4, input_tokens=1024,
                      output_tokens=16)  # fmt: skip
    inputs = build_inputs({}, ctx)
    kernels = roofline_for_inputs(inputs)["kernels"]
    prefill_s = sum(k["latency_s"] * k["count"] for k in kernels if k["phase"] == "prefill")
    assert prefill_s == pytest.approx(predict_inputs(inputs).metrics()["ttft_s"], rel=1e-9)


def test_report_breakdowns_leave_out_parameters_their_when_switched_off(tmp_path) -> None:
    """A front point whose `when` parameter is off reads back from the run's table with None in that
    column; its breakdown is the point as the sampler made it. Before, the None went on as a GPU override
    ("override 'memory.bus_width_bits': expected a finite number, got None") and the point had none."""
    from dse.report.frames import infer_parameters, load_run, point_params
    from dse.search.breakdown import breakdown_context, logged_point_breakdown
    from dse.search.runner import run_study

    study = tmp_path / "when.yaml"
    study.write_text(
        "name: when\nmodel: llama-3.1-8b\ngpu: h100-sxm\n"
        "workload: {batch: 4, input_tokens: 256, output_tokens: 16}\n"
        "space:\n"
        "  gpu.memory.technology: {values: [hbm3, gddr7]}\n"
        "  gpu.memory.bus_width_bits: {values: [384, 512], when: {gpu.memory.technology: gddr7}}\n"
        "objectives: {e2e_latency_s: minimize, energy_per_output_token_j: minimize}\n"
        "search: {sampler: grid, n_points: 3, executor: serial}\n",
        encoding="utf-8",
    )
    summary = run_study(study, out=tmp_path / "out")
    run = load_run(summary.run_dir)
    hbm = run.trials[run.trials["param.gpu.memory.technology"] == "hbm3"].iloc[0].to_dict()
    logged = point_params(hbm, infer_parameters(run.trials))
    assert logged["gpu.memory.bus_width_bits"] is None  # the table's view of an inactive parameter
    ctx, space = breakdown_context(summary.run_dir)
    with pytest.raises(ConfigError, match="bus_width_bits"):
        breakdown_for_point(logged, ctx)  # the row as it was passed on before
    data = logged_point_breakdown(logged, ctx, space)
    assert data["by_module"] and sum(data["by_module"].values()) > 0


def _roof(gpu: str, precision: str, model: str = "llama-3.1-8b") -> dict:
    ctx = EvalContext(gpu=gpu, model=model, batch=4, input_tokens=128, output_tokens=8)
    return breakdown_for_point({"precision": precision, "sm_clock_mhz": 1000}, ctx)["roofline"]


def test_roofline_tensor_roof_follows_the_kernel_models_dtype_rule() -> None:
    """The roof a GEMM is drawn under is the fastest rate the kernel model prices the point's GEMMs at, each
    from the catalog's dense Tensor-Core rates: TF32 GEMMs on H100's TF32 Tensor Cores (not the FP32 CUDA
    cores their fp32 activations use); fp8 on an A100 (no fp8 Tensor Cores) on its bf16 ones, not its
    faster int8 ones; TF32 on a V100 (no TF32: compute capability 7.0) and fp32 anywhere on the CUDA cores;
    gpt-oss's mxfp4 experts on B200's native fp4 Tensor Cores."""
    h100, a100, v100, b200 = (load_gpu(g) for g in ("h100-sxm", "a100-sxm-80gb", "v100-sxm2", "b200"))

    def tc(gpu, dtype: str) -> float:  # the catalog's rate at the roofs' 1000 MHz
        return gpu.sm.tensor_flop_per_clk[dtype] * gpu.num_sms * 1e9

    assert _roof("h100-sxm", "tf32")["tensor_peak_flop_per_s"] == pytest.approx(tc(h100, "tf32"))
    assert _roof("h100-sxm", "fp32")["tensor_peak_flop_per_s"] == pytest.approx(
        h100.fp32_peak_flop_per_s(1e9)
    )
    assert a100.sm.tensor_flop_per_clk["int8"] > a100.sm.tensor_flop_per_clk["bf16"]
    assert _roof("a100-sxm-80gb", "fp8")["tensor_peak_flop_per_s"] == pytest.approx(tc(a100, "bf16"))
    assert "tf32" not in v100.sm.tensor_flop_per_clk
    v100_roof = _roof("v100-sxm2", "tf32")
    assert v100_roof["tensor_peak_flop_per_s"] == pytest.approx(
        v100.fp32_peak_flop_per_s(v100_roof["sm_clock_hz"])
    )
    mx = _roof("b200", "mxfp4", model="gpt-oss-20b")["tensor_peak_flop_per_s"]
    assert mx == pytest.approx(tc(b200, "fp4"))

"""Whole-model runs without a GPU: chrome-trace parsing, trace/timeline alignment, measure_model on replay."""

from __future__ import annotations

import json
import sys
from unittest import mock

import numpy as np
import pandas as pd
import pynvml as real_pynvml
import pytest

from dse.errors import ConfigError, MeasurementError
from dse.measure.cli_commands import measure_kernels_command, measure_model_command
from dse.measure.harness import MeasureProtocol
from dse.measure.kernels import TORCH_HINT, TorchLauncher
from dse.measure.model_run import (
    IDLE,
    OTHER,
    KernelEvent,
    ProfiledRun,
    energy_breakdown,
    measure_model,
    parse_chrome_trace,
)
from dse.measure.replay import ReplayGpu, ReplayModelRunner
from dse.measure.torch_llm import build_torch_llm
from dse.workload.llm import build_prefill_graph
from dse.workload.models import load_model_config
from dse.workload.ops import AttentionOp, GemmOp


def _x(cat, name, ts, dur, pid=1, tid=1, **args):
    event = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
    if args:
        event["args"] = args
    return event


def test_kernels_get_the_innermost_dse_annotation_around_their_launch():
    trace = {
        "traceEvents": [
            _x("user_annotation", "dse::sync", 1000.0, 1.0),
            _x("user_annotation", "m/layer[0-1]/attn/attention", 1010.0, 20.0),
            _x("user_annotation", "aten::scaled_dot_product_attention", 1012.0, 10.0),  # not ours: ignored
            _x("cuda_runtime", "cudaLaunchKernel", 1015.0, 2.0, correlation=7),
            _x("kernel", "flash_fwd_kernel", 1040.0, 100.0, pid=0, tid=7, correlation=7, stream=7),
            _x("user_annotation", "m/outer", 1200.0, 100.0),
            _x("user_annotation", "m/inner", 1210.0, 10.0),
            _x("cuda_runtime", "cudaLaunchKernel", 1215.0, 1.0, correlation=8),
            _x("cuda_runtime", "cudaLaunchKernel", 1250.0, 1.0, correlation=9),
            _x("cuda_runtime", "cudaMemcpyAsync", 1260.0, 1.0, correlation=10),
            _x("user_annotation", "m/other_thread", 1200.0, 100.0, tid=2),  # same time, other thread
            _x("kernel", "k_inner", 1300.0, 5.0, pid=0, tid=7, correlation=8),
            _x("kernel", "k_outer", 1310.0, 5.0, pid=0, tid=7, correlation=9),
            _x("gpu_memcpy", "Memcpy DtoD", 1320.0, 5.0, pid=0, tid=7, correlation=10),
            _x("gpu_user_annotation", "m/gpu_only", 2000.0, 100.0, pid=0, tid=7),
            _x("kernel", "k_gpu_annotated", 2010.0, 5.0, pid=0, tid=7, correlation=99),
            _x("kernel", "k_orphan", 3000.0, 5.0, pid=0, tid=7, correlation=100),
            {"ph": "i", "cat": "kernel", "name": "instant", "ts": 5.0},  # not a complete event
        ]
    }
    timeline = parse_chrome_trace(trace, op_prefix="m/")
    ops = {k.name: k.op for k in timeline.kernels}
    assert ops == {
        "flash_fwd_kernel": "m/layer[0-1]/attn/attention",
        "k_inner": "m/inner",
        "k_outer": "m/outer",
        "Memcpy DtoD": "m/outer",
        "k_gpu_annotated": "m/gpu_only",
        "k_orphan": "",
    }
    first = timeline.kernels[0]
    assert (first.start_s, first.end_s, first.stream) == (pytest.approx(1040e-6), pytest.approx(1140e-6), 7)
    assert timeline.markers == {"dse::sync": pytest.approx(1000e-6)}
    shifted = timeline.shifted(5.0)
    assert shifted.kernels[0].start_s == pytest.approx(5.0 + 1040e-6)
    assert shifted.markers["dse::sync"] == pytest.approx(5.0 + 1000e-6)


def test_chrome_trace_file_is_read(tmp_path):
    path = tmp_path / "trace.json"
    path.write_text(json.dumps({"traceEvents": [_x("kernel", "k", 10.0, 1.0, pid=0, tid=7)]}))
    (kernel,) = parse_chrome_trace(path).kernels
    assert kernel.name == "k" and kernel.op == ""


def test_energy_breakdown_matches_the_integrals_and_sums_to_the_window():
    t = np.linspace(0.0, 3.0, 4)
    power = 200.0 + 100.0 * t  # linear: exact under the trapezoid rule
    kernels = [
        KernelEvent(name="gemm", op="m/qkv", start_s=0.0, end_s=1.0),
        KernelEvent(name="flash", op="m/attn", start_s=1.5, end_s=2.0),
        KernelEvent(name="gemm", op="m/qkv", start_s=2.0, end_s=2.5),
        KernelEvent(name="x", op="", start_s=2.5, end_s=3.0),
    ]
    result = energy_breakdown((t, power), kernels, (0.0, 3.0), num_passes=2, prefix="prefill/")
    qkv = (250.0 + (200 * 0.5 + 50 * (2.5**2 - 4.0))) / 2
    assert result["by_op"]["prefill/m/qkv"] == pytest.approx(qkv)
    assert result["by_op"]["prefill/m/attn"] == pytest.approx(187.5 / 2)
    assert result["by_op"][f"prefill/{OTHER}"] == pytest.approx((100.0 + 50 * (9.0 - 6.25)) / 2)
    assert result["by_op"][f"prefill/{IDLE}"] == pytest.approx(162.5 / 2)
    assert sum(result["by_op"].values()) == pytest.approx(result["energy_j"]) == pytest.approx(1050.0 / 2)
    assert result["kernel_time_s_by_op"]["prefill/m/qkv"] == pytest.approx(0.75)
    assert result["by_module"] == {} and result["num_passes"] == 2


def _replay_model(latency_s: float = 5e-3):
    def fallback(op, clock_hz):
        power = 600.0 if isinstance(op, GemmOp) else 500.0 if isinstance(op, AttentionOp) else 250.0
        return latency_s, power

    gpu = ReplayGpu(fallback=fallback, idle_power_w=100.0)
    arch = load_model_config("gpt2")
    graph = build_prefill_graph(arch, batch=1, seq_len=128)
    return gpu, ReplayModelRunner(gpu, graph, name=arch.name), graph


def test_measure_model_splits_a_replayed_run_into_the_known_per_op_energies():
    gpu, runner, graph = _replay_model()
    protocol = MeasureProtocol(sample_period_s=1e-4)
    result = measure_model(runner, gpu, protocol, sm_clock_hz=1.41e9, gpu_label="h100-sxm")
    sample, breakdown = result.sample, result.breakdown
    assert sample.kind == "model" and sample.name == "gpt2/prefill" and sample.gpu == "h100-sxm"
    assert sample.energy_j == pytest.approx(runner.pass_energy_j(), rel=1e-9)  # counter: exact
    assert sample.latency_s == pytest.approx(runner.pass_latency_s(), rel=1e-9)
    assert sample.sm_clock_hz == 1.41e9 and gpu.lock_log[-1] == ("reset", None)
    assert sample.idle_power_w == pytest.approx(100.0) and sample.stable
    assert (sample.batch, sample.seq_len_q, sample.seq_len_kv) == (1, 128, 128)
    expected = runner.expected_energy_j_by_op()
    assert set(breakdown["by_op"]) == {f"prefill/{op.name}" for op in graph.ops} | {f"prefill/{IDLE}"}
    profiled = breakdown["profiled"]["by_op"]
    for name, energy in expected.items():
        assert profiled[f"prefill/{name}"] == pytest.approx(energy, rel=0.03), name
    assert (
        sum(breakdown["by_op"].values())
        == pytest.approx(breakdown["energy_j"])
        == pytest.approx(sample.energy_j)
    )
    assert breakdown["energy_j_by_name"] == breakdown["by_op"] and breakdown["by_module"] == {}
    kernels = result.timeline.kernels
    assert len(kernels) == breakdown["profiled"]["num_passes"] * len(runner._order)
    # kernels land inside the sampled window once moved from the profiler clock (offset 1000 s) to the host's
    assert result.power_trace.t_s[0] <= kernels[0].start_s + 1e-9
    assert kernels[-1].end_s <= result.power_trace.t_s[-1] + 1e-9


def test_a_trace_without_the_sync_marker_cannot_be_aligned():
    gpu, runner, _ = _replay_model(latency_s=1e-3)

    class NoMarker(ReplayModelRunner):
        def profile(self, num_passes, now_s):
            run = super().profile(num_passes, now_s)
            events = [e for e in run.trace["traceEvents"] if e["name"] != "dse::sync"]
            return ProfiledRun(
                trace={"traceEvents": events},
                marker_host_s=run.marker_host_s,
                t0_s=run.t0_s,
                t1_s=run.t1_s,
                num_passes=run.num_passes,
            )

    runner.__class__ = NoMarker
    with pytest.raises(MeasurementError, match="dse::sync"):
        measure_model(runner, gpu, MeasureProtocol())


@pytest.mark.parametrize(
    ("model", "phase", "layers"), [("llama-3.1-8b", "prefill", 31), ("gpt2", "decode", 11)]
)
def test_measure_model_command_dry_run_writes_a_run_folder(tmp_path, model, phase, layers):
    out = measure_model_command(model, 2, 512, tmp_path / "run", phase=phase, dry_run=True)
    assert sorted(p.name for p in out.iterdir()) == [
        "breakdown.json",
        "env.json",
        "kernels.parquet",
        "power_trace.parquet",
        "samples.parquet",
    ]
    breakdown = json.loads((out / "breakdown.json").read_text())
    assert f"{phase}/{model}/layer[0-{layers}]/attn/qkv_proj" in breakdown["by_op"]
    assert sum(breakdown["by_op"].values()) == pytest.approx(breakdown["energy_j"])
    samples = pd.read_parquet(out / "samples.parquet")
    assert samples.loc[0, "kind"] == "model" and samples.loc[0, "energy_j"] == pytest.approx(
        breakdown["energy_j"]
    )
    kernels = pd.read_parquet(out / "kernels.parquet")
    assert kernels["op"].str.startswith(f"{model}/").all()
    with pytest.raises(ConfigError, match="never overwritten"):
        measure_model_command(model, 2, 512, out, dry_run=True)


def test_model_options_are_checked_before_touching_the_gpu(tmp_path):
    arch = load_model_config("gpt2")
    with pytest.raises(ConfigError, match="precision"):
        build_torch_llm(arch, batch=1, seq_len=128, precision="fp8")
    with pytest.raises(ConfigError, match="encoder"):
        build_torch_llm(load_model_config("bert-large"), batch=1, seq_len=128, phase="decode")
    with pytest.raises(ConfigError, match="max_position_embeddings 1024"):
        build_torch_llm(arch, batch=1, seq_len=2048)


def test_without_torch_model_and_kernel_runs_say_so(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    with pytest.raises(MeasurementError) as info:
        build_torch_llm(load_model_config("gpt2"), batch=1, seq_len=128)
    assert str(info.value) == TORCH_HINT == "dse measure needs PyTorch: pip install torch"
    with pytest.raises(MeasurementError, match="needs PyTorch"):
        TorchLauncher()


@pytest.fixture
def no_driver():
    with mock.patch("dse.measure.nvml.pynvml", autospec=True) as fake:
        fake.nvmlInit.side_effect = real_pynvml.NVMLError_LibraryNotFound()
        yield fake


def test_commands_without_a_gpu_raise_one_line(tmp_path, no_driver):
    for run in (
        lambda: measure_kernels_command("gemm", [1410], tmp_path / "k.parquet"),
        lambda: measure_model_command("gpt2", 1, 128, tmp_path / "m"),
    ):
        with pytest.raises(MeasurementError) as info:
            run()
        message = str(info.value)
        assert message.startswith("no NVIDIA GPU/driver found") and "\n" not in message
    assert not (tmp_path / "k.parquet").exists() and not (tmp_path / "m").exists()


def test_commands_with_a_gpu_but_without_torch_say_so(tmp_path, monkeypatch):
    fake_gpu = mock.MagicMock()
    monkeypatch.setitem(sys.modules, "torch", None)
    with (
        mock.patch("dse.measure.nvml.NvmlGpu.open", return_value=fake_gpu),
        pytest.raises(MeasurementError, match=r"^dse measure needs PyTorch: pip install torch$"),
    ):
        measure_kernels_command("gemm", None, tmp_path / "k.parquet")
    fake_gpu.close.assert_called_once()


def test_an_unwritable_out_is_refused_before_measuring(tmp_path):
    """--out whose folder cannot be written (here: under a file; a read-only disk alike) is one error before
    anything runs; it was found only when writing, after the whole measurement (a fuzzer's finding)."""
    blocker = tmp_path / "afile"
    blocker.write_text("x")
    with pytest.raises(ConfigError, match="cannot write in"):
        measure_kernels_command("smoke", None, blocker / "k.csv", dry_run=True)
    with pytest.raises(ConfigError, match="cannot write in"):
        measure_model_command("gpt2", 1, 64, blocker / "run", dry_run=True)
    assert list(tmp_path.iterdir()) == [blocker]  # no test file left behind


@pytest.mark.parametrize("clocks", ["nan", "inf", "1e308", "0.0001", ",,", "1410,x"])
def test_bad_clock_lists_are_one_error(tmp_path, clocks):
    """NaN was a traceback, inf and 1e308 wrote samples with sm_clock_hz=inf, ',,' measured at the
    default clock without a word (a fuzzer's findings): each is one error naming --clocks-mhz."""
    from typer.testing import CliRunner

    from dse.cli import app

    args = ["measure", "kernels", "--dry-run", "--suite", "smoke", "--out", str(tmp_path / "k.csv")]
    result = CliRunner().invoke(app, [*args, "--clocks-mhz", clocks])
    assert result.exit_code == 2 and "--clocks-mhz" in result.stderr, result.output
    assert not (tmp_path / "k.csv").exists()


def test_replay_without_dry_run_names_the_missing_flag(tmp_path):
    """--replay stands in for a GPU only in a dry run; without --dry-run it said "no NVIDIA GPU/driver
    found" (a newcomer's finding), which hides the flag that is missing."""
    from typer.testing import CliRunner

    from dse.cli import app

    args = ["measure", "kernels", "--suite", "smoke", "--out", str(tmp_path / "k.csv")]
    result = CliRunner().invoke(app, [*args, "--replay", str(tmp_path / "recorded.parquet")])
    assert result.exit_code == 2 and "--replay needs --dry-run" in result.stderr, result.output
    assert not (tmp_path / "k.csv").exists()


def test_a_vision_model_is_named_as_one_measure_model_does_not_take(tmp_path):
    """`measure model --model resnet-50` said "unknown model 'resnet-50' (did you mean resnet-50?)"."""
    from typer.testing import CliRunner

    from dse.cli import app

    args = ["measure", "model", "--model", "resnet-50", "--out", str(tmp_path / "rn"), "--dry-run"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2 and "takes an LLM; 'resnet-50' is a vision model" in result.stderr
    assert "did you mean" not in result.stderr and not (tmp_path / "rn").exists()

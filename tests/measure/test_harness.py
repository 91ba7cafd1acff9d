"""measure_ops end to end on ReplayGpu (virtual clock): protocol, stability gate, clocks, files."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest

from dse.calibrate.data.samples import op_from_sample, read_samples, write_samples
from dse.errors import ConfigError, MeasurementError
from dse.hardware.catalog import load_gpu
from dse.measure.cli_commands import measure_kernels_command
from dse.measure.harness import MeasureProtocol, measure_kernel, measure_ops
from dse.measure.replay import ReplayGpu, synthetic_fallback
from dse.workload.ops import GemmOp, SoftmaxOp

RECORDED = Path(__file__).parent / "data" / "h200_sxm+gemm.csv"


@pytest.fixture
def recorded():
    return read_samples(RECORDED)


def test_replayed_recorded_samples_come_back_through_the_protocol(recorded, tmp_path):
    gpu = ReplayGpu(recorded, name="h200-sxm", idle_power_w=90.0)
    ops = [op_from_sample(s) for s in recorded]
    protocol = MeasureProtocol()
    samples = measure_ops(ops, [None], protocol, gpu, gpu.launcher(), source="test")
    assert len(samples) == len(recorded)
    for got, want in zip(samples, recorded, strict=True):
        assert (got.m, got.n, got.k, got.dtype, got.gpu) == (want.m, want.n, want.k, "bf16", "h200-sxm")
        assert got.latency_s == pytest.approx(want.latency_s, rel=1e-9)
        assert got.avg_power_w == pytest.approx(want.avg_power_w, rel=1e-9)  # the counter is exact here
        assert got.energy_j == pytest.approx(want.avg_power_w * want.latency_s, rel=1e-9)
        assert got.trace_energy_j == pytest.approx(got.energy_j, rel=0.02)  # 10 ms samples of the same power
        assert got.idle_power_w == pytest.approx(90.0)
        assert got.num_calls * got.latency_s >= protocol.window_s  # windows of >= 1 s
        assert got.num_calls >= protocol.min_calls
        assert got.num_repeats == protocol.repeats and got.stable
        assert got.sm_clock_hz is None and got.avg_sm_clock_hz == pytest.approx(1.98e9)  # no lock: observed
        assert got.num_samples >= protocol.repeats * 100  # ~10 ms samples over >= 3 x 1 s
        assert got.energy_method == "counter" and got.source == "test"
    path = write_samples(tmp_path / "replayed.parquet", samples)
    assert read_samples(path) == samples


def test_sample_files_have_the_columns_of_the_calibration_loaders(recorded, tmp_path):
    gpu = ReplayGpu(recorded, name="h200-sxm")
    samples = measure_ops([op_from_sample(recorded[0])], [1.5e9], MeasureProtocol(), gpu, gpu.launcher())
    frame = pd.read_parquet(write_samples(tmp_path / "s.parquet", samples))
    aiconfigurator_gemm = ["gpu", "m", "n", "k", "dtype", "latency_s", "power_w", "power_limit_w", "source"]
    energaizer = ["sm_clock_hz", "avg_sm_clock_hz", "power_cap_w", "avg_power_w", "energy_j", "avg_temp_c"]
    assert set(aiconfigurator_gemm + energaizer) <= set(frame.columns)
    assert frame.loc[0, "power_w"] == frame.loc[0, "avg_power_w"]
    assert frame.loc[0, "sm_clock_hz"] == pytest.approx(1.5e9)


def test_clocks_are_locked_in_turn_and_always_reset():
    spec = load_gpu("h100-sxm")
    gpu = ReplayGpu(fallback=synthetic_fallback(spec))
    ops = [GemmOp(name="g", m=4096, n=4096, k=4096), SoftmaxOp(name="s", rows=4096, cols=4096)]
    samples = measure_ops(ops, [1.98e9, 1.2e9], MeasureProtocol(), gpu, gpu.launcher())
    assert [s.sm_clock_hz for s in samples] == [1.98e9, 1.98e9, 1.2e9, 1.2e9]
    assert [s.avg_sm_clock_hz for s in samples] == pytest.approx([1.98e9, 1.98e9, 1.2e9, 1.2e9])
    assert gpu.lock_log == [("lock", 1.98e9), ("reset", None), ("lock", 1.2e9), ("reset", None)]
    assert samples[2].latency_s > samples[0].latency_s  # the GEMM is compute bound: slower at 1.2 GHz


def test_clock_is_reset_when_a_launcher_fails_midway():
    gpu = ReplayGpu(fallback=lambda op, f: (1e-3, 300.0))

    class Failing:
        def __init__(self):
            self.calls = 0

        def prepare(self, op):
            self.calls += 1
            if self.calls == 2:
                raise RuntimeError("CUDA error: out of memory")
            return gpu.launcher().prepare(op)

    ops = [SoftmaxOp(name=f"s{i}", rows=1024, cols=1024) for i in range(3)]
    with pytest.raises(RuntimeError, match="out of memory"):
        measure_ops(ops, [1.41e9], MeasureProtocol(), gpu, Failing())
    assert gpu.locked_sm_clock_hz is None and gpu.lock_log[-1] == ("reset", None)


def test_without_permission_locking_fails_clearly_and_no_lock_observes():
    gpu = ReplayGpu(fallback=lambda op, f: (1e-3, 300.0), can_lock=False, default_sm_clock_hz=1.755e9)
    op = SoftmaxOp(name="s", rows=1024, cols=1024)
    with pytest.raises(MeasurementError, match="no permission .*--no-lock"):
        measure_ops([op], [1.41e9], MeasureProtocol(), gpu, gpu.launcher())
    (sample,) = measure_ops([op], [None], MeasureProtocol(), gpu, gpu.launcher())
    assert sample.sm_clock_hz is None and sample.avg_sm_clock_hz == pytest.approx(1.755e9)


def test_noisy_kernels_are_retried_up_to_max_repeats_and_flagged():
    gpu = ReplayGpu(fallback=lambda op, f: (2e-4, 400.0), noise_rel=0.2, seed=3)
    protocol = MeasureProtocol(repeats=3, max_repeats=6, max_rel_std=0.05)
    (sample,) = measure_ops(
        [SoftmaxOp(name="s", rows=1024, cols=1024)], [None], protocol, gpu, gpu.launcher()
    )
    assert not sample.stable and sample.num_repeats == 6
    assert max(sample.energy_rel_std, sample.latency_rel_std) > 0.05


def test_a_settling_first_window_is_retried_and_dropped():
    gpu = ReplayGpu()

    class Settling:
        """First measured window 50% slower (a clock still ramping), then steady."""

        kernel_name = ""

        def __init__(self):
            self.runs = 0

        def run(self, num_calls):
            self.runs += 1
            scale = 1.5 if self.runs == 3 else 1.0  # runs 1-2 are the latency guess and the warm-up
            gpu.run_calls(1e-3 * scale, 300.0, num_calls)
            return num_calls

        def release(self):
            pass

    windows = measure_kernel(gpu, Settling(), MeasureProtocol(repeats=3, max_repeats=6))
    assert len(windows) == 3
    assert all(w.latency_s == pytest.approx(1e-3) for w in windows)
    assert all(w.duration_s >= 1.0 for w in windows)


def test_unsupported_ops_are_skipped_and_missing_counter_uses_the_trace(recorded):
    gpu = ReplayGpu(recorded, has_energy_counter=False, idle_power_w=70.0)
    ops = [op_from_sample(recorded[0]), GemmOp(name="not recorded", m=3, n=5, k=7)]
    seen = []
    samples = measure_ops(ops, [None], MeasureProtocol(), gpu, gpu.launcher(), on_sample=seen.append)
    assert len(samples) == 1 and seen == samples
    (sample,) = samples
    assert sample.energy_method == "trace"
    assert sample.energy_j == pytest.approx(recorded[0].energy_j, rel=0.02)
    assert sample.idle_power_w == pytest.approx(70.0, rel=0.01)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"window_s": 0.5}, "below 1.0 s"),
        ({"repeats": 1}, "repeats >= 2"),
        ({"repeats": 4, "max_repeats": 3}, "max_repeats >= repeats"),
        ({"cooldown_s": -1.0}, ">= 0"),
        ({"sample_period_s": 0.0}, "positive"),
    ],
)
def test_protocol_validation(overrides, message):
    with pytest.raises(ConfigError, match=message):
        MeasureProtocol(**overrides)


def test_no_clocks_is_an_error():
    gpu = ReplayGpu()
    with pytest.raises(ConfigError, match="no clocks"):
        measure_ops([], [], MeasureProtocol(), gpu, gpu.launcher())


def test_dry_run_command_replays_recorded_rows_and_synthesizes_the_rest(tmp_path, recorded):
    out = measure_kernels_command(
        "gemm", [1980], tmp_path / "dry.parquet", dry_run=True, replay=RECORDED, gpu_name="h200-sxm"
    )
    samples = read_samples(out)
    assert len(samples) == 100  # every GEMM of the suite runs in a dry run
    assert {s.gpu for s in samples} == {"h200-sxm"}
    (square,) = [s for s in samples if (s.m, s.n, s.k, s.dtype) == (4096, 4096, 4096, "bf16")]
    (want,) = [r for r in recorded if (r.m, r.n, r.k) == (4096, 4096, 4096)]
    assert square.latency_s == pytest.approx(want.latency_s) and square.avg_power_w == pytest.approx(
        want.avg_power_w
    )
    assert all(s.sm_clock_hz == pytest.approx(1.98e9) for s in samples)
    env = json.loads(out.with_name(out.name + ".env.json").read_text())
    assert env["dry_run"] is True and env["gpus"][0]["name"] == "h200-sxm"

    # Rows copied from the recorded file say so; the rest were made up: both carried the file's name as
    # their source, and calibrate fitted the made-up ones as measured (operator review, session 35)
    def shapes(rows):
        return {(r.m, r.n, r.k, r.dtype) for r in rows}

    replayed = [s for s in samples if s.energy_method == "replay"]
    assert replayed and shapes(replayed) == shapes(samples) & shapes(recorded)
    assert {s.source for s in replayed} == {"replay:h200_sxm+gemm.csv"}
    made_up = [s for s in samples if s not in replayed]
    assert len(made_up) == 100 - len(replayed)
    assert {(s.source, s.energy_method) for s in made_up} == {("dry-run:synthetic", "synthetic")}
    with pytest.raises(ConfigError, match="never overwritten"):
        measure_kernels_command("gemm", None, out, dry_run=True)


def test_a_replay_of_another_gpus_samples_is_refused(tmp_path, recorded):
    """The dry run pretends to be h200-sxm here and labels every row it writes so; an A100 file's rows came
    out as fittable h200-sxm measurements (replay:FILE) with no word (calibration review, session 36)."""
    a100 = tmp_path / "a100.csv"
    write_samples(a100, [replace(s, gpu="a100-sxm-80gb") for s in recorded])
    out = tmp_path / "dry.parquet"
    with pytest.raises(ConfigError) as err:
        measure_kernels_command("gemm", None, out, dry_run=True, replay=a100, gpu_name="h200-sxm")
    assert str(err.value) == (
        f"--replay {a100}: samples of 'a100-sxm-80gb', but the dry run pretends to be h200-sxm; "
        "replay samples measured on h200-sxm"
    )
    assert not out.exists()
    # The NVML spelling of the same GPU is that GPU: replayed as before.
    nvml = tmp_path / "nvml.csv"
    write_samples(nvml, [replace(s, gpu="NVIDIA H200") for s in recorded])
    replayed = read_samples(
        measure_kernels_command("gemm", None, out, dry_run=True, replay=nvml, gpu_name="h200-sxm")
    )
    assert {s.energy_method for s in replayed} == {"replay", "synthetic"}


def test_replaying_a_dry_runs_file_keeps_its_made_up_rows_made_up(tmp_path):
    dry = measure_kernels_command("smoke", None, tmp_path / "dry.csv", dry_run=True)
    again = measure_kernels_command("smoke", None, tmp_path / "again.csv", dry_run=True, replay=dry)
    assert {(s.source, s.energy_method) for s in read_samples(again)} == {("dry-run:synthetic", "synthetic")}


def test_a_dry_runs_env_file_is_strict_json_with_no_error_text(tmp_path):
    """It held `"mem_clock_hz": NaN` (not JSON) and `"uuid": "unavailable: 'ReplayGpu' object has no
    attribute 'uuid'"` (fuzz F5, session 35)."""
    out = measure_kernels_command("smoke", None, tmp_path / "dry.csv", dry_run=True)

    def refuse(constant: str) -> None:
        raise ValueError(f"not JSON: {constant}")

    env = json.loads(out.with_name(out.name + ".env.json").read_text(), parse_constant=refuse)
    (gpu,) = env["gpus"]
    assert gpu["uuid"] == "replay" and gpu["mem_clock_hz"] is None


def test_dry_run_smoke_suite_covers_every_kind(tmp_path):
    out = measure_kernels_command("smoke", None, tmp_path / "smoke.csv", dry_run=True)
    samples = read_samples(out)
    assert [s.kind for s in samples] == ["gemm", "attention_flash", "softmax", "rmsnorm", "elementwise"]
    assert all(math.isfinite(s.energy_j) and s.energy_j > 0 for s in samples)
    assert all(s.source == "dry-run:synthetic" for s in samples)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"clocks_mhz": [1410], "no_lock": True}, ConfigError, "cannot be combined"),
        ({"clocks_mhz": [-5]}, ConfigError, r"MHz in \[1, 10000\]"),
        ({"suite": "nope"}, ConfigError, "unknown suite"),
    ],
)
def test_command_argument_errors(tmp_path, kwargs, error, message):
    args = {"suite": "gemm", "clocks_mhz": None, "out": tmp_path / "x.parquet", "dry_run": True} | kwargs
    with pytest.raises(error, match=message):
        measure_kernels_command(**args)


def test_clock_list_resolution_against_the_supported_clocks():
    from unittest import mock

    from dse.measure.cli_commands import _resolve_clocks, _snap_clocks

    gpu = mock.MagicMock()
    gpu.supported_sm_clocks_hz.return_value = (1.98e9, 1.41e9, 3.45e8)
    assert _snap_clocks(gpu, _resolve_clocks(None, no_lock=True)) == [None]
    gpu.supported_sm_clocks_hz.assert_not_called()  # --no-lock never needs the list
    assert _snap_clocks(gpu, _resolve_clocks(None, no_lock=False)) == [1.98e9]  # default: the highest
    assert _snap_clocks(gpu, _resolve_clocks([1400, 1985], no_lock=False)) == [1.41e9, 1.98e9]


SHIPPED = Path(__file__).parents[2] / "dse" / "calibrate" / "measured" / "h100_sxm_kernels.csv"


def test_a_replay_matches_shapes_written_with_six_significant_digits(tmp_path):
    """The shipped H100 file stores 2^27 elements as 1.34218e+08: `--replay` of it made all its elementwise
    rows up (calibration review, session 36)."""
    shipped = pd.read_csv(SHIPPED)
    recorded = shipped[shipped["kind"] == "elementwise"]
    assert set(recorded["num_elements"]) == {134218000}  # 2^27 = 134,217,728 to 6 digits
    out = measure_kernels_command("elementwise", None, tmp_path / "ew.csv", dry_run=True, replay=SHIPPED)
    replayed = [s for s in read_samples(out) if s.energy_method == "replay"]
    assert sorted(s.variant for s in replayed) == sorted(recorded["variant"])
    assert {s.num_elements for s in replayed} == {2**27}  # the suite's shape, not the rounded one
    for s in replayed:
        (want,) = recorded[recorded["variant"] == s.variant]["latency_s"]
        assert s.latency_s == pytest.approx(want, rel=1e-9)
    # Five digits (1.3422e+08, 1.6e-5 off) is another shape: made up, not matched.
    five = tmp_path / "five.csv"
    recorded.assign(num_elements=134220000).to_csv(five, index=False)
    again = measure_kernels_command("elementwise", None, tmp_path / "ew5.csv", dry_run=True, replay=five)
    assert {s.energy_method for s in read_samples(again)} == {"synthetic"}

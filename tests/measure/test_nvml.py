"""NvmlGpu against an autospec mock of pynvml: unit conversion, error map, clocks restored in `finally`."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace
from unittest import mock

import pynvml as real_pynvml
import pytest

from dse.errors import MeasurementError
from dse.measure import nvml
from dse.measure.nvml import NvmlGpu, decode_throttle_reasons, locked_clocks, nvml_error_message, power_limit


def _field(value_mw: int, ret: int = 0) -> SimpleNamespace:
    return SimpleNamespace(nvmlReturn=ret, valueType=1, value=SimpleNamespace(uiVal=value_mw))


@pytest.fixture
def fake_nvml():
    with mock.patch("dse.measure.nvml.pynvml", autospec=True) as m:
        m.nvmlDeviceGetCount.return_value = 2
        m.nvmlDeviceGetHandleByIndex.return_value = "handle"
        m.nvmlDeviceGetName.return_value = b"NVIDIA H100 80GB HBM3"
        m.nvmlDeviceGetFieldValues.return_value = [_field(350_250)]
        m.nvmlDeviceGetPowerUsage.return_value = 420_000
        m.nvmlDeviceGetTotalEnergyConsumption.return_value = 123_456_789
        m.nvmlDeviceGetClockInfo.side_effect = lambda h, kind: {nvml._CLOCK_SM: 1980, nvml._CLOCK_MEM: 2619}[
            kind
        ]
        m.nvmlDeviceGetTemperature.return_value = 41
        m.nvmlDeviceGetEnforcedPowerLimit.return_value = 700_000
        m.nvmlDeviceGetPowerManagementLimitConstraints.return_value = (200_000, 700_000)
        m.nvmlDeviceGetSupportedMemoryClocks.return_value = [2619, 1593]
        m.nvmlDeviceGetSupportedGraphicsClocks.return_value = [1410, 1980, 345]
        m.nvmlDeviceGetCurrentClocksEventReasons.return_value = 0x4 | 0x40
        m.nvmlSystemGetCudaDriverVersion.return_value = 12040
        yield m


def test_readings_are_converted_to_si_at_the_edge(fake_nvml):
    with NvmlGpu.open(1) as gpu:
        assert gpu.name == "NVIDIA H100 80GB HBM3"
        assert gpu.power_source == "instant"
        assert gpu.power_w() == pytest.approx(350.25)  # mW -> W, from NVML_FI_DEV_POWER_INSTANT
        assert gpu.energy_j() == pytest.approx(123_456.789)  # mJ -> J
        assert gpu.sm_clock_hz() == pytest.approx(1.98e9)  # MHz -> Hz
        assert gpu.mem_clock_hz() == pytest.approx(2.619e9)
        assert gpu.temp_c() == 41.0
        assert gpu.power_limit_w() == pytest.approx(700.0)
        assert gpu.power_limit_range_w() == (pytest.approx(200.0), pytest.approx(700.0))
        assert gpu.supported_sm_clocks_hz() == (1.98e9, 1.41e9, 3.45e8)
        assert gpu.throttle_reasons() == ("sw_power_cap", "hw_thermal_slowdown")
        assert gpu.cuda_driver_version() == "12.4"
        telemetry = gpu.telemetry()
        assert telemetry["sm_clock_hz"] == pytest.approx(1.98e9) and telemetry["throttle_mask"] == 0x44
    fake_nvml.nvmlDeviceGetFieldValues.assert_called_with("handle", [real_pynvml.NVML_FI_DEV_POWER_INSTANT])
    fake_nvml.nvmlDeviceGetSupportedGraphicsClocks.assert_called_with("handle", 2619)
    fake_nvml.nvmlShutdown.assert_called_once()


def test_power_falls_back_to_the_averaged_reading_without_the_instant_field(fake_nvml):
    fake_nvml.nvmlDeviceGetFieldValues.return_value = [_field(0, ret=real_pynvml.NVML_ERROR_NOT_SUPPORTED)]
    gpu = NvmlGpu.open(0)
    assert gpu.power_source == "average"
    assert gpu.power_w() == pytest.approx(420.0)


@pytest.mark.parametrize("error", ["NVMLError_LibraryNotFound", "NVMLError_DriverNotLoaded"])
def test_no_gpu_is_one_clear_line(fake_nvml, error):
    fake_nvml.nvmlInit.side_effect = getattr(real_pynvml, error)()
    with pytest.raises(MeasurementError) as info:
        NvmlGpu.open(0)
    message = str(info.value)
    assert message.startswith("no NVIDIA GPU/driver found")
    assert "needs an NVIDIA GPU with NVML" in message and "\n" not in message


def test_gpu_index_out_of_range_shuts_nvml_down(fake_nvml):
    with pytest.raises(MeasurementError, match="out of range"):
        NvmlGpu.open(5)
    fake_nvml.nvmlShutdown.assert_called_once()


def test_error_map_messages():
    no_perm = nvml_error_message(real_pynvml.NVMLError_NoPermission(), "lock the SM clock at 1410 MHz")
    assert "no permission to lock the SM clock" in no_perm and "root" in no_perm and "--no-lock" in no_perm
    unsupported = nvml_error_message(real_pynvml.NVMLError_NotSupported(), "read the total-energy counter")
    assert "does not support read the total-energy counter" in unsupported
    assert "update the NVIDIA driver" in nvml_error_message(real_pynvml.NVMLError_FunctionNotFound(), "x")
    assert "reset or reboot" in nvml_error_message(real_pynvml.NVMLError_GpuIsLost(), "x")
    assert nvml_error_message(real_pynvml.NVMLError_Unknown(), "read power").startswith(
        "NVML failed to read power"
    )


def test_unsupported_counter_and_no_permission_become_measurement_errors(fake_nvml):
    fake_nvml.nvmlDeviceGetTotalEnergyConsumption.side_effect = real_pynvml.NVMLError_NotSupported()
    fake_nvml.nvmlDeviceSetGpuLockedClocks.side_effect = real_pynvml.NVMLError_NoPermission()
    gpu = NvmlGpu.open(0)
    with pytest.raises(MeasurementError, match="does not support read the total-energy counter"):
        gpu.energy_j()
    with (
        pytest.raises(MeasurementError, match="no permission to lock the SM clock at 1410 MHz"),
        locked_clocks(gpu, 1.41e9, settle_s=0),
    ):
        pass
    fake_nvml.nvmlDeviceResetGpuLockedClocks.assert_not_called()  # nothing was locked


def test_non_nvml_errors_pass_through(fake_nvml):
    fake_nvml.nvmlDeviceGetTemperature.side_effect = KeyError("bug")
    with pytest.raises(KeyError):
        NvmlGpu.open(0).temp_c()


def test_locked_clocks_are_reset_in_finally_when_the_body_raises(fake_nvml):
    gpu = NvmlGpu.open(0)
    with pytest.raises(ValueError, match="boom"), locked_clocks(gpu, 1.41e9, settle_s=0) as observed:
        assert observed == pytest.approx(1.98e9)  # what the (mocked) GPU reports
        raise ValueError("boom")
    fake_nvml.nvmlDeviceSetGpuLockedClocks.assert_called_once_with("handle", 1410, 1410)
    fake_nvml.nvmlDeviceResetGpuLockedClocks.assert_called_once_with("handle")


def test_locked_clocks_none_locks_nothing(fake_nvml):
    gpu = NvmlGpu.open(0)
    with locked_clocks(gpu, None) as observed:
        assert observed == pytest.approx(1.98e9)
    fake_nvml.nvmlDeviceSetGpuLockedClocks.assert_not_called()
    fake_nvml.nvmlDeviceResetGpuLockedClocks.assert_not_called()


def test_failed_reset_says_how_to_reset_by_hand(fake_nvml):
    fake_nvml.nvmlDeviceResetGpuLockedClocks.side_effect = real_pynvml.NVMLError_NoPermission()
    gpu = NvmlGpu.open(0)
    with (
        pytest.raises(MeasurementError, match="nvidia-smi -i 0 -rgc"),
        locked_clocks(gpu, 1.41e9, settle_s=0),
    ):
        pass


def test_power_limit_is_restored_in_finally(fake_nvml):
    gpu = NvmlGpu.open(0)
    with pytest.raises(RuntimeError), power_limit(gpu, 450.0):
        raise RuntimeError
    calls = fake_nvml.nvmlDeviceSetPowerManagementLimit.call_args_list
    assert calls == [mock.call("handle", 450_000), mock.call("handle", 700_000)]


def test_missing_nvidia_ml_py_is_reported():
    with mock.patch("dse.measure.nvml.pynvml", None), pytest.raises(MeasurementError, match="nvidia-ml-py"):
        NvmlGpu.open(0)


def test_throttle_reason_decoding():
    assert decode_throttle_reasons(0) == ()
    assert decode_throttle_reasons(0x1 | 0x8) == ("gpu_idle", "hw_slowdown")
    assert decode_throttle_reasons(0x10000) == ("0x10000",)


def _nvml_works() -> bool:
    try:
        real_pynvml.nvmlInit()
    except real_pynvml.NVMLError:
        return False
    real_pynvml.nvmlShutdown()
    return True


@pytest.mark.skipif(_nvml_works(), reason="this machine has an NVIDIA driver")
def test_real_nvml_without_a_gpu_raises_one_line():
    with pytest.raises(MeasurementError) as info:
        NvmlGpu.open(0)
    assert str(info.value).startswith("no NVIDIA GPU/driver found") and "\n" not in str(info.value)


def test_import_dse_and_measure_modules_do_not_import_torch():
    code = (
        "import sys, dse, dse.measure, dse.measure.kernels, dse.measure.model_run, dse.measure.cli_commands, "
        "dse.measure.harness, dse.measure.replay, dse.measure.torch_llm\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    subprocess.run([sys.executable, "-c", "import sys, dse; assert 'pynvml' not in sys.modules"], check=True)

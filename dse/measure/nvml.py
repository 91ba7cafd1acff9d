"""NvmlGpu: the NVML boundary. NVML errors become `MeasurementError`; mW, mJ and MHz become W, J and Hz here.

This file is the only one that calls pynvml (zeus `device/gpu/nvidia.py` style): every call goes through
`_call`, which maps NVML error codes to messages a user can act on. Every change to the GPU's settings
sits in a context manager whose `finally` restores it:

    with NvmlGpu.open(0) as gpu:                         # nvmlInit ... nvmlShutdown
        with locked_clocks(gpu, 1_410e6):                # nvmlDeviceSetGpuLockedClocks ... Reset
            joules = gpu.energy_j()                      # mJ counter -> J

Power is read from the instantaneous field (`NVML_FI_DEV_POWER_INSTANT`); `nvmlDeviceGetPowerUsage` is only
a fallback, because on Ampere (except GA100) and newer it is a 1-s average (hardware-facts 5.1, 5.3).

NOTE(dse): NVML exception classes and error codes are captured when this module is imported, so tests can
replace `dse.measure.nvml.pynvml` with an autospec mock and still raise and map real NVML errors.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from dse.errors import MeasurementError
from dse.units import MHZ, mj_to_j, mw_to_w

try:
    import pynvml
except ImportError:  # pragma: no cover - nvidia-ml-py is a dependency; guard for trimmed installs
    pynvml = None

logger = logging.getLogger(__name__)
T = TypeVar("T")

_real = pynvml
_NVML_ERROR: type[BaseException] | tuple[()] = _real.NVMLError if _real is not None else ()


def _const(name: str, default: int) -> int:
    return int(getattr(_real, name, default)) if _real is not None else default


# Error codes from nvml.h (stable across versions).
ERR_NOT_SUPPORTED = _const("NVML_ERROR_NOT_SUPPORTED", 3)
ERR_NO_PERMISSION = _const("NVML_ERROR_NO_PERMISSION", 4)
ERR_NOT_FOUND = _const("NVML_ERROR_NOT_FOUND", 6)
ERR_DRIVER_NOT_LOADED = _const("NVML_ERROR_DRIVER_NOT_LOADED", 9)
ERR_LIBRARY_NOT_FOUND = _const("NVML_ERROR_LIBRARY_NOT_FOUND", 12)
ERR_FUNCTION_NOT_FOUND = _const("NVML_ERROR_FUNCTION_NOT_FOUND", 13)
ERR_GPU_IS_LOST = _const("NVML_ERROR_GPU_IS_LOST", 15)
ERR_LIB_RM_VERSION_MISMATCH = _const("NVML_ERROR_LIB_RM_VERSION_MISMATCH", 18)
ERR_INVALID_ARGUMENT = _const("NVML_ERROR_INVALID_ARGUMENT", 2)

_FI_POWER_INSTANT = _const("NVML_FI_DEV_POWER_INSTANT", 186)
_CLOCK_SM = _const("NVML_CLOCK_SM", 1)
_CLOCK_MEM = _const("NVML_CLOCK_MEM", 2)
_TEMPERATURE_GPU = _const("NVML_TEMPERATURE_GPU", 0)
_VALUE_TYPES: dict[int, str] = {
    0: "dVal",
    1: "uiVal",
    2: "ulVal",
    3: "ullVal",
    4: "sllVal",
    5: "siVal",
    6: "usVal",
}

# Clock-event ("throttle") reason bits of nvmlDeviceGetCurrentClocksEventReasons, nvml.h.
THROTTLE_REASONS: dict[int, str] = {
    0x001: "gpu_idle",
    0x002: "applications_clocks_setting",
    0x004: "sw_power_cap",
    0x008: "hw_slowdown",
    0x010: "sync_boost",
    0x020: "sw_thermal_slowdown",
    0x040: "hw_thermal_slowdown",
    0x080: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}

NO_GPU_HINT = "dse measure needs an NVIDIA GPU with NVML"
NO_LOCK_HINT = (
    "locking clocks and setting power limits need root (run with sudo, or as an admin: "
    "`nvidia-smi -lgc` works for root only); or pass --no-lock to observe and record the clocks instead"
)


def nvml_error_message(exc: BaseException, action: str) -> str:
    """One line saying what failed and what to do, for an NVML error raised while trying to `action`."""
    code = getattr(exc, "value", None)
    if code in (ERR_LIBRARY_NOT_FOUND, ERR_DRIVER_NOT_LOADED, ERR_LIB_RM_VERSION_MISMATCH):
        return f"no NVIDIA GPU/driver found: {exc} ({NO_GPU_HINT})"
    if code == ERR_NO_PERMISSION:
        return f"no permission to {action} ({exc}): {NO_LOCK_HINT}"
    if code == ERR_NOT_SUPPORTED:
        return f"this GPU or driver does not support {action} ({exc})"
    if code == ERR_FUNCTION_NOT_FOUND:
        return f"the NVML library is too old to {action} ({exc}); update the NVIDIA driver"
    if code == ERR_GPU_IS_LOST:
        return f"the GPU fell off the bus while trying to {action} ({exc}); it needs a reset or reboot"
    if code == ERR_NOT_FOUND:
        return f"NVML found nothing to {action} ({exc}): check the GPU index"
    return f"NVML failed to {action}: {exc}"


def _is_nvml_error(exc: BaseException) -> bool:
    return bool(_NVML_ERROR) and isinstance(exc, _NVML_ERROR)


def _call(action: str, fn: Callable[..., T], *args: Any) -> T:
    """Call an NVML function; NVML errors become MeasurementError with `nvml_error_message`."""
    try:
        return fn(*args)
    except Exception as exc:
        if _is_nvml_error(exc):
            raise MeasurementError(nvml_error_message(exc, action)) from exc
        raise


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def decode_throttle_reasons(mask: int) -> tuple[str, ...]:
    """Names of the clock-event reason bits set in `mask` (unknown bits as `0x...`)."""
    names = [name for bit, name in THROTTLE_REASONS.items() if mask & bit]
    unknown = mask & ~sum(THROTTLE_REASONS)
    if unknown:
        names.append(hex(unknown))
    return tuple(names)


class NvmlGpu:
    """One NVIDIA GPU through NVML, in SI units. Open with `NvmlGpu.open(index)`; close (or use `with`).

    Also provides the host timebase of the harness (`now_s`, `sleep_s`: `time.perf_counter` and
    `time.sleep`) and its power sampler, so that `ReplayGpu` can stand in for it on a virtual clock.
    """

    def __init__(self, index: int, handle: Any) -> None:
        """Wrap an initialized NVML handle; use `NvmlGpu.open`, which initializes NVML."""
        self.index = index
        self._handle = handle
        self._closed = False
        self.power_source = "instant"
        self.name = _text(_call("read the GPU name", pynvml.nvmlDeviceGetName, handle))
        try:
            self._instant_power_mw()
        except MeasurementError as exc:
            self.power_source = "average"
            logger.warning(
                "instantaneous power field unavailable (%s); falling back to "
                "nvmlDeviceGetPowerUsage, a 1-s average on Ampere (non-GA100) and newer",
                exc,
            )

    @classmethod
    def open(cls, index: int = 0) -> NvmlGpu:
        """Initialize NVML and open GPU `index`.

        Raises:
            MeasurementError: no NVML library or driver, no such GPU, or nvidia-ml-py missing.
        """
        if pynvml is None:
            raise MeasurementError(f"nvidia-ml-py is not installed: pip install nvidia-ml-py ({NO_GPU_HINT})")
        try:
            pynvml.nvmlInit()
        except Exception as exc:
            if _is_nvml_error(exc):
                raise MeasurementError(f"no NVIDIA GPU/driver found: {exc} ({NO_GPU_HINT})") from exc
            raise
        try:
            count = _call("count GPUs", pynvml.nvmlDeviceGetCount)
            if not 0 <= index < count:
                raise MeasurementError(f"GPU index {index} out of range: NVML sees {count} GPU(s)")
            handle = _call(f"open GPU {index}", pynvml.nvmlDeviceGetHandleByIndex, index)
            return cls(index, handle)
        except BaseException:
            _shutdown_quietly()
            raise

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            _shutdown_quietly()

    def __enter__(self) -> NvmlGpu:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- timebase (host clock; ReplayGpu substitutes a virtual one)
    def now_s(self) -> float:
        return time.perf_counter()

    def sleep_s(self, seconds: float) -> None:
        time.sleep(max(0.0, seconds))

    # ---- readings, SI
    def _instant_power_mw(self) -> float:
        values = _call(
            "read instantaneous power", pynvml.nvmlDeviceGetFieldValues, self._handle, [_FI_POWER_INSTANT]
        )
        field = values[0]
        ret = int(field.nvmlReturn)
        if ret != 0:
            raise MeasurementError(
                nvml_error_message(
                    _real.NVMLError(ret) if _real else OSError(ret), "read instantaneous power"
                )
            )
        return float(getattr(field.value, _VALUE_TYPES.get(int(field.valueType), "uiVal")))

    def power_w(self) -> float:
        """Board power now (instantaneous field; the 1-s average only where that is missing)."""
        if self.power_source == "instant":
            return mw_to_w(self._instant_power_mw())
        return mw_to_w(_call("read power", pynvml.nvmlDeviceGetPowerUsage, self._handle))

    def energy_j(self) -> float:
        """Total-energy counter (J since the driver loaded; Volta and newer)."""
        return mj_to_j(
            _call("read the total-energy counter", pynvml.nvmlDeviceGetTotalEnergyConsumption, self._handle)
        )

    def sm_clock_hz(self) -> float:
        return _call("read the SM clock", pynvml.nvmlDeviceGetClockInfo, self._handle, _CLOCK_SM) * MHZ

    def mem_clock_hz(self) -> float:
        return _call("read the memory clock", pynvml.nvmlDeviceGetClockInfo, self._handle, _CLOCK_MEM) * MHZ

    def temp_c(self) -> float:
        return float(
            _call("read the temperature", pynvml.nvmlDeviceGetTemperature, self._handle, _TEMPERATURE_GPU)
        )

    def power_limit_w(self) -> float:
        """The enforced power limit (the cap the GPU obeys now)."""
        return mw_to_w(_call("read the power limit", pynvml.nvmlDeviceGetEnforcedPowerLimit, self._handle))

    def power_limit_range_w(self) -> tuple[float, float]:
        lo, hi = _call(
            "read the power-limit range", pynvml.nvmlDeviceGetPowerManagementLimitConstraints, self._handle
        )
        return mw_to_w(lo), mw_to_w(hi)

    def throttle_mask(self) -> int:
        """Clock-event reason bits now (0 when the call is unsupported)."""
        fn = (
            getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
            or pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
        )
        try:
            return int(_call("read clock-event reasons", fn, self._handle))
        except MeasurementError as exc:
            logger.debug("%s", exc)
            return 0

    def throttle_reasons(self) -> tuple[str, ...]:
        return decode_throttle_reasons(self.throttle_mask())

    def telemetry(self) -> dict[str, float]:
        """SM and memory clock, temperature and clock-event bits: what the sampler records at low rate."""
        return {
            "sm_clock_hz": self.sm_clock_hz(),
            "mem_clock_hz": self.mem_clock_hz(),
            "temp_c": self.temp_c(),
            "throttle_mask": float(self.throttle_mask()),
        }

    def supported_sm_clocks_hz(self) -> tuple[float, ...]:
        """Lockable SM clocks at the highest memory clock, highest first."""
        mem = _call("list memory clocks", pynvml.nvmlDeviceGetSupportedMemoryClocks, self._handle)
        clocks = _call("list SM clocks", pynvml.nvmlDeviceGetSupportedGraphicsClocks, self._handle, max(mem))
        return tuple(sorted((c * MHZ for c in clocks), reverse=True))

    def driver_version(self) -> str:
        return _text(_call("read the driver version", pynvml.nvmlSystemGetDriverVersion))

    def cuda_driver_version(self) -> str:
        v = int(_call("read the CUDA driver version", pynvml.nvmlSystemGetCudaDriverVersion))
        return f"{v // 1000}.{v % 1000 // 10}"

    def uuid(self) -> str:
        return _text(_call("read the GPU UUID", pynvml.nvmlDeviceGetUUID, self._handle))

    # ---- settings (root); use the context managers below, which restore them
    def lock_sm_clock(self, sm_clock_hz: float) -> None:
        mhz = round(sm_clock_hz / MHZ)
        _call(f"lock the SM clock at {mhz} MHz", pynvml.nvmlDeviceSetGpuLockedClocks, self._handle, mhz, mhz)

    def reset_sm_clock(self) -> None:
        _call("reset the locked SM clock", pynvml.nvmlDeviceResetGpuLockedClocks, self._handle)

    def set_power_limit(self, power_limit_w: float) -> None:
        mw = round(power_limit_w * 1e3)
        _call(
            f"set the power limit to {power_limit_w:.0f} W",
            pynvml.nvmlDeviceSetPowerManagementLimit,
            self._handle,
            mw,
        )

    def default_power_limit_w(self) -> float:
        return mw_to_w(
            _call(
                "read the default power limit", pynvml.nvmlDeviceGetPowerManagementDefaultLimit, self._handle
            )
        )

    def sampler(self, period_s: float = 0.01) -> Any:
        """A PowerSampler thread on this GPU's instantaneous power, with telemetry every 10th sample."""
        from dse.measure.sampler import PowerSampler

        return PowerSampler(self.power_w, period_s=period_s, read_aux=self.telemetry, clock=self.now_s)


def _shutdown_quietly() -> None:
    try:
        pynvml.nvmlShutdown()
    except Exception as exc:  # shutting down must not mask the error being raised
        logger.debug("nvmlShutdown failed: %s", exc)


def nearest_clock_hz(requested_hz: float, supported_hz: tuple[float, ...]) -> float:
    """The supported clock closest to `requested_hz` (ties: the lower one)."""
    if not supported_hz:
        return requested_hz
    return min(supported_hz, key=lambda c: (abs(c - requested_hz), c))


@contextmanager
def locked_clocks(gpu: Any, sm_clock_hz: float | None, *, settle_s: float = 0.2) -> Iterator[float]:
    """Lock the SM clock at `sm_clock_hz` for the body; always reset it in `finally`.

    `sm_clock_hz=None` locks nothing (the `--no-lock` mode) and just yields the clock observed now.
    Yields the SM clock read after `settle_s`. A reset failure propagates (with the body's exception, if
    any, chained) and tells the user how to reset by hand.

    Raises:
        MeasurementError: no permission to lock (needs root), or an unsupported clock.
    """
    if sm_clock_hz is None:
        yield gpu.sm_clock_hz()
        return
    gpu.lock_sm_clock(sm_clock_hz)
    try:
        gpu.sleep_s(settle_s)
        observed = gpu.sm_clock_hz()
        if abs(observed - sm_clock_hz) > 0.02 * sm_clock_hz:
            logger.info(
                "SM clock reads %.0f MHz after locking at %.0f MHz (idle or capped)",
                observed / MHZ,
                sm_clock_hz / MHZ,
            )
        yield observed
    finally:
        try:
            gpu.reset_sm_clock()
        except MeasurementError as exc:
            raise MeasurementError(
                f"{exc}; the SM clock may still be locked: reset it with "
                f"`sudo nvidia-smi -i {getattr(gpu, 'index', 0)} -rgc`"
            ) from exc


@contextmanager
def power_limit(gpu: Any, power_limit_w: float | None) -> Iterator[float]:
    """Set the board power limit for the body and restore the previous one in `finally`.

    `None` changes nothing and yields the enforced limit.
    """
    if power_limit_w is None:
        yield gpu.power_limit_w()
        return
    previous = gpu.power_limit_w()
    gpu.set_power_limit(power_limit_w)
    try:
        yield gpu.power_limit_w()
    finally:
        gpu.set_power_limit(previous)

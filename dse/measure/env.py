"""collect_env(): what a measurement ran on (zeus `show_env` style), stored next to every measured file.

Library versions come from package metadata, so torch is never imported just to report its version;
CUDA/cuDNN versions are added only when torch is already loaded. Without NVML the `gpus` entry is replaced
by an `nvml_error` line.
"""

from __future__ import annotations

import platform
import sys
from importlib import metadata
from typing import Any

import dse
from dse.errors import MeasurementError
from dse.hardware.catalog import catalog_gpu_name

_PACKAGES = ("numpy", "pandas", "pyarrow", "pydantic", "nvidia-ml-py", "torch")


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def _gpu_info(gpu: Any) -> dict[str, Any]:
    info: dict[str, Any] = {
        "index": getattr(gpu, "index", 0),
        "name": gpu.name,
        "catalog_name": catalog_gpu_name(gpu.name),
    }
    readers = {
        "uuid": "uuid",
        "power_limit_w": "power_limit_w",
        "sm_clock_hz": "sm_clock_hz",
        "mem_clock_hz": "mem_clock_hz",
        "temp_c": "temp_c",
        "power_source": None,
    }
    for key, method in readers.items():
        try:
            info[key] = getattr(gpu, method)() if method else getattr(gpu, "power_source", None)
        except MeasurementError as exc:
            info[key] = f"unavailable: {exc}"
        except AttributeError:  # a probe without the reader (an old driver's NVML binding): not known
            info[key] = None
    try:
        clocks = gpu.supported_sm_clocks_hz()
        info["sm_clock_supported_max_hz"], info["sm_clock_supported_min_hz"] = max(clocks), min(clocks)
    except (MeasurementError, AttributeError, ValueError):
        pass
    return info


def collect_env(gpu: Any | None = None) -> dict[str, Any]:
    """Python, platform, package versions, and the driver and GPU(s) as NVML reports them.

    Args:
        gpu: an open `NvmlGpu` (or `ReplayGpu`) to describe; default: open every GPU NVML sees.
    """
    env: dict[str, Any] = {
        "dse_version": dse.__version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "packages": {p: _version(p) for p in _PACKAGES},
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        env["torch_cuda"] = getattr(torch.version, "cuda", None)
        cudnn = getattr(torch.backends, "cudnn", None)
        env["cudnn"] = cudnn.version() if cudnn is not None and cudnn.is_available() else None
    if gpu is not None:
        env["gpus"] = [_gpu_info(gpu)]
        for key in ("driver_version", "cuda_driver_version"):
            try:
                env[key] = getattr(gpu, key)()
            except (MeasurementError, AttributeError):
                env[key] = None
        return env
    from dse.measure.nvml import NvmlGpu, pynvml

    try:
        first = NvmlGpu.open(0)
    except MeasurementError as exc:
        env["nvml_error"] = str(exc)
        return env
    try:
        env["driver_version"] = first.driver_version()
        env["cuda_driver_version"] = first.cuda_driver_version()
        gpus = [_gpu_info(first)]
        for index in range(1, int(pynvml.nvmlDeviceGetCount())):
            with NvmlGpu.open(index) as other:
                gpus.append(_gpu_info(other))
        env["gpus"] = gpus
    finally:
        first.close()
    return env

"""What the validation modules share: the source names, cached model and GPU loaders, and the load
model's predictions (`load_metrics`, cached per request at the defaults)."""

from __future__ import annotations

from functools import cache
from typing import Any

from dse.hardware.catalog import load_gpu
from dse.hardware.spec import GpuSpec
from dse.perf.types import OperatingPoint
from dse.serving.load import LoadRequest, predict_load
from dse.workload.llm import LlmArch
from dse.workload.models import load_model_config

MLENERGY = "mlenergy"
SILICON = "aiconfigurator_silicon"
MLENERGY_TRANSFER = "mlenergy_transfer"  # ML.ENERGY rows outside the fitted mapping (`mlenergy_transfer`)


@cache
def cached_arch(name: str) -> LlmArch:
    return load_model_config(name)


@cache
def cached_gpu(name: str) -> GpuSpec:
    return load_gpu(name)


@cache
def _default_load_metrics(model: str, gpu: str, request: LoadRequest) -> dict[str, Any]:
    return predict_load(cached_arch(model), cached_gpu(gpu), request).metrics()


def load_metrics(
    model: str,
    gpu: str,
    request: LoadRequest,
    *,
    point: OperatingPoint | None = None,
    coeffs: Any = None,
    power_coeffs: Any = None,
) -> dict[str, Any]:
    """`predict_load(...).metrics()` of catalog `model` on catalog `gpu`; at the defaults (default clocks,
    shipped coefficient sets) cached per request for the process, as a run may score a row more than once."""
    if point is None and coeffs is None and power_coeffs is None:
        return dict(_default_load_metrics(model, gpu, request))
    est = predict_load(
        cached_arch(model), cached_gpu(gpu), request, point, coeffs=coeffs, power_coeffs=power_coeffs
    )
    return est.metrics()

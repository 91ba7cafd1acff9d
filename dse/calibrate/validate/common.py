"""What the validation modules share: the source names and cached model and GPU loaders."""

from __future__ import annotations

from functools import cache

from dse.hardware.catalog import load_gpu
from dse.hardware.spec import GpuSpec
from dse.workload.llm import LlmArch
from dse.workload.models import load_model_config

MLENERGY = "mlenergy"
SILICON = "aiconfigurator_silicon"


@cache
def cached_arch(name: str) -> LlmArch:
    return load_model_config(name)


@cache
def cached_gpu(name: str) -> GpuSpec:
    return load_gpu(name)

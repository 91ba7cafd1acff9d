"""The golden set notices a change to any fitted constant.

Latency: every group of the shipped latency sets that the model can select (each leaf of the group tree) is
selected by at least one kernel of the golden sweep, so changing its constants moves a golden latency.
Power: changing any one energy coefficient of either shipped power set moves a golden whole-model energy.
"""

from __future__ import annotations

import dataclasses
import math

import pytest

from dse.hardware.catalog import load_gpu
from dse.perf.coeffs import default_power_coeffs, load_default_coeffs
from dse.perf.predict import predict_graph
from dse.perf.registry import estimate_ops
from dse.perf.types import OperatingPoint
from dse.workload.llm import build_decode_graph, build_prefill_graph
from dse.workload.models import load_model_config

from .cases import kernel_ops

GPUS = {"hopper": "h100-sxm", "ampere": "a100-sxm-80gb"}


def _resolved(groups: dict, key: str) -> str | None:
    """The group key a lookup of `key` lands on (the most specific one present), None for neutral."""
    while key not in groups:
        if "/" not in key:
            return None
        key = key.rsplit("/", 1)[0]
    return key


@pytest.mark.parametrize("arch", sorted(GPUS))
def test_every_latency_group_is_exercised(arch: str) -> None:
    gpu = load_gpu(GPUS[arch])
    coeffs = load_default_coeffs(gpu)
    groups = coeffs.table.groups
    used = {_resolved(groups, k.group) for k in estimate_ops(kernel_ops(), gpu, OperatingPoint(), coeffs)}
    leaves = {g for g in groups if not any(other.startswith(g + "/") for other in groups)}
    assert not leaves - used, f"golden sweep misses groups {sorted(leaves - used)}"


def _energies(gpu_name: str, power_coeffs: object) -> list[float]:
    gpu = load_gpu(gpu_name)
    arch = load_model_config("llama-3.1-8b")
    graphs = (
        build_prefill_graph(arch, batch=2, seq_len=512),
        build_decode_graph(arch, batch=8, context_len=1024),
    )
    coeffs = load_default_coeffs(gpu)
    # Eager launches exercise the gap coefficient; DVFS below the cap keeps every term in play.
    point = OperatingPoint(sm_clock_hz=1.2e9)
    return [predict_graph(g, gpu, point, coeffs, power_coeffs, launch="eager").energy_j for g in graphs]


@pytest.mark.parametrize("arch", sorted(GPUS))
def test_every_power_coefficient_moves_the_energy(arch: str) -> None:
    gpu_name = GPUS[arch]
    shipped = default_power_coeffs(load_gpu(gpu_name))
    base = _energies(gpu_name, shipped)
    for name in shipped.coeff_names():
        value = getattr(shipped, name)
        new_value = value * 1.001 if value > 0 else 1e-12  # a fitted zero becoming a small positive
        changed = _energies(gpu_name, dataclasses.replace(shipped, **{name: new_value}))
        moved = [not math.isclose(a, b, rel_tol=1e-9) for a, b in zip(base, changed, strict=True)]
        assert any(moved), f"{arch}: a 0.1% change of {name} moves no energy"

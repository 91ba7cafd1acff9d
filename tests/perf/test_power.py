"""The kernel power model: hand-made estimates checked term by term, coefficient files, invariants."""

from __future__ import annotations

import json

import numpy as np
import pytest

from dse.errors import ConfigError
from dse.hardware.catalog import load_gpu
from dse.perf.coeffs import (
    PowerCoeffs,
    default_power_coeffs,
    list_power_coeffs,
    load_power_coeffs,
    load_power_coeffs_file,
    write_power_coeffs,
)
from dse.perf.multiclock import estimate_arrays
from dse.perf.power import (
    ENERGY_KEYS,
    V_REF,
    gap_feature,
    gap_power_w,
    gpu_power_terms,
    power_features,
    power_parts_w,
)
from dse.perf.types import MODULES, KernelEstimate

PC = PowerCoeffs(
    architecture="ampere",
    l2_j_per_byte=10e-12,
    smem_j_per_byte=4e-12,
    tensor_j_per_flop=0.5e-12,
    cuda_j_per_flop=3e-12,
    sfu_j_per_op=6e-12,
    dram_scale=1.2,
    active_j_per_sm_cycle=2e-10,
    gap_j_per_sm_cycle=1e-10,
)


def _estimate(clock_hz: float, util: dict[str, float], latency_s: float = 1e-3, dram_bytes: float = 1e9):
    full = dict.fromkeys(MODULES, 0.0) | util
    return KernelEstimate(
        name="k",
        kind="gemm",
        count=1,
        latency_s=latency_s,
        sm_clock_hz=clock_hz,
        flop=0.0,
        dram_bytes=dram_bytes,
        l2_bytes=0.0,
        smem_bytes=0.0,
        util=full,
    )


def _kernel_power_w(estimate: KernelEstimate, gpu, coeffs: PowerCoeffs) -> float:
    """Power of one kernel while it runs, at its estimate's clock: the rows and power terms that
    `dse.perf.dvfs.capped_rows` evaluates for `predict_graph`."""
    a = estimate_arrays([estimate])
    terms = gpu_power_terms(gpu)
    return float(
        power_parts_w(a["util"], a["latency_s"], a["dram_bytes"], a["sm_clock_hz"], terms, coeffs)["total"][0]
    )


def test_terms_by_hand_a100():
    gpu = load_gpu("a100-pcie-40gb")
    f = 1.2e9
    est = _estimate(f, {"tensor": 0.5, "l2": 0.25, "dram": 0.9})
    v = gpu.power.core_v.at(f)
    v2 = (v / V_REF) ** 2
    tensor_w = 0.5 * (2048 * 108 * f) * PC.tensor_j_per_flop * v2
    l2_w = 0.25 * (5120 * f) * PC.l2_j_per_byte * v2
    dram_w = 1e9 * 8 * gpu.memory.energy_j_per_bit * 1.2 / 1e-3
    active_w = 2e-10 * 108 * f * v2
    idle_w = gpu.power.idle_power_w.at(f)
    expected = idle_w + tensor_w + l2_w + dram_w + active_w
    assert _kernel_power_w(est, gpu, PC) == pytest.approx(expected, rel=1e-12)


def test_parts_sum_to_total_and_features_reproduce_dynamic_energy():
    gpu = load_gpu("h100-sxm")
    terms = gpu_power_terms(gpu)
    rng = np.random.default_rng(0)
    util = rng.uniform(0, 1, (20, len(MODULES)))
    lat = rng.uniform(1e-6, 1e-2, 20)
    dram = rng.uniform(0, 1e9, 20)
    f = rng.uniform(gpu.clocks.sm_clock_min_hz, gpu.clocks.sm_clock_max_hz, 20)
    parts = power_parts_w(util, lat, dram, f, terms, PC)
    total = parts["idle"] + parts["active"] + parts["dram"] + parts["onchip"].sum(axis=1)
    np.testing.assert_allclose(parts["total"], total, rtol=1e-12)
    # Linear-model view used by the fit: features . coeffs = dynamic energy.
    x = power_features(util, lat, dram, f, terms)
    dyn_j = (parts["total"] - parts["idle"]) * lat
    np.testing.assert_allclose(x @ PC.vector(), dyn_j, rtol=1e-10)
    # Gap energy likewise.
    gap_s = rng.uniform(0, 1e-4, 20)
    gp = gap_power_w(f, terms, PC)
    np.testing.assert_allclose(gap_feature(gap_s, f, terms) * PC.gap_j_per_sm_cycle, gp["active"] * gap_s)


def test_fp8_tensor_flop_costs_half_a_bf16_flop():
    """Same FLOPs at twice the rate: half the busy time, so half the tensor energy."""
    gpu = load_gpu("h100-sxm")
    terms = gpu_power_terms(gpu)
    f = 1.5e9
    lat = 1e-3
    flop = 5e14 * lat
    util_bf16 = np.zeros((1, len(MODULES)))
    util_fp8 = np.zeros((1, len(MODULES)))
    t = MODULES.index("tensor")
    util_bf16[0, t] = flop / (4096 * 132 * f) / lat
    util_fp8[0, t] = flop / (8192 * 132 * f) / lat
    coeffs = PowerCoeffs(architecture="hopper", tensor_j_per_flop=1e-12)
    e16 = power_parts_w(util_bf16, lat, 0.0, f, terms, coeffs)["onchip"][0, 2] * lat
    e8 = power_parts_w(util_fp8, lat, 0.0, f, terms, coeffs)["onchip"][0, 2] * lat
    v2 = (gpu.power.core_v.at(f) / V_REF) ** 2
    assert e16 == pytest.approx(flop * 1e-12 * v2, rel=1e-12)
    assert e8 == pytest.approx(e16 / 2, rel=1e-12)


def test_tensor_flop_replaces_the_tensor_util_only():
    """With tensor_flop the Tensor-Core term charges those bf16-equivalent FLOPs, however long the kernel
    runs; every other module keeps util x rate x latency; without tensor_flop nothing changes."""
    gpu = load_gpu("h100-sxm")
    terms = gpu_power_terms(gpu)
    f, lat = np.array([1.5e9]), np.array([2e-3])
    util = np.full((1, len(MODULES)), 0.4)
    flop = np.array([3e11])
    coeffs = PowerCoeffs(architecture="hopper", tensor_j_per_flop=1e-12, l2_j_per_byte=5e-12)
    plain = power_parts_w(util, lat, 0.0, f, terms, coeffs)
    charged = power_parts_w(util, lat, 0.0, f, terms, coeffs, tensor_flop=flop)
    v2 = (gpu.power.core_v.at(f[0]) / V_REF) ** 2
    i_t = 2  # ONCHIP_MODULES order: l2, smem, tensor, cuda, sfu
    assert charged["onchip"][0, i_t] * lat[0] == pytest.approx(3e11 * 1e-12 * v2, rel=1e-12)
    np.testing.assert_allclose(
        np.delete(charged["onchip"], i_t, axis=1), np.delete(plain["onchip"], i_t, axis=1), rtol=1e-12
    )
    none = power_parts_w(util, lat, 0.0, f, terms, coeffs, tensor_flop=None)
    np.testing.assert_array_equal(none["total"], plain["total"])
    # Twice the latency, the same FLOPs: the same tensor energy (waiting is not MMA work).
    longer = power_parts_w(util, 2 * lat, 0.0, f, terms, coeffs, tensor_flop=flop)
    assert longer["onchip"][0, i_t] * 2 * lat[0] == pytest.approx(3e11 * 1e-12 * v2, rel=1e-12)
    # The fit's features agree with the power terms.
    x = power_features(util, lat, 0.0, f, terms, tensor_flop=flop)
    dyn_j = (charged["total"] - charged["idle"]) * lat
    np.testing.assert_allclose(x @ coeffs.vector(), dyn_j, rtol=1e-10)


def test_dram_term_follows_the_memory_technology():
    gpu = load_gpu("h100-sxm")
    swapped = load_gpu("h100-sxm", {"memory.technology": "gddr7", "memory.bus_width_bits": 512})
    est = _estimate(1.5e9, {}, dram_bytes=2e9)
    idle_and_active = _kernel_power_w(_estimate(1.5e9, {}, dram_bytes=0.0), gpu, PC)
    d_hbm = _kernel_power_w(est, gpu, PC) - idle_and_active
    d_gddr = _kernel_power_w(est, swapped, PC) - idle_and_active
    ratio = swapped.memory.energy_j_per_bit / gpu.memory.energy_j_per_bit
    assert d_gddr == pytest.approx(d_hbm * ratio, rel=1e-9)


def test_estimate_arrays_reads_util_in_module_order():
    est = _estimate(1e9, {"sfu": 0.3, "dram": 0.7}, latency_s=2e-3, dram_bytes=5.0)
    a = estimate_arrays([est, est])
    assert a["util"].shape == (2, len(MODULES))
    assert a["util"][0, MODULES.index("sfu")] == 0.3
    assert a["latency_s"].tolist() == [2e-3, 2e-3]
    assert a["dram_bytes"].tolist() == [5.0, 5.0]


def test_coeffs_json_roundtrip(tmp_path):
    path = tmp_path / "pc.json"
    pc = PowerCoeffs(**{**PC.to_dict(), "provenance": {"source": "test"}})
    write_power_coeffs(pc, path)
    back = load_power_coeffs_file(path)
    assert back.to_dict() == pc.to_dict()
    np.testing.assert_array_equal(PowerCoeffs.from_vector("ampere", PC.vector()).vector(), PC.vector())


def test_coeffs_reject_negative_and_unknown(tmp_path):
    with pytest.raises(ConfigError, match="tensor_j_per_flop"):
        PowerCoeffs(architecture="x", tensor_j_per_flop=-1.0)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"architecture": "x", "bogus": 1}))
    with pytest.raises(ConfigError, match="bogus"):
        load_power_coeffs_file(path)
    with pytest.raises(ConfigError, match="no shipped"):
        load_power_coeffs("no-such-set")


def test_energy_keys_cover_all_terms():
    assert ENERGY_KEYS[:3] == ("idle", "active", "dram")
    assert set(ENERGY_KEYS[3:]) == set(MODULES) - {"dram"}


@pytest.mark.parametrize("gpu_name", ["a100-pcie-40gb", "a10", "h100-sxm", "h200-sxm", "l40s", "b200"])
def test_shipped_coefficients_load_for_catalog_gpus(gpu_name):
    if not list_power_coeffs():
        pytest.skip("no shipped coefficient files yet")
    pc = default_power_coeffs(load_gpu(gpu_name))
    assert np.all(pc.vector() >= 0)
    assert pc.provenance

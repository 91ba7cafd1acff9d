"""The collective model (`dse.perf.collectives`): properties over every shipped fit, catalog links,
energy, and the `--set gpu.interconnect.*` path. Needs no measured data (the fits ship in dse/perf/data)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.errors import ConfigError
from dse.hardware.catalog import list_gpus, load_gpu
from dse.perf.coeffs import (
    CollectiveCoeffs,
    default_collective_coeffs,
    load_collective_coeffs,
    write_collective_coeffs,
)
from dse.perf.collectives import (
    collective_energy_j,
    collective_time_s,
    estimate_collective,
    moe_exchange_bytes,
    wire_bytes,
)

H100 = load_gpu("h100-sxm")
# Every (gpu, algorithm, collective) a shipped set fits, on the GPU it describes.
PAIRS = [
    (gpu, *key.split(":"))
    for gpu, arch in (("h100-sxm", "hopper"), ("b200", "blackwell"), ("h100-pcie", "hopper"))
    for key in load_collective_coeffs(arch).fits
]
SIZES = st.floats(min_value=1.0, max_value=4e9)
COUNTS = st.sampled_from([2, 3, 4, 6, 8, 16])


def _with_link(gpu_name: str, factor: float):
    gpu = load_gpu(gpu_name)
    assert gpu.interconnect is not None
    bw = gpu.interconnect.link_bw_bytes_per_s * factor
    return load_gpu(gpu_name, {"gpu.interconnect.link_bw_bytes_per_s": bw})


@pytest.mark.parametrize(("gpu", "algorithm", "collective"), PAIRS)
@settings(max_examples=25, deadline=None)
@given(size=SIZES, n=COUNTS, factor=st.floats(min_value=1.0, max_value=8.0))
def test_more_link_bandwidth_never_slows_a_collective(gpu, algorithm, collective, size, n, factor):
    base = collective_time_s(collective, size, n, load_gpu(gpu), algorithm=algorithm)
    faster = collective_time_s(collective, size, n, _with_link(gpu, factor), algorithm=algorithm)
    assert faster <= base * (1 + 1e-12)


@pytest.mark.parametrize(("gpu", "algorithm", "collective"), PAIRS)
@settings(max_examples=25, deadline=None)
@given(size=SIZES, n=COUNTS, grow=st.floats(min_value=1.0, max_value=100.0))
def test_more_bytes_never_faster(gpu, algorithm, collective, size, n, grow):
    g = load_gpu(gpu)
    small = collective_time_s(collective, size, n, g, algorithm=algorithm)
    large = collective_time_s(collective, size * grow, n, g, algorithm=algorithm)
    assert large >= small * (1 - 1e-12)
    assert small > 0 and np.isfinite(large)


@pytest.mark.parametrize(("gpu", "algorithm", "collective"), PAIRS)
def test_one_gpu_costs_nothing(gpu, algorithm, collective):
    g = load_gpu(gpu)
    assert collective_time_s(collective, 1e6, 1, g, algorithm=algorithm) == 0.0
    est = estimate_collective(collective, 1e6, 1, g, algorithm=algorithm)
    assert est.energy_j == 0.0 and est.wire_bytes == 0.0


@given(size=SIZES, n=COUNTS)
def test_gather_and_scatter_send_half_of_all_reduce(size, n):
    ar = wire_bytes("all_reduce", size, n)
    for kind in ("all_gather", "reduce_scatter"):
        assert wire_bytes(kind, size, n) == pytest.approx(ar / 2)
    assert ar == pytest.approx(2 * (n - 1) / n * size)


def test_ring_all_to_all_is_bisection_bound():
    assert wire_bytes("all_to_all", 1e6, 16, "ring") == pytest.approx(2e6)  # n/8 > (n-1)/n
    assert wire_bytes("all_to_all", 1e6, 8, "nvswitch") == pytest.approx(0.875e6)


def test_arrays_equal_scalars():
    sizes = np.array([512.0, 1e5, 3e7, 5e8])
    arr = collective_time_s("all_reduce", sizes, 8, H100, algorithm="vllm")
    assert [collective_time_s("all_reduce", s, 8, H100, algorithm="vllm") for s in sizes] == pytest.approx(
        arr
    )
    by_n = collective_time_s("all_gather", 1e6, np.array([1, 2, 4, 8]), H100)
    assert by_n[0] == 0 and np.all(np.diff(by_n) > 0)


def test_latency_field_is_used():
    slow = load_gpu("h100-sxm", {"gpu.interconnect.latency_us": 100})
    assert collective_time_s("all_reduce", 1024, 8, slow) > collective_time_s("all_reduce", 1024, 8, H100)


def test_energy_is_idle_power_plus_link_bits():
    est = estimate_collective("all_reduce", 64e6, 8, H100, sm_clock_hz=1.98e9)
    assert H100.interconnect is not None
    link_j = 2 * 7 / 8 * 64e6 * 8 * H100.interconnect.energy_j_per_bit
    assert est.link_energy_j == pytest.approx(link_j)
    assert est.idle_energy_j == pytest.approx(120.14 * est.latency_s, rel=1e-3)  # H100 idle table at 1980 MHz
    assert collective_energy_j("all_reduce", 64e6, 8, H100, sm_clock_hz=1.98e9) == pytest.approx(est.energy_j)
    assert est.avg_power_w > 120.14


def test_framework_all_reduce_beats_nccl_on_small_messages():
    for algorithm in ("vllm", "trtllm", "sglang"):
        assert collective_time_s("all_reduce", 16384, 8, H100, algorithm=algorithm) < collective_time_s(
            "all_reduce", 16384, 8, H100
        )


def test_unfitted_pairs_fall_back_to_nccl_and_unknown_names_are_errors():
    assert collective_time_s("all_gather", 1e6, 8, H100, algorithm="vllm") == collective_time_s(
        "all_gather", 1e6, 8, H100
    )
    with pytest.raises(ConfigError, match="unknown collective"):
        collective_time_s("broadcast", 1e6, 8, H100)
    with pytest.raises(ConfigError, match="algorithm"):
        collective_time_s("all_reduce", 1e6, 8, H100, algorithm="gloo")


def test_moe_exchange_bytes_counts_distinct_ranks():
    # DeepSeek shape, top-8 of 256 over 8 ranks: 5.29 distinct ranks per token, 4.63 remote (README 5: 4.6).
    b = moe_exchange_bytes(4096, hidden_size=7168, topk=8, num_experts=256, ep_size=8, bytes_per_elem=1)
    assert b / (4096 * 7168) == pytest.approx(5.295, abs=0.001)
    assert moe_exchange_bytes(1, hidden_size=10, topk=2, num_experts=2, ep_size=1) == pytest.approx(20)


def test_default_sets_by_architecture_and_round_trip(tmp_path):
    assert default_collective_coeffs(H100).architecture == "hopper"
    assert default_collective_coeffs(load_gpu("b200")).architecture == "blackwell"
    assert default_collective_coeffs(load_gpu("a100-sxm-80gb")).architecture == "hopper"  # fallback
    coeffs = load_collective_coeffs("hopper")
    assert coeffs.provenance["gpu"] == "h100-sxm" and coeffs.provenance["sources"]
    write_collective_coeffs(coeffs, tmp_path / "c.json")
    again = load_collective_coeffs(str(tmp_path / "c.json"))
    assert isinstance(again, CollectiveCoeffs) and again.fits == coeffs.fits


@pytest.mark.parametrize("name", list_gpus())
def test_catalog_interconnect(name):
    gpu = load_gpu(name)
    link = gpu.interconnect
    assert link is not None, name
    assert 10e9 <= link.link_bw_bytes_per_s <= 2e12 and 1e-7 <= link.latency_s <= 1e-4
    assert 1e-13 <= link.energy_j_per_bit <= 5e-11
    if link.topology == "nvswitch":
        # per-direction rate of one NVLink: 25 GB/s for NVLink 3 and 4, 50 GB/s for NVLink 5
        assert gpu.die is not None and gpu.die.num_nvlinks > 0
        assert link.link_bw_bytes_per_s / gpu.die.num_nvlinks in (25e9, 50e9), name
    elif link.topology == "ring":  # direct NVLinks without a switch (V100's DGX-1 hybrid cube mesh)
        assert gpu.die is not None and gpu.die.num_nvlinks > 0
        assert link.link_bw_bytes_per_s / gpu.die.num_nvlinks == 25e9, name
    else:
        assert link.topology == "pcie" and link.link_bw_bytes_per_s <= 64e9, name
    assert ("sxm" in name or name == "b200") == (link.topology != "pcie"), name


def test_override_path_sets_the_link():
    from dse.hardware.overrides import override_fields, parse_set_options

    gpu = load_gpu("h100-sxm", parse_set_options(["gpu.interconnect.link_bw_gb_per_s=900"]))
    assert gpu.interconnect is not None and gpu.interconnect.link_bw_bytes_per_s == pytest.approx(900e9)
    gpu = load_gpu("h100-sxm", {"gpu.interconnect.topology": "ring"})
    assert gpu.interconnect is not None and gpu.interconnect.topology == "ring"
    paths = {f.path: f.human_path for f in override_fields(H100)}
    assert paths["interconnect.link_bw_bytes_per_s"] == "interconnect.link_bw_gb_per_s"
    assert paths["interconnect.energy_j_per_bit"] == "interconnect.energy_pj_per_bit"
    with pytest.raises(ConfigError):
        load_gpu("h100-sxm", {"gpu.interconnect.topology": "torus"})


@pytest.mark.parametrize(
    ("algorithm", "num_gpus", "crossed"),
    [("trtllm", 4, 2), ("vllm", 8, 2), ("nccl", 8, 14), ("nccl", 2, 2)],
)
def test_a_slower_link_costs_its_latency_at_every_sequential_crossing(
    algorithm: str, num_gpus: int, crossed: int
) -> None:
    """At 1 ms a link a 4-GPU custom all-reduce took 22-59 us (physics review): the fits were made at one
    latency (10 us) and put it in their fixed cost. A slower link now adds its excess at each crossing on
    the critical path: a one-shot all-reduce sends to its peers, then waits for their flags (2); NCCL's
    ring all-reduce steps 2 (n - 1) times."""
    from dse.hardware.overrides import apply_overrides

    base = load_gpu("h100-sxm")
    slow = apply_overrides(base, {"interconnect.latency_us": 1000})
    t0, t1 = (
        collective_time_s("all_reduce", 16384.0, num_gpus, g, algorithm=algorithm) for g in (base, slow)
    )
    assert t1 - t0 == pytest.approx(crossed * (1e-3 - 10e-6), rel=1e-9)


def test_a_framework_pair_without_its_own_fit_crosses_the_link_as_nccl() -> None:
    # vLLM calls NCCL for all-gather: it takes NCCL's fit, so its n - 1 ring steps (it counted two)
    from dse.hardware.overrides import apply_overrides

    slow = apply_overrides(load_gpu("h100-sxm"), {"interconnect.latency_us": 1000})
    args = ("all_gather", 1 << 20, 8, slow)
    assert collective_time_s(*args, algorithm="vllm") == pytest.approx(
        collective_time_s(*args, algorithm="nccl")
    )

"""Memory technologies and memory swaps ("what if the H100 had GDDR7?")."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.errors import ConfigError
from dse.hardware.catalog import load_gpu
from dse.hardware.memory import build_memory, list_memory_technologies, load_memory_tech, with_memory
from dse.units import GB, GIB, TB

# hardware-facts.md 2.1, recommended model defaults (pJ/bit); independent of the technology YAML.
DEFAULT_PJ_PER_BIT = {
    "hbm2": 4.0,
    "hbm2e": 4.5,
    "hbm3": 4.0,
    "hbm3e": 3.9,
    "hbm4": 2.6,
    "gddr6": 7.5,
    "gddr6x": 7.25,
    "gddr7": 4.5,
}

H100_GDDR7 = {"memory.technology": "gddr7", "memory.bus_width_bits": 512, "memory.data_rate_gbit_per_s": 32}


def test_catalog_has_the_design_technologies() -> None:
    assert set(DEFAULT_PJ_PER_BIT) | {"lpddr5x"} <= set(list_memory_technologies())


@pytest.mark.parametrize(("name", "pj_per_bit"), sorted(DEFAULT_PJ_PER_BIT.items()))
def test_default_energy_per_bit(name: str, pj_per_bit: float) -> None:
    assert load_memory_tech(name).energy_j_per_bit == pytest.approx(pj_per_bit * 1e-12)


@pytest.mark.parametrize("spelling", ["HBM3e", "hbm-3e", "hbm_3e"])
def test_technology_names_are_canonicalised(spelling: str) -> None:
    assert load_memory_tech(spelling).name == "hbm3e"


def test_h100_with_gddr7() -> None:
    """hardware-facts.md 2.3: 512-bit GDDR7 at 32 Gb/s = 2.048 TB/s, 16 devices x 2 GB = 32 GB."""
    base = load_gpu("h100-sxm")
    gpu = load_gpu("h100-sxm", H100_GDDR7)
    assert gpu.memory.technology == "gddr7"
    assert gpu.memory.bw_bytes_per_s == pytest.approx(2.048 * TB, rel=0.01)
    assert gpu.memory.num_devices == 16
    assert gpu.memory.capacity_bytes == pytest.approx(32 * GIB)
    assert gpu.memory.energy_j_per_bit == pytest.approx(4.5e-12)
    # the die and its power tables are untouched
    assert gpu.num_sms == base.num_sms
    assert gpu.clocks == base.clocks
    assert gpu.sm == base.sm
    assert gpu.l2 == base.l2
    assert gpu.power == base.power
    assert gpu.model_dump(exclude={"memory", "die"}) == base.model_dump(exclude={"memory", "die"})
    # ...except that the new memory has no spare HBM sites: its PHY is as wide as its bus
    assert base.die is not None and gpu.die is not None
    assert gpu.die.model_dump(exclude={"memory_phy_bits"}) == base.die.model_dump(exclude={"memory_phy_bits"})
    assert (base.memory_phy_bits(), gpu.memory_phy_bits()) == (6144, 512)


def test_with_memory_equals_the_override_path() -> None:
    direct = with_memory(load_gpu("h100-sxm"), "gddr7", bus_width_bits=512, data_rate_bit_per_s=32e9)
    assert direct == load_gpu("h100-sxm", H100_GDDR7)
    assert load_gpu("h100-sxm", {"gpu.memory.technology": "gddr7"}).memory.technology == "gddr7"


@settings(max_examples=40, deadline=None)
@given(
    gpu_name=st.sampled_from(["h100-sxm", "a100-sxm-80gb", "l40s", "b200", "rtx-4090"]),
    technology=st.sampled_from(["hbm3", "hbm3e", "gddr6", "gddr7"]),
    rate_frac=st.floats(0.0, 1.0),
    devices=st.integers(1, 6),
)
def test_with_memory_is_what_validating_the_whole_spec_gives(gpu_name, technology, rate_frac, devices):
    """`with_memory` copies the validated GPU with the new memory instead of validating the whole spec
    again: the result must equal the spec that validation builds from its own fields (no check of the GPU
    is skipped that could refuse it or change a value)."""
    from dse.hardware.spec import GpuSpec

    tech = load_memory_tech(technology)
    width = min(devices * tech.device_width_bits, tech.max_bus_width_bits)
    width -= width % tech.device_width_bits
    lo, hi = tech.data_rate_min_bit_per_s, tech.data_rate_max_bit_per_s
    gpu = with_memory(
        load_gpu(gpu_name), technology, bus_width_bits=width, data_rate_bit_per_s=lo + rate_frac * (hi - lo)
    )
    assert gpu == GpuSpec.model_validate(gpu.model_dump())
    assert gpu.memory.bus_width_bits == width and gpu.memory.technology == technology


def test_swap_then_generic_override() -> None:
    gpu = load_gpu("h100-sxm", {**H100_GDDR7, "memory.energy_pj_per_bit": 5, "num_sms": 144})
    assert gpu.memory.energy_j_per_bit == pytest.approx(5e-12)
    assert gpu.num_sms == 144
    assert gpu.memory.bw_bytes_per_s == pytest.approx(2.048 * TB, rel=0.01)


def test_same_technology_keeps_the_rest_of_the_memory() -> None:
    """Changing only the data rate of an L40S keeps its 384-bit bus, 48 GB and energy per bit."""
    base = load_gpu("l40s")
    gpu = load_gpu("l40s", {"memory.data_rate_gbit_per_s": 20})
    assert gpu.memory.bw_bytes_per_s == pytest.approx(960 * GB)
    assert gpu.memory.capacity_bytes == base.memory.capacity_bytes
    assert gpu.memory.num_devices == base.memory.num_devices
    assert gpu.memory.energy_j_per_bit == base.memory.energy_j_per_bit
    wider = load_gpu("h100-sxm", {"memory.bus_width_bits": 6144})  # sixth HBM3 stack enabled
    assert wider.memory.bw_bytes_per_s == pytest.approx(6144 * 5.238e9 / 8)
    assert wider.memory.capacity_bytes == pytest.approx(96 * GIB)


def test_h100_with_hbm3e_at_typical_settings() -> None:
    gpu = with_memory(load_gpu("h100-sxm"), "hbm3e", bus_width_bits=5120)
    tech = load_memory_tech("hbm3e")
    assert gpu.memory.data_rate_bit_per_s == tech.data_rate_typical_bit_per_s
    assert gpu.memory.capacity_bytes == pytest.approx(5 * tech.capacity_per_device_bytes)


def test_another_technology_of_the_same_kind_keeps_the_stacks() -> None:
    """`--memory hbm3e` on an H100 took HBM3e's typical 8-stack bus (8192 bits, wider than the die's 6144-bit
    PHY) and so answered "what if the H100 had HBM3e" mostly with 3 more stacks. The H200 is the H100's die
    with HBM3e on its 6 sites (hardware-facts 1.4): a technology swap keeps the stacks (and the die's
    sites); HBM4's stacks are 2048 bits wide; a swap to another kind (GDDR chips) takes the typical bus."""
    base = load_gpu("h100-sxm")
    hbm3e = with_memory(base, "hbm3e")
    assert (hbm3e.memory.num_devices, hbm3e.memory.bus_width_bits) == (5, 5120)
    assert hbm3e.memory_phy_bits() == base.memory_phy_bits() == 6144
    hbm4 = with_memory(base, "hbm4")
    assert (hbm4.memory.num_devices, hbm4.memory.bus_width_bits, hbm4.memory_phy_bits()) == (5, 10240, 10240)
    gddr7 = with_memory(base, "gddr7")
    assert gddr7.memory.bus_width_bits == load_memory_tech("gddr7").typical_bus_width_bits
    l40s = load_gpu("l40s")  # 12 GDDR6 chips: GDDR7 on the same 384-bit interface
    assert with_memory(l40s, "gddr7").memory.bus_width_bits == l40s.memory.bus_width_bits == 384


@pytest.mark.parametrize(
    ("technology", "kwargs", "reason"),
    [
        ("gddr7", {"bus_width_bits": 5120}, "exceeds the 512-bit maximum"),
        ("hbm3", {"data_rate_bit_per_s": 40e9}, "outside"),
        ("gddr7", {"bus_width_bits": 1000}, "not a positive multiple of the 32-bit"),
        ("hbm3", {"bus_width_bits": 1536}, "not a positive multiple of the 1024-bit"),
        ("gddr6", {"capacity_per_device_bytes": 64 * GIB}, "per device"),
        ("hbm9", {}, "unknown memory technology 'hbm9'"),
        # a 1e308 override printed as a 309-digit integer (a fuzzer's finding)
        ("hbm3", {"bus_width_bits": 1e308}, r"bus width 1e\+308 bits exceeds"),
    ],
)
def test_impossible_memory_is_rejected_with_the_reason(technology: str, kwargs: dict, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        build_memory(technology, **kwargs)


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"memory.technology": "gddr7", "memory.bus_width_bits": 5120}, "512-bit maximum"),
        ({"memory.technology": "hbm3", "memory.data_rate_gbit_per_s": 40}, "40 Gb/s"),
        ({"memory.technology": "gddr7", "memory.bus_width_bits": 1000}, "multiple"),
        ({"memory.technology": "hbm9"}, "hbm9"),
    ],
)
def test_impossible_swap_through_overrides(overrides: dict, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        load_gpu("h100-sxm", overrides)


def test_gddr7_with_default_width_gives_known_reference_points() -> None:
    """hardware-facts.md 2.3: RTX 5090 class, 512-bit at 28 Gb/s = 1.792 TB/s; 384-bit at 32 = 1.536 TB/s."""
    assert build_memory("gddr7", data_rate_bit_per_s=28e9).bw_bytes_per_s == pytest.approx(1.792 * TB)
    assert build_memory("gddr7", bus_width_bits=384).bw_bytes_per_s == pytest.approx(1.536 * TB)


@given(
    num_devices=st.integers(1, 16),
    rate_gbit_per_s=st.floats(28, 48),
)
def test_gddr7_bandwidth_and_capacity_scale_with_devices(num_devices: int, rate_gbit_per_s: float) -> None:
    memory = build_memory("gddr7", bus_width_bits=32 * num_devices, data_rate_bit_per_s=rate_gbit_per_s * 1e9)
    assert memory.num_devices == num_devices
    assert memory.capacity_bytes == pytest.approx(num_devices * 2 * GIB)
    # a 32-bit device moves 4 bytes per transfer
    assert memory.bw_bytes_per_s == pytest.approx(num_devices * 4 * rate_gbit_per_s * 1e9)


@given(width=st.integers(1, 512).filter(lambda w: w % 32))
def test_gddr_widths_off_the_device_grid_are_rejected(width: int) -> None:
    with pytest.raises(ConfigError, match="multiple"):
        build_memory("gddr7", bus_width_bits=width)


@given(rate_gbit_per_s=st.one_of(st.floats(0.1, 3.19), st.floats(6.41, 100)))
def test_hbm3_rates_outside_the_technology_are_rejected(rate_gbit_per_s: float) -> None:
    with pytest.raises(ConfigError, match="Gb/s"):
        build_memory("hbm3", data_rate_bit_per_s=rate_gbit_per_s * 1e9)


# A field set directly is held to the technology's rules as a GPU file is (HBM3: one 1024-bit stack per
# device, at most 24 GiB per stack; the H100's 5,120-bit bus holds five).
@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"memory.num_devices": 10}, r"override 'memory.num_devices': hbm3: 10 devices .*expected 5"),
        ({"memory.capacity_gib": 150}, r"override 'memory.capacity_gib': hbm3: 30 GiB per device"),
    ],
)
def test_memory_fields_set_directly_follow_the_technology(overrides: dict, reason: str) -> None:
    with pytest.raises(ConfigError, match=reason):
        load_gpu("h100-sxm", overrides)


def test_memory_fields_within_the_technology_are_kept() -> None:
    gpu = load_gpu("h100-sxm", {"memory.capacity_gib": 60})  # 12 GiB stacks, an 8-Hi HBM3 part
    assert gpu.memory.capacity_bytes == 60 * GIB and gpu.memory.num_devices == 5

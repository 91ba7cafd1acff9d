"""dse.hardware.overrides: the one path from `--set` / `--memory` / study-space paths to a GpuSpec."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.errors import ConfigError
from dse.hardware.catalog import load_gpu
from dse.hardware.memory import load_memory_tech
from dse.hardware.overrides import apply_overrides, check_override_path, parse_set_options
from dse.hardware.spec import GpuSpec
from dse.units import MHZ

CASES = [
    {},
    {"num_sms": 120, "power.tdp_w": 650},
    {"memory.technology": "gddr7", "memory.bus_width_bits": 384},
    {"memory.technology": "hbm3e", "memory.data_rate_gbit_per_s": 7.3, "num_sms": 100},
    {"memory.data_rate_gbit_per_s": 6.0},  # same technology: keeps the 5120-bit bus
    {"memory.bus_width_bits": 4096, "memory.energy_pj_per_bit": 3.0},
    {"memory.technology": "hbm3e", "memory.capacity_per_device_gib": 36, "sm.tensor_flop_per_clk.fp8": 9000},
    {"gpu.memory.technology": "hbm3e", "gpu.memory.data_rate_frac": 0.5, "gpu.sm.tensor_factor": 2.0},
]


def _uncached(overrides: dict) -> GpuSpec:
    # The catalog YAML loaded by path skips load_gpu's per-name cache: the same vocabulary must give the
    # same GPU whichever way the spec was read.
    from importlib import resources

    path = resources.files("dse.hardware") / "data" / "gpus" / "h100-sxm.yaml"
    return apply_overrides(load_gpu(str(path)), overrides)


@pytest.mark.parametrize("overrides", CASES)
def test_cached_catalog_path_equals_applying_to_a_loaded_spec(overrides: dict) -> None:
    # the file loaded by path is a copy of the catalog entry, so it also names that entry in `based_on`
    uncached = _uncached(overrides)
    assert uncached.based_on == "h100-sxm"
    same = {"name", "based_on"}
    assert load_gpu("h100-sxm", overrides).model_dump(exclude=same) == uncached.model_dump(exclude=same)


@settings(max_examples=30, deadline=None)
@given(st.permutations(list(CASES[-1].items()) + [("num_sms", 110), ("memory.energy_factor", 0.7)]))
def test_the_result_does_not_depend_on_the_order_of_the_mapping(items: list) -> None:
    reference = load_gpu("h100-sxm", dict(sorted(items)))
    assert load_gpu("h100-sxm", dict(items)) == reference


def test_derived_knobs_mean_what_they_say() -> None:
    base = load_gpu("h100-sxm")
    gpu = load_gpu("h100-sxm", {"sm.tensor_factor": 2.0, "memory.energy_factor": 0.5})
    for dtype, rate in base.sm.tensor_flop_per_clk.items():
        assert gpu.sm.tensor_flop_per_clk[dtype] == pytest.approx(2.0 * rate)
    assert gpu.memory.energy_j_per_bit == pytest.approx(0.5 * base.memory.energy_j_per_bit)
    tech = load_memory_tech("hbm3e")
    for frac in (0.0, 1.0):
        mem = load_gpu("h100-sxm", {"memory.technology": "hbm3e", "memory.data_rate_frac": frac}).memory
        expected = tech.data_rate_min_bit_per_s if frac == 0 else tech.data_rate_max_bit_per_s
        assert mem.data_rate_bit_per_s == pytest.approx(expected)


def test_energy_factor_applies_after_a_memory_swap() -> None:
    swapped = load_gpu("h100-sxm", {"memory.technology": "gddr7", "memory.bus_width_bits": 512})
    both = load_gpu(
        "h100-sxm", {"memory.energy_factor": 2.0, "memory.technology": "gddr7", "memory.bus_width_bits": 512}
    )
    assert both.memory.energy_j_per_bit == pytest.approx(2.0 * swapped.memory.energy_j_per_bit)


def test_human_and_si_units_are_the_same_override() -> None:
    mhz = load_gpu("a100-sxm-80gb", {"clocks.sm_clock_max_mhz": 1500})
    hz = load_gpu("a100-sxm-80gb", {"gpu.clocks.sm_clock_max_hz": 1500 * MHZ})
    assert mhz == hz and mhz.clocks.sm_clock_max_hz == 1500 * MHZ


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"sm.tensor_factor": 0}, "positive"),
        ({"memory.energy_factor": -1}, "positive"),
        ({"memory.data_rate_frac": 1.5}, r"\[0, 1\]"),
        ({"memory.data_rate_frac": 0.5, "memory.data_rate_gbit_per_s": 6}, "not both"),
        ({"sm.tensor_factor": "fast"}, "finite number"),
        ({"sm.tensor_factor": float("nan")}, "finite number"),
        ({"memory.widget": 3}, "unknown field"),
        ({"num_smz": 3}, "unknown field 'num_smz'"),
        ({"sm": 3}, "section, not a field"),
        ({"num_sms": -3}, "num_sms"),
        ({"memory.technology": "hbm3", "memory.data_rate_gbit_per_s": 20}, "outside"),
    ],
)
def test_bad_overrides_are_one_config_error_naming_the_path(overrides: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_gpu("h100-sxm", overrides)


LE, GE, GT = (
    "Input should be less than or equal to",
    "Input should be greater than or equal to",
    "Input should be greater than",
)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"clocks.sm_clock_max_mhz": 9e9}, f"clocks.sm_clock_max_mhz: {LE} 100000 MHz (got 9e+09 MHz)"),
        ({"gpu.clocks.sm_clock_max_ghz": -1}, f"clocks.sm_clock_max_ghz: {GE} 0.001 GHz (got -1 GHz)"),
        ({"l2.l2_mib": -1}, f"l2.l2_mib: {GT} 0 MiB (got -1 MiB)"),
        ({"memory.energy_pj_per_bit": -1}, f"memory.energy_pj_per_bit: {GE} 0.1 pJ/bit (got -1 pJ/bit)"),
        ({"memory.bw_gb_per_s": 1}, "override 'memory.bw_gb_per_s': unknown field"),
        # SI stays SI, and says the value given
        (
            {"clocks.sm_clock_max_hz": 9e15},
            f"clocks.sm_clock_max_hz: {LE} 100000000000 (got 9000000000000000.0)",
        ),
        (
            {"num_sms": "=5"},
            "num_sms: Input should be a valid integer, unable to parse string as an integer (got '=5')",
        ),
    ],
)
def test_an_override_error_says_the_path_and_unit_written(overrides: dict, message: str) -> None:
    """`--set clocks.sm_clock_max_mhz=9e9` was refused as `clocks.sm_clock_max_hz: ... <= 100000000000`: a
    key the user never wrote, in Hz; it is said as a GPU file's error is, in the key and unit written."""
    with pytest.raises(ConfigError, match=re.escape(message) + "($|;)"):
        load_gpu("h100-sxm", overrides)


def test_study_paths_are_checked_with_the_same_vocabulary() -> None:
    gpu = load_gpu("h100-sxm")
    for path in (
        "gpu.num_sms",
        "gpu.memory.technology",
        "gpu.memory.data_rate_frac",
        "gpu.sm.tensor_factor",
        "gpu.clocks.sm_clock_max_mhz",
        "gpu.memory.capacity_per_device_gib",
        "power.tdp_w",
    ):
        assert check_override_path(gpu, path) is None, path
    assert "allowed" in (check_override_path(gpu, "gpu.num_smz") or "")
    assert "tensor_factor" in (check_override_path(gpu, "gpu.sm.tensor_facto") or "")
    assert "section" in (check_override_path(gpu, "gpu.sm") or "")


def test_set_options_parse_yaml_scalars() -> None:
    assert parse_set_options(["gpu.num_sms=144", "memory.technology=gddr7", "sm.tensor_factor=1.5"]) == {
        "gpu.num_sms": 144,
        "memory.technology": "gddr7",
        "sm.tensor_factor": 1.5,
    }
    assert load_gpu("h100-sxm", parse_set_options(["gpu.sm.tensor_factor=2"])).sm.tensor_flop_per_clk[
        "bf16"
    ] == pytest.approx(2 * load_gpu("h100-sxm").sm.tensor_flop_per_clk["bf16"])


def test_every_listed_field_is_an_override_path_that_round_trips() -> None:
    from dse.hardware.overrides import override_fields
    from dse.units import si_key

    gpu = load_gpu("h100-sxm")
    fields = override_fields(gpu)
    paths = {f.path for f in fields}
    assert {"num_sms", "clocks.sm_clock_max_hz", "memory.technology", "sm.tensor_factor"} <= paths
    for f in fields:
        assert check_override_path(gpu, "gpu." + f.path) is None, f.path
        if isinstance(f.value, int | float) and not isinstance(f.value, bool) and f.path != "num_sms":
            assert load_gpu("h100-sxm", {f.path: f.value}) == gpu, f.path  # setting a field to itself
        if f.human_path is not None and isinstance(f.value, int | float):
            factor = si_key(f.human_path.rsplit(".", 1)[-1])[1]
            node = load_gpu("h100-sxm", {f.human_path: f.value / factor}).model_dump()
            for part in f.path.split("."):
                node = node[part]
            assert node == pytest.approx(f.value, rel=1e-12), f.human_path


@pytest.mark.parametrize("value", ["abc", float("nan"), float("inf"), 1.5, True])
def test_memory_system_numbers_are_checked_before_the_memory_is_built(value: object) -> None:
    """A bad bus width named the override (not a ValueError traceback from the memory builder, or a 1.5-bit
    width truncated to 1); a whole float is a width."""
    with pytest.raises(ConfigError, match="memory.bus_width_bits"):
        load_gpu("h100-sxm", {"gpu.memory.bus_width_bits": value})
    assert load_gpu("h100-sxm", {"gpu.memory.bus_width_bits": 5120.0}).memory.bus_width_bits == 5120


def test_a_lower_clock_ceiling_moves_the_clocks_inside_it() -> None:
    """`clocks.sm_clock_max_mhz=1500` alone is a whole what-if: the tensor datasheet clock and the default
    boost (1830 / 1980 MHz on H100) follow it down; set explicitly they are checked, not moved."""
    gpu = load_gpu("h100-sxm", {"clocks.sm_clock_max_mhz": 1500})
    assert gpu.clocks.sm_clock_max_hz == gpu.clocks.sm_clock_tensor_spec_hz == gpu.clocks.boost_clock_hz
    assert gpu.clocks.sm_clock_max_hz == 1500 * MHZ
    kept = load_gpu("h100-sxm", {"clocks.sm_clock_max_mhz": 1500, "clocks.sm_clock_tensor_spec_mhz": 1400})
    assert kept.clocks.sm_clock_tensor_spec_hz == 1400 * MHZ
    with pytest.raises(ConfigError, match="sm_clock_tensor_spec must lie"):
        load_gpu("h100-sxm", {"clocks.sm_clock_max_mhz": 1500, "clocks.sm_clock_tensor_spec_mhz": 1700})


def test_power_tables_must_be_physical() -> None:
    """A TDP at or below the idle power (H100 idles at 120 W at its top clocks), or a TDP of 1e300 W, is
    refused; a GPU file with such tables ran 'feasible' at 7 MW."""
    with pytest.raises(ConfigError, match="not below tdp_w 50"):
        load_gpu("h100-sxm", {"power.tdp_w": 50})
    with pytest.raises(ConfigError, match="tdp_w"):
        load_gpu("h100-sxm", {"power.tdp_w": 1e300})
    assert load_gpu("h100-sxm", {"power.tdp_w": 400}).power.tdp_w == 400
    # a settable floor above the default limit: every prediction failed ("TDP 700 W is not allowed")
    with pytest.raises(ConfigError, match="power_cap_min_w 900 W is above tdp_w 700"):
        load_gpu("h100-sxm", {"power.power_cap_min_w": 900})
    assert load_gpu("h100-sxm", {"power.power_cap_min_w": 700}).power.power_cap_min_w == 700


@pytest.mark.parametrize("name", ["h100-sxm", "a100-sxm-80gb", "rtx-4090"])
def test_gpu_fields_name_the_units_the_gpu_files_write(name: str) -> None:
    """`dse gpu fields` showed `memory.capacity_kib` and `interconnect.latency_ms` (the first unit of each
    kind): each human path it lists is the key the catalog's own YAML file writes."""
    from importlib import resources

    from dse.hardware.overrides import override_fields

    text = resources.files("dse.hardware.data.gpus").joinpath(f"{name}.yaml").read_text(encoding="utf-8")
    written = {line.split(":")[0].strip() for line in text.splitlines() if ":" in line}
    listed = [f.human_path for f in override_fields(load_gpu(name)) if f.human_path and f.value is not None]
    assert listed and all(path.rsplit(".", 1)[-1] in written for path in listed), listed

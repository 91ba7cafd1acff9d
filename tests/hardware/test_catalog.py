"""The GPU catalog against independent datasheet numbers, plus loading and dotted-path overrides."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import ValidationError

from dse.errors import ConfigError
from dse.hardware.catalog import list_gpus, load_gpu
from dse.hardware.memory import build_memory, load_memory_tech
from dse.hardware.overrides import parse_set_options
from dse.hardware.spec import DvfsTable
from dse.units import GB, GIB, MHZ

# Datasheet memory bandwidth, GB/s (decimal). Independent of the catalog's bus width x data rate.
# Sources: shared/reference/hardware-facts.md section 1.4 and the vendor sheets it cites.
DATASHEET_BW_GB_PER_S = {
    "a100-pcie-40gb": 1555,  # NVIDIA A100 datasheet (40GB PCIe)
    "a100-sxm-40gb": 1555,  # NVIDIA A100 datasheet (40GB SXM)
    "a100-pcie-80gb": 1935,  # NVIDIA A100 80GB datasheet (80GB PCIe)
    "a100-sxm-80gb": 2039,  # NVIDIA A100 80GB datasheet
    "h100-sxm": 3350,  # NVIDIA H100 datasheet, "3.35 TB/s"
    "h100-pcie": 2000,  # NVIDIA H100 PCIe product brief PB-11133-001, "2.0 TB/s" [H100-PB]
    "h200-sxm": 4800,  # NVIDIA H200 datasheet, "4.8 TB/s"
    "l40s": 864,  # NVIDIA L40S datasheet [MULLET-L40S]
    "a10": 600,  # NVIDIA A10 datasheet
    "l4": 300,  # NVIDIA L4 datasheet
    "b200": 7700,  # HGX B200, aiconfigurator b200_sxm.yaml citing the Blackwell datasheet [AICONF]
    "rtx-4090": 1008,  # GeForce RTX 4090 spec page
}

# Datasheet dense (no sparsity) BF16 Tensor Core TFLOP/s at the clock the vendor quotes them at.
# Sources: hardware-facts.md section 1.3 (NVIDIA datasheets and whitepapers it cites).
DATASHEET_BF16_DENSE_TFLOP_PER_S = {
    "a100-pcie-40gb": 312,  # A100 datasheet (624 with sparsity)
    "a100-sxm-40gb": 312,
    "a100-pcie-80gb": 312,
    "a100-sxm-80gb": 312,
    "h100-sxm": 989.4,  # H100 whitepaper [H100WP] (1979 with sparsity)
    "h100-pcie": 756,  # H100 whitepaper [H100WP]
    "h200-sxm": 989.4,  # same GH100 compute [LZW-H200]
    "l40s": 362.05,  # L40S datasheet [MULLET-L40S] (733 with sparsity)
    "a10": 125,  # A10 datasheet (250 with sparsity)
    "l4": 121,  # L4 datasheet (242 with sparsity)
    "b200": 2250,  # Blackwell datasheet via [AICONF] (4500 with sparsity)
    "rtx-4090": 165.2,  # Ada whitepaper, FP16/BF16 with FP32 accumulate [WAREDB-4090]
}

# Memory capacity as marketed (GB, used by NVIDIA as binary GiB for these parts).
DATASHEET_CAPACITY_GB = {
    "a100-pcie-40gb": 40,
    "a100-sxm-40gb": 40,
    "a100-pcie-80gb": 80,
    "a100-sxm-80gb": 80,
    "h100-sxm": 80,
    "h100-pcie": 80,
    "h200-sxm": 141,
    "l40s": 48,
    "a10": 24,
    "l4": 24,
    "b200": 180,  # 192 GB raw; 178-180 GiB visible [TORCHAO-4002], [AICONF]
    "rtx-4090": 24,
}

# Memory technology by datasheet.
DATASHEET_TECH = {
    "a100-pcie-40gb": "hbm2",
    "a100-sxm-40gb": "hbm2",
    "a100-pcie-80gb": "hbm2e",
    "a100-sxm-80gb": "hbm2e",
    "h100-sxm": "hbm3",
    "h100-pcie": "hbm2e",
    "h200-sxm": "hbm3e",
    "l40s": "gddr6",
    "a10": "gddr6",
    "l4": "gddr6",
    "b200": "hbm3e",
    "rtx-4090": "gddr6x",
}

# Tensor dtypes each GPU generation supports (CUDA guide): FP8 from Ada/Hopper, FP4 from Blackwell.
EXPECTED_DTYPES = {
    "ampere": {"tf32", "bf16", "fp16", "int8"},
    "ada": {"tf32", "bf16", "fp16", "fp8", "int8"},
    "hopper": {"tf32", "bf16", "fp16", "fp8", "int8"},
    "blackwell": {"tf32", "bf16", "fp16", "fp8", "int8", "fp4"},
}

# GPUs whose idle-power and voltage tables were measured (EnergAIzer artifact; hardware-facts 4.1).
MEASURED_IDLE = {"a100-pcie-40gb", "a100-sxm-80gb", "h100-sxm"}
MEASURED_VOLTAGE = {"a100-pcie-40gb", "a100-sxm-80gb"}

CATALOG = sorted(DATASHEET_BW_GB_PER_S)
H100_YAML = Path(__file__).parents[2] / "dse" / "hardware" / "data" / "gpus" / "h100-sxm.yaml"


def test_list_gpus_has_the_reference_set() -> None:
    assert set(CATALOG) <= set(list_gpus())
    assert len(list_gpus()) >= 10


@pytest.mark.parametrize("name", list_gpus())
def test_every_catalog_gpu_loads(name: str) -> None:
    gpu = load_gpu(name)
    assert gpu.name == name
    assert gpu.num_sms > 0
    assert all(math.isfinite(v) for v in gpu.summary().values() if isinstance(v, float))


@pytest.mark.parametrize("name", CATALOG)
def test_bandwidth_matches_datasheet(name: str) -> None:
    gpu = load_gpu(name)
    assert gpu.memory.bw_bytes_per_s == pytest.approx(DATASHEET_BW_GB_PER_S[name] * GB, rel=0.02)


@pytest.mark.parametrize("name", CATALOG)
def test_dense_bf16_peak_matches_datasheet_at_spec_clock(name: str) -> None:
    gpu = load_gpu(name)
    assert gpu.tensor_peak_flop_per_s("bf16") == pytest.approx(
        DATASHEET_BF16_DENSE_TFLOP_PER_S[name] * 1e12, rel=0.02
    )


@pytest.mark.parametrize("name", CATALOG)
def test_capacity_and_technology_match_datasheet(name: str) -> None:
    gpu = load_gpu(name)
    assert gpu.memory.technology == DATASHEET_TECH[name]
    assert gpu.memory.capacity_bytes == pytest.approx(DATASHEET_CAPACITY_GB[name] * GIB, rel=0.01)


@pytest.mark.parametrize("name", CATALOG)
def test_memory_is_buildable_from_its_technology(name: str) -> None:
    """Each entry's memory must be a legal configuration of its technology, at its default energy per bit."""
    mem = load_gpu(name).memory
    tech = load_memory_tech(mem.technology)
    rebuilt = build_memory(
        mem.technology,
        bus_width_bits=mem.bus_width_bits,
        data_rate_bit_per_s=mem.data_rate_bit_per_s,
        capacity_per_device_bytes=mem.capacity_bytes / mem.num_devices,
    )
    assert rebuilt.num_devices == mem.num_devices
    assert mem.energy_j_per_bit == pytest.approx(tech.energy_j_per_bit)


@pytest.mark.parametrize("name", CATALOG)
def test_tensor_dtypes_follow_the_architecture(name: str) -> None:
    gpu = load_gpu(name)
    assert set(gpu.sm.tensor_flop_per_clk) == EXPECTED_DTYPES[gpu.architecture]
    rates = gpu.sm.tensor_flop_per_clk
    assert rates["tf32"] == pytest.approx(rates["bf16"] / 2)  # TF32 runs at half the BF16 rate everywhere
    assert rates["fp16"] == rates["bf16"]


def test_unsupported_dtype_is_a_key_error() -> None:
    with pytest.raises(KeyError, match="fp8"):
        load_gpu("a100-sxm-80gb").tensor_peak_flop_per_s("fp8")


@pytest.mark.parametrize("name", CATALOG)
def test_power_tables_cover_the_clock_range(name: str) -> None:
    gpu = load_gpu(name)
    step = gpu.clocks.sm_clock_step_hz
    for table in (gpu.power.idle_power_w, gpu.power.core_v):
        assert table.clock_hz[0] <= gpu.clocks.sm_clock_min_hz + step
        assert table.clock_hz[-1] >= gpu.clocks.sm_clock_max_hz - step
    volts = np.asarray(gpu.power.core_v.value)
    assert np.all(np.diff(volts) >= 0)  # voltage never falls with clock
    assert volts.min() > 0.5 and volts.max() < 1.2
    assert gpu.power.idle_power_w.at(gpu.clocks.sm_clock_max_hz) < gpu.power.tdp_w


@pytest.mark.parametrize("name", CATALOG)
def test_table_provenance(name: str) -> None:
    """Only the tables the EnergAIzer artifact measured may say `measured`; the rest must say `estimated`."""
    power = load_gpu(name).power
    assert power.idle_power_w.source == ("measured" if name in MEASURED_IDLE else "estimated")
    assert power.core_v.source == ("measured" if name in MEASURED_VOLTAGE else "estimated")
    for table in (power.idle_power_w, power.core_v):
        if table.source == "estimated":
            assert table.note, "estimated tables must say how they were estimated"


# Max TDP by datasheet (NVIDIA A100 datasheets: 400 W SXM4 either capacity, 250 W 40GB PCIe, 300 W 80GB PCIe).
@pytest.mark.parametrize(
    ("name", "tdp_w"),
    [
        ("a100-sxm-40gb", 400.0),
        ("a100-sxm-80gb", 400.0),
        ("a100-pcie-40gb", 250.0),
        ("a100-pcie-80gb", 300.0),
    ],
)
def test_a100_parts_keep_their_datasheet_tdp(name: str, tdp_w: float) -> None:
    assert load_gpu(name).power.tdp_w == tdp_w


def test_a100_pcie_tables_match_energaizer_yz8_points() -> None:
    """Spot values from hardware-facts.md 4.1 (EnergAIzer yz8 = A100 40GB PCIe)."""
    power = load_gpu("a100-pcie-40gb").power
    assert power.core_v.at(210 * MHZ) == pytest.approx(0.69375)
    assert power.core_v.at(1020 * MHZ) == pytest.approx(0.69375)  # the knee
    assert power.core_v.at(1410 * MHZ) == pytest.approx(0.89375)
    assert power.idle_power_w.at(210 * MHZ) == pytest.approx(44.5, abs=0.1)
    assert power.idle_power_w.at(1020 * MHZ) == pytest.approx(48.6, abs=0.1)
    assert power.idle_power_w.at(1410 * MHZ) == pytest.approx(67.3, abs=0.1)


def test_human_units_become_si() -> None:
    gpu = load_gpu("h100-sxm")
    assert gpu.clocks.sm_clock_max_hz == pytest.approx(1.98e9)
    assert gpu.clocks.sm_clock_tensor_spec_hz == pytest.approx(1.83e9)
    assert gpu.l2.l2_bytes == 52428800  # deviceQuery [THAMADA]
    assert gpu.sm.smem_bytes == 227 * 1024
    assert gpu.memory.energy_j_per_bit == pytest.approx(4.0e-12)


# --- DvfsTable -------------------------------------------------------------------------------------------


def test_dvfs_table_clamps_at_the_ends() -> None:
    table = load_gpu("a100-pcie-40gb").power.core_v
    assert table.at(1.0 * MHZ) == table.value[0]
    assert table.at(5000 * MHZ) == table.value[-1]


@given(st.floats(0, 3e9), st.floats(0, 3e9))
def test_a100_voltage_is_monotone_in_clock(f1: float, f2: float) -> None:
    table = load_gpu("a100-pcie-40gb").power.core_v
    lo, hi = sorted((f1, f2))
    assert table.at(lo) <= table.at(hi)
    assert table.value[0] <= table.at(lo) <= table.value[-1]


@given(st.lists(st.floats(0, 3e9), min_size=1, max_size=20))
def test_dvfs_table_array_equals_scalar(clocks_hz: list[float]) -> None:
    table = load_gpu("a100-sxm-80gb").power.idle_power_w
    out = table.at(np.asarray(clocks_hz))
    assert list(out) == [table.at(f) for f in clocks_hz]


def test_dvfs_table_rejects_bad_tables() -> None:
    with pytest.raises(ValidationError, match="increasing"):
        DvfsTable(source="estimated", clock_hz=(2e9, 1e9), value=(1.0, 2.0))
    with pytest.raises(ValidationError, match="entries"):
        DvfsTable(source="estimated", clock_hz=(1e9, 2e9), value=(1.0,))
    with pytest.raises(ValidationError, match="non-negative"):
        DvfsTable(source="estimated", clock_hz=(1e9,), value=(-1.0,))


# --- immutability ----------------------------------------------------------------------------------------


def test_gpu_spec_is_frozen() -> None:
    gpu = load_gpu("h100-sxm")
    with pytest.raises(ValidationError):
        gpu.num_sms = 1  # type: ignore[misc]
    with pytest.raises(ValidationError):
        gpu.clocks.sm_clock_max_hz = 1.0  # type: ignore[misc]
    assert load_gpu("h100-sxm").num_sms == 132


# --- overrides -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", ["num_sms", "gpu.num_sms"])
def test_override_num_sms(key: str) -> None:
    base = load_gpu("h100-sxm")
    gpu = load_gpu("h100-sxm", {key: 144})
    assert gpu.num_sms == 144
    assert gpu.tensor_peak_flop_per_s("bf16") == pytest.approx(
        base.tensor_peak_flop_per_s("bf16") * 144 / 132
    )
    assert gpu.memory == base.memory


def test_override_clock_in_mhz_is_converted_to_hz() -> None:
    gpu = load_gpu("a100-sxm-80gb", {"clocks.sm_clock_max_mhz": 1500})
    assert gpu.clocks.sm_clock_max_hz == pytest.approx(1.5e9)
    gpu = load_gpu("a100-sxm-80gb", {"gpu.clocks.sm_clock_max_hz": 1.5e9})
    assert gpu.clocks.sm_clock_max_hz == pytest.approx(1.5e9)


def test_override_tensor_spec_clock_above_the_maximum_is_rejected() -> None:
    # H100 quotes tensor peaks at 1830 MHz: a lower ceiling alone moves that clock down with it
    # (tests/hardware/test_overrides.py), a datasheet clock set above the ceiling is refused
    with pytest.raises(ConfigError, match="sm_clock_tensor_spec"):
        load_gpu("h100-sxm", {"clocks.sm_clock_max_mhz": 1500, "clocks.sm_clock_tensor_spec_mhz": 1830})


def test_override_energy_per_bit() -> None:
    gpu = load_gpu("h100-sxm", {"memory.energy_pj_per_bit": 5})
    assert gpu.memory.energy_j_per_bit == pytest.approx(5e-12)
    assert gpu.memory.bw_bytes_per_s == load_gpu("h100-sxm").memory.bw_bytes_per_s


def test_negative_sm_count_is_rejected() -> None:
    with pytest.raises(ConfigError, match="num_sms"):
        load_gpu("h100-sxm", {"num_sms": -4})


def test_unknown_field_lists_valid_names() -> None:
    with pytest.raises(ConfigError, match="num_sms") as err:
        load_gpu("h100-sxm", {"num_smz": 144})
    assert "num_smz" in str(err.value)
    with pytest.raises(ConfigError, match="sm_clock_max_hz"):
        load_gpu("h100-sxm", {"clocks.turbo_mhz": 2000})


def test_unknown_section_lists_valid_sections() -> None:
    with pytest.raises(ConfigError, match="clocks") as err:
        load_gpu("h100-sxm", {"cache.l3_mib": 64})
    assert "memory" in str(err.value)


def test_non_numeric_unit_override_is_rejected() -> None:
    with pytest.raises(ConfigError, match="expected a finite number"):
        load_gpu("h100-sxm", {"clocks.sm_clock_max_mhz": "fast"})


def test_parse_set_options() -> None:
    overrides = parse_set_options(
        ["gpu.num_sms=144", "memory.technology=gddr7", "clocks.sm_clock_max_mhz=1500.5"]
    )
    assert overrides == {"gpu.num_sms": 144, "memory.technology": "gddr7", "clocks.sm_clock_max_mhz": 1500.5}
    assert load_gpu("h100-sxm", parse_set_options(["gpu.num_sms=144"])).num_sms == 144
    assert parse_set_options(None) == {}
    with pytest.raises(ConfigError, match="PATH=VALUE"):
        parse_set_options(["gpu.num_sms"])
    with pytest.raises(ConfigError, match="PATH=VALUE"):
        parse_set_options(["=3"])


# --- files -----------------------------------------------------------------------------------------------


def test_load_from_yaml_path(tmp_path: Path) -> None:
    path = tmp_path / "h100-cut.yaml"
    path.write_text(H100_YAML.read_text().replace("num_sms: 132", "num_sms: 114"))
    gpu = load_gpu(path)
    assert gpu.name == "h100-cut"
    assert gpu.num_sms == 114
    assert load_gpu(str(path), {"num_sms": 120}).num_sms == 120


def test_a_gpu_file_edited_between_loads_is_read_again(tmp_path: Path) -> None:
    # a study loads its GPU file for every point, so the parsed file is cached: by content, so an edit within
    # the file system's timestamp granularity (same size, same mtime) is still seen
    path = tmp_path / "mine.yaml"
    path.write_text(H100_YAML.read_text().replace("num_sms: 132", "num_sms: 114"))
    assert load_gpu(path).num_sms == 114
    path.write_text(H100_YAML.read_text().replace("num_sms: 132", "num_sms: 115"))
    assert load_gpu(path).num_sms == 115
    path.write_text("num_sms: [")
    with pytest.raises(ConfigError, match="mine.yaml"):
        load_gpu(path)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_gpu(tmp_path / "nope.yaml")


def test_malformed_yaml_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("num_sms: [132\nclocks: {")
    with pytest.raises(ConfigError, match=r"bad\.yaml:\d+: invalid YAML"):
        load_gpu(path)


def test_yaml_that_is_not_a_mapping_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "list.yaml"
    path.write_text("- 1\n- 2\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_gpu(path)


def test_invalid_entry_names_the_file_and_field(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text(H100_YAML.read_text().replace("num_sms: 132", "num_sms: 132\nwarp_size: 32"))
    with pytest.raises(ConfigError, match=r"broken\.yaml.*warp_size"):
        load_gpu(path)


def test_unknown_gpu_name_lists_the_catalog() -> None:
    with pytest.raises(ConfigError, match="h100-sxm"):
        load_gpu("h900")


def test_catalog_names_are_canonicalised() -> None:
    assert load_gpu("H100_SXM").name == "h100-sxm"


def test_a_gpu_file_error_names_its_line(tmp_path) -> None:  # noqa: ANN001
    """A user's GPU file is a YAML file like a study: its errors say `file:line: field: message` (they named
    the file only)."""
    from importlib import resources

    text = resources.files("dse.hardware").joinpath("data/gpus/h100-sxm.yaml").read_text(encoding="utf-8")
    lines = text.splitlines()
    row = next(i for i, line in enumerate(lines) if line.startswith("num_sms:"))
    lines[row] = "num_sms: 0"
    path = tmp_path / "mine.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"mine\.yaml:{row + 1}: num_sms: Input should be greater than 0"):
        load_gpu(path)


def test_an_unknown_memory_technology_is_refused_at_load(tmp_path: Path) -> None:
    """`hbm99` loaded, then every prediction failed with "no $/GB for memory 'hbm99'", naming neither the
    file nor the field (a fuzzer's finding); `--set gpu.memory.technology=...` is checked the same way."""
    path = tmp_path / "tech.yaml"
    path.write_text(H100_YAML.read_text().replace("technology: hbm3", "technology: hbm99"))
    with pytest.raises(ConfigError, match=r"tech\.yaml:\d+: memory\.technology: unknown memory technology"):
        load_gpu(path)
    with pytest.raises(ConfigError, match="unknown memory technology 'hbm99'"):
        load_gpu("h100-sxm", {"memory.technology": "hbm99"})


def _edited_h100(tmp_path: Path, name: str, old: str, new: str) -> tuple[Path, int]:
    """The catalog H100 file with `old` replaced by `new` once, and the 1-based line of the edit."""
    text = H100_YAML.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path = tmp_path / name
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path, text[: text.index(old)].count("\n") + 1


def test_a_quoted_number_in_a_unit_key_is_refused_by_its_own_name(tmp_path: Path) -> None:
    """`sm_clock_max_mhz: "1980"` used to reach the Hz field unscaled and fail as 1980 Hz, under a key the
    file does not contain; it is named with its file and line, as the file's other errors are."""
    path, line = _edited_h100(tmp_path, "quoted.yaml", "sm_clock_max_mhz: 1980", 'sm_clock_max_mhz: "1980"')
    message = rf"quoted\.yaml:{line}: clocks\.sm_clock_max_mhz: must be numbers in MHz .*not the text '1980'"
    with pytest.raises(ConfigError, match=message) as err:
        load_gpu(str(path))
    assert "_hz" not in str(err.value)
    # a text inside a list under a unit key (the V-f table's clocks) likewise, at the line of the entry
    listed, line = _edited_h100(tmp_path, "listed.yaml", "clock_mhz: [345, 1140", 'clock_mhz: ["345", 1140')
    with pytest.raises(
        ConfigError, match=rf"listed\.yaml:{line}: power\.core_v\.clock_mhz\.0: must be numbers"
    ):
        load_gpu(str(listed))


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        # it was 9e15 Hz against 1e11 Hz, under `clocks.sm_clock_max_hz` at the line of `clocks:`
        ("sm_clock_max_mhz: 1980 ", "sm_clock_max_mhz: 9e9 ",
         r"clocks\.sm_clock_max_mhz: Input should be less than or equal to 100000 MHz \(got 9e\+09 MHz\)$"),
        ("latency_us: 10 ", "latency_us: -3 ",
         r"interconnect\.latency_us: Input should be greater than 0 us \(got -3 us\)$"),
        ("sm_clock_max_mhz: 1980 ", "sm_clock_max_mhz: [1980]",
         r"clocks\.sm_clock_max_mhz: Input should be a valid number \(got \[1980\.0\]\)$"),
        ("l2_mib: 50 ", "l2_mib: 50\n  l2_bytes: 5",  # the second spelling, on the next line
         r"l2\.l2_bytes: gives 'l2_bytes' a second time \(also given as 'l2_mib'\)$"),
    ],
)  # fmt: skip
def test_a_unit_key_error_names_its_line_and_its_unit(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    """An error on a field the file wrote in a human unit names that key, its line and the value in its unit
    (it named `clocks.sm_clock_max_hz` at the line of `clocks:`, in Hz, or the file without a line)."""
    path, line = _edited_h100(tmp_path, "unit.yaml", old, new)
    line += new.count("\n")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}:{line}: {message}") as err:
        load_gpu(str(path))
    assert "_hz" not in str(err.value)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("clock_mhz: [345, 1140, 1875, 1980]", "clock_mhz: [345, 1140, 1140, 1980]",
         r"power\.core_v: clock_mhz must be strictly increasing$"),
        ("clock_mhz: [345, 1140, 1875, 1980]", "clock_mhz: [345, 1140, 1980]",
         r"power\.core_v: clock_mhz has 3 entries but value has 4$"),
        # a table written in SI keeps its key
        ("clock_mhz: [345, 1140, 1875, 1980]", "clock_hz: [345e6, 1140e6, 1140e6, 1980e6]",
         r"power\.core_v: clock_hz must be strictly increasing$"),
    ],
)  # fmt: skip
def test_a_table_check_names_the_clock_key_the_file_wrote(
    tmp_path: Path, old: str, new: str, message: str
) -> None:
    """A V-f table with `clock_mhz: [...]` out of order was refused as `clock_hz must be strictly increasing`,
    a key the file does not contain."""
    path, _ = _edited_h100(tmp_path, "table.yaml", old, new)
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}:\d+: {message}"):
        load_gpu(str(path))


@pytest.mark.parametrize(
    ("old", "message"),
    [
        ("  sm_clock_max_mhz: 1980 ", r"clocks\.sm_clock_max_mhz \(or sm_clock_max_hz\): "),
        ("    clock_mhz: [345, 1140", r"power\.core_v\.clock_mhz \(or clock_hz\): "),
        ("  l2_mib: 50 ", r"l2\.l2_mib \(or l2_bytes\): "),
        ("  tdp_w: 700 ", r"power\.tdp_w: "),  # no unit in its name: as it is
    ],
)  # fmt: skip
def test_a_missing_unit_key_is_named_as_gpu_files_write_it(tmp_path: Path, old: str, message: str) -> None:
    """A file without `sm_clock_max_mhz` was told `clocks.sm_clock_max_hz: required key is missing`: the
    spelling GPU files use comes first, the SI one beside it (either is accepted), on one line."""
    text = H100_YAML.read_text(encoding="utf-8")
    line = next(i for i in text.splitlines() if i.startswith(old))
    path = tmp_path / "missing.yaml"
    path.write_text(text.replace(line + "\n", ""), encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{re.escape(str(path))}:\d+: {message}required key is missing$"):
        load_gpu(str(path))


def test_a_bare_catalog_name_is_the_catalog_gpu_beside_a_file_of_that_name(tmp_path, monkeypatch) -> None:
    """A newcomer's extension-less file `h100-sxm` in the working directory replaced the catalog H100 (and
    every price read from it); a bare catalog name now names the catalog, and ./h100-sxm the file."""
    from importlib import resources

    text = (resources.files("dse.hardware") / "data/gpus/h100-sxm.yaml").read_text(encoding="utf-8")
    # 140 of the die's 144 SMs (a file enabling more than its die has is refused)
    (tmp_path / "h100-sxm").write_text(text.replace("num_sms: 132 ", "num_sms: 140 "), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    assert load_gpu("h100-sxm").num_sms == 132
    assert load_gpu("H100_SXM").num_sms == 132
    assert load_gpu("./h100-sxm").num_sms == 140


def test_every_catalog_memory_keeps_its_technologys_rules() -> None:
    """Real products: bus width a multiple of the device interface, data rate in the technology's range,
    one device per interface (two per 32-bit channel in GDDR's clamshell mode: A40, RTX 3090)."""
    from dse.hardware.catalog import list_gpus
    from dse.hardware.memory import memory_problem

    assert [n for n in list_gpus() if memory_problem(load_gpu(n).memory)] == []


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        ("data_rate_gbit_per_s: 5.238 ", "data_rate_gbit_per_s: 5238 ", r":35: memory\.data_rate.*3\.2-6\.4"),
        ("bus_width_bits: 5120 ", "bus_width_bits: 640 ", r"memory\.bus_width_bits: .*multiple of the 1024"),
        ("num_devices: 5", "num_devices: 7", r"memory\.num_devices: hbm3: 7 devices .*expected 5"),
        ("energy_pj_per_bit: 4.0 ", "energy_pj_per_bit: 4e-12 ", r"memory\.energy_pj_per_bit: .*0\.1 pJ/bit"),
    ],
)
def test_a_gpu_files_memory_is_held_to_the_rules_set_applies(tmp_path, old, new, needle) -> None:
    """A newcomer's GPU files took 5238 Gb/s (HBM3's 5.238 in the wrong unit), a 640-bit HBM bus, 7 stacks on
    a 5-stack bus and 4e-12 under the pJ key, all of which `--set memory.*` refuses."""
    from importlib import resources

    text = (resources.files("dse.hardware") / "data/gpus/h100-sxm.yaml").read_text(encoding="utf-8")
    assert text.count(old) == 1
    path = tmp_path / "mine.yaml"
    path.write_text(text.replace(old, new), encoding="utf-8")
    with pytest.raises(ConfigError, match=needle):
        load_gpu(path)

"""A GPU's `die` against what the GPU enables: checked where the spec is loaded, grown by what-ifs.

Findings of session 35: a GPU file with fewer physical SMs than enabled ones, an L2 or memory interface
smaller than the enabled one, or NVLinks too few for the link bandwidth was priced without a word, and an
unknown process node failed only later, at every point of a study.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from dse.errors import ConfigError
from dse.hardware.catalog import list_gpus, load_gpu
from tests.cli.fuzz_helpers import refused

H100_YAML = Path(__file__).parents[2] / "dse" / "hardware" / "data" / "gpus" / "h100-sxm.yaml"


def _edited_h100(tmp_path: Path, old: str, new: str) -> tuple[Path, int]:
    """The catalog H100 file with `old` replaced by `new` once, and the 1-based line of the edit."""
    text = H100_YAML.read_text(encoding="utf-8")
    assert text.count(old) == 1, old
    path = tmp_path / "mine.yaml"
    path.write_text(text.replace(old, new), encoding="utf-8")
    return path, text[: text.index(old)].count("\n") + 1


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # the H100 enables 132 SMs, 50 MiB of L2, a 5120-bit bus and 450 GB/s of NVLink (file values)
        ("num_sms_physical: 144", "num_sms_physical: 100", r"die\.num_sms_physical: 100 SMs .*132 enabled"),
        ("l2_physical_mib: 60", "l2_physical_mib: 1", r"die\.l2_physical_mib: 1 MiB of L2 .*50 MiB enabled"),
        ("memory_phy_bits: 6144", "memory_phy_bits: 64", r"die\.memory_phy_bits: a 64-bit .*5120-bit bus"),
        # 9 links at NVLink 4's 25 GB/s a direction carry 225 of the 450 GB/s: 18 links are needed
        (
            "num_nvlinks: 18 ",
            "num_nvlinks: 9 ",
            r"die\.num_nvlinks: 9 NVLinks .* 225 GB/s .* 450: .* 18 links",
        ),
        (
            "process_node: tsmc-4n",
            "process_node: tsmc-0.1n",
            r"die\.process_node: unknown process node 'tsmc-0\.1n'; known: .*tsmc-4n",
        ),
    ],
)
def test_a_gpu_file_whose_die_contradicts_the_gpu_is_refused_at_its_line(
    tmp_path: Path, old: str, new: str, needle: str
) -> None:
    path, line = _edited_h100(tmp_path, old, new)
    with pytest.raises(ConfigError, match=rf"mine\.yaml:{line}: {needle}"):
        load_gpu(path)


def test_a_study_over_a_gpu_file_with_an_unknown_node_stops_at_load(tmp_path: Path) -> None:
    """Every point of a study failed with the node's error and the run exited 1 ("input was fine");
    `dse gpu show` passed it with exit 0."""
    path, line = _edited_h100(tmp_path, "process_node: tsmc-4n", "process_node: tsmc-0.1n")
    refused(["gpu", "show", str(path)], f"mine.yaml:{line}: die.process_node: unknown process node")


@pytest.mark.parametrize(
    ("overrides", "needle"),
    [
        ({"die.num_sms_physical": 100}, r"'die\.num_sms_physical': 100 SMs on the die, fewer than the 132"),
        ({"gpu.die.l2_physical_mib": 10}, r"'die\.l2_physical_mib': 10 MiB of L2 .* 50 MiB enabled"),
        ({"die.memory_phy_bits": 4096}, r"'die\.memory_phy_bits': a 4096-bit .* 5120-bit bus"),
        # the die named smaller than an enabled count raised beside it
        ({"num_sms": 200, "die.num_sms_physical": 144}, r"144 SMs on the die, fewer than the 200 enabled"),
        # 1800 GB/s at 25 GB/s a link takes 72 NVLinks; half the H100's 18 carry 225 of its 450
        (
            {"interconnect.link_bw_gb_per_s": 1800, "die.num_nvlinks": 0},
            r"'die\.num_nvlinks': 0 NVLinks .* 0 GB/s a direction, less than interconnect\.link_bw_gb_per_s "
            r"1800: that takes 72 links",
        ),
        ({"die.num_nvlinks": 9}, r"9 NVLinks .* carry 225 GB/s a direction, .* 450: that takes 18 links"),
    ],
)
def test_a_set_that_makes_the_die_smaller_than_the_gpu_is_refused(overrides: dict, needle: str) -> None:
    with pytest.raises(ConfigError, match=needle):
        load_gpu("h100-sxm", overrides)


def test_the_refusal_is_one_line_and_exit_code_2() -> None:
    out = refused(
        [
            "gpu",
            "show",
            "h100-sxm",
            "--set",
            "interconnect.link_bw_gb_per_s=1800",
            "--set",
            "die.num_nvlinks=0",
        ],
        "die.num_nvlinks",
        "interconnect.link_bw_gb_per_s",
    )
    assert len(out.strip().splitlines()) == 1, out


@pytest.mark.parametrize(
    "overrides",
    [
        {"num_sms": 200},  # enabling more than the die has grows the die (README, what-ifs)
        {"l2.l2_mib": 200},
        {"interconnect.link_bw_gb_per_s": 1800},
        {"num_sms": 66, "die.num_sms_physical": 72},  # a smaller die, all of it described
        {"die.num_nvlinks": 36, "interconnect.link_bw_gb_per_s": 900},
        {"die.num_nvlinks": 3, "interconnect.link_bw_gb_per_s": 64},
        {"memory.bus_width_bits": 8192},  # a rebuilt memory system has a PHY for every bit
    ],
)
def test_what_ifs_that_enable_more_or_describe_the_whole_die_load(overrides: dict) -> None:
    gpu = load_gpu("h100-sxm", overrides)
    # the die the cost model sizes holds everything enabled
    assert gpu.num_sms_physical() >= gpu.num_sms and gpu.l2_physical_bytes() >= gpu.l2.l2_bytes
    assert gpu.memory_phy_bits() >= gpu.memory.bus_width_bits
    assert gpu.interconnect is not None
    assert gpu.num_nvlinks_physical() * 25e9 >= gpu.interconnect.link_bw_bytes_per_s


@pytest.mark.parametrize("name", list_gpus())
def test_every_catalog_die_carries_its_gpu_and_its_links_its_bandwidth(name: str) -> None:
    """The catalog's link counts carry its bandwidths at the generation's per-link rate (hardware-facts 1.5:
    V100 6 x 25 GB/s, A100 12 x 25, H100/H200 18 x 25, B200 18 x 50), so the links the area model sizes
    from the bandwidth are the die's own and no published area moves."""
    gpu = load_gpu(name)
    assert gpu.die is not None and gpu.die_problem() is None
    assert gpu.num_nvlinks_physical() == gpu.die.num_nvlinks
    expected = {"v100-sxm2": 6, "a100-sxm-40gb": 12, "a100-sxm-80gb": 12, "h100-sxm": 18, "h200-sxm": 18}
    expected["b200"] = 18
    if name in expected:
        assert gpu.nvlinks_needed() == expected[name]


def test_a_die_phy_width_set_beside_a_rebuilt_memory_is_kept_and_checked() -> None:
    # review: `die.memory_phy_bits=8192` with a 4096-bit HBM3 rebuild was dropped without a word (the
    # rebuild clears the die's spare PHY sites); a die field an override sets is honoured or refused
    rebuilt = {"memory.technology": "hbm3", "memory.bus_width_bits": 4096}
    wide = load_gpu("h100-sxm", {**rebuilt, "die.memory_phy_bits": 8192})
    assert wide.die is not None and wide.die.memory_phy_bits == 8192
    plain = load_gpu("h100-sxm", rebuilt)
    assert plain.die is not None and plain.die.memory_phy_bits is None  # every PHY enabled: the bus's width
    with pytest.raises(ConfigError, match="narrower than the 4096-bit bus"):
        load_gpu("h100-sxm", {**rebuilt, "die.memory_phy_bits": 2048})


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("die.published_area_mm2", 1e-300),
        ("die.published_area_mm2", 1e300),
        ("die.num_sms_physical", 10**9),
        ("die.memory_phy_bits", 10**12),
        ("die.num_nvlinks", 10**9),
        ("die.pcie_lanes", 10**9),
    ],
)
def test_die_fields_are_bounded_like_every_gpu_field(field: str, value: float) -> None:
    # a fuzzer's finding: a 1e-300 mm² die was priced (exit 0), a 1e9-SM die reported "not priced: does not
    # fit on a wafer"; README bounds GPU fields ~1000x past any GPU
    with pytest.raises(ConfigError, match=field.split(".")[1]):
        load_gpu("h100-sxm", {field: value})

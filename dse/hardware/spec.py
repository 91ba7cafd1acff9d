"""Hardware description: `GpuSpec` and its parts, immutable and SI inside.

GPU YAML files (`dse/hardware/data/gpus/*.yaml`) may use human units in their keys (`sm_clock_max_mhz`,
`l2_mib`, `data_rate_gbit_per_s`); `dse.units.normalize_unit_keys` converts them to the SI fields below
before validation. Derived quantities (memory bandwidth, peak rates) are properties, never stored twice.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from functools import cache
from importlib import resources
from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from dse.config.yamlio import parse_yaml_value

TensorDtype = Literal["tf32", "bf16", "fp16", "fp8", "int8", "fp4"]
Provenance = Literal["measured", "datasheet", "derived", "estimated"]


class _Frozen(BaseModel):
    # allow_inf_nan=False: `.inf` / `.nan` in a GPU file or an override is a field error, not a silent NaN.
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _no_bool_numbers(cls, value: object) -> object:
        # YAML's true/false would pass as 1/0 (`--set num_sms=true` gave 1 SM); no field here is a flag
        if isinstance(value, bool):
            raise ValueError("must be a number, not true/false")
        return value


# SM supply voltages a V-f table may hold (`PowerSpec.core_v`): past them a value is no core voltage.
CORE_V_MIN_V, CORE_V_MAX_V = 0.3, 2.0


class DvfsTable(_Frozen):
    """A quantity tabulated against SM clock, linearly interpolated and clamped at the ends (a GPU's V-f
    table first reaches its top clock: `GpuSpec._vf_reaches_max_clock`)."""

    source: Provenance
    note: str = ""
    clock_hz: tuple[float, ...] = Field(min_length=1)
    value: tuple[float, ...] = Field(min_length=1)

    @model_validator(mode="after")
    def _check(self) -> DvfsTable:
        if len(self.clock_hz) != len(self.value):
            raise ValueError(f"clock_hz has {len(self.clock_hz)} entries but value has {len(self.value)}")
        if any(b <= a for a, b in zip(self.clock_hz, self.clock_hz[1:], strict=False)):
            raise ValueError("clock_hz must be strictly increasing")
        if any(v < 0 for v in self.value):
            raise ValueError("values must be non-negative")
        return self

    def at(self, sm_clock_hz: float | np.ndarray) -> float | np.ndarray:
        """Interpolated value at one clock or an array of clocks."""
        out = np.interp(sm_clock_hz, self.clock_hz, self.value)
        return float(out) if np.ndim(out) == 0 else out

    def ridge_slope(self) -> float:
        """The steepest rise of the table per Hz (0 for a flat one): the slope of a V-f ridge model, constant
        voltage below a ridge clock and linear above it (hardware-facts 4.1, Kernel Tuner's model)."""
        if len(self.clock_hz) < 2:
            return 0.0
        return max(0.0, float(np.max(np.diff(self.value) / np.diff(self.clock_hz))))

    def extended_along_ridge(self, sm_clock_hz: float) -> DvfsTable:
        """The table reaching `sm_clock_hz`: one more point, its last value raised along `ridge_slope`."""
        end_hz = self.clock_hz[-1]
        if sm_clock_hz <= end_hz:
            return self
        value = self.value[-1] + self.ridge_slope() * (sm_clock_hz - end_hz)
        note = f"{self.note}; " if self.note else ""
        return self.model_copy(
            update={
                "clock_hz": (*self.clock_hz, sm_clock_hz),
                "value": (*self.value, value),
                "note": f"{note}{end_hz / 1e6:g}-{sm_clock_hz / 1e6:g} MHz extrapolated along the ridge",
            }
        )


class ClockSpec(_Frozen):
    """SM clocks. Tensor peaks are quoted at `sm_clock_tensor_spec_hz`, often below the maximum."""

    # Bounds here and below are ~1000x past any GPU: past them a value is a typo, and the model's arithmetic
    # (peak rates, link times, energies) would overflow to inf or nan.
    sm_clock_min_hz: float = Field(ge=1e6, le=1e11)
    sm_clock_max_hz: float = Field(ge=1e6, le=1e11)
    sm_clock_tensor_spec_hz: float = Field(ge=1e6, le=1e11)
    sm_clock_default_hz: float | None = Field(default=None, ge=1e6, le=1e11)
    # >= 1 MHz (NVIDIA's tables step 7.5-15 MHz): a 1e-300 Hz step made a clock grid of 1e308 points
    sm_clock_step_hz: float = Field(default=15e6, ge=1e6, le=1e11)

    @model_validator(mode="after")
    def _check(self) -> ClockSpec:
        if not self.sm_clock_min_hz <= self.sm_clock_max_hz:
            raise ValueError("sm_clock_min must not exceed sm_clock_max")
        if not self.sm_clock_min_hz <= self.sm_clock_tensor_spec_hz <= self.sm_clock_max_hz:
            raise ValueError("sm_clock_tensor_spec must lie between sm_clock_min and sm_clock_max")
        default = self.sm_clock_default_hz
        if default is not None and not self.sm_clock_min_hz <= default <= self.sm_clock_max_hz:
            raise ValueError("sm_clock_default must lie between sm_clock_min and sm_clock_max")
        return self

    @property
    def boost_clock_hz(self) -> float:
        """The clock the GPU runs at by default under load, before any power-cap throttling."""
        return self.sm_clock_default_hz or self.sm_clock_max_hz


class SmSpec(_Frozen):
    """Per-SM, per-clock rates and occupancy limits."""

    tensor_flop_per_clk: dict[TensorDtype, float] = Field(
        description="dense Tensor Core FLOP per clock per SM, by input dtype (tf32 = fp32 on tensor cores)"
    )
    # Rates per clock are >= 1 (the catalog's least is 16): 1e-300 overflowed times and energies to inf.
    fp32_flop_per_clk: float = Field(
        ge=1, le=1e6, description="CUDA-core FP32 FLOP per clock per SM (FMA = 2)"
    )
    fp64_flop_per_clk: float = Field(
        default=0.0, ge=0, le=1e6, description="FP64 FLOP per clock per SM (FMA = 2); sizes the SM's area"
    )
    sfu_op_per_clk: float = Field(
        ge=1, le=1e5, description="special-function (exp, rsqrt) ops per clock per SM"
    )
    smem_bytes_per_clk: float = Field(ge=1, le=1e6, description="shared-memory bandwidth per SM")
    smem_bytes: float = Field(gt=0, le=1e9, description="max shared memory per SM usable by threadblocks")
    registers: int = Field(gt=0, le=2**31 - 1, description="32-bit registers per SM")
    max_threads: int = Field(gt=0, le=2**31 - 1)
    max_threadblocks: int = Field(gt=0, le=2**20)

    @field_validator("tensor_flop_per_clk")
    @classmethod
    def _positive(cls, rates: dict[str, float]) -> dict[str, float]:
        bad = [k for k, v in rates.items() if not v >= 1]
        if bad:
            raise ValueError(f"tensor rates must be at least 1 (leave a dtype out if unsupported): {bad}")
        huge = [k for k, v in rates.items() if v > 1e7]
        if huge:
            raise ValueError(f"tensor rates are FLOP per clock per SM, at most 1e7 (B200 fp4: 32768): {huge}")
        # The power model's Tensor-Core peak is the 16-bit rate (bf16, else fp16): without one every
        # kernel's Tensor utilization would be 0/0.
        if "bf16" not in rates and "fp16" not in rates:
            raise ValueError(
                "needs a 16-bit Tensor-Core rate (bf16 or fp16): GPUs without Tensor Cores (before Volta) "
                f"are not modelled (has: {sorted(rates) or 'none'})"
            )
        return rates


class L2Spec(_Frozen):
    l2_bytes: float = Field(gt=0, le=1e12)
    l2_bytes_per_clk: float = Field(ge=1, le=1e8, description="whole-chip L2 bandwidth per SM clock")


class MemorySpec(_Frozen):
    """Off-chip DRAM. Bandwidth is derived: bus width x per-pin data rate / 8."""

    technology: str
    bus_width_bits: int = Field(gt=0, le=10**6)
    data_rate_bit_per_s: float = Field(gt=0, le=1e13, description="per-pin data rate")
    capacity_bytes: float = Field(gt=0, le=1e16)
    # 0.1 pJ/bit is below any DRAM interface (HBM's 3-4, GDDR's 5-8): under it, a unit slip (4e-12 written
    # under the pJ key)
    energy_j_per_bit: float = Field(ge=1e-13, le=1e-8, description="DRAM access + I/O energy per bit moved")
    num_devices: int = Field(gt=0, le=10**4, description="HBM stacks or GDDR devices")

    @field_validator("technology")
    @classmethod
    def _known_technology(cls, value: str) -> str:
        # the cost ledger prices memory by technology and the area model sizes its PHYs by it: an unknown
        # one loaded, then failed every prediction with an error naming neither the file nor the field
        from dse.hardware.memory import list_memory_technologies  # lazy: memory.py builds on this module

        return _one_of(value, list_memory_technologies(), "memory technology")

    @property
    def bw_bytes_per_s(self) -> float:
        return self.bus_width_bits * self.data_rate_bit_per_s / 8.0


class PowerSpec(_Frozen):
    tdp_w: float = Field(gt=0, le=1e5, description="default power limit (board power)")
    power_cap_min_w: float | None = Field(default=None, gt=0)
    idle_power_w: DvfsTable = Field(description="board power with no work, against SM clock")
    core_v: DvfsTable = Field(description="SM supply voltage against SM clock")

    @model_validator(mode="after")
    def _check(self) -> PowerSpec:
        if max(self.idle_power_w.value) >= self.tdp_w:
            raise ValueError(
                f"idle_power_w reaches {max(self.idle_power_w.value):g} W, not below tdp_w {self.tdp_w:g}"
            )
        if not all(CORE_V_MIN_V <= v <= CORE_V_MAX_V for v in self.core_v.value):
            raise ValueError(f"core_v values must be SM supply voltages, {CORE_V_MIN_V}-{CORE_V_MAX_V} V")
        if any(b < a for a, b in zip(self.core_v.value, self.core_v.value[1:], strict=False)):
            # a higher clock needs at least the voltage of a lower one (a falling table made low clocks dear)
            raise ValueError("core_v values must not fall as the clock rises")
        if self.power_cap_min_w is not None and self.power_cap_min_w > self.tdp_w:
            # the default limit is the TDP: no prediction could run at it (every one failed)
            raise ValueError(f"power_cap_min_w {self.power_cap_min_w:g} W is above tdp_w {self.tdp_w:g}")
        return self


Topology = Literal["nvswitch", "ring", "pcie"]
# NVIDIA GPU generations a spec may name. `dse.perf.coeffs` gives each its fitted sets or the nearest
# generation's; Pascal, Volta and Turing run the neutral analytical model. A name outside the list is a typo
# ("hoper" ran the neutral model without a word); a future GPU names the generation whose kernels, sets and
# network it should borrow (a Rubin what-if: blackwell).
ARCHITECTURES = ("pascal", "volta", "turing", "ampere", "ada", "lovelace", "hopper", "blackwell")


NVLINK_TOPOLOGIES: tuple[Topology, ...] = ("nvswitch", "ring")
# Per-direction bandwidth of one NVLink (hardware-facts 1.5): NVLink 2 (V100: 6 links, 150 GB/s a
# direction [V100-WP]), 3 (A100: 12 links, 600 GB/s both ways) and 4 (H100: 18 links, 900 GB/s both ways)
# carry 25 GB/s a link, NVLink 5 (B200: 1.8 TB/s both ways over 18 links) 50. An architecture without NVLink
# (Ada) is sized at 25, its generation's rate (Hopper's NVLink 4); Pascal's NVLink 1 (20) is not told apart.
NVLINK_BYTES_PER_S_PER_LINK: dict[str, float] = {"blackwell": 50e9}
NVLINK_DEFAULT_BYTES_PER_S_PER_LINK = 25e9


class InterconnectSpec(_Frozen):
    """GPU-to-GPU link of one GPU inside a node: what collectives (`dse.perf.collectives`) run over.

    `nvswitch`: every GPU reaches every other at its full link rate (NVLink through NVSwitch).
    `ring`: direct links to neighbours only (NVLink bridges); all-to-all is limited by the bisection.
    `pcie`: GPUs talk over PCIe through a switch or the host (a ring of PCIe hops for NCCL rings).
    Intra-node only: the network between nodes (InfiniBand, Ethernet) is not described yet.
    """

    topology: Topology
    link_bw_bytes_per_s: float = Field(
        ge=1e6, le=1e16, description="per GPU, per direction, all links together"
    )
    latency_s: float = Field(gt=0, le=1.0, description="one GPU-to-GPU message, small payload")
    energy_j_per_bit: float = Field(
        gt=0, le=1e-8, description="link energy per bit on the wire (SerDes, both ends)"
    )


@cache
def list_process_nodes() -> list[str]:
    """The foundry nodes a die may name: those the cost facts price (`nodes` of cost/data/cost_facts.yaml)."""
    # Read as data: the cost layer owning the file sits above this one (importing it would invert the layers).
    text = resources.files("dse").joinpath("cost/data/cost_facts.yaml").read_text(encoding="utf-8")
    return sorted(parse_yaml_value(text, "cost_facts.yaml").get("nodes") or {})


class DieSpec(_Frozen):
    """The silicon behind the enabled units: what die area and build cost (`dse.cost`) are computed from.

    Products harvest dies (H100 SXM enables 132 of 144 SMs, 50 of 60 MB L2, 5 of 6 HBM sites), so the
    physical counts are facts of their own, never below what the GPU enables (`GpuSpec.die_problem`). A
    what-if that enables more than the die has grows the die to exactly what is enabled
    (`GpuSpec.*_physical`). A rebuilt memory system (`dse.hardware.memory.with_memory`) has every PHY enabled,
    so it drops `memory_phy_bits` (unless the same override sets it). Bounds, as elsewhere, lie ~1000x past
    any die: past them a value is a typo (a 1e-300 mm² die was priced).
    """

    process_node: str = Field(
        min_length=1, description="foundry node, a key of dse/cost/data/cost_facts.yaml"
    )
    num_dies: int = Field(default=1, gt=0, le=1000, description="compute dies in the package (B200: 2)")
    num_sms_physical: int | None = Field(
        default=None, gt=0, le=10**6, description="SMs on all dies, enabled or not"
    )
    l2_physical_bytes: float | None = Field(default=None, gt=0, le=1e12, description="L2 SRAM on all dies")
    memory_phy_bits: int | None = Field(
        default=None, gt=0, le=10**6, description="DRAM interface width on the dies"
    )
    num_nvlinks: int | None = Field(
        default=None,
        ge=0,
        le=10**4,
        description="NVLink links (PHYs) on all dies; null: those the link bandwidth needs",
    )
    pcie_lanes: int = Field(default=16, ge=0, le=10**4)
    published_area_mm2: float | None = Field(
        default=None, ge=1.0, le=1e6, description="published area of all dies; null where unpublished (B200)"
    )

    @field_validator("process_node")
    @classmethod
    def _known_node(cls, value: str) -> str:
        # the area and cost ledgers read the node's densities and wafer price: an unknown one loaded, then
        # failed every prediction (a whole study's points) with an error naming neither the file nor the line
        return _one_of(value, list_process_nodes(), "process node")


def _one_of(value: str, known: Sequence[str], what: str) -> str:
    """`value` if it is one of `known`, else the ValueError a field validator raises, naming them."""
    if value not in known:
        raise ValueError(f"unknown {what} '{value}'; known: {', '.join(known)}")
    return value


class GpuSpec(_Frozen):
    """One GPU, catalog entry plus any overrides, SI units."""

    name: str
    display_name: str
    based_on: str | None = Field(
        default=None,
        description="the catalog GPU this one is a variant of (a user's file): priced and sized from that "
        "GPU's published price and die area, moved by the modelled difference; found at load time for an "
        "unmodified copy of a catalog file",
    )
    architecture: str
    compute_capability: str = Field(pattern=r"^[0-9]{1,2}\.[0-9]{1,2}[a-z]?$")  # 9.0, 10.0a
    num_sms: int = Field(gt=0, le=10**6)
    clocks: ClockSpec
    sm: SmSpec
    l2: L2Spec
    memory: MemorySpec
    power: PowerSpec
    die: DieSpec | None = Field(default=None, description="the silicon; needed for area and build cost")
    interconnect: InterconnectSpec | None = Field(
        default=None, description="GPU-to-GPU link; needed for multi-GPU collectives"
    )
    notes: str = ""

    @field_validator("architecture")
    @classmethod
    def _known_architecture(cls, value: str) -> str:
        # the coefficient sets are chosen by architecture: a typo ("hoper") fell back to the neutral set
        # without a word, moving every prediction
        if value.lower() not in ARCHITECTURES:
            raise ValueError(
                f"unknown architecture '{value}'; known: {', '.join(ARCHITECTURES)} (a future GPU names the "
                "nearest generation, whose kernels and coefficient sets it borrows)"
            )
        return value

    @field_validator("power")
    @classmethod
    def _vf_reaches_max_clock(cls, power: PowerSpec, info: ValidationInfo) -> PowerSpec:
        """The V-f table carried up to the top SM clock along its ridge (`DvfsTable.extended_along_ridge`):
        a what-if clock past the table's end costs voltage, where clamping held the last one (`--set
        clocks.sm_clock_max_mhz=3960` ran at 0.95 V, 66 SMs at 3960 MHz drew what 132 at 1980 did). Every
        catalog table ends at its GPU's top clock. Idle power stays clamped at its table's end."""
        clocks = info.data.get("clocks")
        if not isinstance(clocks, ClockSpec):
            return power  # the clocks' own error is reported
        table = power.core_v.extended_along_ridge(clocks.sm_clock_max_hz)
        end_hz = power.core_v.clock_hz[-1]
        if table is not power.core_v and power.core_v.ridge_slope() <= 0.0:
            # no rising segment to extend along: clocks past the table would run at its last voltage
            raise ValueError(
                f"core_v ends at {end_hz / 1e6:g} MHz, below the top SM clock "
                f"{clocks.sm_clock_max_hz / 1e6:g} MHz, and does not rise anywhere, so the voltage above "
                "it is unknown: give the voltage up to the top clock"
            )
        if table.value[-1] > CORE_V_MAX_V:
            slope_v_per_hz = power.core_v.ridge_slope()
            reach_hz = end_hz + (CORE_V_MAX_V - power.core_v.value[-1]) / slope_v_per_hz
            raise ValueError(
                f"core_v extended along its ridge ({slope_v_per_hz * 1e9:.3g} V/GHz) reaches "
                f"{CORE_V_MAX_V} V, the most taken for an SM supply, at {reach_hz / 1e6:.0f} MHz, below the "
                f"top SM clock {clocks.sm_clock_max_hz / 1e6:g} MHz: lower clocks.sm_clock_max_mhz or give a "
                "V-f table that reaches it"
            )
        return power if table is power.core_v else power.model_copy(update={"core_v": table})

    @model_validator(mode="after")
    def _check(self) -> GpuSpec:
        lo, hi = self.power.idle_power_w.clock_hz[0], self.power.idle_power_w.clock_hz[-1]
        if hi < self.clocks.sm_clock_min_hz * 0.5 or lo > self.clocks.sm_clock_max_hz * 1.5:
            raise ValueError("power.idle_power_w table does not cover the SM clock range")
        return self

    # The die as enabled by this spec: a what-if with more units than the die has grows it to fit (a GPU file
    # or a --set of the die's own count below what is enabled is refused: `die_problem`).
    def num_sms_physical(self) -> int:
        own = self.die.num_sms_physical if self.die else None
        return max(own or 0, self.num_sms)

    def l2_physical_bytes(self) -> float:
        own = self.die.l2_physical_bytes if self.die else None
        return max(own or 0.0, self.l2.l2_bytes)

    def memory_phy_bits(self) -> int:
        own = self.die.memory_phy_bits if self.die else None
        return max(own or 0, self.memory.bus_width_bits)

    def nvlink_bytes_per_s_per_link(self) -> float:
        """Per-direction bandwidth of one of this architecture's NVLinks (`NVLINK_BYTES_PER_S_PER_LINK`)."""
        return NVLINK_BYTES_PER_S_PER_LINK.get(self.architecture.lower(), NVLINK_DEFAULT_BYTES_PER_S_PER_LINK)

    def nvlinks_needed(self) -> int:
        """NVLinks that carry the interconnect's bandwidth per direction; 0 for PCIe or no interconnect."""
        link = self.interconnect
        if link is None or link.topology not in NVLINK_TOPOLOGIES:
            return 0
        # less a hair: 450 GB/s over 25 is 18 links, not 19 by rounding
        return math.ceil(link.link_bw_bytes_per_s / self.nvlink_bytes_per_s_per_link() * (1 - 1e-12))

    def num_nvlinks_physical(self) -> int:
        """NVLinks (PHYs and controllers) on the die: its own, or more where the link bandwidth needs them."""
        own = self.die.num_nvlinks if self.die else None
        return max(own or 0, self.nvlinks_needed())

    def die_problem(self, fields: Collection[str] | None = None) -> tuple[str, str] | None:
        """(die field, what is wrong) for the first count of `die` below what the spec enables, else None.

        `fields` (the die's SI field names) limits the check to them: an override checks the die fields it
        sets, while a what-if that only enables more (`num_sms=200`) grows the die (`*_physical`)."""
        die = self.die
        if die is None:
            return None
        want = set(fields) if fields is not None else set(DieSpec.model_fields)
        mib = 2.0**20
        own_sms, own_l2, own_phy = die.num_sms_physical, die.l2_physical_bytes, die.memory_phy_bits
        if "num_sms_physical" in want and own_sms is not None and own_sms < self.num_sms:
            return (
                "num_sms_physical",
                f"{own_sms} SMs on the die, fewer than the {self.num_sms} enabled (num_sms)",
            )
        if "l2_physical_bytes" in want and own_l2 is not None and own_l2 < self.l2.l2_bytes:
            return "l2_physical_bytes", (
                f"{own_l2 / mib:g} MiB of L2 on the die, less than the {self.l2.l2_bytes / mib:g} MiB "
                "enabled (l2.l2_mib)"
            )
        if "memory_phy_bits" in want and own_phy is not None and own_phy < self.memory.bus_width_bits:
            return "memory_phy_bits", (
                f"a {own_phy}-bit memory interface on the die, narrower than the "
                f"{self.memory.bus_width_bits}-bit bus (memory.bus_width_bits)"
            )
        needed = self.nvlinks_needed()
        if "num_nvlinks" in want and die.num_nvlinks is not None and die.num_nvlinks < needed:
            assert self.interconnect is not None  # needed > 0
            rate = self.nvlink_bytes_per_s_per_link()
            return "num_nvlinks", (
                f"{die.num_nvlinks} NVLinks at {rate / 1e9:g} GB/s each ({self.architecture}) carry "
                f"{die.num_nvlinks * rate / 1e9:g} GB/s a direction, less than interconnect.link_bw_gb_per_s "
                f"{self.interconnect.link_bw_bytes_per_s / 1e9:g}: that takes {needed} links"
            )
        return None

    # Peak rates at a clock. Tensor peaks scale with the clock from the per-SM per-clock rate.
    def tensor_peak_flop_per_s(self, dtype: str, sm_clock_hz: float | None = None) -> float:
        rate = self.sm.tensor_flop_per_clk.get(dtype)  # type: ignore[call-overload]
        if rate is None:
            raise KeyError(
                f"{self.name} has no {dtype} tensor cores (has {sorted(self.sm.tensor_flop_per_clk)})"
            )
        clock_hz = self.clocks.sm_clock_tensor_spec_hz if sm_clock_hz is None else sm_clock_hz
        return rate * self.num_sms * clock_hz

    def fp32_peak_flop_per_s(self, sm_clock_hz: float | None = None) -> float:
        clock_hz = self.clocks.sm_clock_max_hz if sm_clock_hz is None else sm_clock_hz
        return self.sm.fp32_flop_per_clk * self.num_sms * clock_hz

    def l2_bw_bytes_per_s(self, sm_clock_hz: float | None = None) -> float:
        clock_hz = self.clocks.sm_clock_max_hz if sm_clock_hz is None else sm_clock_hz
        return self.l2.l2_bytes_per_clk * clock_hz

    def smem_bw_bytes_per_s(self, sm_clock_hz: float | None = None) -> float:
        clock_hz = self.clocks.sm_clock_max_hz if sm_clock_hz is None else sm_clock_hz
        return self.sm.smem_bytes_per_clk * self.num_sms * clock_hz

    def summary(self) -> dict[str, float | int | str]:
        """Flat SI-keyed summary (what `dse gpu show --json` prints at its top level)."""
        out: dict[str, float | int | str] = {
            "name": self.name,
            "display_name": self.display_name,
            "architecture": self.architecture,
            "num_sms": self.num_sms,
            "sm_clock_min_hz": self.clocks.sm_clock_min_hz,
            "sm_clock_max_hz": self.clocks.sm_clock_max_hz,
            "sm_clock_tensor_spec_hz": self.clocks.sm_clock_tensor_spec_hz,
            "memory_technology": self.memory.technology,
            "memory_bus_width_bits": self.memory.bus_width_bits,
            "memory_data_rate_bit_per_s": self.memory.data_rate_bit_per_s,
            "memory_bw_bytes_per_s": self.memory.bw_bytes_per_s,
            "memory_capacity_bytes": self.memory.capacity_bytes,
            "memory_energy_j_per_bit": self.memory.energy_j_per_bit,
            "l2_bytes": self.l2.l2_bytes,
            "l2_bw_bytes_per_s": self.l2_bw_bytes_per_s(),
            "fp32_peak_flop_per_s": self.fp32_peak_flop_per_s(),
            "tdp_w": self.power.tdp_w,
        }
        for dtype in self.sm.tensor_flop_per_clk:
            out[f"tensor_{dtype}_peak_flop_per_s"] = self.tensor_peak_flop_per_s(dtype)
        return out

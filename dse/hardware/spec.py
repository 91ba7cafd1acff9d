"""Hardware description: `GpuSpec` and its parts, immutable and SI inside.

GPU YAML files (`dse/hardware/data/gpus/*.yaml`) may use human units in their keys (`sm_clock_max_mhz`,
`l2_mib`, `data_rate_gbit_per_s`); `dse.units.normalize_unit_keys` converts them to the SI fields below
before validation. Derived quantities (memory bandwidth, peak rates) are properties, never stored twice.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

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


class DvfsTable(_Frozen):
    """A quantity tabulated against SM clock, linearly interpolated and clamped at the ends."""

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

        known = list_memory_technologies()
        if value not in known:
            raise ValueError(f"unknown memory technology '{value}'; known: {', '.join(known)}")
        return value

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
        if not all(0.3 <= v <= 2.0 for v in self.core_v.value):
            raise ValueError("core_v values must be SM supply voltages, 0.3-2.0 V")
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


class DieSpec(_Frozen):
    """The silicon behind the enabled units: what die area and build cost (`dse.cost`) are computed from.

    Products harvest dies (H100 SXM enables 132 of 144 SMs, 50 of 60 MB L2, 5 of 6 HBM sites), so the
    physical counts are facts of their own. A what-if that enables more than the die has grows the die to
    exactly what is enabled (`*_effective`). A rebuilt memory system (`dse.hardware.memory.with_memory`)
    has every PHY enabled, so it drops `memory_phy_bits`.
    """

    process_node: str = Field(
        min_length=1, description="foundry node, a key of dse/cost/data/cost_facts.yaml"
    )
    num_dies: int = Field(default=1, gt=0, description="compute dies in the package (B200: 2)")
    num_sms_physical: int | None = Field(default=None, gt=0, description="SMs on all dies, enabled or not")
    l2_physical_bytes: float | None = Field(default=None, gt=0, description="L2 SRAM on all dies")
    memory_phy_bits: int | None = Field(default=None, gt=0, description="DRAM interface width on the dies")
    num_nvlinks: int = Field(default=0, ge=0, description="NVLink links (PHYs) on all dies")
    pcie_lanes: int = Field(default=16, ge=0)
    published_area_mm2: float | None = Field(
        default=None, gt=0, description="published area of all dies; null where unpublished (B200)"
    )


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

    @model_validator(mode="after")
    def _check(self) -> GpuSpec:
        lo, hi = self.power.idle_power_w.clock_hz[0], self.power.idle_power_w.clock_hz[-1]
        if hi < self.clocks.sm_clock_min_hz * 0.5 or lo > self.clocks.sm_clock_max_hz * 1.5:
            raise ValueError("power.idle_power_w table does not cover the SM clock range")
        return self

    # The die as enabled by this spec: a what-if with more units than the die has grows it to fit.
    def num_sms_physical(self) -> int:
        own = self.die.num_sms_physical if self.die else None
        return max(own or 0, self.num_sms)

    def l2_physical_bytes(self) -> float:
        own = self.die.l2_physical_bytes if self.die else None
        return max(own or 0.0, self.l2.l2_bytes)

    def memory_phy_bits(self) -> int:
        own = self.die.memory_phy_bits if self.die else None
        return max(own or 0, self.memory.bus_width_bits)

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

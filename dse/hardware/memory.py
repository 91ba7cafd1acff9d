"""Memory technologies and GPUs derived with another memory ("what if the H100 had GDDR7?").

The technology catalog is data (`data/memory_technologies.yaml`, sourced in comments). Deriving a GPU swaps
the memory system only: bandwidth follows from bus width x per-pin rate, capacity from the number of devices
(stacks) on the bus times the capacity per device, and DRAM energy per bit from the technology.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any, Literal

from pydantic import Field, model_validator

from dse.config.yamlio import parse_yaml_value
from dse.errors import ConfigError
from dse.hardware.spec import GpuSpec, MemorySpec, _Frozen
from dse.units import normalize_unit_keys


class MemoryTechSpec(_Frozen):
    """One DRAM technology; rates per pin, widths and capacities per device (GDDR chip or HBM stack)."""

    name: str
    kind: Literal["hbm", "gddr", "lpddr"]
    energy_j_per_bit: float = Field(gt=0, description="default device energy per bit (sourced in the YAML)")
    energy_low_j_per_bit: float = Field(gt=0)
    energy_high_j_per_bit: float = Field(gt=0)
    data_rate_min_bit_per_s: float = Field(gt=0)
    data_rate_max_bit_per_s: float = Field(gt=0)
    data_rate_typical_bit_per_s: float = Field(gt=0)
    device_width_bits: int = Field(gt=0)
    capacity_per_device_bytes: float = Field(gt=0, description="default capacity per device or stack")
    capacity_per_device_max_bytes: float = Field(gt=0)
    max_bus_width_bits: int = Field(gt=0, description="widest bus considered buildable")
    typical_bus_width_bits: int = Field(gt=0)
    source: str = ""

    @model_validator(mode="after")
    def _check(self) -> MemoryTechSpec:
        if (
            not self.data_rate_min_bit_per_s
            <= self.data_rate_typical_bit_per_s
            <= self.data_rate_max_bit_per_s
        ):
            raise ValueError("data rates must satisfy min <= typical <= max")
        if not self.energy_low_j_per_bit <= self.energy_j_per_bit <= self.energy_high_j_per_bit:
            raise ValueError("energy per bit must lie in its [low, high] range")
        return self


@cache
def _tech_catalog() -> dict[str, MemoryTechSpec]:
    text = (
        resources.files("dse.hardware").joinpath("data/memory_technologies.yaml").read_text(encoding="utf-8")
    )
    raw = parse_yaml_value(text, "memory_technologies.yaml")
    return {
        name: MemoryTechSpec.model_validate({"name": name, **normalize_unit_keys(entry)})
        for name, entry in raw.items()
    }


def list_memory_technologies() -> list[str]:
    return sorted(_tech_catalog())


def load_memory_tech(name: str) -> MemoryTechSpec:
    key = name.strip().lower().replace("-", "").replace("_", "")
    catalog = _tech_catalog()
    if key not in catalog:
        raise ConfigError(
            f"unknown memory technology '{name}'; known: {', '.join(list_memory_technologies())}"
        )
    return catalog[key]


def build_memory(
    technology: str,
    *,
    bus_width_bits: int | None = None,
    data_rate_bit_per_s: float | None = None,
    capacity_per_device_bytes: float | None = None,
    energy_j_per_bit: float | None = None,
) -> MemorySpec:
    """A memory system of `technology`; unspecified knobs take the technology's typical values.

    Raises ConfigError with the reason when the combination cannot be built.
    """
    tech = load_memory_tech(technology)
    width = tech.typical_bus_width_bits if bus_width_bits is None else int(bus_width_bits)
    rate = tech.data_rate_typical_bit_per_s if data_rate_bit_per_s is None else float(data_rate_bit_per_s)
    per_device = (
        tech.capacity_per_device_bytes if capacity_per_device_bytes is None else capacity_per_device_bytes
    )
    if width <= 0 or width % tech.device_width_bits:
        raise ConfigError(
            f"{tech.name}: bus width {width:g} bits is not a positive multiple of the "
            f"{tech.device_width_bits}-bit device/stack interface"
        )
    if width > tech.max_bus_width_bits:
        raise ConfigError(  # :g: a 1e308 override is not 309 digits on screen
            f"{tech.name}: bus width {width:g} bits exceeds the {tech.max_bus_width_bits}-bit maximum "
            "considered "
            "buildable (die perimeter for PHYs)"
        )
    lo, hi = tech.data_rate_min_bit_per_s, tech.data_rate_max_bit_per_s
    if not lo <= rate <= hi:
        raise ConfigError(
            f"{tech.name}: data rate {rate / 1e9:g} Gb/s per pin is outside {lo / 1e9:g}-{hi / 1e9:g} Gb/s"
        )
    if not 0 < per_device <= tech.capacity_per_device_max_bytes:
        raise ConfigError(
            f"{tech.name}: {per_device / 2**30:g} GiB per device is outside "
            f"(0, {tech.capacity_per_device_max_bytes / 2**30:g}] GiB"
        )
    num_devices = width // tech.device_width_bits
    return MemorySpec(
        technology=tech.name,
        bus_width_bits=width,
        data_rate_bit_per_s=rate,
        capacity_bytes=num_devices * per_device,
        energy_j_per_bit=tech.energy_j_per_bit if energy_j_per_bit is None else energy_j_per_bit,
        num_devices=num_devices,
    )


def memory_problem(memory: MemorySpec) -> tuple[str, str] | None:
    """(field, message) of what a GPU file's memory section gets wrong by its technology's rules, the ones
    `--memory` and `--set memory.*` apply (`build_memory`): bus width, data rate, capacity per device, the
    device count of the bus. None when it holds."""
    tech = load_memory_tech(memory.technology)
    per_device = memory.capacity_bytes / max(memory.num_devices, 1)
    try:
        build_memory(
            tech.name, bus_width_bits=memory.bus_width_bits, data_rate_bit_per_s=memory.data_rate_bit_per_s,
            capacity_per_device_bytes=per_device,
        )  # fmt: skip
    except ConfigError as exc:
        text = str(exc)
        field = "bus_width_bits" if "bus width" in text else "data_rate_gbit_per_s" if "rate" in text else ""
        return field or "capacity_gib", text
    devices = memory.bus_width_bits // tech.device_width_bits
    # GDDR's clamshell mode puts two x16 devices on each 32-bit channel (A40, RTX 3090: 24 on 384 bits)
    allowed = (devices, 2 * devices) if tech.kind == "gddr" else (devices,)
    if memory.num_devices not in allowed:
        return "num_devices", (
            f"{tech.name}: {memory.num_devices} devices on a {memory.bus_width_bits}-bit bus of "
            f"{tech.device_width_bits}-bit devices (expected {' or '.join(map(str, allowed))})"
        )
    return None


def with_memory(
    gpu: GpuSpec,
    technology: str,
    *,
    bus_width_bits: int | None = None,
    data_rate_bit_per_s: float | None = None,
    capacity_per_device_bytes: float | None = None,
) -> GpuSpec:
    """`gpu` with its memory replaced; everything else (die, clocks, power tables) is kept.

    When the technology stays the same, the GPU's own bus width, data rate, capacity per device and energy per
    bit are kept unless given (so changing only the data rate of an L40S keeps its 48 GB). Another
    technology of the same kind (HBM, GDDR, LPDDR) keeps the number of stacks or chips unless the bus width
    is given; another kind takes the technology's typical bus.
    """
    tech = load_memory_tech(technology)
    old_tech = load_memory_tech(gpu.memory.technology)
    energy_j_per_bit = None
    if tech.kind == old_tech.kind and bus_width_bits is None:
        # the die's memory interface keeps its stacks or chips (HBM3 -> HBM3e keeps the H100's 5 stacks, as
        # the H200 did its 6); another kind's devices (HBM stacks -> GDDR chips) take the typical bus
        bus_width_bits = gpu.memory.num_devices * tech.device_width_bits
    if tech.name == gpu.memory.technology:
        own = gpu.memory
        bus_width_bits = own.bus_width_bits if bus_width_bits is None else bus_width_bits
        data_rate_bit_per_s = own.data_rate_bit_per_s if data_rate_bit_per_s is None else data_rate_bit_per_s
        if capacity_per_device_bytes is None:
            capacity_per_device_bytes = own.capacity_bytes / own.num_devices
        energy_j_per_bit = own.energy_j_per_bit
    memory = build_memory(
        tech.name,
        bus_width_bits=bus_width_bits,
        data_rate_bit_per_s=data_rate_bit_per_s,
        capacity_per_device_bytes=capacity_per_device_bytes,
        energy_j_per_bit=energy_j_per_bit,
    )
    # Copies, not a re-validation of the whole spec (a search builds a GPU per point): `gpu` and `memory`
    # are validated, no check of GpuSpec reads the memory, and None is a valid `memory_phy_bits`.
    update: dict[str, Any] = {"memory": memory}
    same_sites = tech.kind == old_tech.kind and tech.device_width_bits == old_tech.device_width_bits
    rebuilt = memory.bus_width_bits != gpu.memory.bus_width_bits or not same_sites
    if gpu.die is not None and rebuilt:
        # A rebuilt memory system has every PHY enabled: no spare sites of the old one (`DieSpec`); a
        # technology of the same kind and device width on the same devices uses the die's own sites.
        update["die"] = gpu.die.model_copy(update={"memory_phy_bits": None})
    return gpu.model_copy(update=update)

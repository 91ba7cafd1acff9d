"""Die area from components (DESIGN 15; LLMCompass's method and constants, `cost_facts.yaml` `area`).

Each component is sized at the N7 reference node and moved to the GPU's node: logic by the ratio of logic
densities (`logic_ratio`), SRAM by the ratio of bit-cell areas; memory, NVLink and PCIe PHYs are analog and
do not shrink. One fitted scale (`area.scale`, refitted by `dse validate area`) multiplies the node-scaled
logic and SRAM.

    SM        control + FP32/FP64/INT32 lanes + Tensor-Core FMAs (logic) + register file + L1 (SRAM)
    crossbar  per SM (logic)          L2      physical MiB (SRAM)
    memory    PHY per HBM stack or x32 channel (fixed) + controller (logic)
    links     NVLink PHYs (fixed) + controllers (logic), as many as carry the link bandwidth
              (`GpuSpec.num_nvlinks_physical`: 1800 GB/s on Hopper's 25 GB/s links takes 72); PCIe lanes
    misc      a fraction of the rest (display, media, clocks)

A catalog GPU reports its published area; a what-if of it moves that area by the modelled difference
(`die_area_mm2`). The physical counts come from `GpuSpec.die` (harvested SMs, L2, HBM sites and NVLinks
count), grown to what a what-if enables (`GpuSpec.*_physical`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from dse.cost.facts import CostFacts
from dse.errors import ConfigError
from dse.hardware.catalog import list_gpus, load_gpu
from dse.hardware.spec import GpuSpec

REFERENCE_NODE = "tsmc-n7"
KIB = 1024.0
MIB = 1024.0 * 1024.0
INT32_LANES_PER_SM = 64  # Ampere and later
# The components the fitted scale multiplies (node-scaled logic and SRAM) and the fixed PHYs.
SCALED = ("sm", "crossbar", "l2", "memory_controller", "link_controller")
FIXED = ("memory_phy", "nvlink_phy", "pcie_phy")


@dataclass(frozen=True, slots=True)
class AreaBreakdown:
    """Modelled area by component, mm², all dies together (`misc` included in `total_mm2`)."""

    components_mm2: dict[str, float]

    @property
    def total_mm2(self) -> float:
        return sum(self.components_mm2.values())


def node_facts(facts: CostFacts, node: str) -> str:
    """The facts prefix of a process node; ConfigError naming the known nodes."""
    if not facts.has(f"nodes.{node}.logic_density_mtr_per_mm2"):
        raise ConfigError(
            f"gpu.die.process_node '{node}' is unknown; known: {', '.join(facts.names('nodes'))}"
        )
    return f"nodes.{node}"


def logic_ratio(facts: CostFacts, node: str) -> float:
    """Logic area on `node` over the same logic at N7.

    The achieved densities of shipped dies (transistors / die area) where both nodes carry one, else the
    library densities (CSET). From 16/12 nm to N7 the library maximum grew 3.3x but NVIDIA's dies only 2.7x
    (they reached ~85% of 16/12 nm's library, GA100 68% of N7's), and LLMCompass's N7 constants are
    GA100's. On 4N the achieved densities of NVIDIA's dies spread 98-125 MTr/mm² (GH100, AD10x), so they
    describe the die, not the node, and no achieved density is given there.
    """
    ref, own = node_facts(facts, REFERENCE_NODE), node_facts(facts, node)
    achieved = "achieved_density_mtr_per_mm2"
    key = (
        achieved
        if facts.has(f"{ref}.{achieved}") and facts.has(f"{own}.{achieved}")
        else "logic_density_mtr_per_mm2"
    )
    return facts.value(f"{ref}.{key}") / facts.value(f"{own}.{key}")


def _scales(gpu: GpuSpec, facts: CostFacts) -> tuple[float, float, float]:
    """(mm² per transistor at N7, logic scale, SRAM scale) for the GPU's node."""
    assert gpu.die is not None
    ref, own = node_facts(facts, REFERENCE_NODE), node_facts(facts, gpu.die.process_node)
    mm2_per_tr = 1.0 / (facts.value(f"{ref}.logic_density_mtr_per_mm2") * 1e6)
    sram = facts.value(f"{own}.sram_mm2_per_bit") / facts.value(f"{ref}.sram_mm2_per_bit")
    return mm2_per_tr, logic_ratio(facts, gpu.die.process_node), sram


def _sm_mm2(gpu: GpuSpec, facts: CostFacts, mm2_per_tr: float, logic: float, sram: float) -> float:
    a = "area."
    lanes = (
        gpu.sm.fp32_flop_per_clk / 2 * facts.value(a + "fp32_lane_transistors")
        + gpu.sm.fp64_flop_per_clk / 2 * facts.value(a + "fp64_lane_transistors")
        + INT32_LANES_PER_SM * facts.value(a + "int32_lane_transistors")
    )
    # The die's 16-bit tensor FMAs per clock. GeForce parts quote bf16/fp16 (fp32 accumulate) at half the
    # rate of their data-centre twins on the same die (RTX 4090 and L40S: AD102) but keep the die's int8
    # rate, twice the 16-bit one; so the larger of the two reads counts the silicon.
    tc = gpu.sm.tensor_flop_per_clk
    tensor_fma = max(tc.get("bf16", 0.0), tc.get("fp16", 0.0), tc.get("int8", 0.0) / 2) / 2
    transistors = facts.value(a + "sm_control_transistors") + lanes
    transistors += tensor_fma * facts.value(a + "tensor_fma_transistors")
    sram_mm2 = gpu.sm.registers * 4 / KIB * facts.value(a + "register_file_mm2_per_kib")
    sram_mm2 += gpu.sm.smem_bytes / KIB * facts.value(a + "l1_mm2_per_kib")
    return transistors * mm2_per_tr * logic + sram_mm2 * sram


def modelled_area(gpu: GpuSpec, facts: CostFacts) -> AreaBreakdown:
    """The component model, before any anchoring to a published area. Needs `gpu.die`."""
    if gpu.die is None:
        raise ConfigError(f"{gpu.name} has no `die` section (process node ...): its area cannot be modelled")
    a = "area."
    mm2_per_tr, logic, sram = _scales(gpu, facts)
    num_sms = gpu.num_sms_physical()
    bits = gpu.memory_phy_bits()
    hbm = gpu.memory.technology.startswith("hbm")
    units = bits / 1024 if hbm else bits / 32
    mem_ctrl_tr = facts.value(a + ("hbm_controller_transistors" if hbm else "dram_controller_transistors"))
    nvlink = "nvlink3" if gpu.architecture == "ampere" else "nvlink4"  # NVLink 4 PHYs for Hopper and later
    # the NVLinks the die carries: its own, or as many as the link bandwidth takes at the generation's rate
    links, lanes = gpu.num_nvlinks_physical(), gpu.die.pcie_lanes
    parts = {
        "sm": num_sms * _sm_mm2(gpu, facts, mm2_per_tr, logic, sram),
        "crossbar": num_sms * facts.value(a + "crossbar_transistors_per_sm") * mm2_per_tr * logic,
        "l2": gpu.l2_physical_bytes() / MIB * facts.value(a + "l2_mm2_per_mib") * sram,
        "memory_phy": units
        * facts.value(a + ("hbm_phy_mm2_per_stack" if hbm else "dram_phy_mm2_per_32_bits")),
        "memory_controller": units * mem_ctrl_tr * mm2_per_tr * logic,
        "nvlink_phy": links * facts.value(f"{a}{nvlink}_phy_mm2"),
        "pcie_phy": lanes * facts.value(a + "pcie_phy_mm2_per_lane"),
        "link_controller": (
            links * facts.value(f"{a}{nvlink}_controller_transistors")
            + lanes * facts.value(a + "pcie_controller_transistors_per_lane")
        )
        * mm2_per_tr
        * logic,
    }
    scale = facts.value(a + "scale")
    parts = {k: v * scale if k in SCALED else v for k, v in parts.items()}
    parts["misc"] = facts.value(a + "misc_fraction") * sum(parts.values())
    return AreaBreakdown(parts)


@cache
def _catalog_base(name: str) -> GpuSpec | None:
    return load_gpu(name) if name in list_gpus() else None


def catalog_base(gpu: GpuSpec) -> GpuSpec | None:
    """The unmodified catalog GPU a spec was derived from (its `based_on`, set for a user's copy of a
    catalog file, else its own name), or None for other GPUs."""
    # cached: a search asks once per point, the catalog does not change
    return _catalog_base(gpu.based_on or gpu.name)


def die_area_mm2(gpu: GpuSpec, facts: CostFacts) -> tuple[float, bool]:
    """(area of all dies in mm², whether it rests on a published area).

    A catalog GPU with a published area reports it, moved by the modelled difference from the catalog GPU
    when it is a what-if or a variant (`catalog_base`); a GPU without one (B200) and a design of its own (a
    user's file that is no catalog variant, whatever area it copied) report the model.
    """
    model = modelled_area(gpu, facts).total_mm2
    published = gpu.die.published_area_mm2 if gpu.die else None
    base = catalog_base(gpu)
    if published is None or base is None:
        return model, False
    if base.die is None or base.die.published_area_mm2 != published or gpu == base:
        return published, True
    delta_mm2 = model - modelled_area(base, facts).total_mm2
    # The same die summed along another path differs by rounding only: report the published area itself.
    return published + (delta_mm2 if abs(delta_mm2) > 1e-9 * published else 0.0), True

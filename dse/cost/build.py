"""What a GPU costs to build and to buy, and its embodied carbon (DESIGN 15, `cost_facts.yaml`).

    die       wafer price / (gross dies per wafer x sellable yield), per die, times the dies in the package
    memory    $/GB of its DRAM technology x capacity
    package   organic substrate; HBM parts add a silicon interposer sized to the dies and HBM sites
    board     board and server share, proportional to the power the board delivers (TDP)
    price     the owner's purchase: a published price, moved with the build cost for a what-if
    notes     what is priced although it could not be built so: a die past the reticle, an interposer past
              CoWoS-S (a what-if may be hypothetical: said, not refused)

Yield is negative binomial, `(1 + A D0 / alpha)^-alpha`. Harvesting: a die sells when the area outside
the SM array is defect-free and at most its spare SMs (physical - enabled) are hit; defects in the SM
array follow the same negative binomial count. Gross dies per wafer: `pi r^2 / A - pi d / sqrt(2 A)` on
the usable diameter.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

from dse.cost.area import AreaBreakdown, catalog_base, die_area_mm2, modelled_area, node_facts
from dse.cost.facts import CostFacts, load_cost_facts
from dse.errors import ConfigError, UnpricedError
from dse.hardware.spec import GpuSpec

MM2_PER_CM2 = 100.0
BYTES_PER_GB = 1e9  # memory is priced per decimal GB


@dataclass(frozen=True, slots=True)
class BuildCost:
    """One GPU's ledger (all dies of a multi-die part), USD and gCO2e."""

    die_area_mm2: float
    die_area_published: bool
    die_yield: float
    die_cost_usd: float
    memory_cost_usd: float
    package_cost_usd: float
    board_cost_usd: float
    gpu_price_usd: float
    embodied_gco2: float

    @property
    def gpu_cost_usd(self) -> float:
        """Build cost: the ledger's parts add up to it."""
        return self.die_cost_usd + self.memory_cost_usd + self.package_cost_usd + self.board_cost_usd

    def as_dict(self) -> dict[str, float | bool]:
        return {**asdict(self), "gpu_cost_usd": self.gpu_cost_usd}


def gross_dies_per_wafer(die_mm2: float, facts: CostFacts) -> float:
    wafer_mm, edge_mm = facts.value("yield.wafer_diameter_mm"), facts.value("yield.edge_exclusion_mm")
    diameter_mm = wafer_mm - 2 * edge_mm
    # Checked before the formula: a negative diameter squares to a positive area (a price, not an error).
    gross = (
        math.pi * (diameter_mm / 2) ** 2 / die_mm2 - math.pi * diameter_mm / math.sqrt(2 * die_mm2)
        if diameter_mm > 0
        else 0.0
    )
    if gross < 1:
        raise UnpricedError(
            f"a {die_mm2:.0f} mm² die does not fit on a {wafer_mm:g} mm wafer with {edge_mm:g} mm of edge "
            f"exclusion (cost.yield.wafer_diameter_mm, cost.yield.edge_exclusion_mm)"
        )
    return gross


def _nb_pmf(k: int, mean: float, alpha: float) -> float:
    """Negative-binomial probability of k defects with the given mean and clustering alpha."""
    if mean <= 0:
        return float(k == 0)
    log_p = math.lgamma(k + alpha) - math.lgamma(k + 1) - math.lgamma(alpha)
    log_p += k * math.log(mean / alpha) - (k + alpha) * math.log1p(mean / alpha)
    return math.exp(log_p)


def sellable_yield(
    die_mm2: float, sm_array_mm2: float, spare_sms: int, d0_per_cm2: float, alpha: float
) -> float:
    """Share of dies that can be sold: the rest defect-free and at most `spare_sms` SMs defective."""
    sm_array_mm2 = min(sm_array_mm2, die_mm2)
    rest_mean = (die_mm2 - sm_array_mm2) / MM2_PER_CM2 * d0_per_cm2
    sm_mean = sm_array_mm2 / MM2_PER_CM2 * d0_per_cm2
    rest_yield = (1 + rest_mean / alpha) ** -alpha
    return rest_yield * min(1.0, sum(_nb_pmf(k, sm_mean, alpha) for k in range(max(spare_sms, 0) + 1)))


def _die_cost(gpu: GpuSpec, area_mm2: float, model: AreaBreakdown, facts: CostFacts) -> tuple[float, float]:
    """(cost of all dies, sellable yield of one)."""
    assert gpu.die is not None
    node = node_facts(facts, gpu.die.process_node)
    per_die_mm2 = area_mm2 / gpu.die.num_dies
    # The SM array's share of the die, from the component model, applied to the reported area.
    sm_mm2 = per_die_mm2 * model.components_mm2["sm"] / model.total_mm2
    spare = (gpu.num_sms_physical() - gpu.num_sms) // gpu.die.num_dies
    y = sellable_yield(
        per_die_mm2,
        sm_mm2,
        spare,
        facts.value(f"{node}.defect_density_per_cm2"),
        facts.value("yield.clustering_alpha"),
    )
    per_die_usd = facts.value(f"{node}.wafer_usd") / (gross_dies_per_wafer(per_die_mm2, facts) * y)
    return gpu.die.num_dies * per_die_usd, y


def memory_cost_usd(gpu: GpuSpec, facts: CostFacts) -> float:
    tech = gpu.memory.technology
    if not facts.has(f"memory_usd_per_gb.{tech}"):
        raise ConfigError(
            f"no $/GB for memory '{tech}'; priced: {', '.join(facts.names('memory_usd_per_gb'))}"
        )
    return gpu.memory.capacity_bytes / BYTES_PER_GB * facts.value(f"memory_usd_per_gb.{tech}")


def interposer_mm2(gpu: GpuSpec, area_mm2: float, facts: CostFacts) -> float:
    """The silicon interposer under an HBM part's dies and HBM sites; 0 for GDDR and LPDDR parts."""
    if not gpu.memory.technology.startswith("hbm"):
        return 0.0
    sites = gpu.memory_phy_bits() / 1024
    return facts.value("package.interposer_overhead") * (
        area_mm2 + sites * facts.value("package.hbm_stack_footprint_mm2")
    )


def package_cost_usd(gpu: GpuSpec, area_mm2: float, facts: CostFacts) -> float:
    """Substrate for every part; an interposer under the dies and HBM sites for HBM parts."""
    interposer_usd = interposer_mm2(gpu, area_mm2, facts) * facts.value("package.interposer_usd_per_mm2")
    return facts.value("package.substrate_usd") + interposer_usd


def build_notes(gpu: GpuSpec, area_mm2: float, facts: CostFacts) -> tuple[str, ...]:
    """What the ledger prices although it could not be built as modelled: a die past the reticle field (no
    stitching or split into dies is priced) or an interposer past its package's largest (CoWoS-S for one
    die, CoWoS-L for several; priced at CoWoS-S's $/mm²). A what-if may be hypothetical, so these are said,
    not refused."""
    assert gpu.die is not None
    notes = []
    per_die_mm2, reticle_mm2 = area_mm2 / gpu.die.num_dies, facts.value("limits.reticle_mm2")
    if per_die_mm2 > reticle_mm2:
        dies = "the die is" if gpu.die.num_dies == 1 else f"each of the {gpu.die.num_dies} dies is"
        notes.append(
            f"{dies} {per_die_mm2:,.0f} mm², over the {reticle_mm2:,.0f} mm² reticle field "
            "(cost.limits.reticle_mm2): no scanner exposes a die that large in one shot, and it is priced "
            "with no stitching (more dies: die.num_dies)"
        )
    # a part of several dies sits on CoWoS-L (B200, the first: [TI-B200]), whose interposer is larger
    kind = "cowos_l" if gpu.die.num_dies > 1 else "cowos_s"
    cowos_mm2, limit_mm2 = interposer_mm2(gpu, area_mm2, facts), facts.value(f"limits.{kind}_interposer_mm2")
    if cowos_mm2 > limit_mm2:
        package = "CoWoS-L" if kind == "cowos_l" else "CoWoS-S"
        beyond = "no package holds it" if kind == "cowos_l" else "it needs a CoWoS-L-class package"
        notes.append(
            f"the interposer is {cowos_mm2:,.0f} mm², over {package}'s {limit_mm2:,.0f} mm² "
            f"(cost.limits.{kind}_interposer_mm2): {beyond}, priced here at CoWoS-S's $ per mm²"
        )
    return tuple(notes)


def embodied_gco2(gpu: GpuSpec, area_mm2: float, facts: CostFacts) -> float:
    """Dies by area at their node's carbon per cm², DRAM per GB, and the package (ACT's method)."""
    assert gpu.die is not None
    node = node_facts(facts, gpu.die.process_node)
    die_g = area_mm2 / MM2_PER_CM2 * facts.value(f"{node}.embodied_kgco2_per_cm2") * 1e3
    dram_g = gpu.memory.capacity_bytes / BYTES_PER_GB * facts.value("embodied.dram_gco2_per_gb")
    return die_g + dram_g + facts.value("embodied.package_gco2")


def _parts(gpu: GpuSpec, facts: CostFacts) -> tuple[float, bool, float, float, float, float, float]:
    """(area, published, yield, die $, memory $, package $, board $) without the price."""
    area_mm2, published = die_area_mm2(gpu, facts)
    die_usd, y = _die_cost(gpu, area_mm2, modelled_area(gpu, facts), facts)
    board_usd = facts.value("package.board_usd_per_tdp_w") * gpu.power.tdp_w
    return (
        area_mm2,
        published,
        y,
        die_usd,
        memory_cost_usd(gpu, facts),
        package_cost_usd(gpu, area_mm2, facts),
        board_usd,
    )


def price_fact(gpu: GpuSpec) -> str | None:
    """The cost fact holding `gpu`'s published price (`gpu_price_usd.<its catalog GPU>`), None for a GPU of
    no catalog GPU; the fact may not exist (a catalog GPU with no published price)."""
    base = catalog_base(gpu)
    return None if base is None else f"gpu_price_usd.{base.name}"


def price_basis(gpu: GpuSpec, facts: CostFacts) -> str:
    """Where `gpu_price_usd` takes a GPU's price from: "published" (its catalog GPU's price, scaled for a
    what-if), "set" (that price as `--set cost.gpu_price_usd.<gpu>` gave it, scaled likewise) or "markup"
    (build cost x `default_markup`: no published price)."""
    path = price_fact(gpu)
    if path is None or not facts.has(path):
        return "markup"
    return "set" if path in facts.overridden else "published"


def price_moved_with_build(base_price_usd: float, base_build_usd: float, build_usd: float) -> float:
    """A changed design's price: its base design's price, moved with the build cost (the ratio of price to
    build cost held), as a what-if of a catalog GPU moves the published price and `dse whatif` a given
    `--gpu-price-usd`."""
    return base_price_usd * build_usd / base_build_usd


def gpu_price_usd(gpu: GpuSpec, build_usd: float, facts: CostFacts) -> float:
    """A catalog GPU's published price, scaled by build cost for a what-if of it; else build x markup.

    The published price goes with the scenario's facts as shipped: an overridden fact (a cheaper HBM, a
    dearer wafer) moves the price with the build cost, as a changed design does.
    """
    base = catalog_base(gpu)
    if base is None or price_basis(gpu, facts) == "markup":  # (None is "markup" too; said for the types)
        return build_usd * facts.value("default_markup")
    return _moved_from(base, facts.value(f"gpu_price_usd.{base.name}"), build_usd, facts)


def _moved_from(base: GpuSpec, price_usd: float, build_usd: float, facts: CostFacts) -> float:
    """`price_usd`, the price of `base`, moved to a design of `build_usd` under `facts`: the base's build
    cost is taken under the scenario's facts as shipped, so an overridden fact moves the price too."""
    shipped = load_cost_facts(facts.scenario) if facts.overridden else facts
    return price_moved_with_build(price_usd, _base_build_usd(base, shipped), build_usd)


def given_price_moved(given_usd: float, base: GpuSpec, gpu: GpuSpec, facts: CostFacts) -> float:
    """A given price (`--gpu-price-usd`, a study's `cost: gpu_price_usd`) is the price of a sweep's or
    study's base GPU; a point that changes the design takes it moved with its build cost
    (`price_moved_with_build`, its facts against the base's as shipped, as `gpu_price_usd` moves a
    published price), as `dse whatif` and `dse compare` do. Either side without a ledger: as given."""
    if gpu is base or base.die is None or gpu.die is None:
        return given_usd
    try:
        return _moved_from(base, given_usd, sum(_parts(gpu, facts)[3:]), facts)
    except UnpricedError:  # a die no wafer holds: the ledger says so (`cost_outputs`), the price stands
        return given_usd


# The build cost of catalog GPUs under shipped facts, by the ids of both (cached objects, held by the entry
# so that no other object takes their ids): a search prices its base GPU at every point.
_BASE_BUILD: dict[tuple[int, int], tuple[GpuSpec, CostFacts, float]] = {}


def _base_build_usd(base: GpuSpec, shipped: CostFacts) -> float:
    key = (id(base), id(shipped))
    hit = _BASE_BUILD.get(key)
    if hit is None:
        if len(_BASE_BUILD) >= 64:  # bounded: catalog GPUs x scenarios
            _BASE_BUILD.clear()
        hit = _BASE_BUILD[key] = (base, shipped, sum(_parts(base, shipped)[3:]))
    return hit[2]


def build_cost(gpu: GpuSpec, facts: CostFacts, price_usd: float | None = None) -> BuildCost:
    """The ledger of one GPU; `price_usd` replaces the derived purchase price (`--gpu-price-usd`)."""
    if gpu.die is None:
        raise UnpricedError(
            f"{gpu.name} has no `die` section (process node ...): its build cost cannot be computed"
        )
    area_mm2, published, y, die_usd, mem_usd, pkg_usd, board_usd = _parts(gpu, facts)
    build_usd = die_usd + mem_usd + pkg_usd + board_usd
    price = gpu_price_usd(gpu, build_usd, facts) if price_usd is None else price_usd
    return BuildCost(
        area_mm2,
        published,
        y,
        die_usd,
        mem_usd,
        pkg_usd,
        board_usd,
        price,
        embodied_gco2(gpu, area_mm2, facts),
    )

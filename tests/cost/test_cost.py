"""dse.cost: the identities of issue 23 (exact), the yield and wafer arithmetic against the worked examples
of cost-facts.md 3.4, and the monotonic properties of area and cost."""

from __future__ import annotations

import math
import re
from importlib import resources

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.cost.area import modelled_area
from dse.cost.build import build_cost, gross_dies_per_wafer, sellable_yield
from dse.cost.facts import FLAG_RANGED, grid_gco2_per_kwh, load_cost_facts, split_cost_overrides
from dse.cost.operation import J_PER_KWH, CostOptions, Throughput, cost_outputs
from dse.errors import ConfigError, UnpricedError
from dse.hardware.catalog import list_gpus, load_gpu

LOAD = Throughput(num_gpus=1, avg_power_w=500.0, output_tokens_per_s=2000.0, energy_per_output_token_j=0.25)


def test_gross_dies_and_yield_match_the_worked_examples() -> None:
    # cost-facts.md 3.4: 300 mm wafer, no edge exclusion, NB alpha = 3
    facts = load_cost_facts(overrides={"yield.edge_exclusion_mm": 0})
    assert gross_dies_per_wafer(826, facts) == pytest.approx(62.4, abs=0.1)
    assert gross_dies_per_wafer(294.5, facts) == pytest.approx(201.2, abs=0.1)
    # GH100 at D0 = 0.07 / 0.10 / 0.20: 0.59 / 0.49 / 0.27 (no harvesting: no SM spares)
    for d0, expected in ((0.07, 0.59), (0.10, 0.49), (0.20, 0.27)):
        assert sellable_yield(814, 0.0, 0, d0, 3.0) == pytest.approx(expected, abs=0.006)


@pytest.mark.parametrize("edge_mm", [140.0, 150.0, 160.0, 300.0])
def test_an_edge_exclusion_that_leaves_no_room_is_refused(edge_mm: float) -> None:
    # 300 mm wafer: at 140 mm the usable disc is 20 mm across (a 814 mm2 die does not fit); from 150 mm on
    # there is no disc at all, which the area formula would turn into a positive die count (its square)
    facts = load_cost_facts(overrides={"yield.edge_exclusion_mm": edge_mm})
    with pytest.raises(ConfigError, match="cost.yield.edge_exclusion_mm"):
        gross_dies_per_wafer(814, facts)


def test_harvesting_raises_the_sellable_yield() -> None:
    plain = sellable_yield(814, 500, 0, 0.1, 3.0)
    assert sellable_yield(814, 500, 12, 0.1, 3.0) > plain
    assert plain == pytest.approx(sellable_yield(814, 0, 0, 0.1, 3.0), rel=0.05)  # split, same mean


@given(st.floats(50, 850), st.floats(1, 200))
def test_yield_falls_as_area_grows(area_mm2: float, extra_mm2: float) -> None:
    assert sellable_yield(area_mm2 + extra_mm2, 0.0, 0, 0.1, 3.0) < sellable_yield(area_mm2, 0.0, 0, 0.1, 3.0)


@pytest.mark.parametrize("name", list_gpus())
def test_ledger_parts_add_up(name: str) -> None:
    b = build_cost(load_gpu(name), load_cost_facts())
    parts = b.die_cost_usd + b.memory_cost_usd + b.package_cost_usd + b.board_cost_usd
    assert b.gpu_cost_usd == parts
    assert b.as_dict()["gpu_cost_usd"] == parts
    assert all(v > 0 for v in (b.die_cost_usd, b.memory_cost_usd, b.package_cost_usd, b.board_cost_usd))


def test_renter_usd_per_mtoken_identity() -> None:
    gpu = load_gpu("h100-sxm")
    load = Throughput(
        num_gpus=4, avg_power_w=600.0, output_tokens_per_s=1234.5, energy_per_output_token_j=1.7
    )
    out = cost_outputs(gpu, load, CostOptions(gpu_usd_per_hour=3.21))
    assert out["usd_per_million_output_tokens"] == pytest.approx(3.21 * 4 / (1234.5 * 3600) * 1e6, rel=1e-12)
    assert out["usd_per_gpu_hour"] == 3.21
    assert out["energy_cost_fraction"] is None  # the rent holds the energy: not separable
    assert out["cost_view"] == "renter"


def test_operational_carbon_identity() -> None:
    out = cost_outputs(load_gpu("l4"), LOAD, CostOptions(pue=1.25, grid=300))
    assert out["gco2_per_output_token"] == pytest.approx(0.25 / 3.6e6 * 1.25 * 300, rel=1e-12)
    assert J_PER_KWH == 3.6e6


def test_owner_hour_is_amortized_price_plus_electricity() -> None:
    options = CostOptions(lifetime_years=4, utilization=0.5, electricity_usd_per_kwh=0.1, pue=1.2)
    out = cost_outputs(load_gpu("h100-sxm"), LOAD, options)
    hardware = 27500 / (4 * 8766 * 0.5)  # the published price (cost_facts gpu_price_usd.h100-sxm)
    energy = 0.5 * 1.8 * 1.2 * 0.1  # kW x server multiplier x PUE x $/kWh
    assert out["usd_per_gpu_hour"] == pytest.approx(hardware + energy, rel=1e-12)
    assert out["energy_cost_fraction"] == pytest.approx(energy / (hardware + energy), rel=1e-12)


def test_free_electricity_has_no_energy_cost() -> None:
    out = cost_outputs(load_gpu("a10"), LOAD, CostOptions(electricity_usd_per_kwh=0.0))
    assert out["energy_cost_fraction"] == 0.0


@settings(max_examples=20, deadline=None)
@given(st.floats(1000, 100000))
def test_doubling_the_price_doubles_the_hardware_part(price_usd: float) -> None:
    gpu = load_gpu("h100-sxm")
    free = CostOptions(electricity_usd_per_kwh=0.0)
    one = cost_outputs(gpu, LOAD, CostOptions(electricity_usd_per_kwh=0.0, gpu_price_usd=price_usd))
    two = cost_outputs(gpu, LOAD, CostOptions(electricity_usd_per_kwh=0.0, gpu_price_usd=2 * price_usd))
    assert two["usd_per_million_output_tokens"] == pytest.approx(2 * one["usd_per_million_output_tokens"])
    assert free.gpu_price_usd is None


def test_hbm_pays_an_interposer_and_gddr_does_not() -> None:
    facts = load_cost_facts()
    hbm = build_cost(load_gpu("h100-sxm"), facts)
    gddr = build_cost(
        load_gpu("h100-sxm", {"memory.technology": "gddr7", "memory.bus_width_bits": 512}), facts
    )
    assert gddr.package_cost_usd == facts.value("package.substrate_usd")
    assert (
        hbm.package_cost_usd > gddr.package_cost_usd + 300
    )  # the CoWoS interposer, ~$430-750 (cost-facts 5)
    assert build_cost(load_gpu("l40s"), facts).package_cost_usd == facts.value("package.substrate_usd")


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["h100-sxm", "a100-sxm-80gb", "l4", "b200"]), st.integers(1, 64), st.floats(1, 64))
def test_more_sms_or_l2_never_shrink_or_cheapen_the_die(name: str, more_sms: int, more_l2_mib: float) -> None:
    facts = load_cost_facts()
    base = load_gpu(name)
    bigger = load_gpu(
        name,
        {
            "num_sms": base.num_sms_physical() + more_sms,
            "l2.l2_mib": base.l2_physical_bytes() / 2**20 + more_l2_mib,
        },
    )
    a, b = build_cost(base, facts), build_cost(bigger, facts)
    assert b.die_area_mm2 > a.die_area_mm2
    assert b.die_cost_usd > a.die_cost_usd
    assert b.gpu_cost_usd > a.gpu_cost_usd


def test_enabling_harvested_sms_keeps_the_area_but_costs_yield() -> None:
    facts = load_cost_facts()
    h100, full = load_gpu("h100-sxm"), load_gpu("h100-sxm", {"num_sms": 144})
    a, b = build_cost(h100, facts), build_cost(full, facts)
    assert b.die_area_mm2 == a.die_area_mm2  # the die had 144 SMs all along
    assert b.die_yield < a.die_yield and b.die_cost_usd > a.die_cost_usd


def test_catalog_gpus_report_their_published_area() -> None:
    facts = load_cost_facts()
    for name in list_gpus():
        gpu = load_gpu(name)
        assert gpu.die is not None
        area = build_cost(gpu, facts).die_area_mm2
        if gpu.die.published_area_mm2 is not None:
            assert area == pytest.approx(gpu.die.published_area_mm2)
        else:
            assert area == pytest.approx(modelled_area(gpu, facts).total_mm2)


def test_a_what_if_moves_the_published_area_by_the_modelled_delta() -> None:
    facts = load_cost_facts()
    base, more = load_gpu("h100-sxm"), load_gpu("h100-sxm", {"l2.l2_mib": 120})
    delta = modelled_area(more, facts).total_mm2 - modelled_area(base, facts).total_mm2
    assert build_cost(more, facts).die_area_mm2 == pytest.approx(814 + delta)


@pytest.mark.parametrize(
    ("name", "bw_gb_per_s", "links"),
    # links at the generation's per-direction rate (hardware-facts 1.5): NVLink 4 25 GB/s, NVLink 5 50 GB/s
    [("h100-sxm", 1800, 72), ("h100-sxm", 900, 36), ("b200", 1800, 36)],
)
def test_nvlink_bandwidth_is_carried_by_nvlink_phys(name: str, bw_gb_per_s: float, links: int) -> None:
    """4x the H100's NVLink bandwidth left its die, dies and build cost unchanged (+0.0%): the bandwidth
    was free. It now takes the links it needs, the same die as one given those links outright."""
    facts = load_cost_facts()
    base = load_gpu(name)
    faster = load_gpu(name, {"interconnect.link_bw_gb_per_s": bw_gb_per_s})
    linked = load_gpu(name, {"die.num_nvlinks": links})
    a, b, c = (build_cost(g, facts) for g in (base, faster, linked))
    assert b.die_area_mm2 > a.die_area_mm2 and b.gpu_cost_usd > a.gpu_cost_usd
    assert b.die_area_mm2 == pytest.approx(c.die_area_mm2) and b.die_cost_usd == pytest.approx(c.die_cost_usd)


def test_bandwidth_the_die_already_carries_keeps_its_area() -> None:
    """A slower link runs on the H100's 18 NVLinks (as fused SMs stay on the die): its area is unchanged."""
    facts = load_cost_facts()
    slow = load_gpu("h100-sxm", {"interconnect.link_bw_gb_per_s": 64})
    assert build_cost(slow, facts).die_area_mm2 == pytest.approx(814)


def _h100_file(tmp_path, name: str, edit=lambda text: text):
    text = (resources.files("dse.hardware") / "data/gpus/h100-sxm.yaml").read_text(encoding="utf-8")
    path = tmp_path / f"{name}.yaml"
    path.write_text(edit(text), encoding="utf-8")
    return path


GDDR7 = {"memory.technology": "gddr7", "memory.bus_width_bits": 512, "memory.data_rate_gbit_per_s": 32}


@pytest.mark.parametrize("overrides", [None, GDDR7])
def test_a_copy_of_a_catalog_file_is_priced_and_sized_as_the_catalog_gpu(tmp_path, overrides) -> None:
    # `--gpu my_h100.yaml`, a copy of the catalog file named after the file (and retitled): it and every
    # what-if of it are the H100 SXM's, so they cost what the catalog GPU and its what-ifs cost (the copy
    # alone was priced from build cost x markup, 28.1k$ against the published 27.5k$)
    path = _h100_file(tmp_path, "my_h100", lambda t: t.replace("NVIDIA H100 SXM5 80GB", "our H100"))
    facts = load_cost_facts()
    copy = load_gpu(path, overrides)
    assert copy.name == "my_h100" and copy.based_on == "h100-sxm"
    mine, catalog = build_cost(copy, facts), build_cost(load_gpu("h100-sxm", overrides), facts)
    assert mine.gpu_price_usd == pytest.approx(catalog.gpu_price_usd)
    assert mine.die_area_mm2 == pytest.approx(catalog.die_area_mm2)
    if overrides is None:
        assert mine.gpu_price_usd == facts.value("gpu_price_usd.h100-sxm")


def test_based_on_names_the_catalog_gpu_a_changed_file_varies(tmp_path) -> None:
    facts = load_cost_facts()
    more_sms = lambda t: t.replace("num_sms: 132 ", "num_sms: 140 ")  # noqa: E731
    changed = load_gpu(_h100_file(tmp_path, "mine", more_sms))
    assert changed.num_sms == 140 and changed.based_on is None  # changed and not declared: its own GPU
    parts = build_cost(changed, facts)
    build = parts.die_cost_usd + parts.memory_cost_usd + parts.package_cost_usd + parts.board_cost_usd
    assert parts.gpu_price_usd == pytest.approx(build * facts.value("default_markup"))
    declared = load_gpu(_h100_file(tmp_path, "mine2", lambda t: "based_on: H100_SXM\n" + more_sms(t)))
    assert declared.based_on == "h100-sxm"
    as_what_if = build_cost(load_gpu("h100-sxm", {"num_sms": 140}), facts)
    assert build_cost(declared, facts).gpu_price_usd == pytest.approx(as_what_if.gpu_price_usd)
    with pytest.raises(
        ConfigError, match=r"mine3\.yaml:1: based_on: 'h100-sxn' is not a catalog GPU.*h100-sxm"
    ):
        load_gpu(_h100_file(tmp_path, "mine3", lambda t: "based_on: h100-sxn\n" + t))
    hostile = _h100_file(tmp_path, "mine4", lambda t: 'based_on: "h100\\nsxm\\u001b[31mRED"\n' + t)
    with pytest.raises(ConfigError) as err:
        load_gpu(hostile)
    assert "\x1b" not in str(err.value) and "\n" not in str(err.value)  # shown escaped, on one line


def test_a_design_of_its_own_is_sized_by_the_model_whatever_area_its_file_copied(tmp_path) -> None:
    """A newcomer's copy of the H100 file with 200 SMs (no catalog variant) reported the 814 mm² it copied,
    so more SMs made it cheaper; the README says such a design takes the modelled area."""
    from dse.cost.area import die_area_mm2, modelled_area

    facts = load_cost_facts()

    def sms(n: int):  # n SMs enabled on a die of n (a file enabling more than its die has is refused)
        return lambda t: t.replace("num_sms: 132 ", f"num_sms: {n} ").replace(
            "num_sms_physical: 144 ", f"num_sms_physical: {n} "
        )

    small, large = (load_gpu(_h100_file(tmp_path, f"own{n}", sms(n))) for n in (200, 300))
    assert small.based_on is None and small.die.published_area_mm2 == 814  # the copied figure
    area, published = die_area_mm2(small, facts)
    assert (area, published) == (modelled_area(small, facts).total_mm2, False)
    assert die_area_mm2(large, facts)[0] > area  # more SMs, a larger die
    assert build_cost(large, facts).gpu_price_usd > build_cost(small, facts).gpu_price_usd


@pytest.mark.parametrize("path", ["name", "based_on", "gpu.based_on"])
def test_which_gpu_a_spec_is_cannot_be_overridden(path: str) -> None:
    # `--set name=a100-sxm-80gb` priced the H100 as an A100 (and `based_on` likewise): they name the GPU
    with pytest.raises(ConfigError, match="cannot be overridden"):
        load_gpu("h100-sxm", {path: "a100-sxm-80gb"})


def test_scenarios_move_prices_only() -> None:
    low, mid, high = (load_cost_facts(s) for s in ("low", "mid", "high"))
    for path, fact in mid.entries.items():
        if fact.is_price:
            assert low.value(path) <= mid.value(path) <= high.value(path)
        else:
            assert low.value(path) == mid.value(path) == high.value(path)
    gpu = load_gpu("h100-sxm")
    costs = [build_cost(gpu, f).gpu_cost_usd for f in (low, mid, high)]
    assert costs[0] < costs[1] < costs[2]


def test_overrides_and_their_errors() -> None:
    facts = load_cost_facts(overrides={"cost.memory_usd_per_gb.hbm3": 12})
    assert facts.value("memory_usd_per_gb.hbm3") == 12.0
    assert load_cost_facts("high", {"memory_usd_per_gb.hbm3": 12}).value("memory_usd_per_gb.hbm3") == 12.0
    for bad, match in (
        ({"memory_usd_per_gb.hbm9": 1}, "no such cost fact"),
        ({"memory_usd_per_gb.hbm3": math.nan}, "finite number"),
        ({"memory_usd_per_gb.hbm3": -1}, ">= 0"),
        ({"memory_usd_per_gb.hbm3": "cheap"}, "finite number"),
    ):
        with pytest.raises(ConfigError, match=match):
            load_cost_facts(overrides=bad)
    with pytest.raises(ConfigError, match="scenario"):
        load_cost_facts("cheapest")
    gpu_part, cost_part = split_cost_overrides({"gpu.num_sms": 1, "cost.pue": 2, "num_sms": 3})
    assert gpu_part == {"gpu.num_sms": 1, "num_sms": 3} and cost_part == {"pue": 2}


def test_grid_presets_and_numbers() -> None:
    facts = load_cost_facts()
    assert grid_gco2_per_kwh(facts, "France") == 56
    assert grid_gco2_per_kwh(facts, "123.5") == 123.5
    assert grid_gco2_per_kwh(facts, None) == facts.value("operation.grid_gco2_per_kwh")
    for bad in ("mars", "nan", "inf"):
        with pytest.raises(ConfigError):
            grid_gco2_per_kwh(facts, bad)


def test_unknown_node_and_missing_die_are_config_errors() -> None:
    facts = load_cost_facts()
    # refused at load, as a file's is; the ledger still names a node it cannot price in a spec built in code
    with pytest.raises(ConfigError, match=r"die\.process_node: .*unknown process node 'tsmc-n1'; known: "):
        load_gpu("h100-sxm", {"die.process_node": "tsmc-n1"})
    h100 = load_gpu("h100-sxm")
    assert h100.die is not None
    unpriced = h100.model_copy(update={"die": h100.die.model_copy(update={"process_node": "tsmc-n1"})})
    with pytest.raises(ConfigError, match="process_node 'tsmc-n1'"):
        build_cost(unpriced, facts)
    no_die = load_gpu("h100-sxm").model_copy(update={"die": None})
    with pytest.raises(ConfigError, match="no `die` section"):
        build_cost(no_die, facts)


def test_a_gpu_without_a_die_is_priced_from_the_price_given() -> None:
    """No die, no build ledger; but an hourly price (renter) or a purchase price (owner) prices the run, and
    operational carbon needs neither: the flags were accepted and ignored (every cost key null)."""
    no_die = load_gpu("h100-sxm").model_copy(update={"die": None})
    load = Throughput(
        num_gpus=2, avg_power_w=500.0, output_tokens_per_s=2000.0, energy_per_output_token_j=0.5
    )
    with pytest.raises(UnpricedError):
        cost_outputs(no_die, load)
    renter = cost_outputs(no_die, load, CostOptions(gpu_usd_per_hour=2.0))
    assert renter["usd_per_million_output_tokens"] == pytest.approx(2.0 * 2 / (2000.0 * 3600) * 1e6)
    facts = load_cost_facts()
    gco2 = 0.5 / J_PER_KWH * facts.value("operation.pue") * facts.value("operation.grid_gco2_per_kwh")
    assert renter["gco2_per_output_token"] == pytest.approx(gco2)
    assert renter["die_cost_usd"] is None and renter["embodied_gco2_per_output_token"] is None
    owner = cost_outputs(no_die, load, CostOptions(gpu_price_usd=20000.0))
    op = {k: facts.value(f"operation.{k}") for k in ("lifetime_years", "utilization", "pue")}
    hours = op["lifetime_years"] * 8766.0 * op["utilization"]  # 365.25-day years
    energy_usd_h = 0.5 * facts.value("operation.server_power_multiplier") * op["pue"]  # 500 W: 0.5 kW
    energy_usd_h *= facts.value("operation.electricity_usd_per_kwh")
    assert owner["usd_per_gpu_hour"] == pytest.approx(20000.0 / hours + energy_usd_h)  # amortized + power
    assert owner["energy_cost_fraction"] == pytest.approx(energy_usd_h / owner["usd_per_gpu_hour"])
    assert owner["gpu_price_usd"] == 20000.0 and owner["cost_view"] == "owner"


def test_every_fact_has_a_source_and_a_tag() -> None:
    for path, fact in load_cost_facts().entries.items():
        assert fact.tag in ("V", "R", "E", "D"), path
        assert fact.source and fact.unit and fact.date, path


def test_a_point_that_does_not_run_has_no_energy_share() -> None:
    """An infeasible point draws no power: its energy share of cost is unknown (None), not 0%."""
    idle = Throughput.from_metrics({"avg_power_w": None, "output_tokens_per_s": None,
                                    "energy_per_output_token_j": None, "num_gpus": 1})  # fmt: skip
    assert cost_outputs(load_gpu("h100-sxm"), idle)["energy_cost_fraction"] is None


@pytest.mark.parametrize(
    ("options", "flag"),
    [({"electricity_usd_per_kwh": 1e308}, "--electricity-usd-per-kwh"), ({"gpu_usd_per_hour": 1e308},
     "--gpu-usd-per-hour"), ({"gpu_price_usd": 1e308}, "--gpu-price-usd"), ({"pue": 1e9}, "--pue"),
     ({"lifetime_years": 1e9}, "--lifetime-years"), ({"lifetime_years": 1e-308}, "--lifetime-years"),
     ({"utilization": 1e-320}, "--utilization")],
)  # fmt: skip
def test_absurd_prices_are_refused_not_overflowed(options: dict, flag: str) -> None:
    """1e308 $/kWh gave 'internal error: a non-finite number' (exit 1), as did a lifetime of 1e-308 years
    (the GPU's price amortized over it): a range error names the flag."""
    with pytest.raises(ConfigError, match=flag):
        cost_outputs(load_gpu("h100-sxm"), LOAD, CostOptions(**options))


def test_every_fact_override_in_range_gives_a_finite_ledger() -> None:
    """Each fact at 0 (where allowed) and at the largest override allowed (1,000 x the top of its range)
    prices every catalog GPU without a traceback or a non-finite number (a die grown past the wafer is a
    clean refusal); past that, or 0 where the ledger
    divides by the fact (densities, bit-cell areas, the yield model's clustering), one error naming the
    path. A fuzzer found 1e308 wafers overflowing into inf and alpha 0 dividing by zero."""
    base = load_cost_facts()
    load = Throughput(
        num_gpus=1, avg_power_w=500.0, output_tokens_per_s=3000.0, energy_per_output_token_j=0.2
    )
    gpus = [load_gpu(n) for n in ("h100-sxm", "l4", "b200", "v100-sxm2")]
    for path, fact in base.entries.items():
        top = 1000.0 * max(fact.high, fact.value)
        for value in (0.0, top):
            try:
                options = CostOptions(overrides={path: value})
                options.facts()
            except ConfigError as exc:  # refused with one message: 0 where the ledger divides, or a
                # value past an operating bound (--lifetime-years in [0.01, 100], ...)
                assert "must be > 0" in str(exc) or "must be in" in str(exc), exc
                assert f"'cost.{path}'" in str(exc), exc  # the override, not a flag nobody typed
                continue
            for gpu in gpus:
                try:
                    out = cost_outputs(gpu, load, options)
                except ConfigError as exc:  # a clean refusal: "a 257708 mm2 die does not fit on a wafer"
                    assert "does not fit" in str(exc), (path, value, exc)
                    continue
                assert all(math.isfinite(v) for v in out.values() if isinstance(v, float)), (path, value)
        if path in FLAG_RANGED:  # ranged by their flags' bounds (next test)
            continue
        with pytest.raises(ConfigError, match=f"cost.{path}.*over 1000 x the top of its range"):
            load_cost_facts(overrides={path: top * 1.01})


def test_flagged_facts_keep_their_flags_ranges() -> None:
    """--electricity-usd-per-kwh takes [0, 1000]; the generic bound (1,000 x 0.127 = 127) refused 500 and
    named the fact instead of the flag (a reviewer's finding). The same range through --set and a study,
    whose message names the fact path the user gave, not a flag they did not type."""
    for options in (CostOptions(electricity_usd_per_kwh=500.0),
                    CostOptions(overrides={"operation.electricity_usd_per_kwh": 500.0})):  # fmt: skip
        assert options.facts().value("operation.electricity_usd_per_kwh") == 500.0
    for options, named in (
        (CostOptions(electricity_usd_per_kwh=5000.0), "--electricity-usd-per-kwh"),
        (CostOptions(overrides={"operation.electricity_usd_per_kwh": 5000.0}),
         "override 'cost.operation.electricity_usd_per_kwh':"),
    ):  # fmt: skip
        with pytest.raises(ConfigError, match=re.escape(named) + r" must be in \[0, 1000\]"):
            options.facts()


def test_a_gpu_that_cannot_be_priced_keeps_its_prediction(tmp_path) -> None:
    """A GPU file without a `die` section, or a what-if whose die no wafer holds, refused the whole
    `dse predict` over its cost (exit 2); the prediction now stands with null cost keys and a note."""
    import json

    from typer.testing import CliRunner

    from dse.cli import app

    text = _h100_file(tmp_path, "x", lambda t: t).read_text(encoding="utf-8")
    nodie = tmp_path / "nodie.yaml"
    nodie.write_text(text[: text.index("\ndie:")] + "\n", encoding="utf-8")
    work = ["--model", "llama-3.1-8b", "--batch", "8", "--input-tokens", "128", "--output-tokens", "16"]
    # (an hourly or purchase price prices a GPU without a die: test_a_gpu_without_a_die_is_priced_...)
    gpus = (["--gpu", str(nodie)], ["--gpu", "h100-sxm", "--set", "num_sms=5000"])
    for gpu in gpus:
        result = CliRunner().invoke(app, ["predict", *gpu, *work, "--json"])
        assert result.exit_code == 0, result.output
        out = json.loads(result.stdout)
        assert out["ttft_s"] > 0 and out["usd_per_million_output_tokens"] is None
        assert out["cost_note"].startswith("not priced: ")


def test_the_price_basis_says_when_a_price_is_an_estimate() -> None:
    # a GPU without a published price is priced at build cost x H100's ratio; the outputs say so (the text
    # cost block's title), as a newcomer read an L4-class estimate as a price
    load = Throughput(1, 300.0, 1000.0, 0.3)
    a10 = cost_outputs(load_gpu("a10"), load)
    assert a10["gpu_price_basis"] == "markup"
    assert a10["gpu_price_usd"] == pytest.approx(
        a10["gpu_cost_usd"] * load_cost_facts().value("default_markup")
    )
    assert cost_outputs(load_gpu("rtx-3090"), load)["gpu_price_usd"] == 1499  # NVIDIA launch MSRP
    assert cost_outputs(load_gpu("h100-sxm"), load)["gpu_price_basis"] == "published"
    assert (
        cost_outputs(load_gpu("a10"), load, CostOptions(gpu_price_usd=3000.0))["gpu_price_basis"] == "given"
    )
    # a published price set by `--set cost.gpu_price_usd.<gpu>` was said to be the published one
    set_price = cost_outputs(
        load_gpu("h100-sxm"), load, CostOptions(overrides={"gpu_price_usd.h100-sxm": 1e3})
    )
    assert (set_price["gpu_price_basis"], set_price["gpu_price_usd"]) == ("set", 1000)


def test_a_die_no_wafer_holds_says_so_when_a_given_price_prices_it() -> None:
    # a given price or rent prices the tokens, but the build ledger stays null, and its note said nothing
    huge = load_gpu("h100-sxm").model_copy(update={"die": load_gpu("h100-sxm").die.model_copy(
        update={"published_area_mm2": 1e5})})  # fmt: skip
    for options in (CostOptions(gpu_price_usd=3e4), CostOptions(gpu_usd_per_hour=2.0)):
        out = cost_outputs(huge, LOAD, options)
        assert out["gpu_cost_usd"] is None and out["usd_per_million_output_tokens"] is not None
        assert out["cost_note"].startswith("build cost and embodied carbon not priced: a 100000 mm² die")


@pytest.mark.parametrize(
    "path", ["operation.electricity_usd_per_kwh", "operation.server_power_multiplier", "gpu_price_usd.b200",
             "default_markup"],
)  # fmt: skip
def test_the_renters_ledger_refuses_the_facts_it_does_not_read(path: str) -> None:
    """The rate replaces the purchase price and the electricity bill: a fact that sets either moved nothing
    (a server multiplier of 2 gave 0.19387 $/Mtoken either way)."""
    value = load_cost_facts().value(path)
    with pytest.raises(ConfigError, match=re.escape(f"drop cost.{path}")):
        cost_outputs(load_gpu("h100-sxm"), LOAD, CostOptions(gpu_usd_per_hour=2.0, overrides={path: value}))
    cost_outputs(load_gpu("h100-sxm"), LOAD, CostOptions(overrides={path: value}))  # the owner's: read

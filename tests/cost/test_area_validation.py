"""`dse validate area`: the acceptance bounds of issue 23 and the shipped fit."""

from __future__ import annotations

import pytest

from dse.calibrate.validate.area import fit_area_scale, ga100_components, validate_area
from dse.cost.area import logic_ratio
from dse.cost.facts import load_cost_facts
from dse.hardware.catalog import list_gpus, load_gpu


def test_every_published_die_within_ten_percent_leave_one_out() -> None:
    rows = validate_area()
    assert {r["gpu"] for r in rows} == set(list_gpus())
    for r in rows:
        assert set(r) >= {"gpu", "published_mm2", "predicted_mm2", "error_pct"}
        if r["published_mm2"] is None:
            assert r["error_pct"] is None  # an estimate (B200's two dies)
        elif not r["in_fit"]:
            # GV100 (12 nm): listed, a known miss of the N7 (GA100) component content, not of the node scaling
            assert 10.0 < r["error_pct"] < 40.0, r
        else:
            assert abs(r["error_pct"]) <= 10.0, r


def test_ga100_components_within_25_percent() -> None:
    rows = ga100_components()
    assert len(rows) == 7
    for r in rows:
        assert abs(r["error_pct"]) <= 25.0, r
    # the rows partition the die shot's 822.7 mm² (cost-facts.md 1.5)
    assert sum(r["published_mm2"] for r in rows) == pytest.approx(822.7, abs=0.1)


def test_the_shipped_scale_is_the_fit_on_every_published_die() -> None:
    facts = load_cost_facts()
    gpus = [g for g in (load_gpu(n) for n in list_gpus()) if g.die and g.die.published_area_mm2]
    assert fit_area_scale(gpus, facts) == pytest.approx(facts.value("area.scale"), abs=1e-3)


def test_16_12_nm_logic_scales_by_achieved_densities_of_dies_outside_the_catalog() -> None:
    facts = load_cost_facts()
    # GA100 54.2 B / 826 mm² over the Turing 12FFN dies' 24.6 MTr/mm², not CSET's 96.3 / 28.9 = 3.3
    assert logic_ratio(facts, "tsmc-12ffn") == pytest.approx(65.6 / 24.6)
    # GV100's own 21.1 B / 815 mm² lies outside the range the node's density was taken from (honest LOO)
    low, high = (
        getattr(facts.entries["nodes.tsmc-12ffn.achieved_density_mtr_per_mm2"], k) for k in ("low", "high")
    )
    assert not low <= 21.1e3 / 815 <= high
    # nodes without an achieved density keep the library ratio (4N's dies spread 98-125 MTr/mm²)
    assert logic_ratio(facts, "tsmc-4n") == pytest.approx(96.3 / 138.2)
    assert logic_ratio(facts, "samsung-8n") == pytest.approx(96.3 / 61.2)
    assert logic_ratio(facts, "tsmc-n7") == 1.0

"""`dse validate area`: the acceptance bounds of issue 23 and the shipped fit."""

from __future__ import annotations

import pytest

from dse.calibrate.validate.area import fit_area_scale, ga100_components, validate_area
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
            assert r["error_pct"] > 10.0, r  # GV100 (12 nm): a known miss of the node scaling, listed
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

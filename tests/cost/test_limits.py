"""What the ledger prices although it could not be built so: a die past the reticle field, an interposer past
CoWoS-S's largest. Priced (a what-if may be hypothetical), with a note in `cost_note` and under the text."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dse.cli import app
from dse.cost.build import build_cost, build_notes, interposer_mm2
from dse.cost.facts import load_cost_facts
from dse.cost.operation import Throughput, cost_outputs
from dse.hardware.catalog import load_gpu

LOAD = Throughput(num_gpus=1, avg_power_w=500.0, output_tokens_per_s=2000.0, energy_per_output_token_j=0.25)
RETICLE_MM2 = 26 * 33  # the scanner field, 858 mm² (cost-facts.md 2)
COWOS_S_MM2 = 2500  # 3 reticles, CoWoS-S5 (cost-facts.md 5)


def _notes(gpu_name: str, overrides: dict | None = None) -> tuple[str, tuple[str, ...]]:
    gpu, facts = load_gpu(gpu_name, overrides), load_cost_facts()
    build = build_cost(gpu, facts)
    return f"{build.die_area_mm2:.0f}", build_notes(gpu, build.die_area_mm2, facts)


def test_the_limits_are_the_sourced_figures() -> None:
    facts = load_cost_facts()
    assert facts.value("limits.reticle_mm2") == RETICLE_MM2
    assert facts.value("limits.cowos_s_interposer_mm2") == COWOS_S_MM2


def test_a_die_past_the_reticle_is_priced_with_a_note() -> None:
    """The H100 ported to N7 models 1091 mm² in one die (the newcomer's report): past 858 mm², so no scanner
    exposes it; its cost fell 382 -> 312 $ with no word. The catalog H100 (814 mm², published) fits."""
    area, notes = _notes("h100-sxm", {"die.process_node": "tsmc-n7"})
    assert float(area) > RETICLE_MM2
    assert any("reticle" in n and f"{float(area):,.0f} mm²" in n for n in notes), notes
    assert not any("reticle" in n for n in _notes("h100-sxm")[1])
    # the same silicon in two dies is under the field per die (1091 / 2 = 546 mm²)
    _, split = _notes("h100-sxm", {"die.process_node": "tsmc-n7", "die.num_dies": 2})
    assert not any("reticle" in n for n in split)


def test_an_interposer_past_cowos_s_is_priced_with_a_note() -> None:
    """H100: 1.6 x (814 + 6 x 121 mm² HBM sites) = 2464 mm², under CoWoS-S's 2,500; eight HBM sites on the
    same die need 1.6 x (814 + 8 x 121) = 2851 mm² or more."""
    facts = load_cost_facts()
    h100 = load_gpu("h100-sxm")
    assert interposer_mm2(h100, 814.0, facts) == pytest.approx(1.6 * (814 + 6 * 121))
    assert not _notes("h100-sxm")[1]
    _, notes = _notes("h100-sxm", {"memory.technology": "hbm3", "memory.bus_width_bits": 8192})
    assert any("CoWoS-S" in n for n in notes), notes
    # a GDDR part has no interposer to be past anything
    assert interposer_mm2(load_gpu("l40s"), 608.5, facts) == 0.0


def test_a_part_of_several_dies_is_held_to_cowos_l() -> None:
    """B200 ships on CoWoS-L ([TI-B200]), whose interposer reaches ~5.5 reticles (~4,700 mm², cost-facts.md
    5): its modelled 3,259 mm² interposer is past CoWoS-S's 2,500 but within CoWoS-L's, so the catalog part
    carries no note; doubling its HBM sites takes it past CoWoS-L too."""
    facts = load_cost_facts()
    assert facts.value("limits.cowos_l_interposer_mm2") == 4700
    b200 = load_gpu("b200")
    assert COWOS_S_MM2 < interposer_mm2(b200, 1069.0, facts) < 4700
    assert not _notes("b200")[1]
    # dies of 2 x 1,000 mm² beside the eight sites: 1.6 x (2000 + 8 x 121) = 4749 mm², past CoWoS-L too
    notes = build_notes(b200, 2000.0, facts)
    assert any("CoWoS-L" in n and "no package holds it" in n for n in notes), notes


def test_the_note_travels_with_the_ledger_and_the_cli_says_it() -> None:
    n7 = load_gpu("h100-sxm", {"die.process_node": "tsmc-n7"})
    out = cost_outputs(n7, LOAD)
    assert out["gpu_cost_usd"] > 0 and "reticle" in out["cost_note"]  # priced, and said
    assert "cost_note" not in cost_outputs(load_gpu("h100-sxm"), LOAD)
    args = ["predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--set", "die.process_node=tsmc-n7",
            "--batch", "8", "--input-tokens", "128", "--output-tokens", "16"]  # fmt: skip
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    payload = json.loads(result.stdout)
    assert "reticle" in payload["cost_note"] and payload["usd_per_million_output_tokens"] > 0
    text = CliRunner().invoke(app, args)
    assert text.exit_code == 0, text.output
    # 1,091 mm²: the area the newcomer's report gives this what-if (the area model is unchanged)
    assert "warning: the die is 1,091 mm², over the 858 mm² reticle" in " ".join(text.stdout.split())
    assert "GPU build cost ($)" in text.stdout  # the table is still there

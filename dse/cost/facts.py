"""The cost and carbon constants: `data/cost_facts.yaml`, one dated, ranged, sourced entry per constant.

    facts = load_cost_facts()                                   # mid values
    facts = load_cost_facts("low", {"memory_usd_per_gb.hbm3": 12})  # cheap end, with an override
    facts.value("nodes.tsmc-4n.wafer_usd")                      # 16988.0

Paths are the YAML's dotted keys. `--set cost.<path>=<number>` overrides one value; `--cost-scenario
low|high` moves every price (an entry whose unit is in USD) to that end of its range first, so an explicit
override always wins. Nothing in `dse.cost` holds a constant of its own.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace
from functools import cache
from importlib import resources
from typing import Any, Literal

from dse.config.yamlio import parse_yaml_value
from dse.errors import ConfigError

Scenario = Literal["low", "mid", "high"]
SCENARIOS: tuple[str, ...] = ("low", "mid", "high")
_FACT_KEYS = ("value", "low", "high", "unit", "date", "tag", "source")


@dataclass(frozen=True, slots=True)
class Fact:
    value: float
    low: float
    high: float
    unit: str
    date: str
    tag: str
    source: str

    @property
    def is_price(self) -> bool:
        return "USD" in self.unit


@dataclass(frozen=True)
class CostFacts:
    """Every constant by dotted path; `scenario` and `overridden` say how the values were chosen."""

    entries: Mapping[str, Fact]
    scenario: str = "mid"
    overridden: tuple[str, ...] = ()

    def value(self, path: str) -> float:
        fact = self.entries.get(path)
        if fact is None:
            raise ConfigError(f"cost fact '{path}' is not defined; see `dse cost facts`")
        return fact.value

    def has(self, path: str) -> bool:
        return path in self.entries

    def names(self, section: str) -> list[str]:
        """The keys directly under `section` (node names, memory technologies, grid presets)."""
        prefix = section + "."
        return sorted({p[len(prefix) :].split(".")[0] for p in self.entries if p.startswith(prefix)})


def _fact(path: str, raw: Any) -> Fact:
    if not isinstance(raw, Mapping) or set(raw) != set(_FACT_KEYS):
        raise ConfigError(f"cost_facts.yaml: '{path}' must have exactly the keys {', '.join(_FACT_KEYS)}")
    nums = [raw[k] for k in ("value", "low", "high")]
    if any(isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) for v in nums):
        raise ConfigError(f"cost_facts.yaml: '{path}' value, low and high must be finite numbers")
    value, low, high = (float(v) for v in nums)
    if not low <= value <= high:
        raise ConfigError(f"cost_facts.yaml: '{path}' needs low <= value <= high, got {low}, {value}, {high}")
    return Fact(value, low, high, *(str(raw[k]) for k in ("unit", "date", "tag", "source")))


def _flatten(raw: Mapping[str, Any], prefix: str = "") -> dict[str, Fact]:
    out: dict[str, Fact] = {}
    for key, node in raw.items():
        path = f"{prefix}{key}"
        if isinstance(node, Mapping) and "value" not in node:
            out.update(_flatten(node, path + "."))
        else:
            out[path] = _fact(path, node)
    return out


@cache
def _base_facts() -> CostFacts:
    text = resources.files("dse.cost").joinpath("data/cost_facts.yaml").read_text(encoding="utf-8")
    return CostFacts(_flatten(parse_yaml_value(text, "cost_facts.yaml")))


# An override may reach this many times the top of the fact's published range: far past any real value
# (a typo or a fuzz past it overflowed the ledger into inf, 1e308 wafers).
MAX_OVERRIDE_FACTOR = 1000.0
# Facts the ledger divides by: a density, a bit-cell area, the yield model's clustering, the wafer size.
_POSITIVE = ("density_mtr_per_mm2", "sram_mm2_per_bit", "clustering_alpha", "wafer_diameter_mm")
# Facts with a flag of their own, whose ranges `dse.cost.operation` checks and names by the flag
# (--electricity-usd-per-kwh takes up to 1000 $/kWh, more than 1,000 x the fact's 0.127).
FLAG_RANGED = frozenset(
    f"operation.{name}" for name in ("lifetime_years", "utilization", "pue", "electricity_usd_per_kwh")
)


def _number_problem(path: str, value: Any, fact: Fact | None = None) -> str | None:
    """What is wrong with `value` for the fact at `path` (None if nothing); the caller names the value."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return f"expected a finite number, got {value!r}"
    if value < 0 or (value == 0 and path.endswith(_POSITIVE)):
        return f"must be {'> 0' if value == 0 else '>= 0'}, got {value!r}"
    if fact is not None and value > (most := MAX_OVERRIDE_FACTOR * max(fact.high, fact.value)):
        unit = "" if fact.unit == "1" else " " + fact.unit
        return f"{value:g} is over {MAX_OVERRIDE_FACTOR:g} x the top of its range ({most:g}{unit})"
    return None


def _number(path: str, value: Any, fact: Fact | None = None) -> float:
    problem = _number_problem(path, value, fact)
    if problem is not None:
        raise ConfigError(f"override 'cost.{path}': {problem}")
    return float(value)


@cache
def _scenario_facts(scenario: str) -> CostFacts:
    base = _base_facts()
    if scenario == "mid":
        return base
    entries = {
        p: replace(f, value=f.low if scenario == "low" else f.high) if f.is_price else f
        for p, f in base.entries.items()
    }
    return CostFacts(entries, scenario)


def load_cost_facts(scenario: str = "mid", overrides: Mapping[str, Any] | None = None) -> CostFacts:
    """The facts at a scenario's end of every price range, then `overrides` (path -> number; a leading
    `cost.` is optional) applied to the values."""
    if scenario not in SCENARIOS:
        raise ConfigError(f"cost scenario '{scenario}' is not one of {', '.join(SCENARIOS)}")
    facts = _scenario_facts(scenario)
    if not overrides:
        return facts
    entries = dict(facts.entries)
    for raw_path, value in overrides.items():
        path = str(raw_path).strip().removeprefix("cost.")
        if path not in entries:
            head, tail = path.split(".")[0], path.split(".")[-1]
            near = sorted(p for p in entries if p.split(".")[0] == head or p.endswith("." + tail))[:8]
            hint = f"; e.g. {', '.join(near)}" if near else "; see `dse cost facts`"
            raise ConfigError(f"override 'cost.{path}': no such cost fact{hint}")
        bounded = None if path in FLAG_RANGED else entries[path]
        entries[path] = replace(entries[path], value=_number(path, value, bounded))
    return CostFacts(
        entries, scenario, tuple(sorted(str(p).strip().removeprefix("cost.") for p in overrides))
    )


def split_cost_overrides(overrides: Mapping[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """`--set` paths into (GPU overrides, cost overrides): `cost.` paths are costs, the rest GPU fields."""
    gpu: dict[str, Any] = {}
    cost: dict[str, Any] = {}
    for path, value in (overrides or {}).items():
        if str(path).strip().startswith("cost."):
            cost[str(path).strip().removeprefix("cost.")] = value
        else:
            gpu[path] = value
    return gpu, cost


def grid_gco2_per_kwh(
    facts: CostFacts, grid: str | float | None, given: str = "--grid-gco2-per-kwh"
) -> float:
    """A grid intensity from a number or a preset name (`grid_presets` in the facts); None -> the default.
    `given` names the value in errors: the flag, or nothing where the caller names it (a study's field);
    `--grid-gco2-per-kwh -5` was reported as `override 'cost.operation.grid_gco2_per_kwh'`."""
    if grid is None:
        return facts.value("operation.grid_gco2_per_kwh")
    text = str(grid).strip().lower()
    try:
        value = grid if isinstance(grid, int | float) and not isinstance(grid, bool) else float(text)
    except ValueError:
        value = None
    if value is not None:
        problem = _number_problem(
            "operation.grid_gco2_per_kwh", value, facts.entries["operation.grid_gco2_per_kwh"]
        )
        if problem is not None:
            raise ConfigError(f"{given}: {problem}" if given else problem)
        return float(value)
    if not facts.has(f"grid_presets.{text}"):
        raise ConfigError(
            f"{given + ' ' if given else ''}'{grid}' is neither a number nor a region; regions: "
            f"{', '.join(facts.names('grid_presets'))}"
        )
    return facts.value(f"grid_presets.{text}")

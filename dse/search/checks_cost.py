"""A study's cost checks (`dse.search.checks` runs them at load): the `cost:` section as `dse predict` takes
its flags, and one cost fact's path and value as `--set cost.*` takes them."""

from __future__ import annotations

import logging
from typing import Any

from dse.config.yamlio import SourceMap, located_error
from dse.errors import ConfigError
from dse.search.space import SearchSpace
from dse.search.study import StudyConfig


def cost_fact_problem(path: str, value: Any = None) -> str | None:
    """Why `path` (`cost.` optional) is no cost fact, or `value` (default: the fact's own) no value for it:
    `--set cost.*`'s rules, an `operation.*` fact's range included (a searched PUE of 20 was accepted). The
    caller names where it is written, so the message leaves out the `override 'cost.<path>':` of `--set`."""
    from dse.cost.facts import load_cost_facts
    from dse.cost.operation import CostOptions

    key = path.strip().removeprefix("cost.")
    if value is None:
        facts = load_cost_facts("mid")
        value = facts.entries[key].value if facts.has(key) else 0.0
    try:
        CostOptions(overrides={key: value}).facts()
    except ConfigError as exc:
        return str(exc).removeprefix(f"override 'cost.{key}': ")
    return None


# The `cost:` fields that set the fact `operation.<field>` (and win over it: `CostOptions.facts`).
_FACT_FIELDS = ("lifetime_years", "utilization", "electricity_usd_per_kwh", "pue", "grid_gco2_per_kwh")


def check_cost(cfg: StudyConfig, smap: SourceMap, space: SearchSpace) -> None:
    """The `cost:` section as `dse predict` takes its flags, each problem at the field written: a value out
    of its range (`cost.pue`, not the flag `--pue`), the renter's rate beside a price it replaces (a field,
    a fact or a searched one: every point priced alike), one fact given twice (a field, `facts:`, a space
    parameter: all but one were ignored unsaid), a grid region."""
    from dse.cost.facts import grid_gco2_per_kwh
    from dse.cost.operation import OPERATION_RANGES, CostOptions, operation_value_problem

    c = cfg.cost
    for key in OPERATION_RANGES:
        value = getattr(c, key)
        problem = None if value is None else operation_value_problem(key, value)
        if problem is not None:
            raise located_error(smap, ("cost", key), problem)
    _check_renter(cfg, smap, space)
    fixed = {f"operation.{k}": f"cost.{k}" for k in _FACT_FIELDS if getattr(c, k) is not None}

    def fixed_by(key: str) -> str | None:  # `cost.gpu_price_usd` replaces every published price
        price = c.gpu_price_usd is not None and key.startswith("gpu_price_usd.")
        return "cost.gpu_price_usd" if price else fixed.get(key)

    for path, value in c.facts.items():
        key, where = path.strip().removeprefix("cost."), ("cost", "facts", path)
        if (field := fixed_by(key)) is not None:
            raise located_error(smap, where, f"{field} and cost.facts.{path} set the same fact; give one")
        fixed[key] = f"cost.facts.{path}"
        problem = cost_fact_problem(key, value)
        if problem is not None:
            raise located_error(smap, where, problem)
    for name in cfg.space:
        key = space.path_of(name).removeprefix("cost.")
        if space.path_of(name).startswith("cost.") and (field := fixed_by(key)) is not None:
            msg = f"cost.{key} is searched here and fixed by {field}; give one"
            raise located_error(smap, ("space", name), msg)
    try:
        options = CostOptions(
            c.scenario, c.facts, c.lifetime_years, c.utilization, c.electricity_usd_per_kwh, c.pue,
            c.grid_gco2_per_kwh, c.gpu_usd_per_hour, c.gpu_price_usd,
        )  # fmt: skip
        facts = options.facts()
    except ConfigError as exc:
        raise located_error(smap, ("cost",), str(exc)) from None
    try:
        grid_gco2_per_kwh(facts, options.grid, given="")  # named by the field, not by the flag
    except ConfigError as exc:
        raise located_error(smap, ("cost", "grid_gco2_per_kwh"), str(exc)) from None


def _check_renter(cfg: StudyConfig, smap: SourceMap, space: SearchSpace) -> None:
    """The renter's rate (`cost.gpu_usd_per_hour`) beside a price only the owner's ledger reads, at the
    field, fact or space parameter written: a searched electricity price moved no objective."""
    from dse.cost.operation import renter_ignores, renter_problem

    c = cfg.cost
    if c.gpu_usd_per_hour is None:
        return
    owner = [f"cost.{k}" for k in ("gpu_price_usd", "electricity_usd_per_kwh") if getattr(c, k) is not None]
    if owner:
        raise located_error(smap, ("cost", "gpu_usd_per_hour"), renter_problem(owner))
    rate = "cost.gpu_usd_per_hour (the renter's rate)"
    for path in c.facts:
        if renter_ignores(path):
            raise located_error(smap, ("cost", "facts", path), renter_problem([f"cost.facts.{path}"], rate))
    for name in cfg.space:
        path = space.path_of(name)
        if path.startswith("cost.") and renter_ignores(path):
            raise located_error(smap, ("space", name), renter_problem([f"the searched {path}"], rate))
    if any(space.path_of(name).startswith("gpu.") for name in cfg.space):  # as `dse compare` warns
        logging.getLogger(__name__).warning(
            "cost.gpu_usd_per_hour rents every searched GPU design at one rate, which favours the fastest by "
            "construction; a purchase price (cost.gpu_price_usd, the base GPU's) moves with each design's "
            "build cost"
        )

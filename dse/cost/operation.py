"""Cost and carbon of operation: $ per GPU-hour, $ per million tokens, gCO2 per token (DESIGN 15).

Owner view: the purchase price amortized over `lifetime_years` at `utilization`, plus electricity for the
GPU's average power x the server's power multiplier x PUE x $/kWh. Renter view (`gpu_usd_per_hour` given):
the rent replaces the owner's ledger, energy included, so `energy_cost_fraction` is not known (None).

    usd_per_million_output_tokens = usd_per_gpu_hour x GPUs / (output tokens/s x 3600) x 1e6
                                    (all-in: tokens/s over the whole run, prefill included)
    usd_per_million_input_tokens  = the same $ rate over the prefill time only, per input token
                                    (None where prefill is not separable: under load it shares steps);
                                    that time is inside the output price too: the two are not additive
    gco2_per_output_token         = J per output token / 3.6e6 x PUE x grid gCO2/kWh   (GPU energy)
    embodied_gco2_per_output_token = embodied gCO2 x GPUs / (lifetime hours x utilization x tokens/hour)

Electricity counts the server around the GPU (Epoch's multiplier); carbon counts the GPU's energy, as
ML.ENERGY and zeus measure it, so the two identities stay exact and separate.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dse.cost.build import BuildCost, build_cost, build_notes, price_basis
from dse.cost.facts import CostFacts, grid_gco2_per_kwh, load_cost_facts
from dse.errors import ConfigError, UnpricedError
from dse.hardware.spec import GpuSpec

HOURS_PER_YEAR = 8766.0  # 365.25 days
J_PER_KWH = 3.6e6
# The JSON keys every predicting command adds (None where a value does not apply).
COST_KEYS: tuple[str, ...] = (
    "die_area_mm2",
    "die_cost_usd",
    "memory_cost_usd",
    "package_cost_usd",
    "board_cost_usd",
    "gpu_cost_usd",
    "gpu_price_usd",
    "usd_per_gpu_hour",
    "usd_per_million_output_tokens",
    "usd_per_million_input_tokens",
    "energy_cost_fraction",
    "gco2_per_output_token",
    "embodied_gco2_per_output_token",
)


@dataclass(frozen=True)
class CostOptions:
    """What the user chose (`--cost-scenario`, `--set cost.*`, `--lifetime-years` ...); None = the fact's
    default."""

    scenario: str = "mid"
    overrides: Mapping[str, Any] = field(default_factory=dict)
    lifetime_years: float | None = None
    utilization: float | None = None
    electricity_usd_per_kwh: float | None = None
    pue: float | None = None
    grid: str | float | None = None
    gpu_usd_per_hour: float | None = None
    gpu_price_usd: float | None = None

    def facts(self) -> CostFacts:
        given = {
            "operation.lifetime_years": self.lifetime_years,
            "operation.utilization": self.utilization,
            "operation.electricity_usd_per_kwh": self.electricity_usd_per_kwh,
            "operation.pue": self.pue,
        }
        flags = {k: v for k, v in given.items() if v is not None}
        facts = load_cost_facts(self.scenario, {**self.overrides, **flags})
        _check_operation(facts, flags)
        _check_prices(self)
        if self.gpu_usd_per_hour is not None:
            owner = [k for k in ("gpu_price_usd", "electricity_usd_per_kwh") if getattr(self, k) is not None]
            owner += [f"cost.{p}" for p in self.overrides if renter_ignores(p)]
            if owner:
                raise ConfigError(renter_problem(owner, "gpu_usd_per_hour (the renter's rate)"))
        return facts


# The facts only the owner's ledger reads: the renter's rate replaces the purchase price (published, or build
# cost x markup) and the electricity bill. PUE, the grid, lifetime and utilization still price carbon.
_OWNER_ONLY_FACTS = (
    "operation.electricity_usd_per_kwh",
    "operation.server_power_multiplier",
    "default_markup",
)


def renter_ignores(path: str) -> bool:
    """Whether the renter's ledger leaves the cost fact at `path` (`cost.` optional) unread."""
    key = str(path).strip().removeprefix("cost.")
    return key in _OWNER_ONLY_FACTS or key.startswith("gpu_price_usd.")


def renter_problem(given: Sequence[str], rate: str = "the renter's rate") -> str:
    """The refusal of owner-only prices beside a renter's rate: `given` names each as the user wrote it (a
    flag, `--set cost.<path>`, a swept or searched path), `rate` the rate (a flag, a study field). A sweep
    or search over one ran every point alike, and read as "this price does not matter"."""
    return (
        f"{rate} replaces the owner's ledger (purchase price and electricity): drop {', '.join(given)}, "
        "which only the owner's ledger reads"
    )


# The range of each operating assumption and of each price given as a flag, with what the bound means: past
# them a number is a typo, and the hardware cost amortized over a vanishing lifetime or utilization (1e-308
# years) divides to infinity. The CLI checks its flags against the same table before building the facts.
OPERATION_RANGES: dict[str, tuple[float, float, str]] = {
    "lifetime_years": (0.01, 100.0, " (0.01 years is about 4 days)"),
    "utilization": (1e-3, 1.0, ""),
    "pue": (1.0, 10.0, " (facility power over IT power)"),
    "electricity_usd_per_kwh": (0.0, 1e3, ""),
    "gpu_usd_per_hour": (0.0, 1e6, ""),
    "gpu_price_usd": (0.0, 1e10, ""),
}


def operation_value_problem(key: str, value: float) -> str | None:
    """What is wrong with `value` for OPERATION_RANGES[key] (NaN is out of every range), None if nothing:
    the caller names what the user gave (a flag, a `--set` path, a study's `cost.<key>`)."""
    low, high, note = OPERATION_RANGES[key]
    # `1e309` overflows to inf when read: said as what it was, not as an `inf` the user never wrote
    shown = "a number past a float's range" if math.isinf(value) else f"{value:g}"
    return None if low <= value <= high else f"must be in [{low:g}, {high:g}]{note}, got {shown}"


def check_operation_value(key: str, value: float, override: bool = False) -> None:
    """ConfigError unless `value` is in OPERATION_RANGES[key], naming what the user gave: the flag (`--` +
    key), or with `override` the fact's path (`--set cost.operation.pue=20`, a study's facts)."""
    problem = operation_value_problem(key, value)
    if problem is not None:
        given = f"override 'cost.operation.{key}':" if override else "--" + key.replace("_", "-")
        raise ConfigError(f"{given} {problem}")


def _check_operation(facts: CostFacts, flags: Mapping[str, Any]) -> None:
    """`flags`: the `operation.*` values given as flags; the others are overrides or in-range defaults."""
    for key in ("lifetime_years", "utilization", "pue", "electricity_usd_per_kwh"):
        path = f"operation.{key}"
        check_operation_value(key, facts.value(path), override=path not in flags)


def _check_prices(options: CostOptions) -> None:
    for key in ("gpu_usd_per_hour", "gpu_price_usd"):
        value = getattr(options, key)
        if value is not None:
            check_operation_value(key, value)


@dataclass(frozen=True, slots=True)
class Throughput:
    """What a prediction gives the ledger, for the whole deployment."""

    num_gpus: int
    avg_power_w: float  # per GPU
    output_tokens_per_s: float
    energy_per_output_token_j: float  # all GPUs
    input_tokens: float | None = None  # prefill separable: input tokens and the prefill time they took
    prefill_s: float | None = None

    @classmethod
    def from_metrics(cls, metrics: Mapping[str, Any], input_tokens: float | None = None) -> Throughput:
        """From a serving estimate's metrics (static or under load). `input_tokens`: the prompts of a static
        batch, prefilled together before decoding, so `ttft_s` is their separable prefill time."""
        return cls(
            num_gpus=int(metrics.get("num_gpus") or 1),
            avg_power_w=float(metrics["avg_power_w"] or 0.0),
            output_tokens_per_s=float(metrics["output_tokens_per_s"] or 0.0),
            energy_per_output_token_j=float(metrics["energy_per_output_token_j"] or 0.0),
            input_tokens=input_tokens,
            prefill_s=None if input_tokens is None else float(metrics["ttft_s"]),
        )


def _hours(facts: CostFacts) -> float:
    return facts.value("operation.lifetime_years") * HOURS_PER_YEAR * facts.value("operation.utilization")


def _per_million(usd_per_s: float, tokens_per_s: float) -> float | None:
    return usd_per_s / tokens_per_s * 1e6 if tokens_per_s > 0 and math.isfinite(tokens_per_s) else None


def operation_outputs(
    build: BuildCost | None, facts: CostFacts, load: Throughput, options: CostOptions
) -> dict[str, float | None]:
    """$ and carbon per GPU-hour and per token (module docstring). `build` None: a GPU with no build ledger
    (no die to size), priced from `options`' hourly or purchase price alone, with no embodied carbon."""
    energy_usd_h = (
        load.avg_power_w
        / 1e3
        * facts.value("operation.server_power_multiplier")
        * facts.value("operation.pue")
        * facts.value("operation.electricity_usd_per_kwh")
    )
    if options.gpu_usd_per_hour is not None:
        usd_h, fraction = options.gpu_usd_per_hour, None
    else:
        price = build.gpu_price_usd if build is not None else float(options.gpu_price_usd or 0.0)
        usd_h = price / _hours(facts) + energy_usd_h
        # None when nothing runs (an infeasible point has no power): no share to speak of, not 0%
        fraction = energy_usd_h / usd_h if usd_h > 0 and load.avg_power_w > 0 else None
    usd_per_s = usd_h * load.num_gpus / 3600.0
    input_cost = None
    if load.input_tokens and load.prefill_s is not None:
        input_cost = _per_million(usd_per_s * load.prefill_s, load.input_tokens)
    pue, grid = facts.value("operation.pue"), grid_gco2_per_kwh(facts, options.grid)
    tokens_per_h = load.output_tokens_per_s * 3600.0
    embodied = (
        build.embodied_gco2 * load.num_gpus / (_hours(facts) * tokens_per_h)
        if tokens_per_h > 0 and build is not None
        else None
    )
    return {
        "usd_per_gpu_hour": usd_h,
        "usd_per_million_output_tokens": _per_million(usd_per_s, load.output_tokens_per_s),
        "usd_per_million_input_tokens": input_cost,
        "energy_cost_fraction": fraction,
        "gco2_per_output_token": load.energy_per_output_token_j / J_PER_KWH * pue * grid,
        "embodied_gco2_per_output_token": embodied,
    }


def cost_outputs(gpu: GpuSpec, load: Throughput, options: CostOptions | None = None) -> dict[str, Any]:
    """Every `COST_KEYS` entry for one deployment of `gpu` (build ledger per GPU, operation for all)."""
    options = options or CostOptions()
    facts = options.facts()
    try:
        build: BuildCost | None = build_cost(gpu, facts, options.gpu_price_usd)
    except UnpricedError as exc:
        if options.gpu_usd_per_hour is None and options.gpu_price_usd is None:
            raise
        build = None  # an hourly or purchase price prices the run; the ledger (dies, memory, ...) stays null
        # and says why: a 100,000 mm² die read as a cost-neutral what-if once a price was given
        notes: tuple[str, ...] = (f"build cost and embodied carbon not priced: {exc}",)
    if build is not None:
        out: dict[str, Any] = {k: v for k, v in build.as_dict().items() if k in COST_KEYS}
        notes = build_notes(gpu, build.die_area_mm2, facts)
    else:
        out = {**dict.fromkeys(COST_KEYS), "gpu_price_usd": options.gpu_price_usd}
    out.update(operation_outputs(build, facts, load, options))
    if notes:  # a die past the reticle, an interposer past CoWoS-S: priced, and said
        out["cost_note"] = "; ".join(notes)
    out["cost_view"] = "renter" if options.gpu_usd_per_hour is not None else "owner"
    out["cost_scenario"] = options.scenario
    given = options.gpu_price_usd is not None
    out["gpu_price_basis"] = "given" if given else (price_basis(gpu, facts) if build is not None else None)
    return out


# The cost keys of a training step (`dse predict --training`, training studies): the build ledger, the $ rate,
# and per trained token (LLMs) or per sample (vision models) where serving has per output token.
TRAINING_COST_KEYS: tuple[str, ...] = (
    *(k for k in COST_KEYS if "output_token" not in k and "input_token" not in k),
    "usd_per_step",
    "usd_per_million_tokens",
    "gco2_per_token",
    "embodied_gco2_per_token",
    "usd_per_million_samples",
    "gco2_per_sample",
    "embodied_gco2_per_sample",
)


def training_cost_outputs(
    gpu: GpuSpec, metrics: Mapping[str, Any], options: CostOptions | None = None
) -> dict[str, Any]:
    """`TRAINING_COST_KEYS` of one training step's `metrics` (`TrainingEstimate.metrics`): the serving
    ledger with the step's trained tokens (or samples) in place of output tokens, and $ per step."""
    llm = "tokens_per_s_per_gpu" in metrics
    n = int(metrics["num_gpus"])
    units_per_s = float(metrics["tokens_per_s_per_gpu"]) * n if llm else float(metrics["samples_per_s"])
    energy_j = float(metrics["energy_per_token_j" if llm else "energy_per_sample_j"])
    out = cost_outputs(gpu, Throughput(n, float(metrics["avg_power_w"]), units_per_s, energy_j), options)
    unit = "token" if llm else "sample"
    out[f"usd_per_million_{unit}s"] = out.pop("usd_per_million_output_tokens")
    out[f"gco2_per_{unit}"] = out.pop("gco2_per_output_token")
    out[f"embodied_gco2_per_{unit}"] = out.pop("embodied_gco2_per_output_token")
    del out["usd_per_million_input_tokens"]
    out["usd_per_step"] = out["usd_per_gpu_hour"] * n * float(metrics["step_time_s"]) / 3600.0
    if not metrics.get("feasible", True):  # as a serving estimate that does not fit: the ledger alone
        out |= {k: None for k in ("usd_per_step", f"usd_per_million_{unit}s", f"gco2_per_{unit}")}
        out[f"embodied_gco2_per_{unit}"] = None
    return out

"""The `search:` section of a study file (`dse.search.study`'s schema): the sampler and the budget.

Every section of a study file is a `StrictModel`: frozen, unknown keys refused, no NaN or infinities, and a
number is a number (not true/false, not a quoted number).
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

ExecutorKind = Literal["ray", "process", "serial"]
DEFAULT_BATCH_SIZE = 64  # points asked per batch by a sampler that learns nothing from results


def integral_float(annotation: Any, value: Any) -> Any:
    """`value` as an int where the field is an integer and the value a float with no fraction: the YAML
    loader reads `1e4` as 10000.0, and who writes it means 10000 (10.5, true and '10' stay refused)."""
    if annotation in (int, int | None) and type(value) is float and value.is_integer():
        return int(value)
    return value


def integral_floats(model: type[BaseModel], data: dict[str, Any]) -> dict[str, Any]:
    """`data` (a model's raw input) with `integral_float` applied to each of `model`'s fields."""
    fields = model.model_fields
    return {k: integral_float(fields[k].annotation, v) if k in fields else v for k, v in data.items()}


class StrictModel(BaseModel):
    # strict: YAML's true/false and quoted numbers were read as 1/0 and numbers (`batch: true` ran a batch
    # of 1, `gpu_memory_utilization: true` gave the engine all memory); an integer field takes no 64.5
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, strict=True)

    @model_validator(mode="before")
    @classmethod
    def _integral_floats(cls, data: Any) -> Any:
        return integral_floats(cls, data) if isinstance(data, dict) else data


# --- samplers ---------------------------------------------------------------------------------------------


class GridSamplerConfig(StrictModel):
    """Every point of a finite space (our own enumerator, deduplicated); `shuffle` permutes it by seed."""

    kind: Literal["grid"]
    shuffle: bool = False


class RandomSamplerConfig(StrictModel):
    kind: Literal["random"]


class QmcSamplerConfig(StrictModel):
    """Scrambled Sobol (or Halton) low-discrepancy points: even coverage for sweeps and sensitivity."""

    kind: Literal["qmc"]
    qmc_type: Literal["sobol", "halton"] = "sobol"
    scramble: bool = True


class _GeneticSamplerConfig(StrictModel):
    """What NSGA-II and NSGA-III share: the population (a batch) and the variation probabilities."""

    population: int = Field(default=64, ge=2, strict=True)
    mutation_prob: float | None = Field(default=None, ge=0, le=1)
    crossover_prob: float = Field(default=0.9, ge=0, le=1)
    swapping_prob: float = Field(default=0.5, ge=0, le=1)

    @property
    def default_batch_size(self) -> int:
        return self.population  # one generation


class Nsga2SamplerConfig(_GeneticSamplerConfig):
    kind: Literal["nsga2"]


# NSGA-III's reference directions number comb(objectives + p - 1, p) for dividing parameter p, and Optuna
# builds them as that many p-tuples: p = 1e5 took 23 GB before the first generation ended. Deb and Jain
# (2014) use 91-275 directions for 3-15 objectives; these bounds leave ~40x that.
MAX_DIVIDING_PARAMETER = 1000
MAX_REFERENCE_DIRECTIONS = 10_000


class Nsga3SamplerConfig(_GeneticSamplerConfig):
    """NSGA-III: for three or more objectives (reference directions from `dividing_parameter`)."""

    kind: Literal["nsga3"]
    dividing_parameter: int = Field(default=3, ge=1, le=MAX_DIVIDING_PARAMETER, strict=True)

    def directions_problem(self, n_objectives: int) -> str | None:
        """Why this many objectives and `dividing_parameter` make too many reference directions, or None."""
        count = math.comb(n_objectives + self.dividing_parameter - 1, self.dividing_parameter)
        if count <= MAX_REFERENCE_DIRECTIONS:
            return None
        return (
            f"{self.dividing_parameter} with {n_objectives} objectives makes {count:,} reference directions "
            f"(at most {MAX_REFERENCE_DIRECTIONS:,}; Deb and Jain use 91-275, about the population)"
        )


class TpeSamplerConfig(StrictModel):
    """TPE: sample-efficient but ~40 ms/point of bookkeeping; use for budgets under ~1000 points."""

    kind: Literal["tpe"]
    n_startup_trials: int = Field(default=10, ge=1, strict=True)
    multivariate: bool = False
    constant_liar: bool = True

    @property
    def default_batch_size(self) -> int:
        # TPE learns from the points told, and the driver tells a batch only after asking all of it: a
        # first batch larger than the startup trials is drawn at random (64 made a 60-point TPE study the
        # random sampler's, point for point). Not the workers' count: the batch decides which points are
        # proposed, and a run resumed on another executor or machine must propose the same ones.
        return self.n_startup_trials


SamplerConfig = Annotated[
    GridSamplerConfig
    | RandomSamplerConfig
    | QmcSamplerConfig
    | Nsga2SamplerConfig
    | Nsga3SamplerConfig
    | TpeSamplerConfig,
    Field(discriminator="kind"),
]


def _sampler_shorthand(value: Any) -> Any:
    return {"kind": value} if isinstance(value, str) else value


class SearchConfig(StrictModel):
    sampler: Annotated[SamplerConfig, BeforeValidator(_sampler_shorthand)] = Field(
        default_factory=lambda: Nsga2SamplerConfig(kind="nsga2")
    )
    # strict: `true` is not a count (pydantic would read it as 1)
    n_points: int = Field(
        default=1000, ge=1, le=10**9, strict=True, description="budget: distinct evaluated points"
    )
    time_budget_s: float | None = Field(default=None, gt=0)
    patience: int | None = Field(
        default=None, ge=1, strict=True, description="batches without progress (pareto.RunFront)"
    )
    min_improvement: float = Field(default=1e-6, ge=0, description="relative hypervolume gain that counts")
    batch_size: int | None = Field(default=None, ge=1, strict=True)
    chunk_size: int | None = Field(default=None, ge=1, strict=True)
    executor: ExecutorKind = "ray"
    workers: int | None = Field(default=None, ge=1, le=4096, strict=True)
    seed: int = Field(
        default=0, ge=0, lt=2**32, strict=True, description="the sampler's seed (numpy takes 32 bits)"
    )

    @property
    def effective_batch_size(self) -> int:
        """Points asked per batch: `batch_size`, else the sampler's `default_batch_size`, else
        DEFAULT_BATCH_SIZE (grid, random and qmc learn nothing from results: any batch proposes the same)."""
        if self.batch_size is not None:
            return self.batch_size
        return getattr(self.sampler, "default_batch_size", DEFAULT_BATCH_SIZE)

"""Search spaces: one mapping per parameter (spaces/*.yaml, or inline in a study).

    parameters:
      gpu.num_sms:          {type: int, low: 66, high: 144, step: 6}     # inclusive bounds
      gpu.memory.technology: {values: [hbm3, hbm3e]}                     # ordered/categorical list
      hbm3_rate:            {path: gpu.memory.data_rate_gbit_per_s, type: float, low: 3.2, high: 6.4,
                             when: {gpu.memory.technology: hbm3}}        # conditional, aliased path
      sm_clock_mhz:         {values: [1410, 1755, 1980]}
      precision:            {value: bf16}                                # constant

Kinds: `{type: int, low, high, step?, log?}`, `{type: float, low, high, step?, log?}` (bounds inclusive, as in
Optuna), `{values: [...]}` and `{value: x}`. Every kind takes `when: {other_param: value | [values]}` (the
parameter exists only when each named parameter exists and has one of the values) and `path:` (the
point path it sets; default: the parameter's name). Two parameters may set the same path only when their
`when`s on one parameter are disjoint, so at most one is active.

A design point is a flat `{path: value}` dict; its id is a hash of its canonical JSON (`point_id`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Discriminator, Field, Tag, field_validator, model_validator

from dse.search.search_config import integral_floats

Scalar = bool | int | float | str
Point = dict[str, Any]


# Integers a run directory can store (trials.parquet columns are 64-bit).
INT64_LIMIT = 2**63
# A float step is at least FLOAT_STEP_SHARE of the largest value: a float near x holds no step under
# ~2.2e-16 x, so a finer one repeated a value and the grid sampler searched its copies for a new point for
# ever; it also keeps the step count under 2e15, which Optuna counts in 28-digit decimals (1e28 of them raised
# DivisionImpossible). Grid values are rounded GRID_DECIMALS decimals (0.1 + 0.2 is 0.3), or 3 decimals
# finer than the step where that is finer (SI values such as 5e-13 J/bit are steps too).
GRID_DECIMALS = 12
FLOAT_STEP_SHARE = 1e-15


def _check_int64(value: Any) -> None:
    if isinstance(value, int) and not isinstance(value, bool) and not -INT64_LIMIT <= value < INT64_LIMIT:
        raise ValueError(f"{value} does not fit in 64 bits (at most {INT64_LIMIT - 1} in magnitude)")
    if isinstance(value, list | tuple):
        for item in value:
            _check_int64(item)


def _scalar_problem(value: Any) -> str | None:
    """Why `value` is no parameter value, said here: the Scalar union's own error named its first branch
    ("values.0.bool: Input should be a valid boolean (got nan)", also for null, a list or a mapping)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f"is {value}: values are finite numbers, names or true/false"
    if not isinstance(value, bool | int | float | str):
        shown = "null" if value is None else str(value)[:100]
        return f"is {shown}: values are finite numbers, names or true/false"
    return None


class _ParamBase(BaseModel):
    # allow_inf_nan=False: a bound or value of .inf / .nan is an error with its line, not a NaN point;
    # strict: as in the study's sections (dse.search.search_config.StrictModel), `low: true` is no 1
    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False, strict=True)
    TAG: ClassVar[str] = ""

    @model_validator(mode="before")
    @classmethod
    def _fits_64_bits(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            for key in ("low", "high", "step", "value", "values"):
                _check_int64(data.get(key))
            return integral_floats(cls, dict(data))  # an int parameter's `high: 1e4` is 10000
        return data

    path: str | None = Field(default=None, description="point path this parameter sets (default: its name)")
    when: dict[str, Scalar | list[Scalar]] | None = Field(default=None, description="activation condition")

    @field_validator("when", mode="before")
    @classmethod
    def _when_scalars(cls, when: Any) -> Any:
        for key, wanted in when.items() if isinstance(when, Mapping) else ():
            for v in wanted if isinstance(wanted, list) else [wanted]:
                if (problem := _scalar_problem(v)) is not None:
                    raise ValueError(f"{key}: value {problem}")
        return when

    def grid_values(self) -> Iterable[Any]:
        """The values in grid order, built lazily (a range may hold 2^64 of them)."""
        raise NotImplementedError

    def grid_count(self) -> int:
        """How many values `grid_values` yields, computed, not counted."""
        raise NotImplementedError

    def value_problem(self, value: Any) -> str | None:
        """Why `value` (read back from a run log) is no value this parameter takes, or None."""
        raise NotImplementedError

    @property
    def is_finite(self) -> bool:
        return True


class IntParam(_ParamBase):
    """Integers low..high (both inclusive) in steps of `step`; `log` samples on a log scale."""

    TAG: ClassVar[str] = "int"
    type: Literal["int"]
    low: int
    high: int
    step: int = Field(default=1, gt=0)
    log: bool = False

    @model_validator(mode="after")
    def _check(self) -> IntParam:
        if self.low > self.high:
            raise ValueError(f"low ({self.low}) must not exceed high ({self.high})")
        if self.log and self.low < 1:
            raise ValueError(f"log: true needs low >= 1 (got {self.low})")
        if self.log and self.step != 1:
            raise ValueError("log: true needs step 1 (Optuna cannot combine log with a step)")
        if (self.high - self.low) % self.step:
            raise ValueError(f"high - low ({self.high - self.low}) must be a multiple of step ({self.step})")
        return self

    def grid_values(self) -> range:
        return range(self.low, self.high + 1, self.step)

    def grid_count(self) -> int:
        return (self.high - self.low) // self.step + 1

    def value_problem(self, value: Any) -> str | None:
        if not isinstance(value, int) or isinstance(value, bool):
            return f"{value!r} is not an integer"
        if not self.low <= value <= self.high:
            return f"{value} is outside [{self.low}, {self.high}]"
        if (value - self.low) % self.step:
            return f"{value} is not {self.low} + a multiple of its step {self.step}"
        return None


class FloatParam(_ParamBase):
    """Reals in [low, high]; with `step` only low + k*step (grid-able); `log` samples on a log scale."""

    TAG: ClassVar[str] = "float"
    type: Literal["float"]
    low: float
    high: float
    step: float | None = Field(default=None, gt=0)
    log: bool = False

    @model_validator(mode="after")
    def _check(self) -> FloatParam:
        if not (math.isfinite(self.low) and math.isfinite(self.high)):
            raise ValueError("low and high must be finite")
        if self.low > self.high:
            raise ValueError(f"low ({self.low:g}) must not exceed high ({self.high:g})")
        if not math.isfinite(self.high - self.low):  # samplers draw low + u x (high - low)
            raise ValueError(f"high - low overflows ({self.low:g} to {self.high:g}): narrow the range")
        if self.log and self.low <= 0:
            raise ValueError(f"log: true needs low > 0 (got {self.low:g})")
        if self.log and self.step is not None:
            raise ValueError("give either log: true or step, not both")
        if self.step is not None:
            k = (self.high - self.low) / self.step
            top = max(abs(self.low), abs(self.high))
            if self.step < FLOAT_STEP_SHARE * top:  # also keeps k below 2e15: round(k) below is finite
                raise ValueError(
                    f"step {self.step:g} is too fine for values up to {top:g}: at least "
                    f"{FLOAT_STEP_SHARE * top:g} ({FLOAT_STEP_SHARE:g} of the largest value)"
                )
            if abs(k - round(k)) > 1e-9 * max(1.0, abs(k)):
                raise ValueError(
                    f"high - low ({self.high - self.low:g}) must be a multiple of step ({self.step:g})"
                )
        return self

    @property
    def is_finite(self) -> bool:
        return self.step is not None or self.low == self.high

    def grid_values(self) -> Iterator[float]:
        n = self.grid_count()
        if self.step is None:  # low == high
            return iter([self.low])
        decimals = max(GRID_DECIMALS, 3 - math.floor(math.log10(self.step)))
        return (float(round(self.low + i * self.step, decimals)) for i in range(n))

    def grid_count(self) -> int:
        if self.step is None:
            if self.low == self.high:
                return 1
            raise ValueError("a float parameter needs `step` to be enumerated by the grid sampler")
        return int(round((self.high - self.low) / self.step)) + 1

    def value_problem(self, value: Any) -> str | None:
        if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
            return f"{value!r} is not a finite number"
        # NOTE: slack of a rounding error: samplers compute low + k * step, and grid values are rounded
        slack = 1e-9 * max(abs(self.low), abs(self.high), self.step or 0.0)
        if not self.low - slack <= value <= self.high + slack:
            return f"{value:g} is outside [{self.low:g}, {self.high:g}]"
        if self.step is not None:
            k = (value - self.low) / self.step
            if abs(k - round(k)) > 1e-6:
                return f"{value:g} is not {self.low:g} + a multiple of its step {self.step:g}"
        return None


class ChoiceParam(_ParamBase):
    """One of an ordered list of values (DVFS tables, technologies, precisions)."""

    TAG: ClassVar[str] = "choice"
    values: list[Scalar] = Field(min_length=1)

    @field_validator("values", mode="before")
    @classmethod
    def _scalars(cls, values: Any) -> Any:
        for i, v in enumerate(values if isinstance(values, list) else []):
            if (problem := _scalar_problem(v)) is not None:
                raise ValueError(f"value {i} {problem}")
        return values

    @model_validator(mode="after")
    def _check(self) -> ChoiceParam:
        seen: list[Any] = []
        for v in self.values:
            if any(v == s and type(v) is type(s) for s in seen):
                raise ValueError(f"value {v!r} is listed twice")
            seen.append(v)
        return self

    def grid_values(self) -> list[Any]:
        return list(self.values)

    def grid_count(self) -> int:
        return len(self.values)

    def value_problem(self, value: Any) -> str | None:
        if _matches(value, self.values):
            return None
        return f"{value!r} is not one of its values ({', '.join(map(str, self.values))})"


class ConstParam(_ParamBase):
    """A fixed value (recorded with every point so that reports show it)."""

    TAG: ClassVar[str] = "constant"
    value: Scalar

    @field_validator("value", mode="before")
    @classmethod
    def _scalar(cls, value: Any) -> Any:
        if (problem := _scalar_problem(value)) is not None:
            raise ValueError(f"value {problem}")
        return value

    def grid_values(self) -> list[Any]:
        return [self.value]

    def grid_count(self) -> int:
        return 1

    def value_problem(self, value: Any) -> str | None:
        return None if _matches(value, [self.value]) else f"{value!r} is not its value {self.value!r}"


def _param_kind(data: Any) -> str | None:
    if isinstance(data, _ParamBase):
        return data.TAG
    if not isinstance(data, Mapping):
        return None
    if "type" in data:
        return str(data["type"])
    if "values" in data:
        return "choice"
    if "value" in data:
        return "constant"
    return None


ParamSpec = Annotated[
    Annotated[IntParam, Tag("int")]
    | Annotated[FloatParam, Tag("float")]
    | Annotated[ChoiceParam, Tag("choice")]
    | Annotated[ConstParam, Tag("constant")],
    Discriminator(
        _param_kind,
        custom_error_type="param_kind",
        custom_error_message="a parameter needs `type: int|float` (low, high), `values: [...]` or `value: x`",
    ),
]


class SpaceFile(BaseModel):
    """A reusable space file (spaces/*.yaml)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    description: str = ""
    parameters: dict[str, ParamSpec] = Field(min_length=1)


def point_id(point: Mapping[str, Any]) -> str:
    """Stable id of a design point: sha1 of its canonical JSON (sorted keys), 16 hex digits."""
    text = json.dumps(point, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def _allowed(cond: Scalar | list[Scalar]) -> list[Any]:
    return list(cond) if isinstance(cond, list) else [cond]


def _matches(value: Any, allowed: Sequence[Any]) -> bool:
    """Whether `value` is one of `allowed`; numbers within rounding (a stepped float range's sampler draws
    0.7 + 2 x 0.1 = 0.8999999999999999 for a `when:` written 0.9), booleans only as booleans."""
    return any(isinstance(value, bool) == isinstance(a, bool) and _same(value, a) for a in allowed)


def _same(value: Any, other: Any) -> bool:
    numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (value, other))
    return bool(value == other) or (numbers and math.isclose(value, other, rel_tol=1e-9, abs_tol=1e-12))


def _never_taken(cond: Scalar | list[Scalar], ref: str, spec: _ParamBase) -> str | None:
    """Why a `when` on parameter `ref` (of `spec`) can never hold, or None: an empty list, a value the
    parameter never takes (off its range or its step grid, not among its values), or any value of a
    continuous range, which a sampled real equals with probability zero. The parameter it guards would
    silently never exist."""
    wanted = _allowed(cond)
    if not wanted:
        return f"an empty list matches no value of '{ref}'"
    if isinstance(spec, ChoiceParam | ConstParam):
        possible = spec.grid_values()
        bad = [c for c in wanted if not _matches(c, possible)]
        return (
            f"{bad[0]!r} is never a value of '{ref}' (allowed: {', '.join(map(str, possible))})"
            if bad
            else None
        )
    if isinstance(spec, FloatParam) and spec.step is None:
        return (
            f"'{ref}' is a continuous range: a sampled value never equals {wanted[0]!r}; give it a step "
            "or values"
        )
    if isinstance(spec, IntParam | FloatParam):
        step = float(spec.step or 1)
        for c in wanted:
            number = isinstance(c, int | float) and not isinstance(c, bool)
            k = (float(c) - spec.low) / step if number else math.nan
            if not (number and spec.low <= c <= spec.high and abs(k - round(k)) <= 1e-9 * max(1.0, abs(k))):
                return (
                    f"{c!r} is never a value of '{ref}' ({spec.low:g} to {spec.high:g} in steps of {step:g})"
                )
    return None


class SearchSpace:
    """Parameters in dependency order, with sampling, grid enumeration and a description for reports."""

    def __init__(self, params: Mapping[str, _ParamBase]) -> None:
        self.params: dict[str, _ParamBase] = dict(params)
        self.order: tuple[str, ...] = _dependency_order(self.params)

    def path_of(self, name: str) -> str:
        return self.params[name].path or name

    @property
    def paths(self) -> list[str]:
        """Distinct point paths in declaration order."""
        return list(dict.fromkeys(self.path_of(n) for n in self.params))

    def _resolve_ref(self, ref: str) -> str | None:
        if ref in self.params:
            return ref
        by_path = [n for n in self.params if self.path_of(n) == ref]
        return by_path[0] if len(by_path) == 1 else None

    def is_active(self, name: str, values: Mapping[str, Any]) -> bool:
        """True when `name`'s `when` holds for the values chosen so far (keyed by parameter name)."""
        when = self.params[name].when
        if not when:
            return True
        for ref, cond in when.items():
            other = self._resolve_ref(ref)
            if other is None or other not in values or not _matches(values[other], _allowed(cond)):
                return False
        return True

    def sample(self, suggest: Callable[[str, _ParamBase], Any]) -> dict[str, Any]:
        """Values by parameter name, asking `suggest(name, spec)` for each active non-constant one."""
        values: dict[str, Any] = {}
        for name in self.order:
            if not self.is_active(name, values):
                continue
            spec = self.params[name]
            values[name] = spec.value if isinstance(spec, ConstParam) else suggest(name, spec)
        return values

    def to_point(self, values: Mapping[str, Any]) -> Point:
        """{path: value} in declaration order from values by parameter name."""
        return {self.path_of(n): values[n] for n in self.params if n in values}

    def active_point(self, logged: Mapping[str, Any]) -> Point:
        """A point as the sampler made it, from a logged row that has every path (a table row holds None
        for a parameter its `when` switched off, and None can also be a chosen value): each parameter in
        order, kept only where its `when` holds for those before it."""
        values: dict[str, Any] = {}
        for name in self.order:
            if self.is_active(name, values) and self.path_of(name) in logged:
                values[name] = logged[self.path_of(name)]
        return self.to_point(values)

    def point_problem(self, point: Mapping[str, Any]) -> str | None:
        """Why `point` (a logged one) is no point of this space, or None: each parameter active for the
        values before it has a value it takes, and no other path is set."""
        values: dict[str, Any] = {}
        for name in self.order:
            if not self.is_active(name, values):
                continue
            path = self.path_of(name)
            if path not in point:
                return f"{path}: missing"
            if (problem := self.params[name].value_problem(point[path])) is not None:
                return f"{path}: {problem}"
            values[name] = point[path]
        extra = [p for p in point if p not in self.to_point(values)]
        return f"{extra[0]}: no parameter of the study sets it here" if extra else None

    @property
    def is_finite(self) -> bool:
        return all(p.is_finite for p in self.params.values())

    def iter_grid(self) -> Iterator[Point]:
        """Every distinct point of a finite space, in a fixed order (first parameter slowest)."""
        seen: set[str] = set()

        def rec(i: int, values: dict[str, Any]) -> Iterator[dict[str, Any]]:
            if i == len(self.order):
                yield dict(values)
                return
            name = self.order[i]
            if not self.is_active(name, values):
                yield from rec(i + 1, values)
                return
            for v in self.params[name].grid_values():
                values[name] = v
                yield from rec(i + 1, values)
                del values[name]

        for values in rec(0, {}):
            point = self.to_point(values)
            pid = point_id(point)
            if pid not in seen:
                seen.add(pid)
                yield point

    def grid_size_bound(self) -> int:
        """Product of the value counts (an upper bound when parameters are conditional)."""
        return math.prod(p.grid_count() for p in self.params.values())

    def describe(self) -> list[dict[str, Any]]:
        """One dict per parameter for summary.json: path, name, kind and its range or values."""
        out = []
        for name, spec in self.params.items():
            d: dict[str, Any] = {"path": self.path_of(name), "name": name}
            if isinstance(spec, IntParam | FloatParam):
                d.update(kind=spec.type, low=spec.low, high=spec.high, log=spec.log)
                if spec.step is not None:
                    d["step"] = spec.step
            elif isinstance(spec, ChoiceParam):
                d.update(kind="categorical", values=list(spec.values))
            elif isinstance(spec, ConstParam):
                d.update(kind="constant", value=spec.value, values=[spec.value])
            if spec.when:
                d["when"] = dict(spec.when)
            out.append(d)
        return out

    def problems(self) -> list[tuple[tuple[str, ...], str]]:
        """Structural problems as (location under the space, message): bad `when`s, clashing paths."""
        out: list[tuple[tuple[str, ...], str]] = []
        for name, spec in self.params.items():
            for ref, cond in (spec.when or {}).items():
                other = self._resolve_ref(ref)
                if other is None:
                    out.append(
                        (
                            (name, "when", ref),
                            f"'{ref}' is not a parameter of this space "
                            f"(allowed: {', '.join(n for n in self.params if n != name) or 'none: add it'})",
                        )
                    )
                    continue
                if other == name:
                    out.append(((name, "when", ref), "a parameter cannot depend on itself"))
                    continue
                problem = _never_taken(cond, ref, self.params[other])
                if problem is not None:
                    out.append(((name, "when", ref), problem))
        by_path: dict[str, list[str]] = {}
        for name in self.params:
            by_path.setdefault(self.path_of(name), []).append(name)
        for path, names in by_path.items():
            for a, b in itertools.combinations(names, 2):
                if not _exclusive(self.params[a], self.params[b], self):
                    out.append(
                        (
                            (b,),
                            f"sets '{path}' like '{a}'; two parameters may share a path only when "
                            "their `when` conditions on one parameter are disjoint",
                        )
                    )
        return out


def _exclusive(a: _ParamBase, b: _ParamBase, space: SearchSpace) -> bool:
    for ref, cond in (a.when or {}).items():
        other_cond = (b.when or {}).get(ref)
        if other_cond is None:
            continue
        if not any(_matches(x, _allowed(other_cond)) for x in _allowed(cond)):
            return True
    return False


def _dependency_order(params: Mapping[str, _ParamBase]) -> tuple[str, ...]:
    """Declaration order, moved only as far as needed to put every parameter after those it depends on."""
    names = list(params)

    def deps(name: str) -> list[str]:
        out = []
        for ref in params[name].when or {}:
            if ref in params:
                out.append(ref)
            else:
                out.extend(n for n in names if (params[n].path or n) == ref)
        return [d for d in out if d != name]

    order: list[str] = []
    state: dict[str, int] = {}

    def visit(name: str, stack: tuple[str, ...]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            raise ValueError(f"conditional parameters depend on each other in a cycle: {' -> '.join(stack)}")
        state[name] = 1
        for d in deps(name):
            visit(d, (*stack, d))
        state[name] = 2
        order.append(name)

    for name in names:
        visit(name, (name,))
    return tuple(order)

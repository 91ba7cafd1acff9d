"""Parameter sweeps and GPU comparisons: the points `dse sweep` and `dse compare` evaluate, and their rows.

    axes = [parse_axis("sm_clock_mhz=1000:1980:5", ctx), parse_axis("batch=1:32:3", ctx)]
    rows = run_sweep(axes, ctx)          # 5 x 3 rows, one per point, in the order of the grid
    rows = compare_gpus(["h100-sxm", "a100-sxm-80gb"], ctx)

A sweep axis is `PATH=START:STOP:STEPS` in the one vocabulary of a study's points (`dse.search.objective`):
any `gpu.*` override path (`dse gpu fields`), `sm_clock_mhz`, `power_cap_w` and the numeric serving
workload keys of `SWEEP_WORKLOAD_KEYS`. STEPS is the number of points (a linspace); integer fields (batch,
concurrency, `gpu.num_sms`, ...) are rounded and duplicates removed.

Each point goes through `evaluate_point` (via `evaluate_chunk`, so a point that raises becomes a row with
its error and the sweep goes on). A row is `{"params", "status", "feasible", "reason", "metrics"}` with SI
metrics; status is feasible, infeasible or failed (the point raised), `reason` the infeasibility or the
error (None for a feasible point).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dse.errors import ConfigError
from dse.search.objective import (
    LOAD_MODES,
    OPERATING_POINT_KEYS,
    EvalContext,
    build_inputs,
    evaluate_chunk,
    evaluate_point,
)
from dse.units import si_key

# Numeric workload keys a sweep may vary, and the modes each applies to (None: every mode).
SWEEP_WORKLOAD_KEYS: dict[str, tuple[str, ...] | None] = {
    "batch": ("static",),
    "concurrency": ("concurrency",),
    "request_rate_per_s": ("request_rate",),
    "input_tokens": None,
    "output_tokens": None,
    "num_requests": ("concurrency", "request_rate", "max_throughput"),
    "max_num_seqs": ("concurrency", "request_rate", "max_throughput"),
    "max_batched_tokens": ("concurrency", "request_rate", "max_throughput"),
    "gpu_memory_utilization": ("concurrency", "request_rate", "max_throughput"),
    "host_step_s": ("concurrency", "request_rate", "max_throughput"),
    "layer_host_s": ("concurrency", "request_rate", "max_throughput"),
}
INT_KEYS: frozenset[str] = frozenset(
    {"batch", "concurrency", "input_tokens", "output_tokens", "num_requests", "max_num_seqs",
     "max_batched_tokens"}
)  # fmt: skip
# (metric key, label, display scale, format): what the table and the figures show, in display units.
SWEEP_METRICS: tuple[tuple[str, str, float, str], ...] = (
    ("ttft_s", "TTFT (ms)", 1e3, ".2f"),
    ("tpot_s", "TPOT (ms)", 1e3, ".3f"),
    ("output_tokens_per_s", "output tokens/s", 1.0, ".0f"),
    ("energy_per_output_token_j", "J per output token", 1.0, ".4f"),
    ("avg_power_w", "avg power per GPU (W)", 1.0, ".0f"),
    ("usd_per_million_output_tokens", "$ per M output tokens", 1.0, ".3r"),
)
# The carbon of a token, shown beside SWEEP_METRICS when a cost fact is swept: PUE and the grid move nothing
# else (a renter's sweep of either printed equal rows), nor, for a renter, do lifetime and utilization.
SWEEP_CARBON_METRICS: tuple[tuple[str, str, float, str], ...] = (
    ("gco2_per_output_token", "gCO2 per output token (operational)", 1.0, ".3g"),
    ("embodied_gco2_per_output_token", "gCO2 per output token (embodied)", 1.0, ".3g"),
)
COMPARE_METRICS: tuple[tuple[str, str, float, str], ...] = (
    ("ttft_s", "TTFT (ms)", 1e3, ".2f"),
    ("tpot_s", "TPOT (ms)", 1e3, ".3f"),
    ("e2e_latency_s", "end-to-end latency (s)", 1.0, ".3f"),
    ("output_tokens_per_s", "output tokens/s", 1.0, ".0f"),
    ("avg_power_w", "average power per GPU (W)", 1.0, ".0f"),
    ("peak_power_w", "peak power (W)", 1.0, ".0f"),
    ("energy_per_output_token_j", "J per output token", 1.0, ".4f"),
    ("energy_per_request_j", "energy per request (J)", 1.0, ".2f"),
    ("memory_bytes", "memory needed per GPU (GiB)", 2**-30, ".2f"),
    ("memory_capacity_bytes", "memory capacity (GiB)", 2**-30, ".1f"),
    ("gpu_cost_usd", "GPU build cost ($)", 1.0, ",.0f"),
    ("gpu_price_usd", "GPU price ($)", 1.0, ",.0f"),
    ("usd_per_gpu_hour", "$ per GPU-hour", 1.0, ".3r"),  # the basis of the next row: owned or rented
    ("usd_per_million_output_tokens", "$ per million output tokens", 1.0, ".3r"),
    ("gco2_per_output_token", "gCO2 per output token", 1.0, ".3g"),
)
AXIS_SYNTAX = "PATH=START:STOP:STEPS, e.g. sm_clock_mhz=1000:1980:5"
MAX_SWEEP_POINTS = 10_000  # a sweep prints when it is done: past this it is a study's job
# A path may hold '-': cost.gpu_price_usd.h100-sxm, as catalog GPU names are written (not a minus sign)
_AXIS_RE = re.compile(r"^\s*([A-Za-z_][\w.\-]*)\s*=\s*([^:]+):([^:]+):([^:]+)\s*$")


def sweep_metrics(paths: Sequence[str]) -> tuple[tuple[str, str, float, str], ...]:
    """The metrics a sweep of `paths` shows: SWEEP_METRICS, with SWEEP_CARBON_METRICS when a path is a cost
    fact (`cost.*`), whose rows could otherwise differ in gCO2 alone and read as equal."""
    carbon = any(path.startswith("cost.") for path in paths)
    return SWEEP_METRICS + (SWEEP_CARBON_METRICS if carbon else ())


@dataclass(frozen=True, slots=True)
class SweepAxis:
    """One swept parameter: its point path and the values it takes, in order."""

    path: str
    values: tuple[float | int, ...]


def _number(text: str, what: str, spec: str) -> float:
    try:
        value = float(text)
    except ValueError:
        problem = f"{what} {text.strip()!r} is not a number"
        raise ConfigError(f"sweep '{spec}': {problem} ({AXIS_SYNTAX})") from None
    if value != value or value in (float("inf"), float("-inf")):
        raise ConfigError(f"sweep '{spec}': {what} must be a finite number")
    return value


def _gpu_field(gpu: Any, path: str) -> tuple[bool, bool]:
    """(numeric, integer) of a valid gpu.* override path: derived knobs and memory-system keys are floats
    unless the GPU's value says otherwise; a human-unit spelling (`_mhz`, `_kib`) is never an integer."""
    from dse.hardware.overrides import IDENTITY_PATHS
    from dse.units import si_key

    if path.removeprefix("gpu.") in IDENTITY_PATHS:
        return False, False  # a name (None on a catalog GPU's `based_on`), never a numeric axis
    node: Any = gpu.model_dump()
    parts = path.removeprefix("gpu.").split(".")
    for i, part in enumerate(parts):
        key = si_key(part)[0] if i == len(parts) - 1 else part
        if not isinstance(node, dict) or key not in node:
            return True, False
        node = node[key]
    human = si_key(parts[-1])[0] != parts[-1]
    if isinstance(node, bool) or not isinstance(node, int | float):
        return node is None, False
    return True, isinstance(node, int) and not human


def _as_gpu_path(path: str, ctx: EvalContext) -> str:
    """`gpu.<path>` for a GPU field written as `dse gpu fields` lists it (`memory.bus_width_bits`), as
    `--set` takes it; any other path as it is."""
    if path.startswith(("gpu.", "cost.")) or path in OPERATING_POINT_KEYS or path in SWEEP_WORKLOAD_KEYS:
        return path
    from dse.hardware.catalog import load_gpu
    from dse.hardware.overrides import check_override_path

    return f"gpu.{path}" if check_override_path(load_gpu(ctx.gpu), path) is None else path


def _check_path(path: str, ctx: EvalContext, spec: str) -> bool:
    """Whether `path` is an integer parameter; ConfigError when it cannot be swept under `ctx`."""
    if path.startswith("gpu."):
        from dse.hardware.catalog import load_gpu
        from dse.hardware.overrides import check_override_path

        gpu = load_gpu(ctx.gpu)
        problem = check_override_path(gpu, path)
        if problem is not None:
            raise ConfigError(f"sweep '{spec}': {problem}")
        numeric, integer = _gpu_field(gpu, path)
        if not numeric:
            raise ConfigError(f"sweep '{spec}': {path} is not a number; a sweep varies numeric fields")
        return integer
    if path in OPERATING_POINT_KEYS:
        return False
    if path.startswith("cost."):  # a price or carbon constant (`dse cost facts`)
        from dse.cost.facts import load_cost_facts

        try:
            load_cost_facts("mid", {path: 0.0})
        except ConfigError as exc:
            raise ConfigError(f"sweep '{spec}': {exc}") from None
        return False
    if path not in SWEEP_WORKLOAD_KEYS:
        gpu_paths = "gpu.<field> (see `dse gpu fields`), cost.<fact> (see `dse cost facts`)"
        allowed = ", ".join((gpu_paths, *OPERATING_POINT_KEYS, *SWEEP_WORKLOAD_KEYS))
        raise ConfigError(f"sweep '{spec}': unknown parameter '{path}' (allowed: {allowed})")
    modes = SWEEP_WORKLOAD_KEYS[path]
    if modes is not None and ctx.mode not in modes:
        raise ConfigError(f"sweep '{spec}': {path} applies to mode {' or '.join(modes)}, not {ctx.mode}")
    return path in INT_KEYS


def linspace_values(start: float, stop: float, steps: int, *, integer: bool) -> tuple[float | int, ...]:
    """`steps` evenly spaced values from start to stop (inclusive); integers rounded, duplicates dropped."""
    raw = [start] if steps == 1 else [start + (stop - start) * i / (steps - 1) for i in range(steps)]
    values: list[float | int] = [int(round(v)) for v in raw] if integer else [float(v) for v in raw]
    return tuple(dict.fromkeys(values))


def _axis_value_problem(path: str, value: float, ctx: EvalContext) -> str | None:
    """What is wrong with one value of an axis that no point could take: a workload key's range, a cost
    fact's (a PUE of 0.5), a GPU field's own bounds (9e9 MHz); None also where the point decides."""
    from dse.hardware.overrides import field_value_problem
    from dse.search.checks import workload_value_problem
    from dse.search.checks_cost import cost_fact_problem

    if path in SWEEP_WORKLOAD_KEYS:
        problem = workload_value_problem(path, value, under_load=ctx.mode != "static")
        if problem is None and isinstance(value, int):
            from dse.serving.load import SIMULATION_LIMITS, per_replica_problem

            if path in SIMULATION_LIMITS:  # one simulation per replica
                problem = per_replica_problem(path, value, ctx.dp)
        return problem
    if path.startswith("cost."):
        problem = cost_fact_problem(path, value)
    elif path.startswith("gpu."):
        from dse.hardware.catalog import load_gpu

        problem = field_value_problem(path, value, load_gpu(ctx.gpu))
    else:
        return None
    return None if problem is None else f"{path}={value:g}: {problem}"


def parse_axis(spec: str, ctx: EvalContext) -> SweepAxis:
    """`PATH=START:STOP:STEPS` as a SweepAxis; ConfigError (one line) for bad syntax or an unknown path."""
    m = _AXIS_RE.match(spec)
    if m is None:
        raise ConfigError(f"sweep '{spec}': expected {AXIS_SYNTAX}")
    path, start_text, stop_text, steps_text = m.groups()
    start = _number(start_text, "START", spec)
    stop = _number(stop_text, "STOP", spec)
    steps = _number(steps_text, "STEPS", spec)
    if steps != int(steps) or not 1 <= steps <= 1000:
        raise ConfigError(f"sweep '{spec}': STEPS is the number of points, an integer 1-1000")
    path = _as_gpu_path(path, ctx)
    integer = _check_path(path, ctx, spec)
    values = linspace_values(start, stop, int(steps), integer=integer)
    for value in values:  # a value no point can take fails here, once, not at every point
        problem = _axis_value_problem(path, value, ctx)
        if problem is not None:
            raise ConfigError(f"sweep '{spec}': {problem}")
    return SweepAxis(path, values)


def _quantity(path: str) -> str:
    """The quantity a path sets, whatever its unit spelling; the memory's data rate is one quantity as a
    rate or as `data_rate_frac`, a share of its technology's range (given both, every point failed)."""
    key = si_key(path)[0]
    return "gpu.memory.data_rate" if key.removeprefix("gpu.").startswith("memory.data_rate_") else key


def sweep_points(axes: Sequence[SweepAxis], base: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
    """The grid of the axes (the first varies slowest), each point on top of the fixed `base` params."""
    paths = [a.path for a in axes]
    # one quantity under two unit spellings (sm_clock_max_mhz, sm_clock_max_hz) is one parameter: the
    # first axis had no effect, its rows repeated
    quantities = [_quantity(path) for path in paths]
    if len(set(quantities)) != len(quantities):
        raise ConfigError(f"sweep: each parameter once (got {', '.join(paths)})")
    fixed = {_quantity(key): key for key in base or {}}
    for path, quantity in zip(paths, quantities, strict=True):
        if quantity in fixed:  # a --set or --clock-mhz the sweep would override point by point
            key = fixed[quantity]
            flag = {"sm_clock_mhz": "--clock-mhz", "power_cap_w": "--power-cap-w"}.get(key, f"--set {key}")
            raise ConfigError(f"sweep: {path} is swept and also fixed by {flag}; drop one")
    total = math.prod(len(a.values) for a in axes)
    if total > MAX_SWEEP_POINTS:  # two 1,000-step axes ran hours with no output
        raise ConfigError(
            f"sweep: {total:,} points is over {MAX_SWEEP_POINTS:,}; use fewer STEPS, or a study with a grid "
            "sampler (`dse run`, which logs its points and resumes)"
        )
    return [
        {**(base or {}), **dict(zip(paths, combo, strict=True))}
        for combo in itertools.product(*(a.values for a in axes))
    ]


def _user_message(error: str) -> str:
    """A point's recorded error ("ExcType: message", `evaluate_chunk`) as a user reads it: a DseError's
    message alone (its class says nothing a user acts on), any other exception with its type."""
    from dse.errors import DseError

    names = {DseError.__name__, *(cls.__name__ for cls in DseError.__subclasses__())}
    kind, sep, message = error.partition(": ")
    return message if sep and kind in names else error


def _row(params: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
    """A row: status "feasible", "infeasible" (the model says why) or "failed" (the point raised)."""
    metrics = {k: v for k, v in result["metrics"].items() if k not in ("feasible", "infeasible_reason")}
    row: dict[str, Any] = {"params": dict(params), "status": "failed", "feasible": False}
    if result["error"] is not None:
        return row | {"reason": _user_message(str(result["error"])), "metrics": metrics}
    if bool(result["metrics"].get("feasible", True)):
        return row | {"status": "feasible", "feasible": True, "reason": None, "metrics": metrics}
    reason = str(result["metrics"].get("infeasible_reason") or "infeasible")
    return row | {"status": "infeasible", "reason": reason, "metrics": metrics}


def run_sweep(
    axes: Sequence[SweepAxis],
    ctx: EvalContext,
    base: Mapping[str, Any] | None = None,
    on_point: Callable[[int, int], None] | None = None,
) -> list[dict[str, Any]]:
    """One row per grid point (see the module docstring); `params` holds the swept values only.
    `on_point(done, total)` is called after each point (a progress bar)."""
    points = sweep_points(axes, base)
    paths = [a.path for a in axes]
    rows: list[dict[str, Any]] = []
    try:
        for point in points:  # one by one: a Ctrl-C keeps the rows done (SweepInterrupted)
            row = _row({p: point[p] for p in paths}, evaluate_chunk([point], ctx, evaluate_point)[0])
            if row["status"] != "failed" and point.get("mode", ctx.mode) in LOAD_MODES:
                # an engine preset's defaults depend on the GPU (vLLM's on its memory): a swept GPU
                # field can change them, which the rows must show
                row["engine"] = _engine_settings(dict(point), ctx)
            rows.append(row)
            if on_point is not None:
                on_point(len(rows), len(points))
    except KeyboardInterrupt:
        raise SweepInterrupted(rows, len(points)) from None
    return rows


class SweepInterrupted(KeyboardInterrupt):
    """Ctrl-C during a sweep, with the rows done so far (`rows`) of `total`."""

    def __init__(self, rows: list[dict[str, Any]], total: int) -> None:
        super().__init__(f"interrupted after {len(rows)} of {total} points")
        self.rows, self.total = rows, total


def compare_gpus(
    gpus: Sequence[str],
    ctx: EvalContext,
    params: Mapping[str, Any] | None = None,
    cost_by_gpu: Mapping[str, tuple[tuple[str, Any], ...]] | None = None,
) -> list[dict[str, Any]]:
    """The same workload (`ctx` plus the fixed `params`) on each GPU: one row per GPU, whose `params` is
    {"gpu": name}. `cost_by_gpu`: a GPU's own `EvalContext.cost` in place of `ctx.cost` (a renter's
    price per GPU: an L40S does not rent at an H100's rate)."""
    if len(gpus) < 2:
        raise ConfigError("compare: give at least two GPUs")
    rows = []
    for name in gpus:
        gpu_ctx = dataclasses.replace(ctx, gpu=name, cost=(cost_by_gpu or {}).get(name, ctx.cost))
        row = _row({"gpu": name}, evaluate_chunk([dict(params or {})], gpu_ctx, evaluate_point)[0])
        if row["status"] != "failed" and ctx.mode in LOAD_MODES:
            row["engine"] = _engine_settings(dict(params or {}), gpu_ctx)
        rows.append(row)
    return rows


def _engine_settings(params: dict[str, Any], ctx: EvalContext) -> dict[str, Any]:
    """The engine settings a load-mode point ran with on its GPU (engine presets depend on the GPU)."""
    from dse.serving.load import engine_settings, resolve_preset

    inputs = build_inputs(params, ctx)
    return engine_settings(resolve_preset(inputs["load"], inputs["gpu"]), inputs["load"])


__all__ = [
    "COMPARE_METRICS",
    "SWEEP_CARBON_METRICS",
    "SWEEP_METRICS",
    "SweepAxis",
    "SweepInterrupted",
    "compare_gpus",
    "linspace_values",
    "parse_axis",
    "run_sweep",
    "sweep_metrics",
    "sweep_points",
]

"""The per-point evaluation: a pure, module-level function that Ray and process pools can pickle.

    evaluate_point({"gpu.num_sms": 120, "sm_clock_mhz": 1755, "precision": "fp8"}, ctx)
        -> {"e2e_latency_s": ..., "energy_per_output_token_j": ..., "avg_power_w": ..., "tdp_w": 700.0, ...}

Parameter paths split by prefix:

    gpu.<dotted path>          GPU overrides, in the one vocabulary of `dse.hardware.overrides`
                               (`gpu.memory.technology`, `gpu.num_sms`, derived knobs such as
                               `gpu.sm.tensor_factor`), applied by `load_gpu`
    sm_clock_mhz, power_cap_w  the OperatingPoint (converted to SI here)
    model, batch, input_tokens, output_tokens, precision, attention
                               the serving workload (defaults come from the study's `workload:`)

Workers receive plain dicts and an `EvalContext`, and return plain dicts. `evaluate_chunk` runs a list of
points and records, per point, the metrics or the error (an exception never escapes a chunk).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, TypeGuard

from dse.units import MHZ

# Metric keys of ServingEstimate.metrics() (dse.serving), and the context the evaluation adds.
SERVING_METRICS: tuple[str, ...] = (
    "ttft_s",
    "tpot_s",
    "e2e_latency_s",
    "output_tokens_per_s",
    "energy_j",
    "energy_per_output_token_j",
    "avg_power_w",
    "peak_power_w",
    "memory_bytes",
    "memory_capacity_bytes",
    "effective_clock_hz",
)
CONTEXT_METRICS: tuple[str, ...] = ("tdp_w", "power_cap_w", "sm_clock_hz", "memory_bw_bytes_per_s")
OPERATING_POINT_KEYS: tuple[str, ...] = ("sm_clock_mhz", "power_cap_w")
WORKLOAD_KEYS: tuple[str, ...] = (
    "model",
    "batch",
    "input_tokens",
    "output_tokens",
    "precision",
    "attention",
    "kv_dtype",
    "engine",
    "sampling",
)
# The workload keys passed to dse.serving.ServingRequest as they are.
_REQUEST_KEYS = WORKLOAD_KEYS[1:]
# Keys of ServingEstimate.metrics() that are not numbers; the runner turns them into feasible/reason.
STATUS_KEYS: tuple[str, ...] = ("feasible", "infeasible_reason")

Evaluator = Callable[[Mapping[str, Any], "EvalContext"], Mapping[str, Any]]


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalContext:
    """What every point of a study shares: the base GPU, the model and the workload defaults.

    `options` carries settings for other evaluators (the toy functions in the tests), as sorted pairs so
    that the context stays hashable.
    """

    gpu: str = "h100-sxm"
    model: str = "llama-3.1-8b"
    batch: int = 1
    input_tokens: int = 1024
    output_tokens: int = 256
    precision: str = "bf16"
    attention: str = "flash"
    kv_dtype: str | None = None
    engine: str = "none"
    sampling: str = "none"
    options: tuple[tuple[str, Any], ...] = field(default=())


@lru_cache(maxsize=64)
def _arch(model: str) -> Any:
    from dse.workload.models import load_model_config

    return load_model_config(model)


def split_params(params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(gpu overrides incl. derived knobs, operating-point keys, workload keys); ValueError on others."""
    gpu: dict[str, Any] = {}
    op: dict[str, Any] = {}
    workload: dict[str, Any] = {}
    for path, value in params.items():
        if path.startswith("gpu."):
            gpu[path.removeprefix("gpu.")] = value
        elif path in OPERATING_POINT_KEYS:
            op[path] = value
        elif path in WORKLOAD_KEYS:
            workload[path] = value
        else:
            raise ValueError(f"parameter '{path}' is not a gpu.*, operating-point or workload path")
    return gpu, op, workload


def build_inputs(params: Mapping[str, Any], ctx: EvalContext) -> dict[str, Any]:
    """The arguments of `predict_serving` for one point (exposed for tests and `dse predict`-like uses)."""
    from dse.hardware.catalog import load_gpu
    from dse.perf.types import OperatingPoint

    gpu_over, op, wl = split_params(params)
    gpu = load_gpu(ctx.gpu, gpu_over)
    clock_mhz = op.get("sm_clock_mhz")
    point = OperatingPoint(
        sm_clock_hz=None if clock_mhz is None else float(clock_mhz) * MHZ,
        power_cap_w=None if op.get("power_cap_w") is None else float(op["power_cap_w"]),
    )
    return {
        "arch": _arch(str(wl.get("model", ctx.model))),
        "gpu": gpu,
        "batch": int(wl.get("batch", ctx.batch)),
        "input_tokens": int(wl.get("input_tokens", ctx.input_tokens)),
        "output_tokens": int(wl.get("output_tokens", ctx.output_tokens)),
        "precision": str(wl.get("precision", ctx.precision)),
        "attention": str(wl.get("attention", ctx.attention)),
        "kv_dtype": wl.get("kv_dtype", ctx.kv_dtype),
        "engine": str(wl.get("engine", ctx.engine)),
        "sampling": str(wl.get("sampling", ctx.sampling)),
        "point": point,
    }


def predict_inputs(inputs: Mapping[str, Any]) -> Any:
    """The serving estimate (`dse.serving.static.ServingEstimate`) of one point's `build_inputs` result."""
    from dse.serving import (
        static as serving,  # lazy: the search layer must not need the model stack at import
    )

    workload = {k: inputs[k] for k in _REQUEST_KEYS}
    return serving.predict_serving(
        inputs["arch"], inputs["gpu"], serving.ServingRequest(**workload), inputs["point"]
    )


def evaluate_point(params: Mapping[str, Any], ctx: EvalContext) -> dict[str, Any]:
    """Predict LLM serving for one design point; metrics plus the GPU context (TDP, power cap, clock).

    Raises DseError/ValueError/KeyError for points the model cannot evaluate; the chunk runner records
    them as failed points.
    """
    inputs = build_inputs(params, ctx)
    metrics = dict(predict_inputs(inputs).metrics())
    gpu, point = inputs["gpu"], inputs["point"]
    metrics.setdefault("tdp_w", gpu.power.tdp_w)
    metrics.setdefault("power_cap_w", point.power_cap_w if point.power_cap_w is not None else gpu.power.tdp_w)
    metrics.setdefault("sm_clock_hz", point.sm_clock_hz or gpu.clocks.boost_clock_hz)
    metrics.setdefault("memory_bw_bytes_per_s", gpu.memory.bw_bytes_per_s)
    return metrics


def serving_metric_names() -> tuple[str, ...]:
    """Numeric metrics of `ServingEstimate.metrics()` (read from the dataclass) plus the context metrics."""
    import dataclasses

    try:
        from dse.serving.static import ServingEstimate
    except ImportError:
        return SERVING_METRICS + CONTEXT_METRICS
    names = [
        f.name
        for f in dataclasses.fields(ServingEstimate)
        if str(f.type) in ("float", "int") and f.name not in STATUS_KEYS
    ]
    if "effective_clock_hz" in names:
        names.append("effective_clock_mhz")
    return tuple(dict.fromkeys([*names, *SERVING_METRICS, *CONTEXT_METRICS]))


evaluate_point.metric_names = serving_metric_names  # type: ignore[attr-defined]


def metric_names_of(evaluator: Evaluator) -> tuple[str, ...] | None:
    """The metric names an evaluator declares (`metric_names`: a tuple, or a function returning one)."""
    names = getattr(evaluator, "metric_names", None)
    if callable(names):
        names = names()
    return tuple(names) if names is not None else None


def _plain(value: Any) -> Any:
    if isinstance(value, bool | str) or value is None:
        return value
    if hasattr(value, "item"):  # numpy scalars
        value = value.item()
    if isinstance(value, int | float):
        return float(value) if isinstance(value, float) or not isinstance(value, int) else value
    return str(value)


def evaluate_chunk(points: Sequence[Mapping[str, Any]], ctx: EvalContext, evaluator: Evaluator) -> list[dict]:
    """Evaluate points one by one; each result is {"metrics", "error", "t_eval_s"} with JSON-able values.

    Any exception of a point (DseError, ValueError, KeyError, ... ) is caught and recorded as
    "ExcType: message" so that one bad point never costs the rest of the chunk.
    """
    out: list[dict] = []
    for params in points:
        t0 = time.perf_counter()
        try:
            raw = evaluator(params, ctx)
            metrics = {str(k): _plain(v) for k, v in raw.items()}
            error = None
        except Exception as exc:  # noqa: BLE001 - recorded per point, the run goes on
            metrics = {}
            error = f"{type(exc).__name__}: {exc}"
        out.append({"metrics": metrics, "error": error, "t_eval_s": time.perf_counter() - t0})
    return out


def finite(value: Any) -> TypeGuard[float]:
    """True for a real, finite number (bools are not numbers here)."""
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)

"""The per-point evaluation: a pure, module-level function that Ray and process pools can pickle.

    evaluate_point({"gpu.num_sms": 120, "sm_clock_mhz": 1755, "precision": "fp8"}, ctx)
        -> {"e2e_latency_s": ..., "energy_per_output_token_j": ..., "avg_power_w": ..., "tdp_w": 700.0, ...}

Parameter paths split by prefix:

    gpu.<dotted path>          GPU overrides, in the one vocabulary of `dse.hardware.overrides`
                               (`gpu.memory.technology`, `gpu.num_sms`, derived knobs such as
                               `gpu.sm.tensor_factor`), applied by `load_gpu`
    sm_clock_mhz, power_cap_w  the OperatingPoint (converted to SI here)
    model, mode, batch, input_tokens, output_tokens, precision, attention, kv_dtype, engine, sampling,
    concurrency, request_rate_per_s, num_requests, length_dist, length_sigma, request_seed,
    max_num_seqs, max_batched_tokens, gpu_memory_utilization, tp, pp, ep, dp
                               the serving workload (defaults come from the study's `workload:`)

`mode` picks the serving model: `static` (the default) is one batch of `batch` identical requests
(`dse.serving.static.predict_serving`); `concurrency`, `request_rate` and `max_throughput` simulate a
server under load (`dse.serving.load.predict_load`, with `request_seed` as its `seed`). `batch` and
`attention` belong to the static batch, the load knobs to the load modes; each mode ignores the other's
(a study with a fixed mode may not give them: `dse.search.study`). `engine` and `sampling` left None
take the mode's default, as in `dse predict`: static "none" / "none", under load vllm and the engine's
own sampler.

Every point also gets `goodput_requests_per_s`: its `requests_per_s` when each latency SLO of the
context (`EvalContext.slo`: the study's constraints `ttft_*|tpot_*|e2e_latency_* <= number`) holds, else
0 (see `goodput`).

Workers receive plain dicts and an `EvalContext`, and return plain dicts. `evaluate_chunk` runs a list of
points and records, per point, the metrics or the error (an exception never escapes a chunk).
"""

from __future__ import annotations

import logging
import math
import operator
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, TypeGuard

from dse.errors import ConfigError, DseError, implied_precision_message
from dse.search.training_point import TRAINING_KEYS, TRAINING_MODE
from dse.serving import DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS
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
# The per-request latency metrics every serving mode reports (means and percentiles): the SLO metrics.
LATENCY_METRICS: tuple[str, ...] = tuple(
    f"{name}{q}_s" for name in ("ttft", "tpot", "e2e_latency") for q in ("", "_p50", "_p90", "_p99")
)
GOODPUT_METRIC = "goodput_requests_per_s"
CONTEXT_METRICS: tuple[str, ...] = ("tdp_w", "power_cap_w", "sm_clock_hz", "memory_bw_bytes_per_s")
# Under load: the engine's limits a point ran with (a preset's defaults depend on the GPU's memory)
ENGINE_METRICS: tuple[str, ...] = ("max_num_seqs", "max_batched_tokens")
OPERATING_POINT_KEYS: tuple[str, ...] = ("sm_clock_mhz", "power_cap_w")
MODES: tuple[str, ...] = ("static", "concurrency", "request_rate", "max_throughput")
LOAD_MODES: tuple[str, ...] = MODES[1:]
# The GPU layout keys: `dse.workload.sharding.PARALLEL_FLAGS`, named here so that importing the search
# layer does not import the model stack (tests/serving/test_static_parallel.py checks they agree).
PARALLEL_KEYS: tuple[str, ...] = ("tp", "pp", "ep", "dp")
# The workload keys of the static batch (dse.serving.ServingRequest, passed as they are).
STATIC_KEYS: tuple[str, ...] = (
    "batch",
    "input_tokens",
    "output_tokens",
    "precision",
    "attention",
    "kv_dtype",
    "engine",
    "sampling",
    # the GPU layout (`dse.workload.sharding.Parallelism`), in every serving mode; a point whose layout
    # the model cannot take is infeasible (`dse.serving.load.unfit_layout`, `dse.serving.static.check_layout`)
    *PARALLEL_KEYS,
)
# The workload keys only the load modes use (dse.serving.load.LoadRequest; request_seed is its `seed`).
LOAD_KNOBS: tuple[str, ...] = (
    "concurrency",
    "request_rate_per_s",
    "num_requests",
    "length_dist",
    "length_sigma",
    "request_seed",
    "max_num_seqs",
    "max_batched_tokens",
    "gpu_memory_utilization",
    "host_step_s",
    "layer_host_s",
)
# The knob each load mode needs (the other modes take none of them).
MODE_KNOB: dict[str, str] = {"concurrency": "concurrency", "request_rate": "request_rate_per_s"}
WORKLOAD_KEYS: tuple[str, ...] = ("model", "mode", *STATIC_KEYS, *LOAD_KNOBS, *TRAINING_KEYS)
# Keys of ServingEstimate.metrics() that are not numbers; the runner turns them into feasible/reason.
STATUS_KEYS: tuple[str, ...] = ("feasible", "infeasible_reason")
COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le,
    "<": operator.lt,
    ">=": operator.ge,
    ">": operator.gt,
}

Evaluator = Callable[[Mapping[str, Any], "EvalContext"], Mapping[str, Any]]
Slo = tuple[tuple[str, str, float], ...]
logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True, kw_only=True)
class EvalContext:
    """What every point of a study shares: the base GPU, the model, the workload defaults and the SLO.

    `slo` holds (latency metric, "<=" or "<", bound) triples for `goodput_requests_per_s`. `options`
    carries settings for other evaluators (the toy functions in the tests), as sorted pairs so that the
    context stays hashable.
    """

    gpu: str = "h100-sxm"
    model: str = "llama-3.1-8b"
    mode: str = "static"
    batch: int = 1
    input_tokens: int = DEFAULT_INPUT_TOKENS
    output_tokens: int = DEFAULT_OUTPUT_TOKENS
    precision: str | None = None  # None: the checkpoint's quantization when serving, else bf16
    attention: str = "flash"
    kv_dtype: str | None = None
    engine: str | None = None  # None: the mode's default (static "none", load vllm)
    sampling: str | None = None  # None: the mode's default (static "none", load the engine's sampler)
    concurrency: int | None = None
    request_rate_per_s: float | None = None
    num_requests: int | None = None
    length_dist: str = "fixed"
    length_sigma: float = 0.5
    request_seed: int = 0
    max_num_seqs: int | None = None
    max_batched_tokens: int | None = None
    gpu_memory_utilization: float | None = None
    host_step_s: float | None = None
    layer_host_s: float | None = None
    tp: int = 1
    pp: int = 1
    ep: int = 1
    dp: int = 1
    # a training point (`mode: training`, dse.search.training_point); tp and pp above are shared
    num_gpus: int = 1
    cp: int = 1
    vp: int = 1
    fsdp: bool = False
    distributed_optimizer: bool = False
    tp_comm_overlap: bool = True
    cp_load_balance: bool = True
    ep_dispatcher: str = "alltoall"
    micro_batch: int = 1
    global_batch: int | None = None
    seq_len: int = 2048
    image_size: int = 224
    recompute: str = "none"
    optimizer: str = "adamw"
    memory_format: str = "nchw"
    objective: str = "pretrain"
    attention_kernel: str = "fa2"
    lora_rank: int = 0
    packed_sample_len: int = 0
    eager_ops: bool = False
    loader_samples_per_s: float = 0.0
    slo: Slo = ()
    # `CostConfig` fields, and `cost.<path>` fact overrides, as sorted pairs (hashable)
    cost: tuple[tuple[str, Any], ...] = ()
    options: tuple[tuple[str, Any], ...] = field(default=())


@lru_cache(maxsize=64)
def _arch(model: str) -> Any:
    from dse.workload.models import load_model_config

    return load_model_config(model)


def split_params(params: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """(gpu overrides incl. derived knobs, operating-point keys, workload keys); ValueError on others.
    `cost.<path>` parameters go with the workload keys (`cost_of_point` reads them)."""
    gpu: dict[str, Any] = {}
    op: dict[str, Any] = {}
    workload: dict[str, Any] = {}
    for path, value in params.items():
        if path.startswith("gpu."):
            gpu[path.removeprefix("gpu.")] = value
        elif path.startswith("cost."):
            workload[path] = value
        elif path in OPERATING_POINT_KEYS:
            op[path] = value
        elif path in WORKLOAD_KEYS:
            workload[path] = value
        else:
            raise ValueError(f"parameter '{path}' is not a gpu.*, operating-point or workload path")
    return gpu, op, workload


def check_point_clock(gpu: Any, clock_mhz: Any) -> None:
    """ConfigError for a requested clock outside this point's GPU's range: where a search varies the GPU's
    clock limits beside the clock, the model would clamp it and the point repeat another one unsaid."""
    from dse.perf.dvfs import clock_outside_range

    if clock_mhz is not None and (limits := clock_outside_range(gpu, float(clock_mhz))) is not None:
        raise ConfigError(
            f"sm_clock_mhz {float(clock_mhz):g} is outside this point's SM clock range "
            f"({limits[0]:g}-{limits[1]:g} MHz: gpu.clocks)"
        )


def build_inputs(params: Mapping[str, Any], ctx: EvalContext) -> dict[str, Any]:
    """The inputs of one point's prediction (exposed for tests and `dse predict`-like uses).

    Always arch, gpu, point and mode; a static point adds the ServingRequest fields (`STATIC_KEYS`), a
    load-mode point `load`, its `dse.serving.load.LoadRequest`.
    """
    from dse.hardware.catalog import load_gpu
    from dse.perf.types import OperatingPoint

    gpu_over, op, wl = split_params(params)
    gpu = load_gpu(ctx.gpu, gpu_over)
    clock_mhz = op.get("sm_clock_mhz")
    check_point_clock(gpu, clock_mhz)
    point = OperatingPoint(
        sm_clock_hz=None if clock_mhz is None else float(clock_mhz) * MHZ,
        power_cap_w=None if op.get("power_cap_w") is None else float(op["power_cap_w"]),
    )

    def get(key: str) -> Any:
        return wl.get(key, getattr(ctx, key))

    mode = str(get("mode"))
    arch = _arch(str(get("model")))
    out: dict[str, Any] = {"arch": arch, "gpu": gpu, "point": point, "mode": mode}
    written = get("precision")  # None: the checkpoint's weights (`LlmArch.checkpoint_precision`), else bf16
    precision = arch.serving_precision if written is None else str(written)
    if mode == "static":
        return out | {
            "batch": int(get("batch")),
            "input_tokens": int(get("input_tokens")),
            "output_tokens": int(get("output_tokens")),
            "precision": precision,
            "attention": str(get("attention")),
            "kv_dtype": get("kv_dtype"),
            "engine": str(get("engine") or "none"),
            "sampling": str(get("sampling") or "none"),
            **{k: int(get(k)) for k in PARALLEL_KEYS},
        }
    if mode not in LOAD_MODES:
        raise ValueError(f"mode '{mode}' is not one of {', '.join(MODES)}")
    if get("attention") != "flash":
        raise ValueError(f"attention {get('attention')!r} applies to a static batch; engines run flash")
    from dse.serving.load import LoadRequest

    per_mode = ("concurrency", "request_rate_per_s")
    knobs = {k: get(k) for k in (*LOAD_KNOBS, *PARALLEL_KEYS) if k not in per_mode}
    wanted = MODE_KNOB.get(mode)
    out["load"] = LoadRequest(
        mode=mode,
        input_tokens=get("input_tokens"),
        output_tokens=get("output_tokens"),
        concurrency=get("concurrency") if wanted == "concurrency" else None,
        request_rate_per_s=get("request_rate_per_s") if wanted == "request_rate_per_s" else None,
        seed=knobs.pop("request_seed"),
        precision=precision,
        kv_dtype=get("kv_dtype"),
        engine=str(get("engine") or "vllm"),
        sampling=get("sampling"),
        **knobs,
    )
    return out


def predict_inputs(inputs: Mapping[str, Any]) -> Any:
    """The estimate of one point's `build_inputs` result: `dse.serving.static.ServingEstimate` for a
    static point, `dse.serving.load.LoadEstimate` under load."""
    if "load" in inputs:
        from dse.serving.load import predict_load, unfit_layout

        unfit = unfit_layout(inputs["arch"], inputs["gpu"], inputs["load"])
        if unfit is not None:
            return unfit
        return predict_load(inputs["arch"], inputs["gpu"], inputs["load"], inputs["point"])
    from dse.serving import (
        static as serving,  # lazy: the search layer must not need the model stack at import
    )

    request = serving.ServingRequest(**{k: inputs[k] for k in STATIC_KEYS})
    try:
        serving.check_layout(inputs["arch"], request)
    except ConfigError as exc:  # a layout the model cannot take: an infeasible point, as under load
        layout = " ".join(f"{k}={getattr(request, k)}" for k in PARALLEL_KEYS)
        return _Unfit(f"layout {layout}: {str(exc).replace('--', '')}")
    return serving.predict_serving(inputs["arch"], inputs["gpu"], request, inputs["point"])


@dataclass(frozen=True, slots=True)
class _Unfit:
    """A static point whose layout the model cannot take (its metrics: the reason, no numbers)."""

    reason: str

    def metrics(self) -> dict[str, Any]:
        names = (n for n in serving_metric_names(("static",)) if n not in CONTEXT_METRICS)
        return {**dict.fromkeys(names), "feasible": False, "infeasible_reason": self.reason}


def goodput(metrics: Mapping[str, Any], slo: Slo) -> float | None:
    """Requests per second that meet the SLO: `requests_per_s` when every (metric, op, bound) of `slo`
    holds, else 0; None when the point has no throughput (infeasible).

    The SLOs are on the run's latency statistics, so a percentile bound sets the attainment: with
    `ttft_p90_s <= 0.5` and `tpot_p90_s <= 0.05` a point's requests count when at least 90% of them meet
    each bound (DistServe's goodput at a 90% attainment, for that load). Without an SLO it is
    `requests_per_s`.
    """
    rps = metrics.get("requests_per_s")
    if not finite(rps):
        return None
    for metric, op, bound in slo:
        value = metrics.get(metric)
        if not finite(value) or not COMPARISONS[op](value, bound):
            return 0.0
    return float(rps)


def evaluate_point(params: Mapping[str, Any], ctx: EvalContext) -> dict[str, Any]:
    """Predict LLM serving for one design point; metrics plus the GPU context (TDP, power cap, clock)
    and `goodput_requests_per_s`.

    Raises DseError/ValueError/KeyError for points the model cannot evaluate; the chunk runner records
    them as failed points.
    """
    if params.get("mode", ctx.mode) == TRAINING_MODE:
        from dse.search.training_point import evaluate_training_point

        return evaluate_training_point(params, ctx)
    inputs = build_inputs(params, ctx)
    try:
        estimate = predict_inputs(inputs)
        metrics = dict(estimate.metrics())
    except DseError as exc:  # "--precision fp8 needs ..." of a precision the study never wrote: say whose
        precision = inputs["load"].precision if "load" in inputs else inputs["precision"]
        explained = implied_precision_message(str(exc), precision, "no precision written")
        if "precision" in params or ctx.precision is not None or explained == str(exc):
            raise
        raise type(exc)(explained) from None
    gpu, point = inputs["gpu"], inputs["point"]
    metrics.setdefault(GOODPUT_METRIC, goodput(metrics, ctx.slo))
    metrics.setdefault("tdp_w", gpu.power.tdp_w)
    from dse.perf.dvfs import power_cap_w  # the cap in force: one above the TDP does not bind

    metrics.setdefault("power_cap_w", power_cap_w(gpu, point))
    metrics.setdefault("sm_clock_hz", point.sm_clock_hz or gpu.clocks.boost_clock_hz)
    metrics.setdefault("memory_bw_bytes_per_s", gpu.memory.bw_bytes_per_s)
    engine = getattr(estimate, "engine", None)
    if engine is not None:  # under load: a preset's limits depend on the GPU (vLLM's on its memory)
        metrics.setdefault("max_num_seqs", engine.max_num_seqs)
        metrics.setdefault("max_batched_tokens", engine.max_batched_tokens)
    metrics.update(cost_of_point(params, ctx, inputs, metrics))
    return metrics


def cost_options(params: Mapping[str, Any], ctx: EvalContext) -> Any:
    """The study's `CostOptions` at one point: its `cost` section with the point's `cost.<path>` values."""
    from dse.cost.operation import CostOptions

    given = dict(ctx.cost)
    facts = {k: v for k, v in given.items() if k.startswith("cost.")}
    facts |= {k: v for k, v in params.items() if k.startswith("cost.")}
    fields = {k: v for k, v in given.items() if not k.startswith("cost.")}
    grid = fields.pop("grid_gco2_per_kwh", None)
    return CostOptions(overrides=facts, grid=grid, **fields)


def moved_price(options: Any, ctx: EvalContext, gpu: Any) -> Any:
    """`options` with a given purchase price moved with the point's build cost from the study's base GPU's
    (`dse.cost.build.given_price_moved`): one price for every design favoured the dearest to build."""
    from dataclasses import replace

    from dse.cost.build import given_price_moved

    if options.gpu_price_usd is None:
        return options
    moved = given_price_moved(options.gpu_price_usd, _base_gpu(ctx.gpu), gpu, options.facts())
    return replace(options, gpu_price_usd=moved)


@lru_cache(maxsize=16)
def _base_gpu(name: str) -> Any:
    from dse.hardware.catalog import load_gpu

    return load_gpu(name)


def cost_of_point(
    params: Mapping[str, Any], ctx: EvalContext, inputs: Mapping[str, Any], metrics: Mapping[str, Any]
) -> dict[str, Any]:
    """The `dse.cost` keys of one point (none for a GPU without a `die` section, unless the study's cost
    section gives an hourly or purchase price, which `cost_outputs` prices it from)."""
    from dse.cost.operation import COST_KEYS, Throughput, cost_outputs

    gpu = inputs["gpu"]
    options = moved_price(cost_options(params, ctx), ctx, gpu)
    if gpu.die is None and options.gpu_usd_per_hour is None and options.gpu_price_usd is None:
        return {}
    if not finite(metrics.get("output_tokens_per_s")):
        return {k: None for k in COST_KEYS}
    static = inputs["mode"] == "static"
    prompts = float(inputs["batch"] * inputs["input_tokens"]) if static else None
    out = cost_outputs(gpu, Throughput.from_metrics(metrics, prompts), options)
    return {k: out[k] for k in COST_KEYS}


def serving_metric_names(modes: Sequence[str] | None = None) -> tuple[str, ...]:
    """The numeric metrics `evaluate_point` gives in every one of `modes` (None: in any mode).

    Static: the numeric fields of `ServingEstimate` (read from the dataclass), `effective_clock_mhz` and
    the load keys a static batch reports; load modes: `dse.serving.load.LOAD_KEYS`. Both add
    `goodput_requests_per_s` and the context metrics.
    """
    import dataclasses

    from dse.serving.load import LOAD_KEYS
    from dse.serving.static import LOAD_VIEW_KEYS, ServingEstimate

    names = [
        f.name
        for f in dataclasses.fields(ServingEstimate)
        if str(f.type) in ("float", "int") and f.name not in STATUS_KEYS
    ]
    if "effective_clock_hz" in names:
        names.append("effective_clock_mhz")
    static = [*names, *SERVING_METRICS, *LATENCY_METRICS, *LOAD_VIEW_KEYS]
    per_mode = {mode: static if mode == "static" else [*LOAD_KEYS, *ENGINE_METRICS] for mode in MODES}
    chosen = [per_mode[m] for m in (MODES if modes is None else modes)]
    merged = [name for names_ in chosen for name in names_]
    if modes is not None:
        merged = [name for name in merged if all(name in names_ for names_ in chosen)]
    from dse.cost.operation import COST_KEYS

    return tuple(dict.fromkeys([*merged, GOODPUT_METRIC, *CONTEXT_METRICS, *COST_KEYS]))


def prefetch_first_passes(points: Sequence[Mapping[str, Any]], ctx: EvalContext) -> None:
    """Run the first kernel-model pass of a chunk's static serving points with one call per family that
    takes per-row GPUs (`dse.perf.first_pass`), so that each point's evaluation takes its share: the same
    values, one call's fixed cost for the chunk instead of one per point."""
    from dse.perf.first_pass import prefetch
    from dse.serving import static as serving

    passes = []
    for params in points:
        try:
            if params.get("mode", ctx.mode) != "static":
                continue
            inputs = build_inputs(params, ctx)
            request = serving.ServingRequest(**{k: inputs[k] for k in STATIC_KEYS})
            passes.append(serving.first_pass(inputs["arch"], inputs["gpu"], request, inputs["point"]))
        except Exception:  # noqa: BLE001, S112 - the point's own evaluation reports its error
            continue
    prefetch(passes)


evaluate_point.metric_names = serving_metric_names  # type: ignore[attr-defined]
evaluate_point.prepare_chunk = prefetch_first_passes  # type: ignore[attr-defined]


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
    An evaluator's `prepare_chunk(points, ctx)` first does work the points share (`evaluate_point`'s runs
    the chunk's first passes together), its time charged to the points evenly.

    Any exception of a point (DseError, ValueError, KeyError, ... ) is caught and recorded as
    "ExcType: message" so that one bad point never costs the rest of the chunk.
    """
    out: list[dict] = []
    shared_s = 0.0  # work the chunk's points share (`evaluate_point.prepare_chunk`), charged to each
    prepare = getattr(evaluator, "prepare_chunk", None)
    if prepare is not None and len(points) > 1:
        t0 = time.perf_counter()
        try:
            prepare(points, ctx)
        except Exception:  # noqa: BLE001 - a speed-up only: the points are evaluated one by one anyway
            logger.warning("preparing a chunk of %d points failed", len(points), exc_info=True)
        shared_s = (time.perf_counter() - t0) / len(points)
    for params in points:
        t0 = time.perf_counter() - shared_s
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

"""The checks a study gets at load time, after its schema: modes and their knobs, values of the serving
workload, metrics the study's modes report, goodput's SLO. Each failure is one `file:line` ConfigError
(`dse.config.yamlio.located_error`). `dse.search.study.load_study` runs `check_study`.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from typing import Any, get_args

from dse.config.yamlio import SourceMap, located_error
from dse.errors import ConfigError
from dse.search.checks_cost import check_cost, cost_fact_problem
from dse.search.objective import (
    CONTEXT_METRICS,
    GOODPUT_METRIC,
    LATENCY_METRICS,
    LOAD_KNOBS,
    LOAD_MODES,
    MODE_KNOB,
    OPERATING_POINT_KEYS,
    PARALLEL_KEYS,
    WORKLOAD_KEYS,
    Evaluator,
    evaluate_point,
    metric_names_of,
    serving_metric_names,
)
from dse.search.space import ChoiceParam, ConstParam, FloatParam, IntParam, SearchSpace
from dse.search.study import (
    INT_KEYS,
    Attention,
    Engine,
    KvDtype,
    LengthDist,
    Mode,
    Precision,
    Sampling,
    StudyConfig,
    WorkloadConfig,
    param_values_with_locs,
    possible_values,
    study_modes,
    unused_workload_keys,
)
from dse.search.training_point import TRAINING_KEYS, TRAINING_MODE, training_metrics
from dse.units import MAX_COUNT


def check_study(cfg: StudyConfig, smap: SourceMap, evaluator: Evaluator) -> None:
    """Cross-field checks: space structure, paths, metric names, sampler needs. Raises located errors."""
    try:
        space = cfg.search_space()
    except ValueError as exc:
        raise located_error(smap, ("space",), str(exc)) from None
    for loc, msg in space.problems():
        raise located_error(smap, ("space", *loc), msg)
    if evaluator is evaluate_point and TRAINING_MODE in study_modes(cfg, space):
        _check_training(cfg, smap, space)
        _check_unread_keys(cfg, smap, space)
    elif evaluator is evaluate_point:
        modes = study_modes(cfg, space)
        _check_serving(cfg, smap, space, modes)
        _check_modes(cfg, smap, space, modes)
        _check_metrics(cfg, smap, serving_metric_names(modes), modes)
        _check_goodput(cfg, smap)
        _check_unread_keys(cfg, smap, space)
    else:
        names = metric_names_of(evaluator)
        if names is not None:
            _check_metrics(cfg, smap, names)
    _check_reference_point(cfg, smap)
    sampler = cfg.search.sampler
    if sampler.kind == "nsga3" and (problem := sampler.directions_problem(len(cfg.objectives))):
        raise located_error(smap, ("search", "sampler", "dividing_parameter"), problem)
    for name, spec in cfg.space.items() if cfg.search.sampler.kind == "grid" else ():
        if not spec.is_finite:
            msg = "the grid sampler needs a finite space: give this float parameter a `step`, or use "
            msg += "`values: [...]` (samplers for continuous spaces: random, qmc, nsga2, nsga3, tpe)"
            raise located_error(smap, ("space", name), msg)


def _check_metrics(
    cfg: StudyConfig, smap: SourceMap, names: Sequence[str], modes: Sequence[str] | None = None
) -> None:
    allowed = ", ".join(names)

    def problem(metric: str) -> str:
        if modes is not None and metric in serving_metric_names():  # a metric of another mode
            lacking = [m for m in modes if metric not in serving_metric_names([m])]
            if lacking:
                return (
                    f"metric '{metric}' is not reported in mode {', '.join(lacking)} "
                    f"(this study's modes: {', '.join(modes)}; allowed: {allowed})"
                )
        return f"unknown metric '{metric}' (allowed: {allowed})"

    for metric in cfg.objectives:
        if metric not in names:
            raise located_error(smap, ("objectives", metric), problem(metric))
    for i, c in enumerate(cfg.constraints):
        for metric in c.metrics():
            if metric not in names:
                raise located_error(smap, ("constraints", i), f"in '{c.text}': {problem(metric)}")


def _check_reference_point(cfg: StudyConfig, smap: SourceMap) -> None:
    """One bound per objective, each at its own line, and a box the points can fill."""
    objectives = ", ".join(cfg.objectives)
    for metric, ref in (cfg.reference_point or {}).items():
        if metric not in cfg.objectives:
            msg = f"'{metric}' is not an objective (allowed: {objectives})"
            raise located_error(smap, ("reference_point", metric), msg)
        # every metric a point reports is >= 0: a bound at or under 0 on one to minimize is dominated by
        # no point, and the hypervolume stays 0 whatever the run finds
        if cfg.objectives[metric] == "minimize" and ref <= 0:
            msg = f"{ref:g} for a metric to minimize: no point is below it (all are >= 0); hypervolume 0"
            raise located_error(smap, ("reference_point", metric), msg)
    if missing := [m for m in cfg.objectives if cfg.reference_point and m not in cfg.reference_point]:
        msg = f"no bound for {', '.join(missing)} (the reference point gives one for each of: {objectives})"
        raise located_error(smap, ("reference_point",), msg)
    # the box's sides along maximized metrics are the points' own distances from the bound, so only the
    # minimized values (all > 0 here) size it; a sum of logs is order-free (a product met inf x 0 = nan)
    sides = [ref for m, ref in (cfg.reference_point or {}).items() if cfg.objectives.get(m) == "minimize"]
    if sum(math.log(side) for side in sides) > math.log(sys.float_info.max):
        box = " x ".join(f"{side:g}" for side in sides)
        msg = f"the box its values span ({box}) overflows a float (hypervolume inf); use the metrics' scale"
        raise located_error(smap, ("reference_point",), msg)


def _check_goodput(cfg: StudyConfig, smap: SourceMap) -> None:
    """Goodput counts the requests that meet the SLO: a study that uses it must state one."""
    if cfg.slo():
        return
    need = (
        f"{GOODPUT_METRIC} counts the requests/s that meet the study's latency SLO: add a constraint such "
        f"as 'ttft_p90_s <= 0.5' (a number bound, <= or <, on one of {', '.join(LATENCY_METRICS)})"
    )
    if GOODPUT_METRIC in cfg.objectives:
        raise located_error(smap, ("objectives", GOODPUT_METRIC), need)
    for i, c in enumerate(cfg.constraints):
        if GOODPUT_METRIC in c.metrics():
            raise located_error(smap, ("constraints", i), need)


# --- workload and modes ---------------------------------------------------------------------------------


def _sources(cfg: StudyConfig, space: SearchSpace, key: str) -> list[tuple[str | int, ...]]:
    """Where a study gives workload key `key`: its `workload:` entry (if written) and its parameters."""
    out: list[tuple[str | int, ...]] = [("workload", key)] if key in cfg.workload.model_fields_set else []
    return out + [("space", name) for name in cfg.space if space.path_of(name) == key]


def _check_modes(cfg: StudyConfig, smap: SourceMap, space: SearchSpace, modes: Sequence[str]) -> None:
    """Each mode of the study has what it needs, and no knob is given that none of its modes uses."""
    loads = [m for m in modes if m in LOAD_MODES]
    where_mode = (_sources(cfg, space, "mode") or [("workload", "mode")])[-1]
    modes_text = ", ".join(modes)
    if not loads:
        for key in LOAD_KNOBS:
            for loc in _sources(cfg, space, key):
                raise located_error(
                    smap,
                    loc,
                    f"{key} applies to the load modes ({', '.join(LOAD_MODES)}) and this study's mode is "
                    "static: set workload.mode (or a `mode` parameter) or drop it",
                )
        return
    if "static" not in modes:
        for loc in _sources(cfg, space, "batch"):
            raise located_error(
                smap,
                loc,
                f"batch is the size of a static batch; under load ({modes_text}) the scheduler forms the "
                "batches: use concurrency, request_rate_per_s or max_num_seqs instead",
            )
        if any(v != "flash" for v in possible_values(cfg, space, "attention")):
            loc = _sources(cfg, space, "attention")[0]
            raise located_error(smap, loc, "attention eager applies to a static batch; engines run flash")
    for mode, knob in MODE_KNOB.items():
        given = _sources(cfg, space, knob)
        if mode in modes and not given:
            raise located_error(
                smap,
                where_mode,
                f"mode {mode} needs {knob}: give workload.{knob} or a `{knob}` parameter",
            )
        if mode not in modes and given:
            raise located_error(
                smap, given[0], f"{knob} applies to mode {mode} only (this study's modes: {modes_text})"
            )
    if "lognormal" not in possible_values(cfg, space, "length_dist"):
        for loc in _sources(cfg, space, "length_sigma"):
            raise located_error(smap, loc, "length_sigma applies to length_dist lognormal only")
    if cfg.workload.output_tokens < 2:
        raise located_error(
            smap, ("workload", "output_tokens"), "the load modes need output_tokens >= 2 (a TPOT)"
        )


def workload_value_problem(path: str, value: Any, *, under_load: bool) -> str | None:
    """What is wrong with one numeric value of a workload key (`dse sweep` checks its axes with it)."""
    return _value_problem(path, value, None, under_load=under_load)


def _value_problem(path: str, value: Any, allowed: Sequence[str] | None, *, under_load: bool) -> str | None:
    """What is wrong with one value of a workload or GPU-knob parameter (None when nothing)."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    if allowed is not None and str(value).lower() not in allowed:
        return f"{value!r} is not a valid {path} (allowed: {', '.join(allowed)})"
    if path in INT_KEYS and path != "request_seed" and not (isinstance(value, int) and number and value >= 1):
        return f"{path} must be an integer >= 1 (got {value!r})"
    if path in INT_KEYS and path != "request_seed" and value > MAX_COUNT:  # as workload: refuses it
        return f"{path} must be an integer in [1, {MAX_COUNT}] (got {value!r})"
    if path == "output_tokens" and under_load and value < 2:
        return f"the load modes need output_tokens >= 2, a TPOT (got {value!r})"
    if path == "request_seed" and not (isinstance(value, int) and number and 0 <= value < 2**32):
        return f"request_seed must be an integer in [0, 2^32) (got {value!r})"
    if path == "request_rate_per_s":
        from dse.serving.load import MIN_REQUEST_RATE_PER_S  # lazy: no model stack at import

        if not (number and math.isfinite(value) and MIN_REQUEST_RATE_PER_S <= value <= 1e9):
            return f"request_rate_per_s must be a number in [{MIN_REQUEST_RATE_PER_S:g}, 1e9] (got {value!r})"
    if path == "gpu_memory_utilization" and not (number and 0 < value <= 1):
        return f"gpu_memory_utilization is a share of GPU memory in (0, 1] (got {value!r})"
    if path == "host_step_s" and not (number and math.isfinite(value) and 0 <= value <= 1):
        return f"host_step_s is seconds of engine CPU time per step in [0, 1] (got {value!r})"
    if path == "layer_host_s" and not (number and math.isfinite(value) and 0 <= value <= 0.1):
        return f"layer_host_s is seconds of engine CPU time per dense layer in [0, 0.1] (got {value!r})"
    if path == "length_sigma" and not (number and 0 < value <= 3):
        return f"length_sigma must lie in (0, 3] (got {value!r})"
    if path in ("gpu.memory.energy_factor", "gpu.sm.tensor_factor") and not (number and value > 0):
        return f"a scale factor must be a positive number (got {value!r})"
    return None


def _gpu_limits_vary(cfg: StudyConfig, space: SearchSpace) -> tuple[bool, bool]:
    """(the clock range varies, the power limits vary) over the space: then a clock or cap value is checked
    per point, not against the base GPU at load."""
    paths = [space.path_of(n) for n in cfg.space]
    return any(p.startswith("gpu.clocks.") for p in paths), any(
        p.startswith(("gpu.power.", "gpu.clocks.")) for p in paths
    )


def _point_problem(
    cfg: StudyConfig, gpu: Any, path: str, value: Any, clocks_vary: bool, power_varies: bool = False
) -> str | None:
    """Problems that need the model catalog or the GPU: an unknown model, a clock outside the GPU's range,
    a power cap below its lowest limit (`dse.perf.dvfs.power_cap_w`) or above its TDP (it would not bind:
    the point would repeat the TDP's under another label; `dse predict` refuses it too)."""
    if path == "model":
        from dse.workload.models import load_model_config

        try:
            load_model_config(str(value))
        except ConfigError as exc:
            return str(exc)
    elif path in OPERATING_POINT_KEYS and not (
        isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
    ):
        return f"{path} must be a finite number (got {value!r})"
    elif path == "sm_clock_mhz" and not clocks_vary:
        lo, hi = gpu.clocks.sm_clock_min_hz / 1e6, gpu.clocks.sm_clock_max_hz / 1e6
        if not lo <= value <= hi:
            return f"{value!r} MHz is outside {cfg.gpu}'s SM clock range {lo:g}-{hi:g} MHz"
    elif path == "power_cap_w" and not power_varies:
        from dse.perf.dvfs import power_cap_w
        from dse.perf.types import OperatingPoint

        try:
            power_cap_w(gpu, OperatingPoint(power_cap_w=float(value)))
        except ConfigError as exc:
            return str(exc)
        if value > gpu.power.tdp_w:
            tdp_w = gpu.power.tdp_w
            return f"{value!r} W is above the TDP of {cfg.gpu} ({tdp_w:g} W): a cap there does not bind"
    return None


def _check_serving(cfg: StudyConfig, smap: SourceMap, space: SearchSpace, modes: Sequence[str]) -> None:
    from dse.hardware.catalog import load_gpu
    from dse.hardware.memory import list_memory_technologies
    from dse.hardware.overrides import check_override_path, field_value_problem

    try:
        gpu = load_gpu(cfg.gpu)
    except ConfigError as exc:
        raise located_error(smap, ("gpu",), str(exc)) from None
    from dse.workload.models import load_model_config

    try:
        load_model_config(cfg.model)
    except ConfigError as exc:
        raise located_error(smap, ("model",), str(exc)) from None
    allowed_paths = ", ".join(("gpu.<field>", "cost.<fact>", *OPERATING_POINT_KEYS, *WORKLOAD_KEYS))
    check_cost(cfg, smap, space)
    literal_values = {
        "mode": get_args(Mode),
        "precision": get_args(Precision),
        "attention": get_args(Attention),
        "kv_dtype": get_args(KvDtype),
        "engine": get_args(Engine),
        "sampling": get_args(Sampling),
        "length_dist": get_args(LengthDist),
        "gpu.memory.technology": tuple(list_memory_technologies()),
    }
    clocks_vary, power_varies = _gpu_limits_vary(cfg, space)
    under_load = any(m in LOAD_MODES for m in modes)
    for name in cfg.space:
        spec = cfg.space[name]
        path = space.path_of(name)
        loc = ("space", name) if spec.path is None else ("space", name, "path")
        if path.startswith("gpu."):
            msg = check_override_path(gpu, path)
            if msg is not None:
                raise located_error(smap, loc, msg)
        elif path.startswith("cost."):  # a price or carbon constant, as in a training study
            _check_cost_param(smap, name, spec, path, loc)
            continue
        elif path not in OPERATING_POINT_KEYS and path not in WORKLOAD_KEYS:
            raise located_error(smap, loc, f"unknown parameter path '{path}' (allowed: {allowed_paths})")
        allowed = literal_values.get(path)
        if allowed is not None and not isinstance(spec, ChoiceParam | ConstParam):
            raise located_error(smap, ("space", name), f"'{path}' takes values: [...] or value: x")
        for where, value in param_values_with_locs(name, spec):
            msg = _value_problem(path, value, allowed, under_load=under_load) or _point_problem(
                cfg, gpu, path, value, clocks_vary, power_varies
            )
            if msg is None and path.startswith("gpu."):
                msg = field_value_problem(path, value, gpu)
            if msg is not None:
                raise located_error(smap, where, msg)
        if path in INT_KEYS and isinstance(spec, FloatParam):
            raise located_error(
                smap, ("space", name), f"{path} is an integer: use type: int or values: [...]"
            )
    _check_layout(cfg, smap, space)  # every serving mode takes a layout
    _check_every_point_refuses(cfg, smap, space, modes)


def _values_at(cfg: StudyConfig, space: SearchSpace, key: str) -> list[tuple[tuple[str | int, ...], Any]]:
    """(where, value) of what workload key `key` takes at the points: its parameters' values, else the
    `workload:` value (which a parameter of the key replaces)."""
    out = [
        item
        for n, spec in cfg.space.items()
        if space.path_of(n) == key
        for item in param_values_with_locs(n, spec)
    ]
    return out or [(("workload", key), getattr(cfg.workload, key))]


def _check_every_point_refuses(
    cfg: StudyConfig, smap: SourceMap, space: SearchSpace, modes: Sequence[str]
) -> None:
    """Values every point would refuse at run time, refused at load: a closed loop's concurrency or a run's
    num_requests above what one simulation handles per replica even at the study's widest dp, and a
    precision or attention that none of the study's models can run (mxfp4 beside a dense model)."""
    from dse.serving.load import per_replica_problem
    from dse.workload.llm import check_numerics
    from dse.workload.models import load_model_config

    dp = max(int(v) for v in possible_values(cfg, space, "dp"))
    sizes = ["num_requests"] if any(m in LOAD_MODES for m in modes) else []
    sizes += ["concurrency"] if "concurrency" in modes else []
    for key in sizes:
        for where, value in _values_at(cfg, space, key):
            # a range's upper end may pass the bound while most of its draws do not: its lower end decides
            problem = where[-1] != "high" and isinstance(value, int) and per_replica_problem(key, value, dp)
            if problem:
                raise located_error(smap, where, problem)
    for where, rate in _values_at(cfg, space, "request_rate_per_s") if "request_rate" in modes else []:
        if problem := rate is not None and _value_problem("request_rate_per_s", rate, None, under_load=True):
            raise located_error(smap, where, problem)
    archs = [load_model_config(m) for m in _model_names(cfg, space)]
    for where, precision in _values_at(cfg, space, "precision"):
        problems = []
        for arch in archs:
            try:  # the attention values are checked on their own (literal_values)
                check_numerics(arch, precision or arch.serving_precision, cfg.workload.attention)
                break
            except ConfigError as exc:
                problems.append(str(exc))
        else:
            raise located_error(smap, where, problems[0])


def _model_names(cfg: StudyConfig, space: SearchSpace) -> list[str]:
    """Every model a point of the study may run: the values of a `model` parameter, and `model:` unless
    such a parameter is always active."""
    given = [(n, spec) for n, spec in cfg.space.items() if space.path_of(n) == "model"]
    models = {str(v) for n, spec in given for _, v in param_values_with_locs(n, spec)}
    return sorted(models if any(not spec.when for _, spec in given) else models | {cfg.model})


def _check_layout(cfg: StudyConfig, smap: SourceMap, space: SearchSpace) -> None:
    """Each tp/pp/ep/dp value fits the study's model(s) in some layout of the space, as `dse predict --tp`
    checks one; combinations that do not fit (ep 8 beside tp 2, or a static batch dp does not divide) are
    infeasible points."""
    from itertools import product

    from dse.workload.models import load_model_config
    from dse.workload.sharding import PARALLEL_FLAGS, Parallelism, check_parallelism

    values = {k: sorted(set(possible_values(cfg, space, k))) for k in PARALLEL_FLAGS}
    if all(v == [1] for v in values.values()):
        return
    archs = [load_model_config(m) for m in _model_names(cfg, space)]
    for key in PARALLEL_FLAGS:
        for value in values[key]:
            last: ConfigError | None = None
            for arch, combo in product(
                archs, product(*(values[k] if k != key else [value] for k in PARALLEL_FLAGS))
            ):
                try:
                    check_parallelism(arch, Parallelism(**dict(zip(PARALLEL_FLAGS, combo, strict=True))))
                    break
                except ConfigError as exc:
                    last = exc
            else:
                loc = (_sources(cfg, space, key) or [("workload", key)])[-1]
                msg = str(last).replace("--", "")
                raise located_error(smap, loc, f"{key} {value} fits no layout of this study: {msg}")


# The workload keys a training point reads (dse.search.training_point).
_TRAINING_PATHS = ("model", "mode", "precision", "attention", "tp", "pp", "ep", *TRAINING_KEYS)


def _check_unread_keys(cfg: StudyConfig, smap: SourceMap, space: SearchSpace) -> None:
    """A workload key no point of the study reads (`unused_workload_keys`: `lora_rank` in a serving study,
    `input_tokens` in a training one), set in the workload section away from its default or searched, is an
    error: the points ran without it and the resolved study dropped it."""
    unread = set(unused_workload_keys(cfg))
    modes = ", ".join(study_modes(cfg, space))
    for key in sorted(unread & cfg.workload.model_fields_set):
        if getattr(cfg.workload, key) != WorkloadConfig.model_fields[key].default:
            msg = f"workload key '{key}' is not read by this study's points (modes: {modes}): remove it"
            raise located_error(smap, ("workload", key), msg)
    for name in cfg.space:
        # a static one-GPU study's layout keys are unread at 1 (its hash stays), read once searched
        if space.path_of(name) in unread and space.path_of(name) not in PARALLEL_KEYS:
            msg = f"'{space.path_of(name)}' is not read by this study's points (modes: {modes}): remove it"
            raise located_error(smap, ("space", name), msg)


def _check_workload_values(cfg: StudyConfig, smap: SourceMap, name: str, path: str) -> None:
    """Each value a space parameter lists for a workload key is one the key takes (`workload_value`); a
    range is checked at its ends, and a float range on an integer key is refused (its draws are fractions)."""
    from dse.search.training_point import workload_value

    param = cfg.space[name]
    values: list[Any] = list(param.values) if isinstance(param, ChoiceParam) else []
    if isinstance(param, ConstParam):
        values.append(param.value)
    if isinstance(param, IntParam | FloatParam):
        values += [param.low, param.high]
        if isinstance(param, FloatParam) and param.high > param.low:
            try:  # a fractional draw, which an integer key refuses
                workload_value(path, param.low + 0.25 * min(1.0, param.high - param.low))
            except ConfigError:
                msg = f"workload key '{path}' takes integers: a float range draws fractions (use type: int)"
                raise located_error(smap, ("space", name), msg) from None
    for value in values:
        try:
            workload_value(path, value)
        except ConfigError as exc:
            raise located_error(smap, ("space", name), str(exc)) from None


def _check_training(cfg: StudyConfig, smap: SourceMap, space: SearchSpace) -> None:
    """A training study: one mode, training paths only, training metrics (dse.search.training_point)."""
    from dse.hardware.catalog import load_gpu
    from dse.hardware.overrides import check_override_path, field_value_problem

    if study_modes(cfg, space) != (TRAINING_MODE,):
        loc = (_sources(cfg, space, "mode") or [("workload", "mode")])[-1]
        raise located_error(smap, loc, "a study is a training study or a serving study: do not mix the modes")
    try:
        gpu = load_gpu(cfg.gpu)
    except ConfigError as exc:
        raise located_error(smap, ("gpu",), str(exc)) from None
    allowed = ", ".join(("gpu.<field>", "cost.<fact>", *OPERATING_POINT_KEYS, *_TRAINING_PATHS))
    _check_training_precision(cfg, smap, space)
    _check_model_keys(cfg, smap, space)
    check_cost(cfg, smap, space)  # a step is priced as a serving point is
    clocks_vary, power_varies = _gpu_limits_vary(cfg, space)
    for name in cfg.space:
        path = space.path_of(name)
        loc = ("space", name) if cfg.space[name].path is None else ("space", name, "path")
        if path.startswith("gpu."):
            msg = check_override_path(gpu, path)
            if msg is not None:
                raise located_error(smap, loc, msg)
            for where, value in param_values_with_locs(name, cfg.space[name]):
                if (msg := field_value_problem(path, value)) is not None:  # as a serving study's
                    raise located_error(smap, where, msg)
        elif path.startswith("cost."):  # a price or carbon constant, as in a serving study
            _check_cost_param(smap, name, cfg.space[name], path, loc)
        elif path not in OPERATING_POINT_KEYS and path not in _TRAINING_PATHS:
            raise located_error(smap, loc, f"'{path}' is not a training parameter (allowed: {allowed})")
        elif path in OPERATING_POINT_KEYS:  # as a serving study checks them (and `dse predict --training`)
            for where, value in param_values_with_locs(name, cfg.space[name]):
                msg = _point_problem(cfg, gpu, path, value, clocks_vary, power_varies)
                if msg is not None:
                    raise located_error(smap, where, msg)
        else:
            _check_workload_values(cfg, smap, name, path)
    _check_metrics(cfg, smap, (*training_metrics(*_model_names(cfg, space)), *CONTEXT_METRICS))
    _check_training_layouts(cfg, smap, space)


def _check_training_layouts(cfg: StudyConfig, smap: SourceMap, space: SearchSpace) -> None:
    """A layout or batch value with which no point of the study can run (tp 3 on 8 GPUs, a global batch of
    7 that micro batch x dp never divides) is refused where it is written, as a serving study's tp is.
    Every key a point's request reads and the space varies takes part, with its `workload:` value where a
    `when` can switch its parameter off. Ranges are not enumerated: such a study is left to its points."""
    from dse.search import training_point as tpt

    varied = {space.path_of(n) for n in cfg.space}
    switched = {space.path_of(n) for n, spec in cfg.space.items() if spec.when}
    written = {k: _values_at(cfg, space, k) for k in tpt.REQUEST_KEYS if k in tpt.LAYOUT_KEYS or k in varied}
    for k in switched & set(written):
        written[k] = [*written[k], (("workload", k), getattr(cfg.workload, k))]
    if any(where[-1] in ("low", "high") for items in written.values() for where, _ in items):
        return
    values = {k: [tpt.workload_value(k, v) for _, v in items] for k, items in written.items()}
    key, value, why = tpt.layout_problem(values, lambda k: getattr(cfg.workload, k))
    if why and not key:
        fields = type(cfg.workload).model_fields
        # written once, in `workload:`; the batch keys before the layout ones, num_gpus last (what a study
        # is about): a global batch of 7 on 8 GPUs blames the 7
        once = [k for k, items in written.items() if items[0][0][0] == "workload"][::-1]
        defaults = {k: tpt.workload_value(k, fields[k].default) for k in once}
        culprit = tpt.layout_culprit(values, lambda k: getattr(cfg.workload, k), defaults)
        where = ("workload", culprit) if culprit else ("workload",)
        raise located_error(smap, where, f"no point of this study can run: {why}")
    if key:
        loc = next((w for w, v in _values_at(cfg, space, key) if v == value), ("workload", key))
        raise located_error(smap, loc, f"{key} {value}: no point of this study can run it: {why}")


# Training keys that only some kinds of model read (`dse.training.predict.check_model_options`).
_MODEL_KIND_KEYS: tuple[str, ...] = ("memory_format", "image_size", "attention_kernel", "lora_rank")
_MODEL_KIND_KEYS += ("packed_sample_len", "eager_ops", "objective")


def _check_model_keys(cfg: StudyConfig, smap: SourceMap, space: SearchSpace) -> None:
    """A key this study's model never reads (`memory_format` for an LLM, `seq_len` or `lora_rank` for a
    vision model), searched or set in the workload away from its default, is refused where it is written,
    as `dse predict --training` refuses its flag: every point would have run without it. At its default it
    is let be, as `_check_unread_keys` does: the run's `study.resolved.yaml` writes every default."""
    from dse.training.predict import check_model_options
    from dse.training.step import TrainingRequest
    from dse.workload.vision import is_vision_model

    default = TrainingRequest(micro_batch=1, global_batch=1)
    for key in (*_MODEL_KIND_KEYS, "seq_len"):
        at_default = getattr(cfg.workload, key) == WorkloadConfig.model_fields[key].default
        for loc in _sources(cfg, space, key):
            if loc[0] == "workload" and at_default:
                continue
            if key == "seq_len":
                if is_vision_model(cfg.model):
                    raise located_error(smap, loc, f"{cfg.model} is a vision model: its input is image_size")
                continue
            try:
                check_model_options(cfg.model, default, given=(key,))
            except ConfigError as exc:
                raise located_error(smap, loc, str(exc)) from None


def _check_cost_param(smap: SourceMap, name: str, spec: Any, path: str, loc: tuple) -> None:
    """A `cost.<path>` parameter: a known fact, each value within its range."""
    if (msg := cost_fact_problem(path)) is not None:
        raise located_error(smap, loc, msg)
    for where, value in param_values_with_locs(name, spec):
        if (msg := cost_fact_problem(path, value)) is not None:
            raise located_error(smap, where, msg)


def _check_training_precision(cfg: StudyConfig, smap: SourceMap, space: SearchSpace) -> None:
    """mxfp4 is a checkpoint format engines serve, not one a step trains in: refused where it is written
    (every point would fail alike)."""
    from dse.training.step import TRAINING_PRECISIONS

    problem = f"mxfp4 is a serving checkpoint's format; a training step runs {', '.join(TRAINING_PRECISIONS)}"
    if cfg.workload.precision == "mxfp4":
        raise located_error(smap, ("workload", "precision"), problem)
    for name, param in cfg.space.items():
        if space.path_of(name) == "precision":
            for where, value in param_values_with_locs(name, param):
                if value == "mxfp4":
                    raise located_error(smap, where, problem)

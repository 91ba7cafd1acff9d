"""One training design point of a study (`workload: {mode: training}`): the search layer's view of
`dse.training.predict_training`, the same step `dse predict --training` predicts.

The study's workload keys `num_gpus`, `tp`, `pp`, `cp`, `vp`, `ep`, `fsdp`, `distributed_optimizer`,
`tp_comm_overlap`, `cp_load_balance`, `ep_dispatcher`, `lora_rank`, `packed_sample_len`, `eager_ops`,
`loader_samples_per_s`, `micro_batch`, `global_batch` (default: micro x dp), `seq_len`, `image_size`,
`precision`, `recompute`, `optimizer`, `attention`, `attention_kernel` (LLMs), `memory_format` (vision) and
`objective` (encoders) make the request; `gpu.*` paths, `sm_clock_mhz` and `power_cap_w` the GPU and
operating point, as for serving points.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Mapping, Sequence
from functools import cache
from typing import Any

from dse.cost.operation import TRAINING_COST_KEYS
from dse.errors import ConfigError

TRAINING_MODE = "training"
# The workload keys only a training point uses (tp and pp are shared with the serving layouts).
TRAINING_KEYS: tuple[str, ...] = (
    "num_gpus",
    "cp",
    "vp",
    "fsdp",
    "distributed_optimizer",
    "tp_comm_overlap",
    "cp_load_balance",
    "ep_dispatcher",
    "micro_batch",
    "global_batch",
    "seq_len",
    "image_size",
    "recompute",
    "optimizer",
    "memory_format",
    "objective",
    "attention_kernel",
    "lora_rank",
    "packed_sample_len",
    "eager_ops",
    "loader_samples_per_s",
)
# The numeric metrics of a training point (`TrainingEstimate.metrics`, per-sample or per-token by model).
TRAINING_METRICS: tuple[str, ...] = (
    "num_gpus", "dp", "tp", "pp", "cp", "vp", "ep", "lora_rank", "num_microbatches", "step_time_s",
    "samples_per_s", "mfu",
    "model_tflops_per_gpu", "energy_per_step_j", "avg_power_w", "total_power_w", "memory_bytes",
    "tokens_per_s_per_gpu", "energy_per_token_j", "samples_per_s_per_gpu", "energy_per_sample_j",
    "memory_capacity_bytes", "effective_clock_hz", "effective_clock_mhz", "requested_clock_hz",
    "power_cap_w", *TRAINING_COST_KEYS,
)  # fmt: skip


# Metrics per trained token (LLMs) and per sample (vision models): a step reports one kind.
PER_TOKEN_METRICS: tuple[str, ...] = ("tokens_per_s_per_gpu", "energy_per_token_j", "usd_per_million_tokens")
PER_TOKEN_METRICS += ("gco2_per_token", "embodied_gco2_per_token")
PER_SAMPLE_METRICS: tuple[str, ...] = ("samples_per_s_per_gpu", "energy_per_sample_j")
PER_SAMPLE_METRICS += ("usd_per_million_samples", "gco2_per_sample", "embodied_gco2_per_sample")


def training_metrics(*models: str) -> tuple[str, ...]:
    """The training metrics a step of each of `models` reports (per token for an LLM, per sample for a
    vision model): of several, those every one reports."""
    from dse.workload.vision import is_vision_model

    vision = {is_vision_model(m) for m in models}
    other = (PER_TOKEN_METRICS if True in vision else ()) + (PER_SAMPLE_METRICS if False in vision else ())
    return tuple(m for m in TRAINING_METRICS if m not in other)


@cache
def _adapter(key: str) -> Any:
    from typing import Annotated

    from pydantic import ConfigDict, TypeAdapter

    from dse.search.study import WorkloadConfig

    field = WorkloadConfig.model_fields[key]
    annotation: Any = field.annotation
    typed: Any = Annotated[annotation, *field.metadata] if field.metadata else annotation
    return TypeAdapter(typed, config=ConfigDict(strict=True))  # as the workload: section's StrictModel


def workload_value(key: str, value: Any) -> Any:
    """`value` as the study's workload key `key` takes it, by the rule of its `workload:` section (a
    `StrictModel`: 1e1 is 10, while '2', 2.5 and true are no layout degree); ConfigError naming the key
    otherwise. Space values reach a point raw."""
    from pydantic import ValidationError

    from dse.search.search_config import integral_float
    from dse.search.study import WorkloadConfig

    if key not in WorkloadConfig.model_fields:
        return value
    try:
        return _adapter(key).validate_python(
            integral_float(WorkloadConfig.model_fields[key].annotation, value)
        )
    except ValidationError as exc:
        reason = exc.errors()[0]["msg"]
        raise ConfigError(f"workload key '{key}': {value!r} is not a valid value ({reason})") from None


def training_request(get: Callable[[str], Any]) -> Any:
    """The `TrainingRequest` of a point whose workload key `k` is `get(k)`; ConfigError for a layout or
    batch that cannot run (tp x pp x cp not dividing num_gpus, a global batch micro batch x dp does not
    divide, ...)."""
    from dse.training.parallel import ParallelLayout
    from dse.training.step import TrainingRequest

    layout = ParallelLayout(
        num_gpus=int(get("num_gpus")), tp=int(get("tp")), pp=int(get("pp")), cp=int(get("cp")),
        vp=int(get("vp")), ep=int(get("ep")), fsdp=bool(get("fsdp")),
        distributed_optimizer=bool(get("distributed_optimizer")),
        tp_comm_overlap=bool(get("tp_comm_overlap")), cp_load_balance=bool(get("cp_load_balance")),
        ep_dispatcher=str(get("ep_dispatcher")),
    )  # fmt: skip
    micro = int(get("micro_batch"))
    return TrainingRequest(
        micro_batch=micro, global_batch=int(get("global_batch") or micro * layout.dp),
        seq_len=int(get("seq_len")), image_size=int(get("image_size")),
        precision="bf16" if get("precision") is None else str(get("precision")),
        recompute=str(get("recompute")), optimizer=str(get("optimizer")), attention=str(get("attention")),
        memory_format=str(get("memory_format")), objective=str(get("objective")), layout=layout,
        attention_kernel=str(get("attention_kernel")), lora_rank=int(get("lora_rank")),
        packed_sample_len=int(get("packed_sample_len")), eager_ops=bool(get("eager_ops")),
        loader_samples_per_s=float(get("loader_samples_per_s")),
    )  # fmt: skip


# The workload keys `training_request` reads; the layout and batch ones are always checked at load
# (`layout_problem`), the others where a study varies them.
REQUEST_KEYS: tuple[str, ...] = (
    "num_gpus", "tp", "pp", "cp", "vp", "ep", "micro_batch", "global_batch", "fsdp", "distributed_optimizer",
    "tp_comm_overlap", "cp_load_balance", "ep_dispatcher", "seq_len", "image_size", "precision", "recompute",
    "optimizer", "attention", "memory_format", "objective", "attention_kernel", "lora_rank",
    "packed_sample_len", "eager_ops", "loader_samples_per_s",
)  # fmt: skip
LAYOUT_KEYS: tuple[str, ...] = ("num_gpus", "tp", "pp", "cp", "micro_batch", "global_batch")
# Combinations `layout_problem` tries at most; a larger study is left to its points.
MAX_LAYOUT_COMBINATIONS = 4096


def _chosen_or(chosen: Mapping[str, Any], base: Callable[[str], Any], key: str) -> Any:
    return chosen[key] if key in chosen else base(key)


def layout_problem(values: Mapping[str, Sequence[Any]], base: Callable[[str], Any]) -> tuple[str, Any, str]:
    """Why points would fail whatever the sampler draws: ("", None, why) when no combination of the
    `values` (per REQUEST_KEYS key: what a point may take) makes a request `training_request` accepts (other
    keys read through `base`), else (key, value, why) for the first value no combination of the others'
    values accepts; ("", None, "") when every value runs somewhere, or when there are more than
    MAX_LAYOUT_COMBINATIONS combinations to try. A study is refused at load on either. Combinations that
    `when`s keep apart are tried too, so the check errs towards loading."""
    from itertools import product

    keys = [k for k in REQUEST_KEYS if values.get(k)]
    if math.prod(len(set(map(repr, values[k]))) for k in keys) > MAX_LAYOUT_COMBINATIONS:
        return "", None, ""

    def first_error(choices: Sequence[Sequence[Any]]) -> str | None:
        """None if some combination runs, else the first combination's error."""
        why = None
        for combo in product(*choices):
            chosen: dict[str, Any] = dict(zip(keys, combo, strict=True))
            try:
                training_request(functools.partial(_chosen_or, chosen, base))
                return None
            except ConfigError as exc:
                # in a study the keys are workload keys: "--num-gpus 8" reads "num_gpus 8"
                text = re.sub(r" \(--[a-z-]+\)", "", str(exc))
                why = why or re.sub(r"--([a-z-]+)", lambda m: m.group(1).replace("-", "_"), text)
        return why

    if (why := first_error([values[k] for k in keys])) is not None:
        return "", None, why
    for key in keys:
        for value in dict.fromkeys(values[key]):
            if (why := first_error([values[k] if k != key else [value] for k in keys])) is not None:
                return key, value, why
    return "", None, ""


def layout_culprit(
    values: Mapping[str, Sequence[Any]], base: Callable[[str], Any], defaults: Mapping[str, Any]
) -> str | None:
    """The first of `defaults`' keys (values a study wrote once) whose default value lets some combination
    of `values` run: where to point an error that no point can run (`tp: 3` beside `num_gpus: 8`)."""
    for key, default in defaults.items():
        if not layout_problem({**values, key: [default]}, base)[2]:
            return key
    return None


def evaluate_training_point(params: Mapping[str, Any], ctx: Any) -> dict[str, Any]:
    """Metrics of one training step; `ctx` is the study's `EvalContext` (its training fields)."""
    from dse.cost.operation import training_cost_outputs
    from dse.hardware.catalog import load_gpu
    from dse.perf.types import OperatingPoint
    from dse.search.objective import check_point_clock, cost_options, moved_price, split_params
    from dse.training.predict import check_model_options, predict_training
    from dse.units import MHZ

    gpu_over, op, wl = split_params(params)

    def get(key: str) -> Any:
        return workload_value(key, wl[key]) if key in wl else getattr(ctx, key)

    gpu = load_gpu(ctx.gpu, gpu_over)
    clock_mhz, cap_w = op.get("sm_clock_mhz"), op.get("power_cap_w")
    check_point_clock(gpu, clock_mhz)
    point = OperatingPoint(
        sm_clock_hz=None if clock_mhz is None else float(clock_mhz) * MHZ,
        power_cap_w=None if cap_w is None else float(cap_w),
    )
    request = training_request(get)
    check_model_options(str(get("model")), request)
    raw = predict_training(str(get("model")), gpu, request, point).metrics()
    out: dict[str, Any] = {k: raw[k] for k in TRAINING_METRICS if k in raw}
    out |= {"feasible": raw["feasible"], "infeasible_reason": raw["infeasible_reason"]}
    if gpu.die is not None:  # a GPU file without a die section has no build ledger
        out |= training_cost_outputs(gpu, raw, moved_price(cost_options(params, ctx), ctx, gpu))
    out |= {
        "tdp_w": gpu.power.tdp_w,
        "power_cap_w": point.power_cap_w if point.power_cap_w is not None else gpu.power.tdp_w,
        "sm_clock_hz": point.sm_clock_hz or gpu.clocks.boost_clock_hz,
        "memory_bw_bytes_per_s": gpu.memory.bw_bytes_per_s,
        "memory_capacity_bytes": gpu.memory.capacity_bytes,
    }
    return out

"""Study files (studies/*.yaml): schema, line-numbered loading, and the checks made before a run.

    name: llm-serving-h100                 # results go to results/<name>/<run-id>/
    description: free text
    model: llama-3.1-8b                    # catalog model (dse models) or a config.json path
    gpu: h100-sxm                          # base catalog GPU that gpu.* parameters override
    workload: {batch: 32, input_tokens: 1024, output_tokens: 256, precision: bf16, attention: flash}
    space: spaces/h100_like.yaml           # a space file (relative to this file, or to the working
                                           # directory), or an inline mapping {param: spec} (see space.py)
    objectives: {e2e_latency_s: minimize, energy_per_output_token_j: minimize}
    constraints:                           # bounds on metrics; the right side is a number or a metric
      - avg_power_w <= tdp_w               # ...also {metric: avg_power_w, op: "<=", value: 700}
      - memory_fits                        # = memory_bytes <= memory_capacity_bytes
    reference_point: {e2e_latency_s: 60, energy_per_output_token_j: 5}   # optional, for hypervolume
                                           # (default: the first feasible batch's worst values + 10%)
    search:
      sampler: {kind: nsga2, population: 64}   # grid | random | qmc | nsga2 | nsga3 | tpe (or just `nsga2`)
      n_points: 2000                       # budget: distinct evaluated points
      time_budget_s: 600                   # budget: wall time (optional)
      patience: 20                         # stop after this many batches without progress (pareto.RunFront)
      batch_size: 64                       # points asked per batch (default: population, tpe's
                                           # n_startup_trials, else 64)
      chunk_size: 16                       # points per worker task (default: batch / (4 x workers))
      executor: ray                        # ray | process | serial
      workers: 2                           # default: all CPUs
      seed: 0                              # the sampler's seed (the requests' own is workload.request_seed)

Workload (`workload:` gives the defaults; a space parameter of the same name varies it per point):

    mode                static (default) | concurrency | request_rate | max_throughput
    input_tokens, output_tokens, precision, kv_dtype, engine, sampling       every mode
    precision           left out: each point's model at its checkpoint's weights; training: bf16
    batch, attention    the static batch: `batch` identical requests started together
                        (dse.serving.static; attention eager or flash)
    concurrency         mode concurrency: closed loop, this many requests in flight (required there)
    request_rate_per_s  mode request_rate: Poisson arrivals (required there)
    num_requests, length_dist (fixed | lognormal | exponential), length_sigma (lognormal only),
    request_seed        (the seed of the request lengths and arrivals, not the sampler's search.seed),
    max_num_seqs, max_batched_tokens, gpu_memory_utilization, host_step_s, layer_host_s (engine CPU
                        seconds per step, and per dense layer of a step without CUDA graphs;
                        dse.serving.presets) the load modes (dse.serving.load; None: the engine
                        preset's value)
    tp, pp, ep, dp      the load modes: GPUs per replica and replicas (dse.workload.sharding; default 1
                        each, GPUs tp x dp x pp); each value must fit the model in some layout of the
                        space, and a point whose combination does not (ep not dividing tp x dp) is
                        infeasible

`engine` and `sampling` left out take the mode's default, as in `dse predict`: static "none" / "none", under
load vllm and the engine's own sampler. The load modes simulate a server step by step
(dse.serving.load.predict_load, 0.1-1 s of CPU a point, growing with the concurrency and num_requests) and
report per-request percentiles (ttft_p90_s, tpot_p99_s, e2e_latency_p50_s, ...), which work as objectives and
constraints like any metric. A study whose modes (workload.mode, or the values of a `mode` parameter) include
a load mode must say how requests arrive: concurrency mode needs `concurrency`, request_rate mode
`request_rate_per_s`, in `workload:` or as a parameter. Knobs that no mode of the study uses (a load knob in a
static study, `batch` in a load-only one) are errors, as in `dse predict`.

SLOs and goodput: the constraints on a per-request latency metric with a number on the right side and `<=` or
`<` (`ttft_p90_s <= 0.5`, `e2e_latency_p99_s < 20`) are the study's SLO. Every point gets the metric
`goodput_requests_per_s`: its `requests_per_s` when all of the SLO holds, else 0. A percentile bound sets the
attainment (p90: at least 90% of the requests meet it), so this is DistServe's goodput at that load: maximize
it for the most requests/s within the SLO, or minimize `energy_per_output_token_j` under the same constraints.
An objective or constraint on goodput_requests_per_s needs an SLO constraint. Metrics are checked against the
study's modes: only those every mode reports are allowed (effective_clock_hz is static only; window_s,
num_requests, steps are load only).

Unknown keys are errors. Every error names the file, the line, the field and what is allowed, e.g.
`studies/x.yaml:14: space.gpu.num_sms.hihg: unknown key 'hihg' (allowed: path, when, type, low, high, ...)`.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    TypeAdapter,
    ValidationError,
)

from dse.config.yamlio import SourceMap, format_errors, load_yaml, located_error
from dse.errors import ConfigError
from dse.search.objective import (
    LATENCY_METRICS,
    LOAD_KNOBS,
    LOAD_MODES,
    MODES,
    PARALLEL_KEYS,
    EvalContext,
    Evaluator,
    Slo,
    evaluate_point,
)
from dse.search.search_config import SearchConfig, integral_float
from dse.search.search_config import StrictModel as _Strict
from dse.search.space import (
    ChoiceParam,
    ConstParam,
    FloatParam,
    IntParam,
    ParamSpec,
    SearchSpace,
    SpaceFile,
    _ParamBase,
)
from dse.search.training_point import TRAINING_KEYS, TRAINING_MODE
from dse.serving import DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS
from dse.units import MAX_COUNT  # larger counts are refused at load, not at every point
from dse.workload.sharding import MAX_GPUS

Direction = Literal["minimize", "maximize"]
Precision = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "mxfp4"]  # mxfp4: serving only
Attention = Literal["flash", "eager"]
KvDtype = Literal["bf16", "fp16", "fp8", "fp32"]  # dse.workload.engine.KV_DTYPES
Engine = Literal["none", "vllm", "trtllm", "sglang"]  # dse.workload.engine.ENGINES
Sampling = Literal["none", "greedy", "top_k_top_p"]  # dse.workload.engine.SAMPLINGS
Mode = Literal["static", "concurrency", "request_rate", "max_throughput", "training"]  # MODES + training
LengthDist = Literal["fixed", "lognormal", "exponential"]  # dse.serving.load.LENGTH_DISTS


# --- constraints -------------------------------------------------------------------------------------------

_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
_CONSTRAINT_RE = re.compile(rf"^\s*({_NAME})\s*(<=|>=|<|>)\s*(\S+)\s*$")
CONSTRAINT_SYNTAX = "'METRIC <= NUMBER|METRIC' (ops <=, >=, <, >), 'memory_fits', or {metric, op, value}"


class ConstraintConfig(_Strict):
    """`metric op value`: a point is feasible when it holds. `value` is a number or another metric."""

    metric: str = Field(pattern=rf"^{_NAME}$")
    op: Literal["<=", ">=", "<", ">"] = "<="
    value: float | str

    @property
    def text(self) -> str:
        value = f"{self.value:g}" if isinstance(self.value, float) else self.value
        return f"{self.metric} {self.op} {value}"

    def metrics(self) -> list[str]:
        return [self.metric] + ([self.value] if isinstance(self.value, str) else [])


def _parse_constraint(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    if value.strip() == "memory_fits":
        return {"metric": "memory_bytes", "op": "<=", "value": "memory_capacity_bytes"}
    m = _CONSTRAINT_RE.match(value)
    if m is None:
        raise ValueError(f"cannot parse constraint {value!r} (allowed: {CONSTRAINT_SYNTAX})")
    rhs: float | str = m.group(3)
    try:
        rhs = float(rhs)
    except ValueError:
        if not re.fullmatch(_NAME, str(rhs)):
            raise ValueError(f"constraint {value!r}: right side must be a number or a metric name") from None
    return {"metric": m.group(1), "op": m.group(2), "value": rhs}


class WorkloadConfig(_Strict):
    """Serving workload defaults (module docstring); space parameters with the same names override them."""

    mode: Mode = "static"
    batch: int = Field(default=1, ge=1, le=MAX_COUNT)  # static only
    input_tokens: int = Field(default=DEFAULT_INPUT_TOKENS, ge=1, le=MAX_COUNT)
    output_tokens: int = Field(default=DEFAULT_OUTPUT_TOKENS, ge=1, le=MAX_COUNT)
    precision: Precision | None = None  # None: serving, the checkpoint's weights (LlmArch); training, bf16
    attention: Attention = "flash"  # static only (the engines run flash attention)
    kv_dtype: KvDtype | None = None  # None: the activation dtype of `precision` (trtllm: fp8 with fp8)
    # The engine's kernel fusions and, under load, its scheduler; None: static none, load vllm.
    engine: Engine | None = None
    sampling: Sampling | None = None  # the sampler after each LM head; None: none / the engine's own
    # The load modes (dse.serving.load.LoadRequest); None: the engine preset's or the mode's default.
    concurrency: int | None = Field(default=None, ge=1, le=MAX_COUNT)
    request_rate_per_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    num_requests: int | None = Field(default=None, ge=1, le=MAX_COUNT)
    length_dist: LengthDist = "fixed"
    length_sigma: float = Field(default=0.5, gt=0, le=3)
    request_seed: int = Field(default=0, ge=0, lt=2**32)  # lengths and arrivals (not search.seed)
    max_num_seqs: int | None = Field(default=None, ge=1, le=MAX_COUNT)
    max_batched_tokens: int | None = Field(default=None, ge=1, le=MAX_COUNT)
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    # engine CPU seconds per step and per layer of an eager step; strict: `true` or "0.7" is not a time
    host_step_s: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False, strict=True)
    layer_host_s: float | None = Field(default=None, ge=0, le=0.1, allow_inf_nan=False, strict=True)
    # A training step (mode: training; dse.search.training_point): tp and pp above are its layout too.
    num_gpus: int = Field(default=1, ge=1, le=MAX_GPUS)  # as `dse predict --num-gpus` (a layout's bound)
    cp: int = Field(default=1, ge=1, le=MAX_COUNT)  # context-parallel ranks (LLMs)
    vp: int = Field(default=1, ge=1, le=MAX_COUNT)  # virtual-pipeline chunks per rank (1F1B, pp > 1)
    fsdp: bool = False
    distributed_optimizer: bool = False  # Megatron's (ZeRO-1): optimizer states sharded over dp x cp
    tp_comm_overlap: bool = True  # TP collectives overlapped with the GEMMs (Megatron / NeMo); false: exposed
    cp_load_balance: bool = True  # CP chunks balanced over the causal mask (Megatron); false: contiguous
    ep_dispatcher: Literal["alltoall", "deepep"] = "alltoall"  # MoE token exchange (dse.training.parallel)
    micro_batch: int = Field(default=1, ge=1, le=MAX_COUNT)
    global_batch: int | None = Field(default=None, ge=1, le=MAX_COUNT)  # None: micro_batch x dp
    seq_len: int = Field(default=2048, ge=1, le=MAX_COUNT)
    image_size: int = Field(default=224, ge=8, le=MAX_COUNT)
    recompute: Literal["none", "selective", "op", "full"] = "none"
    optimizer: Literal["adamw", "sgd"] = "adamw"
    memory_format: Literal["nchw", "nhwc"] = "nchw"  # vision models' layout
    objective: Literal["pretrain", "finetune"] = "pretrain"  # encoders' heads
    attention_kernel: Literal["fa2", "fa3", "triton"] = "fa2"  # LLMs (dse.training.step.ATTENTION_KERNELS)
    lora_rank: int = Field(default=0, ge=0, le=MAX_COUNT)  # LLMs: 0 every weight, r > 0 rank-r LoRA only
    packed_sample_len: int = Field(default=0, ge=0, le=MAX_COUNT)  # LLMs: L-token samples per sequence
    eager_ops: bool = (
        False  # LLMs: RMSNorm, rotary and SwiGLU as eager PyTorch's kernels (dse.training.eager)
    )
    # samples/s the input pipeline feeds each dp rank (0: no limit; dse.training.step)
    loader_samples_per_s: float = Field(default=0.0, ge=0, allow_inf_nan=False)
    tp: int = Field(default=1, ge=1, le=MAX_GPUS)  # each alone within a layout's bound, named as given
    pp: int = Field(default=1, ge=1, le=MAX_GPUS)
    ep: int = Field(default=1, ge=1, le=MAX_GPUS)
    dp: int = Field(default=1, ge=1, le=MAX_GPUS)


class CostConfig(_Strict):
    """How cost and carbon are priced (`dse.cost`; the flags of `dse predict`): None = the fact's default.
    `facts` overrides cost facts by path (`memory_usd_per_gb.hbm3: 12`); space parameters `cost.<path>`
    search them."""

    scenario: Literal["low", "mid", "high"] = "mid"
    lifetime_years: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    utilization: float | None = Field(default=None, gt=0, le=1)
    electricity_usd_per_kwh: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    pue: float | None = Field(default=None, ge=1, allow_inf_nan=False)
    grid_gco2_per_kwh: float | str | None = None
    gpu_usd_per_hour: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    gpu_price_usd: float | None = Field(default=None, ge=0, allow_inf_nan=False)
    facts: dict[str, float] = Field(default_factory=dict)


class StudyConfig(_Strict):
    """A whole study, with its space resolved (inlined) and every default filled in."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$", max_length=100)  # a directory name
    description: str = ""
    model: str = "llama-3.1-8b"
    gpu: str = "h100-sxm"
    workload: WorkloadConfig = Field(default_factory=WorkloadConfig)
    space: dict[str, ParamSpec] = Field(min_length=1)
    objectives: dict[str, Direction] = Field(min_length=1)
    constraints: list[Annotated[ConstraintConfig, BeforeValidator(_parse_constraint)]] = Field(
        default_factory=list
    )
    reference_point: dict[str, float] | None = None  # one per objective: checks.py, at each key's line
    search: SearchConfig = Field(default_factory=SearchConfig)
    cost: CostConfig = Field(default_factory=CostConfig)

    def search_space(self) -> SearchSpace:
        return SearchSpace(self.space)

    def slo(self) -> Slo:
        """The latency SLO (module docstring): constraints `latency metric <= | < number`."""
        return tuple(
            (c.metric, c.op, c.value)
            for c in self.constraints
            if c.metric in LATENCY_METRICS and c.op in ("<=", "<") and isinstance(c.value, float)
        )

    def eval_context(self) -> EvalContext:
        """What every point of this study shares (the executors pass it to the evaluator)."""
        cost = tuple(sorted((k, v) for k, v in self.cost.model_dump().items() if k != "facts"))
        cost += tuple(sorted(("cost." + k, v) for k, v in self.cost.facts.items()))
        return EvalContext(
            gpu=self.gpu, model=self.model, slo=self.slo(), cost=cost, **self.workload.model_dump()
        )

    @property
    def directions(self) -> list[str]:
        return list(self.objectives.values())

    def with_overrides(self, **search: Any) -> StudyConfig:
        """A copy with `search` fields replaced (CLI --n-points, --executor, --seed); None means keep."""
        update = {k: v for k, v in search.items() if v is not None}
        if not update:
            return self
        try:
            new = SearchConfig.model_validate({**self.search.model_dump(), **update})
        except ValidationError as exc:
            problems = []
            for err in exc.errors():
                flag = "--" + ".".join(str(p) for p in err.get("loc", ())).replace("_", "-")
                expected = str((err.get("ctx") or {}).get("expected", "")).replace("'", "")
                hint = f" (allowed: {expected.replace(' or ', ', ')})" if expected else ""
                problems.append(f"{flag} {err.get('input')!r}: {err.get('msg')}{hint}")
            raise ConfigError("; ".join(problems)) from None
        return self.model_copy(update={"search": new})


# Fields that do not change which points are proposed: a run with other values continues the same run.
_BUDGET_FIELDS = (
    "n_points",
    "time_budget_s",
    "patience",
    "min_improvement",
    "executor",
    "workers",
    "chunk_size",
)


def resolved_dict(cfg: StudyConfig) -> dict[str, Any]:
    """The fully resolved study as plain data (space inlined, defaults filled; the workload keys that none
    of the study's modes uses left out, as a study may not give them)."""
    data = cfg.model_dump(mode="json", exclude_none=True)
    data["constraints"] = [c.text for c in cfg.constraints]
    for key in unused_workload_keys(cfg):
        data["workload"].pop(key, None)
    return data


def unused_workload_keys(cfg: StudyConfig) -> tuple[str, ...]:
    """The workload keys that no point of the study uses (none when its modes are not all serving modes:
    the `mode` parameter of another evaluator)."""
    space = cfg.search_space()
    modes = study_modes(cfg, space)
    if modes == (TRAINING_MODE,):
        used = ("mode", "precision", "attention", "tp", "pp", "ep", *TRAINING_KEYS)
        return tuple(k for k in WorkloadConfig.model_fields if k not in used)
    if not set(modes) <= set(MODES):
        return ()
    if not any(m in LOAD_MODES for m in modes):
        # a one-GPU layout is left out as before the static batch took one (the study hash is unchanged)
        single = tuple(k for k in PARALLEL_KEYS if getattr(cfg.workload, k) == 1)
        return (*LOAD_KNOBS, *single, *TRAINING_KEYS)
    unused: tuple[str, ...] = () if "static" in modes else ("batch", "attention")
    unused += () if "lognormal" in possible_values(cfg, space, "length_dist") else ("length_sigma",)
    return unused + TRAINING_KEYS


def resolved_yaml(cfg: StudyConfig) -> str:
    """study.resolved.yaml text: a valid study file that reproduces the run."""
    header = "# Fully resolved study written by dse.search (space inlined, defaults filled in).\n"
    text = yaml.safe_dump(
        resolved_dict(cfg), sort_keys=False, default_flow_style=None, width=110, allow_unicode=True
    )
    return (
        header + text
    )  # allow_unicode: "ünï" stays readable, not "\\xFCn\\xEF" (the report shows this text)


def study_hash(cfg: StudyConfig, evaluator_name: str = "") -> str:
    """Hash of everything that decides which points a run proposes (not budgets or executors)."""
    data = resolved_dict(cfg)
    data.pop("description", None)
    for key in _BUDGET_FIELDS:
        data["search"].pop(key, None)
    data["evaluator"] = evaluator_name
    files = _file_digests(data)
    if files:  # a study of catalog names keeps its hash
        data["files"] = files
    return hashlib.sha1(json.dumps(data, sort_keys=True).encode()).hexdigest()[:8]


def _file_digests(data: Any) -> dict[str, str]:
    """sha1 of each GPU file or model config the resolved study names (a model folder's config.json; the
    top-level paths absolute, a `model:` value of the space as the points read it, from the working
    directory): an edited design is another study, whose rerun starts a new run directory (it was
    continued, old and new points in one front)."""
    out: dict[str, str] = {}
    stack = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str) and (path := _named_file(item)) is not None:
            out[item] = hashlib.sha1(path.read_bytes()).hexdigest()
    return out


def _named_file(text: str) -> Path | None:
    """The file a study value names (a model folder: its config.json), or None for a name or a value."""
    try:
        path = Path(text) / "config.json" if Path(text).is_dir() else Path(text)
        return path if path.is_file() else None
    except (OSError, ValueError):  # a value too long for a file name, or with a NUL
        return None


# --- loading ---------------------------------------------------------------------------------------------

_PARAMS = TypeAdapter(dict[str, ParamSpec])


@dataclass(frozen=True)
class LoadedStudy:
    """A validated study and where each of its values came from (for later located errors)."""

    config: StudyConfig
    source: SourceMap


def _find_file(ref: str, study_path: Path) -> Path | None:
    """The file (or model folder) a study's `space:`, `gpu:` or `model:` path names: next to the study
    first, then from the working directory (then the study folder's parent, for `studies/x.yaml` naming
    `spaces/y.yaml`), so a study means the same from any working directory; None if no such file. A name
    the file system cannot hold (too long, a NUL, an unknown `~user`) is no file."""
    try:
        p = Path(ref).expanduser()
        cands = (
            [p] if p.is_absolute() else [study_path.parent / p, Path.cwd() / p, study_path.parent.parent / p]
        )
        return next((c for c in cands if c.exists()), None)
    except (OSError, RuntimeError, ValueError):
        return None


def _beside_study(value: Any, study_path: Path) -> Any:
    """A GPU file or model config path found as a file (see `_find_file`) as its absolute path: the run's
    resolved study, read from its run directory by a report or a resume, finds it too, and the study hash
    does not depend on the working directory; any other value (a catalog name, a missing file) unchanged."""
    if not isinstance(value, str):
        return value
    found = _find_file(value, study_path)
    if found is None:
        return value
    if value.endswith((".yaml", ".yml", ".json")) or "/" in value:
        return str(found.resolve())
    # a bare name is a catalog name unless it is a model folder (config.json inside), as `--model` reads it
    return str(found.resolve()) if (found / "config.json").is_file() else value


# workload keys whose values are counts: a space's `values: [1.6e1]` (YAML reads 16.0) means 16
INT_KEYS: tuple[str, ...] = (
    "batch", "input_tokens", "output_tokens", "concurrency", "num_requests", "max_num_seqs",
    "max_batched_tokens", "request_seed", "tp", "pp", "ep", "dp",
)  # fmt: skip


def _integral_choices(params: dict[str, _ParamBase], smap: SourceMap) -> dict[str, _ParamBase]:
    """`params` with the integral float values of count keys' lists and constants as ints (as a study
    section's or an int range's `1e4` already is); fractions stay, for the checks to refuse."""
    out = dict(params)
    for name, spec in params.items():
        if (spec.path or name) not in INT_KEYS:
            continue
        if isinstance(spec, ChoiceParam) and any(type(v) is float for v in spec.values):
            ints = [integral_float(int, v) for v in spec.values]
            twice = next((v for i, v in enumerate(ints) if v in ints[:i] and type(v) is int), None)
            if twice is not None:
                raise located_error(smap, ("space", name, "values"), f"value {twice} is listed twice")
            out[name] = spec.model_copy(update={"values": ints})
        elif isinstance(spec, ConstParam):
            out[name] = spec.model_copy(update={"value": integral_float(int, spec.value)})
    return out


def _load_space(raw: Any, study_path: Path, smap: SourceMap) -> tuple[dict[str, _ParamBase], SourceMap]:
    if isinstance(raw, str):
        found = _find_file(raw, study_path)
        if found is None:
            raise located_error(
                smap,
                ("space",),
                f"space file '{raw}' not found (looked next to {study_path.name} and in {Path.cwd()})",
            )
        if not found.is_file():  # '' or '.' name the study's own folder
            folder = found.resolve()
            raise located_error(smap, ("space",), f"'{raw}' names the folder {folder}, not a space file")
        data, space_map = load_yaml(found)
        if not isinstance(data, dict):
            raise ConfigError(f"{found}:1: expected a mapping with `parameters:`")
        try:
            space = SpaceFile.model_validate(data)
        except ValidationError as exc:
            raise ConfigError(format_errors(exc, SpaceFile, space_map)) from None
        nested = smap.nested(("space",), _shift(space_map, ("parameters",)))
        return dict(space.parameters), nested
    if isinstance(raw, dict):
        try:
            return dict(_PARAMS.validate_python(raw)), smap
        except ValidationError as exc:
            raise ConfigError(format_errors(exc, _SpaceRoot, smap, prefix=("space",))) from None
    if raw is None:
        raise located_error(smap, ("space",), "required key is missing (a space file path or a mapping)")
    raise located_error(smap, ("space",), "expected a path to a space file or a mapping {param: spec}")


class _SpaceRoot(BaseModel):
    """Only used to look up allowed keys for inline-space errors (loc starts with `space`)."""

    space: dict[str, ParamSpec]


def _shift(smap: SourceMap, prefix: tuple[str, ...]) -> SourceMap:
    """The part of a map under `prefix`, re-rooted (a space file's `parameters:` becomes `space`)."""
    n = len(prefix)
    lines = {k[n:]: v for k, v in smap.lines.items() if k[:n] == prefix}
    return SourceMap(smap.file, lines)


def load_study(path: str | Path, *, evaluator: Evaluator | None = None) -> LoadedStudy:
    """Load, validate and check a study file; raise ConfigError naming file, line, field and what is allowed.

    `evaluator` decides which metric names and parameter paths are valid: the default (`evaluate_point`)
    checks paths against the GPU catalog and metrics against the serving metrics; an evaluator with a
    `metric_names` attribute has its metrics checked and its paths left alone.
    """
    path = Path(path)
    if not path.is_file():
        what = "is not a regular file" if path.exists() else "not found"  # a folder, a FIFO, a device
        raise ConfigError(f"study file '{path}' {what}")
    data, smap = load_yaml(path)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:1: expected a mapping (name, space, objectives, ...) at the top level")
    params, smap = _load_space(data.get("space"), path, smap)
    params = _integral_choices(params, smap)
    beside = {key: _beside_study(data[key], path) for key in ("gpu", "model") if key in data}
    try:
        cfg = StudyConfig.model_validate({**data, **beside, "space": params})
    except ValidationError as exc:
        raise ConfigError(format_errors(exc, StudyConfig, smap)) from None
    from dse.search.checks import check_study  # checks import this module's schema

    check_study(cfg, smap, evaluator or evaluate_point)
    return LoadedStudy(cfg, smap)


def study_from_dict(
    data: dict[str, Any], *, source: str = "<study>", evaluator: Evaluator | None = None
) -> StudyConfig:
    """Validate and check a study given as data (tests, notebooks); errors cite `source` without lines."""
    smap = SourceMap(source)
    space = data.get("space")
    params, _ = _load_space(space, Path(source), smap) if not isinstance(space, str) else ({}, smap)
    try:
        cfg = StudyConfig.model_validate({**data, "space": params} if params else data)
    except ValidationError as exc:
        raise ConfigError(format_errors(exc, StudyConfig, smap)) from None
    from dse.search.checks import check_study  # checks import this module's schema

    check_study(cfg, smap, evaluator or evaluate_point)
    return cfg


# --- checks after validation -----------------------------------------------------------------------------


def study_modes(cfg: StudyConfig, space: SearchSpace | None = None) -> tuple[str, ...]:
    """The serving modes a study's points can have: the values of its `mode` parameters, plus
    workload.mode where no such parameter exists or each has a `when`."""
    space = space or cfg.search_space()
    found: list[str] = []
    always = False
    for name, spec in cfg.space.items():
        if space.path_of(name) == "mode":
            found += [str(v) for _, v in param_values_with_locs(name, spec)]
            always = always or spec.when is None
    if not always:
        found.append(cfg.workload.mode)
    return tuple(dict.fromkeys(found))


def param_values_with_locs(name: str, spec: _ParamBase) -> list[tuple[tuple[str | int, ...], Any]]:
    """The values to check of one parameter with where each is written (ranges: their two bounds)."""
    if isinstance(spec, ChoiceParam):
        return [(("space", name, "values", i), v) for i, v in enumerate(spec.values)]
    if isinstance(spec, ConstParam):
        return [(("space", name, "value"), spec.value)]
    if isinstance(spec, IntParam | FloatParam):
        return [(("space", name, "low"), spec.low), (("space", name, "high"), spec.high)]
    return []


def possible_values(cfg: StudyConfig, space: SearchSpace, key: str) -> list[Any]:
    """The values workload key `key` can take at some point (its default and its parameters' values)."""
    values = [getattr(cfg.workload, key)]
    for name, spec in cfg.space.items():
        if space.path_of(name) == key:
            values += [v for _, v in param_values_with_locs(name, spec)]
    return values

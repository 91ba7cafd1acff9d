"""What every `dse` command module shares: consoles, option types, error handling, GPU and workload options.

`dse.cli` builds the typer app and registers each command module's functions explicitly.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import json
import math
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Annotated, Any, TypeVar, get_type_hints

import typer
from rich.console import Console
from rich.markup import escape

from dse.config.outpaths import output_file_problem
from dse.errors import PATH_ERRNOS, ConfigError, DseError, implied_precision_message

# Piped or redirected output has no terminal width, and rich would fold tables to 80 columns (model names
# cut to "llama…", numbers split across lines): such output gets a wide page unless COLUMNS says otherwise.
_PIPE_WIDTH = None if sys.stdout.isatty() or "COLUMNS" in os.environ else 200
# 128 + SIGPIPE: what a shell reports for a tool whose reader closed the pipe (`yes | head`)
CLOSED_PIPE_EXIT_CODE = 141


def closed_pipe() -> None:
    """Stop after the reader of stdout closed it (`dse models | head`): stdout goes to /dev/null, so the
    interpreter's final flush does not fail again, and the exit code is a shell tool's on SIGPIPE (rich
    and the parser exit 1, which says a run failed)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    sys.exit(CLOSED_PIPE_EXIT_CODE)


class _Console(Console):
    def on_broken_pipe(self) -> None:
        self.quiet = True
        closed_pipe()


# emoji=False: a `:name:` in a name or path is printed as written, not as an emoji (`esc` for markup)
console = _Console(width=_PIPE_WIDTH, emoji=False)
err_console = _Console(stderr=True, emoji=False)
F = TypeVar("F", bound=Callable[..., Any])

JsonOpt = Annotated[
    bool,
    typer.Option("--json", help="Print one JSON document (an object, or a list of rows) with SI-unit keys."),
]
SetOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="Override a GPU field or cost fact by dotted path: --set gpu.num_sms=144, "
        "--set cost.memory_usd_per_gb.hbm3=12 (repeatable; `dse gpu fields`, `dse cost facts`).",
    ),
]
MemoryOpt = Annotated[
    str | None,
    typer.Option("--memory", help="Swap the memory technology (hbm3, gddr7, ...; see `dse gpus`)."),
]
BusOpt = Annotated[int | None, typer.Option("--bus-width-bits", help="Memory bus width for --memory.")]
RateOpt = Annotated[
    float | None, typer.Option("--data-rate-gbps", help="Per-pin data rate in Gb/s for --memory.")
]


# Options that come last in every command's --help.
_LAST_OPTIONS = ("breakdown", "as_json")


def with_options(**groups: type) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare a group of options once and give it to a command as one value.

    Each keyword names a parameter of the command and a dataclass whose fields are typer `Annotated` options
    with defaults (`LoadArgs`, `CostArgs`, `TrainingArgs`); the fields become the command's options and the
    command receives one instance. Long option lists then stay out of every command's signature and body.
    """

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(fn, eval_str=True)
        fields = {name: [f.name for f in dataclasses.fields(cls)] for name, cls in groups.items()}
        added = [
            inspect.Parameter(
                field, inspect.Parameter.KEYWORD_ONLY, default=getattr(cls(), field), annotation=hint
            )
            for name, cls in groups.items()
            for field, hint in get_type_hints(cls, include_extras=True).items()
            if field in fields[name]
        ]
        own = [p for p in sig.parameters.values() if p.name not in groups]
        positional = [p for p in own if p.default is inspect.Parameter.empty]
        keyword = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own if p not in positional]
        last = [p for p in keyword if p.name in _LAST_OPTIONS]
        params = [*positional, *(p for p in keyword if p not in last), *added, *last]

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            for name, cls in groups.items():
                kwargs[name] = cls(**{f: kwargs.pop(f) for f in fields[name] if f in kwargs})
            return fn(*args, **kwargs)

        wrapper.__signature__ = sig.replace(parameters=params)  # type: ignore[attr-defined]
        wrapper.__annotations__ = {p.name: p.annotation for p in params} | {"return": sig.return_annotation}
        return wrapper

    return decorate


def esc(value: object) -> str:
    """`value` (a name, path, value from a user's file, or message quoting one) as text rich prints as
    written in a table cell, title or markup line: its `[/]` or `[red]` is not console markup."""
    return escape(str(value))


def on_command_line(ctx: typer.Context, *params: str) -> list[str]:
    """Which of the command's parameters were written on its command line (not defaulted): a flag given at
    its default value (`--tp 1`) still says what the user asked for."""
    return [p for p in params if getattr(ctx.get_parameter_source(p), "name", None) == "COMMANDLINE"]


def friendly(fn: F) -> F:
    """Turn DseError (and bad values) into one line on stderr and its exit code (2: bad input)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except DseError as exc:
            # escaped: a message quotes file names and values users wrote, and its own [brackets]
            err_console.print(f"[bold red]error:[/] {esc(exc)}", highlight=False, soft_wrap=True)
            raise typer.Exit(exc.exit_code) from None
        except KeyboardInterrupt:  # Ctrl-C (or `dse run`'s SIGTERM): one line and the shell's code
            err_console.print("interrupted", highlight=False)
            raise typer.Exit(130) from None
        except OSError as exc:  # a path no reader checked first (Path.exists() re-raises a name too long)
            line = esc(os_error_line(exc))
            err_console.print(f"[bold red]error:[/] {line}", highlight=False, soft_wrap=True)
            raise typer.Exit(2 if exc.errno in PATH_ERRNOS else 1) from None

    return wrapper  # type: ignore[return-value]


def os_error_line(exc: OSError) -> str:
    """One line for an OSError: the path it names, then the system's reason."""
    where = exc.filename if exc.filename is not None else "a file"
    return f"{where}: {exc.strerror or exc}"


# Counts the models carry as floats (metrics dicts are float-valued), written as JSON integers.
COUNT_KEYS = frozenset({"num_gpus", "num_requests", "steps", "preemptions", "kv_capacity_tokens"})


def _counts_as_ints(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {
            k: int(v) if k in COUNT_KEYS and isinstance(v, float) and v.is_integer() else _counts_as_ints(v)
            for k, v in obj.items()
        }
    if isinstance(obj, list | tuple):
        return [_counts_as_ints(v) for v in obj]
    return obj


def check_output_file(path: Path, flag: str, suggested_name: str, inputs: Sequence[Path] = ()) -> None:
    """Refuse an output file that cannot be written before the work that fills it runs, not after it
    (`dse.config.outpaths.output_file_problem` says why), or that is one of the command's `inputs` (the
    measured samples a fit reads were replaced by its coefficients)."""
    if (problem := output_file_problem(path, suggested_name)) is not None:
        raise DseError(f"{flag} {path}: {problem}")
    if path.exists() and any(p.exists() and path.samefile(p) for p in inputs):
        raise DseError(
            f"{flag} {path}: is one of the command's inputs, which it would replace; name a new file"
        )


def strict_json(obj: Any) -> str:
    """`obj` as strict JSON text (counts, COUNT_KEYS, as integers): a NaN or infinity is a bug that fails
    loudly (exit 1: the run failed, the input was fine), never `NaN` or `inf` in an output, JSON or text."""
    try:
        return json.dumps(_counts_as_ints(obj), indent=2, default=float, allow_nan=False)
    except ValueError as exc:
        err_console.print(
            f"[bold red]internal error:[/] a non-finite number in the result ({exc}); please report it"
        )
        raise typer.Exit(1) from None


def print_json(obj: Any) -> None:
    """Strict JSON on stdout (`strict_json`), flushed here so that a reader that closed the pipe is met
    as the consoles meet it (`closed_pipe`), not by the parser's exit code 1 at exit."""
    try:
        sys.stdout.write(strict_json(obj) + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        closed_pipe()


def gpu_from_options(
    name: str,
    memory: str | None,
    bus_width_bits: int | None,
    data_rate_gbps: float | None,
    sets: list[str] | None,
) -> Any:
    from dse.cost.facts import split_cost_overrides
    from dse.hardware.catalog import load_gpu
    from dse.hardware.overrides import parse_set_options

    overrides, _ = split_cost_overrides(parse_set_options(sets))  # `cost.` paths: `dse.cli.cost`
    if memory is None and (bus_width_bits is not None or data_rate_gbps is not None):
        raise DseError("--bus-width-bits and --data-rate-gbps need --memory TECH")
    if memory is not None:
        from dse.hardware.overrides import field_key

        # a flag and a --set of the same field: one silently replaced the other
        flags = {
            "--memory": ("memory.technology", memory),
            "--bus-width-bits": ("memory.bus_width_bits", bus_width_bits),
            "--data-rate-gbps": ("memory.data_rate_bit_per_s", data_rate_gbps),
        }
        for flag, (field, value) in flags.items():
            given = [k for k in overrides if field_key(k) == field]
            if given and value is not None:
                raise DseError(f"{flag} and --set {given[0]} set the same field; give one")
        overrides["memory.technology"] = memory
        if bus_width_bits is not None:
            overrides["memory.bus_width_bits"] = bus_width_bits
        if data_rate_gbps is not None:
            overrides["memory.data_rate_gbit_per_s"] = data_rate_gbps
    try:
        return load_gpu(name, overrides)
    except ConfigError as exc:  # an override of a flag's value is named by the flag written
        path = "memory.data_rate_gbit_per_s"
        if data_rate_gbps is None or f"override '{path}'" not in str(exc):
            raise
        raise ConfigError(str(exc).replace(f"override '{path}'", "--data-rate-gbps")) from None


def build_workload(
    model: str | None,
    phase: str,
    batch: int,
    seq_len: int,
    precision: str | None,
    attention: str,
    kernels: Path | None,
    *,
    image_size: int | None = None,
    memory_format: str | None = None,
    gpu: Any = None,
) -> Any:
    """The workload graph named by CLI options (shared by `workload show` and `predict`): a kernel list
    (`dse.cli.kernel_list`; `precision` None: as recorded), a vision model's forward pass of `batch` images
    (`image_size`, `memory_format`; on `gpu`, when given, a precision its Tensor Cores run), or an LLM's
    prefill or decode step."""
    if (model is None) == (kernels is None):
        raise DseError("give exactly one of --model NAME or --kernels FILE")
    if kernels is not None:  # its own dtypes, unless --precision re-types it
        from dse.cli.kernel_list import kernel_list_graph

        return kernel_list_graph(kernels, precision, gpu)[0]
    precision = "bf16" if precision is None else precision  # (callers resolve it: None for a list only)
    from dse.units import MAX_COUNT
    from dse.workload import vision

    # bounded as a static serving batch is: 1e23 failed in an op's element count (below 1: the builders)
    if batch > MAX_COUNT:
        raise DseError(f"--batch must be an integer in [1, {MAX_COUNT}], got {batch}")
    if vision.is_vision_model(str(model)):
        vm = vision.load_vision_model(str(model))
        if memory_format is not None and vm.family == "vit":
            raise DseError(f"--memory-format: {vm.name} has no convolution layers to lay out (a ViT)")
        graph, _ = vision.build_vision_graph(
            vm, batch=batch,
            image_size=224 if image_size is None else image_size,
            precision=precision, memory_format=memory_format or "nchw", attention=attention,
        )  # fmt: skip
        if gpu is not None:  # after the graph: a precision no vision model has is named as such first
            from dse.perf.rates import check_tensor_dtype

            check_tensor_dtype(gpu, precision)
        return graph
    from dse.workload.llm import build_decode_graph, build_prefill_graph
    from dse.workload.models import load_model_config

    arch = load_model_config(model)  # type: ignore[arg-type]
    if gpu is not None:  # as a serving prediction refuses it (a V100 has no bf16 Tensor Cores)
        from dse.perf.rates import check_serving_precision

        check_serving_precision(gpu, precision)
    if phase == "prefill":
        return build_prefill_graph(
            arch, batch=batch, seq_len=seq_len, precision=precision, attention=attention
        )
    if phase == "decode":
        if seq_len < 1:  # the decode builder names its own field, context_len
            raise DseError(f"--seq-len (the decode step's context) must be an integer >= 1, got {seq_len}")
        return build_decode_graph(
            arch, batch=batch, context_len=seq_len, precision=precision, attention=attention
        )
    raise DseError(f"--phase '{phase}' is not one of: prefill, decode")


def pass_graph(
    model: str | None, kernels: Path | None, batch: int | None, phase: str, seq_len: int,
    precision: str | None, attention: str, train: Any, spec: Any,
) -> tuple[Any, str | None]:  # fmt: skip
    """One pass's workload graph (`build_workload`) at the precision asked for, else an LLM checkpoint's
    (a vision model: bf16; a kernel list: the dtypes it records), and the note saying which
    (`resolve_precision`; a kernel list's: `dse.cli.kernel_list`); `train` holds a vision model's image
    size and memory format."""
    if kernels is not None and model is None:  # (both: `build_workload`'s error)
        from dse.cli.kernel_list import kernel_list_graph

        return kernel_list_graph(kernels, precision, spec)
    precision, note = resolve_precision(precision, model)
    with implied_precision(precision, note):
        graph = build_workload(
            model, phase, 1 if batch is None else batch, seq_len, precision, attention, kernels,
            image_size=train.image_size, memory_format=train.memory_format, gpu=spec,
        )  # fmt: skip
    return graph, note


ModelOpt = Annotated[
    str | None, typer.Option("--model", help="Model name (see `dse models`) or a config.json path.")
]
KernelsOpt = Annotated[
    Path | None, typer.Option("--kernels", help="EnergAIzer-format kernel-list JSON file.")
]
PhaseOpt = Annotated[str, typer.Option("--phase", help="prefill or decode (one step at context --seq-len).")]
BatchOpt = Annotated[int, typer.Option("--batch", help="Sequences in the batch.")]
ServingBatchOpt = Annotated[
    int | None,
    typer.Option(
        "--batch",
        help="Sequences (images, for a vision model) in one static batch (the default; predict: 1).",
    ),
]
SeqOpt = Annotated[
    int, typer.Option("--seq-len", help="Prompt length (prefill) or KV context length (decode).")
]
_PRECISION_HELP = (
    "fp32, tf32, bf16, fp16, fp8 or mxfp4 (4-bit weight-only expert weights: gpt-oss's MXFP4, Kimi-K2.5's "
    "int4). Default: an LLM checkpoint's own weights as published (its config's quantization_config or "
    "Hub-id suffix: fp8 for DeepSeek-V3 and *-FP8, mxfp4 for gpt-oss), else bf16"
)
PrecisionOpt = Annotated[
    str | None, typer.Option("--precision", help=f"{_PRECISION_HELP}.", show_default=False)
]
# `dse predict`'s, the one command with --training: the other commands would describe a mode they refuse
PredictPrecisionOpt = Annotated[
    str | None,
    typer.Option(
        "--precision",
        help=f"{_PRECISION_HELP} (a training step, --training: bf16).",
        show_default=False,
    ),
]


def resolve_precision(precision: str | None, model: str | None) -> tuple[str, str | None]:
    """(the precision to run, a note for stderr or None): --precision as written; else the checkpoint's
    quantization of the LLM `model` (`LlmArch.checkpoint_precision`, as vLLM, SGLang and TensorRT-LLM serve
    it) with a note saying so; else bf16. `model` is None where no checkpoint applies (a kernel list, a
    vision model, a training step: bf16)."""
    from dse.workload.vision import is_vision_model

    if precision is not None:  # as written ("" too: the precision check names it)
        return precision, None
    if model is None or is_vision_model(model):  # the caller refuses a vision model where it must
        return "bf16", None
    from dse.workload.models import load_model_config

    arch = load_model_config(model)
    scheme, precision = arch.checkpoint_scheme, arch.checkpoint_precision
    if scheme is None:
        return "bf16", None
    if precision is None:  # stored in a scheme the model does not price (`dse.workload.quantization`)
        kind = "MoE" if arch.is_moe else "dense"
        return "bf16", (
            f"note: --precision not given: {model}'s checkpoint stores {scheme} weights, which dse does not "
            f"price for a {kind} model: bf16, more weight bytes than published (--precision fp8 is nearer)"
        )
    priced = "" if precision == scheme else f" ({scheme} experts, priced as MXFP4's 4.25 bits)"
    return precision, (
        f"note: --precision not given: {precision}, the weights of {model}'s checkpoint as published{priced} "
        "(its quantization_config or ModelOpt file, Hub-id suffix or model card); "
        "--precision bf16 prices 16-bit weights"
    )


def explain_implied(message: str, precision: str, note: str | None) -> str:
    """`message` (an error or a failed row's reason) with where the precision came from when the user did
    not write it (`note` from `resolve_precision`): "--precision fp8 needs ..." alone names a flag never
    given."""
    return message if note is None else implied_precision_message(message, precision, "--precision not given")


@contextlib.contextmanager
def implied_precision(precision: str, note: str | None) -> Iterator[None]:
    """An error raised inside says where an implied precision came from (`explain_implied`)."""
    try:
        yield
    except DseError as exc:
        explained = explain_implied(str(exc), precision, note)
        if explained == str(exc):
            raise
        raise type(exc)(explained) from None


def print_note(note: str | None) -> None:
    """A dim line on stderr (once the command's input is checked, so that an error stays one line)."""
    if note:
        err_console.print(f"[dim]{esc(note)}[/]", soft_wrap=True)


AttentionOpt = Annotated[str, typer.Option("--attention", help="flash or eager.")]
# `dse predict`'s forms: None when not written, so a flag written where nothing reads it is refused.
PredictPhaseOpt = Annotated[
    str | None, typer.Option("--phase", help="prefill (default) or decode (one step at context --seq-len).")
]
PredictSeqOpt = Annotated[
    int | None,
    typer.Option(
        "--seq-len",
        help="Prompt length (prefill) or KV context (decode); 1024, or what the model's context holds.",
    ),
]
PredictAttentionOpt = Annotated[str | None, typer.Option("--attention", help="flash (default) or eager.")]
CoeffsOpt = Annotated[
    Path | None,
    typer.Option(
        "--coeffs",
        help="Coefficient file from `dse calibrate` (default: the shipped set of the GPU's generation).",
    ),
]
KvDtypeOpt = Annotated[
    str | None,
    typer.Option(
        "--kv-dtype", help="Serving: KV-cache dtype bf16, fp16, fp8 or fp32 (default: the activations')."
    ),
]


def _named(value: str | None) -> str | None:
    """An option naming a choice given as an empty string (`--engine ""`) is an error: it used to mean the
    default, silently."""
    if value is not None and not value.strip():
        raise typer.BadParameter("an empty name; give one of the names its help lists")
    return value


EngineOpt = Annotated[
    str | None,
    typer.Option(
        "--engine",
        callback=_named,
        help="Serving: vllm, sglang, trtllm or none (one kernel per operator): kernel fusions and, under "
        "load, the scheduler's defaults. Default: none for a static batch, vllm under load.",
    ),
]
SamplingOpt = Annotated[
    str | None,
    typer.Option(
        "--sampling",
        callback=_named,
        help="Serving: sampler after the LM head: none, greedy or top_k_top_p (default: none for a static "
        "batch, the engine's under load).",
    ),
]


ClockOpt = Annotated[
    float | None, typer.Option("--clock-mhz", help="Requested SM clock in MHz (default: boost).")
]
CapOpt = Annotated[
    float | None, typer.Option("--power-cap-w", help="Power cap in W (default: the GPU's TDP).")
]
InOpt = Annotated[int | None, typer.Option("--input-tokens", help="Serving: prompt tokens per request.")]
OutOpt = Annotated[int | None, typer.Option("--output-tokens", help="Serving: generated tokens per request.")]
BreakdownOpt = Annotated[
    bool, typer.Option("--breakdown", help="Energy by hardware module and by operator (training: by phase).")
]


def operating_point(
    clock_mhz: float | None, power_cap_w: float | None, gpus: dict[str, Any] | None = None
) -> Any:
    """The OperatingPoint of the CLI options. A clock outside the SM clock range of one of `gpus` (label ->
    GpuSpec) is an error here: the model would clamp it, and the user would get another clock than asked."""
    from dse.perf.dvfs import clock_outside_range
    from dse.perf.types import OperatingPoint

    if clock_mhz is not None and not clock_mhz > 0:
        raise DseError(f"--clock-mhz must be positive, got {clock_mhz}")
    for label, gpu in (gpus or {}).items():
        if clock_mhz is not None and (limits := clock_outside_range(gpu, clock_mhz)) is not None:
            raise DseError(
                f"--clock-mhz {clock_mhz:g} is outside the SM clock range of {label}: "
                f"{limits[0]:g}-{limits[1]:g} MHz"
            )
    if power_cap_w is not None and not power_cap_w > 0:
        raise DseError(f"--power-cap-w must be positive, got {power_cap_w}")
    point = OperatingPoint(
        sm_clock_hz=None if clock_mhz is None else clock_mhz * 1e6, power_cap_w=power_cap_w
    )
    if power_cap_w is not None and gpus:
        _check_cap(power_cap_w, gpus, point)
    return point


def _check_cap(power_cap_w: float, gpus: dict[str, Any], point: Any) -> None:
    """A limit below a GPU's lowest fails it (an error, as a clock off its range is); above a GPU's TDP it
    does not bind on it (compare), above every GPU's it binds on none (whatif ran 1e308 W unsaid)."""
    from dse.perf.dvfs import power_cap_w as cap_in_force

    for gpu in gpus.values():
        try:
            cap_in_force(gpu, point)
        except DseError as exc:
            raise DseError(f"--power-cap-w: {exc}") from None
    if all(power_cap_w > gpu.power.tdp_w + 1e-9 for gpu in gpus.values()):
        tdps = " and ".join(f"{label} ({gpu.power.tdp_w:g} W)" for label, gpu in gpus.items())
        raise DseError(
            f"--power-cap-w {power_cap_w:g} is above the TDP of {tdps}, the largest limit it can be set to"
        )


SamplesArg = Annotated[
    list[Path], typer.Argument(help="Sample files (.parquet or .csv) written by `dse measure kernels`.")
]


FracOpt = Annotated[
    float | None, typer.Option("--holdout-frac", help="Share of each family's shapes held out (default 0.2).")
]


SeedOpt = Annotated[int | None, typer.Option("--seed", help="Seed of the hold-out split (default 0).")]


FamiliesOpt = Annotated[
    str | None,
    typer.Option(
        "--families",
        help="Comma-separated families to use (gemm, attention_flash, attention_decode, softmax, "
        "layernorm, rmsnorm, elementwise; default all).",
    ),
]


def parse_families(text: str | None) -> list[str] | None:
    """`--families a,b` as a list (None: every family); an empty list (",") is an error naming the flag."""
    if text is None:
        return None
    families = [f.strip() for f in text.split(",") if f.strip()]
    if not families:
        from dse.calibrate.fit.sample_set import FAMILIES

        raise DseError(f"--families {text!r} names no family; give some of {', '.join(FAMILIES)}")
    return families


def check_holdout_frac(value: float | None) -> float | None:
    if value is not None and not 0.0 <= value < 1.0:
        raise DseError(f"--holdout-frac must be in [0, 1), got {value}")
    return value


def check_split_seed(value: int | None) -> int | None:
    """The hold-out split's --seed, in `dse run`'s range (-1 was numpy's ValueError traceback)."""
    if value is not None and not 0 <= value < 2**32:
        raise DseError(f"--seed must be an integer in [0, 2^32), got {value}")
    return value


def pct(x: float) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"

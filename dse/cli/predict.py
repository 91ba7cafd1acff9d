"""`dse predict`: workloads, serving, DVFS and power caps (`dse whatif`, in `whatif.py`, runs its serving
prediction on two GPUs)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from dse.cli.common import (
    BreakdownOpt,
    BusOpt,
    CapOpt,
    ClockOpt,
    CoeffsOpt,
    EngineOpt,
    InOpt,
    JsonOpt,
    KernelsOpt,
    KvDtypeOpt,
    MemoryOpt,
    ModelOpt,
    OutOpt,
    PredictAttentionOpt,
    PredictPhaseOpt,
    PredictPrecisionOpt,
    PredictSeqOpt,
    RateOpt,
    SamplingOpt,
    SetOpt,
    console,
    esc,
    friendly,
    gpu_from_options,
    implied_precision,
    on_command_line,
    operating_point,
    pass_graph,
    print_json,
    print_note,
    resolve_precision,
    with_options,
)
from dse.cli.cost import (
    COST_ROWS,
    LEDGER_ROWS,
    CostArgs,
    cost_block,
    serving_cost,
)
from dse.cli.load import (
    LOAD_ROWS,
    LoadArgs,
    PredictLoadArgs,
    check_load_attention,
    implied_lengths,
    load_title,
    load_warnings,
    named_as_flags,
    note_lengths,
    note_one_pass,
    plain_warnings,
)
from dse.cli.one_pass import (
    cap_not_held,
    cap_note,
    pass_memory_fields,
    shape_flags,
    show_graph,
    vision_pass_fields,
)
from dse.cli.training import (
    TrainingArgs,
    TrainingOpt,
    run_training,
)
from dse.errors import DseError
from dse.serving.load import LoadEstimate
from dse.workload.sharding import PARALLEL_FLAGS
from dse.workload.vision import is_vision_model

HostGapOpt = Annotated[
    float | None, typer.Option("--host-gap-us", hidden=True, help="Removed: use --launch.")
]
LaunchOpt = Annotated[
    str | None,
    typer.Option(
        "--launch",
        help="Host launch mode: eager, graphs or engine (asynchronous launch queue, dse.perf.host). "
        "Default: eager for --kernels (EnergAIzer lists are eager PyTorch), GPU time only for --model.",
    ),
]


def _coefficients(path: Path | None, gpu: Any) -> tuple[Any, Any]:
    """(latency set, power set or None) from a `dse calibrate` file, else the shipped ones for `gpu`."""
    if path is None:
        from dse.perf.coeffs import load_default_coeffs

        return load_default_coeffs(gpu), None  # None: the shipped energies of the GPU's generation
    from dse.calibrate.fit.samples import check_generation, load_calibration

    latency, power, _ = load_calibration(path)
    check_generation(path, latency, gpu)
    return latency, power


def estimate_serving(
    model: str | None,
    gpu: Any,
    load: LoadArgs,
    input_tokens: int | None,
    output_tokens: int | None,
    point: Any,
    coeffs: Path | None = None,
    **options: Any,
) -> Any:
    """The CLI's serving prediction: a static batch (`predict_serving`) or a load mode (`predict_load`).

    `options` are precision, attention, kv_dtype, engine and sampling; engine and sampling None mean the
    mode's default (static: "none"; load: vllm and the engine's sampler).
    """
    from dse.workload.models import load_model_config
    from dse.workload.vision import is_vision_model

    if model is not None and is_vision_model(model):
        raise DseError(
            f"{model} is a vision model and this is an LLM serving prediction: "
            f"use dse predict --model {model} --gpu GPU --batch B (or --training)"
        )
    if model is None:
        raise DseError("serving predictions need --model (an LLM; `dse models` lists them)")
    if input_tokens is None or output_tokens is None:  # only beside --kernels: a model's are filled in
        raise DseError("--input-tokens / --output-tokens: a serving prediction of --model, not of --kernels")
    latency, power = _coefficients(coeffs, gpu)
    arch = load_model_config(model)
    engine, sampling = options.pop("engine"), options.pop("sampling")
    if load.mode() == "static":
        from dse.serving.static import ServingRequest, predict_serving

        with named_as_flags():
            request = ServingRequest(
                batch=1 if load.batch is None else load.batch, input_tokens=input_tokens,
                output_tokens=output_tokens, engine=engine or "none", sampling=sampling or "none", **options,
                tp=load.tp, pp=load.pp, ep=load.ep, dp=load.dp,
            )  # fmt: skip
        return predict_serving(arch, gpu, request, point, coeffs=latency, power_coeffs=power)
    from dse.serving.load import predict_load

    check_load_attention(options.pop("attention"))
    request = load.request(
        input_tokens=input_tokens, output_tokens=output_tokens, precision=options["precision"],
        kv_dtype=options["kv_dtype"], engine=engine or "vllm", sampling=sampling,
    )  # fmt: skip
    from dse.serving.load_bounds import with_bounds

    est = predict_load(arch, gpu, request, point, coeffs=latency, power_coeffs=power)
    return with_bounds(est, arch, gpu, point, latency, power)


def _report_serving(
    est: Any, spec: Any, point: Any, costs: Any, given_tokens: tuple[int | None, int | None], breakdown: bool,
    as_json: bool, precision: str,
) -> None:  # fmt: skip
    """Show a serving estimate with its cost ledger, after noting the lengths filled in (`note_lengths`) and
    fp8 weights run weight-only: once everything that can fail has run, so an error stays one line."""
    from dse.cli.render import weight_only_note
    from dse.perf.dvfs import power_cap_w as cap_in_force

    cost_values = serving_cost(spec, est, costs)
    note_lengths(*given_tokens)
    print_note(weight_only_note(spec, precision))
    _show_serving(est, cost_values, breakdown, as_json, cap_in_force(spec, point))


def _no_serving_flags_in_training(
    ctx: typer.Context, load: LoadArgs, input_tokens: int | None, output_tokens: int | None, *serving: object,
    coeffs: Path | None = None, launch: str | None = None,
) -> None:  # fmt: skip
    """A training step takes its layout from --num-gpus, --tp, --pp, --cp, --vp, --ep and --fsdp: serving,
    load and --dp flags (--dp written at any value, 1 too) would be ignored, so they are an error (as
    training flags are in a serving prediction). So are --coeffs and --launch: a step runs the kernel model
    with the training ratios fitted on it (README), GPU time only."""
    graph = [flag for flag, value in (("--coeffs", coeffs), ("--launch", launch)) if value is not None]
    if graph:
        raise DseError(
            f"{', '.join(graph)}: not for --training (a step runs the kernel model with the training ratios "
            "fitted on it, without a host launch model)"
        )
    given = ["--dp"] if load.dp != 1 or on_command_line(ctx, "dp") else []
    if load.mode() != "static" or load.batch is not None:
        given.append("the load mode (--batch, --concurrency, --request-rate, --max-throughput)")
    if input_tokens is not None or output_tokens is not None:
        given.append("--input-tokens / --output-tokens")
    if any(v is not None for v in serving):
        given.append("--kv-dtype / --engine / --sampling / --kernels")
    if given:
        raise DseError(
            f"{', '.join(given)}: not for --training (a step of --micro-batch samples per GPU on --num-gpus "
            "GPUs, laid out by --tp, --pp, --cp, --vp, --ep and --fsdp; dp = GPUs / (tp x pp x cp))"
        )


# Training flags a vision model's inference forward pass also reads.
VISION_FLAGS = ("--image-size", "--memory-format")


def _check_serving_flags(model: str | None, vision: bool, launch: str | None) -> None:
    """Flags a serving prediction (--input-tokens / --output-tokens) cannot take."""
    if vision:
        raise DseError(f"--input-tokens / --output-tokens: {model} is a vision model (serving is for LLMs)")
    if launch is not None:
        raise DseError(
            "--launch: a serving prediction's host time is the engine's (--engine, --host-step-us under "
            "load); --launch applies to --kernels and --phase graphs"
        )


def _no_training_flags(train: TrainingArgs, allowed: tuple[str, ...] = ()) -> None:
    """Training options given without --training (but the `allowed` ones) would be ignored: an error."""
    given = [flag for flag in train.given() if flag not in allowed]
    if given:
        also = " or a vision model's forward pass" if set(given) & set(VISION_FLAGS) else ""
        raise DseError(f"{', '.join(given)}: only for --training (a training step){also}")


@friendly
@with_options(load=PredictLoadArgs, cost=CostArgs, train=TrainingArgs)
def predict_cmd(
    ctx: typer.Context,
    gpu: Annotated[str, typer.Option("--gpu", help="Catalog GPU name or a GPU YAML path.")] = "h100-sxm",
    model: ModelOpt = None,
    kernels: KernelsOpt = None,
    phase: PredictPhaseOpt = None,
    seq_len: PredictSeqOpt = None,
    input_tokens: InOpt = None,
    output_tokens: OutOpt = None,
    precision: PredictPrecisionOpt = None,
    attention: PredictAttentionOpt = None,
    kv_dtype: KvDtypeOpt = None,
    engine: EngineOpt = None,
    sampling: SamplingOpt = None,
    training: TrainingOpt = False,
    clock_mhz: ClockOpt = None,
    power_cap_w: CapOpt = None,
    memory: MemoryOpt = None,
    bus_width_bits: BusOpt = None,
    data_rate_gbps: RateOpt = None,
    sets: SetOpt = None,
    coeffs: CoeffsOpt = None,
    launch: LaunchOpt = None,
    host_gap_us: HostGapOpt = None,
    breakdown: BreakdownOpt = False,
    as_json: JsonOpt = False,
    *,
    load: LoadArgs,
    cost: CostArgs,
    train: TrainingArgs,
) -> None:
    """Predict latency, energy and power: a workload (--kernels, or --model with --phase), LLM serving
    (--model with --input-tokens and --output-tokens, 1024 and 256 when a load mode, layout or engine
    option is given without them) as one static batch (--batch, the default) or under load (--concurrency,
    --request-rate or --max-throughput), or a training step (--training). $ per million output tokens is
    all-in (prefill included); a static batch's $ per million input tokens is the prefill's share of it, so
    the two do not add up (README, Cost and carbon)."""
    spec = gpu_from_options(gpu, memory, bus_width_bits, data_rate_gbps, sets)
    point = operating_point(clock_mhz, power_cap_w, {spec.name: spec})
    shape_given = phase is not None or seq_len is not None
    given_tokens = (input_tokens, output_tokens)
    input_tokens, output_tokens = implied_lengths(
        model, load, given_tokens, one_pass=kernels is not None or training or shape_given,
        layout_given=bool(on_command_line(ctx, *PARALLEL_FLAGS)),
        engine_given=any(v is not None for v in (kv_dtype, engine, sampling)),
    )  # fmt: skip
    phase, seq_len, attention = shape_flags(
        model, kernels, training, input_tokens, output_tokens, phase, seq_len, attention, load.batch
    )
    if training:  # dse.cli.training: one training step
        serving = (kv_dtype, engine, sampling, kernels)
        _no_serving_flags_in_training(
            ctx, load, input_tokens, output_tokens, *serving, coeffs=coeffs, launch=launch
        )
        opts = {"precision": "bf16" if precision is None else precision, "attention": attention,
                "seq_len": seq_len, "tp": load.tp, "pp": load.pp, "ep": load.ep}  # fmt: skip
        run_training(model, spec, point, breakdown, as_json, cost.options(sets), **opts, **asdict(train))
        return
    vision = model is not None and is_vision_model(model)
    # a vision model's forward pass takes its image size and layout from the training flags of that name
    _no_training_flags(train, VISION_FLAGS if vision else ())
    if input_tokens is not None or output_tokens is not None:
        _check_serving_flags(model, vision, launch)
        precision, precision_note = resolve_precision(precision, model)
        options = {"precision": precision, "attention": attention, "kv_dtype": kv_dtype}
        options |= {"engine": engine, "sampling": sampling}
        with implied_precision(precision, precision_note):
            est = estimate_serving(model, spec, load, input_tokens, output_tokens, point, coeffs, **options)
        print_note(precision_note)
        _report_serving(est, spec, point, cost.options(sets), given_tokens, breakdown, as_json, precision)
        return
    _no_flags_a_pass_ignores(ctx, model, vision, load, (kv_dtype, engine, sampling), cost, sets)
    _no_host_gap(host_gap_us)
    graph, note = pass_graph(model, kernels, load.batch, phase, seq_len, precision, attention, train, spec)
    one_pass = model is not None and not vision and not shape_given and not as_json
    notes = functools.partial(_pass_notes, note, model if one_pass else None, phase, seq_len)
    mode = launch if launch is not None else ("eager" if kernels is not None else None)
    _predict_graph(graph, model, spec, point, coeffs, mode, breakdown, as_json, notes)


def _no_flags_a_pass_ignores(
    ctx: typer.Context,
    model: str | None,
    vision: bool,
    load: LoadArgs,
    engine_options: tuple[str | None, str | None, str | None],
    cost: CostArgs,
    sets: list[str] | None,
) -> None:
    """One forward pass (no --input-tokens/--output-tokens) takes no serving flag: an error naming them. A
    layout flag counts when written at any value: `--tp 1` beside --phase, or for a vision model, was
    silently dropped (the pass runs on one GPU). Nor is a pass priced: a cost option is refused too."""
    kv_dtype, engine, sampling = engine_options
    typed = on_command_line(ctx, *PARALLEL_FLAGS)
    given = [f"--{flag}" for flag in PARALLEL_FLAGS if getattr(load, flag) != 1 or flag in typed]
    given += [flag for flag, value in (("--kv-dtype", kv_dtype), ("--engine", engine),
                                       ("--sampling", sampling)) if value is not None]  # fmt: skip
    given += ["the load mode"] if load.mode() != "static" else []
    if given:
        flags = (
            f"{', '.join(given)}: --kv-dtype, --engine, --sampling, --tp, --pp, --ep, --dp and the load modes"
        )
        if vision:  # adding --input-tokens would only be refused next
            raise DseError(
                f"{flags} apply to LLM serving; {model} is a vision model (training: --training --num-gpus)"
            )
        raise DseError(
            f"{flags} apply to serving predictions (--model with --input-tokens / --output-tokens, not "
            "--phase, --seq-len or --kernels)"
        )
    cost.refuse(
        ctx, sets, f"a forward pass of {model}" if vision else "one pass (--phase, --seq-len, --kernels)"
    )


def _pass_notes(note: str | None, model: str | None, phase: Any, seq_len: Any) -> None:
    """A pass's notes, printed once its prediction ran (an error stays one line): `note`, and for a
    `model` predicted with the default phase and length, which ones those were."""
    print_note(note)
    if model is not None:
        note_one_pass(model, phase, seq_len)


def _no_host_gap(host_gap_us: float | None) -> None:
    if host_gap_us is not None:
        raise DseError(
            "--host-gap-us was removed: host time is now an asynchronous launch queue; give "
            "--launch eager|graphs|engine (eager is the default for --kernels)"
        )


def _predict_graph(
    graph: Any, model: str | None, spec: Any, point: Any, coeffs: Path | None, launch: str | None,
    breakdown: bool, as_json: bool, notes: Callable[[], None],
) -> None:  # fmt: skip
    """Predict one pass of `model`'s (None: a kernel list's) `graph` and show it, after `notes` (stderr)
    once nothing can fail any more."""
    from dse.perf.predict import predict_command_payload, predict_graph

    latency, power = _coefficients(coeffs, spec)
    pred = predict_graph(graph, spec, point, latency, power, launch=launch)
    notes()
    # the settings the graph was built with, in the text title (precision, attention or memory format)
    shown = [f"{graph.meta[k]}{label}" for k, label in _GRAPH_SETTINGS if graph.meta.get(k) is not None]
    if "image_size" in graph.meta:  # a vision pass: its batch and image size
        shown.append(f"{graph.meta['batch']} images of {graph.meta['image_size']} px")
    title = f"{pred.name} on {pred.gpu}" + (f" ({', '.join(shown)})" if shown else "")
    payload = predict_command_payload(pred, kernels=True)
    if graph.meta.get("precision") is not None:  # it may be the checkpoint's, not a flag's
        payload["precision"] = graph.meta["precision"]
    payload |= pass_memory_fields(graph, model, spec) | vision_pass_fields(
        graph, pred.latency_s, pred.energy_j
    )
    show_graph(payload, pred, breakdown, as_json, title)


_GRAPH_SETTINGS = (("precision", ""), ("attention", " attention"), ("memory_format", ""))


def _show_serving(est: Any, cost: dict[str, Any], breakdown: bool, as_json: bool, cap_w: float) -> None:
    power = est.metrics().get("avg_power_w")
    # The cap is held by lowering the SM clock; work whose power does not fall with it (DRAM traffic of a
    # GPU with 50x the memory energy) stays over the cap even at the lowest clock: said, not hidden.
    over = power is not None and cap_not_held(float(power), cap_w)
    if as_json:
        warned = {"warnings": plain_warnings(est)} if isinstance(est, LoadEstimate) else {}
        print_json({**est.to_dict(), "power_cap_w": cap_w, "cap_exceeded": over, **warned, **cost})
        return
    _show_serving_text(est, breakdown)
    if over:
        console.print(cap_note(cap_w, float(power), "the run"))
    _show_cost(cost, breakdown)


def _show_cost(cost: dict[str, Any], breakdown: bool) -> None:
    console.print(cost_block(cost, COST_ROWS + (LEDGER_ROWS if breakdown else ())))


def _show_serving_text(est: Any, breakdown: bool) -> None:
    from dse.cli.render import SERVING_ROWS, bound_text, breakdown_table, metrics_table
    from dse.serving.static import rollup_by_level

    if isinstance(est, LoadEstimate):
        if not est.feasible:  # no numbers to tabulate: say what was asked and why it cannot run
            console.print(esc(load_title(est)))
            console.print(f"[bold red]infeasible:[/] {esc(est.infeasible_reason)}")
            return
        console.print(metrics_table(est.metrics(), LOAD_ROWS, load_title(est)))
        console.print(bound_text(est.bound_by))
        console.print(
            "feasible" if est.feasible else f"[bold red]infeasible:[/] {esc(est.infeasible_reason)}"
        )
        for warning in load_warnings(est):
            console.print(warning)
        if breakdown:
            console.print("(--breakdown: energy by module and operator is given for a static batch)")
        return
    r = est.request
    title = (
        f"{est.model} on {est.gpu}: static batch of {r.batch} (all prompts together, decoded in lock step), "
        f"{r.input_tokens} in / {r.output_tokens} out, {r.precision}, {r.attention} attention"
        + (f", {r.kv_dtype} KV cache" if r.kv_dtype else "")
        + (f", {r.engine} engine" if r.engine != "none" else "")
        + (f", {r.sampling} sampling" if r.sampling != "none" else "")
        + (
            f"; {est.num_gpus} GPUs (tp {r.tp}, pp {r.pp}, ep {r.ep}, dp {r.dp}): power and memory per GPU, "
            f"energy over all GPUs, communication {est.comm_time_fraction:.1%} of the end-to-end time"
            if est.num_gpus > 1
            else ""
        )
    )
    parallel = (
        ("num_gpus", "GPUs", 1.0, ".0f"),
        ("total_power_w", "power, all GPUs (W)", 1.0, ".0f"),
        ("comm_time_fraction", "communication share of the run", 1.0, ".1%"),
    )
    rows = SERVING_ROWS + (parallel if getattr(est, "num_gpus", 1) > 1 else ())
    console.print(metrics_table(est.metrics(), rows, title))
    console.print(bound_text(est.bound_by))
    console.print("feasible" if est.feasible else f"[bold red]infeasible:[/] {esc(est.infeasible_reason)}")
    if breakdown:
        console.print(breakdown_table(est.energy_j_by_module, "energy by hardware module"))
        console.print(breakdown_table(rollup_by_level(est.energy_j_by_name, 1), "energy by phase"))
        console.print(breakdown_table(est.energy_j_by_name, "energy by operator", limit=25))

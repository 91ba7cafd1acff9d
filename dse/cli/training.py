"""`dse predict --training` (one training step) and `dse validate training` (MAPE on the training data)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Annotated, Any

import typer

from dse.cli.common import JsonOpt, console, esc, friendly, print_json, strict_json
from dse.config.jsonio import with_nulls
from dse.errors import DseError

TrainingOpt = Annotated[
    bool,
    typer.Option(
        "--training",
        help="Predict one training step (forward + backward + optimizer). Its MFU divides by the dense "
        "tensor peak of --precision (fp8: the fp8 peak, twice bf16's, so an fp8 MFU is not comparable with "
        "a bf16 one; model TFLOP/s per GPU is; fp32: the CUDA cores' FP32 peak).",
    ),
]
NumGpusOpt = Annotated[
    int | None, typer.Option("--num-gpus", help="Training: GPUs in all; dp = N / (tp x pp x cp) (default 1).")
]
FsdpOpt = Annotated[bool, typer.Option("--fsdp", help="Training: shard weights, grads, optimizer (ZeRO-3).")]
CpOpt = Annotated[
    int | None,
    typer.Option("--cp", help="Training LLMs: context-parallel ranks splitting each sequence (default 1)."),
]
VpOpt = Annotated[
    int | None,
    typer.Option(
        "--vp",
        help="Training: virtual-pipeline chunks per rank, interleaved 1F1B (needs --pp > 1; default 1).",
    ),
]
DistOptOpt = Annotated[
    bool,
    typer.Option(
        "--distributed-optimizer",
        help="Training: shard master weights and optimizer states over dp x cp (Megatron's, ZeRO-1).",
    ),
]
LoraRankOpt = Annotated[
    int | None,
    typer.Option(
        "--lora-rank",
        help="Training LLMs: freeze the weights and train rank-R LoRA adapters on every attention and MLP "
        "projection (default 0: train every weight).",
    ),
]
LoraTargetsOpt = Annotated[
    str | None,
    typer.Option(
        "--lora-targets",
        help="Training LLMs with --lora-rank: the projections with adapters, comma-separated, of qkv_proj, "
        "o_proj, gate_up_proj, down_proj (default: all four; NeMo's performance recipes: qkv_proj; the "
        "MLPerf Llama-2-70B LoRA reference: qkv_proj,o_proj).",
    ),
]
PackedSampleLenOpt = Annotated[
    int | None,
    typer.Option(
        "--packed-sample-len",
        help="Training LLMs: samples of L tokens packed into each --seq-len sequence, attention within each "
        "(NeMo's packed SFT; default 0: one sample per sequence).",
    ),
]
EagerOpsOpt = Annotated[
    bool,
    typer.Option(
        "--eager-ops",
        help="Training LLMs: RMSNorm, rotary embedding and SwiGLU as plain eager PyTorch runs them (no "
        "torch.compile, no fused kernels: torchtitan without --compile, Hugging Face models).",
    ),
]
AutocastOpt = Annotated[
    bool,
    typer.Option(
        "--autocast",
        help="Training LLMs: torch.autocast over fp32 weights (--precision bf16|fp16 is the compute dtype), "
        "fp32 gradients and optimizer: a plain PyTorch loop or Hugging Face's Trainer.",
    ),
]
LoaderRateOpt = Annotated[
    float | None,
    typer.Option(
        "--loader-samples-per-s",
        help="Training: samples/s the input pipeline (decode, augmentation) feeds each data-parallel rank; "
        "a step takes at least its samples at that rate (default 0: GPU-resident input, no limit).",
    ),
]
NoTpOverlapOpt = Annotated[
    bool,
    typer.Option(
        "--no-tp-comm-overlap",
        help="Training: tensor-parallel collectives on the critical path (vanilla TP) instead of overlapped "
        "with the GEMMs (Megatron / NeMo tp_comm_overlap, the default).",
    ),
]
NoCpBalanceOpt = Annotated[
    bool,
    typer.Option(
        "--no-cp-load-balance",
        help="Training: context-parallel chunks contiguous (plain ring attention: the last rank does the "
        "most causal work) instead of balanced (Megatron's, the default).",
    ),
]
EpDispatcherOpt = Annotated[
    str | None,
    typer.Option(
        "--ep-dispatcher",
        help="Training, MoE with --ep: token exchange alltoall (Megatron's default: a copy per chosen "
        "expert) or deepep (a copy per rank, past one node per node over InfiniBand).",
    ),
]
MicroBatchOpt = Annotated[
    int | None, typer.Option("--micro-batch", help="Training: sequences (images) per GPU pass (default 1).")
]
GlobalBatchOpt = Annotated[
    int | None,
    typer.Option("--global-batch", help="Training: samples per optimizer step (default micro x dp)."),
]
ImageSizeOpt = Annotated[
    int | None, typer.Option("--image-size", help="Vision models: image side (px; default 224).")
]
RecomputeOpt = Annotated[
    str | None,
    typer.Option(
        "--recompute",
        help="Training: activation recomputation none (default), selective (Megatron: attention), op "
        "(torchtitan's per-op checkpointing: every second GEMM of a layer) or full.",
    ),
]
OptimizerOpt = Annotated[
    str | None,
    typer.Option(
        "--optimizer",
        help="Training: adamw (default: fused), sgd (with momentum) or adamw-foreach (torch.optim.AdamW's "
        "default multi-tensor implementation, as eager PyTorch runs it).",
    ),
]
MemoryFormatOpt = Annotated[
    str | None,
    typer.Option(
        "--memory-format",
        help="Vision models: nchw (the default, as PyTorch's: cuDNN transposes around each "
        "tensor-core convolution) or nhwc (channels_last).",
    ),
]
AttentionKernelOpt = Annotated[
    str | None,
    typer.Option(
        "--attention-kernel",
        help="Training LLMs: the flash-attention implementation: fa2 (PyTorch SDPA, the default), fa3 "
        "(FlashAttention-3 / cuDNN via Transformer Engine, Hopper and later) or triton (llm-foundry).",
    ),
]
ObjectiveOpt = Annotated[
    str | None,
    typer.Option(
        "--objective",
        help="Training encoders (BERT): pretrain (masked-LM head; the default) or finetune (a task head).",
    ),
]

_ROWS: tuple[tuple[str, str, float, str], ...] = (
    ("step_time_s", "step time (s)", 1.0, ".4g"),
    ("tokens_per_s_per_gpu", "tokens/s per GPU", 1.0, ",.0f"),
    ("samples_per_s", "samples/s (all GPUs)", 1.0, ",.1f"),
    ("mfu", "MFU (%)", 100.0, ".1f"),
    ("model_tflops_per_gpu", "model TFLOP/s per GPU", 1.0, ".1f"),
    ("energy_per_step_j", "energy per step (J, all GPUs)", 1.0, ",.0f"),
    ("energy_per_token_j", "energy per token (J)", 1.0, ".4g"),
    ("energy_per_sample_j", "energy per sample (J)", 1.0, ".4g"),
    ("avg_power_w", "power per GPU (W)", 1.0, ".0f"),
    ("total_power_w", "power, all GPUs (W)", 1.0, ",.0f"),
    ("effective_clock_mhz", "SM clock (MHz, busy-time mean)", 1.0, ".0f"),
    ("memory_bytes", "memory per GPU (GiB)", 2.0**-30, ".1f"),
)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainingArgs:
    """The training options of `dse predict --training` (each field is its option). None: not given on the
    command line (`_training_defaults` fills it), so that an option given where it does not apply is refused
    even at its default value."""

    num_gpus: NumGpusOpt = None
    fsdp: FsdpOpt = False
    cp: CpOpt = None
    vp: VpOpt = None
    distributed_optimizer: DistOptOpt = False
    no_tp_comm_overlap: NoTpOverlapOpt = False
    no_cp_load_balance: NoCpBalanceOpt = False
    ep_dispatcher: EpDispatcherOpt = None
    lora_rank: LoraRankOpt = None
    lora_targets: LoraTargetsOpt = None
    packed_sample_len: PackedSampleLenOpt = None
    eager_ops: EagerOpsOpt = False
    autocast: AutocastOpt = False
    loader_samples_per_s: LoaderRateOpt = None
    micro_batch: MicroBatchOpt = None
    global_batch: GlobalBatchOpt = None
    image_size: ImageSizeOpt = None
    recompute: RecomputeOpt = None
    optimizer: OptimizerOpt = None
    memory_format: MemoryFormatOpt = None
    objective: ObjectiveOpt = None
    attention_kernel: AttentionKernelOpt = None

    def given(self) -> list[str]:
        """The options set on the command line, as their flags."""
        items = asdict(self).items()
        return [f"--{k.replace('_', '-')}" for k, v in items if v is not None and v is not False]


def _training_defaults() -> dict[str, Any]:
    """What an option not given means: `TrainingRequest`'s defaults, one GPU, a micro-batch of one."""
    from dataclasses import fields

    from dse.training.step import TrainingRequest

    request = {f.name: f.default for f in fields(TrainingRequest)}
    keys: tuple[str, ...] = ("image_size", "recompute", "optimizer", "memory_format", "objective")
    keys += ("attention_kernel", "lora_rank", "packed_sample_len", "loader_samples_per_s")
    return {"num_gpus": 1, "micro_batch": 1, "cp": 1, "vp": 1, **{k: request[k] for k in keys}}


def run_training(
    model: str | None, spec: Any, point: Any, breakdown: bool, as_json: bool, costs: Any = None, **opts: Any
) -> None:
    """`dse predict --training`: build the request from the CLI options, predict, print (with the cost and
    carbon of the step under `costs`, the `--cost-scenario` / `--gpu-usd-per-hour` ... options)."""
    from dse.cli.cost import priced
    from dse.cost.operation import TRAINING_COST_KEYS, training_cost_outputs
    from dse.training.parallel import ParallelLayout
    from dse.training.predict import check_model_options, predict_training
    from dse.training.step import TrainingRequest

    if model is None:
        raise DseError("--training needs --model (an LLM of `dse models` or a vision model)")
    defaults = _training_defaults()
    given = {k for k in defaults if opts.get(k) is not None}
    opts = {**opts, **{k: v for k, v in defaults.items() if opts.get(k) is None}}
    layout = ParallelLayout(
        num_gpus=opts["num_gpus"], tp=opts["tp"], pp=opts["pp"], cp=opts["cp"], vp=opts["vp"], ep=opts["ep"],
        fsdp=opts["fsdp"], distributed_optimizer=opts["distributed_optimizer"],
        tp_comm_overlap=not opts["no_tp_comm_overlap"], cp_load_balance=not opts["no_cp_load_balance"],
        ep_dispatcher=opts["ep_dispatcher"] or "alltoall",
    )  # fmt: skip
    micro, global_batch = opts["micro_batch"], opts["global_batch"]
    request = TrainingRequest(
        micro_batch=micro, global_batch=micro * layout.dp if global_batch is None else global_batch,
        seq_len=opts["seq_len"],
        image_size=opts["image_size"], precision=opts["precision"], recompute=opts["recompute"],
        optimizer=opts["optimizer"], attention=opts["attention"], memory_format=opts["memory_format"],
        objective=opts["objective"], attention_kernel=opts["attention_kernel"], layout=layout,
        lora_rank=opts["lora_rank"], lora_targets=_lora_targets(opts["lora_targets"]),
        packed_sample_len=opts["packed_sample_len"], eager_ops=opts["eager_ops"],
        loader_samples_per_s=opts["loader_samples_per_s"], autocast=opts["autocast"],
    )  # fmt: skip
    _check_layout_flags(opts, layout, given)
    check_model_options(model, request, given)
    est = predict_training(model, spec, request, point)
    metrics = est.metrics()
    cost = priced(lambda: training_cost_outputs(spec, metrics, costs), TRAINING_COST_KEYS)
    if as_json:
        head = {k: metrics[k] for k in ("model", "gpu")}
        out = {**head, **_request_fields(request, est.kind == "llm"), **metrics, **cost}
        print_json({**out, "breakdown": est.breakdown()} if breakdown else out)
        return
    from dse.cli.render import breakdown_table, metrics_table

    strict_json({**metrics, **cost})  # the text shows the same numbers: none may be NaN or infinite
    title = (
        f"{est.model} training step on {layout.num_gpus} x {est.gpu} ({_layout_text(layout)}), "
        f"{request.precision}, recompute {request.recompute}"
        + (f", LoRA rank {request.lora_rank}" if request.lora_rank else "")
        + (
            f", packed samples of {request.packed_sample_len} token{'s' * (request.packed_sample_len > 1)}"
            if 0 < request.packed_sample_len < request.seq_len
            else ""
        )
        + (", eager elementwise ops" if request.eager_ops else "")
        + (", under autocast (fp32 weights)" if request.autocast else "")
        + (
            ", attention eager"
            if request.attention == "eager"
            else ""
            if est.kind != "llm"
            else f", attention {request.attention_kernel}"
        )
    )
    console.print(metrics_table(metrics, _ROWS, title))
    console.print(
        "feasible" if est.feasible else f"[bold red]infeasible:[/] {esc(metrics['infeasible_reason'])}"
    )
    if metrics["cap_exceeded"]:
        console.print(
            f"[bold yellow]note:[/] the {est.power_cap_w:.0f} W cap cannot be held: at the lowest clock "
            f"the step still draws {est.avg_power_w:.0f} W per GPU"
        )
    _show_training_cost(cost, est.kind == "llm", breakdown)
    if breakdown:
        times = {k: v for k, v in est.phase_time_s.items() if k in est.phase_energy_j}
        console.print(breakdown_table(times, "step time by phase", column="time (s)"))
        console.print(breakdown_table(est.phase_energy_j, "energy per GPU by phase (J)"))


def _lora_targets(text: str | None) -> tuple[str, ...]:
    """`--lora-targets qkv_proj,o_proj` as the request's tuple (checked there, with --lora-rank)."""
    if text is None:
        return ()
    targets = tuple(t.strip() for t in text.split(","))
    if not all(targets):
        raise DseError(f"--lora-targets names projections separated by commas, got {text!r}")
    if len(set(targets)) != len(targets):  # an adapter counted twice
        raise DseError(f"--lora-targets names each projection once, got {text!r}")
    return targets


def _check_layout_flags(opts: dict[str, Any], layout: Any, given: set[str]) -> None:
    """Refuse a layout option the layout never reads (it would change nothing, silently)."""
    needs = (
        (opts["ep_dispatcher"] is not None and layout.ep == 1,
         "--ep-dispatcher needs --ep > 1 (it moves tokens between expert-parallel ranks)"),
        (opts["no_tp_comm_overlap"] and layout.tp == 1, "--no-tp-comm-overlap needs --tp > 1"),
        (opts["no_cp_load_balance"] and layout.cp == 1, "--no-cp-load-balance needs --cp > 1"),
        ("attention_kernel" in given and opts["attention"] == "eager",  # as TrainingRequest's own check
         f"attention_kernel {opts['attention_kernel']} (--attention-kernel): a flash-attention "
         "implementation, but attention is eager (GEMMs and a softmax)"),
    )  # fmt: skip
    for refused, message in needs:
        if refused:
            raise DseError(message)


def _request_fields(request: Any, llm: bool) -> dict[str, Any]:
    """What the step trained, for `--json`: the request's settings beside the layout `metrics` echoes."""
    keys: tuple[str, ...] = ("precision", "micro_batch", "global_batch", "seq_len" if llm else "image_size")
    keys += ("recompute",)
    keys += ("optimizer", "attention", "attention_kernel", "objective", "lora_targets") if llm else ()
    keys += () if llm else ("memory_format",)
    return {k: list(v) if isinstance(v := getattr(request, k), tuple) else v for k in keys}


def _show_training_cost(cost: dict[str, Any], llm: bool, breakdown: bool) -> None:
    """The cost block of a training step: the serving block's rows per trained token or sample."""
    from dse.cli.cost import COST_ROWS, LEDGER_ROWS, cost_block

    unit = "token" if llm else "sample"
    per_unit = {
        "usd_per_million_output_tokens": (f"usd_per_million_{unit}s", f"$ per million trained {unit}s"),
        "gco2_per_output_token": (f"gco2_per_{unit}", f"gCO2 per {unit} (operational)"),
        "embodied_gco2_per_output_token": (f"embodied_gco2_per_{unit}", f"gCO2 per {unit} (embodied)"),
    }
    rows = [
        (*per_unit[key], scale, fmt) if key in per_unit else (key, label, scale, fmt)
        for key, label, scale, fmt in COST_ROWS
    ]
    rows.insert(3, ("usd_per_step", "$ per step (all GPUs)", 1.0, ".4g"))
    if breakdown:
        rows += [row for row in LEDGER_ROWS if "input_tokens" not in row[0]]
    console.print(cost_block(cost, tuple(rows)))


def _layout_text(layout: Any) -> str:
    """`dp 8, tp 4, pp 2, vp 4, fsdp`: the layout's degrees, the ones above 1 beyond dp / tp / pp."""
    parts = [f"dp {layout.dp}", f"tp {layout.tp}", f"pp {layout.pp}"]
    parts += [f"{k} {getattr(layout, k)}" for k in ("cp", "vp", "ep") if getattr(layout, k) > 1]
    if layout.fsdp:
        parts.append("fsdp")
    if layout.distributed_optimizer:
        parts.append("distributed optimizer")
    if layout.tp > 1 and not layout.tp_comm_overlap:
        parts.append("TP exposed")
    if layout.cp > 1 and not layout.cp_load_balance:
        parts.append("CP unbalanced")
    if layout.ep > 1 and layout.ep_dispatcher != "alltoall":
        parts.append(f"EP {layout.ep_dispatcher}")
    return ", ".join(parts)


@friendly
def validate_training_cmd(as_json: JsonOpt = False) -> None:
    """Training throughput (and power) MAPE per source and metric on ../shared/data/training."""
    from rich.table import Table

    from dse.calibrate.validate.training import validate_training

    result = validate_training()
    if as_json:
        print_json(with_nulls(result))
        return
    title = (
        "training steps and vision forward passes against the shared training data and our H100 runs "
        "(MAPE by source, metric)"
    )
    table = Table(title=title)
    for column in ("source", "metric", "n", "mape", "median_ape", "bias"):
        table.add_column(column, justify="left" if column in ("source", "metric") else "right")
    for row in result["rows"]:
        table.add_row(
            str(row["source"]), row["metric"], str(row["n"]), f"{100 * row['mape']:.1f}%",
            f"{100 * row['median_ape']:.1f}%", f"{100 * row['bias']:+.1f}%",
        )  # fmt: skip
    console.print(table)
    console.print(
        "own-h100: our eager PyTorch runs on a lent H100 (dse/calibrate/measured). The batch-norm model was "
        "fitted on the kernels of three of them (ResNet-50 bf16 NHWC and NCHW, fp16 NCHW); a group named "
        "'... held out' is its group without those rows. The other own-h100 groups were fitted on nothing. "
        "timm-rtx3090-vit: ViT training (Ti/16, S/16, S/32, B/32, B/8, L/32, H/14) with unfused attention "
        "(--attention eager), as its PyTorch 1.12 ran it. timm-rtx4090-infer-*: forward passes (inference, "
        "PyTorch 2.9, fused attention) on a GPU no fit has measured. Forward passes "
        "(own-h100/torchvision-forward, timm-rtx4090-infer-*) run as "
        "`dse predict` does, with the generation's latency corrections; training steps run with the same "
        "corrections (attention aside) and the training ratios fitted on them, on the eager-framework LLM "
        "rows (llm-foundry, torchtitan, DeepLearningExamples BERT). The NVIDIA recipe rows (Megatron-Bridge, "
        "NeMo, dgxc-benchmarking; /jax: its Paxml and MaxText stacks) are fitted on nothing."
    )
    for dataset, reasons in result["skipped"].items():
        for reason, count in sorted(reasons.items(), key=lambda kv: -kv[1]):
            console.print(f"skipped ({dataset}): {count} rows: {reason}")

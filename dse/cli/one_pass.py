"""`dse predict` of one pass (`--phase`, `--seq-len`, a vision forward pass, `--kernels`): the shape flags
and their defaults (`shape_flags`, also read by `dse workload show` and a training step), the pass's memory
and its display."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dse.cli.common import console, print_json
from dse.errors import DseError

GIB = 2**30


def shape_flags(
    model: str | None,
    kernels: Path | None,
    training: bool,
    input_tokens: int | None,
    output_tokens: int | None,
    phase: str | None,
    seq_len: int | None,
    attention: str | None,
    batch: int | None,
) -> tuple[str, int, str]:
    """--phase, --seq-len and --attention (and --batch with a kernel list) written where nothing reads them
    (they would be ignored): an error naming them. Returns them with their defaults filled in. A vision
    model's input is images; a kernel list fixes its own shapes; serving takes its lengths from
    --input-tokens / --output-tokens; a training step is one optimizer step, not a phase."""
    from dse.workload.vision import is_vision_model, load_vision_model

    given = {"--phase": phase, "--seq-len": seq_len, "--attention": attention}
    named = [flag for flag, value in given.items() if value is not None]
    vision = model is not None and is_vision_model(model)
    serving = input_tokens is not None or output_tokens is not None
    if vision:
        vit = load_vision_model(str(model)).family == "vit"  # a ViT's attention is flash or eager
        unused = [f for f in named if f != "--attention" or not vit]
        why = f"{model} is a vision model (its input is images of --image-size)" + (
            "; a convolutional network has no attention" if "--attention" in unused else ""
        )
    elif kernels is not None:
        unused = named + (["--batch"] if batch is not None else [])
        why = "a kernel list (--kernels) fixes its own shapes"
    elif training:
        unused, why = (
            [f for f in named if f == "--phase"],
            "a training step is forward, backward and optimizer",
        )
    elif serving:
        unused, why = (
            [f for f in named if f != "--attention"],
            "serving lengths are --input-tokens/--output-tokens",
        )
    else:
        unused, why = [], ""
    if unused:
        raise DseError(f"{', '.join(unused)}: does not apply here: {why}")
    phase, attention = ("prefill" if phase is None else phase), ("flash" if attention is None else attention)
    return phase, _default_seq_len(model, kernels, vision, phase) if seq_len is None else seq_len, attention


def _default_seq_len(model: str | None, kernels: Path | None, vision: bool, phase: str) -> int:
    """1024 tokens, or as many as the model's context holds (BERT: 512; a decode step's new token needs
    one more place than its context)."""
    if model is None or kernels is not None or vision:
        return 1024
    from dse.workload.models import load_model_config

    room = load_model_config(model).max_position_embeddings - (1 if phase == "decode" else 0)
    return max(1, min(1024, room))


def pass_memory_fields(graph: Any, model: str | None, spec: Any) -> dict[str, Any]:
    """Whether a model's pass fits in the GPU's memory (keys `memory_bytes`, `memory_capacity_bytes`,
    `memory_fits`, and an LLM's parts): a vision forward pass (`inference_memory_bytes`), an LLM's prefill
    or decode step (`dse.serving.memory.pass_memory_bytes`: weights, KV cache, activations). A kernel
    list has no model: nothing."""
    have = spec.memory.capacity_bytes
    if "image_size" in graph.meta:
        from dse.workload.vision import inference_memory_bytes

        need = inference_memory_bytes(graph)
        return {"memory_bytes": need, "memory_capacity_bytes": have, "memory_fits": need <= have}
    if model is None or graph.meta.get("phase") not in ("prefill", "decode"):
        return {}
    from dse.serving.memory import pass_memory_bytes
    from dse.workload.models import load_model_config

    parts = pass_memory_bytes(load_model_config(model), graph.meta)
    return parts | {"memory_capacity_bytes": have, "memory_fits": parts["memory_bytes"] <= have}


def vision_pass_fields(graph: Any, latency_s: float, energy_j: float) -> dict[str, Any]:
    """A vision forward pass's settings (batch, image size, and its layout: a CNN's memory format, a ViT's
    attention) and its rate and energy per image, under the keys a vision training step's `--json` uses
    (`samples_per_s`, `energy_per_sample_j`): a saved result says what ran. Any other pass: nothing."""
    meta = graph.meta
    if "image_size" not in meta:
        return {}
    batch = int(str(meta["batch"]))
    settings = {k: meta[k] for k in ("batch", "image_size", "memory_format", "attention") if k in meta}
    return settings | {"samples_per_s": batch / latency_s, "energy_per_sample_j": energy_j / batch}


def _no_fit_text(payload: dict[str, Any]) -> str:
    need, have = payload["memory_bytes"] / GIB, payload["memory_capacity_bytes"] / GIB
    if "kv_cache_bytes" not in payload:  # a vision forward pass
        return (
            f"[bold red]does not fit:[/] weights, input and the largest activations need {need:.1f} GiB of "
            f"the GPU's {have:.1f} GiB (lower --batch or --image-size)"
        )
    w, kv, act = (payload[k] / GIB for k in ("weight_bytes", "kv_cache_bytes", "activation_bytes"))
    hint = (
        "the weights alone exceed it: a smaller --precision, or a serving prediction over several GPUs (--tp)"
        if w > have
        else "lower --batch or --seq-len"
    )
    return (
        f"[bold red]does not fit:[/] weights {w:.1f} GiB, KV cache {kv:.1f} GiB and activations {act:.1f} "
        f"GiB need {need:.1f} GiB of the GPU's {have:.1f} GiB ({hint})"
    )


# Average power above the cap by more than this share means the cap cannot be held (rounding aside).
CAP_TOLERANCE = 1e-3


def cap_not_held(power_w: float, cap_w: float) -> bool:
    """Whether a run's average power per GPU stays over the cap in force."""
    return power_w > cap_w * (1.0 + CAP_TOLERANCE)


def cap_note(cap_w: float, power_w: float, what: str) -> str:
    """The note under a table whose average power is over the cap in force."""
    return (
        f"[bold yellow]note:[/] the {cap_w:.0f} W cap is not held: with the SM clock lowered {what} still "
        f"draws {power_w:.0f} W per GPU on average (power that does not fall with the clock, or clock steps)"
    )


def show_graph(
    payload: dict[str, Any], pred: Any, breakdown: bool, as_json: bool, title: str | None = None
) -> None:
    from dse.cli.render import GRAPH_ROWS, breakdown_table, metrics_table

    cap, power = float(payload.get("power_cap_w", "inf")), float(payload.get("avg_power_w", 0.0))
    over = cap_not_held(power, cap)
    if as_json:
        print_json({**payload, "cap_exceeded": over})
        return
    console.print(metrics_table(payload, GRAPH_ROWS, title or f"{pred.name} on {pred.gpu}"))
    if over:
        console.print(cap_note(cap, power, "the pass"))
    if payload.get("memory_fits") is False:
        console.print(_no_fit_text(payload))
    console.print(breakdown_table(pred.energy_j_by_module(), "energy by hardware module"))
    if breakdown:
        from dse.perf.kernel_rows import HOST_GAP_PART

        by_name = pred.energy_j_by_name()
        title = "energy by operator" + (
            f" (each kernel's own; {HOST_GAP_PART}: the GPU waiting for the host)"
            if HOST_GAP_PART in by_name
            else ""
        )
        console.print(breakdown_table(by_name, title, limit=25))

"""`predict_training(model, gpu, request)`: one training step of a catalog LLM or vision model by name."""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from dse.hardware.spec import GpuSpec
from dse.perf.types import OperatingPoint
from dse.training.llm import predict_llm_training
from dse.training.step import DEFAULT_ATTENTION_KERNEL, TrainingCoeffs, TrainingEstimate, TrainingRequest
from dse.workload.models import load_model_config

__all__ = ["check_model_options", "predict_training"]


def predict_training(
    model: str,
    gpu: GpuSpec,
    request: TrainingRequest,
    point: OperatingPoint | None = None,
    coeffs: Any = None,
    power_coeffs: Any = None,
    train_coeffs: TrainingCoeffs | None = None,
) -> TrainingEstimate:
    """A training step of `model`: a vision model of `dse.workload.vision` or an LLM of `dse models`
    (options the model does not have are ignored here; `dse predict` and studies refuse them first with
    `check_model_options`)."""
    from dse.workload import vision

    if vision.is_vision_model(model):
        from dse.training.vision import predict_vision_training

        return predict_vision_training(
            vision.load_vision_model(model), gpu, request, point, coeffs, power_coeffs, train_coeffs
        )
    arch = load_model_config(model)
    return predict_llm_training(arch, gpu, request, point, coeffs, power_coeffs, train_coeffs)


def check_model_options(model: str, request: TrainingRequest, given: Collection[str] = ()) -> None:
    """ConfigError when `request` sets an option `model` would ignore: a memory format or an image size
    (vision models only), an attention kernel (LLMs only) or an objective (encoders only). An option is
    set when it differs from its default or its name is in `given` (the ones a user wrote, even at their
    default value)."""
    from dse.errors import ConfigError
    from dse.workload import vision

    def set_(name: str, default: object) -> bool:
        return getattr(request, name) != default or name in given

    is_vision = vision.is_vision_model(model)
    not_vision = f"{model} is not a vision model"
    if set_("memory_format", "nchw") and not is_vision:
        raise ConfigError(f"memory_format (--memory-format): {not_vision} (a layout of convolutions)")
    if set_("memory_format", "nchw") and is_vision and vision.load_vision_model(model).family == "vit":
        raise ConfigError(f"memory_format (--memory-format): {model} has no convolution layers to lay out")
    if set_("image_size", 224) and not is_vision:
        raise ConfigError(f"image_size (--image-size): {not_vision} (its length is seq_len)")
    if set_("attention_kernel", DEFAULT_ATTENTION_KERNEL) and is_vision:
        raise ConfigError(
            f"attention_kernel (--attention-kernel): {model} is a vision model, whose step runs the library "
            "kernels as modelled (the framework ratios are for LLM training)"
        )
    if set_("lora_rank", 0) and is_vision:
        raise ConfigError(
            f"lora_rank (--lora-rank): {model} is a vision model (LoRA adapts an LLM's projections)"
        )
    if set_("packed_sample_len", 0) and is_vision:
        raise ConfigError(
            f"packed_sample_len (--packed-sample-len): {model} is a vision model (samples packed into a "
            "token sequence are an LLM's)"
        )
    if request.precision == "fp8" and is_vision and vision.load_vision_model(model).family != "vit":
        raise ConfigError(
            f"precision fp8 (--precision): {model} trains convolutions, and PyTorch (cuDNN) has no fp8 "
            "convolution training; fp8 training recipes (Transformer Engine, torchao) cover Linear layers: "
            "use bf16 or fp16"
        )
    if set_("eager_ops", False) and is_vision:
        raise ConfigError(
            f"eager_ops (--eager-ops): {model} is a vision model, whose graph is eager PyTorch's already "
            "(its norms and activations are single ATen kernels)"
        )
    if set_("autocast", False) and is_vision:
        raise ConfigError(
            f"autocast (--autocast): {model} is a vision model, whose bf16 / fp16 graph is autocast's "
            "already (an fp32 residual stream and LayerNorms for ViTs, fp32 weights)"
        )
    if request.recompute in ("selective", "op") and is_vision:
        raise ConfigError(
            f"recompute (--recompute {request.recompute}): {model} is a vision model, whose step "
            "recomputes all of its forward or nothing (full or none); selective and per-op recomputation "
            "are the transformer LLMs' (attention, every second GEMM of a layer)"
        )
    if set_("objective", "pretrain") and (is_vision or load_model_config(model).family != "encoder"):
        raise ConfigError(f"objective (--objective): {model} is not an encoder (BERT pre-training heads)")

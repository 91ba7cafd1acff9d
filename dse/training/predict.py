"""`predict_training(model, gpu, request)`: one training step of a catalog LLM or vision model by name."""

from __future__ import annotations

from typing import Any

from dse.hardware.spec import GpuSpec
from dse.perf.types import OperatingPoint
from dse.training.llm import predict_llm_training
from dse.training.step import TrainingCoeffs, TrainingEstimate, TrainingRequest
from dse.workload.models import load_model_config

__all__ = ["predict_training"]


def predict_training(
    model: str,
    gpu: GpuSpec,
    request: TrainingRequest,
    point: OperatingPoint | None = None,
    coeffs: Any = None,
    power_coeffs: Any = None,
    train_coeffs: TrainingCoeffs | None = None,
) -> TrainingEstimate:
    """A training step of `model`: a vision model of `dse.workload.vision` or an LLM of `dse models`."""
    from dse.workload import vision

    if vision.is_vision_model(model):
        from dse.training.vision import predict_vision_training

        return predict_vision_training(
            vision.load_vision_model(model), gpu, request, point, coeffs, power_coeffs, train_coeffs
        )
    arch = load_model_config(model)
    return predict_llm_training(arch, gpu, request, point, coeffs, power_coeffs, train_coeffs)

"""Vision models (CNNs and ViTs) as workload graphs: not shipped yet."""

from __future__ import annotations

from typing import Any

VISION_MODELS: dict[str, Any] = {}


def is_vision_model(name: str) -> bool:
    return name.lower() in VISION_MODELS


def load_vision_model(name: str) -> Any:
    return VISION_MODELS[name.lower()]

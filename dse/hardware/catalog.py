"""The GPU catalog: one YAML per GPU under `data/gpus/`, plus overrides addressed by dotted path.

    load_gpu("h100-sxm")                                       # catalog entry
    load_gpu("h100-sxm", {"num_sms": 144})                     # generic override
    load_gpu("h100-sxm", {"memory.technology": "gddr7",        # memory swap: bandwidth, capacity and
                          "memory.bus_width_bits": 512,        # energy per bit recomputed
                          "memory.data_rate_gbit_per_s": 32})

Override keys may use the same human units as the YAML files (`sm_clock_max_mhz`) or SI (`sm_clock_max_hz`);
a leading `gpu.` is accepted so that search-space paths can be passed straight through.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from dse.errors import ConfigError, format_validation_error
from dse.hardware.memory import with_memory
from dse.hardware.spec import GpuSpec
from dse.units import normalize_unit_keys, si_key

# Memory keys that define the memory system and so go through `with_memory` (which recomputes the rest).
_MEMORY_SYSTEM_KEYS = ("technology", "bus_width_bits", "data_rate_bit_per_s", "capacity_per_device_bytes")


def _canonical(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def _gpu_dir() -> Any:
    return resources.files("dse.hardware").joinpath("data/gpus")


def list_gpus() -> list[str]:
    """Names of the catalog GPUs."""
    return sorted(p.name[: -len(".yaml")] for p in _gpu_dir().iterdir() if p.name.endswith(".yaml"))


@cache
def _raw_catalog_entry(name: str) -> dict[str, Any]:
    text = _gpu_dir().joinpath(f"{name}.yaml").read_text()
    return _normalized(yaml.safe_load(text), f"{name}.yaml")


def _normalized(raw: Any, source: str) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source}: expected a mapping of GPU fields at the top level")
    try:
        return normalize_unit_keys(raw)
    except ValueError as exc:
        raise ConfigError(f"{source}: {exc}") from exc


def _raw_gpu(name_or_path: str | Path) -> tuple[dict[str, Any], str]:
    path = Path(name_or_path)
    if path.suffix in (".yaml", ".yml") or path.exists():
        if not path.is_file():
            raise ConfigError(f"GPU file '{path}' does not exist")
        try:
            raw = yaml.safe_load(path.read_text())
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
        data = _normalized(raw, str(path))
        data.setdefault("name", path.stem)
        return data, str(path)
    name = _canonical(str(name_or_path))
    if name not in list_gpus():
        raise ConfigError(
            f"unknown GPU '{name_or_path}'; known: {', '.join(list_gpus())} (or a path to a YAML file)"
        )
    return {"name": name, **copy.deepcopy(_raw_catalog_entry(name))}, f"{name}.yaml"


def _set_path(data: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    node: Any = data
    for i, part in enumerate(parts[:-1]):
        if not isinstance(node, dict) or part not in node or not isinstance(node[part], dict):
            where = ".".join(parts[:i]) or "the GPU"
            keys = sorted(k for k, v in node.items() if isinstance(v, dict)) if isinstance(node, dict) else []
            raise ConfigError(
                f"override '{path}': '{part}' is not a section of {where}; sections: {', '.join(keys)}"
            )
        node = node[part]
    key, factor = si_key(parts[-1])
    if key not in node:
        where = ".".join(parts[:-1]) or "the GPU"
        raise ConfigError(
            f"override '{path}': unknown field '{parts[-1]}' in {where}; fields: {', '.join(sorted(node))}"
        )
    if factor != 1.0:
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ConfigError(f"override '{path}': expected a number, got {value!r}")
        value = value * factor
    node[key] = value


def _split_overrides(overrides: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Separate the keys that rebuild the memory system from the generic ones."""
    memory: dict[str, Any] = {}
    generic: dict[str, Any] = {}
    for path, value in overrides.items():
        path = path.removeprefix("gpu.")
        if path.startswith("memory."):
            key, factor = si_key(path.removeprefix("memory."))
            if key in _MEMORY_SYSTEM_KEYS:
                if factor != 1.0:
                    if not isinstance(value, int | float) or isinstance(value, bool):
                        raise ConfigError(f"override '{path}': expected a number, got {value!r}")
                    value = value * factor
                memory[key] = value
                continue
        generic[path] = value
    return memory, generic


def load_gpu(name_or_path: str | Path, overrides: Mapping[str, Any] | None = None) -> GpuSpec:
    """A validated GpuSpec from the catalog (or a YAML path), with optional dotted-path overrides."""
    raw, source = _raw_gpu(name_or_path)
    memory_overrides, generic = _split_overrides(overrides or {})
    try:
        gpu = GpuSpec.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, source)) from exc
    if memory_overrides:
        technology = memory_overrides.pop("technology", gpu.memory.technology)
        gpu = with_memory(gpu, str(technology), **memory_overrides)
    if not generic:
        return gpu
    data = gpu.model_dump()
    for path, value in generic.items():
        _set_path(data, path, value)
    try:
        return GpuSpec.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, f"{source} with overrides")) from exc


def parse_set_options(items: list[str] | None) -> dict[str, Any]:
    """Turn CLI `--set PATH=VALUE` strings into an overrides mapping; values parsed as YAML scalars."""
    out: dict[str, Any] = {}
    for item in items or []:
        path, sep, text = item.partition("=")
        if not sep or not path.strip():
            raise ConfigError(f"--set '{item}': expected PATH=VALUE, e.g. gpu.num_sms=144")
        try:
            out[path.strip()] = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"--set '{item}': value is not a scalar: {exc}") from exc
    return out


# NVML product names -> catalog names (dse/hardware/data/gpus). First match wins; order matters (A100 vs A10).
_CATALOG_PATTERNS: tuple[tuple[str, str], ...] = (
    (r"H100.*(PCIe|NVL)", "h100-pcie"),
    (r"H100", "h100-sxm"),
    (r"H200", "h200-sxm"),
    (r"A100.*PCIE.*40", "a100-pcie-40gb"),
    (r"A100.*SXM.*80|A100.*80GB", "a100-sxm-80gb"),
    (r"\bA10\b", "a10"),
    (r"L40S", "l40s"),
    (r"\bL4\b", "l4"),
    (r"RTX 4090", "rtx-4090"),
    (r"B200", "b200"),
)


def catalog_gpu_name(nvml_name: str) -> str | None:
    """The catalog GPU an NVML product name names ("NVIDIA H100 80GB HBM3" -> "h100-sxm"), or None."""
    for pattern, name in _CATALOG_PATTERNS:
        if re.search(pattern, nvml_name, flags=re.IGNORECASE):
            return name
    return None

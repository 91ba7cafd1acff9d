"""The GPU catalog: one YAML per GPU under `data/gpus/`, plus overrides addressed by dotted path.

    load_gpu("h100-sxm")                                       # catalog entry
    load_gpu("h100-sxm", {"num_sms": 144})                     # generic override
    load_gpu("h100-sxm", {"memory.technology": "gddr7",        # memory swap: bandwidth, capacity and
                          "memory.bus_width_bits": 512,        # energy per bit recomputed
                          "memory.data_rate_gbit_per_s": 32})

Overrides follow the one vocabulary of `dse.hardware.overrides` (dotted paths, human units or SI, derived
knobs such as `sm.tensor_factor`), shared by `--set`, `--memory` and study spaces.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from functools import cache, lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from dse.config.yamlio import (
    MAX_YAML_BYTES,
    SourceMap,
    decode_yaml_bytes,
    format_errors,
    load_yaml,
    located_error,
    parse_yaml,
    parse_yaml_value,
)
from dse.errors import ConfigError, did_you_mean, format_validation_error
from dse.hardware.memory import memory_problem
from dse.hardware.overrides import apply_generic, apply_memory_and_knobs, split_overrides
from dse.hardware.spec import GpuSpec
from dse.units import UnitKeyError, normalize_unit_keys, si_key, written_key


def _canonical(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def _gpu_dir() -> Any:
    return resources.files("dse.hardware").joinpath("data/gpus")


def list_gpus() -> list[str]:
    """Names of the catalog GPUs."""
    return list(_catalog_names())


@cache
def _catalog_names() -> tuple[str, ...]:
    # Read once, as the entries themselves are (`_raw_catalog_entry`): `load_gpu` asks at every search point.
    return tuple(sorted(p.name[: -len(".yaml")] for p in _gpu_dir().iterdir() if p.name.endswith(".yaml")))


@cache
def _raw_catalog_entry(name: str) -> dict[str, Any]:
    text = _gpu_dir().joinpath(f"{name}.yaml").read_text(encoding="utf-8")
    return _normalized(parse_yaml_value(text, f"{name}.yaml"), f"{name}.yaml")


def _normalized(raw: Any, source: str, smap: SourceMap | None = None) -> dict[str, Any]:
    if not isinstance(raw, Mapping):
        raise ConfigError(f"{source}: expected a mapping of GPU fields at the top level")
    try:
        return normalize_unit_keys(raw)
    except UnitKeyError as exc:
        if smap is not None:  # a user's file: `file:line: field: message`, as its validation errors read
            raise located_error(smap, exc.path, exc.problem) from None
        raise ConfigError(f"{source}: {exc}") from exc


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # e.g. a name too long for the file system: not a file we can read
        return False


def _names_a_file(name_or_path: str | Path) -> bool:
    """A GPU argument names a file when it has a YAML suffix, or is an existing file that no catalog name
    claims: a bare catalog name ("h100-sxm") is the catalog's even beside a file of that name in the
    working directory (which would otherwise replace the GPU, and every price read from it); write
    ./h100-sxm for the file."""
    text = str(name_or_path)
    path = Path(text)
    if path.suffix in (".yaml", ".yml"):
        return True
    if "/" not in text and "\\" not in text and _canonical(text) in _catalog_names():
        return False
    return _is_file(path)


def _raw_gpu(
    name_or_path: str | Path, data: bytes | None = None
) -> tuple[dict[str, Any], str, SourceMap | None]:
    """(raw GPU fields in SI, source for messages, the YAML line map of a user's file); `data`: the
    file's bytes, already read."""
    path = Path(name_or_path)
    if _names_a_file(name_or_path):
        if not _is_file(path):
            raise ConfigError(f"GPU file '{_shorten(str(path))}' does not exist (or is not a file)")
        # the one safe loader: size, depth, aliases, duplicate keys, UTF-8
        raw, smap = (
            load_yaml(path) if data is None else parse_yaml(decode_yaml_bytes(data, str(path)), str(path))
        )
        fields = _normalized(raw, str(path), smap)
        fields.setdefault("name", path.stem)
        return fields, str(path), smap
    name = _canonical(str(name_or_path))
    if name not in list_gpus():
        raise ConfigError(
            f"unknown GPU '{_shorten(str(name_or_path))}'"
            f"{did_you_mean(str(name_or_path), list_gpus(), _canonical)}; known: {', '.join(list_gpus())} "
            "(or a path to a YAML file)"
        )
    return {"name": name, **copy.deepcopy(_raw_catalog_entry(name))}, f"{name}.yaml", None


def _shorten(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 20] + "..." + text[-17:]


def _validated(raw: dict[str, Any], source: str, smap: SourceMap | None = None) -> GpuSpec:
    try:
        gpu = GpuSpec.model_validate(raw)
    except ValidationError as exc:
        if smap is not None:  # a user's file: `file:line: field: message` (a unit key: its line and unit)
            message = format_errors(exc, GpuSpec, smap, unit_keys=True, spellings=_catalog_spellings())
            raise ConfigError(message) from None
        raise ConfigError(format_validation_error(exc, source)) from exc
    # A die that contradicts the GPU it carries (100 SMs under 132 enabled, a 64-bit memory interface under a
    # 5120-bit bus, 9 NVLinks under 450 GB/s) was priced without a word.
    if (problem := gpu.die_problem()) is not None:
        field, message = problem
        if smap is not None:
            twin = written_key(field, smap.keys_at(("die",)))  # `l2_physical_mib`, as the file wrote it
            raise located_error(smap, ("die", twin[0] if twin else field), message)
        raise ConfigError(f"{_shorten(source)}: die.{field}: {message}")
    return gpu


@cache
def _catalog_spellings() -> dict[tuple[str | int, ...], str]:
    """SI field path -> the human-unit key the catalog files write for it (`("clocks", "sm_clock_max_hz")` ->
    `sm_clock_max_mhz`): a field a user's file lacks is named in the spelling GPU files use."""
    out: dict[tuple[str | int, ...], str] = {}

    def walk(node: Any, path: tuple[str, ...]) -> None:
        for key, value in node.items() if isinstance(node, Mapping) else ():
            name, factor = si_key(str(key))
            if factor != 1.0:
                out.setdefault((*path, name), str(key))
            walk(value, (*path, name))

    for name in list_gpus():
        walk(parse_yaml_value(_gpu_dir().joinpath(f"{name}.yaml").read_text(encoding="utf-8"), name), ())
    return out


@lru_cache(maxsize=1024)
def _catalog_gpu(name: str, generic: tuple[tuple[str, Any], ...]) -> GpuSpec:
    # Cached per (catalog entry, generic overrides): a search varies the memory and the knobs far more
    # often than the die, and each GpuSpec validation costs about as much as a kernel estimate.
    raw, source, _ = _raw_gpu(name)
    return apply_generic(_validated(raw, source), generic, source)


def load_gpu(name_or_path: str | Path, overrides: Mapping[str, Any] | None = None) -> GpuSpec:
    """A validated GpuSpec from the catalog (or a YAML path), with dotted-path overrides applied by
    `dse.hardware.overrides` (the one override path: `--set`, `--memory` and study spaces alike)."""
    split = split_overrides(overrides)
    name = _canonical(str(name_or_path))
    if not _names_a_file(name_or_path) and name in _catalog_names():
        try:
            gpu = _catalog_gpu(name, split.generic)
        except TypeError:  # an unhashable override value (a list): not cached
            gpu = apply_generic(_catalog_gpu(name, ()), split.generic, f"{name}.yaml")
    else:
        gpu = apply_generic(_user_file_gpu(name_or_path), split.generic, str(name_or_path))
    return apply_memory_and_knobs(gpu, split)


def _user_file_gpu(name_or_path: str | Path) -> GpuSpec:
    """A user's GPU file, validated; cached by its content (a study loads it for every point, and parsing
    and validating the YAML costs more than the point's prediction). The bytes hashed are the bytes parsed,
    so an edit during a run cannot file one content's spec under another's hash."""
    path = Path(name_or_path)
    if not _is_file(path):  # missing or not a regular file (never read /dev/zero): `_raw_gpu` says which
        return _file_gpu_from(str(name_or_path), None)
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_YAML_BYTES + 1)  # one past the limit: the loader names an oversized file
    except OSError as exc:
        raise ConfigError(f"GPU file '{_shorten(str(path))}': cannot read: {exc.strerror or exc}") from None
    return _cached_file_gpu(str(name_or_path), data)


@lru_cache(maxsize=64)
def _cached_file_gpu(path: str, data: bytes) -> GpuSpec:
    return _file_gpu_from(path, data)


def _file_gpu_from(path: str, data: bytes | None) -> GpuSpec:
    raw, source, smap = _raw_gpu(path, data)
    gpu = _validated(raw, source, smap)
    # the memory technology's rules, which `--memory` and `--set memory.*` apply too (5238 Gb/s for HBM3's
    # 5.238, a 640-bit HBM bus, 7 stacks on 5)
    if (problem := memory_problem(gpu.memory)) is not None:
        field, message = problem
        if smap is not None:
            raise located_error(smap, ("memory", field), message)
        raise ConfigError(f"{_shorten(source)}: memory.{field}: {message}")
    return _with_catalog_base(gpu, source, smap)


# What a user's copy of a catalog file may change and still be that GPU: its names and notes.
_IDENTITY_FIELDS: dict[str, Any] = {"name": "", "display_name": "", "notes": "", "based_on": None}


@cache
def _catalog_entries() -> dict[str, GpuSpec]:
    """Each catalog GPU by name, its identity fields blanked (what a copy of its file is compared with)."""
    return {name: _catalog_gpu(name, ()).model_copy(update=_IDENTITY_FIELDS) for name in list_gpus()}


def _with_catalog_base(gpu: GpuSpec, source: str, smap: SourceMap | None = None) -> GpuSpec:
    """A user's GPU file with its `based_on` checked (a catalog name), or set to the catalog entry the file
    copies unchanged: a study over the copy and its what-ifs is then priced and sized from that GPU's
    published price and area, as the catalog GPU's own what-ifs are (`dse.cost.area.catalog_base`)."""
    if gpu.based_on is not None:
        base = _canonical(gpu.based_on)
        if base not in list_gpus():
            message = (
                f"{_shorten(gpu.based_on, 60)!r} is not a catalog GPU"
                f"{did_you_mean(gpu.based_on, list_gpus(), _canonical)}; known: {', '.join(list_gpus())}"
            )
            if smap is not None:
                raise located_error(smap, ("based_on",), message)
            raise ConfigError(f"{_shorten(source)}: based_on: {message}")
        return gpu.model_copy(update={"based_on": base})
    bare = gpu.model_copy(update=_IDENTITY_FIELDS)
    copied = next((name for name, entry in _catalog_entries().items() if entry == bare), None)
    return gpu if copied is None else gpu.model_copy(update={"based_on": copied})


# NVML product names -> catalog names (dse/hardware/data/gpus). First match wins; order matters (A100 vs A10).
_CATALOG_PATTERNS: tuple[tuple[str, str], ...] = (
    # Variants the catalog lacks map to none, not a neighbour: H100 / H200 NVL, GH200, GB200, 3090 Ti, 4090 D
    (r"H100.*PCIe", "h100-pcie"),
    (r"(?<!G)H100(?!.*NVL)", "h100-sxm"),
    (r"(?<!G)H200(?!.*NVL)", "h200-sxm"),
    (r"A100.*PCIE.*40", "a100-pcie-40gb"),
    (r"A100.*(80GB.*PCIE|PCIE.*80)", "a100-pcie-80gb"),
    (r"A100.*SXM.*40", "a100-sxm-40gb"),
    (r"A100.*SXM.*80|A100.*80GB", "a100-sxm-80gb"),
    (r"\bA10\b", "a10"),
    (r"\bA40\b", "a40"),
    (r"V100.*SXM2.*16GB", "v100-sxm2"),  # the catalog's V100 is the 16 GB part; a 32 GB one has no entry
    (r"RTX 3090(?!\s*Ti)", "rtx-3090"),
    (r"L40S", "l40s"),
    (r"\bL4\b", "l4"),
    (r"RTX 4090(?!\s*D)", "rtx-4090"),
    (r"(?<!G)B200", "b200"),
)


def recorded_gpu_name(recorded: str) -> str:
    """The GPU a measurement's `gpu` value names: its catalog name, else the value with `_` as `-`
    (`h100_sxm`), the name `calibrate` looks up."""
    return catalog_gpu_name(recorded) or recorded.replace("_", "-")


def gpu_matches(recorded: str, gpu: GpuSpec) -> bool:
    """Whether a sample's `gpu` value names `gpu` (catalog name, `h100_sxm` spelling or NVML name)."""
    value = recorded.strip().lower()
    return value.replace("_", "-") == gpu.name.lower() or catalog_gpu_name(recorded) == gpu.name


def catalog_gpu_name(nvml_name: str) -> str | None:
    """The catalog GPU an NVML product name names ("NVIDIA H100 80GB HBM3" -> "h100-sxm"), or None."""
    for pattern, name in _CATALOG_PATTERNS:
        if re.search(pattern, nvml_name, flags=re.IGNORECASE):
            return name
    return None

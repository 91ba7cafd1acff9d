"""GPU overrides: the one place where `--set`, `--memory` and study-space paths turn into a GpuSpec.

One vocabulary of dotted paths serves `dse predict`, `dse whatif`, `dse gpu show` and study spaces:

    <field> or <section>.<field>   any field of the GPU YAML: `num_sms`, `clocks.sm_clock_max_mhz`,
                                   `l2.l2_mib`, `power.tdp_w`, `sm.tensor_flop_per_clk.bf16`, ...
                                   in the YAML's human units (`_mhz`, `_mib`) or SI (`_hz`, `_bytes`)
    memory.technology, memory.bus_width_bits, memory.data_rate_gbit_per_s,
    memory.capacity_per_device_gib  rebuild the memory system (`dse.hardware.memory.with_memory`):
                                   bandwidth, capacity and DRAM energy per bit are recomputed
    memory.<other field>           e.g. `memory.energy_pj_per_bit`, applied after the rebuild
    memory.energy_factor           derived knob: multiplies the DRAM energy per bit the memory ends with
    sm.tensor_factor               derived knob: multiplies every dtype's Tensor-Core FLOP/clk/SM
    memory.data_rate_frac          derived knob: the per-pin data rate as a fraction 0..1 of the chosen
                                   technology's min..max rate (one parameter spans technologies)

A leading `gpu.` is optional, so search-space paths pass straight through. Values of the derived knobs
and of fields with a unit suffix must be numbers; every problem is a `ConfigError` naming the path and
what is allowed.

Order of application (so that results do not depend on the order of the mapping): the generic fields,
then the memory system, then other memory fields, then the derived knobs. Last, a `die.*` count an override
sets must hold what the GPU then enables (`GpuSpec.die_problem`); an enabled count raised alone grows the die.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, get_args

from pydantic import BaseModel, TypeAdapter, ValidationError

from dse.config.yamlio import error_in_unit, parse_yaml_value
from dse.errors import ConfigError, format_validation_error
from dse.hardware.memory import load_memory_tech, memory_problem, with_memory
from dse.hardware.spec import GpuSpec, MemorySpec, SmSpec
from dse.units import UNIT_SUFFIXES, si_key, to_si

# Memory keys that define the memory system and so go through `with_memory` (which recomputes the rest).
MEMORY_SYSTEM_KEYS: tuple[str, ...] = (
    "technology",
    "bus_width_bits",
    "data_rate_bit_per_s",
    "capacity_per_device_bytes",
)
# Derived knobs: path -> what it means (shown by errors and `dse gpu show`).
DERIVED_KNOBS: dict[str, str] = {
    "memory.energy_factor": "multiplies the DRAM energy per bit (> 0)",
    "sm.tensor_factor": "multiplies every dtype's Tensor-Core FLOP/clk/SM (> 0)",
    "memory.data_rate_frac": "per-pin data rate as a fraction of the technology's min..max (0..1)",
}


@dataclass(frozen=True, slots=True)
class SplitOverrides:
    """Overrides sorted by how they are applied (`split_overrides`); values already in SI."""

    generic: tuple[tuple[str, Any], ...]
    memory_system: tuple[tuple[str, Any], ...]
    memory_fields: tuple[tuple[str, Any], ...]
    knobs: tuple[tuple[str, Any], ...]
    spelled: tuple[tuple[str, str], ...] = ()  # SI path -> the human-unit path written (`_as_written`)


def _si_path(path: str) -> str:
    """`clocks.sm_clock_max_mhz` -> `clocks.sm_clock_max_hz`: the leaf key in SI."""
    head, dot, leaf = path.rpartition(".")
    return head + dot + si_key(leaf)[0]


def _as_written(spelled: Mapping[str, str], prefix: str = "") -> Callable[[Any], Any]:
    """A `format_validation_error` rewrite: an error on a field set through a human-unit path named by that
    path, its bound and value in that unit (`clocks.sm_clock_max_mhz: ... <= 100000 MHz (got 9e+09 MHz)`),
    as a GPU file's are; the SI twin (`sm_clock_max_hz ... <= 100000000000`) is a key the user never wrote.
    `prefix`: the section the validated model sits in (`memory.`)."""

    def rewrite(err: Any) -> Any:
        path = spelled.get(prefix + ".".join(str(p) for p in err.get("loc", ())))
        if path is None:
            return err
        key = path.rpartition(".")[2]
        return {**error_in_unit(err, key, si_key(key)[1]), "loc": (path,)}

    return rewrite


def _number(path: str, value: Any) -> float:
    try:  # an integer past the float range (400 digits) raised OverflowError here, a traceback
        finite = not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
    except OverflowError:
        finite = False
    if not finite:
        shown = f"{str(value)[:8]}... ({len(str(value))} digits)" if isinstance(value, int) else repr(value)
        raise ConfigError(f"override '{path}': expected a finite number, got {shown}")
    return value


def _si_number(path: str, value: Any) -> float:
    """The number written at `path`, in SI (its leaf key may say a human unit: `..._gbit_per_s`)."""
    try:
        return to_si(_number(path, value), path.rpartition(".")[2])
    except ValueError as exc:  # 1e308 Gb/s overflowed and read "data rate inf Gb/s" in the builder's error
        raise ConfigError(f"override '{path}': {exc}") from None


# Fields that say which GPU a spec is, not what it has: the cost ledger prices a spec by them (a catalog
# GPU's published price and area), so `--set name=a100-sxm-80gb` would price an H100 as an A100.
IDENTITY_PATHS: dict[str, str] = {
    "name": "the GPU's name (pass another --gpu, or a GPU file)",
    "based_on": "the catalog GPU a GPU file varies (write it in the file)",
}


def split_overrides(overrides: Mapping[str, Any] | None) -> SplitOverrides:
    """Sort `overrides` (path -> value) into generic fields, memory system, memory fields and knobs."""
    generic: list[tuple[str, Any]] = []
    system: list[tuple[str, Any]] = []
    fields: list[tuple[str, Any]] = []
    knobs: list[tuple[str, Any]] = []
    spelled: list[tuple[str, str]] = []
    for raw_path, value in (overrides or {}).items():
        path = str(raw_path).strip().removeprefix("gpu.")
        if path in IDENTITY_PATHS:
            raise ConfigError(
                f"override '{path}': {IDENTITY_PATHS[path]}, not a hardware field; it cannot be overridden"
            )
        if path in DERIVED_KNOBS:
            knobs.append((path, _number(path, value)))
        elif path.startswith("memory.") and path.count(".") == 1:
            key, factor = si_key(path.removeprefix("memory."))
            if factor != 1.0 or (key in MEMORY_SYSTEM_KEYS and key != "technology"):
                value = _si_number(path, value)  # the memory builder takes numbers as given
            if key == "bus_width_bits" and value != int(value):
                raise ConfigError(f"override '{path}': expected a whole number of bits, got {value!r}")
            (system if key in MEMORY_SYSTEM_KEYS else fields).append((key, value))
            spelled += [(f"memory.{key}", path)] if factor != 1.0 else []
        else:
            generic.append((path, value))
    return SplitOverrides(tuple(generic), tuple(system), tuple(fields), tuple(knobs), tuple(spelled))


def _set_path(data: dict[str, Any], path: str, value: Any) -> None:
    """Set `path` in a dumped GpuSpec, converting a human-unit leaf key; ConfigError for unknown paths."""
    parts = path.split(".")
    node: Any = data
    for i, part in enumerate(parts[:-1]):
        if not isinstance(node, dict) or part not in node or not isinstance(node[part], dict):
            where = ".".join(parts[:i]) or "the GPU"
            keys = sorted(k for k, v in node.items() if isinstance(v, dict)) if isinstance(node, dict) else []
            listed = f"sections: {', '.join(keys)}" if keys else f"{where} has fields only, no sections"
            raise ConfigError(f"override '{path}': '{part}' is not a section of {where}; {listed}")
        node = node[part]
    key, factor = si_key(parts[-1])
    if key not in node:
        where = ".".join(parts[:-1]) or "the GPU"
        raise ConfigError(
            f"override '{path}': unknown field '{parts[-1]}' in {where}; fields: {', '.join(sorted(node))}"
        )
    if isinstance(node[key], dict):
        raise ConfigError(
            f"override '{path}' is a section, not a field; fields: {', '.join(sorted(node[key]))}"
        )
    node[key] = _si_number(path, value) if factor != 1.0 else value


def apply_generic(gpu: GpuSpec, generic: tuple[tuple[str, Any], ...], source: str) -> GpuSpec:
    """`gpu` with generic field overrides, validated once."""
    if not generic:
        return gpu
    data = gpu.model_dump()
    for path, value in generic:
        _set_path(data, path, value)
    si_paths = {_si_path(path): path for path, _ in generic}
    _follow_clock_range(data, set(si_paths))
    spelled = {si: path for si, path in si_paths.items() if si != path}
    try:
        return GpuSpec.model_validate(data)
    except ValidationError as exc:
        message = format_validation_error(exc, f"{source} with overrides", _as_written(spelled))
        raise ConfigError(message) from exc


def _follow_clock_range(data: dict[str, Any], overridden: set[str]) -> None:
    """A what-if of the SM clock range (`clocks.sm_clock_max_mhz=1500`) moves the clocks defined inside it
    that the overrides leave alone, the tensor datasheet clock and the default boost, into the new range:
    a GPU whose clock tops out at 1500 MHz quotes its peaks and boosts at 1500 MHz at most."""
    clocks = data.get("clocks")
    if not isinstance(clocks, dict):
        return
    lo, hi = clocks.get("sm_clock_min_hz"), clocks.get("sm_clock_max_hz")
    if not (isinstance(lo, int | float) and isinstance(hi, int | float) and lo <= hi):
        return  # the spec's own check names a range that is no range
    for key in ("sm_clock_tensor_spec_hz", "sm_clock_default_hz"):
        value = clocks.get(key)
        if f"clocks.{key}" not in overridden and isinstance(value, int | float):
            clocks[key] = min(max(value, lo), hi)


def _memory_system(gpu: GpuSpec, system: dict[str, Any], knobs: dict[str, Any]) -> dict[str, Any]:
    """The memory-system keys with `memory.data_rate_frac` turned into the rate it means."""
    frac = knobs.get("memory.data_rate_frac")
    if frac is None:
        return system
    if not 0.0 <= frac <= 1.0:
        raise ConfigError(f"gpu.memory.data_rate_frac must be in [0, 1], got {frac!r}")
    if "data_rate_bit_per_s" in system:
        raise ConfigError("give gpu.memory.data_rate_frac or a data rate, not both")
    tech = load_memory_tech(str(system.get("technology", gpu.memory.technology)))
    lo, hi = tech.data_rate_min_bit_per_s, tech.data_rate_max_bit_per_s
    return {**system, "data_rate_bit_per_s": lo + float(frac) * (hi - lo)}


def _with_memory_fields(gpu: GpuSpec, fields: dict[str, Any], spelled: Mapping[str, str]) -> GpuSpec:
    unknown = sorted(set(fields) - set(MemorySpec.model_fields))
    if unknown:
        path = spelled.get(f"memory.{unknown[0]}", f"memory.{unknown[0]}")
        raise ConfigError(
            f"override '{path}': unknown field; fields: "
            f"{', '.join(sorted([*MemorySpec.model_fields, *MEMORY_SYSTEM_KEYS[3:]]))}"
        )
    try:
        memory = MemorySpec.model_validate({**gpu.memory.model_dump(), **fields})
    except ValidationError as exc:
        source = f"{gpu.name} memory with overrides"
        raise ConfigError(format_validation_error(exc, source, _as_written(spelled, "memory."))) from exc
    # The technology's rules a GPU file's memory is held to (bus, rate, capacity per device, device count).
    problem = memory_problem(memory)
    if problem is not None:
        written = ", ".join(sorted(spelled.get(f"memory.{k}", f"memory.{k}") for k in fields))
        raise ConfigError(f"override '{written}': {problem[1]}")
    return gpu.model_copy(update={"memory": memory})  # GpuSpec's own checks do not involve the memory


def _with_factors(gpu: GpuSpec, knobs: dict[str, Any]) -> GpuSpec:
    """`gpu` with the scale knobs applied (both scale values that were validated already)."""
    energy_factor, tensor_factor = knobs.get("memory.energy_factor"), knobs.get("sm.tensor_factor")
    if energy_factor is not None:
        if not energy_factor > 0:
            raise ConfigError(f"gpu.memory.energy_factor must be positive, got {energy_factor}")
        fields = {"energy_j_per_bit": gpu.memory.energy_j_per_bit * energy_factor}
        memory = _validated(MemorySpec, gpu.memory, fields, f"gpu.memory.energy_factor {energy_factor:g}")
        gpu = gpu.model_copy(update={"memory": memory})
    if tensor_factor is not None:
        if not tensor_factor > 0:
            raise ConfigError(f"gpu.sm.tensor_factor must be positive, got {tensor_factor}")
        rates = {k: v * tensor_factor for k, v in gpu.sm.tensor_flop_per_clk.items()}
        sm = _validated(
            SmSpec, gpu.sm, {"tensor_flop_per_clk": rates}, f"gpu.sm.tensor_factor {tensor_factor:g}"
        )
        gpu = gpu.model_copy(update={"sm": sm})
    return gpu


def _validated(kind: Any, part: Any, fields: dict[str, Any], knob: str) -> Any:
    """`part` with `fields` replaced, checked as `kind` is (a scale knob must not leave its field's range)."""
    try:
        return kind.model_validate({**part.model_dump(), **fields})
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc, knob)) from exc


def apply_memory_and_knobs(gpu: GpuSpec, split: SplitOverrides) -> GpuSpec:
    """The steps after the generic fields: memory system, memory fields, derived knobs; then the die fields
    they set are checked against what the GPU ends up enabling."""
    knobs = dict(split.knobs)
    system = _memory_system(gpu, dict(split.memory_system), knobs)
    if system:
        technology = str(system.pop("technology", gpu.memory.technology))
        phy_bits = gpu.die.memory_phy_bits if gpu.die is not None else None
        gpu = with_memory(gpu, technology, **system)  # a rebuilt memory drops the die's spare PHY sites,
        if gpu.die is not None and any(_si_path(p) == "die.memory_phy_bits" for p, _ in split.generic):
            # but not those the same override set (they were dropped without a word): checked below
            gpu = gpu.model_copy(update={"die": gpu.die.model_copy(update={"memory_phy_bits": phy_bits})})
    if split.memory_fields:
        gpu = _with_memory_fields(gpu, dict(split.memory_fields), dict(split.spelled))
    return _checked_die(_with_factors(gpu, knobs), split.generic)


def _checked_die(gpu: GpuSpec, generic: tuple[tuple[str, Any], ...]) -> GpuSpec:
    """`gpu`, whose die fields set by `generic` hold what it enables (`GpuSpec.die_problem`); a what-if that
    only enables more (`num_sms=200`, `interconnect.link_bw_gb_per_s=1800`) grows the die instead."""
    written = {_si_path(path).removeprefix("die."): path for path, _ in generic if path.startswith("die.")}
    problem = gpu.die_problem(written) if written else None
    if problem is not None:
        field, message = problem
        raise ConfigError(
            f"override '{written[field]}': {message}; set the two to agree, or leave the die field alone (a "
            "what-if enabling more than the die has grows the die)"
        )
    return gpu


def apply_overrides(gpu: GpuSpec, overrides: Mapping[str, Any] | None, source: str = "") -> GpuSpec:
    """`gpu` with `overrides` (path -> value, the vocabulary of the module docstring) applied."""
    split = split_overrides(overrides)
    return apply_memory_and_knobs(apply_generic(gpu, split.generic, source or gpu.name), split)


def check_override_path(gpu: GpuSpec, path: str) -> str | None:
    """None when `path` (with or without `gpu.`) is an override path of `gpu`, else what is allowed."""
    path = path.removeprefix("gpu.")
    if path in DERIVED_KNOBS:
        return None
    parts = path.split(".")
    if parts[0] == "memory" and len(parts) == 2 and si_key(parts[1])[0] in MEMORY_SYSTEM_KEYS:
        return None
    node: Any = gpu.model_dump()
    for i, part in enumerate(parts):
        key = si_key(part)[0] if i == len(parts) - 1 else part
        if not isinstance(node, dict) or key not in node:
            prefix = ".".join(parts[:i])
            where = f"gpu.{prefix}" if i else "gpu"
            keys = sorted(node) if isinstance(node, dict) else []
            knobs = [k.removeprefix(prefix + ".") for k in DERIVED_KNOBS if i and k.startswith(prefix + ".")]
            return f"'{part}' is not a field of {where} (allowed: {', '.join(keys + knobs)})"
        node = node[key]
    if isinstance(node, dict):
        return f"gpu.{path} is a section, not a field (allowed: {', '.join(sorted(node))})"
    return None


def field_value_problem(path: str, value: Any, gpu: GpuSpec | None = None) -> str | None:
    """What is wrong with `value` by the own bounds of the GPU field at `path` (`clocks.sm_clock_max_mhz`),
    said in the path's unit, or None: a study refuses at load a value no point can take (9e9 MHz failed at
    every point). A scale knob (`sm.tensor_factor`) is applied to `gpu`, the study's base GPU, whose scaled
    field must stay in its range. Checks across fields (min <= max) and the memory-system keys depend on
    the point and are left to it, as is a value that is no number (its point names it)."""
    knob = path.strip().removeprefix("gpu.")
    if knob == "memory.data_rate_frac":
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if not (number and 0 <= value <= 1):
            return f"a fraction of the technology's data-rate range must lie in [0, 1] (got {value!r})"
        return None
    if knob in ("sm.tensor_factor", "memory.energy_factor") and gpu is not None:
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        try:
            _with_factors(gpu, {knob: float(value)})
        except ConfigError as exc:
            return str(exc)
        return None
    parts = knob.split(".")
    model: Any = GpuSpec
    for part in parts[:-1]:
        info = model.model_fields.get(part)
        sections = (info.annotation, *get_args(info.annotation)) if info is not None else ()
        model = next((t for t in sections if isinstance(t, type) and issubclass(t, BaseModel)), None)
        if model is None:  # `sm.tensor_flop_per_clk.bf16`, a knob: not a field with bounds of its own
            return None
    key, factor = si_key(parts[-1])
    info = model.model_fields.get(key)
    if info is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    bounded: Any = Annotated[info.annotation, info]  # the field's type with its Field(gt=, le=, ...)
    try:
        si = to_si(value, parts[-1])
    except ValueError as exc:
        return str(exc)
    try:
        TypeAdapter(bounded).validate_python(si)
    except ValidationError as exc:
        err = exc.errors()[0]
        if factor != 1.0:
            return str(error_in_unit(err, parts[-1], factor)["msg"])
        return f"{err['msg']} (got {value!r})"
    return None


@dataclass(frozen=True, slots=True)
class OverrideField:
    """One path of the override vocabulary, as `dse gpu fields` lists it."""

    path: str  # SI path, e.g. clocks.sm_clock_max_hz
    human_path: str | None  # the same field in the YAML's human unit, e.g. clocks.sm_clock_max_mhz
    value: Any  # the GPU's value (SI), or None for a derived knob
    note: str  # what it does or what it takes


def _human(path: str, value: Any = None) -> str | None:
    """The human-unit spelling of an SI path, if the vocabulary has one: the largest unit in which `value` is
    at least 1 (`capacity_gib`, `l2_mib`, `smem_kib`, `latency_us`, as the GPU files write them), clocks in
    MHz; the largest unit when there is no value (`capacity_per_device_gib`)."""
    spellings = [
        (path[: -len(si_suffix)] + suffix, factor)
        for suffix, si_suffix, factor in UNIT_SUFFIXES
        if path.endswith(si_suffix)
        and si_key(path[: -len(si_suffix)] + suffix)[0] == path
        and suffix != "_ghz"
    ]
    if not spellings:
        return None
    if isinstance(value, int | float) and value > 0:
        fitting = [(factor, human) for human, factor in spellings if value / factor >= 1.0]
        if fitting:
            return max(fitting)[1]
    return max(spellings, key=lambda spelling: spelling[1])[0]


def override_fields(gpu: GpuSpec) -> list[OverrideField]:
    """Every path `--set` and study spaces accept for `gpu`: its fields, the memory-system keys and the
    derived knobs. Tables against SM clock (V-f, idle power) are left out: they change in a GPU YAML."""
    out: list[OverrideField] = []

    def walk(node: Any, prefix: str) -> None:
        for key, value in node.items():
            path = f"{prefix}{key}"
            if path in IDENTITY_PATHS:
                continue
            if isinstance(value, dict) and key != "tensor_flop_per_clk" and "clock_hz" not in value:
                walk(value, path + ".")
                continue
            if isinstance(value, dict) and key == "tensor_flop_per_clk":
                for dtype, rate in value.items():
                    out.append(
                        OverrideField(f"{path}.{dtype}", None, rate, "Tensor-Core FLOP per clock per SM")
                    )
                continue
            if isinstance(value, dict):
                continue  # a table against SM clock (V-f, idle power): edit it in a GPU YAML file
            out.append(OverrideField(path, _human(path, value), value, ""))

    walk(gpu.model_dump(), "")
    rebuild = "rebuilds the memory system (bandwidth, capacity, DRAM energy per bit recomputed)"
    for key in MEMORY_SYSTEM_KEYS:
        path = f"memory.{key}"
        if not any(f.path == path for f in out):
            out.append(OverrideField(path, _human(path), None, rebuild))
        else:
            out = [
                OverrideField(f.path, f.human_path, f.value, rebuild) if f.path == path else f for f in out
            ]
    out += [OverrideField(path, None, None, "derived knob: " + note) for path, note in DERIVED_KNOBS.items()]
    return out


def field_key(path: str) -> str:
    """The GPU field a `--set` path sets, whatever its unit spelling or `gpu.` prefix
    (`gpu.clocks.sm_clock_max_mhz` and `clocks.sm_clock_max_hz` are one field)."""
    return si_key(path.strip().removeprefix("gpu."))[0]


def parse_set_options(items: list[str] | None) -> dict[str, Any]:
    """Turn CLI `--set PATH=VALUE` strings into an overrides mapping; values parsed as YAML scalars."""
    out: dict[str, Any] = {}
    seen: dict[str, str] = {}  # one quantity, whatever its unit spelling or gpu. prefix: the last one won
    for item in items or []:
        path, sep, text = item.partition("=")
        if not sep or not path.strip():
            raise ConfigError(f"--set '{item}': expected PATH=VALUE, e.g. gpu.num_sms=144")
        quantity = field_key(path)
        if quantity in seen:
            raise ConfigError(f"--set {path.strip()} is also given as --set {seen[quantity]}; give it once")
        seen[quantity] = path.strip()
        try:
            value = parse_yaml_value(text, f"--set {path.strip()}")
        except ConfigError as exc:
            raise ConfigError(f"--set '{item}': value is not a scalar: {exc}") from None
        if isinstance(value, dict | list):
            raise ConfigError(
                f"--set '{item}': expected one value (a number or a word), not a list or mapping"
            )
        out[path.strip()] = value
    return out

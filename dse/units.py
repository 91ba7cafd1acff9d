"""SI constants and the conversions done at the edges (YAML loaders, NVML, reports).

Inside `dse` every quantity is SI and carries its unit in its name. Input files may use human units, and
then the key says so (`sm_clock_max_mhz`); `normalize_unit_keys` turns such keys into their SI twins once,
at load time.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

KHZ = 1e3
MHZ = 1e6
GHZ = 1e9
KIB = 2**10
MIB = 2**20
GIB = 2**30
KB = 1e3
MB = 1e6
GB = 1e9
TB = 1e12
PICO = 1e-12
MILLI = 1e-3
MICRO = 1e-6
# The largest count (tokens, requests, layers, GPUs, a config dimension) an input may give: past it a number
# is a typo or hostile input, refused where it is read rather than overflowing a computation later.
MAX_COUNT = 2**31 - 1

# Human-unit key suffix -> (SI suffix, factor). Longest suffixes first so `_gb_per_s` wins over `_gb`.
UNIT_SUFFIXES: tuple[tuple[str, str, float], ...] = (
    ("_tflop_per_s", "_flop_per_s", 1e12),
    ("_gbit_per_s", "_bit_per_s", 1e9),
    ("_gb_per_s", "_bytes_per_s", GB),
    ("_tb_per_s", "_bytes_per_s", TB),
    ("_pj_per_bit", "_j_per_bit", PICO),
    ("_mhz", "_hz", MHZ),
    ("_ghz", "_hz", GHZ),
    ("_kib", "_bytes", KIB),
    ("_mib", "_bytes", MIB),
    ("_gib", "_bytes", GIB),
    ("_gb", "_bytes", GB),
    ("_mv", "_v", MILLI),
    ("_ms", "_s", MILLI),
    ("_us", "_s", MICRO),
)


def si_key(key: str) -> tuple[str, float]:
    """Return the SI name of a possibly human-unit key and the factor that converts its value."""
    for suffix, si_suffix, factor in UNIT_SUFFIXES:
        if key.endswith(suffix):
            return key[: -len(suffix)] + si_suffix, factor
    return key, 1.0


def _scale(value: Any, factor: float) -> Any:
    if factor == 1.0 or value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        return value * factor
    if isinstance(value, list | tuple):
        return [_scale(v, factor) for v in value]
    return value  # strings and the like: let validation complain with the field name


def normalize_unit_keys(data: Any) -> Any:
    """Recursively rename human-unit keys to SI keys and scale their values.

    Raises ValueError when a mapping gives the same quantity twice (e.g. `l2_mib` and `l2_bytes`), or a
    unit key's value is text (a quoted number would be validated unscaled, in the SI field's unit).
    """
    if isinstance(data, Mapping):
        out: dict[str, Any] = {}
        for key, value in data.items():
            name, factor = si_key(str(key))
            if name in out:
                raise ValueError(f"'{key}' gives '{name}' a second time")
            texts = [v for v in (value if isinstance(value, list | tuple) else [value]) if isinstance(v, str)]
            if factor != 1.0 and texts:  # "1980" would reach `name` unscaled, as 1980 Hz
                raise ValueError(
                    f"'{key}' must be numbers in the unit its name says, not the text {texts[0]!r}"
                )
            out[name] = normalize_unit_keys(_scale(value, factor)) if factor == 1.0 else _scale(value, factor)
        return out
    if isinstance(data, list):
        return [normalize_unit_keys(v) for v in data]
    return data


def mw_to_w(value_mw: float) -> float:
    """NVML reports milliwatts."""
    return value_mw * MILLI


def mj_to_j(value_mj: float) -> float:
    """NVML's energy counter is in millijoules."""
    return value_mj * MILLI

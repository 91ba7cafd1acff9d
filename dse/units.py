"""SI constants and the conversions done at the edges (YAML loaders, NVML, reports).

Inside `dse` every quantity is SI and carries its unit in its name. Input files may use human units, and
then the key says so (`sm_clock_max_mhz`); `normalize_unit_keys` turns such keys into their SI twins once,
at load time.
"""

from __future__ import annotations

import math
import re
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


# How messages name the unit of each human-unit suffix (a value is shown in the unit its key was written in).
UNIT_NAMES: dict[str, str] = {
    "_tflop_per_s": "TFLOP/s", "_gbit_per_s": "Gbit/s", "_gb_per_s": "GB/s", "_tb_per_s": "TB/s",
    "_pj_per_bit": "pJ/bit", "_mhz": "MHz", "_ghz": "GHz", "_kib": "KiB", "_mib": "MiB", "_gib": "GiB",
    "_gb": "GB", "_mv": "mV", "_ms": "ms", "_us": "us",
}  # fmt: skip


def unit_name(key: str) -> str | None:
    """The unit a human-unit key is written in (`sm_clock_max_mhz` -> MHz), None for an SI key."""
    return next((UNIT_NAMES[suffix] for suffix, _, _ in UNIT_SUFFIXES if key.endswith(suffix)), None)


def written_key(si_name: str, present: Any) -> tuple[str, float] | None:
    """The human-unit key among `present` (a mapping's keys as written) that became `si_name`, and its
    factor; None when `si_name` was written as it is (or not at all)."""
    if si_name in present:
        return None
    for key in present:
        name, factor = si_key(str(key))
        if name == si_name and factor != 1.0:
            return str(key), factor
    return None


class UnitKeyError(ValueError):
    """A unit key `normalize_unit_keys` cannot convert. `path` locates it in the input as written (keys and
    list indexes), so a loader that kept the YAML's lines can name the line."""

    def __init__(self, path: tuple[str | int, ...], problem: str) -> None:
        super().__init__(f"{'.'.join(str(p) for p in path)}: {problem}")
        self.path = path
        self.problem = problem


def to_si(value: float, key: str) -> float:
    """`value` written under the human-unit key `key` (`sm_clock_max_mhz`), in SI. A ValueError saying the
    value as written where the product overflows: 1e305 MHz became inf Hz, and its error read "Input should
    be a finite number (got inf)" for a number the user wrote finite."""
    try:
        si = value * si_key(key)[1]
    except OverflowError:  # an integer past the float range (a YAML or --set value of 400 digits)
        si = math.inf
    if not math.isfinite(si) and (isinstance(value, int) or math.isfinite(value)):
        shown = (
            f"{value:g}" if isinstance(value, float) else f"{str(value)[:8]}... ({len(str(value))} digits)"
        )
        raise ValueError(f"{shown} {unit_name(key)} is out of range (it overflows in SI units)")
    return si


def _scale(value: Any, key: str, path: tuple[str | int, ...]) -> Any:
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int | float):
        try:
            return to_si(value, key)
        except ValueError as exc:
            raise UnitKeyError(path, str(exc)) from None
    if isinstance(value, list | tuple):
        return [_scale(v, key, (*path, i)) for i, v in enumerate(value)]
    return value  # strings and the like: let validation complain with the field name


def normalize_unit_keys(data: Any, path: tuple[str | int, ...] = ()) -> Any:
    """Recursively rename human-unit keys to SI keys and scale their values.

    Raises UnitKeyError when a mapping gives the same quantity twice (e.g. `l2_mib` and `l2_bytes`), or a
    unit key's value is text (a quoted number would be validated unscaled, in the SI field's unit).
    """
    if isinstance(data, Mapping):
        out: dict[str, Any] = {}
        written: dict[str, str] = {}  # SI name -> the key that gave it
        for key, value in data.items():
            name, factor = si_key(str(key))
            if name in out:
                raise UnitKeyError(
                    (*path, key), f"gives '{name}' a second time (also given as '{written[name]}')"
                )
            written[name] = str(key)
            listed = isinstance(value, list | tuple)
            texts = [(i, v) for i, v in enumerate(value if listed else [value]) if isinstance(v, str)]
            if factor != 1.0 and texts:  # "1980" would reach `name` unscaled, as 1980 Hz
                where = (*path, key, texts[0][0]) if listed else (*path, key)
                raise UnitKeyError(
                    where, f"must be numbers in {unit_name(str(key))} (the unit its name says), not the text "
                    f"{texts[0][1]!r}"
                )  # fmt: skip
            scaled = factor != 1.0
            out[name] = (
                _scale(value, str(key), (*path, key)) if scaled else normalize_unit_keys(value, (*path, key))
            )
        return out
    if isinstance(data, list):
        return [normalize_unit_keys(v, (*path, i)) for i, v in enumerate(data)]
    return data


def mw_to_w(value_mw: float) -> float:
    """NVML reports milliwatts."""
    return value_mw * MILLI


def mj_to_j(value_mj: float) -> float:
    """NVML's energy counter is in millijoules."""
    return value_mj * MILLI


# A row format for significant figures (d3-format's `r` type): `.3r` shows 0.00306, 0.290, 12.3 and 1230.
# Prices per million tokens span 1e-3 (a 1B model at batch 256) to 1e2, so `.3f` showed 0.003 for every such
# design and `.3g` shows 0.29 and 1.23e+03. Past SCIENTIFIC_BELOW and SCIENTIFIC_FROM the figures are
# written with an exponent (6.27e-08, 1.38e+08), as `.3g` writes them: a rent of 1e-300 $/h printed 300
# zeros in fixed notation. A leading `+` signs the value (a change column).
_SIGNIFICANT = re.compile(r"^(\+?)(,?)\.(\d+)r$")
SCIENTIFIC_BELOW = 1e-4  # 0.0000969 has four leading zeros: 9.69e-05 (0.000306 stays fixed)
SCIENTIFIC_FROM = 1e6  # 1,230,000 is 1.23e+06


def format_value(value: float, fmt: str) -> str:
    """`value` in a table's row format: Python's format spec, or `[+][,].Nr` for N significant figures,
    in fixed notation from SCIENTIFIC_BELOW up to SCIENTIFIC_FROM and with an exponent past them (a row
    format serves the text tables and the charts' hover alike)."""
    match = _SIGNIFICANT.match(fmt)
    if match is None or not math.isfinite(value):
        return format(value, fmt if match is None else match.group(1))
    sign, comma, digits = match.group(1), match.group(2), max(int(match.group(3)), 1)
    rounded = float(f"{value:.{digits - 1}e}")  # to N significant figures; its exponent may have moved up
    if rounded and not SCIENTIFIC_BELOW <= abs(rounded) < SCIENTIFIC_FROM:
        return format(rounded, f"{sign}.{digits - 1}e")
    exponent = math.floor(math.log10(abs(rounded))) if rounded else 0
    return format(rounded, f"{sign}{comma}.{max(digits - 1 - exponent, 0)}f")


def format_change(ratio: float) -> str:
    """A relative change (0.278 for +27.8%) as a change column shows it: one decimal of a percent, and past
    a million percent (a rent of 1e-6 against 1) three significant figures with an exponent
    (`format_value`), not a 300-digit number."""
    percent = ratio * 100.0
    if math.isfinite(percent) and abs(percent) < SCIENTIFIC_FROM:
        return f"{percent:+.1f}%"
    return format_value(percent, "+.3r") + "%"

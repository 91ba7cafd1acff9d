"""Human units for the page: the one place where SI names become ms, mJ, W, GB and MHz.

Inside `dse` every quantity is SI and its name ends in its unit (`e2e_latency_s`, `energy_j`). The report
is an output edge, so it converts here, picks the scale from the data (ms for milliseconds, µs below), and
says the unit in every axis title, hover line and table header.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.report.frames import METRIC_PREFIX, PARAM_PREFIX

# SI suffix -> ladder of (factor, unit), largest first; the first step where the median is >= 1 wins.
_LADDERS: tuple[tuple[str, tuple[tuple[float, str], ...]], ...] = (
    ("_bytes_per_s", ((1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"))),
    ("_flop_per_s", ((1e12, "TFLOP/s"), (1e9, "GFLOP/s"))),
    ("_j_per_bit", ((1e-12, "pJ/bit"),)),
    ("_bit_per_s", ((1e9, "Gbit/s"),)),
    # Inputs that already carry a human unit (study paths such as `sm_clock_mhz`) keep it.
    ("_gbit_per_s", ((1.0, "Gbit/s"),)),
    ("_gb_per_s", ((1.0, "GB/s"),)),
    ("_tflop_per_s", ((1.0, "TFLOP/s"),)),
    ("_per_s", ((1.0, ""),)),  # a rate of a count: `output tokens per s`
    ("_s", ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs"))),
    ("_j", ((1e3, "kJ"), (1.0, "J"), (1e-3, "mJ"), (1e-6, "µJ"))),
    ("_w", ((1.0, "W"),)),
    # memory sizes in binary units, as the CLI prints them (an H100 holds 80 GiB)
    ("_bytes", ((2.0**30, "GiB"), (2.0**20, "MiB"), (2.0**10, "KiB"), (1.0, "B"))),
    ("_hz", ((1e6, "MHz"),)),
    ("_v", ((1.0, "V"),)),
    ("_frac", ((0.01, "%"),)),
    # Inputs that already carry a human unit (study paths such as `sm_clock_mhz`) keep it.
    ("_mhz", ((1.0, "MHz"),)),
    ("_gb", ((1.0, "GB"),)),
    ("_c", ((1.0, "°C"),)),
)


# Metrics whose unit is not a suffix (the cost and carbon keys of dse.cost): label and ladder.
_NAMED: dict[str, tuple[str, tuple[tuple[float, str], ...]]] = {
    "usd_per_gpu_hour": ("cost per GPU-hour", ((1.0, "$"),)),
    "usd_per_million_output_tokens": ("cost per million output tokens", ((1.0, "$"),)),
    "usd_per_million_input_tokens": ("cost per million input tokens", ((1.0, "$"),)),
    "gco2_per_output_token": ("CO2 per output token", ((1.0, "g"), (1e-3, "mg"), (1e-6, "µg"))),
    "embodied_gco2_per_output_token": (
        "embodied CO2 per output token",
        ((1.0, "g"), (1e-3, "mg"), (1e-6, "µg")),
    ),
    "energy_cost_fraction": ("energy share of cost", ((0.01, "%"),)),
    "mfu": ("MFU", ((0.01, "%"),)),  # in %, as `dse predict --training` prints it
}
# A training step's ledger per trained token or sample (dse.cost.operation.TRAINING_COST_KEYS).
_GRAMS = ((1.0, "g"), (1e-3, "mg"), (1e-6, "µg"))
for _unit in ("token", "sample"):
    _NAMED[f"usd_per_million_{_unit}s"] = (f"cost per million trained {_unit}s", ((1.0, "$"),))
    _NAMED[f"gco2_per_{_unit}"] = (f"CO2 per trained {_unit}", _GRAMS)
    _NAMED[f"embodied_gco2_per_{_unit}"] = (f"embodied CO2 per trained {_unit}", _GRAMS)
_NAMED["usd_per_step"] = ("cost per step", ((1.0, "$"),))
_LADDERS += (("_usd", ((1.0, "$"),)), ("_mm2", ((1.0, "mm²"),)))


@dataclass(frozen=True, slots=True)
class DisplayUnit:
    """How one column is shown: a label, a unit and the factor that turns SI values into that unit."""

    label: str
    unit: str = ""
    factor: float = 1.0

    @property
    def title(self) -> str:
        """`label (unit)` for axes, headers and hover lines."""
        return f"{self.label} ({self.unit})" if self.unit else self.label

    def convert(self, values: np.ndarray) -> np.ndarray:
        """SI values -> display values (a hand-edited 1e308 s in ms overflows to inf, shown as missing)."""
        if self.factor == 1.0:
            return values
        with np.errstate(over="ignore"):
            return values / self.factor

    def convert_one(self, value: float) -> float:
        """One SI value -> its display value (the same arithmetic as `convert`)."""
        return float(value) / self.factor if self.factor != 1.0 else float(value)


def display_unit(column: str, values: np.ndarray | None = None) -> DisplayUnit:
    """Pick the label, unit and scale for a `metric.*` or `param.*` column from its values."""
    is_param = column.startswith(PARAM_PREFIX)
    name = column.removeprefix(METRIC_PREFIX).removeprefix(PARAM_PREFIX)
    if name in _NAMED and not is_param:
        label, ladder = _NAMED[name]
        return DisplayUnit(label, *_pick(ladder, values))
    for suffix, ladder in _LADDERS:
        if not name.endswith(suffix):
            continue
        unit, factor = _pick(ladder, values)
        # Parameters keep their study path (users search for it); metrics drop the unit suffix.
        if is_param:
            label = name
        elif suffix == "_per_s":
            label = name.replace("_", " ")
        else:
            label = name.removesuffix(suffix).replace("_", " ")
        return DisplayUnit(label, unit, factor)
    return DisplayUnit(name if is_param else name.replace("_", " "))


def _pick(ladder: tuple[tuple[float, str], ...], values: np.ndarray | None) -> tuple[str, float]:
    """(unit, factor) of the first ladder step where the values' median is >= 1; without data the SI step
    itself (s, J) when the ladder has it, else its smallest step."""
    factor, unit = next(((f, u) for f, u in ladder if f == 1.0), ladder[-1])
    if values is not None and len(ladder) > 1:
        finite = np.abs(np.asarray(values, dtype=float))
        finite = finite[np.isfinite(finite) & (finite > 0)]
        if finite.size:
            median = float(np.median(finite))
            factor, unit = next(((f, u) for f, u in ladder if median / f >= 1.0), ladder[-1])
    return unit, factor


def round_sig(values: np.ndarray, digits: int = 4) -> np.ndarray:
    """Round to `digits` significant digits so that JSON holds `12.35`, not `12.345678901234`."""
    a = np.asarray(values, dtype=float)
    out = a.copy()
    ok = np.isfinite(a) & (a != 0)
    if not ok.any():
        return out
    exp = digits - 1 - np.floor(np.log10(np.abs(a[ok]))).astype(int)
    # Divide an integer by an exact power of ten (or multiply for large numbers) so that the result is
    # the double nearest the decimal and prints short.
    pos = exp >= 0
    vals = a[ok]
    res = np.empty_like(vals)
    res[pos] = np.round(vals[pos] * 10.0 ** exp[pos]) / 10.0 ** exp[pos]
    res[~pos] = np.round(vals[~pos] / 10.0 ** (-exp[~pos])) * 10.0 ** (-exp[~pos])
    out[ok] = res
    return out

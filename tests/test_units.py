"""The edge conversions of `dse.units` that no loader test covers: the table's row formats."""

from __future__ import annotations

import pytest

from dse.units import format_change, format_value


@pytest.mark.parametrize(
    ("value", "fmt", "shown"),
    [
        # N significant figures in fixed notation (d3-format's `r`, which the charts' hover reads too)
        (0.0030649, ".3r", "0.00306"),
        (0.29, ".3r", "0.290"),  # the trailing zero is a significant figure (`.3g` dropped it)
        (12.345, ".3r", "12.3"),
        (1234.5, ".3r", "1230"),  # no exponent (`.3g` gave 1.23e+03)
        (1234.5, ",.3r", "1,230"),
        (0.099951, ".3r", "0.100"),  # rounding up past a power of ten keeps three figures
        (0.0, ".3r", "0.00"),
        (2.99, ".3f", "2.990"),  # any other format is Python's
        # past four leading zeros or from a million, an exponent: a rent of 1e-300 $/h printed 300 zeros
        (0.000306, ".3r", "0.000306"),  # three leading zeros: still fixed
        (9.69e-05, ".3r", "9.69e-05"),
        (3.32e-300, ".3r", "3.32e-300"),
        (999_000.0, ",.3r", "999,000"),
        (999_999.0, ",.3r", "1.00e+06"),  # rounds to a million: the exponent of the rounded value
        (1_234_567.0, ".3r", "1.23e+06"),
        (-2e-5, ".3r", "-2.00e-05"),
        (12.3, "+.3r", "+12.3"),  # signed, as a change column shows it
    ],
)
def test_format_value(value: float, fmt: str, shown: str) -> None:
    assert format_value(value, fmt) == shown


@pytest.mark.parametrize(
    ("ratio", "shown"),
    [
        (0.278, "+27.8%"),
        (-0.389, "-38.9%"),
        (0.0, "+0.0%"),
        (9999.99, "+999999.0%"),  # under a million percent: one decimal
        # a rent of 1e-6 against 1: (1 - 1e-6) / 1e-6 = 999,999 times, printed +99999900.0%
        (999_999.0, "+1.00e+08%"),
        (1e300, "+1.00e+302%"),  # 1e-300 against 1 printed 300 digits
    ],
)
def test_format_change(ratio: float, shown: str) -> None:
    assert format_change(ratio) == shown

"""The edge conversions of `dse.units` that no loader test covers: the table's row formats."""

from __future__ import annotations

import pytest

from dse.units import format_value


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
    ],
)
def test_format_value(value: float, fmt: str, shown: str) -> None:
    assert format_value(value, fmt) == shown

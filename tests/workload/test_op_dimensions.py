"""An operator's dimension checks say what is wrong with the value: "too large" only when it is."""

from __future__ import annotations

import pytest

from dse.errors import ShapeError
from dse.workload.ops import GemmOp


@pytest.mark.parametrize("m", [-5, 0, 8.5, True])
def test_a_non_positive_or_non_integer_dimension_is_not_called_too_large(m: object) -> None:
    with pytest.raises(ShapeError) as info:
        GemmOp(name="g", m=m, n=8, k=8, dtype="bf16")  # type: ignore[arg-type]
    assert "must be a positive integer up to 2^53" in str(info.value)
    assert "too large" not in str(info.value)  # a newcomer's -5 read "dimension too large"


def test_an_oversized_dimension_says_so() -> None:
    with pytest.raises(ShapeError, match="too large"):
        GemmOp(name="g", m=2**60, n=8, k=8, dtype="bf16")

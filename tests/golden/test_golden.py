"""Golden regression files: fixed predictions compared at a tight tolerance.

They guard against unintended change (they prove no correctness: the accuracy tests and validation tables
do that). A change in the model's numbers, a refit or a moved constant shows up here; when intended,
regenerate with `pytest tests/golden --update-golden`, which rewrites the files and prints every value that
moved, and commit the files with the reason.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from .cases import CASES, Values

GOLDEN_DIR = Path(__file__).parent
RTOL = 1e-9
ATOL = 1e-15


def golden_path(name: str) -> Path:
    return GOLDEN_DIR / f"{name}.json"


def differences(expected: Values, actual: Values, rtol: float = RTOL) -> list[str]:
    """Lines describing every key added, removed or changed beyond `rtol`."""
    lines = [f"+ {k} = {actual[k]!r} (new)" for k in sorted(set(actual) - set(expected))]
    lines += [f"- {k} = {expected[k]!r} (gone)" for k in sorted(set(expected) - set(actual))]
    for k in sorted(set(expected) & set(actual)):
        a, b = expected[k], actual[k]
        if not math.isclose(a, b, rel_tol=rtol, abs_tol=ATOL):
            rel = (b - a) / a if a else math.inf
            lines.append(f"~ {k}: {a!r} -> {b!r} ({rel:+.3e})")
    return lines


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str, request: pytest.FixtureRequest) -> None:
    actual = CASES[name]()
    assert all(math.isfinite(v) for v in actual.values()), "a golden value is not finite"
    path = golden_path(name)
    if request.config.getoption("--update-golden"):
        old = json.loads(path.read_text()) if path.exists() else {}
        diff = differences(old, actual)
        path.write_text(json.dumps(actual, indent=1, sort_keys=True) + "\n")
        print(f"\n{path.name}: {len(diff)} change(s)" + "".join(f"\n  {line}" for line in diff[:200]))
        return
    assert path.exists(), f"{path} is missing: run `pytest tests/golden --update-golden`"
    diff = differences(json.loads(path.read_text()), actual)
    assert not diff, f"{path.name}: {len(diff)} value(s) changed:\n" + "\n".join(diff[:40])

"""Fixtures for the report tests; the run-directory writer itself is in runs.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from .runs import write_run


@pytest.fixture
def small_run(tmp_path: Path) -> Path:
    """300 points with parquet, summary and breakdowns."""
    return write_run(tmp_path, 300, breakdowns=True)

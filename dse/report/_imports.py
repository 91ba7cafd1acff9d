"""The report's optional dependency (plotly): `try_import()` defaults to plotly's install hint."""

from __future__ import annotations

from dse import _imports
from dse._imports import MissingDependencyError

PLOTLY_HINT = "reports need plotly: pip install 'plotly>=5.18' (or pip install -e . in the dse checkout)"


def try_import(hint: str = PLOTLY_HINT) -> _imports.try_import:
    """The shared guard with plotly's hint."""
    return _imports.try_import(hint)


__all__ = ["PLOTLY_HINT", "MissingDependencyError", "try_import"]

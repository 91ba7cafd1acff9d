"""Install hints for the search layer's optional dependencies (the guard itself is `dse._imports`)."""

from __future__ import annotations

from dse._imports import MissingDependencyError, try_import

OPTUNA_HINT = (
    "the search samplers need optuna: pip install 'optuna>=5' (or pip install -e . in the dse checkout)"
)
RAY_HINT = "the ray executor needs ray: pip install 'ray>=2.9' (or use --executor process)"

__all__ = ["OPTUNA_HINT", "RAY_HINT", "MissingDependencyError", "try_import"]

"""Optuna-style guard for optional dependencies (optuna, ray, plotly), shared by dse.search and dse.report.

Modules import them inside `with try_import(HINT) as _imports:` so that importing the module never fails;
code that needs the package calls `_imports.check()`, which raises one readable DseError with the install
command instead of a bare ImportError.
"""

from __future__ import annotations

from types import TracebackType

from dse.errors import DseError


class MissingDependencyError(DseError, ImportError):
    """An optional dependency is not installed; the message says how to install it."""


class try_import:  # noqa: N801 (named like optuna's `_imports.try_import`, used as a context manager)
    """Swallow an ImportError inside the `with` block and re-raise it, with a hint, on `check()`."""

    def __init__(self, hint: str) -> None:
        self._hint = hint
        self._error: ImportError | None = None

    def __enter__(self) -> try_import:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool:
        if isinstance(exc, ImportError):
            self._error = exc
            return True
        return False

    def is_successful(self) -> bool:
        """True when every import in the block worked."""
        return self._error is None

    def check(self) -> None:
        """Raise MissingDependencyError (a DseError) when an import in the block failed."""
        if self._error is not None:
            raise MissingDependencyError(f"{self._error.msg}; {self._hint}") from self._error

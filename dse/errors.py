"""The exceptions `dse` raises on purpose. The CLI turns each into one line and exit code 2."""

from __future__ import annotations


class DseError(Exception):
    """Base class: a problem the user can fix, with a message that says how."""


class ConfigError(DseError):
    """A bad input file, name or value (unknown GPU, malformed YAML, impossible shape)."""


class MeasurementError(DseError):
    """No GPU, no permission, or an NVML call that failed."""


class CalibrationError(DseError):
    """A fit that cannot be built or did not converge."""


class SearchError(DseError):
    """A search that cannot run (bad space, executor failure)."""


def format_validation_error(exc: object, source: str = "") -> str:
    """One readable line per problem of a pydantic ValidationError: `source: field.path: message`."""
    errors = getattr(exc, "errors", None)
    if errors is None:
        return f"{source}: {exc}" if source else str(exc)
    lines = []
    for err in errors():
        loc = ".".join(str(p) for p in err.get("loc", ()))
        msg = err.get("msg", "invalid")
        if err.get("type") == "extra_forbidden":
            msg = "unknown key"
        where = ": ".join(p for p in (source, loc) if p)
        lines.append(f"{where}: {msg}" if where else msg)
    return "; ".join(lines)

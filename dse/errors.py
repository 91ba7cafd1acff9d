"""The exceptions `dse` raises on purpose. The CLI turns each into one line and its `exit_code`: 2 for bad
input (the default), 1 for a run that failed although its input was fine (a full disk mid-run)."""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import Any


class DseError(Exception):
    """Base class: a problem the user can fix, with a message that says how."""

    exit_code = 2


class ConfigError(DseError):
    """A bad input file, name or value (unknown GPU, malformed YAML, impossible shape)."""


class UnpricedError(ConfigError):
    """A GPU the cost model cannot price (a spec without a `die` section, a die no wafer holds): commands
    that predict it keep the prediction and leave its cost null (`dse.cli.cost.priced`)."""


class ShapeError(ConfigError, ValueError):
    """An operator dimension out of range (a batch or length so large that its element counts pass 2^53):
    bad input for the CLI, and a ValueError for the code that validates kernel lists entry by entry."""


class MeasurementError(DseError):
    """No GPU, no permission, or an NVML call that failed."""


class CalibrationError(DseError):
    """A fit that cannot be built or did not converge."""


class SearchError(DseError):
    """A search that cannot run (bad space, executor failure)."""


class RunFailed(DseError):
    """A run that started and could not finish (the disk filled, the results became unwritable); what it
    had logged is kept and `--resume` continues it."""

    exit_code = 1


# An OSError of the path a user gave (too long, missing, a directory, no permission): bad input, exit 2. Any
# other is the machine's (a full or read-only disk, an I/O error): the input was fine, exit 1.
PATH_ERRNOS = frozenset(
    {errno.ENAMETOOLONG, errno.ENOENT, errno.ENOTDIR, errno.EISDIR, errno.ELOOP, errno.EACCES, errno.EPERM}
)


def os_failure(message: str, exc: OSError) -> DseError:
    """`message` as the error an OSError `exc` is: ConfigError for the path's, RunFailed for the machine's."""
    return ConfigError(message) if exc.errno in PATH_ERRNOS else RunFailed(message)


def format_validation_error(
    exc: object, source: str = "", rewrite: Callable[[Any], Any] | None = None
) -> str:
    """One readable line per problem of a pydantic ValidationError: `source: field.path: message`;
    `rewrite` maps each error dict first (an override path says the field as the user wrote it)."""
    errors = getattr(exc, "errors", None)
    if errors is None:
        return f"{source}: {exc}" if source else str(exc)
    lines = []
    for raw in errors():
        err = rewrite(raw) if rewrite is not None else raw
        loc = ".".join(str(p) for p in err.get("loc", ()))
        msg = err.get("msg", "invalid")
        if err.get("type") == "extra_forbidden":
            msg = "unknown key"
        elif isinstance(err.get("input"), str | int | float | bool):
            msg += f" (got {_shown_input(err['input'])})"  # which value was refused, as given
        where = ": ".join(p for p in (source, loc) if p)
        lines.append(f"{where}: {msg}" if where else msg)
    return "; ".join(lines)


def _shown_input(value: object) -> str:
    """A refused value as the message shows it: its repr (quotes make '' and spaces visible), cut to 40."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def did_you_mean(name: str, known: list[str], key: object = None) -> str:
    """' (did you mean X or Y?)' for the known names closest to an unknown `name`, or '' when none is
    close: names that start with it ('h100' -> h100-sxm, h100-pcie), else the longest one it starts with
    ('llama-3.1-8b-instruct' -> llama-3.1-8b), else those `difflib` finds similar ('b300' -> b200). `key`
    (a callable) normalizes names before comparing (case, separators); an organization prefix such as
    'meta-llama/' is dropped."""
    import difflib

    norm = key if callable(key) else (lambda text: str(text).strip().lower())
    wanted = norm(name.rsplit("/", 1)[-1])
    by_key = {norm(k): k for k in known}
    if not wanted:
        return ""
    close = [by_key[k] for k in by_key if k.startswith(wanted)][:5]  # a family: a100 -> four A100 parts
    # a known name the input extends ('llama-3.1-8b-instruct' -> llama-3.1-8b), the longest one
    close = close or sorted((by_key[k] for k in by_key if len(k) >= 4 and wanted.startswith(k)), key=len)[-1:]
    close = close or [by_key[k] for k in difflib.get_close_matches(wanted, list(by_key), n=3, cutoff=0.75)]
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def implied_precision_message(message: str, precision: str, unwritten: str) -> str:
    """`message` saying that its precision was the model checkpoint's default, where it names --precision
    and the user wrote none (`unwritten`: how the command says so); otherwise `message` as it is."""
    if "--precision" not in message:
        return message
    return f"{message} ({precision}: {unwritten}, the model checkpoint's default)"

"""JSON files users give (`--coeffs`, `--kernels`, a model's config.json, calibration samples), read safely.

    data = read_json_file(path, "coefficient file", expect=dict)

One ConfigError naming the file for each way such a file can be hostile or wrong, never a traceback or a hang:
a missing file or a directory, an empty one (a named pipe without a writer reads as one), more than
MAX_JSON_BYTES (a device such as /dev/zero is read no further), text that is not UTF-8, invalid JSON, nesting
deeper than Python's parser recursion allows, NaN or Infinity (not JSON; Python's parser takes them), a key
given twice in one object (parsers keep the last silently), and a top level of the wrong kind.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from dse.errors import ConfigError

__all__ = ["MAX_JSON_BYTES", "loads_finite", "read_json_file", "with_nulls"]

MAX_JSON_BYTES = 64 * 1024 * 1024  # a kernel list or sample file is at most a few MiB


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object's members, refusing a key given twice: JSON parsers keep the last silently, so a config
    edited by appending a key would run with whichever copy came last."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"key {key[:100]!r} appears twice in one object; keep one")
        out[key] = value
    return out


def with_nulls(obj: Any) -> Any:
    """`obj` with every non-finite float replaced by None, which JSON writes as null: a table cell with no
    value (a MAPE over no rows), a run log's missing metric."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: with_nulls(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [with_nulls(v) for v in obj]
    return obj


def loads_finite(text: str | bytes) -> tuple[Any, int]:
    """One JSON document (a log line) with NaN and +-Infinity (not JSON, but Python's parser takes them) and
    numbers past the float range (1e999) read as null; returns (value, how many were replaced) so that the
    caller can say where. Raises json.JSONDecodeError as json.loads does, and for bytes that are not UTF-8
    and nesting too deep to parse."""
    replaced = 0

    def null(_name: str) -> None:
        nonlocal replaced
        replaced += 1

    def number(literal: str) -> float | None:  # 1e999 parses as inf
        value = float(literal)
        if math.isfinite(value):
            return value
        null(literal)
        return None

    try:
        return json.loads(text, parse_constant=null, parse_float=number), replaced
    except UnicodeDecodeError as exc:  # bytes that are not UTF-8: as damaged as any other non-JSON line
        raise json.JSONDecodeError(f"not UTF-8 text ({exc.reason})", "", exc.start) from None
    except RecursionError:  # nesting deeper than the parser's recursion (a hostile line)
        raise json.JSONDecodeError("nested too deeply", "", 0) from None


def read_json_file(path: str | Path, what: str, *, expect: type | None = None) -> Any:
    """The parsed content of the JSON file at `path`; `what` names it in messages ("coefficient file");
    `expect` (dict or list) is the top level's required type."""
    path = Path(path)
    label = f"{what} {str(path)[:200]}"
    try:
        # opened without waiting: a named pipe nobody writes to blocked open() for ever; with a writer
        # (`--kernels <(...)`) the read waits for its data as before, without one it ends at once, empty
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        os.set_blocking(fd, True)
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(MAX_JSON_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError(f"{label} does not exist") from None
    except IsADirectoryError:
        raise ConfigError(f"{label} is a directory, not a JSON file") from None
    except OSError as exc:
        raise ConfigError(f"{label}: cannot read ({exc.strerror or exc})") from None
    if not data.strip():
        raise ConfigError(f"{label} is empty; a {what} is a JSON document")
    if len(data) > MAX_JSON_BYTES:
        raise ConfigError(f"{label}: more than {MAX_JSON_BYTES} bytes; not a {what}")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{label}: not UTF-8 text (byte offset {exc.start})") from None
    try:
        value = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{label}: not valid JSON ({exc})") from None
    except ValueError as exc:  # NaN / Infinity, a duplicated key
        raise ConfigError(f"{label}: {exc}") from None
    except RecursionError:
        raise ConfigError(f"{label}: nested too deeply to be a {what}") from None
    if expect is not None and not isinstance(value, expect):
        kind = "object" if expect is dict else "list" if expect is list else expect.__name__
        raise ConfigError(f"{label}: expected a JSON {kind} at the top level, got {type(value).__name__}")
    return value

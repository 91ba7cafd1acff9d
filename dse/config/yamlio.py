"""YAML in with line numbers, pydantic errors out as `file:line: field: message (allowed: ...)`.

PyYAML's composer gives every node a start mark, so the loader keeps a map from the path of each value
(`("space", "gpu.num_sms", "low")`) to its line. A pydantic `loc` is then walked along that map: segments
that are not keys of the YAML (discriminated-union tags such as `int` or `nsga2`) are skipped, and a
missing field points at the line of the mapping that lacks it.

The loader also fixes two YAML 1.1 traps measured in reference/search-notes.md section 6.1: `1e-3` (no
dot) is a float here, not the string "1e-3", and a key given twice is an error instead of last-one-wins.

It is the one YAML loader of `dse` (studies, spaces, GPU files, run directories) and is safe on hostile
input: files over MAX_YAML_BYTES, text that is not UTF-8, nesting deeper than MAX_YAML_DEPTH, anchors that
refer to themselves, aliases that expand past MAX_YAML_NODES values ("billion laughs") and mapping keys that
are not plain scalars are each one ConfigError naming the file (and line), never a traceback or a hang.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ValidationError

from dse.errors import ConfigError
from dse.units import si_key, unit_name, written_key

Loc = tuple[str | int, ...]

MAX_YAML_BYTES = 256 * 1024  # a study or GPU file is a few KiB
MAX_YAML_DEPTH = 64
MAX_YAML_NODES = 20_000  # values, after alias expansion


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads `1e-3` and `5E+9` as floats (YAML 1.2 behaviour)."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


@dataclass(frozen=True)
class SourceMap:
    """Where each value of a loaded YAML document sits: `lines[path] = line` (1-based)."""

    file: str
    lines: dict[Loc, int] = field(default_factory=dict)
    includes: dict[Loc, str] = field(default_factory=dict)  # location prefix -> file included there

    def line_of(self, loc: Sequence[str | int]) -> int | None:
        """Line of the deepest prefix of `loc` that exists in the document (union tags skipped)."""
        path: Loc = ()
        best = self.lines.get((), None)
        for seg in loc:
            for cand in (seg, str(seg)):
                if (*path, cand) in self.lines:
                    path = (*path, cand)
                    best = self.lines[path]
                    break
        return best

    def yaml_path(self, loc: Sequence[str | int]) -> Loc:
        """`loc` with the segments that are not YAML keys (union tags) removed, where they can be told."""
        path: Loc = ()
        out: list[str | int] = []
        for seg in loc:
            if (*path, seg) in self.lines or (*path, str(seg)) in self.lines:
                key = seg if (*path, seg) in self.lines else str(seg)
                path = (*path, key)
                out.append(seg)
            elif not _is_tag(seg):
                out.append(seg)
        return tuple(out)

    def keys_at(self, path: Loc) -> list[str | int]:
        """The keys (or list indexes) written directly under `path`."""
        return [p[-1] for p in self.lines if len(p) == len(path) + 1 and p[:-1] == path]

    def nested(self, prefix: Loc, other: SourceMap) -> SourceMap:
        """A map where `prefix + path` resolves through `other` (an included file) first."""
        merged = dict(self.lines)
        for path, line in other.lines.items():
            if path:  # the included file's root stays at the line that includes it
                merged[(*prefix, *path)] = line
        return SourceMap(self.file, merged, {**self.includes, prefix: other.file})

    def where(self, loc: Sequence[str | int]) -> str:
        """`file:line` for a location (the included file when the location lies inside one)."""
        file = self.file
        for prefix, inc in self.includes.items():
            if tuple(loc[: len(prefix)]) == prefix and len(loc) > len(prefix):
                file = inc
        line = self.line_of(loc)
        return f"{file}:{line}" if line is not None else file


# Discriminated-union tags that pydantic puts into `loc` (parameter kinds, sampler kinds).
_TAGS = {"int", "float", "choice", "constant", "grid", "random", "qmc", "nsga2", "nsga3", "tpe"}


def _is_tag(seg: str | int) -> bool:
    return isinstance(seg, str) and (
        seg in _TAGS or seg.startswith(("function-", "list[", "dict[", "tagged-"))
    )


class _Budget:
    """Values visited so far while walking a document, aliases expanded (bounds alias bombs)."""

    def __init__(self) -> None:
        self.nodes = 0


def _walk(node: yaml.Node, path: Loc, lines: dict[Loc, int], source: str, budget: _Budget,
          stack: tuple[int, ...] = ()) -> None:  # fmt: skip
    budget.nodes += 1
    line = node.start_mark.line + 1
    if budget.nodes > MAX_YAML_NODES:
        raise ConfigError(f"{source}:{line}: more than {MAX_YAML_NODES} values once aliases are expanded")
    if id(node) in stack:
        raise ConfigError(f"{source}:{line}: an alias refers to a value that contains it (recursive anchor)")
    if len(stack) >= MAX_YAML_DEPTH:
        raise ConfigError(f"{source}:{line}: nested deeper than {MAX_YAML_DEPTH} levels")
    lines.setdefault(path, line)
    inner = (*stack, id(node))
    if isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key_node, value_node in node.value:
            where = f"{source}:{key_node.start_mark.line + 1}"
            if not isinstance(key_node, yaml.ScalarNode):
                raise ConfigError(f"{where}: a mapping key must be a plain value, not a list or mapping")
            key = key_node.value
            if key in seen:
                raise ConfigError(
                    f"{where}: {'.'.join(map(str, (*path, key)))}: "
                    f"key '{key}' given twice (first on line {seen[key]})"
                )
            seen[key] = key_node.start_mark.line + 1
            sub = (*path, key)
            lines[sub] = key_node.start_mark.line + 1
            _walk(value_node, sub, lines, source, budget, inner)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[(*path, i)] = item.start_mark.line + 1
            _walk(item, (*path, i), lines, source, budget, inner)


def _check_nesting(text: str, source: str) -> None:
    """Nesting depth and size from the event stream, which PyYAML parses without recursion (its composer
    recurses) and faster than it composes."""
    depth = 0
    for events, event in enumerate(yaml.parse(text, Loader=_Loader), start=1):
        if events > 2 * MAX_YAML_NODES:  # stop before composing a huge document
            line = event.start_mark.line + 1 if event.start_mark else 0
            raise ConfigError(f"{source}:{line}: more than {MAX_YAML_NODES} values")
        if isinstance(event, yaml.CollectionStartEvent):
            depth += 1
            if depth > MAX_YAML_DEPTH:
                line = event.start_mark.line + 1 if event.start_mark else 0
                raise ConfigError(f"{source}:{line}: nested deeper than {MAX_YAML_DEPTH} levels")
        elif isinstance(event, yaml.CollectionEndEvent):
            depth -= 1


def decode_yaml_bytes(data: bytes, source: str) -> str:
    """UTF-8 text of a YAML file (a BOM is allowed); ConfigError for oversized or non-UTF-8 input."""
    if len(data) > MAX_YAML_BYTES:
        # the file is read to one byte past the limit: its size is only known to be over it
        raise ConfigError(f"{source}: more than {MAX_YAML_BYTES} bytes; a YAML input may be at most that")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"{source}:{line}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None


def load_yaml(path: str | Path) -> tuple[Any, SourceMap]:
    """Parse one YAML file; return the data and its line map. Raises ConfigError with the line."""
    path = Path(path)
    try:
        with path.open("rb") as fh:
            data = fh.read(MAX_YAML_BYTES + 1)
    except OSError as exc:
        raise ConfigError(f"{_short(path)}: cannot read: {exc.strerror or exc}") from None
    return parse_yaml(decode_yaml_bytes(data, str(path)), str(path))


def _short(path: Path) -> str:
    text = str(path)
    return text if len(text) <= 200 else text[:100] + "..." + text[-60:]


def parse_yaml(text: str, source: str) -> tuple[Any, SourceMap]:
    """Like `load_yaml` for text already read; `source` names it in messages."""
    if len(text) > MAX_YAML_BYTES:
        raise ConfigError(f"{source}: {len(text)} characters; a YAML input may be at most {MAX_YAML_BYTES}")
    try:
        _check_nesting(text, source)
        loader = _Loader(text)
        try:
            node = loader.get_single_node()
            lines: dict[Loc, int] = {}
            if node is not None:
                _walk(node, (), lines, source, _Budget())
            try:
                data = loader.construct_document(node) if node is not None else None
            except (ValueError, OverflowError) as exc:  # e.g. an integer of more than 4,300 digits
                raise ConfigError(
                    f"{source}:{node.start_mark.line + 1}: a value cannot be read: {exc}"
                ) from None
        finally:
            loader.dispose()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = f":{mark.line + 1}" if mark is not None else ""
        what = " ".join(p for p in (exc.context, exc.problem) if p)
        raise ConfigError(f"{source}{line}: invalid YAML: {what}") from None
    except yaml.YAMLError as exc:  # e.g. a ReaderError, whose text spans lines: one line, as every error
        raise ConfigError(f"{source}: invalid YAML: {' '.join(str(exc).split())}") from None
    return data, SourceMap(source, lines)


def parse_yaml_value(text: str, source: str) -> Any:
    """One YAML value (a `--set` value, a catalog file) through the same safe loader."""
    return parse_yaml(text, source)[0]


# --- pydantic errors -> lines ------------------------------------------------------------------------------


def _unwrap(tp: Any) -> Any:
    while typing.get_origin(tp) is typing.Annotated:
        tp = typing.get_args(tp)[0]
    return tp


def _model_at(root: type[BaseModel], loc: Sequence[str | int]) -> type[BaseModel] | None:
    """The pydantic model that owns the last segment of `loc`, walking fields, dicts, lists and unions."""
    candidates: list[Any] = [root]
    for seg in loc:
        nxt: list[Any] = []
        for tp in candidates:
            nxt.extend(_step(_unwrap(tp), seg))
        if not nxt:
            return None
        candidates = nxt
    models = [c for c in (_unwrap(t) for t in candidates) if isinstance(c, type) and issubclass(c, BaseModel)]
    return models[0] if len(models) == 1 else None


def _step(tp: Any, seg: str | int) -> list[Any]:
    origin = typing.get_origin(tp)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        members = [_unwrap(a) for a in typing.get_args(tp)]
        tagged = [m for m in members if _tag_of(m) == seg]
        if tagged:
            return [m for m in tagged]
        return [r for m in members for r in _step(m, seg)]
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        fields = tp.model_fields
        if seg in fields:
            return [fields[seg].annotation]
        for info in fields.values():
            if info.alias == seg:
                return [info.annotation]
        return []
    if origin in (dict, Mapping) or (isinstance(origin, type) and issubclass(origin, Mapping)):
        args = typing.get_args(tp)
        return [args[1]] if len(args) == 2 else []
    if origin in (list, tuple, Sequence) and isinstance(seg, int):
        args = typing.get_args(tp)
        return [args[0]] if args else []
    return []


def _tag_of(model: Any) -> str | None:
    if isinstance(model, type) and issubclass(model, BaseModel):
        for name in ("kind", "type"):
            info = model.model_fields.get(name)
            if info is not None and typing.get_origin(info.annotation) is typing.Literal:
                args = typing.get_args(info.annotation)
                if len(args) == 1:
                    return str(args[0])
        tag = getattr(model, "TAG", None)
        if isinstance(tag, str):
            return tag
    return None


def _allowed_keys(root: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    model = _model_at(root, loc[:-1])
    if model is None:
        return []
    return [info.alias or name for name, info in model.model_fields.items()]


def _message(err: Mapping[str, Any], root: type[BaseModel], loc: Loc) -> str:
    kind = err.get("type", "")
    msg = str(err.get("msg", "invalid"))
    ctx = err.get("ctx") or {}
    if kind == "extra_forbidden":
        allowed = _allowed_keys(root, loc)
        hint = f" (allowed: {', '.join(allowed)})" if allowed else ""
        return f"unknown key '{loc[-1] if loc else ''}'{hint}"
    if kind == "missing":
        return "required key is missing"
    if kind == "param_kind":  # space.py's discriminator: say which `type` was wrong, if that was it
        given = err.get("input")
        if isinstance(given, Mapping) and "type" in given:
            kinds = "type: int | float, values: [...], value: x"
            return f"unknown parameter type {given['type']!r} (allowed: {kinds})"
        return msg
    if kind == "union_tag_invalid":
        expected = str(ctx.get("expected_tags", "")).replace("'", "")
        disc = str(ctx.get("discriminator", "kind")).strip("'")
        return f"unknown {disc} {ctx.get('tag')!r} (allowed: {expected})"
    if kind == "union_tag_not_found":
        disc = str(ctx.get("discriminator", "kind")).strip("'")
        return f"`{disc}:` is missing (allowed kinds: grid, random, qmc, nsga2, nsga3, tpe)"
    if kind == "literal_error":
        expected = str(ctx.get("expected", "")).replace("'", "").replace(" or ", ", ")
        return f"{err.get('input')!r} is not allowed (allowed: {expected})"
    if kind in ("value_error", "assertion_error"):
        return msg.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    return (
        f"{msg} (got {err.get('input')!r})" if "input" in err and not isinstance(err["input"], dict) else msg
    )


def format_errors(
    exc: ValidationError,
    root: type[BaseModel],
    smap: SourceMap,
    prefix: Loc = (),
    unit_keys: bool = False,
    spellings: Mapping[Loc, str] | None = None,
) -> str:
    """One `file:line: field: message` line per problem of a ValidationError; `unit_keys`: the document went
    through `normalize_unit_keys`, and errors on its SI fields are said in the keys and units it wrote.
    `spellings`: SI field path -> the human-unit key such documents write for it, to name a missing field as
    `clocks.sm_clock_max_mhz (or sm_clock_max_hz)` (either is accepted; the SI name alone misled)."""
    out = []
    seen = set()
    for raw in _one_per_union(exc.errors()):
        loc: Loc = (*prefix, *raw.get("loc", ()))
        err, loc = _as_written(raw, loc, smap) if unit_keys else (raw, loc)
        err = _names_as_written(err, loc, smap) if unit_keys else err
        path = smap.yaml_path(loc)
        field_name = ".".join(str(p) for p in path) or "(top level)"
        human = (spellings or {}).get(tuple(map(str, path))) if err.get("type") == "missing" else None
        if human is not None:
            field_name = ".".join((*map(str, path[:-1]), human)) + f" (or {path[-1]})"
        line = f"{smap.where(loc)}: {field_name}: {_message(err, root, loc)}"
        if line not in seen:
            seen.add(line)
            out.append(line)
    return "\n".join(out)


# The loc segment pydantic adds for each branch of a `float | str` union (`constraints.0.value.str`).
_UNION_BRANCHES = frozenset({"str", "int", "float", "bool"})


def _one_per_union(errors: list[Any]) -> list[Any]:
    """pydantic reports each branch of a `float | str` union that a value failed (`value.float: Input
    should be a finite number`, `value.str: Input should be a valid string`): keep one per field, a
    branch's own check before a mere type mismatch."""
    kept: dict[tuple, Any] = {}
    out = []
    for err in errors:
        loc = tuple(err.get("loc", ()))
        if len(loc) < 2 or loc[-1] not in _UNION_BRANCHES:
            out.append(err)
            continue
        first = kept.get(loc[:-1])
        if first is None:
            kept[loc[:-1]] = err
            out.append(err)
        elif str(first.get("type", "")).endswith("_type") and not str(err.get("type", "")).endswith("_type"):
            out[out.index(first)] = kept[loc[:-1]] = err
    return out


# pydantic's bound errors: the ctx key of the bound and how its message says it
_BOUNDS = {
    "greater_than": ("gt", "greater than"),
    "greater_than_equal": ("ge", "greater than or equal to"),
    "less_than": ("lt", "less than"),
    "less_than_equal": ("le", "less than or equal to"),
}


def _as_written(err: Mapping[str, Any], loc: Loc, smap: SourceMap) -> tuple[Mapping[str, Any], Loc]:
    """An error on an SI field that the file wrote in a human unit (`clocks.sm_clock_max_hz` from
    `sm_clock_max_mhz`, `dse.units.normalize_unit_keys`) in the file's terms: that key, and so its line, and
    the value and bound in its unit (9e+09 MHz, not 9e+15 Hz, under a key the file does not contain)."""
    path: Loc = ()
    for i, seg in enumerate(loc):
        if (*path, seg) in smap.lines:
            path = (*path, seg)
            continue
        twin = written_key(seg, smap.keys_at(path)) if isinstance(seg, str) else None
        if twin is not None:
            return error_in_unit(err, *twin), (*loc[:i], twin[0], *loc[i + 1 :])
    return err, loc


def _names_as_written(err: Mapping[str, Any], loc: Loc, smap: SourceMap) -> Mapping[str, Any]:
    """A model check's message names the SI fields of the mapping it checks (`clock_hz must be strictly
    increasing`, a V-f table's): where the file wrote one in a human unit (`clock_mhz`), say that key."""
    if err.get("type") not in ("value_error", "assertion_error"):
        return err
    path: Loc = ()
    for seg in loc:
        if (*path, seg) not in smap.lines:
            break
        path = (*path, seg)
    written = {si_key(key)[0]: key for key in map(str, smap.keys_at(path)) if si_key(key)[1] != 1.0}
    if not written:
        return err
    pattern = r"\b(" + "|".join(map(re.escape, written)) + r")\b"
    return {**err, "msg": re.sub(pattern, lambda m: written[m.group(1)], str(err.get("msg", "")))}


def error_in_unit(err: Mapping[str, Any], key: str, factor: float) -> dict[str, Any]:
    """A pydantic error on an SI field said in the unit of `key`, the human-unit key that gave the value
    (`factor`: its conversion to SI); `dse.hardware.overrides` says `--set` errors with it too."""
    out = dict(err)
    value, unit = err.get("input"), unit_name(key) or ""
    bound = _BOUNDS.get(str(err.get("type")))
    limit = (err.get("ctx") or {}).get(bound[0]) if bound else None
    if bound and isinstance(value, int | float) and isinstance(limit, int | float):
        del out["input"]  # said in the message, in the unit (`_message` would add the SI value)
        out["msg"] = f"Input should be {bound[1]} {limit / factor:g} {unit} (got {value / factor:g} {unit})"
    elif "input" in err:
        out["input"] = _unscaled(value, factor)
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _unscaled(value: Any, factor: float) -> Any:
    """A value (or list of values) scaled by `normalize_unit_keys`, back in the unit it was written in."""
    if isinstance(value, list | tuple):
        return [_unscaled(v, factor) for v in value]
    return float(f"{value / factor:.12g}") if _is_number(value) else value  # 1e-3, not 1.0000000000000002e-3


def located_error(smap: SourceMap, loc: Sequence[str | int], message: str) -> ConfigError:
    """A ConfigError for a check made after validation, pointing at the line of `loc`."""
    field_name = ".".join(str(p) for p in smap.yaml_path(tuple(loc))) or "(top level)"
    return ConfigError(f"{smap.where(tuple(loc))}: {field_name}: {message}")

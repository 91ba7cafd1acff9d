"""Read a run directory into DataFrames and plain dicts for the report (no plotly here).

A run directory (`results/<study>/<run_id>/`, written by `dse.search`) holds `trials.parquet` (one row per
evaluated point: `point_id`, `seq`, `param.*`, `metric.*`, `feasible`, `reason`, `error`, `on_front`),
`points.jsonl` (the append-only log the parquet is built from), `summary.json`, `study.resolved.yaml`,
`env.json` and optionally `breakdowns.json`. A run that was killed may lack everything but the log, so
`load_run` prefers the parquet and falls back to `points.jsonl`, skipping a torn last line.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from dse.config.jsonio import loads_finite
from dse.config.yamlio import parse_yaml_value
from dse.errors import ConfigError
from dse.search.rundir import runs_hint, without_negative_metrics

logger = logging.getLogger(__name__)

TRIALS_FILE = "trials.parquet"
POINTS_FILE = "points.jsonl"
SUMMARY_FILE = "summary.json"
STUDY_FILE = "study.resolved.yaml"
ENV_FILE = "env.json"
BREAKDOWNS_FILE = "breakdowns.json"
REPORT_FILE = "report.html"

PARAM_PREFIX = "param."
METRIC_PREFIX = "metric."
Direction = Literal["minimize", "maximize"]
ParamKind = Literal["int", "float", "categorical", "constant"]


@dataclass(frozen=True, slots=True)
class Objective:
    """One objective: a trials column (`metric.<name>`) and its direction."""

    column: str
    direction: Direction = "minimize"


@dataclass(frozen=True, slots=True, kw_only=True)
class ParamInfo:
    """One design parameter as the report shows it.

    `categories` is set for non-numeric parameters (strings, booleans): the order used for integer codes
    on colour scales and parallel-coordinate axes.
    """

    column: str
    kind: ParamKind
    categories: tuple[Any, ...] | None = None
    constant_value: Any = None
    names: tuple[str, ...] = ()  # the study's names for this path where they differ (`gddr_bus`, `hbm_bus`)

    @property
    def path(self) -> str:
        """The parameter's path in the study (`gpu.num_sms`)."""
        return self.column.removeprefix(PARAM_PREFIX)

    @property
    def label(self) -> str:
        """The path, with the study's own names for it: `gpu.memory.bus_width_bits (gddr_bus, hbm_bus)`."""
        return f"{self.path} ({', '.join(self.names)})" if self.names else self.path

    @property
    def is_categorical(self) -> bool:
        """True when values are not numbers and are shown through integer codes."""
        return self.categories is not None


@dataclass(frozen=True, kw_only=True)
class RunData:
    """Everything the report reads from one run directory."""

    run_dir: Path
    trials: pd.DataFrame
    source: str
    summary: Mapping[str, Any] = field(default_factory=dict)
    env: Mapping[str, Any] = field(default_factory=dict)
    study_yaml: str | None = None
    study: Mapping[str, Any] | None = None  # study.resolved.yaml, parsed
    breakdowns: Mapping[str, Any] | None = None
    objectives: tuple[Objective, ...] = ()
    parameters: tuple[ParamInfo, ...] = ()

    @property
    def complete(self) -> bool:
        """True when the runner finished and wrote its summary."""
        return bool(self.summary)


def param_columns(df: pd.DataFrame) -> list[str]:
    """The `param.*` columns, in file order."""
    return [c for c in df.columns if c.startswith(PARAM_PREFIX)]


def metric_columns(df: pd.DataFrame) -> list[str]:
    """The `metric.*` columns, in file order."""
    return [c for c in df.columns if c.startswith(METRIC_PREFIX)]


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, Mapping):
        for key, sub in value.items():
            _flatten(f"{prefix}.{key}", sub, out)
    else:
        out[prefix] = value


def read_points_jsonl(path: Path) -> pd.DataFrame:
    """Flatten the append-only log into the trials.parquet layout (without `on_front`).

    Lines that do not parse (a run killed mid-write) are skipped with a warning; a point logged twice
    (a resumed run) keeps its last record.
    """
    rows: list[dict[str, Any]] = []
    bad = 0
    with path.open("rb") as fh:  # bytes: a line that is not UTF-8 is one damaged line, not the whole log
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec, nonfinite = loads_finite(line)
            except json.JSONDecodeError:
                bad += 1
                continue
            if not isinstance(rec, dict):
                bad += 1
                continue
            if nonfinite:  # not JSON and never written by dse: a hand edit; the value counts as missing
                logger.warning("%s:%d: NaN or Infinity read as null (missing)", path, lineno)
            row: dict[str, Any] = {
                "point_id": str(rec.get("point_id", len(rows))),
                "seq": rec.get("seq", len(rows)),
            }
            _flatten("param", rec.get("params") or {}, row)
            metrics = rec.get("metrics")
            metrics = (
                without_negative_metrics(metrics, f"{path}:{lineno}") if isinstance(metrics, dict) else {}
            )
            _flatten("metric", metrics, row)
            row["feasible"] = bool(rec.get("feasible", True))
            row["reason"] = rec.get("reason") or ""
            row["error"] = rec.get("error")
            rows.append(row)
    if bad:
        logger.warning("%s: skipped %d line(s) that do not parse", path, bad)
    df = pd.DataFrame(rows)
    if df.empty:
        return pd.DataFrame(columns=["point_id", "seq", "feasible", "reason", "error"])
    df = df.drop_duplicates("point_id", keep="last").reset_index(drop=True)
    for col in metric_columns(df):
        # a metric written as a string ("-Infinity") would coerce to inf: missing, as in the log itself
        df[col] = pd.to_numeric(df[col], errors="coerce").replace([math.inf, -math.inf], math.nan)
    return df


def _line_count(path: Path) -> int:
    """Lines in a file, a last one without its newline included: 20-70 ms for a 10,000-point log of 22 MB
    on a loaded 2-core machine, where parsing it takes ~2 s."""
    with path.open("rb") as fh:
        data = fh.read()
    return data.count(b"\n") + (bool(data) and not data.endswith(b"\n"))


def read_trials(run_dir: str | Path) -> tuple[pd.DataFrame, str]:
    """Return the run's trials (one row per point) and the file they came from.

    The table is read unless the log holds points it lacks: a run (a resumed one, say) that stopped before
    it rewrote the table. Content decides, not file times (a copy, `cp -r` or rsync without -t, may write
    the table before the log): the log is append-only and the table holds every point logged when it was
    written, so a log of no more lines than the table's rows has no point since.
    """
    run_dir = Path(run_dir)
    parquet, log = run_dir / TRIALS_FILE, run_dir / POINTS_FILE
    if parquet.is_file():
        try:
            df = pd.read_parquet(parquet).drop_duplicates("point_id", keep="last").reset_index(drop=True)
        except Exception as exc:  # a torn parquet: the log is the source of truth anyway
            logger.warning("%s unreadable (%s); reading %s", parquet, exc, POINTS_FILE)
        else:
            if not log.is_file() or _line_count(log) <= len(df):
                return df, TRIALS_FILE
            logged = read_points_jsonl(log)
            missing = len(set(logged["point_id"]) - set(df["point_id"].astype(str)))
            if not missing:
                return df, TRIALS_FILE
            logger.warning(
                "%s lacks %d point(s) of %s (the run stopped before writing it); reading the log",
                parquet, missing, log,
            )  # fmt: skip
            return logged, POINTS_FILE
    if log.is_file():
        return read_points_jsonl(log), POINTS_FILE
    raise ConfigError(
        f"{run_dir}: no {TRIALS_FILE} or {POINTS_FILE}; is this a run directory?{runs_hint(run_dir)}"
    )


def _read_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:  # bytes: loads_finite says non-UTF-8 text or hostile nesting as a decode error, not a traceback
        data, _ = loads_finite(path.read_bytes())
    except (OSError, json.JSONDecodeError) as exc:
        logger.warning("%s unreadable: %s", path, exc)
        return {}
    return data if isinstance(data, dict) else {}


def _metric_column(name: str, columns: Sequence[str]) -> str | None:
    """Match an objective's metric name (`energy_j`, `metric.energy_j`) to a trials column."""
    bare = name.removeprefix(METRIC_PREFIX)
    col = METRIC_PREFIX + bare
    if col in columns:
        return col
    tails = [c for c in columns if c.startswith(METRIC_PREFIX) and c.endswith("_" + bare)]
    return tails[0] if len(tails) == 1 else None


def _objectives_from(spec: Any) -> list[tuple[str, str]]:
    """(metric, direction) pairs from summary.json or study YAML spellings of `objectives`."""
    if isinstance(spec, Mapping):
        return [(str(k), str(v)) for k, v in spec.items()]
    pairs = []
    for item in spec or ():
        if isinstance(item, str):
            pairs.append((item, "minimize"))
        elif isinstance(item, Mapping):
            name = item.get("metric") or item.get("name")
            if name is not None:
                pairs.append((str(name), str(item.get("direction", "minimize"))))
    return pairs


def _direction(word: str) -> Direction:
    return "maximize" if word.lower().startswith("max") else "minimize"


def default_objectives(columns: Sequence[str]) -> tuple[Objective, ...]:
    """Latency and energy when the run says nothing (a killed run without summary or study file)."""
    metrics = [c for c in columns if c.startswith(METRIC_PREFIX)]
    picks = []
    for word, unit, preferred in (
        ("latency", "_s", "e2e_latency_s"),
        ("energy", "_j", "energy_per_output_token_j"),
    ):
        cands = [c for c in metrics if word in c and c.endswith(unit)]
        pref = [c for c in cands if c.endswith(preferred)]
        if cands:
            picks.append((pref or cands)[0])
    if len(picks) < 2:
        picks = metrics[:2]
    if len(picks) < 2:  # nothing was measured at all: name the usual pair so the page can say so
        picks = [METRIC_PREFIX + "e2e_latency_s", METRIC_PREFIX + "energy_per_output_token_j"]
    return tuple(Objective(c) for c in picks)


def resolve_objectives(
    columns: Sequence[str], summary: Mapping[str, Any], study: Mapping[str, Any] | None
) -> tuple[Objective, ...]:
    """The run's objectives as trials columns: summary.json, else the study file, else latency/energy."""
    for spec in (summary.get("objectives"), (study or {}).get("objectives")):
        found = []
        for name, word in _objectives_from(spec):
            col = _metric_column(name, columns)
            if col is None:  # no point produced this metric (all failed?): keep it, it is what was asked
                logger.warning("objective %r has no values in the trials", name)
                col = METRIC_PREFIX + name.removeprefix(METRIC_PREFIX)
            found.append(Objective(col, _direction(word)))
        if found:
            return tuple(found)
    return default_objectives(columns)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _specs_by_path(declared: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The declared parameters merged per path: several may set one path under disjoint `when`s
    (`hbm_bus`, `gddr_bus` on `gpu.memory.bus_width_bits`), and the column holds all of their values, so
    it keeps a kind only all of them share and their values in declaration order (the last one's alone
    made a column a constant when that one was `{value: x}`)."""
    grouped: dict[str, list[Mapping[str, Any]]] = {}
    for p in declared:
        if isinstance(p, Mapping):
            grouped.setdefault(str(p.get("path", "")), []).append(p)
    merged = {}
    for path, specs in grouped.items():
        kinds = {str(s.get("kind", "")) for s in specs}
        values = [v for s in specs for v in (s.get("values") or s.get("choices") or ())]
        names = [str(s["name"]) for s in specs if s.get("name") not in (None, path)]
        merged[path] = {
            "kind": kinds.pop() if len(kinds) == 1 else "",
            "values": list(dict.fromkeys(values)),
            "value": specs[0].get("value"),
            "names": tuple(dict.fromkeys(names)),
        }
    return merged


def infer_parameters(df: pd.DataFrame, declared: Sequence[Mapping[str, Any]] = ()) -> tuple[ParamInfo, ...]:
    """Describe every `param.*` column, using the runner's declared kinds and value lists when present."""
    by_path = _specs_by_path(declared)
    infos = []
    for col in param_columns(df):
        spec = by_path.get(col.removeprefix(PARAM_PREFIX), {})
        values = df[col].dropna()
        uniques = pd.unique(values)
        declared_kind = str(spec.get("kind", ""))
        names = tuple(spec.get("names", ()))
        if len(uniques) <= 1:  # by the data: constants under disjoint `when`s fill one column with several
            const = uniques[0] if len(uniques) else spec.get("value")
            infos.append(ParamInfo(column=col, kind="constant", constant_value=_plain(const), names=names))
            continue
        numeric = all(_is_number(_plain(v)) for v in uniques)
        if numeric:
            is_int = all(float(_plain(v)).is_integer() for v in uniques) and declared_kind != "float"
            infos.append(ParamInfo(column=col, kind="int" if is_int else "float", names=names))
            continue
        order = [v for v in spec.get("values") or () if v in set(uniques)]
        rest = sorted((v for v in uniques if v not in set(order)), key=str)
        categories = tuple(_plain(v) for v in order + rest)
        infos.append(ParamInfo(column=col, kind="categorical", categories=categories, names=names))
    return tuple(infos)


def _plain(value: Any) -> Any:
    """numpy scalars -> Python scalars (JSON- and YAML-friendly); NaN -> None."""
    if hasattr(value, "item"):
        value = value.item()
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def point_params(row: Mapping[str, Any], params: Sequence[ParamInfo]) -> dict[str, Any]:
    """The design point of one trials row as `{path: value}` with Python scalars (for breakdown_fn)."""
    out = {}
    for p in params:
        value = _plain(row.get(p.column))
        if p.kind == "int" and value is not None:
            value = int(value)
        out[p.path] = value
    return out


def load_run(run_dir: str | Path) -> RunData:
    """Read everything the report needs from one run directory."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ConfigError(f"{run_dir}: not a directory (expected results/<study>/<run_id>/)")
    trials, source = read_trials(run_dir)
    summary = _read_json(run_dir / SUMMARY_FILE)
    env = _read_json(run_dir / ENV_FILE)
    study_text = None
    study: dict[str, Any] | None = None
    if (run_dir / STUDY_FILE).is_file():
        study_text = (run_dir / STUDY_FILE).read_text(encoding="utf-8")
        try:
            loaded = parse_yaml_value(study_text, str(run_dir / STUDY_FILE))
            study = loaded if isinstance(loaded, dict) else None
        except ConfigError as exc:
            logger.warning("%s unreadable: %s", run_dir / STUDY_FILE, exc)
    breakdowns = _read_json(run_dir / BREAKDOWNS_FILE) or None
    return RunData(
        run_dir=run_dir,
        trials=trials,
        source=source,
        summary=summary,
        env=env,
        study_yaml=study_text,
        study=study,
        breakdowns=breakdowns,
        objectives=resolve_objectives(list(trials.columns), summary, study),
        parameters=infer_parameters(trials, summary.get("parameters") or ()),
    )

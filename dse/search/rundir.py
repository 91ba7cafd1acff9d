"""The run directory: results/<study>/<run-id>/, its append-only point log, and the files written at the end.

    study.resolved.yaml  the fully resolved study (space inlined, seed, executor): a valid study file
    env.json             python, dse version, package versions, host, cpus, evaluator
    points.jsonl         one JSON object per evaluated point, appended as chunks finish (the cache and the
                         resume point): {"point_id", "params", "metrics", "feasible", "reason", "error",
                         "t_eval_s", "seq"}
    trials.parquet       one row per point: point_id, seq, param.<path>..., metric.<name>..., feasible,
                         reason, error, on_front
    pareto.csv           the front's rows, same columns, sorted by the first objective
    summary.json         objectives, constraints, parameters, counts, front size, hypervolume and reference
                         point, stop reason, timing, sampler, executor, seed
    run.lock             the pid of the dse run writing the directory, which holds an flock on the file

run-id = UTC timestamp + "-" + an 8-hex hash of what decides the proposed points (`study_hash`), so a rerun
of the same study finds its run directory and continues it. env.json also records `model_fingerprint`, a hash
of the dse package's code and data files (coefficients, GPU catalog, model configs): logged points are only
reused by a run of the same model, so a refit or an upgrade never mixes old and new predictions silently.
It records `study_hash` too: a run whose study.resolved.yaml no longer hashes to it (an edited file) is not
continued, and a logged point that is no point of the study (a hand-edited log) is not reused.

One dse run at a time writes a run directory: it holds an exclusive flock on run.lock from choosing the
directory to writing its summary (the OS drops it when the process ends, even on SIGKILL); a second run of
the directory is refused. Readers (`dse report`) take no lock: every file but the log is replaced
atomically, and the log is append-only.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import platform
import re
import socket
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dse.config.jsonio import loads_finite, with_nulls
from dse.errors import ConfigError, SearchError
from dse.search.runlock import RunLock, lock_run_dir

if TYPE_CHECKING:  # the report reads logs through this module without loading the study schema
    from dse.search.objective import Evaluator
    from dse.search.space import SearchSpace
    from dse.search.study import StudyConfig

logger = logging.getLogger(__name__)

STUDY_FILE = "study.resolved.yaml"
ENV_FILE = "env.json"
POINTS_FILE = "points.jsonl"
TRIALS_FILE = "trials.parquet"
PARETO_FILE = "pareto.csv"
SUMMARY_FILE = "summary.json"
LOCK_FILE = "run.lock"
RECORD_KEYS = ("point_id", "params", "metrics", "feasible", "reason", "error", "t_eval_s", "seq")


@dataclass(frozen=True, slots=True, kw_only=True)
class PointRecord:
    """One evaluated design point, as one line of points.jsonl (keys: RECORD_KEYS).

    `params` maps space paths to values; `metrics` maps metric names to finite numbers (or text for the few
    that are not numbers); `reason` says why an evaluated point is infeasible ("" when feasible); `error` is
    the exception text of a point that failed; `seq` orders points in the run (a resumed run renumbers
    cached points in the order they are asked again).
    """

    point_id: str
    params: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, Any] = field(default_factory=dict)
    feasible: bool = False
    reason: str = ""
    error: str | None = None
    t_eval_s: float = 0.0
    seq: int = 0

    def to_json(self) -> dict[str, Any]:
        return {key: getattr(self, key) for key in RECORD_KEYS}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str) -> PointRecord:
        """A record from a parsed log line; SearchError naming `where` when it is not one."""
        if "point_id" not in data:
            raise SearchError(f"{where}: a line without point_id; is this a dse points log?")
        params, metrics = data.get("params") or {}, data.get("metrics") or {}
        error = data.get("error")
        if not isinstance(params, Mapping) or not isinstance(metrics, Mapping):
            raise SearchError(f"{where}: params and metrics must be objects; the log is damaged")
        try:
            return cls(
                point_id=str(data["point_id"]),
                params=dict(params),
                metrics=dict(metrics),
                feasible=bool(data.get("feasible", False)),
                reason=str(data.get("reason") or ""),
                error=None if error is None else str(error),
                t_eval_s=float(data.get("t_eval_s") or 0.0),
                seq=int(data.get("seq") or 0),
            )
        except (TypeError, ValueError) as exc:
            raise SearchError(f"{where}: a malformed record ({exc}); the log is damaged") from None


_PACKAGES = ("numpy", "pandas", "pyarrow", "pydantic", "pyyaml", "optuna", "ray", "rich")


def new_run_id(study_hash: str, now: datetime | None = None) -> str:
    """`20260101T120000Z-1a2b3c4d`."""
    now = now or datetime.now(UTC)
    return f"{now.strftime('%Y%m%dT%H%M%SZ')}-{study_hash}"


def runs_hint(folder: Path) -> str:
    """' (it holds N runs of a study: ...)' naming the newest where `folder` holds run directories (a user
    gave results/<study> for results/<study>/<run-id>), else ''."""
    try:
        runs = sorted(
            p.name for p in folder.iterdir() if (p / STUDY_FILE).is_file() or (p / POINTS_FILE).is_file()
        )
    except OSError:  # not a folder, or unreadable: the caller's message says enough
        return ""
    if not runs:
        return ""
    held = f"{len(runs)} runs" if len(runs) > 1 else "1 run"
    return f" (it holds {held} of a study: give one, e.g. the newest {folder / runs[-1]})"


def find_run_dir(out: Path, study_name: str, study_hash: str) -> Path | None:
    """The newest run directory of this study with the same hash (to continue it), if any.

    A run made by a different model (another `model_fingerprint`) is not continued: its points are kept
    where they are and the caller starts a new run.
    """
    root = out / study_name
    if not root.is_dir():
        return None
    runs = sorted(
        p
        for p in root.iterdir()
        if p.is_dir() and p.name.endswith(f"-{study_hash}") and (p / STUDY_FILE).is_file()
    )
    if not runs:
        return None
    newest = runs[-1]
    if run_fingerprint(newest) != model_fingerprint():
        logger.info("%s was made by another version of the model; starting a new run", newest)
        return None
    return newest


# File types of the package that decide a prediction: code, coefficients, catalogs, model configs.
_FINGERPRINT_SUFFIXES = (".py", ".json", ".yaml", ".yml", ".csv", ".parquet")


@cache
def model_fingerprint() -> str:
    """A 12-hex hash of the dse package's code and data files (computed once per process)."""
    import dse

    return tree_fingerprint(Path(dse.__file__).resolve().parent)


def tree_fingerprint(root: Path) -> str:
    """A 12-hex hash of the names and contents of the code and data files under `root`."""
    digest = hashlib.sha1()
    for path in sorted(root.rglob("*")):
        if path.suffix in _FINGERPRINT_SUFFIXES and "__pycache__" not in path.parts and path.is_file():
            digest.update(path.relative_to(root).as_posix().encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:12]


def _env_record(run_dir: Path) -> dict[str, Any]:
    """The run's env.json ({} when it is missing or damaged: what it would say is unknown)."""
    try:
        data = loads_finite((run_dir / ENV_FILE).read_bytes())[0]
    except (OSError, ValueError):  # loads_finite says deep nesting as a ValueError too
        return {}
    return data if isinstance(data, dict) else {}


def run_fingerprint(run_dir: Path) -> str | None:
    """The model fingerprint a run directory was made with (None: unknown, e.g. an older run)."""
    value = _env_record(run_dir).get("model_fingerprint")
    return value if isinstance(value, str) else None


_RUN_ID_HASH = re.compile(r"-([0-9a-f]{8})(?:\.\d+)?$")  # new_run_id's suffix, `.N` for a same-second twin


def check_study_unchanged(run_dir: Path, cfg: StudyConfig, evaluator: str) -> None:
    """Refuse a run whose study.resolved.yaml (loaded as `cfg`) no longer hashes to the study hash the run
    recorded (env.json, else its run id): the file was edited, and the logged points belong to the study
    as it was (another model or space would be mixed into one front)."""
    from dse.search.study import study_hash

    env = _env_record(run_dir)
    recorded, made_with = env.get("study_hash"), env.get("evaluator")
    if not isinstance(recorded, str):
        match = _RUN_ID_HASH.search(run_dir.name)
        recorded = match.group(1) if match else None
    if recorded is None:  # a renamed directory of a run older than the record: nothing to compare with
        return
    now = study_hash(cfg, made_with if isinstance(made_with, str) else evaluator)
    if now != recorded:
        raise ConfigError(
            f"{run_dir / STUDY_FILE}, or a GPU file or model config it names, was edited since the run was "
            f"made (study hash {now}, the run's {recorded}): its logged points are of the study as it was; "
            "restore it, or run the study as a new run (dse run STUDY.yaml --fresh, without --resume)"
        )


def env_info(evaluator_name: str, executor: str, study_hash: str) -> dict[str, Any]:
    """What ran the study: interpreter, versions, host, and the study hash of its study.resolved.yaml
    (`study_hash(cfg, evaluator_name)`)."""
    import dse

    packages: dict[str, str | None] = {}
    for name in _PACKAGES:
        try:
            packages[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            packages[name] = None
    return {
        "python": sys.version.split()[0],
        "implementation": platform.python_implementation(),
        "dse_version": dse.__version__,
        "model_fingerprint": model_fingerprint(),
        "study_hash": study_hash,
        "packages": packages,
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "evaluator": evaluator_name,
        "executor": executor,
        "argv": sys.argv,
        "started_utc": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def write_atomic(path: Path, text: str) -> None:
    """`path` replaced by `text` at once: a reader (`dse report` of a running run) sees either file whole."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_json(path: Path, data: Any) -> None:
    # strict JSON: a non-finite number (a hypervolume past the float range) is null, never `Infinity`
    write_atomic(path, json.dumps(with_nulls(data), indent=2, default=_json_default, allow_nan=False) + "\n")


def _json_default(value: Any) -> Any:
    if hasattr(value, "item"):
        return with_nulls(value.item())
    if isinstance(value, Path):
        return str(value)
    raise TypeError(f"not JSON serializable: {type(value).__name__}")


def without_negative_metrics(metrics: Mapping[str, Any], where: str) -> dict[str, Any]:
    """`metrics` with each negative number read as missing (None), with a warning naming `where`: every
    metric dse writes (times, energies, powers, rates, costs, counts) is >= 0, so a negative one is a hand
    edit that would otherwise win the front. Both readers of points.jsonl (resume, report) apply it."""
    negative = sorted(
        k for k, v in metrics.items() if isinstance(v, int | float) and not isinstance(v, bool) and v < 0
    )
    if negative:
        logger.warning("%s: negative %s read as null (missing)", where, ", ".join(negative))
    return {k: (None if k in negative else v) for k, v in metrics.items()}


_RECORD_KINDS = (("feasible", bool, "true or false"), ("reason", str, "text"), ("error", str, "text"))


def logged_point_problem(data: Mapping[str, Any], record: PointRecord, space: SearchSpace) -> str | None:
    """Why a log line (parsed as `data`, read as `record`) is no point a run of `space` logs, or None: a
    hand edit, or a line of another study. dse writes true/false feasibility, text reasons and errors,
    numbers or null as metrics, and params of the space under their own point_id."""
    from dse.search.space import point_id

    for key, kind, text in _RECORD_KINDS:
        if data.get(key) is not None and not isinstance(data[key], kind):
            return f"{key}: {data[key]!r} is not {text}"
    for name, value in record.metrics.items():
        if value is not None and (not isinstance(value, int | float) or isinstance(value, bool)):
            return f"metrics.{name}: {value!r} is not a number"
    if (problem := space.point_problem(record.params)) is not None:
        return f"params.{problem}"
    if record.point_id != point_id(record.params):
        return "point_id: not that of its params"
    return None


class PointLog:
    """points.jsonl: read what is there (skipping a torn last line), then append records chunk by chunk.

    Appends are flushed per chunk and fsynced per batch (`sync`): a killed run loses at most the chunks
    that had not been written, never a written one, and never leaves a line half-parsed for the reader.
    Given the study's `space`, a line that is no point of it (`logged_point_problem`) is skipped with a
    warning: the run evaluates that point again if it is proposed.
    """

    def __init__(self, path: Path, space: SearchSpace | None = None) -> None:
        self.path = path
        self.space = space
        self.records: dict[str, PointRecord] = {}
        if path.exists():
            self._read_existing()
        self._fh = path.open("a", encoding="utf-8")

    def _read_existing(self) -> None:
        data = self.path.read_bytes()
        good_end = 0
        pos = 0
        lineno = 0  # counted as read: counting the newlines before each line was quadratic in the log
        torn = False
        while pos < len(data):
            nl = data.find(b"\n", pos)
            if nl < 0:  # a last line without newline: torn by a kill mid-write
                torn = True
                break
            line = data[pos:nl]
            pos = nl + 1
            lineno += 1
            if not line.strip():
                good_end = pos
                continue
            try:
                rec, nonfinite = loads_finite(line)
            except json.JSONDecodeError:
                if pos >= len(data):
                    torn = True
                    break
                raise SearchError(f"{self.path}:{lineno}: not JSON; the log is damaged") from None
            if not isinstance(rec, dict):
                raise SearchError(f"{self.path}: a line that is not an object; is this a dse points log?")
            if nonfinite:  # not JSON and never written by dse: a hand edit; the value counts as missing
                logger.warning("%s:%d: NaN or Infinity read as null (missing)", self.path, lineno)
            record = PointRecord.from_json(rec, where := f"{self.path}:{lineno}")
            record = replace(record, metrics=without_negative_metrics(record.metrics, where))
            good_end = pos
            if self.space is not None and (why := logged_point_problem(rec, record, self.space)):
                logger.warning("%s: %s; no point of this study (a hand-edited run log?): skipped", where, why)
                continue
            self.records[record.point_id] = record
        if torn:
            logger.warning("%s: dropping a torn last line (the previous run was killed mid-write)", self.path)
            with self.path.open("r+b") as fh:
                fh.truncate(good_end)

    def append(self, records: Iterable[PointRecord]) -> None:
        lines = []
        for rec in records:
            self.records[rec.point_id] = rec
            lines.append(
                json.dumps(
                    with_nulls(rec.to_json()), separators=(",", ":"), default=_json_default, allow_nan=False
                )
            )
        if lines:
            self._fh.write("\n".join(lines) + "\n")
            self._fh.flush()

    def sync(self) -> None:
        self._fh.flush()
        os.fsync(self._fh.fileno())

    def close(self) -> None:
        if not self._fh.closed:
            self.sync()
            self._fh.close()


def evaluator_name(evaluator: Evaluator) -> str:
    return f"{getattr(evaluator, '__module__', '?')}.{getattr(evaluator, '__qualname__', repr(evaluator))}"


def prepare_run_dir(
    study: str | Path | StudyConfig | None,
    resume: str | Path | None,
    out: str | Path | None,
    evaluator: Evaluator,
    fresh: bool,
    overrides: dict[str, Any],
) -> tuple[StudyConfig, Path, RunLock]:
    """The study a run is made with (the overrides applied), its run directory and the directory's lock,
    held (the caller releases it when the run is done): the directory `resume` names, checked (a run
    directory, not in use, the same study, seed and model), the newest run of the same study under `out`
    (unless `fresh`), or a new one."""
    from dse.search.study import StudyConfig, load_study, study_hash

    if resume is not None:
        return _resumed_run_dir(study, Path(resume), out, evaluator, fresh, overrides)
    if study is None:
        raise ConfigError("give a study file or --resume RUN_DIR")
    name = evaluator_name(evaluator)
    cfg = study if isinstance(study, StudyConfig) else load_study(study, evaluator=evaluator).config
    cfg = cfg.with_overrides(**overrides)
    h = study_hash(cfg, name)
    root = Path(out) if out is not None else Path("results")
    existing = None if fresh else find_run_dir(root, cfg.name, h)
    if existing is not None:
        lock = lock_run_dir(existing / LOCK_FILE)
        try:
            logged_study = load_study(existing / STUDY_FILE, evaluator=evaluator).config
            check_study_unchanged(existing, logged_study, name)
            if cfg.search.n_points is not None:  # as a --resume's: its results would hold more than asked
                check_resumed_budget(existing, cfg.search.n_points, "or --fresh for a new run")
        except BaseException:
            lock.release()
            raise
        logger.info("continuing %s (same study and seed)", existing)
        return cfg, existing, lock
    for n in itertools.count(1):  # mkdir claims a name: two runs started in one second get two directories
        run_dir = root / cfg.name / (new_run_id(h) + (f".{n}" if n > 1 else ""))
        try:
            run_dir.mkdir(parents=True)
            break
        except FileExistsError:
            continue
        except OSError as exc:
            raise ConfigError(f"cannot write the run directory {run_dir}: {exc.strerror or exc}") from None
    return cfg, run_dir, lock_run_dir(run_dir / LOCK_FILE, created=True)


def _resumed_run_dir(
    study: str | Path | StudyConfig | None,
    run_dir: Path,
    out: str | Path | None,
    evaluator: Evaluator,
    fresh: bool,
    overrides: dict[str, Any],
) -> tuple[StudyConfig, Path, RunLock]:
    """`prepare_run_dir` for --resume: the run's own study, locked and checked before it is rewritten."""
    from dse.search.study import StudyConfig, load_study, study_hash

    name = evaluator_name(evaluator)
    if not (run_dir / STUDY_FILE).is_file():
        raise ConfigError(
            f"{run_dir}: not a run directory (no {STUDY_FILE}); expected results/<study>/<run-id>"
            + runs_hint(run_dir)
        )
    elsewhere = out is not None and Path(out).resolve() != run_dir.resolve().parent.parent
    if fresh or elsewhere:  # both place a new run; a resumed one stays where it is (<out>/<study>/<id>)
        flags = " and ".join(f for f, on in (("--fresh", fresh), (f"--out {out}", elsewhere)) if on)
        raise ConfigError(f"{flags}: for a new run; --resume continues {run_dir} where it is: drop one")
    lock = lock_run_dir(run_dir / LOCK_FILE)  # before the log is read: a running run may be appending to it
    try:
        if overrides.get("n_points") is not None:  # before anything of the run is rewritten
            check_resumed_budget(run_dir, overrides["n_points"])
        cfg = load_study(run_dir / STUDY_FILE, evaluator=evaluator).config
        seed = overrides.pop("seed", None)
        if seed is not None and seed != cfg.search.seed:
            raise ConfigError(
                f"--seed {seed} differs from the run's seed {cfg.search.seed}; a new seed is a new "
                "run (drop --resume)"
            )
        if study is not None:
            other = study if isinstance(study, StudyConfig) else load_study(study, evaluator=evaluator).config
            if study_hash(other, name) != study_hash(cfg, name):
                raise ConfigError(f"{run_dir} was made by a different study than {study}; drop one of them")
        made_by = run_fingerprint(run_dir)
        if made_by != model_fingerprint():
            # Continuing would mix two models' predictions in one front.
            raise ConfigError(
                f"{run_dir} was made by another version of the dse model (fingerprint "
                f"{made_by or 'unknown'}, now {model_fingerprint()}): its points cannot be reused; run the "
                "study again without --resume (a new run directory is made)"
            )
        check_study_unchanged(run_dir, cfg, name)
        return cfg.with_overrides(**overrides), run_dir, lock
    except BaseException:
        lock.release()
        raise


def check_resumed_budget(run_dir: Path, n_points: int, instead: str = "or leave it out") -> None:
    """A continued run's --n-points below the points it logged: refused, before anything is written (its
    results keep every logged point, and a summary of more points than its budget read as a defect)."""
    if not (run_dir / POINTS_FILE).is_file():
        return
    logged = PointLog(run_dir / POINTS_FILE)
    logged.close()
    if n_points < len(logged.records):
        raise ConfigError(
            f"--n-points {n_points}: the run {run_dir} has {len(logged.records):,} points logged; give at "
            f"least that many, {instead}"
        )


def trials_frame(
    records: Sequence[PointRecord], param_paths: Sequence[str], on_front: Mapping[str, bool]
) -> Any:
    """The trials table (pandas): one row per point, columns as documented at the top of this module."""
    import pandas as pd

    metric_names: dict[str, None] = {}
    for rec in records:
        for k in rec.metrics:
            metric_names.setdefault(k, None)
    extra_params: dict[str, None] = {}
    for rec in records:
        for k in rec.params:
            if k not in param_paths:
                extra_params.setdefault(k, None)
    paths = [*param_paths, *extra_params]
    rows = []
    for rec in sorted(records, key=lambda r: r.seq):
        row: dict[str, Any] = {"point_id": rec.point_id, "seq": rec.seq}
        row.update({f"param.{p}": rec.params.get(p) for p in paths})
        row.update({f"metric.{m}": _number(rec.metrics.get(m)) for m in metric_names})
        row.update(
            feasible=rec.feasible,
            reason=rec.reason,
            error=rec.error,
            on_front=bool(on_front.get(rec.point_id, False)),
        )
        rows.append(row)
    columns = [
        "point_id",
        "seq",
        *(f"param.{p}" for p in paths),
        *(f"metric.{m}" for m in metric_names),
        "feasible",
        "reason",
        "error",
        "on_front",
    ]
    df = pd.DataFrame(rows, columns=columns)
    for col in (c for c in df.columns if c.startswith("param.")):
        kinds = {type(v) for v in df[col] if v is not None}
        if len(kinds - {int, float}) and len(kinds) > 1:  # mixed strings and numbers: store as text
            df[col] = df[col].map(lambda v: None if v is None else str(v))
    df["error"] = df["error"].astype("object")
    return df


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    return None


def write_tables(run_dir: Path, df: Any, objective_metrics: Sequence[str]) -> None:
    """trials.parquet and pareto.csv (front rows sorted by the first objective)."""
    tmp = run_dir / (TRIALS_FILE + ".tmp")
    df.to_parquet(tmp, index=False)
    os.replace(tmp, run_dir / TRIALS_FILE)
    front = df[df["on_front"]]
    first = f"metric.{objective_metrics[0]}"
    if first in front.columns:
        front = front.sort_values([first, "seq"], kind="stable")
    write_atomic(run_dir / PARETO_FILE, front.to_csv(index=False))

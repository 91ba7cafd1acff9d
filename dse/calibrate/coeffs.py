"""Coefficient sets: the fitted latency corrections of one GPU architecture, with their provenance.

A `CoeffSet` wraps the `dse.perf.types.CoeffTable` the kernel model consumes (group -> `PhaseCoeffs`)
and records where it came from: architecture and GPU it was fitted on, data files with their sha256, the
fit method and hold-out split, the date, the `dse` version, and per-group fit statistics. The package
ships one set per architecture under `dse/perf/data/` (regenerate with `scripts/fit_default_coeffs.py`).

    coeffs = load_default_coeffs(load_gpu("h200-sxm"))   # hopper set, fitted on H100 SXM data
    save_coeffs(coeffs, "my.json"); load_coeffs("my.json")

JSON layout: {"schema", "name", "architecture", "gpu", "created", "dse_version", "sources": [{file,
sha256, rows}], "method", "notes", "fit_error": {family: mape}, "groups": {group: {lambda_pro,
lambda_main, lambda_epi, eps_s, math_derate, load_derate, num_samples, mape_train, provenance}}}.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from dse.errors import ConfigError
from dse.hardware.spec import GpuSpec
from dse.perf.types import CoeffTable, PhaseCoeffs

SCHEMA = "dse.coeffs/1"
_COEFF_FIELDS = ("lambda_pro", "lambda_main", "lambda_epi", "eps_s", "math_derate", "load_derate")
# Architecture -> shipped file. Other architectures get the neutral (uncorrected) set.
DEFAULT_FILES: dict[str, str] = {"hopper": "coeffs_hopper.json", "ampere": "coeffs_ampere.json"}


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupInfo:
    """How one group's coefficients were obtained."""

    num_samples: int = 0
    mape_train: float | None = None
    provenance: str = "fit"


@dataclass(frozen=True, slots=True, kw_only=True)
class CoeffSet:
    """A coefficient table plus provenance; pass it (or its `.table`) to the estimators."""

    name: str
    architecture: str
    table: CoeffTable
    gpu: str = ""
    created: str = ""
    dse_version: str = ""
    sources: tuple[dict[str, Any], ...] = ()
    method: str = ""
    notes: str = ""
    fit_error: dict[str, float] = field(default_factory=dict, hash=False)
    group_info: dict[str, GroupInfo] = field(default_factory=dict, hash=False)

    def lookup(self, group: str) -> PhaseCoeffs:
        return self.table.lookup(group)


def neutral_coeffs(architecture: str = "") -> CoeffSet:
    """The uncorrected analytical model (lambda = 1, eps = 0 for every group)."""
    return CoeffSet(
        name="neutral",
        architecture=architecture,
        table=CoeffTable(),
        notes="no fitted coefficients: uncorrected analytical model",
    )


def coeffs_to_dict(cs: CoeffSet) -> dict[str, Any]:
    groups = {}
    for name, c in sorted(cs.table.groups.items()):
        info = cs.group_info.get(name, GroupInfo())
        groups[name] = {f: getattr(c, f) for f in _COEFF_FIELDS} | {
            "num_samples": info.num_samples,
            "mape_train": info.mape_train,
            "provenance": info.provenance,
        }
    return {
        "schema": SCHEMA,
        "name": cs.name,
        "architecture": cs.architecture,
        "gpu": cs.gpu,
        "created": cs.created,
        "dse_version": cs.dse_version,
        "sources": list(cs.sources),
        "method": cs.method,
        "notes": cs.notes,
        "fit_error": dict(cs.fit_error),
        "groups": groups,
    }


def coeffs_from_dict(data: dict[str, Any], source: str = "") -> CoeffSet:
    """Parse the JSON layout of the module docstring; unknown group fields are errors."""
    where = f"{source}: " if source else ""
    if data.get("schema") != SCHEMA:
        raise ConfigError(
            f"{where}not a dse coefficient file (schema {data.get('schema')!r}, expected {SCHEMA})"
        )
    groups, infos = {}, {}
    for name, g in data.get("groups", {}).items():
        unknown = set(g) - set(_COEFF_FIELDS) - {"num_samples", "mape_train", "provenance"}
        if unknown:
            raise ConfigError(f"{where}group {name!r}: unknown fields {sorted(unknown)}")
        try:
            groups[name] = PhaseCoeffs(**{f: float(g[f]) for f in _COEFF_FIELDS if f in g})
        except (TypeError, ValueError) as exc:
            raise ConfigError(f"{where}group {name!r}: {exc}") from exc
        infos[name] = GroupInfo(
            num_samples=int(g.get("num_samples", 0)),
            mape_train=g.get("mape_train"),
            provenance=str(g.get("provenance", "fit")),
        )
    return CoeffSet(
        name=str(data.get("name", "")),
        architecture=str(data.get("architecture", "")),
        table=CoeffTable(groups=groups),
        gpu=str(data.get("gpu", "")),
        created=str(data.get("created", "")),
        dse_version=str(data.get("dse_version", "")),
        sources=tuple(data.get("sources", ())),
        method=str(data.get("method", "")),
        notes=str(data.get("notes", "")),
        fit_error={k: float(v) for k, v in data.get("fit_error", {}).items()},
        group_info=infos,
    )


def save_coeffs(cs: CoeffSet, path: str | Path) -> None:
    Path(path).write_text(json.dumps(coeffs_to_dict(cs), indent=1, sort_keys=False) + "\n")


def load_coeffs(path: str | Path) -> CoeffSet:
    p = Path(path)
    try:
        data = json.loads(p.read_text())
    except FileNotFoundError:
        raise ConfigError(f"coefficient file '{p}' does not exist") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{p}: not valid JSON: {exc}") from exc
    return coeffs_from_dict(data, str(p))


def load_default_coeffs(gpu: GpuSpec | str) -> CoeffSet:
    """The shipped set for the GPU's architecture (hopper: fitted on H100 SXM; ampere: on A100 SXM),
    or the neutral set for architectures without one."""
    return _default_coeffs((gpu if isinstance(gpu, str) else gpu.architecture).lower())


@cache
def _default_coeffs(arch: str) -> CoeffSet:
    # Cached: every serving prediction (thousands per search) asks for its GPU's set.
    name = DEFAULT_FILES.get(arch)
    if name is None:
        return neutral_coeffs(arch)
    res = resources.files("dse.perf").joinpath("data", name)
    if not res.is_file():
        return neutral_coeffs(arch)
    return coeffs_from_dict(json.loads(res.read_text()), f"dse/perf/data/{name}")

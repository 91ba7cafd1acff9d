"""`dse calibrate` and `dse validate samples`: registered on the shared apps of `dse.cli_common`."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from dse.cli_common import JsonOpt, app, console, friendly, print_json, validate_app
from dse.errors import DseError

SamplesArg = Annotated[
    list[Path], typer.Argument(help="Sample files (.parquet or .csv) written by `dse measure kernels`.")
]
FracOpt = Annotated[
    float | None, typer.Option("--holdout-frac", help="Share of each family's shapes held out (default 0.2).")
]
SeedOpt = Annotated[int | None, typer.Option("--seed", help="Seed of the hold-out split (default 0).")]
FamiliesOpt = Annotated[
    str | None,
    typer.Option(
        "--families",
        help="Comma-separated families to use (gemm, attention_flash, attention_decode, softmax, "
        "layernorm, rmsnorm, elementwise; default all).",
    ),
]


def _families(text: str | None) -> list[str] | None:
    return None if text is None else [f.strip() for f in text.split(",") if f.strip()]


def _frac(value: float | None) -> float | None:
    if value is not None and not 0.0 <= value < 1.0:
        raise DseError(f"--holdout-frac must be in [0, 1), got {value}")
    return value


def _pct(x: float) -> str:
    return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


@app.command("calibrate")
@friendly
def calibrate_cmd(
    samples: SamplesArg,
    gpu: Annotated[str, typer.Option("--gpu", help="Catalog GPU the samples were measured on (or a YAML).")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Coefficient file to write (JSON).")],
    holdout_frac: FracOpt = None,
    seed: SeedOpt = None,
    families: FamiliesOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Fit latency (and, where power was measured, energy) coefficients from sample files."""
    from dse.calibrate.samples_fit import HOLDOUT_FRAC, SEED, calibrate

    cal = calibrate(
        samples,
        gpu,
        holdout_frac=_frac(holdout_frac) if holdout_frac is not None else HOLDOUT_FRAC,
        seed=seed if seed is not None else SEED,
        families=_families(families),
        progress=None if as_json else console.print,
    )
    path = cal.save(out)
    if as_json:
        print_json({"path": str(path), "calibration": cal.info, "fit_error": cal.coeffs.fit_error})
        return
    table = Table(title=f"calibrated {cal.coeffs.gpu}: hold-out latency MAPE (kernels >= 10 us)")
    for col in ("family", "n_test", "calibrated", "shipped default"):
        table.add_column(col, justify="left" if col == "family" else "right")
    for family, h in cal.info["holdout"].items():
        if family == "power":
            continue
        table.add_row(family, str(h["n"]), _pct(h["latency_mape"]), _pct(h["latency_mape_default"]))
    console.print(table)
    if "power" in cal.info["holdout"]:
        p = cal.info["holdout"]["power"]
        what = "calibrated" if p["fitted"] else "shipped energy coefficients (none fitted)"
        console.print(
            f"power: {p['n']} hold-out rows, MAPE {_pct(p['power_mape'])} ({what}), "
            f"shipped default {_pct(p['power_mape_default'])}"
        )
    if cal.power is None:
        console.print("power: no measured power in the training rows; no energy coefficients fitted")
    console.print(f"coefficients written to {path}")


@validate_app.command("samples")
@friendly
def validate_samples_cmd(
    samples: SamplesArg,
    coeffs: Annotated[
        Path | None,
        typer.Option("--coeffs", help="Coefficient file from `dse calibrate` (default: fit here)."),
    ] = None,
    gpu: Annotated[
        str | None, typer.Option("--gpu", help="Catalog GPU (default: the one the samples name).")
    ] = None,
    holdout_frac: FracOpt = None,
    seed: SeedOpt = None,
    families: FamiliesOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Latency, power and energy MAPE per family and clock on the hold-out split of sample files."""
    from dse.calibrate.samples_validate import VARIANTS, validate_samples

    rows, header = validate_samples(
        samples,
        coeffs_path=coeffs,
        gpu=gpu,
        holdout_frac=_frac(holdout_frac),
        seed=seed,
        families=_families(families),
    )
    if as_json:
        print_json({"header": header, "rows": rows})
        return
    console.print(
        f"{header['gpu']}: {header['split']}; fitted = {header['fitted']} (on {header['fitted_gpu']}), "
        f"default = {header['default']}"
    )
    quantities = ["latency"] + [q for q in ("power", "energy") if any(r["n_power"] for r in rows)]
    for q in quantities:
        table = Table(title=f"{q} MAPE" + (" (kernels >= 10 us)" if q == "latency" else ""))
        for col in ("family", "clock", "n", *VARIANTS):
            table.add_column(col, justify="left" if col in ("family", "clock") else "right")
        for r in rows:
            n = r["n"] if q == "latency" else r["n_power"]
            if n:
                table.add_row(r["family"], r["clock"], str(n), *(_pct(r[f"{q}_{v}"]) for v in VARIANTS))
        console.print(table)

"""`dse calibrate`: fit coefficient files to measured samples (no GPU needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from dse.cli.common import (
    FamiliesOpt,
    FracOpt,
    JsonOpt,
    SamplesArg,
    SeedOpt,
    check_holdout_frac,
    check_output_file,
    check_split_seed,
    console,
    esc,
    friendly,
    parse_families,
    pct,
    print_json,
)
from dse.config.jsonio import with_nulls
from dse.errors import DseError


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
    from dse.calibrate.fit.sample_set import HOLDOUT_FRAC, SEED
    from dse.calibrate.fit.samples import calibrate

    frac, split_seed = check_holdout_frac(holdout_frac), check_split_seed(seed)
    check_output_file(out, "--out", "coeffs.json", samples)  # before the fit, not after it
    cal = calibrate(
        samples,
        gpu,
        holdout_frac=HOLDOUT_FRAC if frac is None else frac,
        seed=SEED if split_seed is None else split_seed,
        families=parse_families(families),
        progress=None if as_json else lambda line: console.print(esc(line)),
    )
    try:
        path = cal.save(out)
    except OSError as exc:  # a disk that filled or went read-only during the fit
        raise DseError(f"--out {out}: cannot write ({exc.strerror or exc})") from None
    if as_json:
        print_json(
            with_nulls({"path": str(path), "calibration": cal.info, "fit_error": cal.coeffs.fit_error})
        )
        return
    table = Table(title=esc(f"calibrated {cal.coeffs.gpu}: hold-out latency MAPE (kernels >= 10 us)"))
    for col in ("family", "n_test", "calibrated", "shipped default"):
        table.add_column(col, justify="left" if col == "family" else "right")
    for family, h in cal.info["holdout"].items():
        if family == "power":
            continue
        table.add_row(family, str(h["n"]), pct(h["latency_mape"]), pct(h["latency_mape_default"]))
    console.print(table)
    if "power" in cal.info["holdout"]:
        p = cal.info["holdout"]["power"]
        what = "calibrated" if p["fitted"] else "shipped energy coefficients (none fitted)"
        console.print(
            f"power: {p['n']} hold-out rows, MAPE {pct(p['power_mape'])} ({what}), "
            f"shipped default {pct(p['power_mape_default'])}"
        )
    if cal.power is None:
        console.print("power: no measured power in the training rows; no energy coefficients fitted")
    console.print(f"coefficients written to {esc(path)}")

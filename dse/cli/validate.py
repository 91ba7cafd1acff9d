"""`dse validate kernels|power|serving|samples|collectives`: model error against measured data (MAPE)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from dse.cli.common import (
    FamiliesOpt,
    FracOpt,
    JsonOpt,
    SamplesArg,
    SeedOpt,
    check_holdout_frac,
    check_split_seed,
    console,
    esc,
    friendly,
    parse_families,
    pct,
    print_json,
)
from dse.config.jsonio import with_nulls


def _frame_table(
    rows: list[dict[str, Any]], title: str, percent: tuple[str, ...], columns: tuple[str, ...] | None = None
) -> Table:
    table = Table(title=title)
    keys = list(columns or (rows[0] if rows else []))
    for key in keys:
        numeric = key in percent or key.startswith("n")
        table.add_column(key, justify="right" if numeric else "left", overflow="fold")

    def cell(key: str, value: Any) -> str:
        if key not in percent:
            return str(value)
        return "-" if value is None or value != value else f"{100 * value:.1f}%"  # NaN: not measured

    for row in rows:
        table.add_row(*(cell(k, row[k]) for k in keys))
    return table


@friendly
def validate_kernels_cmd(as_json: JsonOpt = False) -> None:
    """Kernel latency MAPE per family and GPU on the held-out 20% (seed 0), fitted vs analytical."""
    from dse.calibrate.validate.kernels import validate_kernels

    rows = validate_kernels()
    if as_json:
        print_json(with_nulls({"rows": rows}))
        return
    columns = ("family", "gpu", "dtype", "split", "n_test", "mape_fitted", "mape_analytical")
    title = "kernel latency MAPE (kernels >= 10 us)"
    console.print(_frame_table(rows, title, ("mape_fitted", "mape_analytical"), columns))


@friendly
def validate_power_cmd(as_json: JsonOpt = False) -> None:
    """Power, latency and energy MAPE: A100 DVFS sweep and 900 MHz (held out), A10 forecast, H200 kernels,
    our H100 whole models and kernels."""
    from dse.calibrate.validate.power import validate_power

    rows = [r.to_dict() for r in validate_power()]
    if as_json:
        print_json(with_nulls({"rows": rows}))
        return
    console.print(_frame_table(rows, "power model MAPE", ("power_mape", "latency_mape", "energy_mape")))


@friendly
def validate_serving_cmd(
    as_json: JsonOpt = False,
    all_rows: Annotated[
        bool,
        typer.Option(
            "--all-rows",
            help="Score all 1,225 multi-GPU/MoE silicon rows (~11 min on 2 cores), not an even sample of 60.",
        ),
    ] = False,
) -> None:
    """TTFT, TPOT, power and J/token MAPE against ML.ENERGY (H100; MoE, gemma, gpt-oss and B200 rows as a
    transfer test) and aiconfigurator silicon rows (TP1, and multi-GPU / MoE per model, engine and layout)."""
    from dse.calibrate.validate.serving import validate_serving
    from dse.calibrate.validate.silicon_multigpu import MULTIGPU_SAMPLE_ROWS

    rows = [dict(r) for r in validate_serving(multigpu_rows=None if all_rows else MULTIGPU_SAMPLE_ROWS)]
    if as_json:
        print_json(with_nulls({"rows": rows}))
        return
    columns = ("source", "metric", "subset", "group", "n", "mape", "bias")
    console.print(_frame_table(rows, "serving MAPE (bias: signed mean error)", ("mape", "bias"), columns))


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
    from dse.calibrate.validate.samples import VARIANTS, validate_samples

    rows, header = validate_samples(
        samples,
        coeffs_path=coeffs,
        gpu=gpu,
        holdout_frac=check_holdout_frac(holdout_frac),
        seed=check_split_seed(seed),
        families=parse_families(families),
    )
    if as_json:
        print_json(with_nulls({"header": header, "rows": rows}))
        return
    console.print(
        esc(
            f"{header['gpu']}: {header['split']}; fitted = {header['fitted']} (on {header['fitted_gpu']}), "
            f"default = {header['default']}"
        )
    )
    quantities = ["latency"] + [q for q in ("power", "energy") if any(r["n_power"] for r in rows)]
    for q in quantities:
        table = Table(title=f"{q} MAPE" + (" (kernels >= 10 us)" if q == "latency" else ""))
        for col in ("family", "clock", "n", *VARIANTS):
            table.add_column(col, justify="left" if col in ("family", "clock") else "right")
        for r in rows:
            n = r["n"] if q == "latency" else r["n_power"]
            if n:
                table.add_row(r["family"], r["clock"], str(n), *(pct(r[f"{q}_{v}"]) for v in VARIANTS))
        console.print(table)


@friendly
def validate_collectives_cmd(as_json: JsonOpt = False) -> None:
    """Collective-communication MAPE per table, GPU and collective: in-sample and fitted on H100 only."""
    from dse.calibrate.validate.collectives import validate_collectives

    rows = validate_collectives()
    if as_json:
        print_json(with_nulls({"rows": rows}))
        return
    summary = [{**r, "mape": r["mape_pct"] / 100} for r in rows if r["num_gpus"] == "all"]
    columns = ("fit", "table", "gpu", "algorithm", "collective", "n", "mape")
    title = "collective latency MAPE (all GPU counts; --json for each count)"
    console.print(_frame_table(summary, title, ("mape",), columns))


@friendly
def validate_transfer_cmd(
    as_json: JsonOpt = False,
    fast: Annotated[
        bool, typer.Option("--fast", help="Skip the kernel-table and serving rows (the slow ones).")
    ] = False,
) -> None:
    """Transfer MAPE: fit on some GPUs / generations, predict the others, beside the in-sample figure."""
    from dse.calibrate.validate.transfer import validate_transfer

    rows = validate_transfer(serving=not fast, kernels=not fast)
    if as_json:
        print_json(with_nulls(rows))
        return
    table = Table(title="transfer MAPE (in-sample: the same data predicted by the set fitted on it)")
    for col in ("fit on", "predicted", "metric", "n", "transfer", "in-sample"):
        table.add_column(col, justify="right" if col in ("n", "transfer", "in-sample") else "left")
    for r in rows:
        ins = r["in_sample_pct"]
        table.add_row(
            r["fit_on"],
            r["predicted"],
            r["metric"],
            str(r["n"]),
            f"{r['mape_pct']:.1f}%",
            "-" if ins is None or ins != ins else f"{ins:.1f}%",
        )
    console.print(table)

"""`dse measure kernels` and `dse measure model`: the NVML harness on a real GPU (or --dry-run)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from dse.cli.common import BatchOpt, SeqOpt, console, esc, friendly
from dse.errors import DseError


def _clock_list(text: str | None) -> list[float] | None:
    if text is None:
        return None
    try:
        clocks = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        clocks = []
    if not clocks:  # ",," read as no list at all measured at the default clock without a word
        raise DseError(f"--clocks-mhz '{text}': expected a comma-separated list of MHz, e.g. 1410,1980")
    return clocks


NoLockOpt = Annotated[bool, typer.Option("--no-lock", help="Do not lock clocks; observe and record them.")]


DryRunOpt = Annotated[bool, typer.Option("--dry-run", help="No GPU: replay recorded or synthetic samples.")]


@friendly
def measure_kernels_cmd(
    out: Annotated[Path, typer.Option("--out", help="Samples file to write (.parquet or .csv).")],
    suite: Annotated[
        str, typer.Option("--suite", help="gemm, attention, softmax, norm, elementwise, all, smoke.")
    ] = "all",
    clocks_mhz: Annotated[
        str | None, typer.Option("--clocks-mhz", help="Clocks to lock, e.g. 1410,1980.")
    ] = None,
    no_lock: NoLockOpt = False,
    dry_run: DryRunOpt = False,
    replay: Annotated[Path | None, typer.Option("--replay", help="Recorded samples for --dry-run.")] = None,
) -> None:
    """Measure a kernel suite (latency, power, energy per kernel) and write calibration samples."""
    from dse.measure.cli_commands import measure_kernels_command

    if replay is not None and not dry_run:  # a real GPU measures; the recorded samples stand in for one
        raise DseError("--replay needs --dry-run (it replays recorded samples instead of a GPU)")
    path = measure_kernels_command(suite, _clock_list(clocks_mhz), out, no_lock, dry_run, replay=replay)
    console.print(f"samples written to {esc(path)}")


@friendly
def measure_model_cmd(
    model: Annotated[str, typer.Option("--model", help="Model name (see `dse models`) or config.json path.")],
    out: Annotated[Path, typer.Option("--out", help="Directory to create for the run's files.")],
    batch: BatchOpt = 1,
    seq_len: SeqOpt = 1024,
    no_lock: NoLockOpt = False,
    dry_run: DryRunOpt = False,
) -> None:
    """Measure a whole forward pass (random weights) with a per-operator energy breakdown."""
    from dse.measure.cli_commands import measure_model_command

    path = measure_model_command(model, batch, seq_len, out, no_lock, dry_run=dry_run)
    console.print(f"model run written to {esc(path)}")

"""The `dse` command: a thin typer skin over the library (each command loads, calls, prints).

Errors the user can fix (`DseError`) print one line on stderr and exit with code 2, never a traceback.
Commands live in one module per group and are registered here, explicitly, in the order `dse --help`
lists them:

    hardware   gpus, models, demo, gpu show, workload show
    predict    predict
    whatif     whatif
    calibrate  calibrate
    runs       run, report, serve
    bench      bench
    validate   validate kernels|power|serving|samples|area|collectives|training
    cost       cost facts
    measure    measure kernels|model
"""

from __future__ import annotations

import logging
import sys

import typer

from dse.cli import (
    bench,
    calibrate,
    cost,
    hardware,
    measure,
    predict,
    runs,
    sweep,
    training,
    validate,
    whatif,
)

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Design-space exploration of the energy and latency of AI workloads on GPUs.",
)
gpu_app = typer.Typer(no_args_is_help=True, help="Inspect catalog GPUs and derived what-if GPUs.")
workload_app = typer.Typer(no_args_is_help=True, help="Inspect workload graphs (operators, FLOPs, bytes).")
validate_app = typer.Typer(no_args_is_help=True, help="Model error against measured data (MAPE tables).")
cost_app = typer.Typer(no_args_is_help=True, help="The cost and carbon constants (dated, ranged, sourced).")
measure_app = typer.Typer(
    no_args_is_help=True, help="Measure kernels or whole models on a real NVIDIA GPU (NVML)."
)


class _WarningLine(logging.StreamHandler):  # type: ignore[type-arg,unused-ignore]
    """The package's warnings (a damaged run log, a value read as missing) as `warning: ...` on stderr."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.setLevel(logging.WARNING)
        self.setFormatter(logging.Formatter("warning: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        # the stderr of this invocation (a test runner swaps it; setStream would flush a closed old one)
        self.stream = sys.stderr
        super().emit(record)


@app.callback()
def _show_warnings() -> None:
    """Design-space exploration of the energy and latency of AI workloads on GPUs."""
    log = logging.getLogger("dse")
    if not any(isinstance(h, _WarningLine) for h in log.handlers):
        log.addHandler(_WarningLine())
    if log.level == logging.NOTSET or log.level > logging.WARNING:
        log.setLevel(logging.WARNING)


app.command("gpus")(hardware.gpus_cmd)
app.command("models")(hardware.models_cmd)
app.command("predict")(predict.predict_cmd)
app.command("whatif")(whatif.whatif_cmd)
app.command("demo")(hardware.demo_cmd)
app.command("calibrate")(calibrate.calibrate_cmd)
app.command("run")(runs.run_cmd)
app.command("report")(runs.report_cmd)
app.command("serve")(runs.serve_cmd)
app.command("bench")(bench.bench_cmd)
app.command("sweep")(sweep.sweep_cmd)
app.command("compare")(sweep.compare_cmd)

gpu_app.command("show")(hardware.gpu_show_cmd)
gpu_app.command("fields")(hardware.gpu_fields_cmd)
workload_app.command("show")(hardware.workload_show_cmd)
validate_app.command("kernels")(validate.validate_kernels_cmd)
validate_app.command("power")(validate.validate_power_cmd)
validate_app.command("serving")(validate.validate_serving_cmd)
validate_app.command("samples")(validate.validate_samples_cmd)
validate_app.command("transfer")(validate.validate_transfer_cmd)
validate_app.command("collectives")(validate.validate_collectives_cmd)
validate_app.command("area")(cost.validate_area_cmd)
validate_app.command("training")(training.validate_training_cmd)
cost_app.command("facts")(cost.facts_cmd)
measure_app.command("kernels")(measure.measure_kernels_cmd)
measure_app.command("model")(measure.measure_model_cmd)

app.add_typer(gpu_app, name="gpu")
app.add_typer(workload_app, name="workload")
app.add_typer(validate_app, name="validate")
app.add_typer(cost_app, name="cost")
app.add_typer(measure_app, name="measure")


def main() -> None:  # pragma: no cover - console-script convenience
    """Run the `dse` command line."""
    app()


__all__ = ["app", "main"]

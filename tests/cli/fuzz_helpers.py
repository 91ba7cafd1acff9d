"""What the fuzz-round test modules share: the CLI runner, a serving workload's flags, the refusal check
(exit code 2, no traceback, the needles in the message) and a sample file a user edits."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from dse.calibrate.data.samples import KernelSample, write_samples
from dse.cli import app

runner = CliRunner()
SERVE = ["--model", "llama-3.1-8b", "--input-tokens", "128", "--output-tokens", "16"]


def refused(args: list[str], *needles: str) -> str:
    """The command's output, after checking it refused its input with exit code 2 and one clear message."""
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and "internal error" not in result.output, result.output
    for needle in needles:
        assert needle in result.output, result.output
    return result.output


def gemm_samples(tmp_path: Path, name: str = "s.csv", **fields: object) -> Path:
    """Three GEMM samples written as a CSV, the first row's `fields` edited in it as a user would."""
    sample = KernelSample(gpu="h100-sxm", kind="gemm", name="g", dtype="bf16", m=1024, n=1024, k=1024,
                          latency_s=1e-4, avg_power_w=500.0, energy_j=0.05, power_limit_w=700.0)  # fmt: skip
    path = write_samples(tmp_path / name, [sample] * 3)
    if fields:  # edit the written CSV as a user would
        lines = path.read_text().splitlines()
        header = lines[0].split(",")
        rows = [line.split(",") for line in lines[1:]]
        for key, value in fields.items():
            rows[0][header.index(key)] = str(value)
        path.write_text("\n".join([lines[0], *(",".join(r) for r in rows)]) + "\n")
    return path

"""`dse calibrate` and `dse validate samples` through the CLI: a round trip and every bad input."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from dse.calibrate.data.samples import write_samples
from dse.calibrate.fit.sample_set import file_sha256
from dse.calibrate.validate.samples import AIC_MIN_POWER_LATENCY_S, samples_from_aiconfigurator
from dse.cli import app
from tests.shared_data import needs_shared_data

runner = CliRunner()


@pytest.fixture(scope="module")
def h200_gemm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """300 H200 bf16 GEMM rows converted from shared/data (the long ones carry measured power)."""
    samples = samples_from_aiconfigurator("h200_sxm", "gemm", dtype="bf16")
    rng = random.Random(0)
    long = [s for s in samples if s.latency_s >= AIC_MIN_POWER_LATENCY_S]
    short = [s for s in samples if s.latency_s < AIC_MIN_POWER_LATENCY_S]
    chosen = rng.sample(long, 150) + rng.sample(short, 150)
    return write_samples(tmp_path_factory.mktemp("cli") / "h200_gemm.parquet", chosen)


def one_line_error(args: list[str], *needles: str) -> str:
    result = runner.invoke(app, [str(a) for a in args])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    text = " ".join(result.output.split())  # rich may wrap the line
    for needle in needles:
        assert needle in text, result.output
    return text


@needs_shared_data
def test_calibrate_then_validate(h200_gemm: Path, tmp_path: Path) -> None:
    out = tmp_path / "coeffs.json"
    result = runner.invoke(app, ["calibrate", str(h200_gemm), "--gpu", "h200-sxm", "-o", str(out), "--json"])
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert summary["calibration"]["rows"]["train"] + summary["calibration"]["rows"]["test"] == 300
    data = json.loads(out.read_text())
    assert data["schema"] == "dse.coeffs/1" and data["gpu"] == "h200-sxm"
    assert data["power"]["architecture"] == "hopper"  # the long kernels had power
    assert data["sources"][0]["sha256"] == file_sha256(h200_gemm)

    result = runner.invoke(app, ["validate", "samples", str(h200_gemm), "--coeffs", str(out), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["header"]["gpu"] == "h200-sxm"  # read from the samples
    (row,) = report["rows"]
    assert row["family"] == "gemm" and row["clock"] == "default"
    assert row["n"] > 0 and row["n_power"] > 0
    # Calibrated on H200 itself, it should not lose to the H100-fitted shipped set on H200 kernels by much.
    assert row["latency_fitted"] < row["latency_default"] * 1.2 + 0.01
    assert row["latency_fitted"] < row["latency_uncorrected"]

    table = runner.invoke(app, ["validate", "samples", str(h200_gemm), "--coeffs", str(out)])
    assert table.exit_code == 0, table.output
    for title in ("latency MAPE", "power MAPE", "energy MAPE", "uncorrected"):
        assert title in table.output

    # Files the fit never saw are scored on all their rows; a mix of fitted and new files would redraw the
    # split (training rows scored as held out), so it is refused.
    seen = set(pd.read_parquet(h200_gemm)["name"])
    rows = samples_from_aiconfigurator("h200_sxm", "gemm", dtype="bf16")
    fresh = write_samples(tmp_path / "fresh.parquet", [r for r in rows if r.name not in seen][:60])
    unseen = runner.invoke(app, ["validate", "samples", str(fresh), "--coeffs", str(out), "--json"])
    assert unseen.exit_code == 0, unseen.output
    assert json.loads(unseen.stdout)["header"]["split"].startswith("all rows")
    one_line_error(
        ["validate", "samples", h200_gemm, fresh, "--coeffs", out],
        "was fitted on",
        "h200_gemm.parquet",
        "not a mix",
    )


def test_missing_file(tmp_path: Path) -> None:
    one_line_error(
        ["calibrate", tmp_path / "nope.parquet", "--gpu", "h100-sxm", "-o", tmp_path / "c.json"],
        "nope.parquet",
        "no such samples file",
    )


def test_a_directory_given_as_samples_is_named_so(tmp_path: Path) -> None:
    # it exists: "no such samples file" sent the user looking for a typo in the path
    for command in (
        ["calibrate", tmp_path, "--gpu", "h100-sxm", "-o", tmp_path / "c.json"],
        ["validate", "samples", tmp_path],
    ):
        one_line_error(command, str(tmp_path), "not a file (a directory or a pipe)")


def test_not_a_samples_parquet(tmp_path: Path) -> None:
    junk = tmp_path / "junk.parquet"
    junk.write_bytes(b"this is not parquet")
    one_line_error(
        ["calibrate", junk, "--gpu", "h100-sxm", "-o", tmp_path / "c.json"],
        "junk.parquet",
        "not a samples file",
    )
    other = tmp_path / "other.parquet"
    pd.DataFrame({"a": [1, 2]}).to_parquet(other)
    one_line_error(["validate", "samples", other, "--gpu", "h100-sxm"], "other.parquet", "missing column")
    text = tmp_path / "samples.txt"
    text.write_text("gpu,kind\n")
    one_line_error(["validate", "samples", text], "samples.txt", ".parquet or .csv")


@needs_shared_data
def test_unknown_gpu(h200_gemm: Path, tmp_path: Path) -> None:
    one_line_error(
        ["calibrate", h200_gemm, "--gpu", "h900", "-o", tmp_path / "c.json"], "unknown GPU 'h900'", "h100-sxm"
    )


@needs_shared_data
def test_samples_of_another_gpu(h200_gemm: Path, tmp_path: Path) -> None:
    one_line_error(
        ["calibrate", h200_gemm, "--gpu", "h100-sxm", "-o", tmp_path / "c.json"],
        "h200_gemm.parquet",
        "'h200-sxm'",
        "not of --gpu h100-sxm",
    )
    one_line_error(["validate", "samples", h200_gemm, "--gpu", "a100-sxm-80gb"], "not of --gpu a100-sxm-80gb")


@needs_shared_data
def test_too_few_rows_for_a_family(tmp_path: Path) -> None:
    few = write_samples(
        tmp_path / "few.parquet", samples_from_aiconfigurator("h100_sxm", "gemm", dtype="bf16")[-6:]
    )
    one_line_error(
        ["calibrate", few, "--gpu", "h100-sxm", "-o", tmp_path / "c.json"], "family 'gemm'", "at least 8"
    )
    assert not (tmp_path / "c.json").exists()


@needs_shared_data
def test_bad_options(h200_gemm: Path, tmp_path: Path) -> None:
    one_line_error(
        ["calibrate", h200_gemm, "--gpu", "h200-sxm", "-o", tmp_path / "c.json", "--families", "conv"],
        "--families",
        "unknown conv",
        "gemm",
    )
    one_line_error(
        ["calibrate", h200_gemm, "--gpu", "h200-sxm", "-o", tmp_path / "c.json", "--holdout-frac", "1.5"],
        "--holdout-frac",
    )
    one_line_error(
        ["validate", "samples", h200_gemm, "--coeffs", tmp_path / "none.json"], "none.json", "does not exist"
    )
    bad = tmp_path / "bad.json"
    bad.write_text("{}")
    one_line_error(["validate", "samples", h200_gemm, "--coeffs", bad], "not a dse coefficient file")


def _as_measured(path: Path) -> None:
    """A dry run's file with its rows relabelled as measured: the pipeline's file format without a GPU
    (calibrate refuses rows marked as made up)."""
    frame = pd.read_parquet(path) if path.suffix == ".parquet" else pd.read_csv(path)
    frame = frame.assign(source="test: a dry run relabelled", energy_method="counter")
    frame.to_parquet(path, index=False) if path.suffix == ".parquet" else frame.to_csv(path, index=False)


def test_measure_dry_run_then_calibrate_and_validate(tmp_path: Path) -> None:
    """The whole chain on the files `dse measure kernels` writes (a dry run: no GPU, roofline numbers,
    relabelled as measured)."""
    samples = tmp_path / "dry.parquet"
    measured = runner.invoke(
        app,
        [
            "measure",
            "kernels",
            "--suite",
            "all",
            "--dry-run",
            "--clocks-mhz",
            "1410,1980",
            "--out",
            str(samples),
        ],
    )
    assert measured.exit_code == 0, measured.output
    _as_measured(samples)
    out = tmp_path / "dry.json"
    result = runner.invoke(app, ["calibrate", str(samples), "--gpu", "h100-sxm", "-o", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    tops = {g.split("/")[0] for g, v in data["groups"].items() if v["provenance"] == "fit"}
    assert {"gemm", "attention_flash", "attention_decode", "softmax", "norm", "elementwise"} <= tops
    assert data["power"] is not None
    report = runner.invoke(app, ["validate", "samples", str(samples), "--coeffs", str(out), "--json"])
    assert report.exit_code == 0, report.output
    rows = json.loads(report.stdout)["rows"]
    gemm = {r["clock"]: r for r in rows if r["family"] == "gemm"}
    assert set(gemm) == {"1410 MHz", "1980 MHz", "all"}
    assert gemm["all"]["n"] == gemm["1410 MHz"]["n"] + gemm["1980 MHz"]["n"]
    assert gemm["all"]["latency_fitted"] < gemm["all"]["latency_uncorrected"]


def test_calibration_without_power_writes_a_file_predict_can_read(tmp_path: Path) -> None:
    """Samples with no measured power: no energy coefficients, and the MAPE over no rows is null, not NaN
    (JSON has no NaN; `--coeffs` refused the file this command had just written). A fuzzer's finding."""
    import pandas as pd

    samples = tmp_path / "dry.csv"
    measured = runner.invoke(
        app, ["measure", "kernels", "--suite", "all", "--dry-run", "--out", str(samples)]
    )
    assert measured.exit_code == 0, measured.output
    df = pd.read_csv(samples)
    power = [c for c in ("avg_power_w", "energy_j", "trace_energy_j", "power_w", "idle_power_w") if c in df]
    df[power] = float("nan")
    df.to_csv(samples, index=False)
    _as_measured(samples)
    out = tmp_path / "c.json"
    args = ["calibrate", str(samples), "--gpu", "h100-sxm", "--families", "gemm", "-o", str(out)]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    text = out.read_text()
    assert "NaN" not in text and json.loads(text)["calibration"]["power_train_mape"] is None
    args = [
        "predict",
        "--model",
        "gpt2",
        "--input-tokens",
        "64",
        "--output-tokens",
        "8",
        "--coeffs",
        str(out),
    ]
    predicted = runner.invoke(app, args)
    assert predicted.exit_code == 0, predicted.output


def test_synthetic_rows_are_never_fitted(tmp_path: Path) -> None:
    """A dry run's made-up rows were fitted without a word: H100 serving power 588 -> 369 W with the file
    (operator review, session 35). A file of nothing else is refused, in either marking (a dry run's rows
    before this session said `counter` with source `dry-run:...`); a replay's copied rows are fitted and
    its made-up ones left out with a warning."""
    dry = tmp_path / "dry.parquet"
    made = runner.invoke(app, ["measure", "kernels", "--suite", "gemm", "--dry-run", "--out", str(dry)])
    assert made.exit_code == 0, made.output
    old = tmp_path / "old.parquet"
    pd.read_parquet(dry).assign(energy_method="counter").to_parquet(old, index=False)
    for path in (dry, old):
        for command in (["calibrate", path, "--gpu", "h100-sxm", "-o", tmp_path / "c.json"],
                        ["validate", "samples", path]):  # fmt: skip
            text = one_line_error(command, path.name, "every row is synthetic", "dry-run")
            assert len(text) < 300
    assert not (tmp_path / "c.json").exists()

    recorded = pd.read_parquet(dry).head(30).assign(source="test-bench", energy_method="counter")
    mixed = tmp_path / "mixed.parquet"
    pd.concat([recorded, pd.read_parquet(dry).tail(20)]).to_parquet(mixed, index=False)
    out = tmp_path / "mixed.json"
    result = runner.invoke(app, ["calibrate", str(mixed), "--gpu", "h100-sxm", "-o", str(out), "--json"])
    assert result.exit_code == 0, result.output
    assert "mixed.parquet: 20 synthetic rows left out" in result.stderr
    rows = json.loads(result.stdout)["calibration"]["rows"]
    assert rows["total"] == 30 and rows["synthetic_left_out"] == {"mixed.parquet": 20}


def test_calibrate_warns_that_replayed_rows_carry_the_dry_runs_clock(tmp_path: Path) -> None:
    """A replay of the shipped H100 file wrote its power-capped GEMMs (recorded at 1.27-1.47 GHz) at the dry
    run's 1.98 GHz, and calibrate fitted them without a word: the calibrated H100 stopped throttling
    (calibration review, session 36)."""
    shipped = Path(__file__).parents[2] / "dse" / "calibrate" / "measured" / "h100_sxm_kernels.csv"
    replay = tmp_path / "replay.parquet"
    made = runner.invoke(
        app,
        [
            "measure",
            "kernels",
            "--suite",
            "gemm",
            "--dry-run",
            "--replay",
            str(shipped),
            "--out",
            str(replay),
        ],
    )
    assert made.exit_code == 0, made.output
    frame = pd.read_parquet(replay)
    copied = frame[frame["energy_method"] == "replay"]
    recorded = pd.read_csv(shipped)
    # The premise: the copies are at 1.98 GHz, while the file recorded some GEMMs well below it.
    assert set(copied["avg_sm_clock_hz"]) == {1.98e9}
    assert recorded.loc[recorded["kind"] == "gemm", "avg_sm_clock_hz"].min() < 1.5e9
    out = tmp_path / "c.json"
    result = runner.invoke(
        app, ["calibrate", str(replay), "--gpu", "h100-sxm", "-o", str(out), "--families", "gemm"]
    )
    assert result.exit_code == 0, result.output
    assert f"replay.parquet: {len(copied)} replayed rows fitted at the dry run's clock" in result.stderr
    # A file as measured gets no such warning.
    direct_args = ["calibrate", str(shipped), "--gpu", "h100-sxm", "-o", str(tmp_path / "d.json")]
    direct = runner.invoke(app, [*direct_args, "--families", "gemm"])
    assert direct.exit_code == 0, direct.output
    assert "replayed rows" not in direct.stderr

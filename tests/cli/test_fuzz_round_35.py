"""A fuzzer's findings (session 35): each was a traceback; each now gives one clear line naming the path,
with exit code 2."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from tests.cli.fuzz_helpers import refused

LONG = "x" * 300  # one path component over the 255 bytes a Linux file name may hold


@pytest.mark.parametrize(
    "args",
    [
        ["run", "studies/llm_serving.yaml", "--n-points", "2", "--executor", "serial", "--no-report",
         "--out", f"{{tmp}}/{LONG}"],
        ["run", f"{{tmp}}/{LONG}.yaml"],
        ["report", f"{{tmp}}/{LONG}"],
        ["predict", "--model", f"{{tmp}}/{LONG}/config.json", "--gpu", "h100-sxm", "--batch", "1",
         "--input-tokens", "8", "--output-tokens", "8"],
        ["measure", "kernels", "--suite", "smoke", "--dry-run", "--out", f"{{tmp}}/{LONG}.csv"],
    ],
)  # fmt: skip
def test_a_path_whose_name_is_too_long_is_one_error_line(tmp_path: Path, args: list[str]) -> None:
    # Python 3.11's Path.exists() re-raises ENAMETOOLONG: ten commands printed a traceback, exit 1
    out = refused([a.replace("{tmp}", str(tmp_path)) for a in args], "File name too long", LONG[:40])
    assert len(out.strip().splitlines()) <= 3, out  # one message (wrapped at most)


def test_an_unknown_option_is_never_answered_with_a_hidden_one(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # `--host-gap-us` was removed and stays hidden only to say so; the parser suggested it for `--bogus`
    import sys

    from dse.entry import main

    monkeypatch.setattr(sys, "argv", ["dse", "predict", "--bogus"])
    with pytest.raises(SystemExit) as exit_:
        main()
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and "No such option: --bogus" in err and "--gpu" in err, err
    assert "--host-gap-us" not in err, err


def test_the_optimizer_help_names_every_optimizer_the_flag_takes() -> None:
    # `--optimizer adamw-foreach` works and README documents it; the help listed adamw and sgd only
    from typer.testing import CliRunner

    from dse.cli import app
    from dse.training.memory import OPTIMIZERS

    text = " ".join(CliRunner().invoke(app, ["predict", "--help"], terminal_width=200).output.split())
    for name in OPTIMIZERS:
        assert name in text.split("--optimizer", 1)[1][:400], name


@pytest.mark.parametrize(
    ("code", "exit_code"),
    [(errno.EACCES, 2), (errno.EPERM, 2), (errno.ENAMETOOLONG, 2), (errno.ENOSPC, 1), (errno.EROFS, 1)],
)
def test_an_os_error_exits_2_for_the_paths_fault_and_1_for_the_machines(code: int, exit_code: int) -> None:
    # review: a permission-denied study or output folder exited 1, which README keeps for a run that failed
    # although its input was fine (a full or read-only disk)
    import typer

    from dse.cli.common import friendly
    from dse.errors import RunFailed, os_failure

    @friendly
    def command() -> None:
        raise OSError(code, os.strerror(code), "/some/where")

    with pytest.raises(typer.Exit) as exit_:
        command()
    assert exit_.value.exit_code == exit_code
    assert isinstance(os_failure("x", OSError(code, "y")), RunFailed) == (exit_code == 1)


def test_a_full_disk_while_the_report_is_written_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # review: every point, the summary and pareto.csv were written, then the report's ENOSPC said "bad input"
    from dse.errors import RunFailed
    from dse.report.html import write_html_report
    from tests.report.runs import write_run

    run_dir = write_run(tmp_path, 50)

    def full(self: Path, *args: object, **kwargs: object) -> int:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(self))

    monkeypatch.setattr(Path, "write_text", full)
    with pytest.raises(RunFailed, match="No space left on device"):
        write_html_report(run_dir)


def test_compare_and_sweep_titles_say_the_layout_and_power_is_per_gpu() -> None:
    # a multi-GPU newcomer: a TP4 table read exactly like a one-GPU one, power and memory unlabelled as
    # per GPU while J per token covers all of them
    from typer.testing import CliRunner

    from dse.cli import app

    args = ["--model", "llama-3.1-70b", "--tp", "4", "--num-requests", "40"]
    for cmd in (
        ["compare", "h100-sxm", "h200-sxm", "--concurrency", "8"],
        ["sweep", "concurrency=8:16:2", "--gpu", "h100-sxm"],
    ):
        out = CliRunner().invoke(app, [*cmd, *args], env={"COLUMNS": "250"})
        assert out.exit_code == 0, out.output
        assert "TP4 (4 GPUs per point)" in " ".join(out.stdout.split()), out.stdout
    from dse.search.sweep import COMPARE_METRICS, SWEEP_METRICS

    for rows in (COMPARE_METRICS, SWEEP_METRICS):  # the row labels (a narrow console wraps them)
        labels = {key: label for key, label, *_ in rows}
        assert "per GPU" in labels["avg_power_w"] and "per GPU" in labels.get("memory_bytes", "per GPU")


def test_a_price_that_overflows_is_not_shown_as_inf() -> None:
    # `--gpu-usd-per-hour 1e309` said "got inf", a value the user never wrote (README: an overflowing
    # number is named as written, not as inf)
    out = refused(["predict", "--model", "llama-3.1-8b", "--batch", "1", "--input-tokens", "16",
                   "--output-tokens", "4", "--gpu-usd-per-hour", "1e309"], "--gpu-usd-per-hour")  # fmt: skip
    assert "got inf" not in out and "past a float's range" in out, out

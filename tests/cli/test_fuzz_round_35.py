"""A fuzzer's findings (session 35): each was a traceback; each now gives one clear line naming the path,
with exit code 2."""

from __future__ import annotations

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

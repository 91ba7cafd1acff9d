"""Text users wrote (GPU and model names, file and directory paths, values from their files) is printed as
written: rich read its `[...]` as console markup (`[/]` raised MarkupError with a traceback, `[red]x[/red]`
vanished) and its `:name:` as an emoji."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from dse.cli import app

runner = CliRunner()
REPO = Path(__file__).resolve().parents[2]
H100_YAML = REPO / "dse" / "hardware" / "data" / "gpus" / "h100-sxm.yaml"
GPT2 = REPO / "dse" / "workload" / "data" / "models" / "gpt2.json"
WORKLOAD = ["--model", "gpt2", "--input-tokens", "16", "--output-tokens", "4"]


def ok(*args: str) -> tuple[str, str]:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output and "MarkupError" not in result.output
    return result.stdout, result.stderr


def gpu_file(path: Path, old: str = "", new: str = "") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(H100_YAML.read_text().replace(old, new) if old else H100_YAML.read_text())
    return path


@pytest.mark.parametrize("command", ["show", "fields"])
def test_gpu_show_and_fields_print_a_display_name_of_brackets(tmp_path: Path, command: str) -> None:
    text = H100_YAML.read_text()
    display = next(line for line in text.splitlines() if line.startswith("display_name:"))
    path = gpu_file(tmp_path / "dn.yaml", display, "display_name: '[/]'")
    out, _ = ok("gpu", command, str(path))
    if command == "show":
        assert "[/]" in out
        changed, _ = ok("gpu", "show", str(path), "--set", "num_sms=100")
        assert "[/], changed: --set num_sms=100" in changed


def test_a_compare_column_header_keeps_its_brackets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    gpu_file(tmp_path / "[red]x[" / "red].yaml")  # the argument `[red]x[/red].yaml`
    out, _ = ok("compare", "[red]x[/red].yaml", "h100-sxm", *WORKLOAD)
    assert "[red]x[/red].yaml" in out


def test_a_gpu_path_with_an_emoji_code_is_not_an_emoji(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    gpu_file(tmp_path / ":fire:.yaml")
    out, _ = ok("compare", ":fire:.yaml", "h100-sxm", *WORKLOAD)
    assert ":fire:.yaml" in out


@pytest.mark.parametrize("command", [["sweep", "batch=1:4:2"], ["compare", "h100-sxm", "a100-sxm-80gb"]])
def test_an_html_path_with_brackets_is_printed_verbatim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: list[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    _, err = ok(*command, *WORKLOAD, "--html", "exp[v2]/[/]x.html")
    assert "wrote exp[v2]/[/]x.html" in err
    assert (tmp_path / "exp[v2]" / "[" / "]x.html").is_file()


def test_a_run_with_brackets_in_out_shows_its_summary_and_writes_the_report(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The search ran, then the summary's `results` row raised MarkupError and report.html was not written."""
    monkeypatch.chdir(tmp_path)
    study = tmp_path / "study.yaml"
    study.write_text(
        "name: verbatim\nmodel: gpt2\ngpu: h100-sxm\n"
        "workload: {batch: 1, input_tokens: 16, output_tokens: 4, precision: bf16, attention: flash}\n"
        "space:\n  sm_clock_mhz: {type: int, low: 1000, high: 1980, step: 10}\n"
        "objectives:\n  e2e_latency_s: minimize\n  energy_per_output_token_j: minimize\n"
        "search:\n  n_points: 10\n  executor: serial\n  seed: 0\n"
    )
    out, _ = ok("run", str(study), "--out", "out[/]x", "--fresh")
    reports = list((tmp_path / "out[" / "]x" / "verbatim").glob("*/report.html"))
    assert len(reports) == 1
    run_dir = reports[0].parent.relative_to(tmp_path)
    assert f"report: {run_dir}/report.html" in out and str(run_dir) in out


def test_a_model_directory_with_brackets_names_the_workload_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "m[v2]").mkdir()
    (tmp_path / "m[v2]" / "config.json").write_text(GPT2.read_text())
    out, _ = ok("workload", "show", "--model", "m[v2]", "--batch", "1", "--seq-len", "16")
    assert "m[v2]/prefill (bf16)" in out and "m[v2]/embed/tokens" in out


def test_operator_names_from_a_kernel_list_keep_their_brackets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    Path("[red]k[x].json").write_text(
        '[[{"dim": 1, "op": "pointwise_add", "prec": "bf16"}, ["elementwise"]]]'
    )
    out, _ = ok("predict", "--kernels", "[red]k[x].json", "--gpu", "h100-sxm", "--breakdown")
    assert "[red]k[x] on h100-sxm" in out and "[red]k[x]/0:pointwise_add" in out

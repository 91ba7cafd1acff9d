"""The `dse` command as a user runs it: output, JSON keys, and one-line errors with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dse.cli import app

runner = CliRunner()
ENERGAIZER = Path(__file__).resolve().parents[3] / "shared" / "data" / "energaizer" / "workloads" / "all"


SERVE = ["predict", "--model", "qwen3-8b", "--batch", "4", "--input-tokens", "128", "--output-tokens", "16"]


def run_ok(*args: str) -> str:
    result = runner.invoke(app, list(args))
    assert result.exit_code == 0, result.output
    return result.stdout


def run_json(*args: str) -> dict:
    return json.loads(run_ok(*args, "--json"))


def assert_one_line_error(args: list[str], *needles: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit)
    for needle in needles:
        assert needle in result.output, result.output


def test_gpus_lists_catalog() -> None:
    data = run_json("gpus")
    names = {row["name"] for row in data["gpus"]}
    assert {"h100-sxm", "a100-sxm-80gb", "h200-sxm", "l4", "b200", "rtx-4090"} <= names
    assert "gddr7" in data["memory_technologies"]


def test_gpu_show_json_has_si_keys() -> None:
    data = run_json("gpu", "show", "h100-sxm")
    assert data["num_sms"] == 132
    # H100 SXM datasheet: 3.35 TB/s, 80 GB
    assert data["memory_bw_bytes_per_s"] == pytest.approx(3.35e12, rel=0.02)
    assert data["memory_capacity_bytes"] == pytest.approx(80 * 2**30, rel=0.03)


def test_gpu_show_gddr7_what_if() -> None:
    data = run_json(
        "gpu", "show", "h100-sxm", "--memory", "gddr7", "--bus-width-bits", "512", "--data-rate-gbps", "32"
    )
    # 512 bit x 32 Gb/s / 8 = 2.048 TB/s; 16 x32 devices of 2 GiB
    assert data["memory_bw_bytes_per_s"] == pytest.approx(2.048e12, rel=1e-6)
    assert data["memory_capacity_bytes"] == pytest.approx(32 * 2**30)
    assert data["num_sms"] == 132


def test_gpu_show_set_override() -> None:
    assert run_json("gpu", "show", "h100-sxm", "--set", "gpu.num_sms=144")["num_sms"] == 144


def test_gpu_show_table_renders() -> None:
    assert "H100" in run_ok("gpu", "show", "h100-sxm")


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["gpu", "show", "h999"], ["unknown GPU 'h999'", "h100-sxm"]),
        (["gpu", "show", "h100-sxm", "--memory", "hbm9"], ["unknown memory technology", "gddr7"]),
        (["gpu", "show", "h100-sxm", "--set", "num_sms=-4"], ["num_sms"]),
        (["gpu", "show", "h100-sxm", "--set", "nonsense"], ["PATH=VALUE"]),
        (["gpu", "show", "h100-sxm", "--memory", "gddr7", "--bus-width-bits", "5120"], ["5120"]),
        (["gpu", "show", "h100-sxm", "--bus-width-bits", "512"], ["--memory"]),
        (["workload", "show", "--model", "gpt-99"], ["unknown model", "llama-3.1-8b"]),
        (["workload", "show", "--model", "gpt2", "--phase", "train"], ["prefill", "decode"]),
        (["workload", "show", "--model", "gpt2", "--precision", "fp64"], ["fp64"]),
        (["workload", "show", "--kernels", "/nonexistent/file.json"], ["/nonexistent/file.json"]),
        (["workload", "show"], ["--model", "--kernels"]),
        ([*SERVE, "--engine", "tgi"], ["--engine 'tgi'", "vllm", "trtllm", "sglang"]),
        ([*SERVE, "--kv-dtype", "int4"], ["--kv-dtype 'int4'", "fp8"]),
        ([*SERVE, "--sampling", "beam"], ["--sampling 'beam'", "top_k_top_p"]),
        (
            [*SERVE, "--gpu", "h100-sxm", "--clock-mhz", "5000"],
            ["--clock-mhz 5000", "h100-sxm", "345-1980 MHz"],
        ),
        (
            [
                "whatif",
                "h100-sxm",
                "--set",
                "clocks.sm_clock_max_mhz=1900",
                "--model",
                "qwen3-8b",
                "--clock-mhz",
                "1950",
            ],
            ["--clock-mhz 1950", "the changed h100-sxm", "345-1900 MHz"],
        ),  # fmt: skip
        ([*SERVE, "--power-cap-w", "10"], ["power cap 10 W", "200 W"]),
        # a --set field in a human unit: that key and unit, not `sm_clock_max_hz ... <= 100000000000`
        (
            [*SERVE, "--set", "clocks.sm_clock_max_mhz=9e9"],
            ["clocks.sm_clock_max_mhz: ", "100000 MHz (got 9e+09"],
        ),
        (
            ["whatif", "h100-sxm", "--set", "gpu.memory.energy_pj_per_bit=0"],
            ["memory.energy_pj_per_bit: ", "0 pJ/bit"],
        ),
    ],
)
def test_bad_input_is_one_clear_error(args: list[str], needles: list[str]) -> None:
    assert_one_line_error(args, *needles)


def test_models_lists_catalog() -> None:
    rows = {row["name"]: row for row in run_json("models")["models"]}
    assert {
        "gpt2",
        "bert-large",
        "opt-1.3b",
        "qwen2-1.5b",
        "llama-3.1-8b",
        "llama-3.1-70b",
        "mistral-7b",
        "qwen2.5-7b",
    } <= set(rows)
    # Published parameter count of Llama-3.1-8B: 8.03 B (model card)
    assert rows["llama-3.1-8b"]["num_params"] == pytest.approx(8.03e9, rel=0.01)


def test_workload_show_model_json_totals() -> None:
    data = run_json(
        "workload",
        "show",
        "--model",
        "llama-3.1-8b",
        "--phase",
        "prefill",
        "--batch",
        "1",
        "--seq-len",
        "1024",
    )
    assert data["total_flop"] == pytest.approx(sum(op["total_flop"] for op in data["ops"]))
    assert data["num_params"] == pytest.approx(8.03e9, rel=0.01)
    # Forward pass ~ 2 x params x tokens (plus attention): within a few percent
    assert data["total_flop"] == pytest.approx(2 * 7.5e9 * 1024, rel=0.15)
    names = [op["name"] for op in data["ops"]]
    assert any("layer[0-31]" in name for name in names)


def test_workload_show_decode_table() -> None:
    out = run_ok(
        "workload",
        "show",
        "--model",
        "llama-3.1-8b",
        "--phase",
        "decode",
        "--batch",
        "32",
        "--seq-len",
        "1024",
    )
    assert "total" in out


@pytest.mark.skipif(not ENERGAIZER.is_dir(), reason="../shared/data not beside the repo")
def test_workload_show_kernels_file() -> None:
    data = run_json(
        "workload", "show", "--kernels", str(ENERGAIZER / "gpt2model_gpt2_pbf16_b1_s1024_modeprefill.json")
    )
    assert data["num_kernels"] > 100
    assert data["total_flop"] > 0


def test_python_dash_m_entry_point() -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "dse", "--help"], capture_output=True, text=True, check=True)
    assert "gpus" in out.stdout


@pytest.mark.parametrize(
    ("args", "needle", "code"),
    [
        (["predict", "--tp", "2.5"], "Invalid value for '--tp'", 2),  # a rich box of 5 lines before
        (["predict", "--nosuch"], "No such option: --nosuch", 2),
        (["gpu", "show"], "Missing argument", 2),
        (["predict", "--gpu", "nosuch", "--model", "llama-3.1-8b"], "unknown GPU 'nosuch'", 2),
    ],
)
def test_the_console_script_answers_a_refused_command_line_in_one_line(
    args: list[str], needle: str, code: int
) -> None:
    """The parser's errors read like every other bad input: one `error:` line, exit 2 (`dse.entry`)."""
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "dse", *args], capture_output=True, text=True, check=False)
    assert out.returncode == code and out.stdout == "", out.stderr
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], out.stderr


@pytest.mark.parametrize(
    ("args", "command"),
    [
        (["predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tp"], "dse predict"),
        (["gpu", "show", "h100-sxm", "--set"], "dse gpu show"),
        (["cost", "facts", "--json=x"], "dse cost facts"),
        (["whatif", "h100-sxm", "--set"], "dse whatif"),
        (["cost", "facts", "--bogus"], "dse cost facts"),
        (["gpu", "--bogus"], "dse gpu"),
    ],
)
def test_a_refused_command_line_points_to_its_subcommands_help(
    args: list[str], command: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """An option missing its value or given one it does not take (the parser raises these without a
    context) named `dse --help`. In-process the program name is pytest's: only the end is compared."""
    import sys

    from dse.entry import main

    monkeypatch.setattr(sys, "argv", ["dse", *args])
    with pytest.raises(SystemExit) as exit_:
        main()
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and len(err.splitlines()) == 1, err
    assert err.startswith("error: ") and err.rstrip().endswith(f"{command} --help`)"), err


def test_the_console_script_keeps_help_and_exit_codes() -> None:
    import subprocess
    import sys

    bare = subprocess.run([sys.executable, "-m", "dse", "gpu"], capture_output=True, text=True, check=False)
    assert "show" in bare.stdout and "error" not in bare.stderr  # a bare group still shows its help
    ok = subprocess.run(
        [sys.executable, "-m", "dse", "predict", "--model", "gpt2", "--json"], capture_output=True, text=True
    )
    assert ok.returncode == 0 and json.loads(ok.stdout)["latency_s"] > 0


@pytest.mark.parametrize("rich", ["1", "0"])
@pytest.mark.parametrize("group", [[], ["gpu"]])
def test_a_bare_group_prints_its_help_on_stdout_only(group: list[str], rich: str) -> None:
    """Help for a bare `dse` or `dse gpu` on stdout and nothing on stderr (a blank line before, or the
    whole help without rich); exit 2 as the parser has it: no command ran."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "TYPER_USE_RICH": rich}
    out = subprocess.run([sys.executable, "-m", "dse", *group], capture_output=True, text=True, env=env)
    assert (out.returncode, out.stderr) == (2, ""), out.stderr
    assert "Usage:" in out.stdout and "--help" in out.stdout


def test_predict_serving_engine_options_reach_the_request() -> None:
    base = run_json(*SERVE)
    fp8 = run_json(*SERVE, "--kv-dtype", "fp8", "--engine", "vllm", "--sampling", "greedy")
    assert (fp8["kv_dtype"], fp8["engine"], fp8["sampling"]) == ("fp8", "vllm", "greedy")
    assert (base["kv_dtype"], base["engine"], base["sampling"]) == (None, "none", "none")
    # Qwen3-8B caches K and V of 8 heads x 128 dims in 36 layers; 4 requests x (128 + 16) tokens.
    tokens = 4 * (128 + 16)
    assert fp8["kv_cache_bytes"] == 36 * 2 * 8 * 128 * 1 * tokens  # fp8: one byte per element
    assert base["kv_cache_bytes"] == 36 * 2 * 8 * 128 * 2 * tokens  # bf16 activations: two


def test_predict_coeffs_file_replaces_the_shipped_corrections(tmp_path: Path) -> None:
    import dse

    shipped = Path(dse.__file__).parent / "perf" / "data" / "coeffs_hopper.json"
    args = ("predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--phase", "decode", "--batch", "8")
    default = run_json(*args)
    # The shipped file given explicitly is the default.
    assert run_json(*args, "--coeffs", str(shipped)) == default
    # A file whose constant terms are 1 ms longer adds 1 ms per kernel launch of the graph, but in the
    # groups whose constant is host time, which a GPU-time prediction drops (`gpu_only_coeffs`).
    data = json.loads(shipped.read_text())
    for group in data["groups"].values():
        group["eps_s"] += 1e-3
    slow = tmp_path / "slow.json"
    slow.write_text(json.dumps(data))
    slower = run_json(*args, "--coeffs", str(slow))
    host_timed = ("elementwise", "softmax", "rmsnorm", "layernorm")  # HOST_TIMED_GROUPS' kernel kinds
    gpu_timed = sum(k["count"] for k in default["kernels"] if k["kind"] not in host_timed)
    assert 0 < gpu_timed < default["num_kernels"]
    assert slower["latency_s"] == pytest.approx(default["latency_s"] + 1e-3 * gpu_timed, rel=0.02)
    assert_one_line_error([*args, "--coeffs", str(tmp_path / "none.json")], "none.json", "does not exist")
    # Hopper corrections and energies must not silently predict an Ampere GPU.
    a100 = [a if a != "h100-sxm" else "a100-sxm-80gb" for a in args]
    assert_one_line_error([*a100, "--coeffs", str(shipped)], "hopper", "a100-sxm-80gb", "ampere")


def test_engine_options_with_a_one_pass_shape_are_an_error() -> None:
    """--phase asks for one pass, which takes no engine option (without it, the option would make the
    command a serving prediction with the default lengths)."""
    args = ["predict", "--model", "llama-3.1-8b", "--phase", "decode", "--batch", "8"]
    for option, value in (("--engine", "vllm"), ("--kv-dtype", "fp8"), ("--sampling", "greedy")):
        assert_one_line_error([*args, option, value], "serving predictions", "not --phase")
    assert_one_line_error(["predict", "--kernels", "k.json", "--engine", "vllm"], "serving predictions")


@pytest.mark.skipif(not ENERGAIZER.is_dir(), reason="../shared/data not beside the repo")
def test_predict_kernels_runs_on_every_energaizer_list_on_h100_at_1830_mhz() -> None:
    """Issue 4: every EnergAIzer kernel list predicts on h100-sxm at 1830 MHz (the blind H100 check)."""
    from dse.hardware.catalog import load_gpu

    gpu = load_gpu("h100-sxm")
    files = sorted(ENERGAIZER.glob("*.json"))
    assert len(files) == 90
    for path in files:
        out = run_json("predict", "--kernels", str(path), "--gpu", "h100-sxm", "--clock-mhz", "1830")
        assert out["latency_s"] > 0 and out["energy_j"] > 0, path.name
        assert out["avg_power_w"] == pytest.approx(out["energy_j"] / out["latency_s"], rel=1e-9)
        # the board draws at least its idle power and never more than its TDP (the default cap)
        assert gpu.power.idle_power_w.at(out["effective_clock_mhz"] * 1e6) < out["avg_power_w"] <= 700.0
        assert out["effective_clock_mhz"] <= 1830.0 + 1e-9
        assert sum(out["energy_j_by_module"].values()) == pytest.approx(out["energy_j"], rel=1e-9)


@pytest.mark.skipif(not ENERGAIZER.is_dir(), reason="../shared/data not beside the repo")
def test_predict_kernels_precision_fp32_retypes_the_list() -> None:
    """`--precision fp32` re-types a bf16 kernel list (as the artifact does for its fp32 rows): GEMMs move to
    CUDA-core FP32, about 15x less peak than bf16 Tensor Cores on H100, so a GEMM-bound pass is several
    times slower; fp8 has no re-typing rule and is refused."""
    path = str(ENERGAIZER / "optmodel_opt-1p3b_pbf16_b8_s1024_modeprefill.json")
    bf16 = run_json("predict", "--kernels", path, "--gpu", "h100-sxm")
    fp32 = run_json("predict", "--kernels", path, "--gpu", "h100-sxm", "--precision", "fp32")
    assert fp32["busy_s"] > 2.5 * bf16["busy_s"]
    result = runner.invoke(app, ["predict", "--kernels", path, "--gpu", "h100-sxm", "--precision", "fp8"])
    assert result.exit_code != 0 and "fp8" in result.output and "Traceback" not in result.output


def test_validation_tables_show_unmeasured_metrics_as_a_dash() -> None:
    """Rows without a quantity (the repeatability rows of `dse validate power` have no latency) print '-'."""
    from rich.console import Console

    from dse.cli.validate import _frame_table

    rows = [{"dataset": "h200_gemm", "power_mape": 0.03, "latency_mape": float("nan")}]
    console = Console(width=120, record=True)
    console.print(_frame_table(rows, "t", ("power_mape", "latency_mape")))
    text = console.export_text()
    assert "3.0%" in text and "nan" not in text and " - " in text


def test_error_messages_are_printed_verbatim(tmp_path: Path) -> None:
    """An error is plain text, never console markup: its own [brackets] and a user's file name with
    brackets in it come through whole (they were eaten as markup tags)."""
    folder = tmp_path / "[red]runs"
    folder.mkdir()
    bad = folder / "list.json"
    bad.write_text("[]", encoding="utf-8")
    result = runner.invoke(app, ["predict", "--kernels", str(bad), "--gpu", "h100-sxm"])
    assert result.exit_code == 2
    assert f"{bad}: expected a non-empty JSON list of [descriptor, tags] entries" in result.stderr


def test_address_with_an_executor_that_is_not_ray_is_refused() -> None:
    result = runner.invoke(
        app, ["run", "studies/llm_serving.yaml", "--executor", "serial", "--address", "x:1"]
    )
    assert result.exit_code == 2 and "--executor serial does not use one" in result.stderr


def test_predict_without_token_counts_says_it_runs_one_pass() -> None:
    """`--batch 8` alone reads like a serving batch; the model runs one prefill pass of --seq-len tokens:
    a note on stderr says so (not with --phase / --seq-len given, nor in --json)."""
    bare = runner.invoke(app, ["predict", "--model", "llama-3.1-8b", "--batch", "8"])
    assert bare.exit_code == 0 and "one prefill pass of 1024 tokens" in bare.stderr
    assert "note:" not in bare.stdout
    asked = runner.invoke(app, ["predict", "--model", "llama-3.1-8b", "--batch", "8", "--phase", "prefill"])
    assert asked.exit_code == 0 and "note:" not in asked.stderr


def test_gpu_show_writes_readable_units_beside_si() -> None:
    """The GDDR7 H100 of the README: 512 bits x 32 Gb/s = 2.048 TB/s, 16 x 2 GiB devices = 32 GiB; an H100's
    50 MiB L2 reads in MiB."""
    from dse.cli.hardware import human

    args = ["gpu", "show", "h100-sxm", "--memory", "gddr7", "--bus-width-bits", "512"]
    args += ["--data-rate-gbps", "32"]
    out = runner.invoke(app, args)
    assert out.exit_code == 0 and "2.048 TB/s" in out.stdout and "32 GiB" in out.stdout
    assert human("l2_bytes", 50 * 2**20) == "50 MiB" and human("sm_clock_max_hz", 1.98e9) == "1980 MHz"
    assert human("num_sms", 132) == "" and human("name", "h100") == ""


def test_ctrl_c_is_one_line_and_exit_130(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    """Ctrl-C in any command (or while the CLI imports its libraries) prints one line and exits 130; it
    was a bare traceback at start-up and silence mid-command (a fuzzer's findings)."""
    import dse.cli
    import dse.workload.models as models
    from dse.entry import main

    def interrupted(*args: object, **kwargs: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(models, "list_models", interrupted)
    result = runner.invoke(app, ["models"])
    assert result.exit_code == 130 and "interrupted" in result.stderr
    monkeypatch.setattr(dse.cli, "app", interrupted)
    with pytest.raises(SystemExit) as stop:
        main()
    assert stop.value.code == 130 and "interrupted (Ctrl-C)" in capsys.readouterr().err


def test_the_one_pass_note_is_for_passes_that_ran() -> None:
    """A pass that fails prints its error alone: the note came first, then the error (a reviewer's
    finding, on a default length BERT could not hold, which now defaults to what the model holds)."""
    failed = runner.invoke(app, ["predict", "--model", "llama-3.1-8b", "--gpu", "v100-sxm2", "--batch", "8"])
    assert failed.exit_code == 2 and "note:" not in failed.stderr and "no bf16 tensor cores" in failed.stderr
    ran = runner.invoke(app, ["predict", "--model", "llama-3.1-8b", "--batch", "8"])
    assert ran.exit_code == 0 and "note: no --input-tokens" in ran.stderr


@pytest.mark.parametrize("model", ["llama-3.1-8b", "gpt-oss-20b"])
def test_a_one_pass_error_stays_one_line(model: str) -> None:
    """The notes of a one-pass prediction (what ran, the checkpoint's precision) come once it ran: an
    error (a power cap below the GPU's range) is the only line on stderr."""
    result = runner.invoke(app, ["predict", "--model", model, "--gpu", "h100-sxm", "--batch", "4",
                                 "--power-cap-w", "50"])  # fmt: skip
    assert result.exit_code == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: --power-cap-w: power cap 50 W"), result.stderr


def test_fp8_on_a_gpu_without_fp8_tensor_cores_says_it_runs_weight_only() -> None:
    """A100 has bf16 but no fp8 Tensor Cores (hardware-facts 1.3): an fp8 checkpoint served there runs
    weight-only GEMMs that dequantize to 16 bits; the answer said nothing of it. An H100 runs fp8 math."""
    args = ["predict", "--model", "llama-3.1-8b", "--precision", "fp8", "--batch", "4"]
    args += ["--input-tokens", "128", "--output-tokens", "8", "--json", "--gpu"]
    a100, h100 = (CliRunner().invoke(app, [*args, gpu]) for gpu in ("a100-sxm-80gb", "h100-sxm"))
    assert a100.exit_code == h100.exit_code == 0, a100.output
    assert "no fp8 Tensor Cores" in a100.output and "weight-only" in a100.output
    assert "no fp8 Tensor Cores" not in h100.output

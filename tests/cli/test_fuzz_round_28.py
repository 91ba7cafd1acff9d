"""A newcomer's and a fuzzer's findings (session 28): each was a silent default, a traceback, or a message
naming a value the user did not write. Each now gives one clear line naming the field and exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dse.cli import app
from tests.cli.fuzz_helpers import SERVE, refused, runner
from tests.workload.model_files import catalog_json


@pytest.mark.parametrize(
    ("quant", "needle"),
    [
        # Transformers' AutoQuantizationConfig and vLLM read quant_method from this object and refuse a
        # config without one: these were priced as 16-bit weights without a word
        ("fp8", "quantization_config must be an object"),
        ([{"quant_method": "fp8"}], "quantization_config must be an object"),
        ({"bits": 4}, "quantization_config.quant_method must be a string"),
        ({"quant_method": ""}, "quantization_config.quant_method must be a string"),  # was 16-bit, no note
        (
            {"quant_method": 8},
            "quant_method must be a string (fp8, mxfp4, awq, compressed-tensors, ...), got 8",
        ),
        ({"quant_method": "modelopt", "quant_algo": 8}, "quantization_config.quant_algo"),
        ({"quant_method": "compressed-tensors", "config_groups": "w4a16"}, "config_groups must be an object"),
        ({"quant_method": "compressed-tensors", "config_groups": {"g": [4]}}, "config_groups.g must be"),
        (
            {"quant_method": "compressed-tensors", "config_groups": {"g": {"weights": {"num_bits": "4"}}}},
            "config_groups.g.weights.num_bits must be an integer, got '4'",
        ),
    ],
)
def test_a_malformed_quantization_config_is_named_not_priced_as_bf16(
    tmp_path: Path, quant: object, needle: str
) -> None:
    raw = catalog_json("qwen3-30b-a3b") | {"quantization_config": quant}
    (tmp_path / "config.json").write_text(json.dumps(raw))
    refused(["predict", "--model", str(tmp_path), *SERVE[2:], "--json"], "config.json", needle)


OVERFLOW = "out of range (it overflows in SI units)"


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        # read "gddr7: data rate inf Gb/s per pin is outside 28-48 Gb/s": 1e308 Gb/s overflowed in b/s
        (["--memory", "gddr7", "--bus-width-bits", "512", "--data-rate-gbps", "1e308"], "--data-rate-gbps"),
        (["--memory", "gddr7", "--data-rate-gbps", "nan"], "--data-rate-gbps: expected a finite number"),
        (["--set", "memory.data_rate_gbit_per_s=1e300"], "'memory.data_rate_gbit_per_s': 1e+300 Gbit/s"),
        (["--set", "memory.capacity_per_device_gib=1e308"], "'memory.capacity_per_device_gib': 1e+308 GiB"),
        # read "Input should be a finite number" of a number written finite
        (["--set", "clocks.sm_clock_max_mhz=1e305"], "'clocks.sm_clock_max_mhz': 1e+305 MHz"),
        (["--set", "interconnect.link_bw_gb_per_s=1e305"], "'interconnect.link_bw_gb_per_s': 1e+305 GB/s"),
    ],
)
@pytest.mark.parametrize(
    "command",
    [["gpu", "show", "h100-sxm"], ["whatif", "h100-sxm", *SERVE, "--batch", "4"]],
    ids=["gpu-show", "whatif"],
)
def test_a_value_that_overflows_in_si_units_is_named_as_written(
    command: list[str], flags: list[str], needle: str
) -> None:
    output = refused([*command, *flags], needle)
    assert "inf" not in output.replace("info", ""), output


def test_a_gpu_file_or_swept_value_that_overflows_in_si_units_is_named_as_written(tmp_path: Path) -> None:
    """The file read 'clocks.sm_clock_max_mhz: Input should be a finite number (got inf)', the sweep
    'Input should be less than or equal to 10000 Gbit/s (got inf Gbit/s)'."""
    text = (Path(__file__).parents[2] / "dse/hardware/data/gpus/h100-sxm.yaml").read_text()
    path = tmp_path / "g.yaml"
    path.write_text(text.replace("sm_clock_max_mhz: 1980", "sm_clock_max_mhz: 1e305", 1))
    refused(["gpu", "show", str(path)], "g.yaml:", "clocks.sm_clock_max_mhz: 1e+305 MHz is " + OVERFLOW)
    sweep = ["sweep", *SERVE, "gpu.memory.data_rate_gbit_per_s=1e300:1e308:2"]
    assert "inf" not in refused(sweep, "1e+300 Gbit/s is " + OVERFLOW)


HUGE = str(10**23)


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        # a one-pass --batch was bounded below only: 1e23 failed in "ElementwiseOp 'llama-3.1-8b/embed/
        # tokens': num_elements must be ... up to 2^53", naming no flag; 2^31 ran, where a static serving
        # batch and a training micro-batch stop at 2^31 - 1
        (["--model", "llama-3.1-8b", "--phase", "prefill", "--seq-len", "128", "--batch", HUGE], "--batch"),
        (["--model", "resnet-50", "--batch", str(2**31)], "--batch"),
        # 1e23 tokens per step ran in a closed loop and failed in an op at a rate; a study stops at 2^31 - 1
        (
            [*SERVE, "--request-rate", "5", "--num-requests", "8", "--max-batched-tokens", HUGE],
            "--max-batched-tokens",
        ),
        (
            [*SERVE, "--concurrency", "4", "--num-requests", "8", "--max-batched-tokens", HUGE],
            "--max-batched-tokens",
        ),
    ],
)
def test_a_count_past_2_31_is_refused_by_its_flag(flags: list[str], needle: str) -> None:
    refused(["predict", *flags, "--json"], f"{needle} must be an integer in [1, 2147483647]")


def test_gpu_show_of_a_what_if_says_what_changed_in_its_title() -> None:
    """The title was the catalog name alone, 'NVIDIA H100 SXM5 80GB', above a 32 GiB GDDR7 memory."""
    args = [
        "gpu",
        "show",
        "h100-sxm",
        "--memory",
        "gddr7",
        "--bus-width-bits",
        "512",
        "--data-rate-gbps",
        "32",
    ]
    result = runner.invoke(app, [*args, "--set", "gpu.num_sms=120"])
    assert result.exit_code == 0, result.output
    title = " ".join(result.output.split("┏")[0].split())  # rich wraps a title to the table's width
    assert "changed: --memory gddr7 --bus-width-bits 512 --data-rate-gbps 32 --set gpu.num_sms=120" in title
    assert "changed" not in runner.invoke(app, ["gpu", "show", "h100-sxm"]).output


@pytest.mark.parametrize("flag", ["--kernels", "--model", "--coeffs"])
def test_a_named_pipe_without_a_writer_is_an_empty_file_not_a_hang(tmp_path: Path, flag: str) -> None:
    """open() of a FIFO nobody writes to blocked for ever (GPU and study YAML files refuse non-files)."""
    import os
    import subprocess
    import sys

    fifo = tmp_path / "pipe.json"
    os.mkfifo(fifo)
    args = {"--coeffs": ["--model", "gpt2", "--phase", "prefill"]}.get(flag, [])
    try:
        done = subprocess.run(
            [sys.executable, "-m", "dse", "predict", flag, str(fifo), *args],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        pytest.fail(f"dse predict {flag} FIFO hung")
    assert done.returncode == 2, done.stderr
    assert "pipe.json is empty" in done.stderr and "Traceback" not in done.stderr, done.stderr


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        # whatif's baseline and changed GPU were checked as two GPUs: 1e308 W ran at the TDP unsaid
        (["whatif", "h100-sxm", "--set", "gpu.num_sms=100", "--power-cap-w", "1e308"], "above the TDP of"),
        # above both TDPs (refused before too, but only as the first GPU's: see the next test)
        (["compare", "a100-sxm-80gb", "h100-sxm", "--power-cap-w", "800"], "above the TDP of a100-sxm-80gb"),
        # below every GPU's lowest limit: a table of failed columns and exit code 0
        (
            ["compare", "h100-sxm", "a100-sxm-80gb", "--power-cap-w", "1e-308"],
            "--power-cap-w: power cap 1e-308",
        ),
        # a swept cap of -1 W was a failed row and exit code 0
        (["sweep", "power_cap_w=-1:700:2"], "sweep power_cap_w=-1: power cap -1 W is not allowed"),
    ],
)
def test_a_power_cap_no_gpu_of_the_command_can_take_is_refused_up_front(args: list[str], needle: str) -> None:
    refused([*args, *SERVE], needle)


def test_compare_takes_a_cap_above_one_gpu_s_tdp_in_either_order() -> None:
    """A cap above the A100's 400 W TDP does not bind on it (README), whichever GPU is named first."""
    for gpus in (["h100-sxm", "a100-sxm-80gb"], ["a100-sxm-80gb", "h100-sxm"]):
        result = runner.invoke(app, ["compare", *gpus, *SERVE, "--power-cap-w", "600", "--json"])
        assert result.exit_code == 0, result.output
        assert all(row["feasible"] for row in json.loads(result.output)["gpus"]), result.output


@pytest.mark.parametrize("command", ["calibrate", "validate"])
def test_a_negative_split_seed_is_refused_by_its_flag(tmp_path: Path, command: str) -> None:
    """--seed -1 was numpy's 'ValueError: expected non-negative integer' traceback, exit code 1."""
    from tests.cli.fuzz_helpers import gemm_samples

    path = str(gemm_samples(tmp_path))
    args = {
        "calibrate": ["calibrate", path, "--gpu", "h100-sxm", "-o", str(tmp_path / "c.json")],
        "validate": ["validate", "samples", path],
    }[command]
    refused([*args, "--seed", "-1"], "--seed must be an integer in [0, 2^32), got -1")


@pytest.mark.parametrize("layers", [[1, 2], "x", {"a": {"quant_algo": 8}}, {"a": "FP8"}])
def test_a_malformed_modelopt_mixed_precision_file_is_named(tmp_path: Path, layers: object) -> None:
    """A ModelOpt MIXED_PRECISION export whose quantized_layers is no object of {quant_algo: string} was
    priced as 16-bit weights without a word, as a malformed quantization_config was."""
    (tmp_path / "config.json").write_text(json.dumps(catalog_json("qwen3-30b-a3b")))
    quant = {"quantization": {"quant_algo": "MIXED_PRECISION", "quantized_layers": layers}}
    (tmp_path / "hf_quant_config.json").write_text(json.dumps(quant))
    refused(["predict", "--model", str(tmp_path), *SERVE[2:]], "hf_quant_config.json", "quantized_layers")


def test_an_integer_past_the_float_range_is_named_not_a_traceback(tmp_path: Path) -> None:
    """A 401-digit integer (YAML and --set read it as a Python int) in a human-unit field or a knob was
    'OverflowError: int too large to convert to float', a traceback."""
    huge = "1" + "0" * 400
    for override in (
        f"clocks.sm_clock_max_mhz={huge}",
        f"sm.tensor_factor={huge}",
        f"memory.energy_factor=-{huge}",
    ):
        refused(["gpu", "show", "h100-sxm", "--set", override], "expected a finite number", "digits)")
    text = (Path(__file__).parents[2] / "dse/hardware/data/gpus/h100-sxm.yaml").read_text()
    path = tmp_path / "g.yaml"
    path.write_text(text.replace("sm_clock_max_mhz: 1980", f"sm_clock_max_mhz: {huge}", 1))
    refused(["gpu", "show", str(path)], "g.yaml:", "(401 digits) MHz is " + OVERFLOW)


@pytest.mark.parametrize(
    "flags",
    [
        ["--model", "vit-b-16", "--image-size", str(2**31)],
        ["--model", "resnet-50", "--training", "--micro-batch", "8", "--image-size", str(10**11)],
    ],
)
def test_a_vision_input_too_large_for_the_model_names_its_flags(flags: list[str]) -> None:
    """It read "GemmOp 'vit-b-16/patch_embed': m must be a positive integer up to 2^53", naming an operator
    and no flag."""
    refused(["predict", *flags], f"--image-size {flags[-1]}", "(--batch / --micro-batch)")


@pytest.mark.parametrize(
    ("axis", "needle"),
    [
        ("concurrency=20000:30000:2", "concurrency 20000 is above the 10,000 one simulation handles"),
        ("num_requests=300000:400000:2", "num_requests 300000 is above the 200,000"),
    ],
)
def test_a_sweep_past_one_simulation_is_refused_up_front(axis: str, needle: str) -> None:
    """Every row failed with the reason and the sweep exited 0, while the same value as a flag is refused."""
    load = [] if axis.startswith("concurrency") else ["--concurrency", "8"]
    refused(["sweep", *SERVE, *load, axis], needle)

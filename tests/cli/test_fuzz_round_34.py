"""A fuzzer's findings (session 34): each was a traceback, a misleading message or a study that failed
every point. Each now gives one clear line naming the file or field, with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dse.cli import app
from tests.cli.fuzz_helpers import refused

ROOT = Path(__file__).resolve().parents[2] / "dse"
GPU_DIR, MODEL_DIR = ROOT / "hardware" / "data" / "gpus", ROOT / "workload" / "data" / "models"

SERVE = ["--gpu", "h100-sxm", "--batch", "2", "--input-tokens", "64", "--output-tokens", "8"]


def test_a_gpu_without_a_16_bit_tensor_core_rate_is_refused_at_load(tmp_path: Path) -> None:
    # the power model's Tensor-Core peak is the 16-bit rate: without one every kernel's Tensor
    # utilization was 0/0 and each prediction blamed the sm.* thread and register fields instead
    text = (GPU_DIR / "v100-sxm2.yaml").read_text()
    lines = [ln for ln in text.splitlines() if not ln.lstrip().startswith("fp16:")]
    text = "\n".join(
        "  tensor_flop_per_clk: {}" if ln.startswith("  tensor_flop_per_clk:") else ln for ln in lines
    )
    path = tmp_path / "p100.yaml"
    path.write_text(text + "\n")
    refused(["gpu", "show", str(path)], "sm.tensor_flop_per_clk", "16-bit Tensor-Core rate")
    refused(["predict", "--gpu", str(path), "--model", "gpt2", "--phase", "prefill", "--precision", "fp32"],
            "sm.tensor_flop_per_clk")  # fmt: skip


@pytest.mark.parametrize(
    ("patch", "needle"),
    [
        ({"no_rope_layers": [1, 0]}, "'no_rope_layers' must list one of 0, 1 for each of the 48 layers"),
        ({"no_rope_layers": "abc"}, "'no_rope_layers' must list"),
        ({"no_rope_layers": [True] * 48}, "'no_rope_layers' must list"),
        ({"moe_layers": 5}, "'moe_layers' must be a list of layer indices 0..47"),
        ({"moe_layers": "abc"}, "'moe_layers' must be a list of layer indices"),
        ({"attention_chunk_size": True}, "'attention_chunk_size' must be a positive integer"),
    ],
)
def test_llama4_layer_lists_are_checked_like_other_families(tmp_path: Path, patch: dict, needle: str) -> None:
    # they were an IndexError / TypeError traceback, or ('abc') a set of letters read as layers
    config = json.loads((MODEL_DIR / "llama-4-scout.json").read_text())
    config["text_config"].update(patch)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    refused(["predict", "--model", str(path), *SERVE], needle)


@pytest.mark.parametrize(
    ("param", "needle"),
    [
        (
            "gpu.sm.tensor_factor: {type: float, low: 1.0e-300, high: 1.0e-299}",
            "tensor rates must be at least 1",
        ),
        ("gpu.memory.energy_factor: {type: float, low: 0.5, high: 1.0e+308}", "energy_j_per_bit"),
        ("gpu.sm.tensor_factor: {values: [1.0, 1.0e+9]}", "at most 1e7"),
    ],
)
def test_a_scale_knob_no_point_can_take_is_refused_at_load(tmp_path: Path, param: str, needle: str) -> None:
    # every point failed with it (exit 1 after the whole budget), where plain GPU fields are refused at load
    study = tmp_path / "s.yaml"
    study.write_text(
        "name: knobs\nmodel: llama-3.1-8b\ngpu: h100-sxm\n"
        "workload: {batch: 8, input_tokens: 256, output_tokens: 32}\n"
        f"space:\n  sm_clock_mhz: {{type: int, low: 1005, high: 1980, step: 15}}\n  {param}\n"
        "objectives: {e2e_latency_s: minimize, energy_per_output_token_j: minimize}\n"
        "search: {sampler: {kind: nsga2, population: 10}, n_points: 20, executor: serial, seed: 0}\n"
    )
    out = refused(["run", str(study), "--out", str(tmp_path / "res"), "--no-report"], "s.yaml:7", needle)
    assert not (tmp_path / "res").exists() or not any((tmp_path / "res").rglob("points.jsonl")), out


def test_an_llm_pass_that_does_not_fit_says_so() -> None:
    # a newcomer's first `--phase` questions got a latency for a model that cannot run, with no note
    from tests.cli.fuzz_helpers import runner

    decode = ["predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--phase", "decode", "--batch", "8"]
    out = json.loads(runner.invoke(app, [*decode, "--seq-len", "131000", "--json"]).output)
    # Llama-3.1-8B's KV cache: 32 layers x 8 KV heads x 128 x (K, V) x 2 bytes = 131,072 bytes a token
    assert out["kv_cache_bytes"] == 8 * 131_001 * 131_072
    assert out["memory_fits"] is False and out["memory_capacity_bytes"] == 80 * 2**30
    prefill = [
        "predict",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "h100-sxm",
        "--phase",
        "prefill",
        "--batch",
        "8",
    ]
    fits = json.loads(runner.invoke(app, [*prefill, "--seq-len", "1024", "--json"]).output)
    assert fits["kv_cache_bytes"] == 8 * 1024 * 131_072 and fits["memory_fits"] is True
    text = runner.invoke(app, ["predict", "--model", "llama-3.1-405b", "--gpu", "l4", "--phase", "decode",
                               "--batch", "1", "--seq-len", "1024"]).output  # fmt: skip
    assert "does not fit" in text and "weights alone exceed it" in text
    encoder = ["predict", "--model", "bert-large", "--gpu", "h100-sxm", "--batch", "8", "--seq-len", "512"]
    assert json.loads(runner.invoke(app, [*encoder, "--json"]).output)["kv_cache_bytes"] == 0.0


@pytest.mark.parametrize(
    ("args", "fits"),
    [
        (["predict", "--model", "bert-large", "--gpu", "h100-sxm", "--batch", "8"], 512),
        (["predict", "--model", "gpt2", "--gpu", "h100-sxm", "--phase", "decode", "--batch", "8"], 1023),
        (["predict", "--model", "bert-large", "--gpu", "h100-sxm", "--training"], 512),
    ],
)
def test_the_default_length_is_what_the_model_holds(args: list[str], fits: int) -> None:
    # --seq-len defaulted to 1024, past BERT's 512 positions and GPT-2's 1024 with a decode step's new
    # token: a newcomer's first BERT command failed, blaming a flag they never gave. Now the default is
    # the longest the model holds, the same prediction as that length written out.
    from tests.cli.fuzz_helpers import runner

    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    written = runner.invoke(app, [*args, "--seq-len", str(fits), "--json"])
    assert json.loads(result.stdout) == json.loads(written.stdout)


def test_fp8_convolutions_are_refused_for_inference_as_for_training() -> None:
    refused(["predict", "--model", "resnet-50", "--gpu", "h100-sxm", "--batch", "64", "--precision", "fp8"],
            "resnet-50 is a convolutional network", "no fp8 convolutions")  # fmt: skip


@pytest.mark.parametrize("args", [["models"], ["gpu", "show", "h100-sxm", "--json"]])
def test_a_closed_output_pipe_stops_quietly_with_the_sigpipe_code(args: list[str]) -> None:
    # `dse models | head` exited 1 (rich's and the parser's rule), which README reserves for a failed run;
    # a shell tool whose reader went away reports 128 + SIGPIPE. The pipe is closed before the command
    # writes (it takes a second to start), so its first write meets it.
    import subprocess
    import sys

    proc = subprocess.Popen(
        [sys.executable, "-m", "dse", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141 and err == b""


def test_a_dry_run_and_a_sample_file_hold_to_the_gpus_clock_range(tmp_path: Path) -> None:
    # 5 GHz on an H100 was recorded by a dry run and fitted by calibrate (exit 0), 1 MHz validated
    refused(["measure", "kernels", "--suite", "gemm", "--dry-run", "--clocks-mhz", "5000", "--out",
             str(tmp_path / "o.csv")], "outside the SM clock range of h100-sxm: 345-1980 MHz")  # fmt: skip
    from tests.cli.fuzz_helpers import gemm_samples

    path = gemm_samples(tmp_path, sm_clock_hz=5e9)
    refused(["calibrate", str(path), "--gpu", "h100-sxm", "-o", str(tmp_path / "c.json")],
            "sm_clock_hz 5e+09", "the GPU's SM clock range")  # fmt: skip
    one_mhz = gemm_samples(tmp_path, "one.csv", sm_clock_hz=1e6)
    refused(["validate", "samples", str(one_mhz), "--gpu", "h100-sxm"], "sm_clock_hz 1e+06")


def test_the_renter_view_refuses_the_owners_electricity_price_as_a_set_too() -> None:
    # the flag was refused beside --gpu-usd-per-hour, the same fact through --set was ignored (exit 0)
    serve = ["--batch", "4", "--input-tokens", "128", "--output-tokens", "16", "--gpu-usd-per-hour", "2"]
    tariff = ["--set", "cost.operation.electricity_usd_per_kwh=500"]
    refused(
        ["predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", *serve, *tariff],
        "drop --set cost.operation",
    )


def test_an_output_flag_does_not_replace_the_commands_inputs(tmp_path: Path) -> None:
    # `dse calibrate S.csv -o S.csv` replaced the measured samples with coefficients; `dse report RUN
    # --out RUN/points.jsonl` wrote HTML over the run's log (exit 0 both)
    from tests.cli.fuzz_helpers import gemm_samples, runner

    samples = gemm_samples(tmp_path)
    before = samples.read_bytes()
    refused(
        ["calibrate", str(samples), "--gpu", "h100-sxm", "-o", str(samples)], "one of the command's inputs"
    )
    assert samples.read_bytes() == before
    run = tmp_path / "run"
    run.mkdir()
    log = run / "points.jsonl"
    log.write_text(json.dumps({"point_id": "p0", "params": {"batch": 8},
                               "metrics": {"e2e_latency_s": 1.0, "energy_j": 2.0}}) + "\n")  # fmt: skip
    logged = log.read_bytes()
    refused(["report", str(run), "--out", str(log)], "a file of the run directory")
    assert log.read_bytes() == logged
    assert runner.invoke(app, ["report", str(run), "--out", str(run / "report.html")]).exit_code == 0


STUDY_BASE = """\
name: knobs
model: llama-3.1-8b
gpu: h100-sxm
workload: {batch: 8, input_tokens: 256, output_tokens: 32}
space:
  gpu.num_sms: {type: int, low: 96, high: 144, step: 4}
  sm_clock_mhz: {type: int, low: 1005, high: 1980, step: 15, when: WHEN}
objectives: {e2e_latency_s: minimize, energy_per_output_token_j: minimize}
search: {sampler: random, n_points: 10, executor: serial, seed: 0}
"""


@pytest.mark.parametrize(
    ("when", "needle"),
    [
        ("{gpu.num_sms: 101}", "101 is never a value of 'gpu.num_sms' (96 to 144 in steps of 4)"),
        ("{gpu.num_sms: 1000}", "1000 is never a value"),
        ("{gpu.num_sms: []}", "an empty list matches no value"),
    ],
)
def test_a_when_on_a_range_holds_to_its_values(tmp_path: Path, when: str, needle: str) -> None:
    # the clock, the study's main knob, silently never existed: no point of the run had it
    study = tmp_path / "w.yaml"
    study.write_text(STUDY_BASE.replace("WHEN", when))
    refused(["run", str(study), "--out", str(tmp_path / "r"), "--no-report"], "w.yaml:7", needle)


def test_a_when_on_a_range_value_it_takes_runs(tmp_path: Path) -> None:
    from tests.cli.fuzz_helpers import runner

    study = tmp_path / "w.yaml"
    study.write_text(STUDY_BASE.replace("WHEN", "{gpu.num_sms: [100, 104]}"))
    assert runner.invoke(app, ["run", str(study), "--out", str(tmp_path / "r"), "--no-report"]).exit_code == 0


def test_a_studys_models_of_the_wrong_kind_are_named_as_such(tmp_path: Path) -> None:
    # "unknown model 'vit-b-16' (did you mean vit-b-16?)" in a serving study; in a training study the
    # vision points failed one by one on a per-token objective they never report
    serving = tmp_path / "s.yaml"
    serving.write_text(
        STUDY_BASE.replace("  gpu.num_sms: {type: int, low: 96, high: 144, step: 4}\n", "")
        .replace(", when: WHEN", "")
        .replace("space:\n", "space:\n  model: {values: [llama-3.1-8b, vit-b-16]}\n")
    )
    refused(["run", str(serving), "--out", str(tmp_path / "r")], "'vit-b-16' is a vision model, not an LLM")
    training = tmp_path / "t.yaml"
    training.write_text(
        "name: mix\nmodel: bert-base\ngpu: h100-sxm\n"
        "workload: {mode: training, micro_batch: 1, seq_len: 512}\n"
        "space:\n  model: {values: [bert-base, vit-b-16]}\n"
        "objectives: {step_time_s: minimize, energy_per_token_j: minimize}\n"
        "search: {sampler: random, n_points: 4, executor: serial, seed: 0}\n"
    )
    refused(["run", str(training), "--out", str(tmp_path / "r")], "unknown metric 'energy_per_token_j'")


@pytest.mark.parametrize(
    ("axis", "extra", "needle"),
    [
        (
            "memory.data_rate_gbit_per_s=3.2:6.4:2",
            ["--set", "gpu.memory.data_rate_frac=0.5"],
            "swept and also fixed",
        ),
        (
            "memory.data_rate_frac=0:1:2",
            ["--set", "gpu.memory.data_rate_gbit_per_s=5"],
            "swept and also fixed",
        ),
        ("gpu.memory.data_rate_frac=0:2:3", [], "must lie in [0, 1]"),
        ("sm_clock_mhz=-1980:1980:3", [], "sweep sm_clock_mhz=-1980: must be positive"),
    ],
)
def test_a_sweep_no_point_can_take_is_refused_once(axis: str, extra: list[str], needle: str) -> None:
    # the data rate as a rate beside it as a share of the range (or a share of 2) failed every point with
    # exit 0; a negative clock read "sweep sm_clock_mhz=must be positive"
    serve = ["--model", "llama-3.1-8b", "--input-tokens", "128", "--output-tokens", "16"]
    refused(["sweep", axis, *extra, *serve], needle)


def test_a_run_whose_budget_ends_before_a_point_says_so(tmp_path: Path) -> None:
    # "all 0 points failed or broke a constraint" blamed the points for a spent time budget
    from tests.cli.fuzz_helpers import runner

    study = tmp_path / "tb.yaml"
    text = STUDY_BASE.replace(", when: WHEN", "").replace(
        "n_points: 10", "n_points: 10, time_budget_s: 1.0e-9"
    )
    study.write_text(text)
    result = runner.invoke(app, ["run", str(study), "--out", str(tmp_path / "r"), "--no-report"])
    assert result.exit_code == 1 and "no point ran before the search stopped" in result.output


def test_lora_targets_name_each_projection_once() -> None:
    refused(["predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--training", "--lora-rank", "8",
             "--lora-targets", "qkv_proj,qkv_proj"], "each projection once")  # fmt: skip


def test_an_ascii_terminal_gets_the_output_not_a_traceback() -> None:
    # PYTHONIOENCODING=ascii ended in a UnicodeEncodeError on the tables' "·" once the work was done
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONIOENCODING": "ascii"}
    args = ["predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--batch", "1", "--input-tokens", "10",
            "--output-tokens", "5"]  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "dse", *args], env=env, capture_output=True, timeout=120)
    assert done.returncode == 0 and b"Traceback" not in done.stderr and b"bound by" in done.stdout


def test_a_gemm_sample_of_batch_zero_is_refused_not_read_as_one(tmp_path: Path) -> None:
    # `batch or 1` read a damaged 0 as an unbatched GEMM and fitted it
    from tests.cli.fuzz_helpers import gemm_samples

    refused(
        ["validate", "samples", str(gemm_samples(tmp_path, batch=0)), "--gpu", "h100-sxm"], "batch must be"
    )


def test_memory_advice_on_one_gpu_names_only_what_can_help() -> None:
    # on one GPU it advised sharding the states (accepted, changes nothing) and --tp / --pp (refused:
    # "--num-gpus 1 is not a multiple of tp x pp x cp"); for LoRA, whose frozen weights are what is large,
    # --distributed-optimizer first (newcomer)
    from tests.cli.fuzz_helpers import runner

    train = ["predict", "--model", "llama-3.1-70b", "--gpu", "h100-sxm", "--training", "--num-gpus", "1",
             "--micro-batch", "1", "--global-batch", "1", "--seq-len", "2048", "--json"]  # fmt: skip
    full = json.loads(runner.invoke(app, train).stdout)["infeasible_reason"]
    assert "more GPUs (--num-gpus N with --fsdp, --distributed-optimizer, --tp, --pp)" in full
    assert "shard the model states" not in full and "split the model" not in full
    lora = json.loads(runner.invoke(app, [*train, "--lora-rank", "8"]).stdout)["infeasible_reason"]
    assert "more GPUs (--num-gpus N with --tp, --pp)" in lora

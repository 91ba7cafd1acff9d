"""`dse predict` / `dse whatif` in every load mode: the flags, the JSON keys and the errors."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dse.cli import app

runner = CliRunner()
BASE = [
    "predict",
    "--model",
    "llama-3.1-8b",
    "--gpu",
    "h100-sxm",
    "--input-tokens",
    "512",
    "--output-tokens",
    "64",
]
# The keys the issue names for every mode (SI units), plus the ones a static batch always had.
KEYS = {
    "mode", "num_gpus", "ttft_s", "tpot_s", "ttft_p50_s", "ttft_p90_s", "ttft_p99_s", "tpot_p50_s",
    "tpot_p90_s", "tpot_p99_s", "e2e_latency_s", "output_tokens_per_s", "requests_per_s", "avg_batch_size",
    "avg_power_w", "total_power_w", "energy_per_output_token_j", "energy_per_request_j",
    "kv_cache_utilization", "preemptions", "feasible", "infeasible_reason", "overloaded",
}  # fmt: skip


def run_json(*args: str) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    ("flags", "mode"),
    [
        ([], "static"),
        (["--batch", "8"], "static"),
        (["--concurrency", "8", "--num-requests", "40"], "concurrency"),
        (["--request-rate", "5", "--num-requests", "40", "--length-dist", "lognormal"], "request_rate"),
        (["--max-throughput", "--num-requests", "60", "--max-num-seqs", "16"], "max_throughput"),
    ],
)
def test_every_mode_prints_every_key(flags: list[str], mode: str) -> None:
    data = run_json(*BASE, *flags)
    assert set(data) >= KEYS and data["mode"] == mode and data["feasible"] is True
    # a closed loop, an offline run and a static batch have no arrivals to outpace the server; 5 requests a
    # second of 512 / 64 tokens are a fraction of what an H100 serves
    assert data["overloaded"] is False
    assert data["num_gpus"] == 1 and data["total_power_w"] == data["avg_power_w"]


@pytest.mark.parametrize(
    "flags",
    [
        ["--concurrency", "4", "--num-requests", "8"],
        ["--tp", "2"],
        ["--engine", "vllm", "--batch", "2"],
        ["--output-tokens", "256"],
        ["--input-tokens", "512", "--concurrency", "2", "--num-requests", "4"],
    ],
)
def test_a_serving_command_without_lengths_takes_the_default_ones(flags: list[str]) -> None:
    """A load mode, a layout, an engine option or one length makes `predict --model` a serving prediction:
    the missing lengths are `dse whatif`'s and a study's defaults, said on stderr, the numbers exactly those
    of the lengths written out (the blind multi-GPU check's command names no lengths)."""
    from dse.serving import DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS

    base = ["predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", *flags, "--json"]
    implied = runner.invoke(app, base)
    assert implied.exit_code == 0, implied.output
    assert "serving lengths not given" in implied.stderr
    lengths = [] if "--input-tokens" in flags else ["--input-tokens", str(DEFAULT_INPUT_TOKENS)]
    lengths += [] if "--output-tokens" in flags else ["--output-tokens", str(DEFAULT_OUTPUT_TOKENS)]
    assert all(f"{flag} {n}" in implied.stderr for flag, n in zip(lengths[::2], lengths[1::2], strict=True))
    written = runner.invoke(app, [*base, *lengths])
    assert written.exit_code == 0 and "serving lengths" not in written.stderr, written.output
    assert json.loads(implied.stdout) == json.loads(written.stdout)
    assert json.loads(implied.stdout)["num_gpus"] == (2 if "--tp" in flags else 1)


def test_the_model_alone_is_still_one_forward_pass() -> None:
    result = runner.invoke(app, ["predict", "--model", "llama-3.1-8b", "--json"])
    assert result.exit_code == 0 and "serving lengths" not in result.stderr, result.output
    assert "ttft_s" not in json.loads(result.stdout) and "latency_s" in json.loads(result.stdout)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        # the defaults do not fit gpt2's 1,024 positions: the error says they are the defaults
        (["predict", "--model", "gpt2", "--concurrency", "4"], "1024 in (default) + 256 out (default)"),
        (["predict", "--model", "gpt2", "--input-tokens", "900"], "900 in + 256 out (default)"),
        (["compare", "h100-sxm", "a10", "--model", "gpt2"], "(default)"),
        # input checked after the lengths are filled in: the note is not printed before the error
        (["compare", "h100-sxm", "no-such-gpu", "--model", "llama-3.1-8b"], "no-such-gpu"),
        (["sweep", "nosuch=1:4:2", "--model", "llama-3.1-8b"], "nosuch"),
        (["sweep", "batch=1:4:2", "--model", "llama-3.1-8b", "--clock-mhz", "99999"], "99999"),
        (["predict", "--model", "llama-3.1-8b", "--tp", "2", "--clock-mhz", "99999"], "99999"),
    ],
)
def test_default_lengths_keep_errors_to_one_line(args: list[str], needle: str) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 2 and needle in result.stderr, result.output
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_an_encoder_under_load_is_refused_as_an_encoder() -> None:
    """Not by the context check of the default lengths, which the user never wrote."""
    result = runner.invoke(app, ["predict", "--model", "bert-large", "--concurrency", "4"])
    assert result.exit_code == 2 and "is an encoder" in result.stderr, result.output
    assert len(result.stderr.strip().splitlines()) == 1


def test_the_kv_dtype_shown_is_the_one_run() -> None:
    fp8 = ["--precision", "fp8", "--concurrency", "4", "--num-requests", "20"]
    assert run_json(*BASE, *fp8, "--engine", "trtllm")["kv_dtype"] == "fp8"  # fp8 checkpoints: fp8 cache
    assert run_json(*BASE, *fp8, "--engine", "vllm")["kv_dtype"] == "bf16"  # --kv-cache-dtype auto


def test_load_mode_text_says_mode_and_engine() -> None:
    result = runner.invoke(app, [*BASE, "--concurrency", "8", "--num-requests", "40", "--engine", "sglang"])
    assert result.exit_code == 0, result.output
    text = " ".join(result.stdout.split())
    assert "concurrency 8 (closed loop)" in text and "sglang engine" in text and "TTFT p90" in text
    assert "800 us host/dense layer without CUDA graphs" in text  # the eager steps' host floor (presets)
    trt = runner.invoke(app, [*BASE, "--concurrency", "8", "--num-requests", "40", "--engine", "trtllm"])
    assert "800 us host/dense layer" in " ".join(trt.stdout.split())  # its context steps run eagerly too
    bare = runner.invoke(app, [*BASE, "--concurrency", "8", "--num-requests", "40", "--engine", "none"])
    assert "host/dense layer" not in " ".join(bare.stdout.split())
    static = runner.invoke(app, [*BASE, "--batch", "4"])
    assert "static batch of 4" in " ".join(static.stdout.split())


def test_an_overloaded_open_loop_says_so_under_its_table_and_in_its_json() -> None:
    # 500 requests a second of 512 / 64 tokens: 256,000 prompt tokens a second at 2 x 8e9 flop each, 4e15
    # flop/s, 4x an H100's dense bf16 peak, so the 100 requests queue; at 5 a second none waits.
    flags = ["--request-rate", "500", "--num-requests", "100"]
    data = run_json(*BASE, *flags)
    assert data["overloaded"] is True and data["feasible"] is True
    text = runner.invoke(app, [*BASE, *flags]).stdout
    assert "warning: overloaded: 500 requests/s arrive" in " ".join(text.split())
    assert "depend on --num-requests (100 here)" in " ".join(text.split())
    calm = runner.invoke(app, [*BASE, "--request-rate", "5", "--num-requests", "100"]).stdout
    assert "overloaded" not in calm
    sweep = runner.invoke(app, ["sweep", "request_rate_per_s=5:500:2", *BASE[1:], "--num-requests", "100"])
    named = " ".join(sweep.stdout.split()).partition("warning: overloaded")[2]
    assert named.endswith("sustains): request_rate_per_s=500")  # the row at 5 a second is not named


def test_a_rate_run_too_short_to_fill_its_batch_says_its_figures_include_the_ramp() -> None:
    # 100 requests at 20 a second arrive over 5 s and each stays ~5 s (512 tokens at ~10 ms): the batch is
    # still filling when the last one comes, so no steady window exists and the system figures are the whole
    # run's; 2,000 requests hold one (a newcomer read a Mixtral TP2 run 19% short of the offered tokens/s)
    flags = ["--model", "llama-3.1-8b", "--gpu", "h100-sxm"]
    flags += ["--input-tokens", "512", "--output-tokens", "512"]
    short = runner.invoke(app, ["predict", *flags, "--request-rate", "20", "--num-requests", "100"]).stdout
    assert "warning: no steady state in 100 requests" in " ".join(short.split())
    assert "overloaded" not in short
    long = runner.invoke(app, ["predict", *flags, "--request-rate", "20", "--num-requests", "2000"]).stdout
    assert "no steady state" not in long
    # JSON users get the same lines (markup stripped) under `warnings`, an empty list when there are none
    short_json = run_json("predict", *flags, "--request-rate", "20", "--num-requests", "100")
    assert [w.startswith("no steady state in 100 requests") for w in short_json["warnings"]] == [True]
    assert run_json("predict", *flags, "--request-rate", "20", "--num-requests", "2000")["warnings"] == []


def test_thrashing_kv_cache_is_said_with_the_batch_that_fits() -> None:
    """A pool that holds fewer whole requests than max_num_seqs admits evicts and recomputes running
    requests (vLLM's recompute preemption); capping the batch at the number of whole requests the pool holds
    leaves every admitted request room for its whole sequence, so nothing is evicted (whether that is faster
    depends on how much recompute the larger batch pays: the warning does not promise it)."""
    flags = [*BASE[:-1], "512", "--max-throughput", "--num-requests", "64"]
    flags += ["--gpu-memory-utilization", "0.25"]
    thrash = run_json(*flags, "--max-num-seqs", "64")
    fit = int(thrash["kv_capacity_tokens"] // (512 + 512))
    assert thrash["preemptions"] > 0.05 * 64 and fit < 64
    said = f"{thrash['preemptions']} preemptions in 64 requests"
    assert [w.split(":")[0] for w in thrash["warnings"]] == [said]
    assert f"--max-num-seqs {fit} admits no more than it holds whole" in thrash["warnings"][0]
    capped = run_json(*flags, "--max-num-seqs", str(fit))
    assert capped["preemptions"] == 0 and capped["warnings"] == []
    # a closed loop runs no more requests than its clients, whatever max_num_seqs allows
    loop = [
        *BASE[:-1],
        "512",
        "--concurrency",
        "48",
        "--num-requests",
        "96",
        "--gpu-memory-utilization",
        "0.25",
    ]
    assert "engine admits up to 48," in run_json(*loop)["warnings"][0]
    # drawn lengths: a pool that holds the mean request as many times as there are clients still evicts the
    # longer ones; no --max-num-seqs at or above the clients is offered, as it would change nothing
    drawn = [*loop[:-6], "--concurrency", "27", "--num-requests", "200", "--gpu-memory-utilization", "0.25"]
    outgrown = run_json(*drawn, "--length-dist", "exponential")["warnings"]
    assert len(outgrown) == 1 and "as many as the engine runs (27), but longer ones outgrow it" in outgrown[0]
    assert "--max-num-seqs" not in outgrown[0]
    # a sweep names its thrashing rows, with their preemptions, as predict does under its table
    sweep = ["sweep", f"max_num_seqs={fit}:64:2", *flags[1:]]
    out = " ".join(runner.invoke(app, sweep, env={"COLUMNS": "300"}).stdout.split())
    assert "warning: preemptions" in out and f"max_num_seqs=64 ({thrash['preemptions']} in 64)" in out
    assert f"max_num_seqs={fit} (" not in out
    text = " ".join(runner.invoke(app, [*flags, "--max-num-seqs", "64"]).stdout.split())
    assert f"warning: {said}" in text


def test_engine_knobs_reach_the_simulation() -> None:
    few = run_json(*BASE, "--max-throughput", "--num-requests", "64", "--max-num-seqs", "8")
    many = run_json(*BASE, "--max-throughput", "--num-requests", "64", "--max-num-seqs", "64")
    assert few["max_num_seqs"] == 8 and few["avg_batch_size"] <= 8.0 + 1e-9
    assert many["output_tokens_per_s"] > 2 * few["output_tokens_per_s"]
    half = run_json(*BASE, "--concurrency", "4", "--num-requests", "20", "--gpu-memory-utilization", "0.4")
    full = run_json(*BASE, "--concurrency", "4", "--num-requests", "20")
    assert half["kv_capacity_tokens"] < full["kv_capacity_tokens"]
    assert full["host_step_s"] == pytest.approx(7e-4)  # vLLM 0.10-0.12: async scheduling off
    overlapped = run_json(*BASE, "--concurrency", "4", "--num-requests", "20", "--host-step-us", "0")
    assert overlapped["host_step_s"] == 0.0 and overlapped["tpot_s"] < full["tpot_s"]
    negative_zero = run_json(*BASE, "--concurrency", "4", "--num-requests", "20", "--host-step-us", "-0")
    assert json.dumps(negative_zero["host_step_s"]) == "0.0"
    # one client, 1,024-token prompts: vLLM's eager prompt steps wait for 32 layers x the per-layer host time
    lone = [*BASE, "--concurrency", "1", "--num-requests", "3", "--host-step-us", "0",
            "--input-tokens", "1024"]  # fmt: skip
    slow = run_json(*lone, "--layer-host-us", "2000")
    default, bare = run_json(*lone), run_json(*lone, "--layer-host-us", "0")
    assert (slow["layer_host_s"], default["layer_host_s"], bare["layer_host_s"]) == (2e-3, 8e-4, 0.0)
    assert run_json(*lone, "--layer-host-us", "800")["layer_host_s"] == 8e-4  # as the default, exactly
    assert slow["ttft_s"] >= 32 * 2e-3 * (1 - 1e-9) and slow["ttft_s"] > default["ttft_s"] >= bare["ttft_s"]


@pytest.mark.parametrize(
    "args",
    [
        ["sweep", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--input-tokens", "256", "--output-tokens",
         "16", "--host-step-us=-3", "concurrency=4:8:2"],  # a swept concurrency takes no flag of its own
        ["sweep", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--input-tokens", "256", "--output-tokens",
         "16", "--concurrency", "4", "host_step_s=-0.001:0.001:2"],
        ["compare", "h100-sxm", "a100-sxm-80gb", "--model", "llama-3.1-8b", "--input-tokens", "256",
         "--output-tokens", "16", "--concurrency", "4", "--host-step-us", "nan"],
        ["sweep", "--gpu", "h100-sxm", "--model", "llama-3.1-8b", "--input-tokens", "256", "--output-tokens",
         "16", "--gpu-memory-utilization", "2", "concurrency=4:8:2"],
    ],
)  # fmt: skip
def test_a_sweep_refuses_an_engine_knob_no_point_can_take(args: list[str]) -> None:
    """Up front, exit 2: every point failed with it, and the command exited 0."""
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert ("host" in result.output or "memory" in result.output) and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (["--batch", "4", "--concurrency", "8"], "one load mode"),
        (["--concurrency", "4", "--max-throughput"], "one load mode"),
        (["--max-num-seqs", "8"], "applies to a load mode"),
        (["--seed", "3"], "--seed applies to a load mode"),
        (["--length-sigma", "2"], "--length-sigma applies to a load mode"),
        (["--concurrency", "4", "--length-sigma", "0.3"], "--length-dist lognormal only"),
        # at its default value too (it ran with fixed lengths, the README says refused)
        (["--concurrency", "4", "--length-sigma", "0.5"], "--length-dist lognormal only"),
        (["--length-sigma", "0.5"], "--length-sigma applies to a load mode"),
        (["--concurrency", "0"], "--concurrency must be an integer >= 1"),
        (["--request-rate", "-2"], "--request-rate must be a number"),
        (["--concurrency", "4", "--engine", "tgi"], "engine 'tgi'"),
        (["--concurrency", "4", "--engine", ""], "'--engine': an empty name"),  # it ran vllm, silently
        (["--concurrency", "4", "--max-batched-tokens", "8"], "vLLM refuses a step budget smaller"),
        (["--concurrency", "4", "--sampling", " "], "'--sampling': an empty name"),
        (["--concurrency", "4", "--length-dist", "zipf"], "--length-dist 'zipf'"),
        (["--concurrency", "4", "--gpu-memory-utilization", "2"], "--gpu-memory-utilization must be"),
        (["--concurrency", "4", "--seed", "-1"], "--seed must be an integer"),
        (["--concurrency", "4", "--attention", "eager"], "static batch"),
        (["--host-step-us", "500"], "--host-step-us applies to a load mode"),
        (["--concurrency", "4", "--host-step-us", "nan"], "--host-step-us"),
        (
            ["--concurrency", "4", "--host-step-us", "-5"],
            "--host-step-us is microseconds of CPU time per step in [0, 1e6]",
        ),
        (["--layer-host-us", "500"], "--layer-host-us applies to a load mode"),
        (["--concurrency", "4", "--layer-host-us", "inf"], "--layer-host-us"),
        (["--concurrency", "4", "--layer-host-us", "-1"], "CPU time per dense layer in [0, 1e5] (got -1.0)"),
    ],
)
def test_bad_load_options_are_one_line_errors(flags: list[str], needle: str) -> None:
    result = runner.invoke(app, [*BASE, *flags])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and needle in result.output, result.output


def test_whatif_under_load_shows_the_mode() -> None:
    args = ["whatif", "h100-sxm", "--memory", "gddr7", "--concurrency", "8", "--num-requests", "40",
            "--input-tokens", "256", "--output-tokens", "32"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "concurrency 8 (closed loop)" in " ".join(result.stdout.split())
    data = run_json(*args)
    assert data["mode"] == "concurrency"
    assert data["changed"]["tpot_s"] > data["baseline"]["tpot_s"]  # GDDR7 has less bandwidth than HBM3
    # each side says what it ran, as `dse predict --json` does: the request and the engine's settings
    predicted = run_json("predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", *args[4:])
    for key in ("model", "concurrency", "num_requests", "engine", "max_num_seqs", "max_batched_tokens",
                "host_step_s", "kv_capacity_tokens"):  # fmt: skip
        assert data["baseline"][key] == predicted[key], key


def test_json_counts_are_integers() -> None:
    """Requests, steps, preemptions, GPUs and KV tokens are counts: JSON integers, not 640.0."""
    data = run_json("predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--input-tokens", "64",
                    "--output-tokens", "8", "--concurrency", "4", "--num-requests", "12")  # fmt: skip
    for key in ("num_requests", "steps", "preemptions", "num_gpus", "kv_capacity_tokens"):
        assert isinstance(data[key], int) and not isinstance(data[key], bool), key
    assert data["num_requests"] == 12 and isinstance(data["ttft_s"], float)


def test_whatif_says_when_the_engine_defaults_follow_the_gpu() -> None:
    """vLLM's default batch limits depend on device memory (8192 tokens / 1024 sequences from 70 GiB, else
    2048 / 256): a what-if that shrinks the memory says the engine settings changed with it."""
    args = ["whatif", "h100-sxm", "--set", "memory.capacity_per_device_gib=8", "--concurrency", "8",
            "--num-requests", "24", "--input-tokens", "256", "--output-tokens", "16"]  # fmt: skip
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "the changed GPU runs the vllm engine's defaults for it: max 256 seqs" in " ".join(
        result.stdout.split()
    )
    data = run_json(*args)
    assert (data["baseline"]["max_num_seqs"], data["changed"]["max_num_seqs"]) == (1024, 256)
    same = runner.invoke(app, [*args, "--max-num-seqs", "256", "--max-batched-tokens", "2048"])
    assert same.exit_code == 0 and "defaults for it" not in same.stdout


def test_the_text_title_is_a_paragraph_at_the_console_width_not_wrapped_to_the_table() -> None:
    # As the table's own title it was wrapped to the two-column table's width (~48 characters) and centred,
    # five short lines for a load run's description; now its lines fill the console's width (80 or more).
    result = runner.invoke(app, [*BASE, "--concurrency", "8", "--num-requests", "40"])
    assert result.exit_code == 0, result.output
    first = next(line for line in result.stdout.splitlines() if "closed loop" in line)
    assert "concurrency 8 (closed loop), vllm engine" in first and len(first.strip()) > 60


def test_json_says_length_sigma_only_where_it_shapes_the_lengths() -> None:
    # It read 0.5 beside fixed and exponential lengths, which it does not shape (a fuzz run).
    fixed = run_json(*BASE, "--concurrency", "4", "--num-requests", "20")
    lognormal = run_json(*BASE, "--concurrency", "4", "--num-requests", "20", "--length-dist", "lognormal")
    assert fixed["length_sigma"] is None and fixed["length_dist"] == "fixed"
    assert lognormal["length_sigma"] == 0.5


def test_whatif_names_the_memory_in_its_column_only_when_the_memory_changed() -> None:
    # `--set gpu.num_sms=66` was headed "hbm3 5120-bit", as if the memory had changed (a fuzz run).
    sms = runner.invoke(app, ["whatif", "h100-sxm", "--set", "gpu.num_sms=66", "--model", "llama-3.1-8b"])
    assert sms.exit_code == 0, sms.output
    assert "changed" in sms.stdout and "5120-bit" not in sms.stdout
    mem = runner.invoke(app, ["whatif", "h100-sxm", "--memory", "gddr7", "--model", "llama-3.1-8b"])
    assert mem.exit_code == 0, mem.output
    assert "gddr7" in mem.stdout


def test_the_lengths_drawn_are_reported_and_show_a_clipped_tail() -> None:
    # Lognormal lengths are clipped to the model's context; the JSON said only the means asked (a fuzz run).
    long = run_json("predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--concurrency", "4",
                    "--num-requests", "8", "--input-tokens", "100000", "--output-tokens", "30000",
                    "--length-dist", "lognormal")  # fmt: skip
    assert long["output_tokens"] == 30000 and long["output_tokens_mean"] < 0.9 * 30000
    fixed = run_json(*BASE, "--concurrency", "4", "--num-requests", "8")
    assert fixed["input_tokens_mean"] == fixed["input_tokens"]
    assert fixed["output_tokens_mean"] == fixed["output_tokens"]


def test_precision_defaults_to_the_checkpoint_and_says_so() -> None:
    """gpt-oss ships MXFP4 experts and engines serve them so: without --precision the prediction runs
    them (a note on stderr says so); --precision bf16 prices a 16-bit copy; a bf16 checkpoint has no note."""
    args = ["predict", "--model", "gpt-oss-20b", "--concurrency", "4", "--num-requests", "8",
            "--input-tokens", "128", "--output-tokens", "16", "--json"]  # fmt: skip
    implied = runner.invoke(app, args)
    assert implied.exit_code == 0, implied.output
    assert "--precision not given: mxfp4" in implied.stderr
    written = runner.invoke(app, [*args, "--precision", "bf16"])
    assert written.exit_code == 0 and "--precision" not in written.stderr
    ckpt, bf16 = json.loads(implied.stdout), json.loads(written.stdout)
    assert (ckpt["precision"], bf16["precision"]) == ("mxfp4", "bf16")
    assert ckpt["weight_bytes"] < 0.4 * bf16["weight_bytes"]
    dense = runner.invoke(app, [*args[:2], "qwen3-8b", *args[3:]])
    assert dense.exit_code == 0 and json.loads(dense.stdout)["precision"] == "bf16"
    assert "--precision" not in dense.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["predict", "--model", "gpt-oss-20b", "--phase", "decode", "--seq-len", "64"],
        ["workload", "show", "--model", "gpt-oss-20b", "--phase", "decode", "--seq-len", "64"],
        ["compare", "h100-sxm", "h200-sxm", "--model", "gpt-oss-20b", "--input-tokens", "64",
         "--output-tokens", "8"],
        ["sweep", "sm_clock_mhz=1000:1500:2", "--model", "gpt-oss-20b", "--input-tokens", "64",
         "--output-tokens", "8"],
        ["whatif", "h100-sxm", "--memory", "hbm3e", "--model", "gpt-oss-20b", "--input-tokens", "64",
         "--output-tokens", "8"],
    ],
)  # fmt: skip
def test_every_llm_command_takes_the_checkpoint_precision(args: list[str]) -> None:
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "--precision not given: mxfp4" in result.stderr
    written = runner.invoke(app, [*args, "--precision", "bf16"])
    assert written.exit_code == 0 and "--precision not given" not in written.stderr
    assert result.stdout != written.stdout  # the 4-bit experts change the figures


def test_a_refused_checkpoint_precision_says_it_was_not_written() -> None:
    """A V100 has no bf16 Tensor Cores for gpt-oss's MXFP4 experts: the error names --precision, so it
    says that the precision was the checkpoint's, not the user's; written, the error is as before."""
    implied = runner.invoke(
        app, ["predict", "--model", "gpt-oss-20b", "--gpu", "v100-sxm2", "--concurrency", "4"]
    )
    assert implied.exit_code == 2
    assert "--precision mxfp4" in implied.stderr
    assert "--precision not given, the model checkpoint's default" in implied.stderr
    written = runner.invoke(
        app,
        [
            "predict",
            "--model",
            "gpt-oss-20b",
            "--gpu",
            "v100-sxm2",
            "--concurrency",
            "4",
            "--precision",
            "mxfp4",
        ],
    )
    assert written.exit_code == 2 and "not given" not in written.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["predict", "--model", "gpt-oss-20b", "--concurrency", "4"],
        ["predict", "--model", "gpt-oss-20b", "--training", "--micro-batch", "1", "--seq-len", "256"],
        ["workload", "show", "--model", "gpt-oss-20b"],
    ],
)
def test_an_empty_precision_is_refused_not_a_default(args: list[str]) -> None:
    """`--precision "$P"` with P unset: an error naming the value, not bf16 or the checkpoint's."""
    result = runner.invoke(app, [*args, "--precision", ""])
    assert result.exit_code == 2 and "precision ''" in result.stderr, result.output


def test_compare_and_sweep_rows_say_the_precision_they_ran_at() -> None:
    """Rows carry the precision (it may be the checkpoint's), and a V100 row refusing gpt-oss's MXFP4
    experts says that precision was not written."""
    compare = run_json("compare", "v100-sxm2", "h100-sxm", "--model", "gpt-oss-20b", "--batch", "2",
                       "--input-tokens", "64", "--output-tokens", "8")  # fmt: skip
    v100, h100 = compare["gpus"]
    assert v100["precision"] == h100["precision"] == "mxfp4"
    assert "--precision not given, the model checkpoint's" in v100["reason"] and h100["reason"] is None
    sweep = run_json("sweep", "batch=1:2:2", "--gpu", "v100-sxm2", "--model", "gpt-oss-20b", "--precision",
                     "mxfp4", "--input-tokens", "64", "--output-tokens", "8")  # fmt: skip
    assert all(r["precision"] == "mxfp4" and "not given" not in r["reason"] for r in sweep)
    one_pass = run_json("predict", "--model", "gpt-oss-20b", "--phase", "decode", "--seq-len", "64")
    assert one_pass["precision"] == "mxfp4"


def test_a_checkpoint_scheme_not_priced_is_said_not_silent() -> None:
    """A dense model's AWQ (4-bit) upload is priced at bf16, more bytes than it has: a note says so; a 4-bit
    MoE upload (DeepSeek-R1 NVFP4) prices its experts as MXFP4 and fits where its bf16 copy would not."""
    args = [
        "--concurrency",
        "2",
        "--num-requests",
        "4",
        "--input-tokens",
        "64",
        "--output-tokens",
        "8",
        "--json",
    ]
    awq = runner.invoke(app, ["predict", "--model", "Qwen/Qwen3-8B-AWQ", *args])
    assert awq.exit_code == 0 and json.loads(awq.stdout)["precision"] == "bf16"
    assert "stores 4-bit weights, which dse does not price for a dense model" in awq.stderr
    r1_args = ["--model", "nvidia/DeepSeek-R1-0528-FP4", "--gpu", "h200-sxm", "--tp", "8", *args]
    r1 = runner.invoke(app, ["predict", *r1_args])
    out = json.loads(r1.stdout)
    assert r1.exit_code == 0 and out["precision"] == "mxfp4" and out["feasible"], r1.output

"""Flags outside their mode are one clear error: serving and load flags with --training."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from dse.cli import app

TRAIN = ["predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--training", "--num-gpus", "8", "--fsdp"]


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--dp", "2"], "--dp"),
        (["--concurrency", "4"], "load mode"),
        (["--input-tokens", "128", "--output-tokens", "16"], "--input-tokens"),
        (["--engine", "vllm"], "--engine"),
    ],
)
def test_serving_flags_are_refused_in_training(extra, named):
    result = CliRunner().invoke(app, [*TRAIN, *extra])
    assert result.exit_code == 2
    assert named in result.output and "not for --training" in result.output


def test_a_plain_training_step_still_runs():
    result = CliRunner().invoke(app, [*TRAIN, "--micro-batch", "1", "--seq-len", "2048", "--json"])
    assert result.exit_code == 0, result.output
    assert '"step_time_s"' in result.output


def test_training_json_says_what_the_step_ran():
    """A saved result names its settings (the layout was there; precision, lengths and batches were not)."""
    import json

    args = [*TRAIN[:-1], "--micro-batch", "2", "--global-batch", "64", "--seq-len", "2048", "--json"]
    args += ["--precision", "fp8", "--lora-rank", "8", "--lora-targets", "qkv_proj"]
    out = json.loads(CliRunner().invoke(app, args).output)
    assert (out["precision"], out["micro_batch"], out["global_batch"], out["seq_len"]) == ("fp8", 2, 64, 2048)
    assert out["lora_targets"] == ["qkv_proj"] and out["recompute"] == "none" and out["optimizer"] == "adamw"
    vision = ["predict", "--model", "resnet-50", "--gpu", "h100-sxm", "--training", "--micro-batch", "32"]
    img = json.loads(CliRunner().invoke(app, [*vision, "--image-size", "160", "--json"]).output)
    assert img["image_size"] == 160 and img["memory_format"] == "nchw" and "seq_len" not in img


def test_lora_targets_narrow_the_adapters():
    """Adapters on the qkv projection only train fewer weights than on every projection: a shorter step."""
    import json

    args = [*TRAIN[:-1], "--micro-batch", "1", "--seq-len", "2048", "--lora-rank", "16", "--json"]
    every = json.loads(CliRunner().invoke(app, args).output)
    qkv = json.loads(CliRunner().invoke(app, [*args, "--lora-targets", "qkv_proj"]).output)
    assert qkv["step_time_s"] < every["step_time_s"]


SERVE = ["predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--input-tokens", "128"]
SERVE += ["--output-tokens", "16"]


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--num-gpus", "4"], "--num-gpus"),
        (["--memory-format", "nhwc"], "--memory-format"),
        (["--objective", "finetune"], "--objective"),
        (["--attention-kernel", "fa3"], "--attention-kernel"),
        (["--recompute", "full", "--micro-batch", "4"], "--micro-batch, --recompute"),
        # given at their default value they would be ignored all the same
        (["--micro-batch", "1"], "--micro-batch"),
        (["--image-size", "224", "--optimizer", "adamw"], "--image-size, --optimizer"),
    ],
)
def test_training_flags_are_refused_outside_training(extra, named):
    result = CliRunner().invoke(app, [*SERVE, *extra])
    assert result.exit_code == 2
    assert named in result.output and "only for --training" in result.output


@pytest.mark.parametrize(
    ("model", "extra", "named"),
    [
        ("llama-3.1-8b", ["--memory-format", "nhwc"], "not a vision model"),
        ("resnet-50", ["--objective", "finetune"], "not an encoder"),
        ("llama-3.1-8b", ["--objective", "finetune"], "not an encoder"),
        ("resnet-50", ["--attention-kernel", "fa3"], "is a vision model"),
        ("llama-3.1-8b", ["--attention", "eager", "--attention-kernel", "triton"], "attention is eager"),
        ("llama-3.1-8b", ["--gpu", "a100-sxm-80gb", "--attention-kernel", "fa3"], "use the default fa2"),
        # at their default value too: the option does not apply to the model
        ("llama-3.1-8b", ["--image-size", "224"], "not a vision model"),
        ("llama-3.1-8b", ["--memory-format", "nchw"], "not a vision model"),
        ("resnet-50", ["--attention-kernel", "fa2"], "is a vision model"),
        ("resnet-50", ["--objective", "pretrain"], "not an encoder"),
        # layout and attention options the step would not read (newcomer review: each ran unchanged)
        ("llama-3.1-8b", ["--num-gpus", "8", "--ep-dispatcher", "deepep"], "--ep-dispatcher needs --ep > 1"),
        ("llama-3.1-8b", ["--num-gpus", "8", "--no-tp-comm-overlap"], "--no-tp-comm-overlap needs --tp > 1"),
        ("llama-3.1-8b", ["--num-gpus", "8", "--no-cp-load-balance"], "--no-cp-load-balance needs --cp > 1"),
        ("llama-3.1-8b", ["--attention", "eager", "--attention-kernel", "fa2"], "attention is eager"),
        ("llama-3.1-8b", ["--lora-targets", "qkv_proj"], "lora_rank (--lora-rank) is 0"),
        ("llama-3.1-8b", ["--lora-rank", "8", "--lora-targets", "qkv"], "qkv is not a projection"),
    ],
)
def test_training_options_that_do_not_apply_to_the_model_are_refused(model, extra, named):
    cmd = ["predict", "--model", model, "--gpu", "h100-sxm", "--training", "--micro-batch", "1", *extra]
    result = CliRunner().invoke(app, cmd)
    assert result.exit_code == 2
    assert named in result.output


@pytest.mark.parametrize(
    ("model", "extra", "named"),
    [
        ("resnet-50", ["--precision", "fp7"], "--precision"),
        ("resnet-50", ["--precision", "mxfp4"], "--precision"),
        ("llama-3.1-8b", ["--optimizer", "lion"], "--optimizer"),
        ("resnet-50", ["--global-batch", "0"], "--global-batch"),
    ],
)
def test_bad_training_values_are_one_clear_error(model, extra, named):
    cmd = ["predict", "--model", model, "--gpu", "a100-sxm-80gb", "--training", "--micro-batch", "8", *extra]
    result = CliRunner().invoke(app, cmd)
    assert result.exit_code == 2 and named in result.output and "Traceback" not in result.output


def _vision_latency(*extra: str) -> float:
    import json

    cmd = ["predict", "--model", "resnet-50", "--gpu", "h100-sxm", "--batch", "16", "--json", *extra]
    result = CliRunner().invoke(app, cmd)
    assert result.exit_code == 0, result.output
    payload = json.loads(result.output)
    assert payload["num_kernels"] > 100  # ~50 convolutions with their norms, activations and adds
    return float(payload["latency_s"])


def test_a_vision_model_predicts_its_forward_pass_with_its_image_size_and_layout():
    """`dse predict --model resnet-50 --batch N` is one inference forward pass; --image-size scales the
    work (4x the pixels at 448 px) and NHWC drops cuDNN's layout transposes."""
    base = _vision_latency()
    assert _vision_latency("--image-size", "448") > 2.5 * base
    assert _vision_latency("--memory-format", "nhwc") < base


@pytest.mark.parametrize("training", [False, True])
def test_a_vit_takes_its_attention_from_attention(training):
    """A ViT's attention is fused (flash, the default) or its unfused kernels (eager); the flag is read."""
    import json

    mode = ["--training", "--micro-batch", "32"] if training else ["--batch", "32"]
    key = "step_time_s" if training else "latency_s"

    def seconds(*extra: str) -> float:
        cmd = ["predict", "--model", "vit-b-16", "--gpu", "h100-sxm", *mode, "--json", *extra]
        result = CliRunner().invoke(app, cmd)
        assert result.exit_code == 0, result.output
        return float(json.loads(result.output)[key])

    flash = seconds()
    assert seconds("--attention", "flash") == flash
    assert seconds("--attention", "eager") > flash


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--model", "vit-b-16", "--batch", "4", "--memory-format", "nhwc"], "--memory-format"),
        (
            ["--model", "vit-b-16", "--training", "--micro-batch", "4", "--memory-format", "nchw"],
            "--memory-format",
        ),
        (["--model", "vit-b-16", "--training", "--micro-batch", "4", "--coeffs", "x.json"], "--coeffs"),
        (["--model", "llama-3.1-8b", "--training", "--micro-batch", "1", "--launch", "eager"], "--launch"),
        # a serving prediction's host time is its engine's: --launch was silently ignored there
        (
            ["--model", "llama-3.1-8b", "--input-tokens", "8", "--output-tokens", "8", "--launch", "foo"],
            "--launch",
        ),
        (["--model", "vit-b-16", "--gpu", "v100-sxm2", "--batch", "4", "--precision", "bf16"], "--precision"),
        (
            ["--model", "resnet-50", "--gpu", "a100-sxm-80gb", "--batch", "4", "--precision", "fp8"],
            "--precision",
        ),
        (["--model", "vit-b-16", "--batch", "4", "--attention", ""], "--attention"),
        (["--model", "llama-3.1-8b", "--batch", "4", "--phase", ""], "--phase"),
        (["--model", "resnet-50", "--batch", "4", "--attention", "eager"], "convolutional network"),
        (["--model", "vit-b-16", "--training", "--micro-batch", "0"], "--micro-batch"),
        (["--model", "ViT-B/16", "--batch", "4"], "vision models: "),
    ],
)
def test_what_a_prediction_would_ignore_or_cannot_run_is_one_clear_error(args, named):
    """Flags the prediction would silently ignore (a ViT's layout, --coeffs and --launch in a training step,
    an empty --attention or --phase) and precisions the GPU has no Tensor Cores for: exit 2, the flag named,
    no traceback; an unknown name lists the vision models too."""
    result = CliRunner().invoke(app, ["predict", *args])
    assert result.exit_code == 2, result.output
    assert named in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--input-tokens", "8", "--output-tokens", "8"], "is a vision model"),
        (["--precision", "mxfp4"], "is a vision model"),
        (["--micro-batch", "4"], "only for --training"),
    ],
)
def test_a_vision_forward_pass_refuses_what_it_cannot_use(extra, named):
    result = CliRunner().invoke(app, ["predict", "--model", "resnet-50", "--gpu", "h100-sxm", *extra])
    assert result.exit_code == 2 and named in result.output


def test_models_lists_the_vision_models_with_their_parameter_counts():
    import json

    result = CliRunner().invoke(app, ["models", "--json"])
    assert result.exit_code == 0
    vision = {r["name"]: r["num_params"] for r in json.loads(result.output)["vision_models"]}
    assert vision["resnet-50"] == pytest.approx(25.6e6, rel=0.01)  # torchvision's published count
    assert "efficientnet-b0" in vision and "vit-b-16" in vision


LLAMA = ["--model", "llama-3.1-8b"]


@pytest.mark.parametrize(
    ("args", "named", "why"),
    [
        (["--model", "resnet-50", "--batch", "8", "--seq-len", "512"], "--seq-len", "vision model"),
        (["--model", "resnet-50", "--batch", "8", "--phase", "decode"], "--phase", "vision model"),
        (["--model", "resnet-50", "--batch", "8", "--attention", "flash"], "--attention", "vision model"),
        (
            ["--model", "resnet-50", "--training", "--micro-batch", "8", "--attention", "eager"],
            "--attention",
            "vision",
        ),
        (
            ["--model", "llama-3.1-8b", "--training", "--micro-batch", "1", "--phase", "decode"],
            "--phase",
            "training",
        ),
        (
            ["--model", "llama-3.1-8b", "--input-tokens", "64", "--output-tokens", "8", "--seq-len", "9"],
            "--seq-len",
            "serving",
        ),
        (
            ["--model", "llama-3.1-8b", "--input-tokens", "64", "--output-tokens", "8", "--phase", "decode"],
            "--phase",
            "serving",
        ),
    ],
)
def test_shape_flags_are_refused_where_nothing_reads_them(args, named, why):
    """Written at any value, even the default, a flag the prediction would ignore is one clear error."""
    result = CliRunner().invoke(app, ["predict", "--gpu", "h100-sxm", *args])
    assert result.exit_code == 2, result.output
    assert named in result.output and why in result.output and "Traceback" not in result.output


def test_shape_flags_still_apply_where_they_are_read():
    ok = [
        ["--model", "llama-3.1-8b", "--phase", "decode", "--seq-len", "2048", "--batch", "8"],
        ["--model", "llama-3.1-8b", "--input-tokens", "64", "--output-tokens", "8", "--attention", "eager"],
        [
            "--model",
            "llama-3.1-8b",
            "--training",
            "--micro-batch",
            "1",
            "--seq-len",
            "2048",
            "--attention",
            "eager",
        ],
    ]
    for args in ok:
        result = CliRunner().invoke(app, ["predict", "--gpu", "h100-sxm", *args, "--json"])
        assert result.exit_code == 0, result.output


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--model", "resnet-50", "--batch", "0"], "at least one image"),
        (["--model", "resnet-50", "--image-size", "0"], "--image-size 0"),
        (["--model", "resnet-50", "--concurrency", "4"], "vision model"),
        (["--model", "resnet-50", "--tp", "2"], "vision model"),
        (
            ["--model", "resnet-50", "--training", "--micro-batch", "8", "--recompute", "selective"],
            "full or none",
        ),
    ],
)
def test_vision_inputs_nothing_would_read_are_one_clear_error(args, named):
    """A newcomer's walkthrough: a traceback (batch 0), a silent 224 px (image size 0), advice that led to a
    second error (load modes) and an option with no effect (selective recomputation of a CNN)."""
    result = CliRunner().invoke(app, ["predict", "--gpu", "h100-sxm", *args])
    assert result.exit_code == 2, result.output
    assert named in result.output and "Traceback" not in result.output


def test_a_kernel_list_refuses_batch(tmp_path):
    kernels = tmp_path / "k.json"
    kernels.write_text('[["GEMM(m=128, n=128, k=128, dtype=bf16)", ["linear"]]]')
    result = CliRunner().invoke(
        app, ["predict", "--gpu", "h100-sxm", "--kernels", str(kernels), "--batch", "4"]
    )
    assert result.exit_code == 2 and "--batch" in result.output and "fixes its own shapes" in result.output


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--model", "vit-b-16", "--seq-len", "4096"], "--seq-len"),
        (["--model", "vit-b-16", "--phase", "decode"], "--phase"),
        (["--model", "resnet-50", "--attention", "eager"], "--attention"),
        (["--model", "llama-3.1-8b", "--image-size", "224"], "--image-size"),
        (["--model", "vit-b-16", "--memory-format", "nhwc"], "--memory-format"),
        (["--kernels", "list.json", "--batch", "4"], "--batch"),  # refused before the file is read
    ],
)
def test_workload_show_refuses_what_the_graph_would_not_read(args, named):
    """`dse workload show` builds the graph `dse predict` would, so it refuses the same unread flags."""
    result = CliRunner().invoke(app, ["workload", "show", *args])
    assert result.exit_code == 2 and named in result.output and "Traceback" not in result.output


def test_workload_show_takes_a_vision_models_image_size_and_attention():
    import json

    def flop(*extra: str) -> float:
        result = CliRunner().invoke(app, ["workload", "show", "--model", "vit-b-16", "--json", *extra])
        assert result.exit_code == 0, result.output
        return float(json.loads(result.output)["total_flop"])

    base = flop()
    assert flop("--image-size", "448") > 4 * base  # 4x the patches, and attention over 4x the tokens
    # the same matmuls unfused, plus the separate scale's and softmax's few FLOPs (under 0.5%)
    assert base < flop("--attention", "eager") < 1.005 * base


def test_a_forward_pass_title_names_its_precision_and_attention():
    cmd = ["predict", "--model", "vit-b-16", "--batch", "4", "--attention", "eager", "--precision", "fp16"]
    result = CliRunner().invoke(app, cmd)
    assert result.exit_code == 0 and "fp16" in result.output and "eager attention" in result.output


def test_a_vision_forward_pass_reports_its_memory_and_whether_it_fits():
    """Weights, input images and the largest activations against the GPU's capacity: 100,000 fp32 images
    of 224 px are 60 GB of input alone, over an RTX 3090's 24 GB; a batch of 8 fits."""
    import json

    def run(batch: str, *extra: str):
        cmd = ["predict", "--model", "vit-b-16", "--gpu", "rtx-3090", "--batch", batch, "--precision", "fp16"]
        return CliRunner().invoke(app, [*cmd, *extra])

    small, huge = json.loads(run("8", "--json").output), json.loads(run("100000", "--json").output)
    assert small["memory_fits"] and 86.6e6 * 4 < small["memory_bytes"] < small["memory_capacity_bytes"]
    assert not huge["memory_fits"] and huge["memory_bytes"] > 100_000 * 3 * 224 * 224 * 4
    text = run("100000")
    assert text.exit_code == 0 and "does not fit" in text.output


LLAMA = ["--model", "llama-3.1-8b"]


@pytest.mark.parametrize(
    ("args", "named", "why"),
    [
        ([*LLAMA, "--tp", "1", "--phase", "prefill", "--seq-len", "128"], "--tp", "not --phase"),
        ([*LLAMA, "--seq-len", "128", "--pp", "1"], "--pp", "not --phase"),
        ([*LLAMA, "--phase", "decode", "--ep", "1", "--dp", "1"], "--ep, --dp", "not --phase"),
        (["--kernels", "k.json", "--dp", "1"], "--dp", "--kernels"),
        (["--model", "resnet-50", "--tp", "1"], "--tp", "resnet-50 is a vision model"),
        (["--model", "resnet-50", "--batch", "8", "--dp", "1"], "--dp", "resnet-50 is a vision model"),
        ([*LLAMA, "--training", "--dp", "1"], "--dp", "not for --training"),
    ],
)  # fmt: skip
def test_a_layout_flag_nothing_reads_is_refused_even_at_1(args, named, why):
    """One forward pass (--phase, --seq-len, --kernels or a vision model) runs on one GPU and a training
    step takes dp from --num-gpus: `--tp 1` there ran without a word, while `--tp 2` was refused."""
    result = CliRunner().invoke(app, ["predict", "--gpu", "h100-sxm", *args])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {named}: ") and why in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_a_layout_at_1_still_makes_a_serving_prediction():
    """`--model --tp 1` with no shape is the one-GPU serving prediction (README), not a refused pass."""
    result = CliRunner().invoke(app, ["predict", "--model", "llama-3.1-8b", "--tp", "1", "--json"])
    assert result.exit_code == 0 and '"ttft_s"' in result.stdout, result.output


PASS = [*LLAMA, "--phase", "prefill", "--seq-len", "128"]  # one pass; --cost-scenario counts at its default


@pytest.mark.parametrize(
    ("args", "named", "what"),
    [
        ([*PASS, "--pue", "20"], "--pue", "one pass"),  # out of range too: it was never checked
        ([*PASS, "--gpu-price-usd", "-5"], "--gpu-price-usd", "one pass"),
        ([*PASS, "--set", "cost.operation.pue=0.5"], "--set cost.operation.pue", "one pass"),
        ([*PASS, "--cost-scenario", "mid", "--pue", "1.2"], "--cost-scenario, --pue", "one pass"),
        (["--kernels", "k.json", "--lifetime-years", "3"], "--lifetime-years", "one pass"),
        (["--model", "resnet-50", "--batch", "8", "--utilization", "0.5"], "--utilization", "resnet-50"),
    ],
)  # fmt: skip
def test_cost_options_where_nothing_is_priced_are_refused(args, named, what):
    """One forward pass reports no cost: `--pue 20` (out of range, too) there ran without a word, as layout
    flags it does not read once did."""
    result = CliRunner().invoke(app, ["predict", "--gpu", "h100-sxm", *args, "--json"])
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith(f"error: {named}: ") and what in result.stderr, result.stderr
    assert "is not priced" in result.stderr and len(result.stderr.strip().splitlines()) == 1, result.stderr


def test_gpu_show_refuses_a_cost_fact():
    """`gpu show` prices nothing: a `--set cost.*` fact beside it was dropped unsaid."""
    result = CliRunner().invoke(app, ["gpu", "show", "h100-sxm", "--set", "cost.operation.pue=1.2"])
    assert result.exit_code == 2 and "--set cost.operation.pue: `dse gpu show` is not priced" in result.stderr


def test_a_pass_without_cost_options_still_runs():
    result = CliRunner().invoke(app, ["predict", "--gpu", "h100-sxm", *PASS, "--json"])
    assert result.exit_code == 0 and '"latency_s"' in result.stdout, result.output

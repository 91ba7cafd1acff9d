"""A vision model's inference forward pass (`dse predict --model resnet-50 --batch N`) gives images/s and J
per image, under the training step's key names, and its JSON says which batch, image size and layout ran: a
user divided by hand, and saved results did not say what produced them (session 36 newcomer report, 1)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dse.cli import app

RESNET = ["predict", "--model", "resnet-50", "--gpu", "h100-sxm", "--precision", "fp16"]


def _json(*args: str) -> dict:
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


@pytest.mark.parametrize(
    ("batch", "extra"), [("64", ["--memory-format", "nhwc"]), ("8", ["--image-size", "160"])]
)
def test_images_per_s_and_energy_per_image_are_the_batch_over_the_pass(batch: str, extra: list[str]) -> None:
    out = _json(*RESNET, "--batch", batch, *extra)
    n = int(batch)
    # one pass runs the whole batch: images per second and joules per image are the batch's share of it
    assert out["samples_per_s"] == pytest.approx(n / out["latency_s"], rel=1e-12)
    assert out["energy_per_sample_j"] == pytest.approx(out["energy_j"] / n, rel=1e-12)
    # the settings echoed are the flags given, the defaults where none was (README: 224 px, nchw)
    size, layout = (224, "nhwc") if "--memory-format" in extra else (160, "nchw")
    assert (out["batch"], out["image_size"], out["memory_format"]) == (n, size, layout)


def test_the_keys_are_the_vision_training_steps_and_an_llm_pass_has_none() -> None:
    """One naming: a vision training step's `--json` gives samples_per_s and energy_per_sample_j; an LLM
    pass (tokens, not images) gets neither."""
    per_image = {"samples_per_s", "energy_per_sample_j"}
    step = _json("predict", "--model", "resnet-50", "--gpu", "h100-sxm", "--training", "--micro-batch", "8")
    assert per_image <= step.keys() and per_image <= _json(*RESNET, "--batch", "8").keys()
    llm = _json("predict", "--model", "gpt2", "--phase", "prefill", "--seq-len", "128")
    assert not (per_image | {"image_size"}) & llm.keys()


def test_a_vit_pass_names_its_attention_as_its_layout() -> None:
    out = _json("predict", "--model", "vit-b-16", "--batch", "4", "--attention", "eager")
    assert (out["batch"], out["image_size"], out["attention"]) == (4, 224, "eager")
    assert "memory_format" not in out  # a ViT has no convolutions to lay out (the flag is refused)


def test_the_text_table_shows_images_per_s_and_energy_per_image() -> None:
    result = CliRunner().invoke(
        app, [*RESNET, "--batch", "64", "--memory-format", "nhwc"], terminal_width=200
    )
    assert result.exit_code == 0, result.output
    out = _json(*RESNET, "--batch", "64", "--memory-format", "nhwc")
    rows = dict(
        (cells[1].strip(), cells[2].strip())
        for line in result.stdout.splitlines()
        if len(cells := line.split("│")) == 4
    )
    assert rows["images/s"] == f"{64 / out['latency_s']:,.1f}"
    assert rows["energy per image (J)"] == format(out["energy_j"] / 64, ".4g")
    assert "64 images of 224 px" in result.stdout.splitlines()[0]

"""Vision models: parameter counts against torchvision's published totals; a training step runs."""

from __future__ import annotations

import pytest

from dse.hardware.catalog import load_gpu
from dse.training.predict import predict_training
from dse.training.step import TrainingRequest
from dse.workload.vision import build_vision_graph, load_vision_model


@pytest.mark.parametrize(
    ("model", "published_m"),
    [("resnet-18", 11.7), ("resnet-50", 25.6), ("resnet-152", 60.2), ("vgg-16", 138.4), ("vit-b-16", 86.6),
     ("vit-l-16", 304.3), ("mobilenet-v2", 3.50), ("efficientnet-b0", 5.29), ("efficientnet-b4", 19.34)],
)  # fmt: skip
def test_param_counts(model: str, published_m: float) -> None:
    _, params = build_vision_graph(load_vision_model(model), batch=1)
    assert params / 1e6 == pytest.approx(published_m, abs=0.06)


def test_vision_training_step() -> None:
    req = TrainingRequest(micro_batch=64, global_batch=64, image_size=224, precision="fp16", optimizer="sgd")
    m = predict_training("resnet-50", load_gpu("a100-sxm-80gb"), req).metrics()
    assert m["feasible"] and 0 < m["mfu"] < 1 and m["samples_per_s"] > 0 and "energy_per_sample_j" in m


def test_depthwise_convolutions_stream_their_input_and_output_and_reread_them_per_tap_in_backward() -> None:
    from dse.workload.backward import build_backward_graph
    from dse.workload.ops import ElementwiseOp

    forward, _ = build_vision_graph(load_vision_model("mobilenet-v2"), batch=2)
    dw = [op for op in forward.ops if isinstance(op, ElementwiseOp) and op.kind == "depthwise3x3"]
    assert len(dw) == 17  # one per inverted-residual block
    assert dw[0].flop == 18 * dw[0].num_elements
    # first block: stride 1, 32 channels at 112 x 112: input = output; stage 2 opens with stride 2 (96 ch)
    assert dw[0].num_elements == 2 * 112 * 112 * 32
    assert dw[1].num_elements == (2 * 112 * 112 * 96 + 2 * 56 * 56 * 96) // 2
    grads = {op.name: op for op in build_backward_graph(forward).ops}
    dgrad, wgrad = grads[f"{dw[1].name}_dgrad"], grads[f"{dw[1].name}_wgrad"]
    assert dgrad.num_elements == dw[1].num_elements and dgrad.kind == "depthwise3x3"
    assert wgrad.kind == "copy" and wgrad.num_elements == 9 * dw[1].num_elements  # x and dy once per tap


def test_depthwise_backward_makes_training_slower_than_its_flops_suggest() -> None:
    """EfficientNet-B0 trains no faster than ResNet-50 on an A100 (DeepLearningExamples, AMP: 2489 vs
    2470 img/s) despite 10x fewer FLOPs: the per-tap re-reads of the depthwise weight gradient."""
    gpu = load_gpu("a100-sxm-80gb")
    req = TrainingRequest(micro_batch=256, global_batch=256, precision="fp16", optimizer="sgd")
    eff = predict_training("efficientnet-b0", gpu, req).metrics()["samples_per_s"]
    res = predict_training("resnet-50", gpu, req).metrics()["samples_per_s"]
    assert eff < 1.5 * res


def test_wide_se_widens_only_the_squeeze() -> None:
    _, base = build_vision_graph(load_vision_model("efficientnet-b0"), batch=1)
    _, wide = build_vision_graph(load_vision_model("efficientnet-widese-b0"), batch=1)
    assert wide > base

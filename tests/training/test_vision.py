"""Vision models: parameter counts against torchvision's published totals; a training step runs."""

from __future__ import annotations

import pytest

from dse.hardware.catalog import load_gpu
from dse.training.predict import predict_training
from dse.training.step import TrainingRequest
from dse.workload.ops import ElementwiseOp, GemmOp
from dse.workload.vision import build_vision_graph, load_vision_model


@pytest.mark.parametrize(
    ("model", "published_m"),
    [("resnet-18", 11.7), ("resnet-50", 25.6), ("resnet-152", 60.2), ("vgg-16", 138.4), ("vit-b-16", 86.6),
     ("vit-l-16", 304.3), ("mobilenet-v2", 3.50), ("efficientnet-b0", 5.29), ("efficientnet-b4", 19.34),
     ("vit-s-16", 22.05), ("vit-b-32", 88.22), ("vit-l-32", 306.54),  # ViT-S/16: timm's (DeiT-S)
     ("resnet-34", 21.80), ("resnet-101", 44.55), ("vit-h-14", 632.05), ("efficientnet-b1", 7.79),
     ("efficientnet-b2", 9.11), ("efficientnet-b3", 12.23), ("efficientnet-b5", 30.39),  # torchvision's docs
     ("resnet-200", 64.67), ("vit-ti-16", 5.72), ("vit-s-32", 22.88), ("vit-b-8", 86.58)],  # timm's tables
)  # fmt: skip
def test_param_counts(model: str, published_m: float) -> None:
    _, params = build_vision_graph(load_vision_model(model), batch=1)
    assert params / 1e6 == pytest.approx(published_m, abs=0.06)


def test_vision_training_step() -> None:
    req = TrainingRequest(micro_batch=64, global_batch=64, image_size=224, precision="fp16", optimizer="sgd")
    m = predict_training("resnet-50", load_gpu("a100-sxm-80gb"), req).metrics()
    assert m["feasible"] and 0 < m["mfu"] < 1 and m["samples_per_s"] > 0 and "energy_per_sample_j" in m


def test_depthwise_convolutions_stream_once_and_their_library_sets_the_weight_gradient() -> None:
    """(I + O) / 2 elements per depthwise op; channels-last (cuDNN) reads x and dy once for the weight
    gradient, NCHW (PyTorch's own kernel, one thread block per channel and tap) once per tap."""
    from dse.workload.backward import build_backward_graph
    from dse.workload.ops import ElementwiseOp

    for fmt, kind, wgrad_kind, taps in (
        ("nhwc", "depthwise3x3", "depthwise3x3_wgrad", 1), ("nchw", "depthwise3x3_aten", "copy", 9)
    ):  # fmt: skip
        model = load_vision_model("mobilenet-v2")
        forward, _ = build_vision_graph(model, batch=2, precision="bf16", memory_format=fmt)
        dw = [op for op in forward.ops if isinstance(op, ElementwiseOp) and op.kind == kind]
        assert len(dw) == 17  # one per inverted-residual block
        assert dw[0].flop == 18 * dw[0].num_elements
        # first block: stride 1, 32 channels at 112 x 112: input = output; stage 2 opens with stride 2 (96 ch)
        assert dw[0].num_elements == 2 * 112 * 112 * 32
        assert dw[1].num_elements == (2 * 112 * 112 * 96 + 2 * 56 * 56 * 96) // 2
        grads = {op.name: op for op in build_backward_graph(forward).ops}
        dgrad, wgrad = grads[f"{dw[1].name}_dgrad"], grads[f"{dw[1].name}_wgrad"]
        assert dgrad.num_elements == dw[1].num_elements and dgrad.kind == f"{kind}_dgrad"
        assert wgrad.kind == wgrad_kind and wgrad.num_elements == taps * dw[1].num_elements


def test_fp16_nchw_depthwise_takes_cudnn_where_pytorchs_table_sends_it() -> None:
    """PyTorch's `use_cudnn_depthwise` (cuDNN 8.2+): fp16 NCHW goes to cuDNN at stride 1 and at stride 2
    only with 512+ channels or 256+ at a width of 28+; bf16 NCHW never. MobileNet-V2 (batch 8): all 13
    stride-1 layers, and of the 4 stride-2 layers (96 channels at 112 px, 144 at 56, 192 at 28, 576 at
    14) only the last."""
    model = load_vision_model("mobilenet-v2")

    def kinds(precision: str) -> list[str]:
        graph, _ = build_vision_graph(model, batch=8, precision=precision, memory_format="nchw")
        return [o.kind for o in graph.ops if isinstance(o, ElementwiseOp) and o.kind.startswith("depthwise")]

    assert kinds("fp16").count("depthwise3x3_aten") == 3 and len(kinds("fp16")) == 17
    assert kinds("bf16") == ["depthwise3x3_aten"] * 17


def test_depthwise_network_trains_about_as_fast_as_resnet50_despite_a_tenth_of_its_flops() -> None:
    """Our H100 steps (bf16 autocast, channels-last, batch 256, `dse/calibrate/measured`): EfficientNet-B0
    64.3 / 57.7 = 1.11x ResNet-50's images per second with a tenth of the FLOPs: its depthwise, SE, SiLU
    and batch-norm kernels are memory- and latency-bound."""
    gpu = load_gpu("h100-sxm")
    req = TrainingRequest(
        micro_batch=256, global_batch=256, precision="bf16", optimizer="sgd", memory_format="nhwc"
    )
    eff = predict_training("efficientnet-b0", gpu, req).metrics()["samples_per_s"]
    res = predict_training("resnet-50", gpu, req).metrics()["samples_per_s"]
    assert 1.0 * res < eff < 1.4 * res


def _resnet50_relu_elements_per_image() -> int:
    """torchvision's Bottleneck: relu(bn1(conv1)), relu(bn2(conv2)) at the bottleneck width (conv2 carries
    the stride, v1.5) and relu(bn3(conv3) + identity) at 4x the width; the stem's relu at 112 x 112."""
    return _resnet50_elements_per_image(downsample=False)


def _resnet50_elements_per_image(downsample: bool) -> int:
    """conv1, conv2 and conv3 outputs of every Bottleneck plus the stem's (the ReLU-covered tensors), and
    with `downsample` each stage's first-block 1x1 strided downsample (v1.5)."""
    total, hw = 64 * 112 * 112, 56
    for stage, blocks in enumerate((3, 4, 6, 3)):
        width = 64 * 2**stage
        for i in range(blocks):
            out = hw // 2 if stage > 0 and i == 0 else hw
            total += width * hw * hw + width * out * out + 4 * width * out * out
            total += 4 * width * out * out if downsample and i == 0 else 0
            hw = out
    return total


def test_resnet_relus_cover_each_convolution_output() -> None:
    from dse.workload.ops import ElementwiseOp

    forward, _ = build_vision_graph(load_vision_model("resnet-50"), batch=3)
    relu = sum(
        op.num_elements * op.count
        for op in forward.ops
        if isinstance(op, ElementwiseOp) and op.kind == "relu"
    )
    assert relu == 3 * _resnet50_relu_elements_per_image()


def test_nchw_tensor_core_convolutions_pay_layout_transposes() -> None:
    """cuDNN's tensor-core convolutions run NHWC: NCHW tensors are transposed in and out of every one
    (NVIDIA, Convolutional Layers User's Guide, "NCHW vs. NHWC"); fp32 CUDA-core kernels read NCHW."""
    from dse.workload.backward import LAYOUT_SUFFIX, build_backward_graph
    from dse.workload.ops import ElementwiseOp, GemmOp

    model = load_vision_model("resnet-18")
    nchw, _ = build_vision_graph(model, batch=2, precision="fp16", memory_format="nchw")
    convs = [op for op in nchw.ops if isinstance(op, GemmOp) and not op.name.endswith("/fc")]
    assert len(convs) == 20  # 1 stem + 8 blocks x 2 + 3 downsamples
    moves = [op for op in nchw.ops if isinstance(op, ElementwiseOp) and op.name.endswith(LAYOUT_SUFFIX)]
    assert len(moves) == 2 * len(convs)
    # the stem reads 2 x 3 x 224 x 224 images and writes 2 x 64 x 112 x 112 outputs
    assert moves[0].num_elements == 2 * 3 * 224 * 224 and moves[1].num_elements == 2 * 64 * 112 * 112
    back = [op for op in build_backward_graph(nchw).ops if op.name.endswith(LAYOUT_SUFFIX + "_bwd")]
    assert sum(op.num_elements * op.count for op in back) == sum(op.num_elements for op in moves)
    for fmt, precision in (("nhwc", "fp16"), ("nchw", "fp32")):
        graph, _ = build_vision_graph(model, batch=2, precision=precision, memory_format=fmt)
        assert not [op for op in graph.ops if op.name.endswith(LAYOUT_SUFFIX)]


def test_channels_last_trains_faster_only_on_tensor_cores() -> None:
    """timm on an RTX 3090 (AMP, batch 512): ResNet-50 1218 img/s channels-last vs 826 NCHW (1.47x)."""

    def rate(gpu: str, precision: str, fmt: str) -> float:
        req = TrainingRequest(
            micro_batch=128, global_batch=128, precision=precision, optimizer="sgd", memory_format=fmt
        )
        return float(predict_training("resnet-50", load_gpu(gpu), req).metrics()["samples_per_s"])

    assert 1.2 < rate("rtx-3090", "fp16", "nhwc") / rate("rtx-3090", "fp16", "nchw") < 1.8
    # fp32 convolutions have no layout copies: the layouts differ only in cuDNN's batch-norm kernels, its
    # per-channel NCHW ones bandwidth-bound on a V100's 900 GB/s as the streaming NHWC passes are
    assert rate("v100-sxm2", "fp32", "nhwc") == pytest.approx(rate("v100-sxm2", "fp32", "nchw"), rel=0.01)


def test_unknown_memory_format_is_refused() -> None:
    from dse.errors import ConfigError

    with pytest.raises(ConfigError, match="memory format"):
        build_vision_graph(load_vision_model("resnet-18"), batch=1, memory_format="chwn")


def test_vision_steps_run_library_kernels_without_the_llm_ratios() -> None:
    """The fitted training ratios come from transformer LLM rows; a vision step does not take them."""
    from dse.training.step import TrainingCoeffs, default_training_coeffs

    gpu = load_gpu("a100-sxm-80gb")
    assert default_training_coeffs(gpu).kernel_scale > 1.0  # LLM steps keep them
    req = TrainingRequest(micro_batch=64, global_batch=64, precision="fp16", optimizer="sgd")
    default = predict_training("resnet-50", gpu, req).step_time_s
    assert default == pytest.approx(
        predict_training("resnet-50", gpu, req, train_coeffs=TrainingCoeffs()).step_time_s
    )


def test_wide_se_widens_only_the_squeeze() -> None:
    _, base = build_vision_graph(load_vision_model("efficientnet-b0"), batch=1)
    _, wide = build_vision_graph(load_vision_model("efficientnet-widese-b0"), batch=1)
    assert wide > base


def _resnet50_conv_output_elements_per_image() -> int:
    """Every convolution's output in torchvision's ResNet-50 (v1.5: the stride on conv2, a 1x1 strided
    downsample in each stage's first block)."""
    return _resnet50_elements_per_image(downsample=True)


def test_in_place_relus_residual_adds_and_layout_transposes_keep_no_tensor_of_their_own() -> None:
    """Autograd keeps each convolution's output (batch norm's input) and each batch norm's output, which
    the in-place ReLU and `+=` then overwrite; cuDNN frees its layout transposes after each call."""
    gpu = load_gpu("rtx-3090")

    def kept_bytes(fmt: str) -> float:
        req = TrainingRequest(
            micro_batch=4, global_batch=4, precision="fp16", optimizer="sgd", memory_format=fmt
        )
        return float(predict_training("resnet-50", gpu, req).memory.activations_bytes)

    assert kept_bytes("nchw") == kept_bytes("nhwc")
    # conv and BN outputs, the max-pool's 64 x 56 x 56, the average pool's 2048 and the 1000 logits
    per_image = 2 * _resnet50_conv_output_elements_per_image() + 64 * 56 * 56 + 2048 + 1000
    assert kept_bytes("nhwc") == pytest.approx(4 * 2 * per_image)


@pytest.mark.parametrize(
    ("model", "size"), [("resnet-50", 0), ("vgg-16", 16), ("vit-b-16", 8), ("vit-b-16", 225)]
)
def test_an_image_too_small_or_off_the_patch_grid_is_one_clear_error(model: str, size: int) -> None:
    from dse.errors import ConfigError

    with pytest.raises(ConfigError, match=f"--image-size {size}"):
        build_vision_graph(load_vision_model(model), batch=1, image_size=size)


@pytest.mark.parametrize(
    ("model", "kept"),
    [("resnet-50", False), ("efficientnet-b0", False), ("mobilenet-v2", True), ("vit-b-16", True)],
)
def test_residual_adds_are_kept_unless_torchvision_writes_them_in_place(model: str, kept: bool) -> None:
    # ResNet's `out += identity` and EfficientNet's `result += input` write in place; MobileNet-V2's
    # `x + self.conv(x)` and ViT's `x = x + input` make tensors the next layer saves for its backward.
    from dse.training.vision import IN_PLACE_RESIDUAL_FAMILIES, _kept

    vm = load_vision_model(model)
    graph, _ = build_vision_graph(vm, batch=2, image_size=224)
    ops = graph.ops
    adds = [
        (op, nxt) for op, nxt in zip(ops, (*ops[1:], None), strict=True) if op.name.endswith("/residual_add")
    ]
    assert adds, "the model has residual adds"
    in_place = vm.family in IN_PLACE_RESIDUAL_FAMILIES
    assert all(_kept(op, nxt, in_place) == kept for op, nxt in adds)


def test_training_batch_norm_reads_its_input_twice_forward_and_four_times_backward() -> None:
    """Batch statistics need the whole channel before any output (module docstring of dse.workload.vision):
    forward 2 reads + 1 write of the activation, backward 4 reads + 1 write; inference one read, one write."""
    from dse.workload.backward import build_backward_graph
    from dse.workload.ops import NormOp

    vm = load_vision_model("resnet-18")
    infer, _ = build_vision_graph(vm, batch=2, precision="fp16")
    train, params = build_vision_graph(vm, batch=2, precision="fp16", training=True)
    assert params == build_vision_graph(vm, batch=2, precision="fp16")[1]
    stem = next(op for op in infer.ops if op.name.endswith("stem/conv_bn"))
    assert isinstance(stem, NormOp)
    act_bytes = 2 * 112 * 112 * 64 * 2  # 2 images, 64 channels at 112 x 112, fp16
    assert stem.rows * stem.cols * 2 == act_bytes
    fwd = [op for op in train.ops if op.name.startswith(stem.name)]
    assert [op.kind for op in fwd] == ["bn_stats", "bn_apply"]
    assert sum(op.min_dram_bytes for op in fwd) == 3 * act_bytes
    bwd = [op for op in build_backward_graph(train).ops if op.name.startswith(stem.name)]
    assert [op.kind for op in bwd] == ["bn_bwd_reduce", "bn_bwd_apply"]  # PyTorch's order
    assert sum(op.min_dram_bytes for op in bwd) == 5 * act_bytes
    # the same number of batch norms either way
    assert sum(isinstance(op, NormOp) for op in infer.ops) == sum(
        getattr(op, "kind", "") == "bn_apply" for op in train.ops
    )


@pytest.mark.parametrize("model", ["resnet-50", "efficientnet-b0", "vit-b-16"])
def test_full_recomputation_of_a_vision_model_trades_time_for_memory(model: str) -> None:
    """`full` keeps only the input, so the backward re-runs the whole forward: slower by about one forward,
    with far less activation memory (CNN layers have no `/layer[` names; a whole-graph checkpoint here)."""
    gpu = load_gpu("a100-sxm-80gb")

    def step(recompute: str) -> tuple[float, float]:
        req = TrainingRequest(
            micro_batch=64, global_batch=64, precision="fp16", optimizer="sgd", recompute=recompute
        )
        est = predict_training(model, gpu, req)
        return est.step_time_s, est.memory.activations_bytes

    (t0, m0), (t1, m1) = step("none"), step("full")
    assert 1.15 * t0 < t1 < 1.6 * t0 and m1 < 0.5 * m0
    # the largest single output twice, whatever the depth: one layer's op, not its sum over the layers
    graph, _ = build_vision_graph(load_vision_model(model), batch=64, precision="fp16", training=True)
    largest = max(
        op.batch * op.m * op.n * 2 if isinstance(op, GemmOp) else op.num_elements * 2
        for op in graph.ops
        if isinstance(op, GemmOp | ElementwiseOp) and not getattr(op, "out_dtype", None)
    )
    assert m1 <= 2 * largest * 1.01


def test_nchw_layout_transposes_of_training_steps_take_about_what_our_h100_profile_measured() -> None:
    """Our H100 kernel profile times cuDNN's nchwToNhwc / nhwcToNchw kernels per step in four NCHW training
    runs (ResNet-50 bf16, fp16 and TF32, ResNet-18 bf16; cuDNN 9.19): 53 ms together. The modelled
    transposes of forward and backward (the backward copying the forward's once) take 69 ms, within 35%
    (copying them twice took 104 ms, +96%). Per run the model is -53% (ResNet-18, whose 3x3 convolutions
    cuDNN transposes more often) to +86% (TF32, whose fp32 tensors it transposes less often)."""
    import csv
    from collections import defaultdict
    from importlib import resources

    from dse.hardware.catalog import load_gpu
    from dse.perf.registry import estimate_ops
    from dse.perf.types import OperatingPoint
    from dse.training.step import training_latency_coeffs
    from dse.workload.backward import build_backward_graph

    measured_s: dict[tuple[str, str, int], float] = defaultdict(float)
    path = resources.files("dse.calibrate.measured") / "h100_sxm_training_kernels.csv"
    with path.open() as fh:
        for r in csv.DictReader(fh):
            transpose = "nchwToNhwc" in r["kernel"] or "nhwcToNchw" in r["kernel"]
            if r["mode"] == "train" and r["memory_format"] == "contiguous" and transpose:
                measured_s[(r["model"], r["precision"], int(r["batch"]))] += float(r["us_per_step"]) * 1e-6
    assert len(measured_s) == 4
    gpu = load_gpu("h100-sxm")
    coeffs = training_latency_coeffs(gpu)
    predicted_s = 0.0
    for model, precision, batch in measured_s:
        tf32 = "tf32" if precision == "fp32" else precision  # the profile's fp32 runs TF32 convolutions
        forward, _ = build_vision_graph(
            load_vision_model(model), batch=batch, memory_format="nchw", training=True, precision=tf32
        )
        ops = [op for g in (forward, build_backward_graph(forward)) for op in g.ops if "nchw_nhwc" in op.name]
        est = estimate_ops(ops, gpu, OperatingPoint(), coeffs)
        predicted_s += sum(e.latency_s * op.count for op, e in zip(ops, est, strict=True))
    assert predicted_s == pytest.approx(sum(measured_s.values()), rel=0.35)


def test_fp8_training_is_refused_for_convolution_networks() -> None:
    """PyTorch has no fp8 convolution training (cuDNN's fp8 convolutions are inference kernels); fp8
    training recipes cover Linear layers, so a ViT takes it and a CNN is refused with the reason."""
    from dse.errors import ConfigError
    from dse.training.predict import check_model_options
    from dse.training.step import TrainingRequest

    fp8 = TrainingRequest(micro_batch=8, global_batch=8, precision="fp8")
    with pytest.raises(ConfigError, match="resnet-50 trains convolutions"):
        check_model_options("resnet-50", fp8)
    check_model_options("vit-b-16", fp8)


def test_se_blocks_and_head_pool_run_the_kernels_autograd_runs() -> None:
    """Our H100 EfficientNet-B0 profile (`dse/calibrate/measured`): 17 mean reductions (16 SE squeezes and
    the head's pool) and 17 expand-and-scale kernels (their backward); per SE block the scale's backward
    is dx = dy * gate and a multiply and sum for dgate, and x's two gradients are added. Before, the pools
    were copies writing their whole input and each backward one add."""
    from dse.workload.backward import build_backward_graph

    forward, _ = build_vision_graph(load_vision_model("efficientnet-b0"), batch=2, training=True)
    pools = [op for op in forward.ops if op.name.endswith(("/se/pool", "/avgpool"))]
    assert len(pools) == 17 and all(isinstance(op, ElementwiseOp) and op.kind == "reduce" for op in pools)
    grads = {op.name: op for op in build_backward_graph(forward).ops}
    se = pools[0].name.removesuffix("/pool")
    suffixes = ("/scale_bwd", "/scale_bwd_gate", "/scale_bwd_gate_sum", "/pool_bwd", "/pool_bwd_accumulate")
    kinds = {suffix: grads[f"{se}{suffix}"].kind for suffix in suffixes}
    assert kinds == {
        "/scale_bwd": "mul", "/scale_bwd_gate": "mul", "/scale_bwd_gate_sum": "reduce", "/pool_bwd": "scale",
        "/pool_bwd_accumulate": "add",
    }  # fmt: skip
    assert sum(name.endswith("pool_bwd") for name in grads) == 17
    # the head's pool has one reader: no accumulation
    assert f"{pools[-1].name}_bwd_accumulate" not in grads

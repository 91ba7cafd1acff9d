"""ViT as eager PyTorch runs it under autocast (`dse.workload.vision` module docstring): an fp32 residual
stream and LayerNorms with a cast before each Linear, the casts and contiguous copies mirrored in the
backward, what autograd keeps, and the unfused (eager) attention beside the fused one."""

from __future__ import annotations

import pytest

from dse.errors import ConfigError
from dse.hardware.catalog import load_gpu
from dse.perf.coeffs import load_default_coeffs
from dse.perf.predict import predict_graph
from dse.training.parallel import ParallelLayout
from dse.training.step import TrainingRequest
from dse.training.vision import _kept, predict_vision_training
from dse.workload.backward import CONTIGUOUS_SUFFIX, backward_ops, build_backward_graph
from dse.workload.ops import AttentionOp, ElementwiseOp, GemmOp, NormOp, SoftmaxOp
from dse.workload.vision import build_vision_graph, is_vision_model, load_vision_model

VIT = load_vision_model("vit-b-16")


def _graph(precision: str = "bf16", attention: str = "flash", training: bool = False):
    graph, _ = build_vision_graph(VIT, batch=4, precision=precision, attention=attention, training=training)
    return graph.ops


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_half_precision_runs_an_fp32_residual_stream_with_a_cast_before_each_linear_after_a_norm(precision):
    ops = _graph(precision)
    norms = [op for op in ops if isinstance(op, NormOp)]
    adds = [op for op in ops if isinstance(op, ElementwiseOp) and op.kind == "add"]
    assert norms and all(op.dtype == "fp32" for op in norms)  # autocast's float32 list
    assert adds and all(op.dtype == "fp32" for op in adds)  # half + fp32 promotes
    # the class token (an fp32 parameter) promotes the patch embeddings: one cast of all the tokens to fp32
    (cat,) = [op for op in ops if op.name.endswith("/class_token_cat")]
    assert (cat.dtype, cat.out_dtype) == (precision, "fp32") and cat.num_elements == 4 * 197 * 768
    for i, op in enumerate(ops):  # a LayerNorm feeding a Linear goes through a cast to half precision
        if isinstance(op, NormOp) and "/layer[" in op.name:
            cast, linear = ops[i + 1], ops[i + 2]
            assert isinstance(cast, ElementwiseOp) and (cast.kind, cast.dtype, cast.out_dtype) == (
                "cast", "fp32", precision,
            )  # fmt: skip
            assert isinstance(linear, GemmOp) and linear.dtype == precision
            assert cast.num_elements == linear.m * linear.k


def test_fp32_has_nothing_to_cast():
    ops = _graph("fp32")
    assert not [op for op in ops if isinstance(op, ElementwiseOp) and op.kind == "cast"]
    assert all(op.dtype == "fp32" for op in ops if isinstance(op, NormOp))


def test_a_cast_casts_its_gradient_back_and_a_quantization_keeps_its_mirrored_pass():
    cast = ElementwiseOp(name="x/cast", kind="cast", num_elements=10, dtype="fp32", out_dtype="bf16")
    (grad,) = backward_ops(cast)
    assert (grad.kind, grad.dtype, grad.out_dtype, grad.num_elements) == ("cast", "bf16", "fp32", 10)
    quant = ElementwiseOp(name="x/quant", kind="cast", num_elements=10, dtype="bf16", out_dtype="fp8")
    (qgrad,) = backward_ops(quant)
    assert (qgrad.dtype, qgrad.out_dtype) == ("bf16", None)  # the pass it always had (LLM fp8 training)


def test_a_contiguous_copy_copies_its_gradient_back_once():
    copy = ElementwiseOp(name=f"x/heads{CONTIGUOUS_SUFFIX}", kind="copy", num_elements=8, count=3)
    (grad,) = backward_ops(copy)
    assert (grad.kind, grad.num_elements, grad.count) == ("copy", 8, 3)  # not an embedding's scatter-add
    gather = ElementwiseOp(name="x/embed", kind="copy", num_elements=8)
    assert backward_ops(gather)[0].kind == "add"


# What PyTorch's autograd saves in one ViT layer under autocast, as `torch.autograd.graph.saved_tensors_hooks`
# lists it for a timm-style block (a reviewer's CPU check with CUDA's fp32 softmax): the LayerNorms' inputs
# (the residual stream: the residual adds' outputs), the two casts the Linears read, the MLP's fc1 and GELU
# outputs, and for the attention SDPA's inputs and output (fused) or the Q, K, V copies, both probability
# tensors and the context's copy (eager). Nothing else of the layer lives until its backward.
KEPT_FUSED = {"attn/cast", "attn/qkv_proj", "attn/attention", "attn/residual_add", "mlp/cast", "mlp/up_proj",
              "mlp/act", "mlp/residual_add"}  # fmt: skip
KEPT_EAGER = {"attn/cast", "attn/qkv_to_heads/contiguous", "attn/softmax", "attn/probs_cast",
              "attn/heads_to_tokens/contiguous", "attn/residual_add", "mlp/cast", "mlp/up_proj", "mlp/act",
              "mlp/residual_add"}  # fmt: skip


@pytest.mark.parametrize(("attention", "expected"), [("flash", KEPT_FUSED), ("eager", KEPT_EAGER)])
def test_autograd_keeps_what_pytorch_saves_in_a_layer(attention, expected):
    ops = _graph(attention=attention, training=True)
    pairs = zip(ops, (*ops[1:], None), strict=True)
    kept = {op.name.split("]/", 1)[1] for op, nxt in pairs if "/layer[" in op.name and _kept(op, nxt, False)}
    assert kept == expected


def test_a_softmax_output_counts_its_bytes():
    from dse.workload.vision import op_output_bytes

    soft = SoftmaxOp(name="x/softmax", rows=6, cols=5, dtype="fp32")
    assert op_output_bytes(soft) == 6 * 5 * 4


def test_eager_attention_is_the_unfused_kernels_with_the_fused_ones_flops():
    flash = [op for op in _graph() if isinstance(op, AttentionOp)]
    eager = _graph(attention="eager")
    assert not [op for op in eager if isinstance(op, AttentionOp)]
    bmms = [op for op in eager if isinstance(op, GemmOp) and not op.b_shared]
    assert len(bmms) == 2 and all(op.batch == 4 * VIT.heads for op in bmms)
    # the same matmul FLOPs: 4 n h s^2 d per layer, both products
    assert sum(op.flop for op in bmms) == pytest.approx(flash[0].flop)
    (soft,) = [op for op in eager if isinstance(op, SoftmaxOp)]
    assert soft.dtype == "fp32" and soft.rows * soft.cols == 4 * VIT.heads * 197 * 197  # autocast's fp32
    gpu = load_gpu("h100-sxm")
    flash_s = predict_graph(build_vision_graph(VIT, batch=64)[0], gpu).latency_s
    eager_s = predict_graph(build_vision_graph(VIT, batch=64, attention="eager")[0], gpu).latency_s
    assert eager_s > flash_s  # the scores go through DRAM three times


def test_eager_vit_training_step_backpropagates_through_the_unfused_kernels():
    fwd, _ = build_vision_graph(VIT, batch=4, attention="eager", training=True)
    names = [op.name for op in build_backward_graph(fwd).ops]
    assert any(n.endswith("/attn/scores_dgrad") for n in names)
    assert any(n.endswith("/attn/probs_cast_bwd") for n in names)


def test_a_convolutional_network_has_no_attention_to_make_eager():
    with pytest.raises(ConfigError, match="--attention"):
        build_vision_graph(load_vision_model("resnet-50"), batch=1, attention="eager")
    with pytest.raises(ConfigError, match="flash or eager"):
        build_vision_graph(VIT, batch=1, attention="paged")


def test_timm_and_deit_names_map_to_the_shipped_vits():
    for name, ours in (("vit_small_patch16_224", "vit-s-16"), ("deit_base_patch16_224", "vit-b-16"),
                       ("vit_large_patch16_224", "vit-l-16")):  # fmt: skip
        assert is_vision_model(name) and load_vision_model(name).name == ours


@pytest.mark.parametrize("gpu_name", ["a100-sxm-80gb", "h100-sxm"])
def test_a_steps_forward_costs_what_the_same_forward_costs_alone(gpu_name: str) -> None:
    """A training step runs the generation's shipped latency corrections, as `dse predict` runs a forward
    pass (before, it ran uncorrected: A100 ViT-S/16 bf16 at batch 128 took 10.3 ms forward in a step and
    16.5 ms alone). Eager attention: GEMMs and a softmax, no flash kernel (whose serving corrections a
    step leaves out)."""
    gpu, model = load_gpu(gpu_name), load_vision_model("vit-s-16")
    req = TrainingRequest(
        micro_batch=128, global_batch=128, precision="bf16", attention="eager",
        layout=ParallelLayout(num_gpus=1),
    )  # fmt: skip
    step = predict_vision_training(model, gpu, req)
    graph, _ = build_vision_graph(
        model, batch=128, image_size=224, precision="bf16", memory_format="nchw", attention="eager"
    )
    alone = predict_graph(graph, gpu, coeffs=load_default_coeffs(gpu))
    assert step.phase_time_s["forward"] == pytest.approx(alone.latency_s, rel=1e-12)

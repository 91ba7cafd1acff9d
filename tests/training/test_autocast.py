"""Mixed precision by torch.autocast over fp32 weights (`--autocast`, dse.training.autocast), GPT-2's eager
GELU formula (dse.training.eager) and torch's foreach AdamW (`adamw-foreach`, dse.training.optimizer)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.errors import ConfigError
from dse.hardware.catalog import load_gpu
from dse.training.eager import eager_activation_bytes_per_layer, eager_ops
from dse.training.llm import llm_step_parts, predict_llm_training
from dse.training.optimizer import build_optimizer_graph
from dse.training.parallel import ParallelLayout
from dse.training.predict import check_model_options
from dse.training.step import TrainingRequest
from dse.workload.graph import WorkloadGraph
from dse.workload.models import arch_from_hf_config
from dse.workload.ops import ElementwiseOp, GemmOp, NormOp

GPU = load_gpu("h100-sxm")
D, LAYERS, VOCAB = 256, 2, 50304


def _gpt2(positions: int = 2048) -> object:
    config = {"model_type": "gpt2", "n_embd": D, "n_layer": LAYERS, "n_head": 4, "vocab_size": VOCAB}
    return arch_from_hf_config({**config, "n_positions": positions}, name="gpt2-test")


def _request(autocast: bool = True, **kw: object) -> TrainingRequest:
    base: dict[str, object] = {"micro_batch": 4, "global_batch": 4, "seq_len": 1024, "eager_ops": True}
    base |= {"autocast": autocast, "optimizer": "adamw-foreach", "layout": ParallelLayout(num_gpus=1)}
    return TrainingRequest(**{**base, **kw})  # type: ignore[arg-type]


def _params() -> float:
    # wte, wpe, per layer qkv / o / fc / proj weights and biases and two LayerNorms, the final LayerNorm
    return VOCAB * D + 2048 * D + LAYERS * (12 * D * D + 13 * D) + 2 * D


def _bytes(ops: list) -> float:
    return sum(op.min_dram_bytes * op.count for op in ops)


def test_gelu_formula_runs_its_kernels_in_fp32_under_autocast() -> None:
    """`0.5 * x * (1 + tanh(c * (x + 0.044715 * pow(x, 3))))` in bf16: pow 4, two constant products 4 + 4,
    the add of x 6, tanh 4, + 1 4, 0.5 x 4, the product 6 = 36 bytes per element in eight kernels. Under
    autocast pow casts x to fp32 (2 + 4) and the chain runs fp32: pow 8, products 8 + 8, add 12, tanh 8,
    + 1 8, 0.5 x (bf16) 4, product 12, the cast back for the next Linear 4 + 2 = 80 bytes in ten."""
    n = 1 << 20
    gelu = ElementwiseOp(name="m/layer[0-1]/mlp/act", kind="gelu", num_elements=n, dtype="bf16", count=2)
    bf16 = eager_ops(gelu, gelu_formula=True)
    fp32 = eager_ops(gelu, gelu_formula=True, autocast=True)
    assert (len(bf16), len(fp32)) == (8, 10)
    assert _bytes(bf16) == pytest.approx(2 * 36 * n) and _bytes(fp32) == pytest.approx(2 * 80 * n)
    bwd = ElementwiseOp(name="m/layer[0-1]/mlp/act_bwd", kind="gelu_mul", num_elements=n, dtype="bf16")
    assert len(eager_ops(bwd, gelu_formula=True)) == 11  # 3 x pow(x, 2) x dy and two sums into x
    assert len(eager_ops(bwd, gelu_formula=True, autocast=True)) == 13  # and the casts in and out
    assert eager_ops(gelu) == [gelu]  # another model's GELU: one ATen kernel
    # kept for the backward beyond the fused op's input: tanh, 1 + tanh and 0.5 x (2 B each in bf16);
    # under autocast tanh and 1 + tanh in fp32 and x's fp32 copy in x's place (4 + 4 + 2 + 2)
    for ops, kept in ((bf16, 6), (fp32, 12)):
        graph = WorkloadGraph(name="m/forward", ops=tuple(ops))
        assert eager_activation_bytes_per_layer(graph, 2) == pytest.approx(kept * n)


def test_autocast_forward_casts_weights_and_keeps_an_fp32_stream() -> None:
    """Each weight GEMM follows a cast of its weight (k x n elements, fp32 -> bf16), whose gradient cast
    writes the fp32 .grad; norms and residual adds run fp32, each norm followed by the cast for its Linear."""
    parts, _ = llm_step_parts(_gpt2(), _request())
    ops = parts.forward.ops
    for i, op in enumerate(ops):
        if isinstance(op, GemmOp) and op.b_shared:
            cast = ops[i - 1]
            assert isinstance(cast, ElementwiseOp) and cast.name == op.name + "/weight_cast"
            assert (cast.num_elements, cast.dtype, cast.out_dtype) == (op.k * op.n, "fp32", "bf16")
        if isinstance(op, NormOp):
            assert op.dtype == "fp32" and ops[i + 1].name == op.name + "/autocast_cast"
        if op.name.endswith("/residual_add"):
            assert op.dtype == "fp32"
    grads = [op for op in parts.backward.ops if op.name.endswith("/weight_cast_bwd")]
    assert grads and all((op.dtype, op.out_dtype) == ("bf16", "fp32") for op in grads)


def test_autocast_memory_is_the_tensors_autograd_keeps() -> None:
    """Per token and layer (d wide, MLP 4d), what the eager GPT-2 layer keeps under autocast: the two
    LayerNorms' fp32 inputs 4d + 4d and their bf16 casts 2d + 2d, q/k/v 6d, the attention output 2d, the
    GELU input's fp32 copy 16d, tanh and 1 + tanh 16d + 16d, 0.5 x 8d and the GELU output's cast 8d: 84d
    bytes. The loss keeps 12 bytes per logit at its backward. States: fp32 weights 4 B and the bf16 copies
    of the GEMM weights (12 d^2 per layer and the tied head, V d), AdamW's moments 8 B; one micro-batch's
    gradients come after its activations are freed (none at the peak), with accumulation they stay."""
    req = _request()
    tokens = req.micro_batch * req.seq_len
    _, mem = llm_step_parts(_gpt2(), req)
    assert mem.activations_bytes == pytest.approx(LAYERS * 84 * D * tokens + 12 * tokens * VOCAB)
    half = 2 * (LAYERS * 12 * D * D + VOCAB * D)
    assert mem.weights_bytes == pytest.approx(4 * _params() + half)
    assert mem.optimizer_bytes == pytest.approx(8 * _params())
    assert mem.grads_bytes == 0.0
    _, accumulating = llm_step_parts(_gpt2(), _request(global_batch=8))
    assert accumulating.grads_bytes == pytest.approx(4 * _params())


@settings(max_examples=15, deadline=None)
@given(batch=st.integers(1, 8), seq=st.sampled_from([16, 64, 256, 1024]))
def test_autocast_peak_is_the_larger_of_backward_start_and_optimizer_step(batch: int, seq: int) -> None:
    """The peak is either the backward's start (weights, bf16 copies, moments, activations) or the foreach
    AdamW step (weights, fp32 gradients, moments, one fp32 temporary per parameter), whichever is larger;
    and autocast's step is slower than the fused stacks' at the same model FLOPs."""
    req = _request(micro_batch=batch, global_batch=batch, seq_len=seq)
    _, mem = llm_step_parts(_gpt2(), req)
    p = _params()
    half = 2 * (LAYERS * 12 * D * D + VOCAB * D)
    start = 4 * p + half + 8 * p + mem.activations_bytes
    assert mem.total_bytes - mem.reserved_bytes == pytest.approx(max(start, 4 * p + 4 * p + 8 * p + 4 * p))
    mixed = predict_llm_training(_gpt2(), GPU, req)
    fused = predict_llm_training(
        _gpt2(), GPU, _request(False, micro_batch=batch, global_batch=batch, seq_len=seq)
    )
    assert mixed.step_time_s > fused.step_time_s
    assert mixed.model_flop_per_step == fused.model_flop_per_step


def test_foreach_adamw_streams_its_seven_kernels() -> None:
    """torch's `_multi_tensor_adamw`: weight decay 8, lerp 12, mul 8, addcmul 12, sqrt 8, div 8, add 8,
    addcdiv 16 = 80 bytes per parameter against a fused AdamW's 28."""
    fused, foreach = (build_optimizer_graph("m", 1e9, "bf16", opt) for opt in ("adamw", "adamw-foreach"))
    assert _bytes(list(foreach.ops)) == pytest.approx(80e9)
    assert _bytes(list(foreach.ops)) / _bytes(list(fused.ops)) == pytest.approx(80 / 28)


@pytest.mark.parametrize(
    ("kw", "flag"),
    [
        ({"precision": "fp32"}, "--precision fp32"),
        ({"precision": "fp8"}, "--precision fp8"),
        ({"layout": ParallelLayout(num_gpus=2, tp=2)}, "--tp"),
        ({"layout": ParallelLayout(num_gpus=2, fsdp=True), "global_batch": 8}, "--fsdp"),
    ],
)
def test_autocast_refuses_what_it_does_not_model(kw: dict, flag: str) -> None:
    with pytest.raises(ConfigError, match="--autocast") as err:
        llm_step_parts(_gpt2(), _request(**kw))
    assert flag in str(err.value)


def test_autocast_is_refused_for_vision_models_and_must_be_a_bool() -> None:
    req = TrainingRequest(micro_batch=8, global_batch=8, optimizer="sgd", autocast=True)
    with pytest.raises(ConfigError, match="autocast .--autocast.: resnet-50 is a vision model"):
        check_model_options("resnet-50", req)
    with pytest.raises(ConfigError, match="autocast .--autocast. must be true or false"):
        _request(autocast="yes")


def test_eager_rmsnorm_keeps_one_fp32_tensor_whether_its_input_is_fp32_or_not() -> None:
    """HF's RMSNorm keeps x.float() (bf16 input: the upcast copy, 4 B per element); with an fp32 input
    (autocast's stream, fp32 training) `.float()` returns x and `* weight` keeps the fp32 x * rstd instead:
    4 B per element either way. Under autocast the input itself is fp32 too (2 B more than a bf16
    stream's): Llama's two norms keep 2 x (4 + 2) B per element and token beyond the fused stacks'."""
    from dse.workload.models import load_model_config

    llama = load_model_config("llama-3.1-8b")
    req = {"micro_batch": 1, "global_batch": 1, "seq_len": 512, "optimizer": "adamw"}
    mems = [llm_step_parts(llama, _request(autocast, **req))[1] for autocast in (False, True)]
    tokens, d, vocab = 512, llama.hidden_size, llama.vocab_size
    extra = mems[1].activations_bytes - mems[0].activations_bytes
    assert extra == pytest.approx(llama.num_layers * 2 * 2 * d * tokens + (12 - 6) * tokens * vocab)
    fp32 = llm_step_parts(llama, _request(False, precision="fp32", **req))[1]
    plain = llm_step_parts(llama, _request(False, precision="fp32", eager_ops=False, **req))[1]
    per_norm = 4 * d * tokens
    assert fp32.activations_bytes - plain.activations_bytes == pytest.approx(
        llama.num_layers * (2 * per_norm + llama.intermediate_size * 4 * tokens)
    )


def test_dse_predict_takes_autocast_and_refuses_it_where_it_does_not_apply() -> None:
    """`--autocast` reaches the request: the step keeps fp32 weights (4 bytes a parameter) beside their half
    copies, so its weights are more than twice a bf16 step's (2 bytes); fp8 and serving refuse it."""
    import json

    from typer.testing import CliRunner

    from dse.cli import app

    runner = CliRunner()
    args = [
        "predict",
        "--model",
        "llama-3.2-1b",
        "--gpu",
        "h100-sxm",
        "--training",
        "--seq-len",
        "1024",
        "--json",
    ]
    plain, cast = (runner.invoke(app, args + extra) for extra in ([], ["--autocast"]))
    assert plain.exit_code == cast.exit_code == 0, cast.output
    weights = [json.loads(r.output)["memory_by_part_bytes"]["weights_bytes"] for r in (plain, cast)]
    assert weights[1] > 2 * weights[0]
    fp8 = runner.invoke(app, [*args, "--autocast", "--precision", "fp8"])
    assert fp8.exit_code == 2 and "--autocast" in fp8.output and "Traceback" not in fp8.output
    serving = runner.invoke(app, [*args[:5], "--autocast"])  # predict --model M --gpu G: a serving batch
    assert serving.exit_code == 2 and "only for --training" in serving.output

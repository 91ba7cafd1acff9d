"""Steps an engine runs without CUDA graphs wait for the host's per-layer dispatch (dse.serving.presets,
dse.serving.step_table): vLLM's piecewise graphs, their size limit and the eager floor."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.hardware.catalog import load_gpu
from dse.perf.types import OperatingPoint
from dse.serving.load import LoadRequest, StepTable, predict_load, resolve_preset
from dse.serving.presets import REFERENCE_LAYER_LAUNCHES, VLLM_EAGER_LAYER_HOST_S, engine_preset
from dse.serving.step_table import layer_launches, run_idle_power_w, step_graph
from dse.workload.models import load_model_config
from dse.workload.sharding import SINGLE, Parallelism

ARCH = load_model_config("llama-3.1-8b")
H100 = load_gpu("h100-sxm")


def table_for(preset, par=SINGLE, max_decodes=64, context=(1024, 1100)) -> StepTable:  # type: ignore[no-untyped-def]
    return StepTable(
        ARCH, H100, OperatingPoint(), None, None, precision="bf16", preset=preset, kv_dtype=None,
        mean_input=1024, max_decodes=max_decodes, max_prompt_tokens=8192, context_range=context, par=par,
    )  # fmt: skip


def test_vllm_captures_mixed_steps_up_to_its_largest_graph_and_sglang_only_decodes() -> None:
    vllm, sglang = engine_preset("vllm", H100), engine_preset("sglang", H100)
    assert vllm.launch_mode(32, 0) == "graphs"
    assert vllm.launch_mode(12, 500) == "graphs"  # 512 tokens: vLLM's piecewise graphs hold prompts
    assert vllm.launch_mode(13, 500) == "eager"
    assert vllm.launch_mode(600, 0) == "eager"  # more decodes than the largest graph
    assert sglang.launch_mode(32, 0) == "graphs"
    assert sglang.launch_mode(1, 16) == "eager"  # SGLang's extend batches run without graphs


def test_vllm_graphs_stop_at_twice_max_num_seqs() -> None:
    # vLLM 0.10-0.11: max_cudagraph_capture_size defaults to min(2 x max_num_seqs, 512)
    small = resolve_preset(
        LoadRequest(mode="max_throughput", input_tokens=8, output_tokens=8, max_num_seqs=8), H100
    )
    assert small.cuda_graph_sizes[-1] == 16
    assert small.launch_mode(8, 8) == "graphs" and small.launch_mode(8, 9) == "eager"
    default = resolve_preset(LoadRequest(mode="max_throughput", input_tokens=8, output_tokens=8), H100)
    assert default.cuda_graph_sizes[-1] == 512
    # SGLang's graphs do not depend on max_num_seqs
    sg = LoadRequest(mode="max_throughput", input_tokens=8, output_tokens=8, max_num_seqs=8, engine="sglang")
    assert resolve_preset(sg, H100).cuda_graph_sizes == engine_preset("sglang", H100).cuda_graph_sizes


def test_an_eager_step_lasts_at_least_its_layers_host_time_and_idles_meanwhile() -> None:
    preset = engine_preset("vllm", H100)
    table, no_host = table_for(preset), table_for(dataclasses.replace(preset, eager_layer_host_s=0.0))
    floor_s = ARCH.num_layers * VLLM_EAGER_LAYER_HOST_S
    # a 1,024-token prompt on one H100: the 8B model's GPU time is below 32 x 0.8 ms
    gpu_s, gpu_j = no_host(0, 1024, 1, 0.0)
    assert gpu_s < floor_s
    t_s, e_j = table(0, 1024, 1, 0.0)
    assert t_s == pytest.approx(floor_s)
    assert e_j == pytest.approx(gpu_j + (floor_s - gpu_s) * run_idle_power_w(H100, OperatingPoint()))
    # captured steps are untouched
    assert table(32, 0, 0, 1050.0) == no_host(32, 0, 0, 1050.0)
    assert table(12, 500, 1, 0.0) == no_host(12, 500, 1, 0.0)


@settings(max_examples=25, deadline=None)
@given(
    decodes=st.integers(0, 64),
    prompt=st.sampled_from([0, 1, 300, 1024, 4096, 8192]),
    host_us=st.floats(0.0, 3000.0),
)
def test_a_faster_host_never_slows_a_step_and_the_gpu_time_is_a_floor(
    decodes: int, prompt: int, host_us: float
) -> None:
    if decodes == 0 and prompt == 0:
        return
    preset = engine_preset("vllm", H100)
    gpu = table_for(dataclasses.replace(preset, eager_layer_host_s=0.0))
    slow = table_for(dataclasses.replace(preset, eager_layer_host_s=host_us * 1e-6))
    fast = table_for(dataclasses.replace(preset, eager_layer_host_s=host_us * 0.5e-6))
    args = (decodes, prompt, 1 if prompt else 0, 1050.0)
    (g_s, g_j), (f_s, f_j), (s_s, s_j) = gpu(*args), fast(*args), slow(*args)
    assert g_s <= f_s <= s_s and g_j <= f_j <= s_j  # the waits draw idle power
    eager = preset.launch_mode(decodes, prompt) == "eager"
    assert s_s == pytest.approx(max(g_s, ARCH.num_layers * host_us * 1e-6) if eager else g_s)


def test_a_lone_vllm_prompt_waits_for_the_host_where_the_gpu_is_fast() -> None:
    # TP 1, one client, 1,024-token prompts: TTFT is at least 32 layers x 0.8 ms with vLLM, and the
    # GPU-only engine `none` (no host costs) is faster
    req = LoadRequest(mode="concurrency", concurrency=1, input_tokens=1024, output_tokens=16, num_requests=3)
    vllm = predict_load(ARCH, H100, dataclasses.replace(req, host_step_s=0.0)).metrics()
    bare = predict_load(ARCH, H100, dataclasses.replace(req, engine="none", sampling="none")).metrics()
    assert vllm["ttft_s"] >= ARCH.num_layers * VLLM_EAGER_LAYER_HOST_S
    assert bare["ttft_s"] < ARCH.num_layers * VLLM_EAGER_LAYER_HOST_S


def test_every_layer_counts_under_pipeline_parallelism() -> None:
    # the stages run in series in a step's latency, each host dispatching its layers after the hand-off:
    # a host-bound prompt is not faster on two pipeline stages than on one GPU
    req = LoadRequest(mode="concurrency", concurrency=1, input_tokens=1024, output_tokens=16, num_requests=3)
    b200 = load_gpu("b200")
    one = predict_load(ARCH, b200, req).metrics()
    two = predict_load(ARCH, b200, dataclasses.replace(req, pp=2)).metrics()
    assert one["ttft_s"] >= ARCH.num_layers * VLLM_EAGER_LAYER_HOST_S
    assert two["ttft_s"] >= one["ttft_s"]


def test_decodes_beyond_the_largest_graph_run_eagerly() -> None:
    # 600 decodes: more than vLLM's 512-token graphs; a 3 ms host per layer puts the floor above the GPU time
    preset = dataclasses.replace(engine_preset("vllm", H100), eager_layer_host_s=3e-3)
    table = table_for(preset, max_decodes=1024, context=(64, 128))
    no_host = table_for(
        dataclasses.replace(preset, eager_layer_host_s=0.0), max_decodes=1024, context=(64, 128)
    )
    assert no_host(600, 0, 0, 100.0)[0] < ARCH.num_layers * 3e-3
    assert table(600, 0, 0, 100.0)[0] == pytest.approx(ARCH.num_layers * 3e-3)
    assert table(500, 0, 0, 100.0) == no_host(500, 0, 0, 100.0)  # captured


def test_sglang_prompt_steps_wait_for_the_host_and_its_graphs_do_not() -> None:
    preset = engine_preset("sglang", H100)
    table = table_for(preset)
    no_host = table_for(dataclasses.replace(preset, eager_layer_host_s=0.0))
    assert table(0, 16, 1, 0.0)[0] == pytest.approx(ARCH.num_layers * preset.eager_layer_host_s)
    assert preset.eager_layer_host_s > 0 and table(32, 0, 0, 1050.0) == no_host(32, 0, 0, 1050.0)


def test_each_gpu_of_a_tensor_parallel_step_idles_through_the_wait() -> None:
    # energies are per GPU: TP2's eager step adds the wait at one GPU's idle power to each GPU's energy
    preset = engine_preset("vllm", H100)
    tp2 = Parallelism(tp=2)
    table = table_for(preset, par=tp2)
    no_host = table_for(dataclasses.replace(preset, eager_layer_host_s=0.0), par=tp2)
    gpu_s, gpu_j = no_host(0, 1024, 1, 0.0)
    t_s, e_j = table(0, 1024, 1, 0.0)
    assert gpu_s < t_s == pytest.approx(ARCH.num_layers * VLLM_EAGER_LAYER_HOST_S)
    assert e_j == pytest.approx(gpu_j + (t_s - gpu_s) * run_idle_power_w(H100, OperatingPoint()))


def test_a_dense_llama_layer_is_the_reference_of_the_host_time() -> None:
    # A dense decoder layer as vLLM runs it launches REFERENCE_LAYER_LAUNCHES kernels, these ten, so the
    # quoted per-layer host time applies to a dense model as it is (the floor above: layers x host).
    arch = load_model_config("llama-3.1-8b")
    graph = step_graph(arch, 0, 1, 1024, 1024, "bf16", "vllm", "greedy", None)
    per_layer = {op.name.rsplit("]/", 1)[1]: op.count for op in graph.ops if "/layer[" in op.name}
    assert per_layer == dict.fromkeys(
        (
            "attn/norm", "attn/qkv_proj", "attn/rotary", "attn/kv_cache_write", "attn/prefill_attention",
            "attn/o_proj", "mlp/norm", "mlp/gate_up_proj", "mlp/act", "mlp/down_proj",
        ),
        arch.num_layers,
    )  # fmt: skip
    assert len(per_layer) == REFERENCE_LAYER_LAUNCHES
    for model in ("llama-3.1-8b", "qwen3-32b"):
        dense = load_model_config(model)
        assert layer_launches(dense, "vllm") == REFERENCE_LAYER_LAUNCHES * dense.num_layers


def test_a_local_attention_priced_in_parts_is_one_launch() -> None:
    # gemma-3-1b and -4b have the same layer (five sliding-window layers per global one); only the window
    # differs (512 and 1,024 tokens), and the 1,024-token probe prices a 512 window in two parts (the
    # first window and the full windows after it), one flash-attention call. gpt-oss alternates windowed
    # and full layers of the same kernels.
    small, large = load_model_config("gemma-3-1b"), load_model_config("gemma-3-4b")
    assert small.sliding_window < 1024 <= large.sliding_window
    per_layer = [layer_launches(a, "vllm") / a.num_layers for a in (small, large)]
    assert per_layer[0] == per_layer[1]
    oss = load_model_config("gpt-oss-20b")
    assert layer_launches(oss, "vllm") % oss.num_layers == 0  # every layer launches the same kernels


@pytest.mark.parametrize("model", ["qwen3-30b-a3b", "gpt-oss-20b", "deepseek-v3", "kimi-k2.5"])
def test_an_moe_layer_dispatches_more_kernels_and_waits_longer_for_the_host(model: str) -> None:
    # router, top-k and the expert GEMMs (and MLA's extra projections) are launches of their own
    arch = load_model_config(model)
    launches = layer_launches(arch, "vllm")
    assert launches > REFERENCE_LAYER_LAUNCHES * arch.num_layers
    preset = engine_preset("vllm", H100)
    table = StepTable(
        arch, H100, OperatingPoint(), None, None, precision=arch.serving_precision, preset=preset,
        kv_dtype=None, mean_input=1024, max_decodes=64, max_prompt_tokens=8192, context_range=(1024, 1100),
    )  # fmt: skip
    floor_s = launches * VLLM_EAGER_LAYER_HOST_S / REFERENCE_LAYER_LAUNCHES
    assert table.eager_floor_s == pytest.approx(floor_s)
    assert table(0, 1024, 1, 0.0)[0] >= floor_s  # past the 512-token graphs, eager: at least the dispatch


@pytest.mark.parametrize("model", ["qwen3-235b-a22b", "qwen3-30b-a3b"])
def test_trtllm_dispatches_the_routed_experts_as_one_op(model: str) -> None:
    """TensorRT-LLM's fused-MoE op sorts, runs both grouped GEMMs, the activation and the combine from C++:
    one Python dispatch for the five expert ops of its step graph, where vLLM launches each (Qwen3-235B:
    13 launches a layer before, 9 now: attention 5, norm, router, top-k, the fused op)."""
    arch = load_model_config(model)
    graph = step_graph(arch, 0, 1, 1024, 1024, "bf16", "trtllm", "greedy", None)
    leaves = {op.name.rsplit("]/", 1)[1] for op in graph.ops if "/layer[" in op.name}  # every layer's
    experts = {f"mlp/{e}" for e in ("experts_align", "experts_gate_up", "experts_act", "experts_down")}
    experts.add("mlp/experts_combine")
    assert experts <= leaves  # the graph has them apart; only the host's count joins them
    assert layer_launches(arch, "trtllm") == (len(leaves - experts) + 1) * arch.num_layers
    assert layer_launches(arch, "vllm") > layer_launches(arch, "trtllm")


def test_an_moe_prompt_on_eight_gpus_waits_for_its_host_dispatch() -> None:
    # Kimi-K2.5 at TP 8, one client: the GPU part of a 1,024-token prefill is short, so TTFT is at least the
    # dispatch of its layers' launches (aiconfigurator's H200 rows: 124-149 ms at 4 clients, 61 layers)
    arch = load_model_config("kimi-k2.5")
    req = LoadRequest(
        mode="concurrency", concurrency=1, input_tokens=1024, output_tokens=16, num_requests=3, tp=8,
        precision="mxfp4",
    )  # fmt: skip
    ttft_s = predict_load(arch, load_gpu("h200-sxm"), req).metrics()["ttft_s"]
    assert ttft_s >= layer_launches(arch, "vllm") * VLLM_EAGER_LAYER_HOST_S / REFERENCE_LAYER_LAUNCHES
    assert ttft_s > arch.num_layers * VLLM_EAGER_LAYER_HOST_S * 1.5


def test_trtllm_captures_generation_only_steps_and_dispatches_prompts_from_python() -> None:
    # TensorRT-LLM's PyTorch backend: CUDA graphs hold generation-only batches (no padding: every size up to
    # max_batch_size), context steps run eagerly; a Llama layer as it runs it launches 9 kernels (fused
    # add + RMSNorm and SwiGLU), so a lone 1,024-token prompt of the 8B model on one H100, whose GPU time is
    # shorter, lasts 32 x 0.9 x 0.8 ms of dispatch, and its decodes are untouched
    preset = engine_preset("trtllm", H100)
    assert preset.launch_mode(1, 0) == preset.launch_mode(preset.max_num_seqs, 0) == "graphs"
    assert preset.launch_mode(0, 16) == preset.launch_mode(8, 1024) == "eager"
    assert preset.padded_decodes(37) == 37
    table = table_for(preset)
    no_host = table_for(dataclasses.replace(preset, eager_layer_host_s=0.0))
    floor_s = ARCH.num_layers * 0.9 * VLLM_EAGER_LAYER_HOST_S
    assert no_host(0, 1024, 1, 0.0)[0] < floor_s
    assert table(0, 1024, 1, 0.0)[0] == pytest.approx(floor_s)
    assert table(32, 0, 0, 1050.0) == no_host(32, 0, 0, 1050.0)

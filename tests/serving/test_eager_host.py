"""Steps an engine runs without CUDA graphs wait for the host's per-layer dispatch (dse.serving.presets,
dse.serving.step_table): vLLM's piecewise graphs, their size limit and the eager floor."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.hardware.catalog import load_gpu
from dse.serving.load import LoadRequest, StepTable, predict_load, resolve_preset
from dse.serving.presets import VLLM_EAGER_LAYER_HOST_S, engine_preset
from dse.serving.step_table import run_idle_power_w
from dse.workload.models import load_model_config

ARCH = load_model_config("llama-3.1-8b")
H100 = load_gpu("h100-sxm")


def table_for(preset) -> StepTable:  # type: ignore[no-untyped-def]
    return StepTable(
        ARCH, H100, None, None, None, precision="bf16", preset=preset, kv_dtype=None, mean_input=1024,
        max_decodes=64, max_prompt_tokens=8192, context_range=(1024, 1100),
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
    assert e_j == pytest.approx(gpu_j + (floor_s - gpu_s) * run_idle_power_w(H100, _default_point()))
    # captured steps are untouched
    assert table(32, 0, 0, 1050.0) == no_host(32, 0, 0, 1050.0)
    assert table(12, 500, 1, 0.0) == no_host(12, 500, 1, 0.0)


def _default_point():  # type: ignore[no-untyped-def]
    from dse.perf.types import OperatingPoint

    return OperatingPoint()


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
    assert gpu(*args)[0] <= fast(*args)[0] <= slow(*args)[0]
    assert slow(*args)[0] >= (
        ARCH.num_layers * host_us * 1e-6 if preset.launch_mode(decodes, prompt) == "eager" else 0
    )


def test_a_lone_vllm_prompt_waits_for_the_host_where_the_gpu_is_fast() -> None:
    # TP 1, one client, 1,024-token prompts: TTFT is at least 32 layers x 0.8 ms with vLLM, and the
    # GPU-only engine `none` (no host costs) is faster
    req = LoadRequest(mode="concurrency", concurrency=1, input_tokens=1024, output_tokens=16, num_requests=3)
    vllm = predict_load(ARCH, H100, dataclasses.replace(req, host_step_s=0.0)).metrics()
    bare = predict_load(ARCH, H100, dataclasses.replace(req, engine="none", sampling="none")).metrics()
    assert vllm["ttft_s"] >= ARCH.num_layers * VLLM_EAGER_LAYER_HOST_S
    assert bare["ttft_s"] < ARCH.num_layers * VLLM_EAGER_LAYER_HOST_S

"""Multi-GPU serving: sharded graphs, collectives on the step, GPU accounting, CLI keys and errors."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dse.cli import app
from dse.errors import ConfigError
from dse.hardware.catalog import load_gpu
from dse.serving.load import LoadRequest, predict_load
from dse.serving.parallel import step_comm
from dse.workload.llm import build_decode_graph, weight_bytes
from dse.workload.models import load_model_config
from dse.workload.sharding import Parallelism, check_parallelism, shard_arch, shard_graph, weight_arch

GPU = load_gpu("h100-sxm")
DENSE = load_model_config("llama-3.1-8b")
MOE = load_model_config("qwen3-30b-a3b")


def _load(**kw: object) -> LoadRequest:
    base: dict[str, object] = dict(mode="concurrency", concurrency=16, input_tokens=512, output_tokens=64)
    return LoadRequest(**(base | kw))  # type: ignore[arg-type]


def test_tp1_is_the_single_gpu_path_exactly() -> None:
    one = predict_load(DENSE, GPU, _load()).metrics()
    explicit = predict_load(DENSE, GPU, _load(tp=1, pp=1, ep=1, dp=1)).metrics()
    assert one == explicit
    assert shard_arch(DENSE, Parallelism()) is DENSE
    assert one["num_gpus"] == 1.0 and one["comm_time_fraction"] == 0.0


def test_tp_splits_weights_and_counts_every_gpu() -> None:
    one = predict_load(DENSE, GPU, _load()).metrics()
    two = predict_load(DENSE, GPU, _load(tp=2)).metrics()
    assert two["num_gpus"] == 2.0
    assert two["total_power_w"] == pytest.approx(2 * two["avg_power_w"])
    assert two["weight_bytes"] < 0.55 * one["weight_bytes"]
    assert 0 < two["comm_time_fraction"] < 0.5
    assert two["tpot_s"] < one["tpot_s"]
    # J/token counts both GPUs: the step energy of 2 GPUs per token, at least one GPU's share
    duration = two["output_tokens_per_s"]
    assert two["energy_per_output_token_j"] == pytest.approx(two["total_power_w"] / duration, rel=0.05)


@settings(max_examples=12, deadline=None)
@given(tokens=st.integers(1, 16384), scale=st.floats(1.1, 8.0), tp=st.sampled_from([2, 4, 8]))
def test_more_link_bandwidth_never_slows_a_step(tokens: int, scale: float, tp: int) -> None:
    assert GPU.interconnect is not None
    fast_link = GPU.interconnect.model_copy(
        update={"link_bw_bytes_per_s": GPU.interconnect.link_bw_bytes_per_s * scale}
    )
    fast = GPU.model_copy(update={"interconnect": fast_link})
    par = Parallelism(tp=tp)
    args = dict(tokens=np.array([tokens]), engine="vllm", precision="bf16", decode_only=np.array([True]))
    slow_s = step_comm(DENSE, GPU, par, **args).total_s  # type: ignore[arg-type]
    fast_s = step_comm(DENSE, fast, par, **args).total_s  # type: ignore[arg-type]
    assert fast_s[0] <= slow_s[0] + 1e-15


def test_moe_one_expert_top1_equals_the_dense_mlp() -> None:
    """An MoE layer of one expert, k = 1, is the dense MLP: same expert GEMM work and weights, and the
    sharded forms agree too."""
    ff = DENSE.intermediate_size
    moe = DENSE.model_copy(update={"num_experts": 1, "num_experts_per_tok": 1, "moe_intermediate_size": ff})
    par = Parallelism(tp=2)
    for arch in (DENSE, moe):
        assert not check_parallelism(arch, par)

    def mlp_flop(arch: object, names: tuple[str, ...]) -> float:
        g = build_decode_graph(shard_arch(arch, par), batch=8, context_len=128)  # type: ignore[arg-type]
        return sum(op.flop * op.count for op in g.ops if op.name.rsplit("/", 1)[-1] in names)

    dense_flop = mlp_flop(DENSE, ("gate_up_proj", "down_proj"))
    assert mlp_flop(moe, ("experts_gate_up", "experts_down")) == dense_flop
    router = DENSE.num_layers * DENSE.hidden_size * 2.0  # the one router column per layer, bf16
    dense_w = weight_bytes(weight_arch(DENSE, par), "bf16")
    assert weight_bytes(weight_arch(moe, par), "bf16") == pytest.approx(dense_w + router)


def test_expert_parallel_divides_the_experts_per_gpu() -> None:
    par = Parallelism(tp=4, ep=4)
    g = shard_graph(build_decode_graph(shard_arch(MOE, par), batch=256, context_len=128), MOE, par)
    full = build_decode_graph(MOE, batch=256, context_len=128)
    experts = {op.name: op for op in full.ops if op.name.endswith("experts_down")}
    for op in g.ops:
        if op.name in experts:
            assert op.batch == pytest.approx(experts[op.name].batch / 4, abs=1)
            assert op.m == experts[op.name].m and op.k == experts[op.name].k
    assert weight_bytes(weight_arch(MOE, par), "bf16") < weight_bytes(MOE, "bf16") / 3.5


@pytest.mark.parametrize(
    ("arch", "par", "flag"),
    [
        (DENSE, Parallelism(tp=3), "--tp 3"),
        (DENSE, Parallelism(ep=2, tp=2), "--ep 2"),
        (MOE, Parallelism(ep=3, tp=3), "--tp 3"),
        (MOE, Parallelism(tp=2, ep=4), "--ep 4"),
        (DENSE, Parallelism(pp=64), "--pp 64"),
    ],
)
def test_layouts_that_do_not_fit_name_the_flag(arch: object, par: Parallelism, flag: str) -> None:
    with pytest.raises(ConfigError, match=flag):
        check_parallelism(arch, par)  # type: ignore[arg-type]


def test_bad_sizes_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="--tp"):
        _load(tp=0)


def test_data_parallel_replicas_multiply_throughput() -> None:
    one = predict_load(MOE, GPU, _load(concurrency=8, tp=2)).metrics()
    two = predict_load(MOE, GPU, _load(concurrency=16, tp=2, dp=2, ep=4)).metrics()
    assert two["num_gpus"] == 4.0
    assert two["output_tokens_per_s"] > 1.5 * one["output_tokens_per_s"]


def test_pipeline_stages_hold_a_share_of_the_layers() -> None:
    one = predict_load(DENSE, GPU, _load()).metrics()
    two = predict_load(DENSE, GPU, _load(pp=2)).metrics()
    assert two["weight_bytes"] == pytest.approx(one["weight_bytes"] / 2)
    assert two["tpot_s"] >= one["tpot_s"]


@pytest.mark.parametrize("tp", [2, 4])
def test_cli_json_keys_under_load(tp: int) -> None:
    args = ["predict", "--model", "llama-3.1-8b", "--gpu", "h100-sxm", "--tp", str(tp), "--concurrency", "8"]
    args += ["--max-num-seqs", "64", "--engine", "vllm", "--precision", "bf16", "--input-tokens", "256"]
    args += ["--output-tokens", "32", "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    for key in ("num_gpus", "avg_power_w", "total_power_w", "energy_per_output_token_j", "comm_time_fraction",
                "memory_bytes", "tpot_s", "output_tokens_per_s"):  # fmt: skip
        assert key in out, key
    assert out["num_gpus"] == tp


def test_cli_error_names_the_flag() -> None:
    args = ["predict", "--model", "llama-3.1-8b", "--tp", "3", "--concurrency", "8", "--input-tokens", "64"]
    result = CliRunner().invoke(app, [*args, "--output-tokens", "8"])
    assert result.exit_code != 0 and "--tp 3" in result.output


def test_replica_share_of_the_load() -> None:
    est = predict_load(MOE, GPU, _load(concurrency=16, tp=1, dp=2, ep=2))
    assert est.request.concurrency == 16  # the deployment's, as asked
    assert dataclasses.asdict(est.request)["dp"] == 2

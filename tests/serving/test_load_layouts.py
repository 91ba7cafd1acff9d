"""Load-mode layouts and limits: uneven data-parallel shares, expert splits on one GPU, unbounded inputs."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from typer.testing import CliRunner

from dse.cli import app
from dse.errors import ConfigError
from dse.hardware.catalog import load_gpu
from dse.perf.dvfs import idle_power_w, power_cap_w
from dse.perf.types import OperatingPoint
from dse.serving.load import MAX_CONCURRENCY, MAX_REQUESTS, MAX_STEPS, LoadRequest, predict_load
from dse.workload.models import load_model_config

GPU = load_gpu("h100-sxm")
ARCH = load_model_config("qwen2-1.5b")
BASE = LoadRequest(mode="concurrency", concurrency=4, num_requests=16, input_tokens=128, output_tokens=16)


def _metrics(**kw):
    return predict_load(ARCH, GPU, dataclasses.replace(BASE, **kw)).metrics()


def test_more_replicas_than_clients_leave_replicas_idle():
    four = _metrics(dp=4)  # one client per replica
    eight = _metrics(dp=8)  # the same four busy replicas, four idle
    assert eight["output_tokens_per_s"] == pytest.approx(four["output_tokens_per_s"], rel=1e-9)
    idle = float(idle_power_w(GPU, GPU.clocks.sm_clock_default_hz))
    assert eight["avg_power_w"] == pytest.approx((four["avg_power_w"] + idle) / 2, rel=1e-9)
    assert eight["total_power_w"] == pytest.approx(8 * eight["avg_power_w"], rel=1e-12)
    tokens = eight["output_tokens_per_s"]
    assert eight["energy_per_output_token_j"] == pytest.approx(eight["total_power_w"] / tokens, rel=1e-12)


@pytest.mark.parametrize("ep", [1, 8])
def test_moe_replicas_without_clients_run_the_shared_moe_layers(ep: int) -> None:
    # README: the dp replicas share an MoE model's MoE layers (by experts with --ep, else by each expert's
    # width), so a replica without a client still runs each of them in lock-step and draws the busy
    # replicas' power; with ep 1 they were priced at idle power, making that layout look ~28% cheaper
    moe = load_model_config("qwen3-30b-a3b")
    m = predict_load(moe, GPU, dataclasses.replace(BASE, dp=8, ep=ep)).metrics()  # 4 clients, 8 replicas
    # the busy half runs as a deployment with a client on every replica (`_uneven_replicas`' even split)
    busy = predict_load(moe, GPU, dataclasses.replace(BASE, dp=8, ep=ep, concurrency=8, num_requests=32))
    assert m["avg_power_w"] == pytest.approx(busy.metrics()["avg_power_w"], rel=1e-9)
    idle = float(idle_power_w(GPU, GPU.clocks.sm_clock_default_hz))
    assert m["avg_power_w"] > 1.5 * idle


def test_uneven_shares_lie_between_the_even_ones():
    # 4 clients on 3 replicas: one replica with 2, two with 1; never more throughput than 4 replicas of 1
    three = _metrics(dp=3)
    assert _metrics(dp=1)["output_tokens_per_s"] < three["output_tokens_per_s"]
    assert three["output_tokens_per_s"] <= _metrics(dp=4)["output_tokens_per_s"] * (1 + 1e-9)
    assert three["num_gpus"] == 3


def test_an_expert_split_needs_experts_and_gpus():
    with pytest.raises(ConfigError, match="mixture-of-experts"):
        predict_load(ARCH, GPU, dataclasses.replace(BASE, ep=2))
    moe = load_model_config("qwen3-30b-a3b")
    with pytest.raises(ConfigError, match="must divide --tp x --dp"):
        predict_load(moe, GPU, dataclasses.replace(BASE, ep=2))


def test_limits_of_one_simulation():
    with pytest.raises(ConfigError, match="concurrency"):
        dataclasses.replace(BASE, concurrency=MAX_CONCURRENCY + 1)
    with pytest.raises(ConfigError, match="num_requests"):
        dataclasses.replace(BASE, num_requests=MAX_REQUESTS + 1)
    # one simulation runs one replica: the limits are per replica, so an uneven split of a legal request
    # (its busier share simulated on every replica) stays legal
    dataclasses.replace(BASE, concurrency=MAX_CONCURRENCY * 2 - 1, num_requests=MAX_CONCURRENCY * 2, dp=2)
    # fewer requests than clients: the closed loop never reaches its concurrency
    with pytest.raises(ConfigError, match="num_requests 3 .* is below concurrency 4"):
        dataclasses.replace(BASE, num_requests=3)
    assert predict_load(ARCH, GPU, dataclasses.replace(BASE, concurrency=3, dp=2, num_requests=12)).feasible


def test_uneven_split_reports_no_single_run_totals():
    m = _metrics(dp=3)
    assert m["energy_j"] is None and m["steps"] is None and m["output_tokens_per_s"] > 0


def test_power_cap_above_tdp_is_the_tdp_and_predict_refuses_it():
    # the TDP is the largest limit the driver accepts: above it a cap does not bind (a sweep, a comparison)
    assert power_cap_w(GPU, OperatingPoint(power_cap_w=GPU.power.tdp_w + 1)) == GPU.power.tdp_w
    args = ["predict", "--model", "qwen2-1.5b", "--batch", "2", "--input-tokens", "64"]
    args += ["--output-tokens", "4"]
    result = CliRunner().invoke(app, [*args, "--power-cap-w", "5000"])
    assert result.exit_code == 2 and "above the TDP of h100-sxm" in result.output
    capped = predict_load(ARCH, GPU, BASE, OperatingPoint(power_cap_w=5000.0)).metrics()
    assert capped["avg_power_w"] <= GPU.power.tdp_w


def test_a_config_that_is_not_utf8_is_one_clear_error(tmp_path):
    path = tmp_path / "config.json"
    path.write_bytes(b'\xff\xfe{"model_type": "llama"}')
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_model_config(str(path))


def test_a_simulation_of_too_many_steps_is_refused_before_it_runs():
    # 10 requests x 60,000 tokens one at a time: 600,000 decode steps at least
    long = dataclasses.replace(BASE, concurrency=1, num_requests=10, output_tokens=60_000)
    assert MAX_STEPS < 10 * 60_000
    with pytest.raises(ConfigError, match="engine steps"):
        predict_load(ARCH, GPU, long)


def test_groups_beyond_one_node_are_refused_and_replicas_are_not():
    from dse.workload.sharding import GPUS_PER_NODE, Parallelism, check_parallelism

    moe = load_model_config("qwen3-235b-a22b")
    with pytest.raises(ConfigError, match="beyond one node"):
        check_parallelism(moe, Parallelism(tp=2 * GPUS_PER_NODE))
    with pytest.raises(ConfigError, match="beyond one node"):
        check_parallelism(moe, Parallelism(tp=GPUS_PER_NODE, dp=2, ep=2 * GPUS_PER_NODE))
    # A MoE model's dp replicas share its expert layers (each expert split tp x dp / ep ways): their group
    # spans tp x dp GPUs with --ep 1 too (a fuzz run found 16 GPUs priced as one node).
    with pytest.raises(ConfigError, match="beyond one node"):
        check_parallelism(moe, Parallelism(tp=GPUS_PER_NODE, dp=4))
    check_parallelism(moe, Parallelism(tp=GPUS_PER_NODE // 2, dp=2))  # one node
    dense = load_model_config("llama-3.1-70b")
    check_parallelism(dense, Parallelism(tp=GPUS_PER_NODE, dp=4))  # independent replicas: any number


@pytest.mark.parametrize(("asked", "dp", "served"), [(16, 4, 16), (10, 4, 12), (6, 4, 8), (17, 2, 18)])
def test_dp_replicas_serve_at_least_the_requests_asked_for(asked: int, dp: int, served: int) -> None:
    # Each replica simulates ceil(asked / dp) requests; the reported total is what all of them served.
    m = _metrics(concurrency=dp, dp=dp, num_requests=asked)
    assert m["num_requests"] == served


def test_a_rate_is_dealt_round_robin_so_a_replica_sees_erlang_gaps() -> None:
    # One of dp replicas gets every dp-th arrival of the deployment's Poisson stream: its gaps have the mean
    # dp / rate and the coefficient of variation 1 / sqrt(dp) of an Erlang-dp gap (Poisson's is 1).
    from dse.serving.load import _replica_load, _requests

    for dp in (1, 2, 4):
        load = LoadRequest(mode="request_rate", request_rate_per_s=20.0, input_tokens=64, output_tokens=8,
                           num_requests=4000 * dp, dp=dp)  # fmt: skip
        share = _replica_load(load, load.parallelism)
        ones = np.ones(int(share.num_requests or 0), dtype=int)
        gaps = np.diff(_requests(share, ones, ones, dp).arrival_s)
        assert gaps.mean() == pytest.approx(dp / 20.0, rel=0.05)
        assert gaps.std() / gaps.mean() == pytest.approx(1.0 / np.sqrt(dp), rel=0.06)


@pytest.mark.parametrize(("dp", "num_requests"), [(1, 1), (4, 4), (8, 8)])
def test_an_open_loop_of_few_requests_serves_no_faster_than_they_arrive(dp: int, num_requests: int) -> None:
    """An open loop cannot finish requests faster than they arrive: one request a replica, served at once,
    read as dp x 80 the arrival rate (0.1 req/s: 8.3 req/s at dp 4, session 33). The GPUs idle until the
    stream's next request is due, and that idle energy is charged to the tokens."""
    rate = 0.1
    m = _metrics(
        mode="request_rate", request_rate_per_s=rate, concurrency=None, num_requests=num_requests, dp=dp
    )
    assert m["requests_per_s"] <= rate * (1 + 1e-9)
    idle = float(idle_power_w(GPU, GPU.clocks.sm_clock_default_hz))
    assert idle < m["avg_power_w"] < 1.5 * idle  # a GPU that serves one short request every 1 / rate s
    assert m["energy_per_output_token_j"] == pytest.approx(m["total_power_w"] / m["output_tokens_per_s"])


def test_a_default_request_count_stays_within_what_one_simulation_handles() -> None:
    # Offline, 4 x a --max-num-seqs of 1e9 asked draw_lengths for 4e9 requests: a MemoryError traceback.
    from dse.serving.load import default_num_requests, resolve_preset

    load = LoadRequest(mode="max_throughput", input_tokens=64, output_tokens=8, max_num_seqs=10**9,
                       max_batched_tokens=10**9)  # fmt: skip
    assert default_num_requests(load, resolve_preset(load, load_gpu("h100-sxm"))) == MAX_REQUESTS
    many = LoadRequest(mode="concurrency", concurrency=10_000, input_tokens=64, output_tokens=8)
    assert default_num_requests(many, resolve_preset(many, load_gpu("h100-sxm"))) <= MAX_REQUESTS


def test_a_gpu_without_bf16_keeps_no_bf16_kv_cache() -> None:
    # A V100 serving fp16 weights took --kv-dtype bf16 and priced it (a fuzz run); vLLM refuses bf16 there.
    v100, arch = load_gpu("v100-sxm2"), ARCH
    load = LoadRequest(mode="concurrency", concurrency=4, input_tokens=64, output_tokens=8, precision="fp16",
                       kv_dtype="bf16", num_requests=8)  # fmt: skip
    with pytest.raises(ConfigError, match="no bf16"):
        predict_load(arch, v100, load)
    assert predict_load(arch, v100, dataclasses.replace(load, kv_dtype="fp16")).feasible


def test_a_replica_of_very_many_draws_its_own_arrivals_only() -> None:
    # Dealing the deployment's stream drew n x dp gaps: --dp 1e6 at 1 request/s took 8 GB and 12 s. The
    # replica's Erlang gaps are drawn as one gamma gap each, so memory is per simulated request.
    from dse.serving.load import _requests

    load = LoadRequest(mode="request_rate", request_rate_per_s=1e-3, input_tokens=8, output_tokens=2)
    ones = np.ones(10, dtype=int)
    arrivals = _requests(load, ones, ones, dp=10**9).arrival_s
    assert len(arrivals) == 10 and arrivals[0] == 0.0 and np.all(np.diff(arrivals) > 0)
    with pytest.raises(ConfigError, match="--request-rate 0.5 over --dp"):  # dp at most 10^6 GPUs
        predict_load(ARCH, load_gpu("h100-sxm"), dataclasses.replace(load, request_rate_per_s=0.5, dp=10**6))

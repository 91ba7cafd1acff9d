"""predict_load: serving under load with the kernel model's step costs (dse.serving.load)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from dse.errors import ConfigError
from dse.hardware.catalog import load_gpu
from dse.serving.load import LOAD_KEYS, LoadRequest, StepTable, draw_lengths, predict_load, resolve_preset
from dse.serving.presets import engine_preset
from dse.serving.static import ServingRequest, predict_serving
from dse.workload.models import load_model_config

ARCH = load_model_config("llama-3.1-8b")
H100 = load_gpu("h100-sxm")


def closed(c: int, **kw) -> dict:
    req = LoadRequest(mode="concurrency", concurrency=c, input_tokens=512, output_tokens=64,
                      num_requests=kw.pop("num_requests", 8 * c), **kw)  # fmt: skip
    return predict_load(ARCH, H100, req).metrics()


def test_every_mode_reports_every_key_and_orders_its_percentiles() -> None:
    requests = [
        LoadRequest(mode="concurrency", concurrency=16, input_tokens=512, output_tokens=64, num_requests=96),
        LoadRequest(mode="request_rate", request_rate_per_s=4.0, input_tokens=512, output_tokens=64,
                    num_requests=60),
        LoadRequest(mode="max_throughput", input_tokens=512, output_tokens=64, num_requests=200),
    ]  # fmt: skip
    for req in requests:
        m = predict_load(ARCH, H100, req).metrics()
        assert m["feasible"] is True and set(LOAD_KEYS) <= set(m)
        assert all(np.isfinite(m[k]) for k in LOAD_KEYS), req.mode
        for name in ("ttft", "tpot", "e2e_latency"):
            assert m[f"{name}_p50_s"] <= m[f"{name}_p90_s"] <= m[f"{name}_p99_s"]
        assert m["avg_power_w"] <= H100.power.tdp_w * 1.001
        assert m["energy_per_output_token_j"] == pytest.approx(m["avg_power_w"] / m["output_tokens_per_s"])


def test_one_client_matches_the_static_batch_of_one() -> None:
    # A lone request decodes alone: its TPOT is the static batch-1 decode step with the same engine
    # (CUDA-graph padding of 1 is 1); TTFT is one prefill.
    load = closed(1, num_requests=3, sampling="none", engine="none")
    static = predict_serving(ARCH, H100, ServingRequest(batch=1, input_tokens=512, output_tokens=64))
    assert load["tpot_s"] == pytest.approx(static.tpot_s, rel=0.03)
    assert load["ttft_s"] == pytest.approx(static.ttft_s, rel=0.05)


def test_same_seed_same_numbers_and_another_seed_other_lengths() -> None:
    base = LoadRequest(mode="request_rate", request_rate_per_s=8.0, input_tokens=256, output_tokens=32,
                       num_requests=80, length_dist="lognormal")  # fmt: skip
    a = predict_load(ARCH, H100, base).metrics()
    assert predict_load(ARCH, H100, base).metrics() == a
    other = predict_load(ARCH, H100, dataclasses.replace(base, seed=7)).metrics()
    assert other["ttft_s"] != a["ttft_s"]


def test_lengths_follow_the_distribution_asked_for() -> None:
    req = LoadRequest(mode="max_throughput", input_tokens=1000, output_tokens=200, length_dist="lognormal")
    inp, out = draw_lengths(req, 20_000, 131_072)
    assert inp.mean() == pytest.approx(1000, rel=0.03) and out.mean() == pytest.approx(200, rel=0.03)
    assert np.std(np.log(inp)) == pytest.approx(0.5, rel=0.05)
    exp = dataclasses.replace(req, length_dist="exponential")
    inp, out = draw_lengths(exp, 20_000, 131_072)
    assert inp.mean() == pytest.approx(1000, rel=0.03) and np.median(inp) < 0.8 * inp.mean()
    fixed = dataclasses.replace(req, length_dist="fixed")
    inp, out = draw_lengths(fixed, 10, 131_072)
    assert set(inp) == {1000} and set(out) == {200}


def test_more_clients_more_throughput_and_less_energy_per_token_until_the_limit() -> None:
    m = [closed(c, max_num_seqs=32) for c in (1, 8, 32, 64)]
    tput = [x["output_tokens_per_s"] for x in m]
    jpt = [x["energy_per_output_token_j"] for x in m]
    assert tput[0] < tput[1] < tput[2] and tput[3] == pytest.approx(tput[2], rel=0.05)
    assert jpt[0] > jpt[1] > jpt[2]
    assert m[3]["ttft_s"] > 2 * m[2]["ttft_s"]  # 64 clients, 32 run: half of them queue


def test_engine_presets_and_overrides() -> None:
    assert engine_preset("vllm", H100).max_num_seqs == 1024  # >= 70 GiB and not an A100
    assert engine_preset("vllm", load_gpu("a100-sxm-80gb")).max_num_seqs == 256
    assert engine_preset("vllm", load_gpu("l4")).max_batched_tokens == 2048
    trt = engine_preset("trtllm", H100)
    assert not trt.chunked_prefill and trt.reserve_output_frac == 1.0 and trt.kv_dtype("fp8", None) == "fp8"
    assert engine_preset("vllm", H100).kv_dtype("fp8", None) is None
    req = LoadRequest(mode="concurrency", concurrency=4, input_tokens=64, output_tokens=8, engine="sglang",
                      max_num_seqs=3, max_batched_tokens=512, gpu_memory_utilization=0.5)  # fmt: skip
    preset = resolve_preset(req, H100)
    assert (preset.max_num_seqs, preset.max_batched_tokens, preset.gpu_memory_utilization) == (3, 512, 0.5)
    assert engine_preset("vllm", H100).padded_decodes(13) == 16
    assert engine_preset("vllm", H100).padded_decodes(600) == 600
    with pytest.raises(ConfigError, match="engine 'tgi'"):
        engine_preset("tgi", H100)


def test_less_memory_for_the_kv_cache_means_fewer_tokens_and_more_queueing() -> None:
    roomy = closed(64, num_requests=256)
    tight = closed(64, num_requests=256, gpu_memory_utilization=0.25)
    assert tight["kv_capacity_tokens"] < 0.3 * roomy["kv_capacity_tokens"]
    assert tight["kv_cache_utilization"] > roomy["kv_cache_utilization"]


def test_a_model_that_does_not_fit_is_infeasible_with_the_reason() -> None:
    req = LoadRequest(mode="concurrency", concurrency=4, input_tokens=512, output_tokens=64)
    est = predict_load(load_model_config("llama-3.1-70b"), H100, req)
    m = est.metrics()
    assert m["feasible"] is False and "KV cache" in str(m["infeasible_reason"])
    # nothing is predicted; the GPU count is an input and stays known
    assert all(m[k] is None for k in LOAD_KEYS if k != "num_gpus") and m["num_gpus"] == 1.0


def test_step_table_interpolates_between_evaluated_cells() -> None:
    preset = resolve_preset(LoadRequest(mode="max_throughput", input_tokens=256, output_tokens=8), H100)
    table = StepTable(
        ARCH,
        H100,
        None,
        None,
        None,
        precision="bf16",
        preset=preset,
        kv_dtype=None,
        mean_input=256,
        max_decodes=64,
        max_prompt_tokens=2048,
        context_range=(256, 512),
    )
    at_16 = table(16, 0, 0, 300.0)[0]
    at_24 = table(24, 0, 0, 300.0)[0]  # padded to 24 (a captured size), between the cells 16 and 32
    at_32 = table(32, 0, 0, 300.0)[0]
    assert at_16 < at_24 < at_32
    # d: 0, 1, 2, ..., 64 (8); p: 0, 1, 256, 512, 1024, 2048 (6); 3 contexts; all but the 3 empty steps
    assert table.evaluations == 8 * 6 * 3 - 3


def test_a_short_prompt_alone_costs_at_least_a_one_token_prefill() -> None:
    # A step of no decodes and a few prompt tokens reads every weight: never cheaper than one token's
    # prefill (it was interpolated from the empty step, so 16 tokens of a 1,024-token mean cost ~1/64).
    preset = resolve_preset(LoadRequest(mode="max_throughput", input_tokens=1024, output_tokens=8), H100)
    table = StepTable(
        ARCH, H100, None, None, None, precision="bf16", preset=preset, kv_dtype=None, mean_input=1024,
        max_decodes=8, max_prompt_tokens=8192, context_range=(1024, 1032),
    )  # fmt: skip
    one, sixteen, whole = (table(0, p, 1, 0.0)[0] for p in (1, 16, 1024))
    assert one <= sixteen < whole
    # about a decode step's weight read, not ~1/64 of a whole prefill
    assert sixteen > 0.5 * table(1, 0, 0, 1024.0)[0]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "burst"}, "mode 'burst'"),
        ({"mode": "concurrency"}, "needs concurrency"),
        ({"mode": "max_throughput", "concurrency": 4}, "takes no concurrency"),
        ({"mode": "request_rate", "request_rate_per_s": float("inf")}, "request_rate_per_s"),
        ({"mode": "max_throughput", "output_tokens": 1}, "output_tokens"),
        ({"mode": "max_throughput", "length_dist": "pareto"}, "length_dist"),
        ({"mode": "max_throughput", "seed": -1}, "seed"),
        ({"mode": "max_throughput", "gpu_memory_utilization": 1.5}, "gpu_memory_utilization"),
        ({"mode": "max_throughput", "precision": "int3"}, "precision 'int3'"),
        ({"mode": "max_throughput", "host_step_s": float("nan")}, "host_step_s"),
        ({"mode": "max_throughput", "host_step_s": -1e-3}, "host_step_s"),
    ],
)
def test_bad_load_requests_are_config_errors(kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        LoadRequest(**{"input_tokens": 128, "output_tokens": 16, **kwargs})


def test_lengths_that_fill_the_context_run_and_longer_fixed_ones_are_refused() -> None:
    gpt2 = load_model_config("gpt2")  # a 1,024-token context
    full = LoadRequest(mode="concurrency", concurrency=1, input_tokens=1022, output_tokens=2, num_requests=2)
    assert predict_load(gpt2, H100, full).feasible
    with pytest.raises(ConfigError, match="input_tokens 1023 \\+ output_tokens 2 exceed the model's context"):
        predict_load(gpt2, H100, dataclasses.replace(full, input_tokens=1023))
    drawn = dataclasses.replace(
        full, input_tokens=900, output_tokens=100, length_dist="lognormal", num_requests=40
    )
    inp, out = draw_lengths(drawn, 40, 1024)
    assert int((inp + out).max()) <= 1024 and predict_load(gpt2, H100, drawn).feasible


def test_sglang_sizes_its_chunks_and_graphs_by_gpu_memory() -> None:
    # SGLang's defaults shrink on small GPUs, so an 8B bf16 model keeps a KV cache on a 24 GB L4 (with
    # the 80 GB tier's 8192-token chunks and 256 graphs its reserve left none).
    from dse.serving.memory import kv_capacity_tokens

    l4 = load_gpu("l4")
    assert engine_preset("sglang", l4).max_batched_tokens < engine_preset("sglang", H100).max_batched_tokens
    assert kv_capacity_tokens(ARCH, l4, "bf16", engine="sglang") > 0


def test_vllm_pays_its_host_time_per_step_and_async_scheduling_none() -> None:
    """vLLM 0.10-0.12 schedules in series with the GPU step (async scheduling off by default, 0.18 on): every
    step of a closed loop takes the host time longer with the GPU idle, so with one schedule of steps (fixed
    lengths) the mean TPOT grows by exactly the host time per step, and the GPU's mean power falls."""
    from dse.serving.presets import VLLM_SYNC_HOST_STEP_S, vllm_host_step_s

    assert engine_preset("vllm", H100).host_step_s == VLLM_SYNC_HOST_STEP_S > 0
    assert all(engine_preset(e, H100).host_step_s == 0.0 for e in ("sglang", "trtllm", "none"))
    assert vllm_host_step_s("0.11.1") == vllm_host_step_s("0.12.0") == VLLM_SYNC_HOST_STEP_S
    assert vllm_host_step_s("0.18.0") == vllm_host_step_s("1.2") == 0.0
    assert vllm_host_step_s(None) == vllm_host_step_s("nan") == VLLM_SYNC_HOST_STEP_S  # unknown: as 0.12
    sync, overlapped = closed(16), closed(16, host_step_s=0.0)
    assert sync["tpot_s"] - overlapped["tpot_s"] == pytest.approx(VLLM_SYNC_HOST_STEP_S, rel=1e-6)
    assert sync["avg_power_w"] < overlapped["avg_power_w"]
    assert sync["output_tokens_per_s"] < overlapped["output_tokens_per_s"]
    req = LoadRequest(mode="concurrency", concurrency=4, input_tokens=64, output_tokens=8, host_step_s=2e-3)
    assert resolve_preset(req, H100).host_step_s == 2e-3
    assert predict_load(ARCH, H100, dataclasses.replace(req, num_requests=8)).to_dict()["host_step_s"] == 2e-3


def test_engines_that_overlap_host_work_schedule_a_step_ahead() -> None:
    """The overlap that hides the host's work (TensorRT-LLM's overlap scheduler, SGLang's overlap schedule,
    vLLM's async scheduling: no host time per step) schedules each step while the previous one runs, so a
    client's next request waits one step more in a closed loop: TTFT rises, though every step is faster."""
    ahead = {e: engine_preset(e, H100).schedule_ahead for e in ("vllm", "sglang", "trtllm", "none")}
    assert ahead == {"vllm": False, "sglang": True, "trtllm": True, "none": False}
    assert dataclasses.replace(engine_preset("vllm", H100), host_step_s=0.0).schedule_ahead
    sync = closed(16, length_dist="lognormal")
    overlapped = closed(16, length_dist="lognormal", host_step_s=0.0)
    assert overlapped["tpot_s"] < sync["tpot_s"] and overlapped["ttft_s"] > sync["ttft_s"]


@pytest.mark.parametrize("length_dist", ["fixed", "lognormal"])
def test_an_overloaded_open_loop_reports_the_servers_throughput(length_dist: str) -> None:
    """Arrivals far above what the server sustains: its running batch grows for as long as requests arrive,
    so the window between the k-th first token and the last first token by the (n - k - 1)-th finish is a
    ramp, no steady state (a few percent of the requests starting in it finish there; none with fixed
    lengths, one wave), and the whole run counts. Its throughput is then about the offline maximum,
    requests/s follows the tokens, and more load never reports less throughput (the ramp once gave 0
    requests/s, 2.5x too few tokens/s and 2.6x the J/token; with lognormal lengths a single early finish
    kept the ramp)."""
    common = {"input_tokens": 512, "output_tokens": 64, "num_requests": 500, "length_dist": length_dist}
    offline = predict_load(ARCH, H100, LoadRequest(mode="max_throughput", **common)).metrics()
    tput = []
    for rate in (70.0, 80.0, 100.0):
        m = predict_load(
            ARCH, H100, LoadRequest(mode="request_rate", request_rate_per_s=rate, **common)
        ).metrics()
        tput.append(m["output_tokens_per_s"])
    assert tput == sorted(tput)
    assert tput[-1] == pytest.approx(offline["output_tokens_per_s"], rel=0.2)
    assert m["energy_per_output_token_j"] == pytest.approx(offline["energy_per_output_token_j"], rel=0.2)
    if length_dist == "fixed":
        assert m["requests_per_s"] == pytest.approx(m["output_tokens_per_s"] / 64, rel=1e-9)


def _table(**kw) -> StepTable:
    load = LoadRequest(mode="concurrency", concurrency=32, input_tokens=512, output_tokens=64)
    preset = resolve_preset(load, H100)
    return StepTable(
        ARCH, H100, None, None, None, precision="bf16", preset=preset, kv_dtype=None, mean_input=512,
        max_decodes=32, max_prompt_tokens=8192, context_range=(400, 700), **kw,
    )  # fmt: skip


def test_a_closed_loop_costed_after_scheduling_equals_one_costed_step_by_step() -> None:
    # The same run through a table (its steps costed together after the schedule, only the cells they need)
    # and through a plain function around another table (each step costed as it is scheduled): every time,
    # energy and count must agree exactly, and the batched table must have evaluated fewer cells.
    from dse.serving.scheduler import Requests, SchedulerConfig, simulate

    rng = np.random.default_rng(3)
    requests = Requests(input_tokens=rng.integers(400, 600, 120), output_tokens=rng.integers(20, 100, 120),
                        concurrency=24)  # fmt: skip
    config = SchedulerConfig(max_num_seqs=32, max_batched_tokens=2048, kv_blocks=2_000, block_size_tokens=16,
                             host_step_s=1e-4)  # fmt: skip
    batched, stepwise = _table(), _table()
    a = simulate(requests, config, batched, idle_power_w=90.0)
    b = simulate(requests, config, lambda *step: stepwise(*step), idle_power_w=90.0)
    for field in dataclasses.fields(a):
        x, y = getattr(a, field.name), getattr(b, field.name)
        assert np.array_equal(x, y, equal_nan=True) if isinstance(x, np.ndarray) else x == y, field.name
    assert 0 < batched.evaluations < stepwise.evaluations


def test_costs_of_many_steps_equal_their_costs_one_by_one() -> None:
    table, steps = _table(), [(0, 300, 1, 0.0), (5, 0, 0, 450.5), (17, 900, 2, 610.0), (32, 0, 0, 700.0)]
    assert table.costs(steps) == [_table()(*step) for step in steps]


def test_a_multi_gpu_closed_loop_costs_its_steps_and_its_communication_share_in_one_pass(monkeypatch) -> None:
    # The cells `comm_fraction` reads are evaluated with the run's own: one kernel-model pass, not a second
    # one for the communication share after the run (whose fixed cost is most of a small table's).
    import dse.serving.step_table as step_table

    passes = []
    real = step_table.capped_steps

    def counted(graphs, *args, **kwargs):
        passes.append(len(graphs))
        return real(graphs, *args, **kwargs)

    monkeypatch.setattr(step_table, "capped_steps", counted)
    req = LoadRequest(
        mode="concurrency", concurrency=8, input_tokens=256, output_tokens=16, num_requests=24, tp=2
    )
    m = predict_load(ARCH, H100, req).metrics()
    assert len(passes) == 1 and 0.0 < m["comm_time_fraction"] < 1.0


def test_costs_taken_a_few_steps_at_a_time_equal_them_all_at_once(monkeypatch) -> None:
    # Chunks bound the corners' memory on long runs; a later chunk evaluates only the cells it adds.
    import dse.serving.step_table as step_table

    steps = [(0, 300, 1, 0.0), (5, 0, 0, 450.5), (17, 900, 2, 610.0), (32, 0, 0, 700.0), (3, 64, 1, 500.0)]
    whole = _table().costs(steps)
    monkeypatch.setattr(step_table, "COSTS_CHUNK", 2)
    chunked = _table()
    assert chunked.costs(steps) == whole == [_table()(*step) for step in steps]
    grid = len(chunked.d_grid) * len(chunked.p_grid) * len(chunked.c_grid)
    assert chunked.evaluations == len(chunked.cells) < grid  # no cell evaluated twice, not the whole grid


def test_the_default_run_is_long_enough_for_littles_law_at_wide_length_spreads() -> None:
    """A closed loop of 64 clients holds 64 requests, so throughput x mean e2e is 64 in a steady state. With
    lognormal lengths of sigma 1.5 the default 640 requests read 55.5 (a newcomer's finding: the run ends
    before the mean output length settles); the default now grows with 1 + CV^2 of the lengths."""
    from dse.serving.load import default_num_requests, length_spread

    req = LoadRequest(mode="concurrency", concurrency=64, input_tokens=1024, output_tokens=256,
                      length_dist="lognormal", length_sigma=1.5)  # fmt: skip
    m = predict_load(ARCH, H100, req).metrics()
    assert m["requests_per_s"] * m["e2e_latency_s"] == pytest.approx(64, rel=0.05)
    assert length_spread(req) == pytest.approx(np.exp(1.5**2))  # 1 + CV^2 of a lognormal
    preset = engine_preset("vllm", H100)
    fixed = dataclasses.replace(req, length_dist="fixed")
    assert default_num_requests(fixed, preset) == 640  # fixed lengths keep 10 waves of 64
    assert default_num_requests(req, preset) == int(np.ceil(640 * np.exp(2.25)))


def test_a_running_cap_the_kv_cache_never_reaches_changes_no_metric() -> None:
    """The KV cache holds ~483 of Llama-3.2-3B's 1,280-token sequences on an H100 under TensorRT-LLM: a
    closed loop of 512 or 1,000 clients schedules the same run, so every metric must agree. The steady
    window was sized by the cap: at 512 its start waited for a 512th first token that only the second wave
    gives, and the window fell between two waves' prefills (half the tokens/s, twice the J/token)."""
    arch, gpu = load_model_config("llama-3.2-3b"), load_gpu("h100-sxm")
    out = []
    for c in (512, 1000):
        req = LoadRequest(mode="concurrency", concurrency=c, input_tokens=1024, output_tokens=256,
                          num_requests=1000, engine="trtllm")  # fmt: skip
        out.append(predict_load(arch, gpu, req).metrics())
    assert out[0]["steps"] == out[1]["steps"] and out[0]["avg_batch_size"] < 500  # the same, KV-bound run
    for key in ("output_tokens_per_s", "energy_per_output_token_j", "avg_power_w", "window_s"):
        assert out[0][key] == pytest.approx(out[1][key], rel=1e-4), key
    # the window is the run's steady state: about the running batch over a request's median TPOT (within
    # the prefill steps' share); the half-throughput window was 0.43 of it
    steady = out[0]["avg_batch_size"] / out[0]["tpot_p50_s"]
    assert out[0]["output_tokens_per_s"] == pytest.approx(steady, rel=0.15)

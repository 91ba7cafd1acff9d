"""Serving validation against ML.ENERGY and aiconfigurator silicon rows: mapping, step model, MAPE rows."""

from __future__ import annotations

import math

import numpy as np
import pytest

import dse.calibrate.validate.mlenergy_transfer as transfer_module
import dse.calibrate.validate.serving as serving_module
import dse.calibrate.validate.silicon as silicon_module
from dse.calibrate.validate.common import MLENERGY, MLENERGY_TRANSFER, SILICON, cached_arch, cached_gpu
from dse.calibrate.validate.serving import (
    KV_LIMITED_BATCH_FRAC,
    LOAD_METRICS,
    METRICS,
    MLENERGY_GPU,
    MLENERGY_INPUT_TOKENS,
    MLENERGY_MODELS,
    MLENERGY_TASKS,
    _mlenergy_shape,
    format_rows,
    mlenergy_context_fracs,
    mlenergy_length_sigma,
    mlenergy_load_request,
    mlenergy_rows,
    serving_validation_frame,
    validate_serving,
)
from dse.calibrate.validate.silicon import (
    AIC_BENCH_ROUNDS,
    AIC_TRTLLM_FREE_GPU_MEMORY_FRACTION,
    GAP_ANALYSIS_SOURCE,
    SILICON_LENGTH_SIGMA,
    SILICON_OUTPUT_SPREAD,
    SILICON_SAMPLING,
    SILICON_WAVES,
    _precision,
    aic_engine_limits,
    load_aiconfigurator_silicon,
    silicon_frame,
    silicon_kv_dtype,
    silicon_load_request,
    silicon_token_budget,
)
from dse.calibrate.validate.silicon_multigpu import SILICON_MULTIGPU
from dse.errors import ConfigError
from dse.perf.types import OperatingPoint
from dse.serving.load import draw_lengths, predict_load
from dse.serving.memory import CHUNK_TOKENS, kv_capacity_tokens, sglang_mem_fraction_static
from dse.serving.steady import OUTPUT_CONTEXT_FRAC, steady_state
from dse.workload.engine import engine_step_graph
from dse.workload.llm import build_decode_graph
from dse.workload.models import load_model_config
from dse.workload.ops import AttentionOp, GemmOp
from tests.shared_data import needs_shared_data

ACCEPTANCE = 0.20  # issue 5 item 4, first milestone: MAPE <= 20% per metric


@pytest.fixture(scope="module")
def frame():
    return serving_validation_frame(load=False)  # the load model's columns: the slow tests at the end


@pytest.fixture(scope="module")
def rows(frame):
    return validate_serving(frame=frame)


def _row(rows, source, metric, subset="all", group="all"):
    (row,) = [
        r
        for r in rows
        if (r["source"], r["metric"], r["subset"], r["group"]) == (source, metric, subset, group)
    ]
    return row


@needs_shared_data
def test_row_counts(frame):
    ml = frame[frame["source"] == MLENERGY]
    assert len(ml) == 30
    assert ml["model"].value_counts().to_dict() == {"qwen3-8b": 15, "qwen3-14b": 12, "qwen3-32b": 3}
    assert ml["task"].value_counts().to_dict() == {"lm-arena-chat": 21, "gpqa": 9}
    si = frame[frame["source"] == SILICON]
    assert len(si) == 83
    assert si["model"].value_counts().to_dict() == {"qwen3-32b": 50, "llama-3.1-70b": 33}
    assert set(si["gpu"]) == {"h100-sxm", "h200-sxm"}


@needs_shared_data
def test_mlenergy_mapping(frame):
    ml = frame[frame["source"] == MLENERGY].reset_index(drop=True)
    src = mlenergy_rows()
    assert (ml["batch"] == src["avg_batch_size"].round().astype(int)).all()
    assert (ml["input_tokens"] == src["task"].map(MLENERGY_INPUT_TOKENS)).all()
    assert (ml["output_tokens"] == src["avg_output_len_tokens"].round().astype(int)).all()
    fracs = mlenergy_context_fracs()
    f = ml["task"].map(fracs)
    assert (ml["output_context_frac"] == f).all()
    assert (ml["context_len"] == (ml["input_tokens"] + f * ml["output_tokens"]).round()).all()
    assert np.allclose(ml["arrivals_per_step"], ml["batch"] / ml["output_tokens"])
    assert (ml["gpu"] == "h100-sxm").all() and (ml["precision"] == "bf16").all()
    # the median step is a step of the mix: decode-only unless arrivals are frequent
    assert (ml["tpot_s"] >= ml["tpot_decode_only_s"]).all()
    low = ml["arrivals_per_step"] < math.log(2)  # P(no prefill in a step) > 1/2
    assert np.allclose(ml.loc[low, "tpot_s"], ml.loc[low, "tpot_decode_only_s"])
    assert (ml["tpot_mean_s"] >= ml["tpot_decode_only_s"]).all()


@needs_shared_data
def test_mlenergy_context_from_full_kv_caches():
    src = mlenergy_rows()
    fracs = mlenergy_context_fracs(src)
    assert set(fracs) == set(MLENERGY_TASKS)
    gpu = cached_gpu(MLENERGY_GPU)
    for task, f in fracs.items():
        # length-biased sampling puts the running sequences at least half-way through their outputs
        # (f = (1 + CV^2) / 2); f <= 1 is CV <= 1, output lengths no more dispersed than exponential ones
        assert OUTPUT_CONTEXT_FRAC <= f <= 1.0
        part = src[src["task"] == task]
        full = part["avg_batch_size"] < KV_LIMITED_BATCH_FRAC * part["max_num_seqs"]
        assert full.any()  # every task has a row whose KV cache is the limit
        for _, r in part[full].iterrows():
            # cross-check of the assumed prompt length: a full cache holds at least the fixed-length
            # context i + o / 2 per running sequence (a larger assumed i, e.g. 750 tokens for chat, fails)
            arch = cached_arch(MLENERGY_MODELS[r["model"]])
            held = kv_capacity_tokens(arch, gpu, "bf16") / r["avg_batch_size"]
            i, o = MLENERGY_INPUT_TOKENS[task], r["avg_output_len_tokens"]
            assert held >= i + OUTPUT_CONTEXT_FRAC * o
    # a task without KV-limited rows keeps the fixed-length half-way context
    chat = src[(src["task"] == "lm-arena-chat") & (src["max_num_seqs"] <= 16)]
    assert mlenergy_context_fracs(chat) == {"lm-arena-chat": OUTPUT_CONTEXT_FRAC}


@needs_shared_data
def test_silicon_mapping(frame):
    si = frame[frame["source"] == SILICON]
    assert si.loc[si["backend"] == "sglang", "precision"].eq("bf16").all()
    assert si.loc[si["backend"] != "sglang", "precision"].eq("fp8").all()
    assert (si["kv_dtype"] == si["precision"].map({"fp8": "fp8", "bf16": "auto"})).all()
    assert (si["batch"] <= si["concurrency"]).all() and (si["batch"] >= 1).all()
    # steady-state TPOT includes other requests' prefills: never below the pure decode step
    assert (si["tpot_steady_s"] >= si["tpot_decode_only_s"]).all()
    # a request's TTFT is at least its own prefill step: more than a decode step, and no less than the
    # TTFT of the same request alone on the engine (other requests only add work to its steps or queue it)
    assert (si["ttft_s"] > si["tpot_decode_only_s"]).all()
    assert (si["ttft_alone_s"] > si["tpot_decode_only_s"]).all()
    assert (si["ttft_s"] >= si["ttft_alone_s"] * (1 - 1e-9)).all()
    # when the KV cache holds B < N requests, at least N - B of every N requests wait until a running
    # request has decoded its whole output (>= the shortest output's steps at the full batch's step time)
    q = si[si["batch"] < si["concurrency"]]
    assert len(q)
    shortest = (1 - SILICON_OUTPUT_SPREAD / 2) * q["output_tokens"] - 1
    waiting_frac = (q["concurrency"] - q["batch"]) / q["concurrency"]
    assert (q["ttft_s"] > waiting_frac * shortest * q["tpot_decode_only_s"]).all()


@needs_shared_data
def test_silicon_frame_predicts_at_the_given_point(monkeypatch):
    rows = load_aiconfigurator_silicon().head(2)
    monkeypatch.setattr(silicon_module, "load_aiconfigurator_silicon", lambda: rows)
    default = silicon_frame()
    slow = silicon_frame(point=OperatingPoint(sm_clock_hz=1.0e9))  # about half the boost clock
    # the simulated benchmark's TTFT and TPOT follow the operating point, like the steady-state columns
    for column in ("ttft_s", "tpot_s", "ttft_alone_s", "tpot_steady_s"):
        assert (slow[column] > default[column] * 1.05).all(), column


def test_step_graph_without_prefill_is_the_decode_step():
    arch = load_model_config("qwen3-8b")
    step = engine_step_graph(
        arch, decodes=16, prefills=0, input_tokens=500, context_len=800, precision="bf16"
    )
    decode = build_decode_graph(arch, batch=16, context_len=800, precision="bf16")
    assert step.ops == decode.ops


def test_step_graph_fuses_prefill_tokens():
    arch = load_model_config("qwen3-14b")
    step = engine_step_graph(arch, decodes=30, prefills=2, input_tokens=400, context_len=900, precision="fp8")
    gemms = {op.name.rsplit("/", 1)[-1]: op for op in step.ops if isinstance(op, GemmOp)}
    assert gemms["qkv_proj"].m == 30 + 2 * 400 and gemms["qkv_proj"].dtype == "fp8"
    assert gemms["lm_head"].m == 32
    attn = [op for op in step.ops if isinstance(op, AttentionOp)]
    assert len(attn) == 2
    decode, prefill = attn
    assert (decode.batch, decode.seq_len_q, decode.seq_len_kv, decode.backend) == (30, 1, 901, "decode")
    assert (prefill.batch, prefill.seq_len_q, prefill.seq_len_kv) == (2, 400, 400)
    assert prefill.causal and prefill.name.endswith("/prefill_attention")


def test_steady_state_limits_and_identities():
    arch = load_model_config("qwen3-8b")
    gpu = cached_gpu("h100-sxm")
    rare = steady_state(arch, gpu, batch=8, input_tokens=300, output_tokens=20000)
    assert rare.median_step_s == rare.decode_step_s
    assert rare.mean_step_s == pytest.approx(rare.decode_step_s, rel=0.01)
    busy = steady_state(arch, gpu, batch=256, input_tokens=1000, output_tokens=200)
    assert busy.arrivals_per_step == pytest.approx(1.28)
    assert busy.mean_step_s > busy.decode_step_s
    assert busy.ttft_s > busy.mean_step_s  # its own prefill step plus waiting
    # J/token * tokens per step = average power * mean step
    assert busy.energy_per_output_token_j * 256 == pytest.approx(busy.avg_power_w * busy.mean_step_s)
    assert 0 < busy.avg_power_w <= gpu.power.tdp_w * 1.001
    # an engine's host time per step: every step longer by it, the GPU idle meanwhile
    from dse.serving.step_table import run_idle_power_w

    host = steady_state(arch, gpu, batch=256, input_tokens=1000, output_tokens=200, host_step_s=1e-3)
    assert host.mean_step_s == pytest.approx(busy.mean_step_s + 1e-3, rel=1e-12)
    assert host.median_step_s == pytest.approx(busy.median_step_s + 1e-3, rel=1e-12)
    idle_j = 1e-3 * run_idle_power_w(gpu, OperatingPoint())
    per_step_j = busy.energy_per_output_token_j * 256
    assert host.energy_per_output_token_j * 256 == pytest.approx(per_step_j + idle_j)
    assert host.avg_power_w < busy.avg_power_w


def test_kv_capacity_matches_the_memory_model():
    arch = load_model_config("qwen3-32b")
    gpu = cached_gpu("h100-sxm")
    bf16 = kv_capacity_tokens(arch, gpu, "bf16")
    fp8 = kv_capacity_tokens(arch, gpu, "fp8")
    assert 0 < bf16 < fp8  # fp8 weights leave more room for the (bf16) KV cache
    assert bf16 == pytest.approx(38e3, rel=0.1)  # 72 GiB usable - 61 GiB weights, 256 KiB per token
    # an fp8 cache holds twice the tokens in the same memory
    assert kv_capacity_tokens(arch, gpu, "fp8", "fp8") == pytest.approx(2 * fp8)
    assert kv_capacity_tokens(arch, gpu, "bf16", engine="vllm") == bf16
    with pytest.raises(ConfigError, match="engine 'trtlm' is not one of"):
        kv_capacity_tokens(arch, gpu, "bf16", engine="trtlm")


def test_engine_kv_sizing_rules():
    arch = load_model_config("qwen3-32b")
    gpu = cached_gpu("h100-sxm")
    kib256 = 256 * 2**10  # Qwen3-32B bf16 cache: 64 layers x 8 KV heads x 128 x (K, V) x 2 B
    weights_gib = 65.5e9 / 2**30  # 32.8 B parameters in bf16
    # SGLang: 80 GiB - (512 + 1.5 x 8192 + 2 x 256 + 128) MiB reserved -> 0.836 for weights + pool
    assert sglang_mem_fraction_static(gpu) == pytest.approx(1 - 13440 / 81920)
    sglang = kv_capacity_tokens(arch, gpu, "bf16", engine="sglang")
    assert sglang == pytest.approx((0.836 * 80 - weights_gib) * 2**30 / kib256, rel=0.05)
    # TensorRT-LLM: 0.9 of what the weights and the profiling pass leave, more than 0.9 of the whole GPU
    # minus the weights when the weights are large
    trt = kv_capacity_tokens(arch, gpu, "bf16", engine="trtllm")
    assert sglang < kv_capacity_tokens(arch, gpu, "bf16") < trt
    assert trt < 0.9 * (80 - weights_gib) * 2**30 / kib256


@needs_shared_data
def test_summary_rows_are_finite_and_complete(rows, frame):
    keys = {(r["source"], r["metric"]) for r in rows}
    assert keys == set(METRICS) - set(LOAD_METRICS)  # a frame without the load model's columns
    for r in rows:
        assert r["n"] > 0 and math.isfinite(r["mape"]) and math.isfinite(r["bias"])
        assert r["mape"] >= abs(r["bias"]) - 1e-12
    assert _row(rows, MLENERGY, "tpot")["n"] == 30
    assert _row(rows, SILICON, "ttft")["n"] == 83
    assert _row(rows, SILICON, "ttft", subset="concurrency<=16")["n"] == int(
        (frame.loc[frame["source"] == SILICON, "concurrency"] <= 16).sum()
    )
    per_model = [r for r in rows if r["source"] == MLENERGY and r["metric"] == "tpot"]
    assert {r["group"] for r in per_model} >= {"model=qwen3-8b", "model=qwen3-14b", "model=qwen3-32b"}
    assert "tpot" in format_rows(rows)


# Acceptance (first milestone): MAPE <= 20% per metric on the shared rows. The metrics the model does not
# meet yet are strict xfails (meeting one turns the test red until its entry is removed) with the number
# measured when this test was written (see the module docstring of
# dse.calibrate.validate.silicon and the report for the diagnosis); none of them is loosened.
_MISSED = {
    (SILICON, "ttft", "all"): (
        "40.4% MAPE (bias -34%): SGLang rows queue behind whole requests (-92%: by Little's law a ~6k-token "
        "KV pool, SGLang's automatic mem_fraction_static gives ~24k), TensorRT-LLM Qwen3-32B TTFTs exceed "
        "ours by ~2 isolated prefills while their TPOT matches (-43%: latency outside the GPU work); "
        "vLLM rows 14.8%"
    ),
    (SILICON, "ttft", "concurrency<=16"): (
        "45.4% MAPE (bias -45%): the SGLang (-93%) and TensorRT-LLM (47.6%) rows above; vLLM 7.1%"
    ),
}
_ACCEPTANCE_CASES = [
    pytest.param(
        *key,
        marks=[pytest.mark.xfail(strict=True, reason=_MISSED[key])] if key in _MISSED else [],
        id="-".join(key),
    )
    for key in [
        (MLENERGY, "tpot", "all"),
        (MLENERGY, "avg_power", "all"),
        (MLENERGY, "j_per_token", "all"),
        (SILICON, "tpot", "all"),
        (SILICON, "ttft", "all"),
        (SILICON, "ttft", "concurrency<=16"),
    ]
]


@needs_shared_data
@pytest.mark.parametrize(("source", "metric", "subset"), _ACCEPTANCE_CASES)
def test_acceptance_mape(rows, source, metric, subset):
    assert _row(rows, source, metric, subset=subset)["mape"] <= ACCEPTANCE


def test_silicon_token_budget_holds_a_whole_prompt_beside_all_decodes():
    # TensorRT-LLM without chunking: one whole prompt must fit beside the decodes of every client, or an
    # 8192-token prompt would wait for an empty engine (module docstring)
    for i, n in ((1024, 128), (8192, 4), (8192, 128)):
        budget = silicon_token_budget("trtllm", i, n)
        assert budget >= i + n and budget >= CHUNK_TOKENS
    # chunked engines split prompts over steps: their default budget
    assert silicon_token_budget("vllm", 8192, 64) == CHUNK_TOKENS


# ------------------------------------------------------------------ the load model (predict_load)


@needs_shared_data
def test_mlenergy_load_mapping_is_a_closed_loop_at_max_num_seqs():
    src = mlenergy_rows()
    fracs = mlenergy_context_fracs(src)
    for _, r in src.iterrows():
        f = fracs[r["task"]]
        model, load = mlenergy_load_request(r, f)
        arch, i, o, _b = _mlenergy_shape(r)
        assert model == arch.name == MLENERGY_MODELS[r["model"]]
        # all requests submitted, max_num_seqs of them running: a closed loop of max_num_seqs clients
        assert load.mode == "concurrency"
        assert load.concurrency == load.max_num_seqs == int(r["max_num_seqs"])
        assert (load.engine, load.precision, load.sampling) == ("vllm", "bf16", "top_k_top_p")
        assert load.max_batched_tokens == int(r["cfg_max_num_batched_tokens"])
        assert (load.input_tokens, load.output_tokens) == (i, o)
        assert i == MLENERGY_INPUT_TOKENS[r["task"]]
        # lognormal lengths whose length-biased running context is i + f o: f = (1 + CV^2) / 2
        assert load.length_dist == "lognormal"
        cv2 = math.exp(load.length_sigma**2) - 1
        assert (1 + cv2) / 2 == pytest.approx(f)
    assert mlenergy_length_sigma(OUTPUT_CONTEXT_FRAC) == 0.0  # no length bias: fixed lengths
    chat = src[(src["task"] == "lm-arena-chat") & (src["max_num_seqs"] <= 16)].iloc[0]
    assert mlenergy_load_request(chat, OUTPUT_CONTEXT_FRAC)[1].length_dist == "fixed"


@needs_shared_data
def test_silicon_load_mapping_is_the_benchmark():
    for _, r in load_aiconfigurator_silicon().iterrows():
        model, gpu, load = silicon_load_request(r)
        backend, prec, c = str(r["backend"]), _precision(r), int(r["batch_size"])
        gap = str(r["silicon_data_source"]).startswith(GAP_ANALYSIS_SOURCE)
        assert load.mode == "concurrency" and load.concurrency == c
        # aiconfigurator's aiperf script profiles 20 x concurrency requests; InferenceMAX sends 10 x
        assert load.num_requests == (AIC_BENCH_ROUNDS if gap else SILICON_WAVES) * c
        kv_dtype = silicon_kv_dtype(backend, prec)
        assert (load.engine, load.precision, load.kv_dtype) == (backend, prec, kv_dtype)
        assert load.sampling == SILICON_SAMPLING
        assert (load.input_tokens, load.output_tokens) == (int(r["isl"]), int(r["osl"]))
        if gap:  # fixed-length synthetic prompts
            assert load.length_dist == "fixed"
        else:
            assert (load.length_dist, load.length_sigma) == ("lognormal", SILICON_LENGTH_SIGMA)
        # aiconfigurator's generated TensorRT-LLM configs give the KV cache 0.8 of the free memory
        expected_frac = AIC_TRTLLM_FREE_GPU_MEMORY_FRACTION if gap and backend == "trtllm" else None
        assert load.gpu_memory_utilization == expected_frac
        if gap and backend in ("trtllm", "vllm"):  # the generated limits: one whole prompt per step
            limits = aic_engine_limits(backend, load.input_tokens)
            assert (load.max_num_seqs, load.max_batched_tokens) == limits
        elif backend == "trtllm":  # one whole prompt, the longest drawn, fits beside every client's decode
            inp, _out = draw_lengths(load, SILICON_WAVES * c, cached_arch(model).max_position_embeddings)
            assert load.max_batched_tokens >= int(inp.max()) + c
        else:
            assert load.max_batched_tokens is None  # the preset's 8192 (chunked prefill)
    # the spread's coefficient of variation is that of the old simulation's +-10% uniform output spread
    assert abs(SILICON_LENGTH_SIGMA - SILICON_OUTPUT_SPREAD / math.sqrt(12)) < 1e-3


def test_aic_engine_limits_are_the_generator_rules():
    # aiconfigurator's trtllm.rule: max_batch_size 128, max_num_tokens = 128 + isl + 500 rounded up to the
    # 32-token KV blocks (1652 -> 1664 at isl 1024; 4628 -> 4640 at isl 4000); vllm.rule: max-num-seqs 512,
    # max-num-batched-tokens = 512 + isl + 1500; SGLang's rule is not taken (None)
    assert aic_engine_limits("trtllm", 1024) == (128, 1664)
    assert aic_engine_limits("trtllm", 4000) == (128, 4640)
    assert aic_engine_limits("vllm", 4000) == (512, 6012)
    assert aic_engine_limits("sglang", 1024) is None
    for isl in (1, 127, 1024, 8192):  # a whole prompt and every running sequence's decode fit one step
        batch, tokens = aic_engine_limits("trtllm", isl)
        assert tokens % 32 == 0 and batch + isl <= tokens < batch + isl + 500 + 32


@needs_shared_data
def test_gap_analysis_trtllm_tpot_falls_with_the_output_length():
    # One prompt per step (the generated max_num_tokens): the closed loop's requests stay staggered, so the
    # other 7 clients' prefills (~65 ms each for Qwen3-32B fp8 at 1024 tokens) land in each request's decode
    # steps: ~7 x 65 / 127 = 3.6 ms more per token at osl 128 than the decode step, ~0.9 ms at osl 512, a
    # ~2.7 ms fall (measured: 18.7 -> 16.2 ms). With every wave's prompts in one step (8192 tokens) the
    # decodes never meet a prefill and the TPOT is flat.
    si = load_aiconfigurator_silicon()
    gap = si["silicon_data_source"].str.startswith(GAP_ANALYSIS_SOURCE)
    picked = si[gap & (si["backend"] == "trtllm") & (si["isl"] == 1024) & (si["batch_size"] == 8)]
    tpot = {}
    for _, r in picked.iterrows():
        model, gpu, load = silicon_load_request(r)
        tpot[int(r["osl"])] = predict_load(cached_arch(model), cached_gpu(gpu), load).metrics()["tpot_s"]
    assert sorted(tpot) == [128, 256, 512]
    assert tpot[128] > tpot[256] > tpot[512]
    assert 1.5e-3 < tpot[128] - tpot[512] < 4e-3


@needs_shared_data
def test_load_columns_on_a_few_rows(monkeypatch):
    si = load_aiconfigurator_silicon()
    monkeypatch.setattr(silicon_module, "load_aiconfigurator_silicon", lambda: si.groupby("backend").head(1))
    ml = mlenergy_rows()
    ml = ml[ml["max_num_seqs"] <= 8].reset_index(drop=True)
    monkeypatch.setattr(serving_module, "mlenergy_rows", lambda: ml)
    tr = transfer_module.transfer_rows()
    tr = tr[tr["max_num_seqs"] <= 8].groupby("catalog_gpu").head(1).reset_index(drop=True)
    monkeypatch.setattr(transfer_module, "transfer_rows", lambda: tr)
    df = serving_validation_frame()
    assert (df["source"] == SILICON).sum() == 3  # one row per backend
    assert (df["source"] == MLENERGY_TRANSFER).sum() == 2  # one row per GPU
    assert (df["source"] == MLENERGY).sum() == len(ml) == 5  # the ML.ENERGY rows at max_num_seqs 8
    for (source, metric), (pred, _meas) in METRICS.items():
        part = df[df["source"] == source]
        if (source, metric) in LOAD_METRICS:
            assert np.isfinite(part[pred]).all() and (part[pred] > 0).all(), metric
            assert np.isfinite(part[f"err_{metric}"]).all(), metric
    ml_part = df[df["source"] == MLENERGY]
    assert (ml_part["concurrency_load"] == ml_part["max_num_seqs"]).all()
    assert (ml_part["avg_batch_size_load"] <= ml_part["max_num_seqs"] + 1e-9).all()
    si_part = df[df["source"] == SILICON]
    assert (si_part["concurrency_load"] == si_part["concurrency"]).all()
    rows = validate_serving(frame=df)
    assert {(r["source"], r["metric"]) for r in rows} == set(METRICS)


@pytest.fixture(scope="module")
def load_frame():
    return serving_validation_frame()


# The load model's acceptance (issue 15 item 5): MAPE <= 15% per metric in the mode each dataset was
# measured in. The misses are strict xfails with the number measured when this test was written.
LOAD_ACCEPTANCE = 0.15
_LOAD_MISSED = {
    (SILICON, "ttft_load", "all"): (
        "49.1% (bias -42%): SGLang 86% (a ~6k-token KV pool by Little's law against the preset's ~24k), "
        "TensorRT-LLM 54% (its gap-analysis rows: a latency per request outside the engine, 2.5-2.9 "
        "prefills, while their TPOT fits); vLLM 16.1%"
    ),
    (SILICON, "ttft_load", "concurrency<=16"): "48.5%: SGLang 86%, TensorRT-LLM 54%",
}
_LOAD_CASES = [
    pytest.param(
        *key,
        marks=[pytest.mark.xfail(strict=True, reason=_LOAD_MISSED[key])] if key in _LOAD_MISSED else [],
        id="-".join(key),
    )
    for key in [
        (MLENERGY, "tpot_load", "all"),
        (MLENERGY, "avg_power_load", "all"),
        (MLENERGY, "j_per_token_load", "all"),
        (SILICON, "tpot_load", "all"),
        (SILICON, "ttft_load", "all"),
        (SILICON, "ttft_load", "concurrency<=16"),
    ]
]


@pytest.mark.slow
@needs_shared_data
def test_load_rows_exist_and_are_finite(load_frame):
    rows = validate_serving(frame=load_frame)
    assert {(r["source"], r["metric"]) for r in rows} == set(METRICS)
    for r in rows:
        assert r["n"] > 0 and math.isfinite(r["mape"]) and math.isfinite(r["bias"])
    for source, metric in LOAD_METRICS:
        counts = {MLENERGY: 30, MLENERGY_TRANSFER: 108, SILICON: 83, SILICON_MULTIGPU: 60}
        assert _row(rows, source, metric)["n"] == counts[source]
    groups = {r["group"] for r in rows if r["metric"] == "ttft_load"}
    assert groups >= {"backend=vllm", "backend=sglang", "backend=trtllm"}
    ml = load_frame[load_frame["source"] == MLENERGY]
    assert (ml["concurrency_load"] == ml["max_num_seqs"]).all()
    # the running batch is predicted, not given: at most max_num_seqs, below it where the KV cache is full
    assert (ml["avg_batch_size_load"] <= ml["max_num_seqs"] + 1e-9).all()
    assert (ml["avg_batch_size_load"] < 0.9 * ml["max_num_seqs"]).any()


@pytest.mark.slow
@needs_shared_data
@pytest.mark.parametrize(("source", "metric", "subset"), _LOAD_CASES)
def test_load_acceptance_mape(load_frame, source, metric, subset):
    rows = validate_serving(frame=load_frame)
    assert _row(rows, source, metric, subset=subset)["mape"] <= LOAD_ACCEPTANCE

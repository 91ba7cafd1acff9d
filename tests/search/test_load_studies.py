"""Studies under load: the mode and engine knobs as workload defaults or parameters, percentile metrics as
objectives and SLO constraints, goodput, and the load-time checks (file:line errors). Static studies keep
their numbers (the golden files pin them; here: the same call as before)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pandas as pd
import pytest

from dse.errors import ConfigError
from dse.search.breakdown import breakdown_for_point
from dse.search.objective import (
    GOODPUT_METRIC,
    STATUS_KEYS,
    EvalContext,
    build_inputs,
    evaluate_point,
    goodput,
    serving_metric_names,
)
from dse.search.runner import run_study
from dse.search.study import load_study, resolved_yaml, study_hash, study_modes

REPO = Path(__file__).resolve().parents[2]

# Small enough for the default suite: 48 requests of 256 + 32 tokens, ~0.2-0.7 s a point.
LOAD = """\
name: load
gpu: h100-sxm
workload: {mode: concurrency, concurrency: 16, input_tokens: 256, output_tokens: 32, num_requests: 48}
space:
  max_num_seqs: {values: [1, 16]}
objectives:
  ttft_p90_s: minimize
  goodput_requests_per_s: maximize
constraints:
  - ttft_p90_s <= 1.0
search: {sampler: grid, n_points: 10, executor: serial}
"""

MODES = """\
name: modes
gpu: h100-sxm
workload: {input_tokens: 256, output_tokens: 32, num_requests: 48, engine: sglang}
space:
  mode: {values: [concurrency, request_rate]}
  concurrency: {values: [4], when: {mode: concurrency}}
  request_rate_per_s: {values: [2.0, 8.0], when: {mode: request_rate}}
  request_seed: {values: [0, 3]}
objectives:
  energy_per_output_token_j: minimize
  tpot_p90_s: minimize
search: {sampler: grid, n_points: 10, executor: serial}
"""


def write(tmp_path: Path, text: str, name: str = "study.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_metric_names_per_mode_are_the_keys_evaluate_point_gives() -> None:
    static = evaluate_point({}, EvalContext(batch=2, input_tokens=64, output_tokens=8))
    load = evaluate_point(
        {}, EvalContext(mode="concurrency", concurrency=2, input_tokens=64, output_tokens=8, num_requests=8)
    )
    assert set(static) - set(STATUS_KEYS) == set(serving_metric_names(["static"]))
    assert set(load) - set(STATUS_KEYS) == set(serving_metric_names(["concurrency"]))
    both = set(serving_metric_names(["static", "max_throughput"]))
    assert {"ttft_p90_s", "tpot_p99_s", "requests_per_s", GOODPUT_METRIC} <= both
    assert "effective_clock_hz" not in both and "window_s" not in both
    # A static batch's goodput: its requests/s (batch / e2e latency) when the SLO holds.
    assert static[GOODPUT_METRIC] == pytest.approx(static["requests_per_s"])


def test_goodput_is_requests_per_s_when_every_slo_holds() -> None:
    m = {"requests_per_s": 12.0, "ttft_p90_s": 0.4, "tpot_p90_s": 0.06}
    assert goodput(m, ()) == 12.0
    assert goodput(m, (("ttft_p90_s", "<=", 0.5),)) == 12.0
    assert goodput(m, (("ttft_p90_s", "<=", 0.5), ("tpot_p90_s", "<=", 0.05))) == 0.0
    assert goodput(m, (("ttft_p90_s", "<", 0.4),)) == 0.0
    assert goodput({"requests_per_s": None}, (("ttft_p90_s", "<=", 0.5),)) is None


def test_load_knobs_reach_predict_load() -> None:
    from dse.serving.load import LoadRequest, predict_load

    ctx = EvalContext(mode="request_rate", request_rate_per_s=5.0, input_tokens=256, output_tokens=32)
    params = {
        "num_requests": 40,
        "length_dist": "lognormal",
        "length_sigma": 0.3,
        "request_seed": 7,
        "max_num_seqs": 8,
        "max_batched_tokens": 1024,
        "gpu_memory_utilization": 0.8,
        "host_step_s": 2e-4,
        "layer_host_s": 5e-4,
        "engine": "trtllm",
        "precision": "fp8",
        "sm_clock_mhz": 1500,
        "batch": 99,  # the static batch: ignored under load
    }
    inputs = build_inputs(params, ctx)
    assert inputs["load"] == LoadRequest(
        mode="request_rate", request_rate_per_s=5.0, input_tokens=256, output_tokens=32, num_requests=40,
        length_dist="lognormal", length_sigma=0.3, seed=7, max_num_seqs=8, max_batched_tokens=1024,
        gpu_memory_utilization=0.8, host_step_s=2e-4, layer_host_s=5e-4, engine="trtllm", precision="fp8",
    )  # fmt: skip
    m = evaluate_point(params, ctx)
    direct = predict_load(inputs["arch"], inputs["gpu"], inputs["load"], inputs["point"]).metrics()
    assert m["ttft_p90_s"] == direct["ttft_p90_s"] and m["energy_j"] == direct["energy_j"]
    assert m["num_requests"] == 40 and m["avg_batch_size"] <= 8 and m["sm_clock_hz"] == 1.5e9
    # Under load engine and sampling default to vllm and its sampler; the other mode's knob is dropped.
    default = build_inputs({"mode": "concurrency", "concurrency": 3, "request_rate_per_s": 9.0}, ctx)["load"]
    assert (default.engine, default.sampling, default.concurrency, default.request_rate_per_s) == (
        "vllm", None, 3, None,
    )  # fmt: skip
    # a simulated run's breakdown is its representative decode step (dse.serving.load_bounds)
    decode = breakdown_for_point(params, ctx)["bound_by"]["decode"]
    assert decode["bound_by"] in ("dram", "tensor", "power_cap")


def test_static_studies_evaluate_as_before() -> None:
    # The shipped static study: mode static, its engine (vllm: it searches fp8), sampling "none", the static
    # request as before; without an engine a static study runs one kernel per operator, as `dse predict`.
    cfg = load_study(REPO / "studies" / "llm_serving.yaml").config
    ctx = cfg.eval_context()
    assert study_modes(cfg) == ("static",) and ctx.slo == () and ctx.mode == "static"
    inputs = build_inputs({"sm_clock_mhz": 1500}, ctx)
    assert "load" not in inputs
    assert (inputs["batch"], inputs["engine"], inputs["sampling"], inputs["attention"]) == (
        32, "vllm", "none", "flash",
    )  # fmt: skip
    unnamed = cfg.model_copy(update={"workload": cfg.workload.model_copy(update={"engine": None})})
    assert build_inputs({}, unnamed.eval_context())["engine"] == "none"
    from dse.serving.static import ServingRequest, predict_serving

    request = ServingRequest(
        batch=32, input_tokens=1024, output_tokens=256, precision="bf16", attention="flash", kv_dtype=None,
        engine="vllm", sampling="none",
    )  # fmt: skip
    direct = predict_serving(inputs["arch"], inputs["gpu"], request, inputs["point"]).metrics()
    m = evaluate_point({"sm_clock_mhz": 1500}, ctx)
    assert all(m[k] == v for k, v in direct.items())
    assert "mode: static" in resolved_yaml(cfg) and "request_seed" not in resolved_yaml(cfg)


def test_load_study_with_slo_constraints_marks_infeasible_points(tmp_path: Path) -> None:
    loaded = load_study(write(tmp_path, LOAD))
    assert loaded.config.slo() == (("ttft_p90_s", "<=", 1.0),)
    s = run_study(write(tmp_path, LOAD), out=tmp_path / "results")
    df = pd.read_parquet(s.run_dir / "trials.parquet").set_index("param.max_num_seqs")
    assert s.n_points == 2 and s.n_failed == 0 and s.n_feasible == 1
    queued, batched = df.loc[1], df.loc[16]  # one running sequence: 15 requests wait for each slot
    assert not queued["feasible"] and "ttft_p90_s" in queued["reason"] and "violates <= 1" in queued["reason"]
    assert queued[f"metric.{GOODPUT_METRIC}"] == 0.0 and queued["metric.ttft_p90_s"] > 1.0
    assert batched["feasible"] and batched["on_front"]
    assert batched[f"metric.{GOODPUT_METRIC}"] == pytest.approx(batched["metric.requests_per_s"])
    assert batched["metric.num_requests"] == 48 and batched["metric.avg_batch_size"] > 1


def test_mode_and_knobs_as_parameters(tmp_path: Path) -> None:
    path = write(tmp_path, MODES)
    cfg = load_study(path).config
    assert study_modes(cfg) == ("concurrency", "request_rate")
    again = load_study(write(tmp_path, resolved_yaml(cfg), "resolved.yaml")).config
    assert again == cfg and study_hash(again) == study_hash(cfg)
    s = run_study(path, out=tmp_path / "results")
    df = pd.read_parquet(s.run_dir / "trials.parquet")
    assert s.n_points == 6 and s.n_failed == 0, df["error"].tolist()
    assert (df["metric.num_requests"] == 48).all() and (df["metric.tpot_p90_s"] > 0).all()
    rate = df[df["param.mode"] == "request_rate"].sort_values(
        ["param.request_rate_per_s", "param.request_seed"]
    )
    assert rate["param.concurrency"].isna().all() and len(rate) == 4
    rps = rate["metric.requests_per_s"].to_numpy()
    assert rps[2] > rps[0] and rps[0] != rps[1]  # a higher rate serves more; another seed, other arrivals
    conc = df[df["param.mode"] == "concurrency"]
    assert (conc["param.concurrency"] == 4).all() and (conc["metric.avg_batch_size"] <= 4 + 1e-9).all()


GOOD_STATIC = """\
name: bad
gpu: h100-sxm
workload: {batch: 8, input_tokens: 256, output_tokens: 32}
space:
  sm_clock_mhz: {values: [1410, 1980]}
objectives:
  e2e_latency_s: minimize
constraints:
  - ttft_p90_s <= 0.5
"""
GOOD_LOAD = """\
name: bad
gpu: h100-sxm
workload: {mode: concurrency, input_tokens: 256, output_tokens: 32}
space:
  concurrency: {values: [8, 64]}
objectives:
  goodput_requests_per_s: maximize
constraints:
  - tpot_p90_s <= 0.05
"""

# (case id, study text, line, substrings the message must contain)
MALFORMED = [
    (
        "bad-mode",
        GOOD_LOAD.replace("mode: concurrency", "mode: closed_loop"),
        3,
        ["workload.mode", "closed_loop", "allowed:", "static", "request_rate", "max_throughput"],
    ),
    (
        "bad-mode-parameter",
        GOOD_LOAD.replace("  concurrency:", "  mode: {values: [concurrency, poisson]}\n  concurrency:"),
        5,
        ["space.mode.values.1", "'poisson'", "allowed:", "request_rate"],
    ),
    (
        "mode-without-its-knob",
        GOOD_LOAD.replace("  concurrency: {values: [8, 64]}", "  sm_clock_mhz: {values: [1410]}"),
        3,
        ["workload.mode", "mode concurrency needs concurrency", "workload.concurrency"],
    ),
    (
        "rate-mode-parameter-without-rate",
        GOOD_LOAD.replace("  concurrency:", "  mode: {values: [concurrency, request_rate]}\n  concurrency:"),
        5,
        ["space.mode", "mode request_rate needs request_rate_per_s"],
    ),
    (
        "knob-of-another-mode",
        GOOD_LOAD.replace("output_tokens: 32}", "output_tokens: 32, request_rate_per_s: 4}"),
        3,
        ["workload.request_rate_per_s", "applies to mode request_rate only", "concurrency"],
    ),
    (
        "load-knob-in-static-study",
        GOOD_STATIC.replace("  sm_clock_mhz:", "  max_num_seqs: {values: [64]}\n  sm_clock_mhz:"),
        5,
        ["space.max_num_seqs", "applies to the load modes", "static"],
    ),
    (
        "batch-in-load-study",
        GOOD_LOAD.replace("input_tokens: 256", "batch: 8, input_tokens: 256"),
        3,
        ["workload.batch", "static batch", "concurrency"],
    ),
    (
        "eager-under-load",
        GOOD_LOAD.replace("  concurrency:", "  attention: {values: [eager]}\n  concurrency:"),
        5,
        ["space.attention", "eager", "static batch"],
    ),
    (
        "concurrency-not-int",
        GOOD_LOAD.replace("[8, 64]", "[8, 0.5]"),
        5,
        ["space.concurrency.values.1", "integer >= 1"],
    ),
    (
        "concurrency-float-range",
        GOOD_LOAD.replace("{values: [8, 64]}", "{type: float, low: 8, high: 64}"),
        5,
        ["space.concurrency.low", "integer >= 1", "8.0"],
    ),
    (
        "bad-length-dist",
        GOOD_LOAD.replace("output_tokens: 32}", "output_tokens: 32, length_dist: normal}"),
        3,
        ["workload.length_dist", "normal", "allowed:", "lognormal", "exponential"],
    ),
    (
        "sigma-without-lognormal",
        GOOD_LOAD.replace("output_tokens: 32}", "output_tokens: 32, length_sigma: 0.8}"),
        3,
        ["workload.length_sigma", "lognormal"],
    ),
    (
        "rate-not-positive",
        GOOD_LOAD.replace("mode: concurrency", "mode: request_rate").replace(
            "concurrency: {values: [8, 64]}", "request_rate_per_s: {values: [4, 0]}"
        ),
        5,
        ["space.request_rate_per_s.values.1", "number in [1e-06, 1e9]"],
    ),
    (
        "memory-share-above-1",
        GOOD_LOAD.replace("output_tokens: 32}", "output_tokens: 32, gpu_memory_utilization: 1.2}"),
        3,
        ["workload.gpu_memory_utilization", "less than or equal to 1"],
    ),
    (
        "host-time-nan",
        GOOD_LOAD.replace("  concurrency:", "  host_step_s: {values: [0.0, .nan]}\n  concurrency:"),
        5,
        ["space.host_step_s", "nan"],
    ),
    (
        "host-time-negative",
        GOOD_LOAD.replace("  concurrency:", "  host_step_s: {values: [0.0, -0.001]}\n  concurrency:"),
        5,
        ["space.host_step_s.values.1", "[0, 1]"],
    ),
    (
        "layer-host-time-too-long",
        GOOD_LOAD.replace("  concurrency:", "  layer_host_s: {values: [0.0, 0.5]}\n  concurrency:"),
        5,
        ["space.layer_host_s.values.1", "[0, 0.1]"],
    ),
    (
        "request-seed-negative",
        GOOD_LOAD.replace("  concurrency:", "  request_seed: {values: [0, -1]}\n  concurrency:"),
        5,
        ["space.request_seed.values.1", "[0, 2^32)"],
    ),
    (
        "one-output-token-under-load",
        GOOD_LOAD.replace("output_tokens: 32", "output_tokens: 1"),
        3,
        ["workload.output_tokens", ">= 2"],
    ),
    (
        "goodput-without-slo",
        GOOD_LOAD.replace("tpot_p90_s <= 0.05", "avg_power_w <= tdp_w"),
        7,
        ["objectives.goodput_requests_per_s", "latency SLO", "ttft_p90_s <= 0.5"],
    ),
    (
        "load-metric-in-static-study",
        GOOD_STATIC.replace("e2e_latency_s: minimize", "window_s: minimize"),
        7,
        ["objectives.window_s", "not reported in mode static", "allowed:", "ttft_p90_s"],
    ),
    (
        "static-metric-in-load-study",
        GOOD_LOAD.replace("tpot_p90_s <= 0.05", "effective_clock_hz <= 1e9"),
        9,
        ["constraints.0", "effective_clock_hz", "not reported in mode concurrency"],
    ),
]


@pytest.mark.parametrize(
    ("text", "line", "needles"), [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED]
)
def test_malformed_load_study_gives_file_line_field(
    tmp_path: Path, text: str, line: int, needles: list[str]
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_study(path)
    msg = str(info.value)
    assert f"{path}:{line}:" in msg, msg
    for needle in needles:
        assert needle in msg, f"{needle!r} not in {msg!r}"


def test_good_variants_load(tmp_path: Path) -> None:
    load_study(write(tmp_path, GOOD_STATIC))  # percentiles are metrics of a static batch too
    cfg = load_study(write(tmp_path, GOOD_LOAD)).config
    assert cfg.eval_context().slo == (("tpot_p90_s", "<=", 0.05),) and cfg.workload.engine is None
    shipped = load_study(REPO / "studies" / "llm_serving_slo.yaml").config
    assert study_modes(shipped) == ("concurrency",) and len(shipped.slo()) == 2


def test_shipped_slo_study_runs_and_its_report_renders(tmp_path: Path) -> None:
    from dse.report import write_html_report
    from dse.search.breakdown import breakdown_context, logged_point_breakdown

    s = run_study(REPO / "studies" / "llm_serving_slo.yaml", out=tmp_path, n_points=4, executor="serial")
    df = pd.read_parquet(s.run_dir / "trials.parquet")
    assert s.n_points == 4 and s.n_failed == 0
    assert (df["metric.ttft_p90_s"] > 0).all() and (df[f"metric.{GOODPUT_METRIC}"] >= 0).all()
    run = breakdown_context(s.run_dir)
    assert run is not None and run[0].mode == "concurrency" and len(run[0].slo) == 2
    page = write_html_report(
        s.run_dir, breakdown_fn=lambda params: logged_point_breakdown(params, *run)
    ).read_text(encoding="utf-8")
    assert GOODPUT_METRIC in page and '<section id="breakdown">' in page


def test_a_study_serves_each_model_at_its_checkpoint_precision_unless_told(tmp_path: Path) -> None:
    """No precision in the workload: each point's model runs at its checkpoint's quantization (gpt-oss
    MXFP4 experts, as engines serve it), others at bf16; a precision written, also a searched one, holds."""
    study = """\
    name: checkpoints
    gpu: h100-sxm
    model: gpt-oss-20b
    workload: {mode: concurrency, concurrency: 4, input_tokens: 128, output_tokens: 16, num_requests: 8}
    space:
      model: {values: [gpt-oss-20b, qwen3-8b]}
    objectives: {energy_per_output_token_j: minimize}
    search: {sampler: grid, n_points: 4, executor: serial}
    """
    ctx = load_study(write(tmp_path, study)).config.eval_context()
    assert ctx.precision is None
    assert build_inputs({}, ctx)["load"].precision == "mxfp4"
    assert build_inputs({"model": "qwen3-8b"}, ctx)["load"].precision == "bf16"
    assert build_inputs({"precision": "bf16"}, ctx)["load"].precision == "bf16"
    static = build_inputs({"mode": "static"}, ctx)
    assert static["precision"] == "mxfp4"
    # the 4-bit experts are what makes the checkpoint's weights ~4x smaller than a bf16 copy
    ckpt = evaluate_point({}, ctx)
    bf16 = evaluate_point({"precision": "bf16"}, ctx)
    assert ckpt["weight_bytes"] < 0.4 * bf16["weight_bytes"]
    fp8 = study.replace("num_requests: 8}", "num_requests: 8, precision: fp8}")
    written = load_study(write(tmp_path, fp8))
    assert build_inputs({}, written.config.eval_context())["load"].precision == "fp8"


def test_a_failed_point_says_an_unwritten_precision_was_the_checkpoints(tmp_path: Path) -> None:
    """A V100 has no bf16 Tensor Cores for gpt-oss's MXFP4 experts: the point fails naming --precision, a
    flag no study writes, so the reason says the precision was the checkpoint's default."""
    study = """\
    name: v100
    gpu: v100-sxm2
    model: gpt-oss-20b
    workload: {mode: concurrency, concurrency: 2, input_tokens: 64, output_tokens: 8, num_requests: 4}
    space:
      sm_clock_mhz: {values: [1000]}
    objectives: {energy_per_output_token_j: minimize}
    search: {sampler: grid, n_points: 1, executor: serial}
    """
    ctx = load_study(write(tmp_path, study)).config.eval_context()
    with pytest.raises(ConfigError, match=r"mxfp4: no precision written, the model checkpoint's default"):
        evaluate_point({}, ctx)
    with pytest.raises(ConfigError) as written:
        evaluate_point({"precision": "mxfp4"}, ctx)
    assert "checkpoint's default" not in str(written.value)

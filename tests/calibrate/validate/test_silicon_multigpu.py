"""Multi-GPU and MoE silicon rows in the serving validation (`dse.calibrate.validate.silicon_multigpu`)."""

from __future__ import annotations

import math

from dse.calibrate.validate.serving import METRICS, validate_serving
from dse.calibrate.validate.silicon import (
    AIC_BENCH_ROUNDS,
    GAP_ANALYSIS_SOURCE,
    SILICON_WAVES,
    aic_engine_limits,
)
from dse.calibrate.validate.silicon_multigpu import (
    MULTIGPU_MODELS,
    SILICON_MULTIGPU,
    multigpu_frame,
    multigpu_load_request,
    multigpu_rows,
)
from tests.shared_data import needs_shared_data


@needs_shared_data
def test_rows_are_one_node_agg_catalog_rows_deduplicated():
    rows = multigpu_rows()
    # 1,068 rows of the models before 2026 and 157 of MiniMax-M2.5, Kimi-K2.5, GLM-5 and Qwen3.5
    assert len(rows) == 1225
    assert set(rows["model_path"]) <= set(MULTIGPU_MODELS)
    assert (rows["mode"] == "agg").all()
    keys = ["system", "backend", "isl", "osl", "silicon_ttft_ms", "silicon_tpot_ms"]
    assert not rows.duplicated(subset=keys).any()


@needs_shared_data
def test_load_request_follows_the_row():
    for _, r in multigpu_rows().head(40).iterrows():
        _model, _gpu, load = multigpu_load_request(r)
        assert load.concurrency == int(r["batch_size"]) and load.tp == int(r["tp_size"])
        gap = str(r["silicon_data_source"]).startswith(GAP_ANALYSIS_SOURCE)
        assert (load.length_dist == "fixed") == gap


@needs_shared_data
def test_gap_analysis_rows_run_their_generated_engine_limits():
    rows = multigpu_rows()
    gap = rows[rows["silicon_data_source"].str.startswith(GAP_ANALYSIS_SOURCE)]
    for backend in ("trtllm", "vllm", "sglang"):
        r = gap[gap["backend"] == backend].iloc[0]
        _model, _gpu, load = multigpu_load_request(r)
        assert load.num_requests == AIC_BENCH_ROUNDS * int(r["batch_size"])
        limits = aic_engine_limits(backend, int(r["isl"]))
        assert (load.max_num_seqs, load.max_batched_tokens) == (limits or (None, None))
    other = rows[~rows["silicon_data_source"].str.startswith(GAP_ANALYSIS_SOURCE)].iloc[0]
    assert multigpu_load_request(other)[2].num_requests == SILICON_WAVES * int(other["batch_size"])


@needs_shared_data
def test_validate_serving_scores_the_sample_per_engine_and_layout():
    df = multigpu_frame(4)
    assert len(df) == 4 and set(df["source"]) == {SILICON_MULTIGPU}
    rows = validate_serving([SILICON_MULTIGPU], multigpu_rows=4)
    metrics = {r["metric"] for r in rows}
    assert metrics == {m for s, m in METRICS if s == SILICON_MULTIGPU} == {"ttft_load", "tpot_load"}
    groups = {r["group"] for r in rows}
    assert "all" in groups
    assert any(g.startswith("backend=") for g in groups) and any(g.startswith("layout=tp") for g in groups)
    for r in rows:
        assert r["source"] == SILICON_MULTIGPU and r["n"] >= 1
        assert math.isfinite(r["mape"]) and math.isfinite(r["bias"])

"""Training power validation: Zeus GPU power under power limits, MLPerf node power with a fitted host term."""

from __future__ import annotations

import pandas as pd
import pytest

from dse.calibrate.validate.training_power import fit_host_power_w
from dse.training.parallel import GPUS_PER_NODE
from tests.shared_data import needs_shared_data


def test_host_power_fit_recovers_a_constant() -> None:
    gpu_w = pd.Series([500.0, 600.0, 650.0])
    frame = pd.DataFrame({"gpu_power_w": gpu_w, "node_power_w": GPUS_PER_NODE * gpu_w + 1200.0})
    assert fit_host_power_w(frame) == pytest.approx(1200.0)


@needs_shared_data
def test_zeus_power_rows_respect_the_cap() -> None:
    from dse.calibrate.validate.training_power import validate_zeus_power

    frame, skipped = validate_zeus_power()
    assert len(frame) >= 50 and sum(skipped.values()) > 0
    # the model's power never exceeds the limit it runs under
    assert (frame["pred_avg_gpu_power_w"] <= frame["power_limit_w"] + 1e-6).all()
    err = (frame["pred_avg_gpu_power_w"] / frame["avg_gpu_power_w"] - 1).abs().mean()
    assert err < 0.15


@needs_shared_data
def test_mlperf_fit_is_in_sample_on_one_benchmark_only() -> None:
    from dse.calibrate.validate.training_power import validate_mlperf_power

    frame, _, host_w = validate_mlperf_power()
    assert 0.0 < host_w < 5000.0
    assert frame["in_sample"].any() and (~frame["in_sample"]).sum() > frame["in_sample"].sum()


@needs_shared_data
def test_zeus_v100_resnet50_rate_at_large_batches() -> None:
    """fp32 CUDA-core convolutions (no tensor cores on Volta fp32): the kernel model alone, no LLM-fitted
    ratio. Batches of 64 and more at limits of 150 W and up (smaller ones are launch- or loader-bound)."""
    from dse.calibrate.validate.training_power import validate_zeus_power

    frame, _ = validate_zeus_power()
    resnet = frame[frame["source"] == "zeus-v100-resnet50"]
    big = resnet[(resnet["batch"] >= 64) & (resnet["power_limit_w"] >= 150)]
    assert len(big) >= 25
    assert ((big["pred_samples_per_s"] / big["samples_per_s"] - 1).abs() < 0.15).all()


@needs_shared_data
def test_mlperf_throughput_counts_sequences_at_their_real_length() -> None:
    """A BERT sample is one Wikipedia sequence, packed to its real length (about half of 512): at 512
    padded tokens and the eager-framework ratios the model read one third of the logged rate."""
    from dse.calibrate.validate.training_power import validate_mlperf_power

    frame, _, _ = validate_mlperf_power()
    # ResNet-50 at 400 images per GPU runs 23% slow: MLPerf's fused convolution + batch norm + ReLU kernels
    # (the kernel model prices them unfused), priced with the Ampere/Hopper latency corrections
    for source, low in (("mlperf-bert-1node", 0.8), ("mlperf-resnet-1node", 0.7)):
        part = frame[frame["source"].str.startswith(source)]
        ratio = part["pred_samples_per_s_per_gpu"] / part["samples_per_s_per_gpu"]
        assert len(part) >= 10 and ((ratio > low) & (ratio < 1.25)).all(), source


@needs_shared_data
def test_mlperf_lora_runs_are_validated_at_every_scale() -> None:
    """The Llama-2-70B LoRA runs (1, 8 and 64 nodes) are predicted from their config echo, not skipped, as
    the NeMo stack they run (the NeMo rows' ratios and attention kernel), adapters on qkv and o as the
    reference. One node, four micro-batches per step, logs 2.08 samples/s (3.85 s per 8-sample step), 8 nodes
    12.3 (0.65 s per step of one micro-batch). The model prices the per-sample work right and lacks a cost
    per optimizer step: the measured steps exceed the predicted ones by the same ~0.19 s on 1 and 8 nodes
    (5% of the one-node step: a little fast there; 29% of the 8-node one), more at 64."""
    from dse.calibrate.validate.training_power import validate_mlperf_power

    frame, skipped, _ = validate_mlperf_power()
    assert not any("lora" in reason.lower() for reason in skipped)
    ratio, gap_s = {}, {}
    for nodes, batch in ((1, 8), (8, 8), (64, 64)):
        part = frame[frame["source"].str.startswith(f"mlperf-llama2_70b_lora-{nodes}node")]
        assert len(part) == 20  # ten runs, metered AC and DC
        gpus = 8 * nodes
        meas_s = batch / (gpus * part["samples_per_s_per_gpu"])
        pred_s = batch / (gpus * part["pred_samples_per_s_per_gpu"])
        ratio[nodes] = float((part["pred_samples_per_s_per_gpu"] / part["samples_per_s_per_gpu"]).median())
        gap_s[nodes] = float((meas_s - pred_s).median())
    assert 1.0 < ratio[1] < 1.07 and ratio[1] < ratio[8] < ratio[64]
    assert 0.1 < gap_s[1] < 0.3 and gap_s[8] == pytest.approx(gap_s[1], abs=0.03) and gap_s[64] > gap_s[8]


@needs_shared_data
def test_zeus_bert_squad_rows_are_scored_and_sentiment_rows_skipped() -> None:
    """BERT-base on SQuAD runs on both catalog GPUs of the trace; Sentiment140 states no sequence length."""
    from dse.calibrate.validate.training_power import validate_zeus_power

    frame, skipped = validate_zeus_power()
    bert = frame[frame["source"].str.endswith("bert_base_uncased")]
    assert set(bert["gpu"]) == {"a40-48gb", "v100"} and len(bert) >= 100
    assert bert["samples_per_s"].isna().all()  # no epoch size in the trace: no samples/s to score
    assert any("sentiment140" in reason for reason in skipped)
    assert (bert["pred_avg_gpu_power_w"] <= bert["power_limit_w"] + 1e-6).all()
    # the V100 runs as the trace's 32 GB card: BERT-base at 56 x 384 tokens fits (16 GB: 21 of 49 did not)
    assert bert["feasible"].all()


@needs_shared_data
def test_zeus_slowdown_is_scored_below_the_top_limit_and_never_falls_with_less_power() -> None:
    from dse.calibrate.validate.training_power import validate_zeus_power

    frame, _ = validate_zeus_power()
    for _, part in frame.groupby(["source", "dataset", "batch"]):
        part = part.sort_values("power_limit_w")
        # the top limit is the reference (1 on both sides by construction): not scored
        assert part["slowdown"].iloc[-1:].isna().all() and part["slowdown"].iloc[:-1].notna().all()
        # less power never makes the model faster, than at the top limit or than at the next limit up
        pred = part["pred_slowdown"].iloc[:-1]
        assert (pred >= 1.0 - 1e-9).all() and (pred.diff().dropna() <= 1e-9).all()


@needs_shared_data
def test_zeus_bert_epochs_agree_between_gpus_only_with_fp32_matmuls() -> None:
    """Both GPUs ran the same SQuAD epoch, so the epoch the model implies (measured epoch time over predicted
    time per sample) must agree between them. It does with FP32 matmuls on the A40, as PyTorch runs fp32
    matmuls by default since 1.12; TF32 ones would make the A40 1.4x faster than the trace shows."""
    from dse.calibrate.validate.training_power import validate_zeus_power

    frame, _ = validate_zeus_power()
    bert = frame[frame["source"].str.endswith("bert_base_uncased") & frame["slowdown"].isna()]  # top limits
    epoch = (bert["epoch_time_s"] / bert["pred_s_per_sample"]).groupby(bert["gpu"]).median()
    assert 0.85 < epoch["a40-48gb"] / epoch["v100"] < 1.15

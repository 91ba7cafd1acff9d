"""DeepLearningExamples BERT rows of `dse validate training`: unfused attention (its NGC 21.11 PyTorch had no
fused kernel) and phase-2 sequences at their binned length (`DLE_BERT_PHASE2_TOKENS`)."""

from __future__ import annotations

import pandas as pd
import pytest

from tests.shared_data import needs_shared_data


def _dle_bert_rows() -> pd.DataFrame:
    from dse.calibrate.data.training import load_llm_training

    df = load_llm_training()
    return df[df["source"] == "nvidia-deeplearningexamples-bert"]


@needs_shared_data
def test_dle_bert_rows_run_unfused_attention_and_phase_two_at_its_binned_length() -> None:
    from dse.calibrate.validate.training import DLE_BERT_PHASE2_TOKENS, llm_row_request

    # Krell et al. 2021: over half of the 512 slots are padding (256 real tokens); half a 64-token bin more
    assert DLE_BERT_PHASE2_TOKENS == 256 + 32
    computed: dict[tuple[str, int], set[int]] = {}
    for _, row in _dle_bert_rows().iterrows():
        spec = llm_row_request(row)
        assert not isinstance(spec, str)
        req = spec[2]
        assert req.attention == "eager"
        key = (str(row["training_mode"])[:8], int(row["seq_len_tokens"]))
        computed.setdefault(key, set()).add(req.seq_len)
    assert computed == {("pretrain", 128): {128}, ("pretrain", 512): {288}, ("finetune", 384): {384}}


@needs_shared_data
def test_dle_bert_phase_two_costs_per_sequence_what_the_rows_measure_against_phase_one() -> None:
    """The rows' own evidence, independent of the training ratios: on one node (no cross-node traffic), per
    sequence, phase 2 (512 tokens) costs 2.8-3.0x phase 1 (128 tokens) on the same GPUs and precision; the
    model's ratio of the two is within 20% of that in every such pair (now 3-15% low; it read 1.43-1.57x the
    measured ratio with a flash kernel over 512 dense tokens)."""
    from dse.calibrate.validate.training import validate_llm_training

    rows = _dle_bert_rows()
    frame, _ = validate_llm_training(rows[(rows["training_mode"] == "pretrain") & (rows["num_gpus"] <= 8)])
    frame["seq_per_s"] = frame["tokens_per_s_per_gpu"] / frame["seq_len"]
    frame["pred_seq_per_s"] = frame["pred_tokens_per_s_per_gpu"] / frame["seq_len"]
    pairs = 0
    for _, part in frame.groupby(["gpu", "precision", "num_gpus"]):
        by_len = part.groupby("seq_len")[["seq_per_s", "pred_seq_per_s"]].mean()
        if set(by_len.index) != {128, 512}:
            continue
        measured = by_len.loc[128, "seq_per_s"] / by_len.loc[512, "seq_per_s"]
        predicted = by_len.loc[128, "pred_seq_per_s"] / by_len.loc[512, "pred_seq_per_s"]
        assert 2.7 < measured < 3.1
        assert predicted == pytest.approx(measured, rel=0.2)
        pairs += 1
    assert pairs == 6  # A100 FP16 and TF32, V100 FP16, each at 1 and 8 GPUs

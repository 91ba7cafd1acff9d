"""ML.ENERGY rows outside the fitted mapping: which rows, the off-GPU flag, the frame's columns."""

from __future__ import annotations

import numpy as np
import pandas as pd

import dse.calibrate.validate.mlenergy_transfer as transfer_module
from dse.calibrate.validate.common import MLENERGY_TRANSFER
from dse.calibrate.validate.mlenergy_transfer import (
    TRANSFER_MAX_SEQS,
    _not_shown_gpu_bound,
    mlenergy_transfer_frame,
    transfer_rows,
)
from dse.calibrate.validate.serving import MLENERGY_MODELS, MLENERGY_TASKS, mlenergy_rows
from tests.shared_data import needs_shared_data


@needs_shared_data
def test_rows_are_the_ones_no_fit_used():
    rows = transfer_rows()
    assert set(rows["catalog_gpu"]) == {"h100-sxm", "b200"}
    assert set(rows["task"]) <= set(MLENERGY_TASKS)
    assert (rows["max_num_seqs"] <= TRANSFER_MAX_SEQS).all() and (rows["num_gpus"] == 1).all()
    # none of the in-sample rows (dense Qwen3 on one H100) is here, and every in-sample model is on B200
    in_sample = rows["model"].isin(list(MLENERGY_MODELS)) & (rows["catalog_gpu"] == "h100-sxm")
    assert not in_sample.any() and len(mlenergy_rows()) == 30
    assert {"gpt-oss-120b", "gemma-3-27b", "qwen3-30b-a3b", "llama-3.1-8b"} <= set(rows["catalog_model"])
    # the flag is read off the data: Qwen3-8B gpqa at 8 sequences runs 32 ms on B200, 9.7 ms on H100
    assert not rows.loc[rows["catalog_gpu"] == "h100-sxm", "off_gpu_bound"].any()
    flagged = rows[rows["off_gpu_bound"]]
    assert ((flagged["model"] == "Qwen/Qwen3-8B") & (flagged["max_num_seqs"] == 8)).any()


def test_a_b200_row_is_gpu_bound_only_where_its_h100_twin_shows_it():
    df = pd.DataFrame(
        {
            "model": ["m", "m", "m", "m", "m", "m"],
            "task": ["chat", "chat", "chat", "gpqa", "chat", "chat"],
            "max_num_seqs": [8, 8, 16, 8, 32, 32],
            "gpu_model": ["H100", "B200", "B200", "B200", "H100", "B200"],
            "num_gpus": [1, 1, 1, 1, 1, 1],
            "median_itl_s": [0.010, 0.009, 0.001, 0.5, 0.020, 0.012],
        }
    )
    rows = df.assign(catalog_gpu=["h100-sxm", "b200", "b200", "b200", "h100-sxm", "b200"])
    # 0.9 x its twin: 2.3x the GPU gained 10%, off the GPU's pace; no twin at 16 sequences or for gpqa:
    # nothing shows them GPU-bound; 0.6 x its twin at 32 sequences: the GPU's pace; H100 rows never flagged
    assert _not_shown_gpu_bound(df, rows).tolist() == [False, True, True, True, False, False]


@needs_shared_data
def test_frame_on_two_rows(monkeypatch):
    rows = transfer_rows()
    few = rows[(rows["max_num_seqs"] <= 8)].groupby("catalog_gpu").head(1).reset_index(drop=True)
    monkeypatch.setattr(transfer_module, "transfer_rows", lambda: few)
    df = mlenergy_transfer_frame()
    assert len(df) == 2 and (df["source"] == MLENERGY_TRANSFER).all()
    for col in ("tpot_s", "avg_power_w", "energy_per_output_token_j", "output_tokens_per_s"):
        assert np.isfinite(df[col]).all() and (df[col] > 0).all(), col
    # a closed loop at max_num_seqs never runs more sequences than that
    assert (df["avg_batch_size"] <= df["max_num_seqs"] + 1e-9).all()

"""BERT pre-training heads: the masked-LM head runs on the masked 15% of positions only (Devlin et al. 2019;
google-research/bert gathers them before the head), fine-tuning has none; decoders are untouched."""

from __future__ import annotations

import pytest

from dse.errors import ConfigError
from dse.hardware.catalog import load_gpu
from dse.training.llm import llm_step_parts, predict_llm_training
from dse.training.parallel import ParallelLayout
from dse.training.step import TrainingRequest
from dse.workload.models import load_model_config
from dse.workload.ops import GemmOp, SoftmaxOp

BERT = load_model_config("bert-large")


def _request(objective: str, seq_len: int = 512, micro_batch: int = 4) -> TrainingRequest:
    return TrainingRequest(
        micro_batch=micro_batch, global_batch=micro_batch, seq_len=seq_len, precision="fp16",
        objective=objective, layout=ParallelLayout(num_gpus=1),
    )  # fmt: skip


def test_masked_lm_head_covers_the_masked_positions_only() -> None:
    parts, _ = llm_step_parts(BERT, _request("pretrain"))
    decoder = next(op for op in parts.forward.ops if isinstance(op, GemmOp) and op.name.endswith("/decoder"))
    # 15% of 512 positions: 77 per sequence (MLPerf's max_predictions_per_seq is 76), 4 sequences
    assert decoder.m == 4 * 77 and decoder.n == 30522 and decoder.k == 1024
    loss = [op for op in parts.forward.ops if isinstance(op, SoftmaxOp)]
    assert len(loss) == 1 and loss[0].rows == 4 * 77 and loss[0].dtype == "fp32"
    backward = {op.name for op in parts.backward.ops}
    assert decoder.name + "_dgrad" in backward and decoder.name + "_wgrad" in backward


def test_fine_tuning_has_no_pre_training_head() -> None:
    parts, _ = llm_step_parts(BERT, _request("finetune"))
    assert not [op for op in parts.forward.ops if "/mlm/" in op.name]


def test_model_flops_count_the_head_once_per_masked_position() -> None:
    pre, _ = llm_step_parts(BERT, _request("pretrain", seq_len=128, micro_batch=1))
    fine, _ = llm_step_parts(BERT, _request("finetune", seq_len=128, micro_batch=1))
    # 19 masked positions (15% of 128) through the d x d transform and the d x vocab decoder, 3x for the
    # forward, the data gradient and the weight gradient
    head = 3 * 2 * 19 * (1024 * 1024 + 1024 * 30522)
    assert pre.model_flop_per_sample - fine.model_flop_per_sample == pytest.approx(head)


def test_decoders_train_the_same_under_either_objective() -> None:
    gpu = load_gpu("h100-sxm")
    arch = load_model_config("gpt2")
    times = [
        predict_llm_training(arch, gpu, _request(o, seq_len=1024)).step_time_s
        for o in ("pretrain", "finetune")
    ]
    assert times[0] == times[1]


def test_unknown_objective_is_refused() -> None:
    with pytest.raises(ConfigError, match="objective"):
        _request("distill")

"""Packed fine-tuning sequences (`--packed-sample-len`, `dse.training.llm._packed`): attention within each
sample, every other op over the whole sequence."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dse.cli import app
from dse.errors import ConfigError
from dse.hardware.catalog import load_gpu
from dse.training.llm import llm_step_parts, predict_llm_training
from dse.training.parallel import ParallelLayout
from dse.training.step import TrainingRequest
from dse.workload.models import load_model_config
from dse.workload.ops import AttentionOp

GPU = load_gpu("h100-sxm")
LLAMA2 = load_model_config("llama-2-7b")
SEQ = 4096


def _request(sample_len: int, **kw: object) -> TrainingRequest:
    lay = ParallelLayout(num_gpus=8, distributed_optimizer=True)
    base = {"micro_batch": 1, "global_batch": 32, "seq_len": SEQ, "layout": lay}
    return TrainingRequest(**{**base, "packed_sample_len": sample_len, **kw})  # type: ignore[arg-type]


def _attention(graph) -> tuple[float, list[AttentionOp]]:
    ops = [op for op in graph.ops if isinstance(op, AttentionOp)]
    return sum(op.flop * op.count for op in ops), ops


@settings(max_examples=25, deadline=None)
@given(sample_len=st.integers(min_value=16, max_value=SEQ))
def test_attention_runs_within_each_sample_and_nothing_else_changes(sample_len: int) -> None:
    """S // L causal attentions of L tokens and one of the remainder: the tokens are all there, the causal
    work is (about) L / S of the whole sequence's; GEMMs, norms and elementwise ops are untouched."""
    whole, _ = llm_step_parts(LLAMA2, _request(0))
    packed, _ = llm_step_parts(LLAMA2, _request(sample_len))
    others = [op for op in whole.forward.ops if not isinstance(op, AttentionOp)]
    assert [op for op in packed.forward.ops if not isinstance(op, AttentionOp)] == others
    flop_whole, _ = _attention(whole.forward)
    flop_packed, ops = _attention(packed.forward)
    assert sum(op.batch * op.seq_len_q for op in ops) == SEQ  # micro-batch 1: one sequence's tokens
    full, rest = divmod(SEQ, sample_len)
    # causal FLOPs grow as n (n + 1) / 2 per sequence of n tokens
    expected = (full * sample_len * (sample_len + 1) + rest * (rest + 1)) / (SEQ * (SEQ + 1))
    assert flop_packed / flop_whole == pytest.approx(expected, rel=0.02)


def test_one_sample_per_sequence_is_the_unpacked_step() -> None:
    whole = predict_llm_training(LLAMA2, GPU, _request(0), train_coeffs=None)
    assert predict_llm_training(LLAMA2, GPU, _request(SEQ)).step_time_s == whole.step_time_s


def test_packing_speeds_up_the_step_and_reports_itself() -> None:
    whole = predict_llm_training(LLAMA2, GPU, _request(0)).metrics()
    packed = predict_llm_training(LLAMA2, GPU, _request(256)).metrics()
    assert packed["tokens_per_s_per_gpu"] > 1.03 * whole["tokens_per_s_per_gpu"]
    assert packed["packed_sample_len"] == 256 and whole["packed_sample_len"] == 0


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"attention": "eager"}, "block mask"),
        ({"seq_len": 128}, "exceeds --seq-len"),
    ],
)
def test_packing_is_refused_where_it_does_not_apply(kw: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        predict_llm_training(LLAMA2, GPU, _request(256, **kw))


def test_packing_with_context_parallelism_and_negative_lengths_are_refused() -> None:
    lay = ParallelLayout(num_gpus=8, cp=2)
    with pytest.raises(ConfigError, match="--cp"):
        predict_llm_training(LLAMA2, GPU, _request(256, layout=lay))
    with pytest.raises(ConfigError, match="packed_sample_len"):
        _request(-1)


def test_cli_takes_the_flag_for_llms_and_refuses_it_for_vision_models() -> None:
    runner = CliRunner()
    args = ["predict", "--model", "llama-2-7b", "--gpu", "h100-sxm", "--training", "--num-gpus", "8"]
    args += ["--seq-len", "4096", "--distributed-optimizer", "--packed-sample-len", "256", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["packed_sample_len"] == 256
    vision = ["predict", "--model", "resnet-50", "--gpu", "h100-sxm", "--training"]
    refused = runner.invoke(app, [*vision, "--packed-sample-len", "256"])
    assert refused.exit_code == 2 and "vision model" in refused.output


def test_windows_and_chunks_split_within_each_sample() -> None:
    """A sample shorter than Gemma-3's 1,024-token window attends as a whole causal sample on every layer,
    local or global, as the prefill of a sequence that short does."""
    gemma = load_model_config("gemma-3-12b")
    parts, _ = llm_step_parts(gemma, _request(256, seq_len=4096))
    _, ops = _attention(parts.forward)
    assert {(op.batch, op.seq_len_q, op.seq_len_kv, op.causal) for op in ops} == {(16, 256, 256, True)}
    assert sum(op.count for op in ops) == gemma.num_layers

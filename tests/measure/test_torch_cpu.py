"""The torch model of a whole-model run, built on the CPU: does it run the ops the dse graph predicts?

A measured breakdown is only comparable with a predicted one if the torch model (`dse.measure.torch_llm`)
executes the graph's operators under the graph's names and with the graph's work. These checks need a
(CPU) PyTorch, not a GPU: the model is built with `device="cpu"`, two layers and a small vocabulary (the
per-layer shapes stay the real ones). CI installs the CPU wheel (.ci/run); without torch they skip.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
from pathlib import Path

import pytest

from dse.workload.llm import build_decode_graph, build_prefill_graph
from dse.workload.models import load_model_config
from dse.workload.ops import AttentionOp, GemmOp

torch = pytest.importorskip("torch")
from torch.profiler import ProfilerActivity, profile  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402

from dse.measure.torch_llm import build_torch_llm  # noqa: E402

BATCH, SEQ = 2, 64
CASES = [
    (model, phase, attention)
    for model in ("gpt2", "llama-3.1-8b", "qwen3-8b", "opt-1.3b", "bert-large")
    for phase in ("prefill", "decode")
    for attention in ("flash", "eager")
    if not (model == "bert-large" and phase == "decode")
]


def _small(name: str):
    # Two layers and 1024 vocabulary entries: the layer shapes (hidden, heads, GQA, MLP) are the model's own.
    return load_model_config(name).model_copy(update={"num_layers": 2, "vocab_size": 1024})


def _graph(arch, phase: str, attention: str):
    if phase == "prefill":
        return build_prefill_graph(arch, batch=BATCH, seq_len=SEQ, precision="bf16", attention=attention)
    return build_decode_graph(arch, batch=BATCH, context_len=SEQ, precision="bf16", attention=attention)


@pytest.fixture(scope="module", params=CASES, ids=lambda c: "-".join(c))
def case(request):
    model, phase, attention = request.param
    arch = _small(model)
    runner = build_torch_llm(
        arch, batch=BATCH, seq_len=SEQ, phase=phase, precision="bf16", attention=attention, device="cpu"
    )
    yield arch, phase, attention, runner
    runner.release()


def test_every_graph_op_runs_under_its_own_name(case):
    arch, phase, attention, runner = case
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        runner.run(1)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text())["traceEvents"]
    annotated = {e["name"] for e in events if e.get("cat") == "user_annotation"}
    graph_names = [op.name for op in _graph(arch, phase, attention)]
    assert set(graph_names) == annotated


def test_matmul_work_equals_the_graphs(case):
    # FlopCounterMode counts 2*m*n*k per matmul. With eager attention the QK^T and PV products are matmuls
    # too, computed over the whole score matrix (the causal mask is applied after the product), so the
    # graph's GEMMs plus its attention products without the mask must match. The counter does not see
    # PyTorch's CPU flash kernel, so flash cases compare the GEMMs alone.
    arch, phase, attention, runner = case
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        runner.forward()
    graph = _graph(arch, phase, attention)
    expected = sum(op.flop * op.count for op in graph if isinstance(op, GemmOp))
    if attention == "eager":
        attn = [dataclasses.replace(op, causal=False) for op in graph if isinstance(op, AttentionOp)]
        expected += sum(op.flop * op.count for op in attn)
    assert counter.get_total_flops() == pytest.approx(expected, rel=1e-6)


def test_decode_output_is_one_row_of_logits_per_sequence():
    runner = build_torch_llm(_small("qwen3-8b"), batch=BATCH, seq_len=SEQ, phase="decode", device="cpu")
    with torch.inference_mode():
        logits = runner.forward()
    assert tuple(logits.shape) == (BATCH, 1024)
    assert bool(torch.isfinite(logits.float()).all())
    runner.release()


def test_sliding_window_decode_reads_the_window_like_the_graph():
    # Mistral-7B-v0.1: a decode step past 4096 tokens attends to the last 4096 keys in both models.
    arch = _small("mistral-7b")
    runner = build_torch_llm(
        arch, batch=1, seq_len=5000, phase="decode", precision="bf16", attention="eager", device="cpu"
    )
    with torch.inference_mode(), FlopCounterMode(display=False) as counter:
        runner.forward()
    graph = build_decode_graph(arch, batch=1, context_len=5000, precision="bf16", attention="eager")
    (attn,) = [op for op in graph if isinstance(op, AttentionOp)]
    assert attn.seq_len_kv == 4096
    expected = sum(op.flop * op.count for op in graph if isinstance(op, GemmOp | AttentionOp))
    assert counter.get_total_flops() == pytest.approx(expected, rel=1e-6)
    runner.release()

"""CUDA-graph padding of decode steps: the dense ops run at the padded batch, attention and the sampler at the
real one (`dse.serving.step_table.StepTable._corners`)."""

from __future__ import annotations

import dataclasses

import pytest

from dse.hardware.catalog import load_gpu
from dse.serving.load import LoadRequest, StepTable, predict_load, resolve_preset
from dse.serving.step_table import capped_steps, step_graph
from dse.workload.graph import WorkloadGraph
from dse.workload.models import load_model_config
from dse.workload.ops import AttentionOp
from dse.workload.sharding import SINGLE, Parallelism

ARCH = load_model_config("llama-3.1-8b")
H100 = load_gpu("h100-sxm")
CONTEXT = 600


def _table(par: Parallelism = SINGLE) -> StepTable:
    """A vLLM step table whose captured sizes 1, 4, 8 put a step of 2 decodes on the grid cell 2 and its
    padded graph on the cell 4 (the decode grid is 0, 1, 2, 4, 8): no interpolation between them."""
    preset = resolve_preset(LoadRequest(mode="max_throughput", input_tokens=512, output_tokens=8), H100)
    preset = dataclasses.replace(preset, cuda_graph_sizes=(1, 4, 8))
    return StepTable(
        ARCH, H100, None, None, None, precision="bf16", preset=preset, kv_dtype=None, mean_input=512,
        max_decodes=8, max_prompt_tokens=2048, context_range=(CONTEXT, CONTEXT), par=par,
    )  # fmt: skip


def _real_rows(decodes: int, par: Parallelism = SINGLE) -> WorkloadGraph:
    """What a padded graph runs for its real sequences only: attention over their KV cache and the sampler
    (vLLM samples the real requests' rows, outside the graph). A Llama layer has no other per-sequence op."""
    graph = step_graph(ARCH, decodes, 0, 512, CONTEXT, "bf16", "vllm", "top_k_top_p", None, par)
    ops = tuple(op for op in graph.ops if isinstance(op, AttentionOp) or "/sampler/" in op.name)
    return WorkloadGraph(name="real rows", ops=ops, meta=graph.meta)


def test_a_padded_decode_step_runs_attention_and_sampling_for_its_real_sequences_only() -> None:
    table = _table()
    padded_s, padded_j = table(4, 0, 0, float(CONTEXT))
    two_s, two_j = table(2, 0, 0, float(CONTEXT))  # replays the graph of 4
    # the graph of 4, less the attention and sampling of the 2 padding slots, which have no KV cache to
    # read and no token to sample
    lat, en = capped_steps([_real_rows(4), _real_rows(2)], H100, None, table.coeffs, None)
    assert two_s == pytest.approx(padded_s - (lat[0] - lat[1]), rel=1e-9)
    assert two_j == pytest.approx(padded_j - (en[0] - en[1]), rel=1e-9)
    # the padding slots' attention and sampling are real work: the padded step costs more
    assert two_s < padded_s - 1e-6


def test_with_pipeline_stages_the_padding_slots_attention_leaves_the_idle_stages_too() -> None:
    # pp 2: each GPU runs its stage and idles through the other's, so a GPU's share of a step's energy is
    # (its kernels' energy + idle power x the other stage's time) / 2 (`dse.serving.parallel`): work taken
    # off the step takes its idle wait with it.
    par = Parallelism(pp=2)
    table = _table(par)
    padded_s, padded_j = table(4, 0, 0, float(CONTEXT))
    two_s, two_j = table(2, 0, 0, float(CONTEXT))
    lat, en = capped_steps([_real_rows(4, par), _real_rows(2, par)], H100, None, table.coeffs, None)
    saved_s, saved_j = lat[0] - lat[1], en[0] - en[1]
    assert two_s == pytest.approx(padded_s - saved_s, rel=1e-9)
    assert two_j == pytest.approx(padded_j - (saved_j + table.idle_w * saved_s) / 2, rel=1e-9)


def test_one_client_past_a_graph_size_adds_its_tokens_without_a_jump_in_tpot() -> None:
    # vLLM captures 8, 16, 24, ...: 17 clients replay the graph of 24. Its GEMMs read the same weights for 24
    # rows as for 16 (flat in the rows at this size), and the 7 empty slots read no KV cache: one more
    # client adds about one client's TPOT increment, as 15 -> 16 did, and 1/16 more tokens per step. Before,
    # the 7 slots' attention and sampling made the step 7% slower and the throughput fell (1657 -> 1649).
    def run(c: int) -> dict:
        req = LoadRequest(mode="concurrency", concurrency=c, input_tokens=1024, output_tokens=256)
        return predict_load(ARCH, H100, req).metrics()

    m15, m16, m17 = run(15), run(16), run(17)
    assert m17["tpot_s"] - m16["tpot_s"] < 1.5 * (m16["tpot_s"] - m15["tpot_s"])
    assert m17["output_tokens_per_s"] > 1.03 * m16["output_tokens_per_s"]
    assert m17["energy_per_output_token_j"] < m16["energy_per_output_token_j"]

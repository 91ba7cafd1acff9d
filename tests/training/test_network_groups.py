"""Collectives of a gradient group that crosses nodes: each node's share leaves through its own GPUs' NICs."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.hardware.catalog import load_gpu
from dse.training.llm import predict_llm_training
from dse.training.parallel import ParallelLayout, group_collective_time_s
from dse.training.step import TrainingRequest
from dse.workload.models import load_model_config

GPU = load_gpu("h100-sxm")
PORT_BYTES_PER_S = 400e9 / 8  # one 400 Gb/s ConnectX-7 port per GPU in a DGX H100


@pytest.mark.parametrize(
    ("num_gpus", "tp", "cp", "per_node"),
    [(16, 8, 1, 1), (64, 4, 2, 2), (64, 1, 1, 8), (8, 4, 1, 2), (32, 2, 1, 4)],
)
def test_a_gradient_group_holds_a_node_over_tp_of_its_gpus(
    num_gpus: int, tp: int, cp: int, per_node: int
) -> None:
    """Megatron orders ranks tp fastest: the dp x cp ranks holding the same weights sit tp GPUs apart."""
    assert ParallelLayout(num_gpus=num_gpus, tp=tp, cp=cp).grad_ranks_per_node == per_node


def test_one_rank_per_node_reduces_through_one_port() -> None:
    """A ring all-reduce sends 2 (n - 1) / n of the buffer from each rank (Patarasuk and Yuan 2009); with
    one rank per node all of it crosses that rank's own port, at best its line rate."""
    size = 1e9
    one_port = group_collective_time_s("all_reduce", size, 2, GPU, per_node=1)
    assert one_port >= size / PORT_BYTES_PER_S  # 2 x (1/2) x 1 GB through 50 GB/s
    # the same group with eight ranks per node spreads it over eight ports
    assert group_collective_time_s("all_reduce", size, 16, GPU, per_node=8) < one_port / 4


@settings(max_examples=40, deadline=None)
@given(
    size=st.floats(min_value=1e3, max_value=1e10),
    nodes=st.integers(min_value=2, max_value=64),
    collective=st.sampled_from(["all_reduce", "all_gather", "reduce_scatter"]),
)
def test_fewer_ports_per_node_never_speed_a_collective(size: float, nodes: int, collective: str) -> None:
    n = 8 * nodes
    times = [group_collective_time_s(collective, size, n, GPU, per_node=p) for p in (8, 4, 2, 1)]
    assert all(a <= b * (1 + 1e-12) for a, b in zip(times, times[1:], strict=False))
    assert times[0] > 0


def test_a_tp8_step_waits_longer_for_its_gradients_across_nodes() -> None:
    """Llama-3.1-8B at tp 8 on 2 nodes, DDP, one micro-batch: the dp pair's all-reduce of a rank's 2 GB of
    bf16 gradients crosses one port per node, 2 GB / 50 GB/s = 40 ms at line rate, all of it after the
    backward but what the backward hides."""
    arch = load_model_config("llama-3.1-8b")
    req = TrainingRequest(
        micro_batch=1, global_batch=2, seq_len=1024, layout=ParallelLayout(num_gpus=16, tp=8)
    )
    est = predict_llm_training(arch, GPU, req)
    grads_bytes = 2.0 * arch.num_params / 8
    total = est.phase_time_s["communication_overlapped"] + est.phase_time_s["communication"]
    assert total >= grads_bytes / PORT_BYTES_PER_S

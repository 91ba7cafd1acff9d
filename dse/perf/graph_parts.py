"""Graphs at one clock with their energy split by term of the power model, for callers that hold a power
cap themselves (`dse.serving.step_table.capped_steps`): they need each term's energy to move it to another
clock, since each term scales with the clock in its own way (`dse.perf.power`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from dse.hardware.spec import GpuSpec
from dse.perf.coeffs import PowerCoeffs, default_power_coeffs
from dse.perf.distinct import distinct_ops
from dse.perf.dvfs import rows_power
from dse.perf.host import gpu_only_coeffs
from dse.perf.multiclock import op_rows
from dse.perf.power import gpu_power_terms
from dse.perf.predict import check_finite
from dse.workload.graph import WorkloadGraph

ENERGY_PARTS: tuple[str, ...] = ("idle", "active", "dram", "onchip")  # `GraphParts.energy_j` keys


class GraphParts(NamedTuple):
    """Per graph at one clock, no power cap: kernel time (s) and its energy (J) by term of the power model
    (`dse.perf.power.power_parts_w`: idle, active, dram and onchip, the on-chip modules together)."""

    latency_s: np.ndarray
    energy_j: dict[str, np.ndarray]


def predict_graph_parts(
    graphs: Sequence[WorkloadGraph],
    gpu: GpuSpec,
    clock_hz: float,
    coeffs: Any = None,
    power_coeffs: PowerCoeffs | None = None,
    *,
    choice_clock_hz: float | None = None,
) -> GraphParts:
    """Every kernel of each graph at `clock_hz`, in one vectorized pass over the graphs' distinct ops: what a
    caller that holds a power cap itself needs (`dse.serving.step_table.capped_steps`). `choice_clock_hz`:
    the clock GEMM tiles are chosen at (default `clock_hz`: a GPU throttled under its cap runs the tiles
    best at the clock it runs at, as `dse.perf.pass_cap` does)."""
    coeffs = gpu_only_coeffs(coeffs)
    pc = power_coeffs or default_power_coeffs(gpu)
    n = len(graphs)
    distinct, where, counts = distinct_ops(graphs)
    if not distinct:
        return GraphParts(np.zeros(n), {k: np.zeros(n) for k in ENERGY_PARTS})
    with np.errstate(divide="ignore", invalid="ignore"):  # an impossible kernel: reported by check_finite
        rows = op_rows(
            distinct, gpu, np.full(len(distinct), float(clock_hz)), coeffs,
            choice_clock_hz=float(choice_clock_hz or clock_hz),
        )  # fmt: skip
        parts = rows_power(rows, gpu_power_terms(gpu), pc)
    lat = rows["latency_s"]
    check_finite(distinct, lat, parts["total"], gpu)
    idx = np.concatenate(where)
    graph_of = np.repeat(np.arange(n), [w.size for w in where])
    row_s = np.concatenate(counts) * lat[idx]
    latency_s = np.bincount(graph_of, weights=row_s, minlength=n)
    energy_j = {}
    for k in ENERGY_PARTS:
        power_w = parts[k].sum(axis=-1) if k == "onchip" else parts[k]
        energy_j[k] = np.bincount(graph_of, weights=row_s * power_w[idx], minlength=n)
    return GraphParts(latency_s, energy_j)

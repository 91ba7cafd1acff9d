"""Serving runs as joint-fit rows: the linearization reproduces the load model's power."""

from __future__ import annotations

import dataclasses

import numpy as np

from dse.calibrate.fit.power_joint import generation_scale
from dse.calibrate.fit.power_serving import ServingRun, _power, serving_power_rows
from dse.perf.coeffs import load_power_coeffs
from dse.serving.load import LoadRequest

RUN = ServingRun(
    model="qwen2-1.5b",
    gpu="h100-sxm",
    load=LoadRequest(mode="concurrency", concurrency=4, num_requests=16, input_tokens=64, output_tokens=16),
    power_w=300.0,
)


def test_rows_reproduce_the_load_model_at_and_away_from_the_base():
    base = load_power_coeffs("hopper")
    rows = serving_power_rows([RUN], base)
    shared = base.vector() / generation_scale("hopper")
    assert np.allclose(rows.predict_w(shared), _power(RUN, base), rtol=1e-9)
    # energy is linear in the energies at a fixed clock: another set is predicted by the same row, within
    # 0.5%: some of this run's prefill steps are over the cap at the boost clock, and a throttled step
    # (each step's mean holds the cap, `dse.serving.step_table`) does not follow the energies linearly
    # (0.35% here; 0.05% when each kernel held the cap on its own and none of this run's did)
    other = dataclasses.replace(
        base, dram_scale=base.dram_scale * 1.3, tensor_j_per_flop=base.tensor_j_per_flop * 0.8
    )
    predicted = rows.predict_w(other.vector() / generation_scale("hopper"))
    assert np.allclose(predicted, _power(RUN, other), rtol=5e-3)
    # every feature is a power added by a positive energy: none is negative
    assert (rows.features_j >= -1e-9).all() and rows.idle_w[0] > 0

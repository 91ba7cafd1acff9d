"""Moving power coefficients between generations (dse.calibrate.validate.transfer.scale_generation)."""

from __future__ import annotations

import numpy as np
import pytest

from dse.calibrate.validate.transfer import NODE_CAPACITANCE, scale_generation
from dse.perf.coeffs import load_power_coeffs


def test_round_trip_between_generations_is_the_identity():
    pc = load_power_coeffs("ampere")
    back = scale_generation(scale_generation(pc, "hopper"), "ampere")
    np.testing.assert_allclose(back.vector(), pc.vector(), rtol=1e-12)
    assert back.architecture == "ampere"


def test_dram_moves_unchanged_and_on_die_energies_follow_the_node():
    pc = load_power_coeffs("ampere")
    hop = scale_generation(pc, "hopper")
    assert hop.dram_scale == pc.dram_scale  # e_bit is the memory technology's, per GPU
    ratio = NODE_CAPACITANCE["hopper"] / NODE_CAPACITANCE["ampere"]
    assert ratio < 1.0  # a newer node switches less capacitance per unit of work
    assert hop.tensor_j_per_flop == pytest.approx(ratio * pc.tensor_j_per_flop)
    assert hop.active_j_per_sm_cycle == pytest.approx(ratio * pc.active_j_per_sm_cycle)
    assert "ampere -> hopper" in hop.provenance["scaled"]

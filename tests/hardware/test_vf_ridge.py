"""A clock what-if past the V-f table's end costs voltage along the table's ridge (session 35, arch #2).

The H100 table (`h100-sxm.yaml`, its note) is the ridge model: flat 0.67 V to 1140 MHz, linear to 0.95 V at
1875 MHz, flat to 1980 MHz. Clamped at its end, `clocks.sm_clock_max_mhz=3960` ran 3960 MHz at 0.95 V: 52%
more clock than 1980 MHz for the same prefill energy, and "half the SMs at double the clock" drew what the
whole die did.
"""

from __future__ import annotations

import pytest

from dse.errors import ConfigError
from dse.hardware.catalog import list_gpus, load_gpu
from dse.perf.predict import predict_graph
from dse.perf.types import OperatingPoint
from dse.workload.llm import build_prefill_graph
from dse.workload.models import load_model_config

MHZ = 1e6
RIDGE_V_PER_MHZ = (0.95 - 0.67) / (1875 - 1140)  # the H100 table's rising segment, from its note


def _v_past_the_table(clock_mhz: float) -> float:
    return 0.95 + RIDGE_V_PER_MHZ * (clock_mhz - 1980)


@pytest.mark.parametrize("clock_mhz", [1990, 2970, 3960])
def test_voltage_rises_along_the_ridge_past_the_table(clock_mhz: float) -> None:
    gpu = load_gpu("h100-sxm", {"clocks.sm_clock_max_mhz": 3960})
    assert gpu.power.core_v.at(clock_mhz * MHZ) == pytest.approx(_v_past_the_table(clock_mhz))
    assert gpu.power.core_v.at(1980 * MHZ) == 0.95  # the table's own points are unchanged


def test_tensor_core_energy_of_the_same_work_scales_with_v_squared() -> None:
    """The power model charges the Tensor Cores e x FLOP x (V/V_ref)^2, so the same prefill's Tensor-Core
    energy moves by the square of the voltages: at 2970 MHz it was the 1980 MHz figure (V held at 0.95)."""
    gpu = load_gpu("h100-sxm", {"clocks.sm_clock_max_mhz": 3960, "power.tdp_w": 10000})  # no cap binds
    graph = build_prefill_graph(load_model_config("llama-3.1-8b"), batch=8, seq_len=1024)

    def tensor_j(clock_mhz: float) -> float:
        est = predict_graph(graph, gpu, OperatingPoint(sm_clock_hz=clock_mhz * MHZ))
        return est.energy_j_by_module()["tensor"]

    at_table_end = tensor_j(1980)
    for clock_mhz in (2970, 3960):
        ratio = (_v_past_the_table(clock_mhz) / 0.95) ** 2
        assert tensor_j(clock_mhz) == pytest.approx(at_table_end * ratio, rel=1e-6)


def test_idle_power_stays_clamped_at_its_tables_end() -> None:
    gpu = load_gpu("h100-sxm", {"clocks.sm_clock_max_mhz": 3960})
    assert gpu.power.idle_power_w.at(3960 * MHZ) == gpu.power.idle_power_w.value[-1]


def test_a_clock_past_where_the_ridge_reaches_2_v_is_refused() -> None:
    # 0.95 V + the ridge slope reaches 2.0 V at 1980 + 1.05 / slope MHz
    reach_mhz = 1980 + (2.0 - 0.95) / RIDGE_V_PER_MHZ
    with pytest.raises(ConfigError, match=rf"reaches 2\.0 V, .* at {reach_mhz:.0f} MHz, below .* 6000 MHz"):
        load_gpu("h100-sxm", {"clocks.sm_clock_max_mhz": 6000})


@pytest.mark.parametrize("name", list_gpus())
def test_catalog_tables_reach_their_top_clock_unextended(name: str) -> None:
    """Every catalog V-f table ends at its GPU's top clock, so no catalog voltage is extrapolated."""
    gpu = load_gpu(name)
    assert gpu.power.core_v.clock_hz[-1] == gpu.clocks.sm_clock_max_hz
    assert "extrapolated" not in gpu.power.core_v.note


def _with_core_v(clock_mhz: list[float], volts: list[float]) -> dict:
    """Overrides that replace the H100's V-f table (a GPU file's `power.core_v`, as a fuzzer wrote it)."""
    return {"power.core_v.clock_hz": [f * 1e6 for f in clock_mhz], "power.core_v.value": volts}


@pytest.mark.parametrize(
    ("clock_mhz", "volts", "needle"),
    [
        # voltage falling as the clock rises: low clocks cost more voltage than high ones
        ([345, 1140, 1875, 1980], [0.95, 0.9, 0.8, 0.7], "must not fall"),
        # one point at 345 MHz, 1,635 MHz short of the top clock: no ridge, the top ran at 0.67 V, and a
        # 100 GHz what-if was accepted while the stock table refuses past 4,736 MHz
        ([345], [0.67], "does not rise anywhere"),
        ([345, 1140], [0.67, 0.67], "does not rise anywhere"),
    ],
)
def test_a_vf_table_that_cannot_say_the_top_clocks_voltage_is_refused(clock_mhz, volts, needle) -> None:
    with pytest.raises(ConfigError, match=needle):
        load_gpu("h100-sxm", _with_core_v(clock_mhz, volts))

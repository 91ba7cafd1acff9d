"""evaluate_point: how a design point becomes predict_serving's inputs, and how failures are recorded."""

from __future__ import annotations

import sys
import types
from dataclasses import dataclass
from typing import Any

import pytest

import dse.serving.static
from dse.errors import ConfigError
from dse.search.objective import EvalContext, build_inputs, evaluate_chunk, evaluate_point, split_params


def test_split_params_by_prefix() -> None:
    gpu, op, wl = split_params({"gpu.num_sms": 120, "sm_clock_mhz": 1500, "precision": "fp8", "batch": 8})
    assert gpu == {"num_sms": 120} and op == {"sm_clock_mhz": 1500} and wl == {"precision": "fp8", "batch": 8}
    with pytest.raises(ValueError, match="not a gpu"):
        split_params({"clock": 1})


def test_build_inputs_applies_overrides_si_units_and_factors() -> None:
    ctx = EvalContext(gpu="h100-sxm", batch=4, precision="bf16")
    base = build_inputs({}, ctx)
    inp = build_inputs(
        {
            "gpu.num_sms": 120,
            "gpu.memory.technology": "hbm3e",
            "gpu.memory.bus_width_bits": 6144,
            "gpu.memory.energy_factor": 0.5,
            "gpu.sm.tensor_factor": 2.0,
            "sm_clock_mhz": 1500,
            "power_cap_w": 500,
            "precision": "fp8",
            "output_tokens": 64,
        },
        ctx,
    )
    gpu = inp["gpu"]
    assert gpu.num_sms == 120 and gpu.memory.technology == "hbm3e" and gpu.memory.bus_width_bits == 6144
    hbm3e_default = build_inputs({"gpu.memory.technology": "hbm3e"}, ctx)["gpu"].memory.energy_j_per_bit
    assert gpu.memory.energy_j_per_bit == pytest.approx(0.5 * hbm3e_default)
    assert gpu.sm.tensor_flop_per_clk["fp8"] == 2 * base["gpu"].sm.tensor_flop_per_clk["fp8"]
    assert inp["point"].sm_clock_hz == 1.5e9 and inp["point"].power_cap_w == 500.0
    assert (inp["batch"], inp["precision"], inp["output_tokens"]) == (4, "fp8", 64)
    assert base["point"].sm_clock_hz is None and base["gpu"].num_sms == 132


@dataclass
class _Est:
    kwargs: dict

    def metrics(self) -> dict[str, Any]:
        return {
            "e2e_latency_s": 1.0,
            "energy_per_output_token_j": 0.5,
            "feasible": True,
            "infeasible_reason": "",
            "batch_seen": float(self.kwargs["request"].batch),
        }


def test_evaluate_point_calls_predict_serving(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []

    @dataclass(frozen=True, kw_only=True)
    class ServingRequest:
        batch: int
        input_tokens: int
        output_tokens: int
        precision: str
        attention: str
        kv_dtype: str | None
        engine: str
        sampling: str
        tp: int
        pp: int
        ep: int
        dp: int

    def predict_serving(arch: Any, gpu: Any, request: Any, point: Any) -> _Est:
        calls.append((arch, gpu, request, point))
        if request.batch == 13:
            raise ConfigError("13 is unlucky")
        return _Est({"request": request})

    fake = types.ModuleType("dse.serving.static")
    fake.ServingRequest = ServingRequest  # type: ignore[attr-defined]
    fake.predict_serving = predict_serving  # type: ignore[attr-defined]
    fake.check_layout = lambda arch, request: None  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "dse.serving.static", fake)
    monkeypatch.setattr(dse.serving, "static", fake)  # `from dse.serving import static` reads the attribute
    ctx = EvalContext(batch=2)
    m = evaluate_point({"sm_clock_mhz": 1200, "gpu.power.tdp_w": 650}, ctx)
    assert (
        m["batch_seen"] == 2.0 and m["tdp_w"] == 650 and m["power_cap_w"] == 650 and m["sm_clock_hz"] == 1.2e9
    )
    arch, gpu, request, point = calls[0]
    assert (
        arch.name.lower().startswith("llama") and request.precision == "bf16" and point.sm_clock_hz == 1.2e9
    )
    out = evaluate_chunk([{"batch": 13}, {"batch": 3}, {"gpu.num_sms": -1}], ctx, evaluate_point)
    assert out[0]["error"] == "ConfigError: 13 is unlucky" and out[0]["metrics"] == {}
    assert out[1]["error"] is None and out[1]["metrics"]["batch_seen"] == 3.0
    assert out[2]["error"].startswith("ConfigError:") and "num_sms" in out[2]["error"]
    assert all(r["t_eval_s"] >= 0 for r in out)


def test_serving_engine_knobs_reach_the_prediction() -> None:
    # A study can vary the KV-cache dtype, the engine's kernel fusions and the sampler like any workload key.
    ctx = EvalContext(gpu="h100-sxm", model="qwen3-8b", batch=8, input_tokens=256, output_tokens=32)
    base = evaluate_point({}, ctx)
    fp8_kv = evaluate_point({"kv_dtype": "fp8", "engine": "vllm", "sampling": "greedy"}, ctx)
    assert fp8_kv["kv_cache_bytes"] == pytest.approx(
        0.5 * base["kv_cache_bytes"]
    )  # 1 byte per element, not 2
    assert fp8_kv["tpot_s"] != base["tpot_s"]

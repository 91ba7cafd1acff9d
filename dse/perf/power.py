"""Kernel power from utilization, voltage and clock (EnergAIzer eq. 5, written with physical coefficients).

For one kernel running at SM clock f (DESIGN.md section 5):

    P = P_idle(f)                                            measured / estimated table of the GPU
      + sum_m util_m * R_m(f) * e_m * (V(f) / V_REF)^2       on-chip modules, m in l2, smem, tensor, cuda, sfu
      + dram_bytes * 8 * e_bit * dram_scale / latency        the DRAM domain (own clock and voltage)
      + c_active * num_sms * f * (V(f) / V_REF)^2            clock tree / uncore while any kernel runs

- `util_m * latency * R_m(f)` is the work module m does (the paper's activity factor times its peak rate
  at that clock), so `e_m` is energy per unit of work at `V_REF`: J per byte for L2 and shared memory,
  J per FLOP for CUDA cores, J per op for SFUs. Tensor Cores use the **bf16-equivalent dense rate** as
  `R_tensor`: `e_tensor` is J per bf16-equivalent FLOP, so an fp8 FLOP (twice the rate on the same array)
  costs e_tensor / 2 and a tf32 FLOP 2 x e_tensor, the spec-sheet ratios (hardware-facts 3.2).
- Tensor-Core work is the op's useful matmul FLOPs (bf16 equivalents, `tensor_flop`) where the kernel
  model gives them (`multiclock.op_rows` does): util_tensor x latency x R_tensor would charge the latency
  fit's stretch (stall time: 2.2x the MMA work of a memory-bound decode) as MMA work, and tile padding
  (rows of zeros: 8x for an 8-row decode GEMM in 64-row MMAs) as full-activity work. Against util x rate
  x latency this took H200 GEMMs (held out) from 8.3% to 7.8%, ML.ENERGY serving power from 11.3% to 9.8%
  and A100 DVFS from 7.4% to 7.2% (H200 decode attention 13.9% -> 17.3%); charging padded issued MMAs
  instead did 7.7%, 12.8% (small-batch decode steps over-predicted) and 7.2%. Rows without it (a
  `KernelEstimate`, test stand-ins) fall back to util.
- The paper's `alpha * C * V^2 * f` is the same thing: `C_m = e_m * R_m(f) / (f * V_REF^2)`.
- DRAM energy is `e_bit` of the GPU's memory technology (`GpuSpec.memory.energy_j_per_bit`, a catalog
  value) times one fitted scale per architecture, so a memory-technology swap changes e_bit and nothing else.
- P_idle(f) is the GPU's idle table made non-decreasing (its running maximum; see `gpu_power_terms`).
- The active term is our addition: a non-negative energy per SM clock cycle, paid while a kernel runs,
  whatever the modules do. Whole-model A100 data at 510-1410 MHz show power rising with V^2 f even
  for host-bound models whose kernels do little work; module terms alone cannot carry that (their work
  does not depend on how long the SMs wait), so the fit puts it here. While the GPU waits for the host
  between kernels it pays `c_gap` per SM cycle instead (also fitted, also non-negative).

Energy of a kernel is `P * latency`. Everything here is vectorized: arrays of kernels, clocks, or both.
Coefficient files are JSON under `dse/perf/data/power_<architecture>.json`, fitted by
`scripts/fit_power_coeffs.py` (`dse.calibrate.fit.power`); each records its provenance.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.hardware.spec import GpuSpec
from dse.perf.coeffs import PowerCoeffs
from dse.perf.rates import tensor_flop_per_clk
from dse.perf.types import MODULES

V_REF = 1.0  # volts: e_m are energies per unit of work at 1 V

# Modules with an on-chip energy coefficient (DRAM is its own domain).
ONCHIP_MODULES: tuple[str, ...] = ("l2", "smem", "tensor", "cuda", "sfu")
# Keys of an energy breakdown, in report order; they sum to the total.
ENERGY_KEYS: tuple[str, ...] = ("idle", "active", "dram", *ONCHIP_MODULES)
_MODULE_INDEX = {m: i for i, m in enumerate(MODULES)}
_ONCHIP_IDX = np.array([_MODULE_INDEX[m] for m in ONCHIP_MODULES])
_TENSOR = _MODULE_INDEX["tensor"]

# --------------------------------------------------------------------------------------------- the model


@dataclass(frozen=True, slots=True)
class GpuPowerTerms:
    """The GPU-side constants of the power model (rates per clock, e_bit), gathered once per GPU."""

    onchip_rate_per_clk: np.ndarray  # [5] units of work per SM clock, whole chip, ONCHIP_MODULES order
    num_sms: int
    dram_j_per_byte: float  # 8 * e_bit (before the fitted dram_scale)
    idle_clock_hz: np.ndarray
    idle_w: np.ndarray
    v_clock_hz: np.ndarray
    v_v: np.ndarray

    def idle_power_w(self, f: np.ndarray) -> np.ndarray:
        return np.interp(f, self.idle_clock_hz, self.idle_w)

    def v2(self, f: np.ndarray) -> np.ndarray:
        """(V(f) / V_REF)^2."""
        return (np.interp(f, self.v_clock_hz, self.v_v) / V_REF) ** 2


def gpu_power_terms(gpu: GpuSpec) -> GpuPowerTerms:
    """Peak rate per SM clock of every on-chip module and the GPU's DVFS tables, as arrays."""
    sms = gpu.num_sms
    bf16_per_clk = tensor_flop_per_clk(gpu, "bf16")
    rates = np.array(
        [
            gpu.l2.l2_bytes_per_clk,  # whole-chip L2 bytes per clock
            gpu.sm.smem_bytes_per_clk * sms,
            bf16_per_clk * sms,  # bf16-equivalent dense FLOP per clock
            gpu.sm.fp32_flop_per_clk * sms,
            gpu.sm.sfu_op_per_clk * sms,
        ],
        dtype=float,
    )
    return GpuPowerTerms(
        onchip_rate_per_clk=rates,
        num_sms=sms,
        dram_j_per_byte=8.0 * gpu.memory.energy_j_per_bit,
        idle_clock_hz=np.asarray(gpu.power.idle_power_w.clock_hz, dtype=float),
        # NOTE(power): the running maximum: idle power cannot fall as the clock rises at a constant or
        # rising voltage; the measured H100 table dips by 0.6 W between 360 and 540 MHz (noise), which
        # would make near-idle kernels draw less at a higher clock.
        idle_w=np.maximum.accumulate(np.asarray(gpu.power.idle_power_w.value, dtype=float)),
        v_clock_hz=np.asarray(gpu.power.core_v.clock_hz, dtype=float),
        v_v=np.asarray(gpu.power.core_v.value, dtype=float),
    )


def work_util(
    util: np.ndarray,
    latency_s: np.ndarray,
    sm_clock_hz: np.ndarray,
    terms: GpuPowerTerms,
    tensor_flop: np.ndarray | None,
) -> np.ndarray:
    """The utilizations the power model charges: `util`, except the Tensor Cores' where the kernel model
    gives the op's useful bf16-equivalent FLOPs (`tensor_flop`): tensor_flop / (R_tensor(f) * latency)."""
    if tensor_flop is None:
        return util
    out = np.array(util, dtype=float, copy=True)
    rate = terms.onchip_rate_per_clk[ONCHIP_MODULES.index("tensor")] * np.asarray(sm_clock_hz, dtype=float)
    out[..., _TENSOR] = np.asarray(tensor_flop) / (
        rate * np.maximum(np.asarray(latency_s, dtype=float), 1e-30)
    )
    return out


def onchip_work_per_s(util: np.ndarray, sm_clock_hz: np.ndarray, terms: GpuPowerTerms) -> np.ndarray:
    """[..., 5] work per second of each on-chip module: util_m * R_m(f) (`util` is [..., len(MODULES)])."""
    f = np.asarray(sm_clock_hz, dtype=float)[..., None]
    return util[..., _ONCHIP_IDX] * terms.onchip_rate_per_clk * f


def power_parts_w(
    util: np.ndarray,
    latency_s: np.ndarray,
    dram_bytes: np.ndarray,
    sm_clock_hz: np.ndarray,
    terms: GpuPowerTerms,
    coeffs: PowerCoeffs,
    tensor_flop: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """Power of each term while the kernel runs (broadcast over kernels and clocks).

    Args:
        util: [..., len(MODULES)] utilizations; the other arrays broadcast against `util[..., 0]`.

    Returns:
        `idle`, `active`, `dram` ([...] W each), `onchip` ([..., 5] W, ONCHIP_MODULES order) and `total`.
    """
    f = np.asarray(sm_clock_hz, dtype=float)
    v2 = terms.v2(f)
    util = work_util(util, latency_s, f, terms, tensor_flop)
    onchip = onchip_work_per_s(util, f, terms) * coeffs.onchip_e() * v2[..., None]
    dram = dram_bytes * terms.dram_j_per_byte * coeffs.dram_scale / np.maximum(latency_s, 1e-30)
    active = coeffs.active_j_per_sm_cycle * terms.num_sms * f * v2
    idle = terms.idle_power_w(f)
    total = idle + active + dram + onchip.sum(axis=-1)
    return {"idle": idle, "active": active, "dram": dram, "onchip": onchip, "total": total}


def gap_power_w(sm_clock_hz: np.ndarray, terms: GpuPowerTerms, coeffs: PowerCoeffs) -> dict[str, np.ndarray]:
    """Power while the GPU waits for the host between kernels: idle plus the fitted gap term."""
    f = np.asarray(sm_clock_hz, dtype=float)
    active = coeffs.gap_j_per_sm_cycle * terms.num_sms * f * terms.v2(f)
    idle = terms.idle_power_w(f)
    return {"idle": idle, "active": active, "total": idle + active}


def power_features(
    util: np.ndarray,
    latency_s: np.ndarray,
    dram_bytes: np.ndarray,
    sm_clock_hz: np.ndarray,
    terms: GpuPowerTerms,
    tensor_flop: np.ndarray | None = None,
) -> np.ndarray:
    """[..., 8] dynamic energy per unit coefficient (J per unit of each of `PowerCoeffs.coeff_names()`).

    Linear model: dynamic energy of a kernel = features . coeffs.vector(). The gap coefficient's column is
    zero here (gaps are not kernels); callers add gap time * num_sms * f * V^2 themselves.
    """
    f = np.asarray(sm_clock_hz, dtype=float)
    v2 = terms.v2(f)
    lat = np.asarray(latency_s, dtype=float)
    util = work_util(util, lat, f, terms, tensor_flop)
    onchip = onchip_work_per_s(util, f, terms) * (lat * v2)[..., None]
    dram = dram_bytes * terms.dram_j_per_byte
    active = terms.num_sms * f * v2 * lat
    zero = np.zeros_like(active)
    return np.concatenate([onchip, np.stack([dram + zero, active, zero], axis=-1)], axis=-1)


def gap_feature(gap_s: np.ndarray, sm_clock_hz: np.ndarray, terms: GpuPowerTerms) -> np.ndarray:
    """Gap energy per unit `gap_j_per_sm_cycle`: gap time x SM cycles per second x (V/V_REF)^2."""
    f = np.asarray(sm_clock_hz, dtype=float)
    return gap_s * terms.num_sms * f * terms.v2(f)

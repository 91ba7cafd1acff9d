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
`scripts/fit_power_coeffs.py` (`dse.calibrate.fit_power`); each records its provenance.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from dse.errors import ConfigError
from dse.hardware.spec import GpuSpec
from dse.perf.multiclock import estimate_arrays
from dse.perf.rates import tensor_flop_per_clk
from dse.perf.types import MODULES, KernelEstimate

V_REF = 1.0  # volts: e_m are energies per unit of work at 1 V

# Modules with an on-chip energy coefficient (DRAM is its own domain).
ONCHIP_MODULES: tuple[str, ...] = ("l2", "smem", "tensor", "cuda", "sfu")
# Keys of an energy breakdown, in report order; they sum to the total.
ENERGY_KEYS: tuple[str, ...] = ("idle", "active", "dram", *ONCHIP_MODULES)
_MODULE_INDEX = {m: i for i, m in enumerate(MODULES)}
_ONCHIP_IDX = np.array([_MODULE_INDEX[m] for m in ONCHIP_MODULES])
_TENSOR = _MODULE_INDEX["tensor"]

# Architectures without a coefficient file of their own borrow the nearest generation's (documented guess).
ARCH_FALLBACK: dict[str, str] = {"ada": "ampere", "lovelace": "ampere", "blackwell": "hopper"}


@dataclass(frozen=True, slots=True, kw_only=True)
class PowerCoeffs:
    """Fitted energy coefficients of one GPU architecture, at V_REF (see the module docstring).

    Units: l2 and smem J/byte, tensor J per bf16-equivalent FLOP, cuda J/FLOP, sfu J/op; dram_scale is
    dimensionless; active and gap are J per SM clock cycle. `host_gap_s` is the per-launch host gap of the
    dataset the coefficients came from (eager PyTorch), offered as a default, never applied silently.
    """

    architecture: str
    l2_j_per_byte: float = 0.0
    smem_j_per_byte: float = 0.0
    tensor_j_per_flop: float = 0.0
    cuda_j_per_flop: float = 0.0
    sfu_j_per_op: float = 0.0
    dram_scale: float = 1.0
    active_j_per_sm_cycle: float = 0.0
    gap_j_per_sm_cycle: float = 0.0
    host_gap_s: float = 0.0
    provenance: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)

    def __post_init__(self) -> None:
        for name in (*self.coeff_names(), "host_gap_s"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0.0):
                raise ConfigError(
                    f"PowerCoeffs({self.architecture}): {name} must be finite and >= 0, got {value}"
                )

    @staticmethod
    def coeff_names() -> tuple[str, ...]:
        """The fitted coefficients, in the order of `vector()` and of the fit's design matrix."""
        return (
            "l2_j_per_byte",
            "smem_j_per_byte",
            "tensor_j_per_flop",
            "cuda_j_per_flop",
            "sfu_j_per_op",
            "dram_scale",
            "active_j_per_sm_cycle",
            "gap_j_per_sm_cycle",
        )

    def vector(self) -> np.ndarray:
        return np.array([getattr(self, n) for n in self.coeff_names()], dtype=float)

    @classmethod
    def from_vector(cls, architecture: str, values: np.ndarray, **extra: Any) -> PowerCoeffs:
        return cls(
            architecture=architecture,
            **dict(zip(cls.coeff_names(), map(float, values), strict=True)),
            **extra,
        )

    def onchip_e(self) -> np.ndarray:
        """[5] energy per unit of work of ONCHIP_MODULES."""
        return np.array(
            [
                self.l2_j_per_byte,
                self.smem_j_per_byte,
                self.tensor_j_per_flop,
                self.cuda_j_per_flop,
                self.sfu_j_per_op,
            ]
        )

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"architecture": self.architecture}
        out.update({n: getattr(self, n) for n in (*self.coeff_names(), "host_gap_s")})
        out["provenance"] = self.provenance
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any], source: str = "") -> PowerCoeffs:
        allowed = {"architecture", *cls.coeff_names(), "host_gap_s", "provenance"}
        unknown = sorted(set(data) - allowed)
        if unknown or "architecture" not in data:
            raise ConfigError(
                f"{source or 'power coefficients'}: unknown keys {unknown} or no 'architecture'"
            )
        return cls(**data)


def write_power_coeffs(coeffs: PowerCoeffs, path: str | Path) -> None:
    Path(path).write_text(json.dumps(coeffs.to_dict(), indent=2, sort_keys=False) + "\n")


def load_power_coeffs_file(path: str | Path) -> PowerCoeffs:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read power coefficients ({exc})") from exc
    return PowerCoeffs.from_dict(data, str(path))


def _data_dir() -> Any:
    return resources.files("dse.perf").joinpath("data")


def list_power_coeffs() -> list[str]:
    """Names of the shipped coefficient sets (`ampere`, `hopper`, `ampere-no-a10`, ...)."""
    d = _data_dir()
    if not d.is_dir():
        return []
    return sorted(p.name[len("power_") : -len(".json")] for p in d.iterdir() if p.name.startswith("power_"))


@cache
def load_power_coeffs(name: str) -> PowerCoeffs:
    """A shipped coefficient set by name (e.g. `ampere`) or a path to a JSON file."""
    if name.endswith(".json") or Path(name).is_file():
        return load_power_coeffs_file(name)
    f = _data_dir().joinpath(f"power_{name}.json")
    if not f.is_file():
        raise ConfigError(f"no shipped power coefficients '{name}'; known: {', '.join(list_power_coeffs())}")
    return PowerCoeffs.from_dict(json.loads(f.read_text()), f"power_{name}.json")


def default_power_coeffs(gpu: GpuSpec) -> PowerCoeffs:
    """The shipped coefficients for `gpu`'s architecture (or the nearest generation's, see ARCH_FALLBACK)."""
    return _default_power_coeffs(gpu.architecture.lower())


@cache
def _default_power_coeffs(arch: str) -> PowerCoeffs:
    # Cached: the serving predictor asks for every graph it predicts; listing package data costs ~0.3 ms.
    known = list_power_coeffs()
    name = arch if arch in known else ARCH_FALLBACK.get(arch, "ampere")
    return load_power_coeffs(name)


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


def kernel_power_w(estimate: KernelEstimate, gpu: GpuSpec, coeffs: PowerCoeffs | None = None) -> float:
    """Power of one kernel while it runs, at the clock of its estimate."""
    coeffs = coeffs or default_power_coeffs(gpu)
    a = estimate_arrays([estimate])
    parts = power_parts_w(
        a["util"], a["latency_s"], a["dram_bytes"], a["sm_clock_hz"], gpu_power_terms(gpu), coeffs
    )
    return float(parts["total"][0])


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

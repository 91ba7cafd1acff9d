"""Collective communication inside one node: time and energy of all-reduce, all-gather, reduce-scatter,
all-to-all and the MoE dispatch/combine exchanges (DESIGN.md section 13).

For a collective of `message_bytes` on `n` GPUs with link bandwidth B and latency L
(`GpuSpec.interconnect`), one call takes

    t = launch_s + steps(n) * latency_frac * min(L, L_fit) + crossings * max(L - L_fit, 0)
        + wire_bytes / (bw_eff(n) * B) * (1 + (ramp_bytes / message_bytes) ** ramp_exp)

- `wire_bytes` is what each GPU sends (ring algorithms; `wire_bytes`): all-reduce `2 (n-1)/n x bytes`,
  all-gather and reduce-scatter half of that, all-to-all and MoE exchanges `(n-1)/n x bytes` through a
  switch and the bisection bound `n/8 x bytes` on a ring. `steps(n)`: `2 (n-1)` for all-reduce, `n - 1`
  otherwise. Message sizes follow nccl-tests: the gathered output of all-gather, the input of
  reduce-scatter, the per-rank buffer of all-reduce and all-to-all.
- The fitted coefficients (`dse.perf.coeffs.CollectiveFit`, per architecture, algorithm and collective)
  are physical: a fixed launch cost, the per-step latency as a fraction of L, the asymptotic fraction of
  B the algorithm reaches (per GPU count: NVLS in-switch reduction makes 8-GPU NCCL all-reduce beat the
  ring's wire bytes, so it can exceed 1), and a ramp that stands for pipeline fill and protocol switches
  (mid-size messages reach the asymptotic bandwidth only slowly). `ramp_exp <= 1` keeps the time
  non-decreasing in message size; the time falls as B rises and rises with L, for every coefficient.
- The fits were made at one link latency, `FIT_LATENCY_S` (every catalog part's), so they cannot separate
  it from the fixed cost; a slower link (a what-if) adds its excess over that at each sequential crossing
  of the link on the call's critical path (`crossings`: a ring's steps, two for a one-shot all-reduce), a
  faster one keeps the fitted (small) share, since the fitted time is mostly software.
- Algorithms: `nccl` (nccl-tests, the NCCL default for the size), the framework all-reduces `vllm`,
  `trtllm` and `sglang` (graph-captured custom one-shot/two-shot kernels below their size limits, NCCL
  above: what serving runs; eager launch cost is the engine's host time, not modelled here), and the
  DeepEP kernels `deepep_ht` (prefill, high throughput) and `deepep_ll` (decode, low latency) for
  `moe_dispatch` / `moe_combine`. A pair without its own fit uses NCCL's for the same collective (the
  frameworks call NCCL for everything but all-reduce), and MoE exchanges without a fit NCCL all-to-all.
- Energy per GPU (`estimate_collective`): the link energy `wire_bytes x 8 x energy_j_per_bit`, plus the
  GPU's idle power at its SM clock for the whole call (it waits on the link; the reduction arithmetic
  is small next to it and not counted).

Intra-node only: between nodes (InfiniBand) the GPU fields do not describe the network yet. Every
function takes scalars or NumPy arrays of message sizes (and GPU counts) and broadcasts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from dse.errors import ConfigError
from dse.hardware.spec import GpuSpec, InterconnectSpec
from dse.perf.coeffs import CollectiveCoeffs, CollectiveFit, default_collective_coeffs
from dse.perf.power import gpu_power_terms

Collective = Literal[
    "all_reduce", "all_gather", "reduce_scatter", "all_to_all", "moe_dispatch", "moe_combine"
]
COLLECTIVES: tuple[str, ...] = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "all_to_all",
    "moe_dispatch",
    "moe_combine",
)
ALGORITHMS: tuple[str, ...] = ("nccl", "vllm", "trtllm", "sglang", "deepep_ht", "deepep_ll")
_EXCHANGES = ("all_to_all", "moe_dispatch", "moe_combine")

Scalar = float | np.ndarray


def _check(collective: str, algorithm: str) -> None:
    if collective not in COLLECTIVES:
        raise ConfigError(f"unknown collective {collective!r}; allowed: {', '.join(COLLECTIVES)}")
    if algorithm not in ALGORITHMS:
        raise ConfigError(f"unknown collective algorithm {algorithm!r}; allowed: {', '.join(ALGORITHMS)}")


def num_steps(collective: str, num_gpus: Scalar) -> np.ndarray:
    """Latency-bound steps of the ring algorithm: `2 (n-1)` for all-reduce, `n - 1` otherwise."""
    n = np.asarray(num_gpus, dtype=float)
    return np.where(collective == "all_reduce", 2.0, 1.0) * np.maximum(n - 1.0, 0.0)


def wire_bytes(
    collective: str, message_bytes: Scalar, num_gpus: Scalar, topology: str = "nvswitch"
) -> np.ndarray:
    """Bytes each GPU sends in one call (see the module docstring); zero on one GPU."""
    n = np.asarray(num_gpus, dtype=float)
    size = np.asarray(message_bytes, dtype=float)
    share = np.maximum(n - 1.0, 0.0) / np.maximum(n, 1.0)
    if collective == "all_reduce":
        return 2.0 * share * size
    if collective in _EXCHANGES and topology == "ring":
        # NOTE(collectives): a ring's bisection is two links per direction; nS/4 bytes cross it each way.
        return np.where(n > 1, np.maximum(share, n / 8.0), 0.0) * size
    return share * size


def moe_exchange_bytes(
    num_tokens: Scalar,
    *,
    hidden_size: int,
    topk: int,
    num_experts: int,
    ep_size: int,
    bytes_per_elem: float = 2.0,
) -> np.ndarray:
    """Message bytes of one MoE dispatch (or combine) per rank: token copies to the distinct ranks that hold
    its top-k experts, `E[ranks] = ep (1 - C(E - E/ep, k) / C(E, k))` under uniform routing (DeepEP sends a
    token once per destination rank). `wire_bytes` then keeps the `(ep-1)/ep` that leave the GPU."""
    if not 0 < topk <= num_experts or ep_size < 1 or num_experts % ep_size:
        raise ConfigError(
            f"MoE exchange: need 0 < topk <= experts and experts divisible by ep ({num_experts}, {ep_size})"
        )
    local = num_experts // ep_size
    # P(no expert of one rank chosen) = prod_{i<k} (E - local - i) / (E - i)
    miss = np.prod([(num_experts - local - i) / (num_experts - i) for i in range(topk)])
    ranks = ep_size * (1.0 - max(float(miss), 0.0))
    return np.asarray(num_tokens, dtype=float) * ranks * hidden_size * bytes_per_elem


def fit_for(coeffs: CollectiveCoeffs, algorithm: str, collective: str) -> CollectiveFit:
    """The fit a call uses: its own, else NCCL's for the collective, else NCCL all-to-all for MoE."""
    _check(collective, algorithm)
    candidates = [(algorithm, collective), ("nccl", collective)]
    if collective in _EXCHANGES:
        candidates.append(("nccl", "all_to_all"))
    for alg, kind in candidates:
        fit = coeffs.get(alg, kind)
        if fit is not None:
            return fit
    known = ", ".join(sorted(coeffs.fits)) or "none"
    raise ConfigError(
        f"{coeffs.architecture} collective coefficients have no {algorithm}:{collective} (have {known})"
    )


def bw_eff_at(fit: CollectiveFit, num_gpus: Scalar) -> np.ndarray:
    """Fraction of link bandwidth at `num_gpus`: interpolated in log2 of the GPU count, clamped outside."""
    x = np.log2(np.maximum(np.asarray(num_gpus, dtype=float), 2.0))
    return np.interp(x, np.log2(np.asarray(fit.bw_eff_num_gpus, dtype=float)), np.asarray(fit.bw_eff))


# The link latency the fits were made at: every catalog part's `interconnect.latency_us` (aiconfigurator's
# empirical p2p latency, software included). One value for all data, so a fit cannot tell the latency apart
# from its fixed cost: `latency_frac` came out 0.002-0.08 and a slower link barely mattered.
FIT_LATENCY_S = 10e-6


def crossings(algorithm: str, collective: str, num_gpus: Scalar) -> np.ndarray:
    """Sequential link crossings on a call's critical path: a ring's steps for NCCL's all-reduce,
    all-gather and reduce-scatter; two for a framework's one-shot all-reduce (its data to the peers, then
    their flags) and DeepEP's high-throughput kernels (the layout notice, then the tokens); one for a
    switched exchange (every rank sends at once) and DeepEP's low-latency kernels."""
    n = np.asarray(num_gpus, dtype=float)
    if algorithm == "nccl" and collective in ("all_reduce", "all_gather", "reduce_scatter"):
        return num_steps(collective, n)
    hops = 2.0 if algorithm in ("vllm", "trtllm", "sglang", "deepep_ht") else 1.0
    return np.where(n > 1, hops, 0.0)


def time_from_fit(
    fit: CollectiveFit, collective: str, message_bytes: Scalar, num_gpus: Scalar, link: InterconnectSpec,
    algorithm: str = "nccl",
) -> np.ndarray:  # fmt: skip
    """The module equation for one fit (what the calibration fits against); zero on one GPU. A link slower
    than the fits' (FIT_LATENCY_S) adds the difference at each of the call's sequential `crossings`; a
    faster one keeps the fitted share (the fitted time is mostly software, which a faster link keeps)."""
    n = np.asarray(num_gpus, dtype=float)
    size = np.asarray(message_bytes, dtype=float)
    wire = wire_bytes(collective, size, n, link.topology)
    ramp = np.where(size > 0, fit.ramp_bytes / np.where(size > 0, size, 1.0), 0.0) ** fit.ramp_exp
    transfer = wire / (bw_eff_at(fit, n) * link.link_bw_bytes_per_s) * (1.0 + ramp)
    latency = min(link.latency_s, FIT_LATENCY_S)
    fixed = fit.launch_s + num_steps(collective, n) * fit.latency_frac * latency
    fixed = fixed + crossings(algorithm, collective, n) * max(link.latency_s - FIT_LATENCY_S, 0.0)
    return np.where(n > 1, fixed + transfer, 0.0)


def _link(gpu: GpuSpec) -> InterconnectSpec:
    if gpu.interconnect is None:
        raise ConfigError(f"{gpu.name} has no interconnect section: multi-GPU collectives need one")
    return gpu.interconnect


def _out(value: np.ndarray) -> Scalar:
    return float(value) if np.ndim(value) == 0 else value


def collective_time_s(
    collective: Collective | str,
    message_bytes: Scalar,
    num_gpus: Scalar,
    gpu: GpuSpec,
    coeffs: CollectiveCoeffs | None = None,
    *,
    algorithm: str = "nccl",
) -> Scalar:
    """Seconds one collective call takes on `num_gpus` GPUs like `gpu` (0 on one GPU).

    Args:
        collective: one of COLLECTIVES.
        message_bytes: nccl-tests message size (see the module docstring); scalar or array.
        num_gpus: GPUs taking part; scalar or array broadcast against `message_bytes`.
        gpu: supplies `interconnect` (link bandwidth, latency, topology).
        coeffs: fitted set; default the shipped one of the GPU's architecture.
        algorithm: one of ALGORITHMS (framework all-reduce, DeepEP kernels, or NCCL).
    """
    n = np.asarray(num_gpus)
    if np.all(n <= 1):
        return _out(np.zeros(np.broadcast(np.asarray(message_bytes), n).shape))
    coeffs = coeffs or default_collective_coeffs(gpu)
    return _out(time_with_coeffs(coeffs, algorithm, collective, message_bytes, num_gpus, _link(gpu)))


def time_with_coeffs(
    coeffs: CollectiveCoeffs,
    algorithm: str,
    collective: str,
    message_bytes: Scalar,
    num_gpus: Scalar,
    link: InterconnectSpec,
) -> np.ndarray:
    """The time of the module equation with `coeffs`, including the NCCL hand-over above `max_bytes`."""
    fit = fit_for(coeffs, algorithm, collective)
    # a pair without its own fit runs NCCL's algorithm (the frameworks call NCCL but for all-reduce)
    algorithm = algorithm if coeffs.get(algorithm, collective) is not None else "nccl"
    own = time_from_fit(fit, collective, message_bytes, num_gpus, link, algorithm)
    if fit.max_bytes is None:
        return own
    # Above its limit the framework hands the message to NCCL; never faster than its largest own
    # message, so time stays non-decreasing in size.
    nccl_fit = fit_for(coeffs, "nccl", collective)
    nccl = time_from_fit(nccl_fit, collective, message_bytes, num_gpus, link)
    at_limit = time_from_fit(fit, collective, fit.max_bytes, num_gpus, link, algorithm)
    return np.where(np.asarray(message_bytes) <= fit.max_bytes, own, np.maximum(nccl, at_limit))


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveEstimate:
    """One collective call, per GPU taking part (multiply energies by the GPU count for all of them)."""

    latency_s: Scalar
    wire_bytes: Scalar
    link_energy_j: Scalar
    idle_energy_j: Scalar

    @property
    def energy_j(self) -> Scalar:
        return self.link_energy_j + self.idle_energy_j

    @property
    def avg_power_w(self) -> Scalar:
        """Idle plus link power while the call runs (0 where it takes no time)."""
        t = np.asarray(self.latency_s, dtype=float)
        power = np.divide(np.asarray(self.energy_j), t, out=np.zeros_like(t), where=t > 0)
        return _out(power)


def estimate_collective(
    collective: Collective | str,
    message_bytes: Scalar,
    num_gpus: Scalar,
    gpu: GpuSpec,
    coeffs: CollectiveCoeffs | None = None,
    *,
    algorithm: str = "nccl",
    sm_clock_hz: Scalar | None = None,
) -> CollectiveEstimate:
    """Time and energy of one collective per GPU: link energy of the bytes sent plus idle power (at
    `sm_clock_hz`, default the GPU's boost clock) while the call runs."""
    latency = np.asarray(
        collective_time_s(collective, message_bytes, num_gpus, gpu, coeffs, algorithm=algorithm)
    )
    link = _link(gpu) if np.any(np.asarray(num_gpus) > 1) else None
    wire = wire_bytes(collective, message_bytes, num_gpus, link.topology if link else "nvswitch")
    link_j = wire * 8.0 * (link.energy_j_per_bit if link else 0.0)
    clock = gpu.clocks.boost_clock_hz if sm_clock_hz is None else sm_clock_hz
    idle_j = gpu_power_terms(gpu).idle_power_w(np.asarray(clock, dtype=float)) * latency
    return CollectiveEstimate(
        latency_s=_out(latency), wire_bytes=_out(wire), link_energy_j=_out(link_j), idle_energy_j=_out(idle_j)
    )


def collective_energy_j(
    collective: Collective | str,
    message_bytes: Scalar,
    num_gpus: Scalar,
    gpu: GpuSpec,
    coeffs: CollectiveCoeffs | None = None,
    *,
    algorithm: str = "nccl",
    sm_clock_hz: Scalar | None = None,
) -> Scalar:
    """Energy of one collective per GPU (`estimate_collective(...).energy_j`)."""
    est = estimate_collective(
        collective, message_bytes, num_gpus, gpu, coeffs, algorithm=algorithm, sm_clock_hz=sm_clock_hz
    )
    return est.energy_j

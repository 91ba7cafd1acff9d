"""Values the kernel model takes and returns (frozen dataclasses: cheap, hashable, picklable)."""

from __future__ import annotations

from dataclasses import dataclass, field

# Hardware modules whose utilization the model reports; the power model (alpha * e_m * R_m(f) * V^2) is
# written over the same names, plus the DRAM domain.
MODULES: tuple[str, ...] = ("dram", "l2", "smem", "tensor", "cuda", "sfu")


@dataclass(frozen=True, slots=True, kw_only=True)
class OperatingPoint:
    """How the GPU runs: requested SM clock (None: its default boost clock) and power cap (None: TDP)."""

    sm_clock_hz: float | None = None
    power_cap_w: float | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelEstimate:
    """The model's answer for one op (one execution; `count` says how many times it runs).

    `util` maps each of MODULES to its busy fraction of `latency_s` in [0, 1]; traffic is per execution.
    """

    name: str
    kind: str
    count: int
    latency_s: float
    sm_clock_hz: float
    flop: float
    dram_bytes: float
    l2_bytes: float
    smem_bytes: float
    util: dict[str, float] = field(hash=False)
    tile: str = ""

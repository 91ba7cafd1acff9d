"""What bounds a kernel, a phase or a workload: the bottleneck attribution of `dse predict` and `whatif`.

A kernel is bound by:

    host         the GPU waits for the host longer than the kernel runs (eager launches: its gap > its time)
    power_cap    the power cap lowered its SM clock below the one requested (by more than 1%)
    dram, l2, smem, tensor, cuda
                 otherwise the module busiest during it (the kernel model's utilization: the fraction of the
                 kernel's time that module works); the SFU counts as cuda. A math unit (tensor, cuda) whose
                 utilization is within MATH_TIE of the busiest module's, as a share of it, wins: shared
                 memory and L2 feed the Tensor Cores in lockstep, so a large GEMM with smem at 100% and
                 tensor at 99.5% is compute-bound. The margin is relative because a kernel held by its
                 latency floor (a small elementwise kernel: launch ramp and DRAM round trip, every module
                 under 5% busy) has all its utilizations scaled down alike; it keeps its busiest module's
                 label (dram for the streaming kernels, whose floor is the memory latency), and a unit it
                 does not use (utilization 0) never wins
    communication  collectives (multi-GPU; none on one GPU)

A phase's `shares` are the fractions of its wall time under each label (a kernel's gaps count as host), and
its `bound_by` is the label with the largest share.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

from dse.perf.types import MODULES

BOUND_LABELS: tuple[str, ...] = ("dram", "l2", "smem", "tensor", "cuda", "host", "communication", "power_cap")
# Clock lowered by the cap by more than this share: the cap binds.
CAP_BINDS_FRAC = 0.01
# A math unit within this share of the busiest module's utilization is the bound (module docstring).
MATH_TIE = 0.05
_MATH = np.array([MODULES.index("tensor"), MODULES.index("cuda")])
_MATH.flags.writeable = False
_MODULE_LABEL = {m: ("cuda" if m == "sfu" else m) for m in MODULES}
_LABEL_OF_MODULE = np.array([_MODULE_LABEL[m] for m in MODULES], dtype=object)  # by module index


def kernel_bounds(
    util: np.ndarray, latency_s: np.ndarray, gap_s: np.ndarray, clock_hz: np.ndarray, requested_hz: float
) -> list[str]:
    """The label of each kernel (module docstring); `util` is [n, len(MODULES)]."""
    u = np.asarray(util, dtype=float)
    busiest = u.argmax(axis=1)
    math = _MATH[u[:, _MATH].argmax(axis=1)]
    math_u = u[np.arange(len(u)), math]
    near = (math_u > 0.0) & (math_u >= (1.0 - MATH_TIE) * u.max(axis=1))
    chosen = np.where(near, math, busiest)
    labels: list[str] = _LABEL_OF_MODULE[chosen].tolist()
    capped = np.asarray(clock_hz, dtype=float) < (1.0 - CAP_BINDS_FRAC) * requested_hz
    host = np.asarray(gap_s, dtype=float) > np.asarray(latency_s, dtype=float)
    for i in np.flatnonzero(capped):
        labels[i] = "power_cap"
    for i in np.flatnonzero(host):
        labels[i] = "host"
    return labels


def time_shares(parts: Iterable[tuple[str, float]]) -> dict[str, float]:
    """Shares of the total time per label, largest first (labels with no time left out)."""
    totals: dict[str, float] = {}
    for label, seconds in parts:
        if seconds > 0:
            totals[label] = totals.get(label, 0.0) + seconds
    whole = sum(totals.values())
    if whole <= 0:
        return {}
    return {k: v / whole for k, v in sorted(totals.items(), key=lambda kv: -kv[1])}


def summarize(shares: Mapping[str, float]) -> dict[str, object]:
    """{"bound_by": the largest share's label, "shares": ...} (bound_by None for a phase with no time)."""
    return {"bound_by": next(iter(shares), None), "shares": dict(shares)}


def combine(weighted: Iterable[tuple[Mapping[str, float], float]]) -> dict[str, float]:
    """Shares of a whole made of parts: (shares of a part, the part's seconds) pairs."""
    return time_shares(
        (label, share * seconds) for shares, seconds in weighted for label, share in shares.items()
    )

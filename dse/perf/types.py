"""Values the kernel model takes and returns (frozen dataclasses: cheap, hashable, picklable)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

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
    `tile` describes the kernel configuration the model chose, `group` the coefficient group that corrected
    it, and `analytical_s` the uncorrected (ideal-rate) latency.
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
    group: str = ""
    analytical_s: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class PhaseCoeffs:
    """Fitted latency correction of one kernel group (EnergAIzer eq. 3).

    `latency_s = lambda_pro * t_prologue + lambda_main * t_mainloop + lambda_epi * t_epilogue + eps_s`.
    Kernels without a pipeline put all their ideal time in the mainloop (eq. 2: lambda_main and eps_s).

    `math_derate` and `load_derate` (>= 1) are our addition: they stretch the math actions (Tensor / CUDA
    cores / SFU) or the load actions (DRAM / L2 / shared memory) inside each mainloop step before the step
    takes the maximum of the two, so that one group fits both compute-bound and memory-bound kernels
    (at most one of them differs from 1; lambda_main scales both). The kernels are fitted at the clock the
    power-cap rule gives them (`dse.calibrate.fit.kernels.default_clock_hz`), so the math derate is what
    remains of the math pipes' shortfall at that clock, not the throttling itself (which the cap rule counts
    once, at prediction time). The load derate is the achievable fraction of DRAM bandwidth. The neutral
    value (1, 1, 1, 0, 1, 1) is the uncorrected analytical model.
    """

    lambda_pro: float = 1.0
    lambda_main: float = 1.0
    lambda_epi: float = 1.0
    eps_s: float = 0.0
    math_derate: float = 1.0
    load_derate: float = 1.0

    def as_tuple(self) -> tuple[float, float, float, float, float, float]:
        return (
            self.lambda_pro,
            self.lambda_main,
            self.lambda_epi,
            self.eps_s,
            self.math_derate,
            self.load_derate,
        )


NEUTRAL_COEFFS = PhaseCoeffs()


@dataclass(frozen=True, slots=True, kw_only=True)
class CoeffTable:
    """Latency corrections by kernel group, looked up hierarchically.

    Group names are slash paths from general to specific, e.g. `gemm/f16/large`. `lookup` returns the
    most specific entry present: `gemm/f16/large`, else `gemm/f16`, else `gemm`, else the neutral
    coefficients. `dse.perf.coeffs.CoeffSet` wraps a table with its provenance.
    """

    groups: dict[str, PhaseCoeffs] = field(default_factory=dict, hash=False)
    # `matrix` results by group tuple: a table is a value (its groups are never changed after it is built),
    # so a matrix of it stays valid; the arrays are read-only so no caller can change a shared one.
    _matrices: dict[tuple[str, ...], np.ndarray] = field(
        default_factory=dict, init=False, compare=False, hash=False, repr=False
    )

    def lookup(self, group: str) -> PhaseCoeffs:
        key = group
        while True:
            found = self.groups.get(key)
            if found is not None:
                return found
            if "/" not in key:
                return NEUTRAL_COEFFS
            key = key.rsplit("/", 1)[0]

    def matrix(self, groups: tuple[str, ...]) -> np.ndarray:
        """[len(groups), 6] array of `PhaseCoeffs.as_tuple()` rows, one per group (read-only)."""
        cached = self._matrices.get(groups)
        if cached is None:
            cached = np.array([self.lookup(g).as_tuple() for g in groups], dtype=float).reshape(
                len(groups), 6
            )
            cached.flags.writeable = False
            self._matrices[groups] = cached
        return cached


NEUTRAL_TABLE = CoeffTable()


def coeff_table(coeffs: object | None) -> CoeffTable:
    """The `CoeffTable` inside `coeffs`: None (neutral), a CoeffTable, or anything with a `.table`."""
    if coeffs is None:
        return NEUTRAL_TABLE
    if isinstance(coeffs, CoeffTable):
        return coeffs
    table = getattr(coeffs, "table", None)
    if isinstance(table, CoeffTable):
        return table
    raise TypeError(f"expected a CoeffTable, a CoeffSet or None, got {type(coeffs).__name__}")


@dataclass(frozen=True, slots=True, kw_only=True)
class GraphEstimate:
    """A workload's kernels and their totals: `latency_s = sum(k.latency_s * k.count)`."""

    name: str
    kernels: tuple[KernelEstimate, ...]
    latency_s: float
    flop: float
    dram_bytes: float

    def by_kind(self) -> dict[str, float]:
        """Total latency per op kind (gemm, attention_flash, softmax, ...)."""
        out: dict[str, float] = {}
        for k in self.kernels:
            out[k.kind] = out.get(k.kind, 0.0) + k.latency_s * k.count
        return out

"""The per-kernel part of a workload prediction (`dse.perf.predict`): each op's latency, power and energy.

A kernel's `energy_j` is its own: `count * power_w * latency_s` over all its executions. Under a launch mode
the GPU also waits for the host before some launches (`gap_s` per execution, at `gap_power_w`: idle plus the
fitted gap term, `dse.perf.power.gap_power_w`); that wait is the kernel's `gap_energy_j`, kept apart from its
own energy, and by name and by kind all waits are one part, `HOST_GAP_PART`. Kernels and waits sum to the
prediction's energy_j. Until session 36 a kernel's energy included the wait before it, so a per-kernel list
ranked the first kernel of every eager pass as the hottest: it carries the pass's 1 ms framework entry
(GPT-2 on H100: a 4.8 us residual add read 0.125 J, 70x its own 0.0018 J).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dse.perf.bounds import time_shares
from dse.perf.power import ENERGY_KEYS
from dse.workload.graph import WorkloadGraph
from dse.workload.ops import op_kind

# The name (and kind) of the GPU's waits for the host in `energy_j_by_name` and `energy_j_by_kind`.
HOST_GAP_PART = "host_gaps"


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelPrediction:
    """One op of the graph: per-execution latency and power, energies of all `count` executions.

    `energy_j = count * power_w * latency_s`, the kernel's own; `energy_j_by_module` splits it into
    ENERGY_KEYS (idle, active, dram, l2, smem, tensor, cuda, sfu) and sums to it. `gap_energy_j = count *
    gap_power_w * gap_s`: the GPU waiting for the host before the kernel's launches (module docstring).
    """

    name: str
    kind: str
    count: int
    latency_s: float
    gap_s: float
    power_w: float
    gap_power_w: float
    energy_j: float
    gap_energy_j: float
    effective_clock_hz: float
    cap_exceeded: bool
    energy_j_by_module: dict[str, float] = field(hash=False)
    bound_by: str = ""  # dse.perf.bounds: dram, l2, smem, tensor, cuda, host or power_cap

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "kind": self.kind,
            "count": self.count,
            "latency_s": self.latency_s,
            "gap_s": self.gap_s,
            "power_w": self.power_w,
            "gap_power_w": self.gap_power_w,
            "energy_j": self.energy_j,
            "gap_energy_j": self.gap_energy_j,
            "effective_clock_hz": self.effective_clock_hz,
            "cap_exceeded": self.cap_exceeded,
            "bound_by": self.bound_by,
            "energy_j_by_module": dict(self.energy_j_by_module),
        }


class KernelRows:
    """The per-kernel arrays of a prediction, in op order; its `KernelPrediction` values are built on first
    use. A serving prediction reads only totals by name and by bound over hundreds of decode-step kernels,
    so building a value per kernel there would cost more than the kernel model (issue 21). The totals read
    the same floats in the same order as a loop over the built values would. `waits`: whether a launch
    queue ran (then the by-name and by-kind totals have a `HOST_GAP_PART`, zero where the host kept ahead)."""

    __slots__ = (
        "_built", "bounds", "clock_hz", "count", "energy", "energy_j", "exceeded", "gap_energy_j",
        "gap_power_w", "gap_s", "latency_s", "ops", "power_w", "waits",
    )  # fmt: skip

    def __init__(
        self, ops: Sequence[Any], arrays: dict[str, np.ndarray], bounds: Sequence[str], waits: bool = False
    ) -> None:
        self.ops = ops
        self.count = arrays["count"]  # each op's `count`, as floats
        self.latency_s = arrays["latency_s"]
        self.gap_s = arrays["gap_s"]
        self.power_w = arrays["power_w"]
        self.gap_power_w = arrays["gap_power_w"]
        self.clock_hz = arrays["clock_hz"]
        self.exceeded = arrays["exceeded"]
        self.energy = arrays["energy"]  # [n, len(ENERGY_KEYS)] of all executions, the kernels' own
        self.energy_j = arrays["energy_j"]  # [n] its row sums
        self.gap_energy_j = arrays["gap_energy_j"]  # [n] the waits before them
        self.bounds = bounds
        self.waits = waits
        self._built: tuple[KernelPrediction, ...] | None = None

    @classmethod
    def empty(cls) -> KernelRows:
        none = np.zeros(0)
        keys = ("count", "latency_s", "gap_s", "power_w", "gap_power_w", "clock_hz", "exceeded", "energy_j")
        arrays = {**dict.fromkeys(keys, none), "gap_energy_j": none}
        return cls((), {**arrays, "energy": np.zeros((0, len(ENERGY_KEYS)))}, ())

    def predictions(self) -> tuple[KernelPrediction, ...]:
        if self._built is None:
            self._built = _kernel_predictions(self)
        return self._built

    def by_name(self) -> dict[str, float]:
        """The kernels' own energy per op name, then the waits as `HOST_GAP_PART` (module docstring)."""
        if not isinstance(self.ops, tuple):  # a graph's ops are a tuple (the key of `_ops_info`)
            out: dict[str, float] = {}
            for op, energy_j in zip(self.ops, self.energy_j.tolist(), strict=True):
                out[op.name] = out.get(op.name, 0.0) + energy_j
            return self._with_waits(out)
        _, _, names, code = _ops_info(self.ops)
        # bincount adds each name's energies in op order from 0.0, as the loop above does: the same bits
        energy_j = np.bincount(code, weights=self.energy_j, minlength=len(names)).tolist()
        return self._with_waits(dict(zip(names, energy_j, strict=True)))

    def by_kind(self) -> dict[str, float]:
        """The kernels' own energy per op kind, then the waits as `HOST_GAP_PART`."""
        out: dict[str, float] = {}
        for op, energy_j in zip(self.ops, self.energy_j.tolist(), strict=True):
            out[op_kind(op)] = out.get(op_kind(op), 0.0) + energy_j
        return self._with_waits(out)

    def _with_waits(self, out: dict[str, float]) -> dict[str, float]:
        if self.waits:
            out[HOST_GAP_PART] = out.get(HOST_GAP_PART, 0.0) + float(self.gap_energy_j.sum())
        return out

    def bound_by_shares(self) -> dict[str, float]:
        """Shares of the wall time by what bounds it (`dse.perf.bounds`): kernel time by the kernel's label,
        gaps as host."""
        # count x time as numpy products: the bits of the Python products (an int count converts exactly)
        parts = list(zip(self.bounds, (self.count * self.latency_s).tolist(), strict=True))
        if self.gap_s.any():  # (zero gaps are no time: `time_shares` would skip them one by one)
            parts += [("host", s) for s in (self.count * self.gap_s).tolist()]
        return time_shares(parts)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, KernelRows) and self.predictions() == other.predictions()

    __hash__ = None  # type: ignore[assignment]  # equal by value, holds arrays


def _kernel_predictions(rows: KernelRows) -> tuple[KernelPrediction, ...]:
    energy = rows.energy.tolist()
    lat, gap, pw, gp, f, ex = (
        a.tolist()
        for a in (rows.latency_s, rows.gap_s, rows.power_w, rows.gap_power_w, rows.clock_hz, rows.exceeded)
    )
    k_energy, gap_energy = rows.energy_j.tolist(), rows.gap_energy_j.tolist()
    return tuple(
        KernelPrediction(
            name=op.name,
            kind=op_kind(op),
            count=op.count,
            latency_s=lat[i],
            gap_s=gap[i],
            power_w=pw[i],
            gap_power_w=gp[i],
            energy_j=k_energy[i],
            gap_energy_j=gap_energy[i],
            effective_clock_hz=f[i],
            cap_exceeded=ex[i],
            energy_j_by_module=dict(zip(ENERGY_KEYS, energy[i], strict=True)),
            bound_by=rows.bounds[i],
        )
        for i, op in enumerate(rows.ops)
    )


# What is read of a graph's ops at every prediction, by the ids of the op tuples (an entry holds its tuple,
# so no other object takes that id while it lives): a search predicts the same cached graphs
# (`dse.serving.static._graphs`) at every point. Read-only arrays and tuples, shared between calls.
_OPS_INFO: dict[int, tuple[tuple[Any, ...], np.ndarray, tuple[str, ...], np.ndarray]] = {}
_OPS_INFO_MAX = 256
_OPS_INFO_MAX_OPS = 4096


def _ops_info(ops: tuple[Any, ...]) -> tuple[tuple[Any, ...], np.ndarray, tuple[str, ...], np.ndarray]:
    """(ops, each op's count as floats, the distinct op names in order of appearance, each op's name's
    index in them)."""
    hit = _OPS_INFO.pop(id(ops), None)
    if hit is None:
        counts = np.array([op.count for op in ops], dtype=float)
        slot: dict[str, int] = {}
        codes = np.array([slot.setdefault(op.name, len(slot)) for op in ops], dtype=np.intp)
        counts.flags.writeable = codes.flags.writeable = False
        hit = (ops, counts, tuple(slot), codes)
    if len(ops) > _OPS_INFO_MAX_OPS:  # read once (a calibration sample's graph): not kept
        return hit
    _OPS_INFO[id(ops)] = hit  # the most recently used last
    while len(_OPS_INFO) > _OPS_INFO_MAX:
        del _OPS_INFO[next(iter(_OPS_INFO))]
    return hit


def op_counts(graph: WorkloadGraph) -> np.ndarray:
    """Each op's `count` as a float array (read-only: shared between calls)."""
    return _ops_info(graph.ops)[1]

"""The host side of a workload: an asynchronous launch queue (DESIGN.md section 11).

The CPU enqueues kernels without waiting for them. Execution j (one launch of one op) is issued when the
host has spent its host cost c_j, and starts when the GPU is free and the launch has arrived:

    h_j     = step_s + c_0 + ... + c_j                     issue time (host clock)
    start_j = max(end_(j-1) + g, h_j + launch_latency_s)   the GPU waits only when the host is behind
    end_j   = start_j + t_j

g is the GPU's own dispatch gap between two kernels of a stream: `kernel_gap_cycles` SM clock cycles for
kernels launched one by one (the front end's grid launch and the previous grid's drain run on the GPU's
clock, so the gap shrinks as the clock rises), at most `graph_kernel_gap_s` inside a CUDA graph, whose
kernels the GPU prefetches. With T_j the GPU time
before j (sum of t + g) and S_j = start_j - T_j, the recurrence is `S = cummax(h + launch_latency_s - T)`:
one vectorized pass, no per-kernel Python. The wall time is end_(last); the GPU waits S_j - S_(j-1) + g
before execution j, drawing idle (+ gap) power. So a small eager
workload is host-bound and a large one is not, with no per-workload switch; making the host faster never
makes a workload slower (S falls with every c_j), and the wall time is at least the GPU time and at least
the host time.

Host cost c_j by launch mode (`LAUNCH_MODES`):

- eager: a framework dispatch per kernel (eager PyTorch: Python module call, ATen dispatch,
  cudaLaunchKernel): `eager_gemm_s` for GEMMs (nn.Linear / matmul through cuBLAS) and attention,
  `eager_other_s` for everything else (elementwise, norms, softmax);
- graphs: the whole workload is one CUDA graph: one `graph_launch_s`, kernels back to back on the GPU;
- engine: a fused engine's C++ runtime (TensorRT-LLM) enqueues every kernel itself: `engine_op_s` each.

Every mode pays `step_s` first (per forward pass / engine step: the framework's entry and the previous
pass's synchronize). Repeated layers (ops whose names share a `layer[...]` segment and a count) run
interleaved, layer after layer; any other op with count n runs n times in a row.

The constants are `HostCoeffs`; `DEFAULT_HOST` holds the calibrated ones with their source.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np

from dse.errors import ConfigError
from dse.perf.types import CoeffTable, coeff_table
from dse.workload.ops import AttentionOp, GemmOp

LaunchMode = Literal["eager", "graphs", "engine"]
LAUNCH_MODES: tuple[str, ...] = ("eager", "graphs", "engine")


@dataclass(frozen=True, slots=True, kw_only=True)
class HostCoeffs:
    """Host costs of the launch queue (module docstring): seconds, and the dispatch gap in SM clock cycles.
    `source` says where they come from."""

    step_s: float
    eager_gemm_s: float
    eager_other_s: float
    graph_launch_s: float
    engine_op_s: float
    launch_latency_s: float
    kernel_gap_cycles: float  # SM clock cycles (the module docstring's g for one-by-one launches)
    graph_kernel_gap_s: float
    source: str = ""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            v = getattr(self, f.name)
            if f.name != "source" and not (np.isfinite(v) and v >= 0.0):
                raise ConfigError(f"HostCoeffs: {f.name} must be finite and >= 0, got {v}")


# NOTE(host): eager costs fitted by `dse.calibrate.fit.host.fit_host_coeffs` on the wall times of the
# EnergAIzer A100 PCIe training workloads (eager PyTorch forward passes, 900 MHz set and 510-1410 MHz
# sweep, the by-workload split of `dse.calibrate.fit.power_sets.a100_split`), then the dispatch gap
# refitted in SM cycles with them held (`SHIPPED_FIT`): 13,000 cycles, 9.2 us at the A100's 1410 MHz, 6.6 us
# at an H100's 1980 MHz. Wall-time MAPE 10.9% on the training workloads, 9.0% held out (a fixed 15 us gap:
# 11.6% and 9.6%; no gap: 17.8% and 11.5%). On our H100, BERT-large's list (389 ops) is the closest to its
# runs (393 kernels at batch 1, 466-658 at larger batches by the profiler's count); its bf16 GPU-bound runs
# leave 1.8-4.7 ms outside their kernels (3.4-8.7 us per measured kernel), where 15 us gave them ~6.9 ms.
# The eager costs describe that host (CUDA 12.4, HF models: the GEMM cost carries the Python module calls
# around each nn.Linear) and are used for every GPU.
# step_s sits at the fit's 1 ms bound (`dse.calibrate.fit.host.STEP_MAX_S` says why). Graph and engine
# costs are not fitted (no whole-run data of those modes here):
# graph_launch_s is one cudaGraphLaunch of a few-hundred-kernel graph, engine_op_s one cudaLaunchKernel
# from C++ (the CUDA runtime's ~2-4 us launch overhead), the dispatch gap inside a graph 1 us; the launch
# latency (issue to start on an idle GPU) is a few microseconds.
DEFAULT_HOST = HostCoeffs(
    step_s=1.0e-3,
    eager_gemm_s=40.6e-6,
    eager_other_s=22.2e-6,
    graph_launch_s=10e-6,
    engine_op_s=3e-6,
    launch_latency_s=4e-6,
    kernel_gap_cycles=13_000.0,
    graph_kernel_gap_s=1e-6,
    source="fit: EnergAIzer A100 PCIe eager wall times (train workloads); graphs/engine: estimates",
)


def check_launch(launch: str) -> LaunchMode:
    """`launch` as a LaunchMode; ConfigError naming the allowed modes otherwise."""
    if launch not in LAUNCH_MODES:
        raise ConfigError(f"launch mode '{launch}' is not one of {', '.join(LAUNCH_MODES)}")
    return launch  # type: ignore[return-value]


_LAYER = re.compile(r"layer\[[^\]]*\]")


def execution_order(ops: Sequence[Any]) -> np.ndarray:
    """Op index of every execution, in launch order (module docstring: layers interleave)."""
    parts: list[np.ndarray] = []
    i, n = 0, len(ops)
    while i < n:
        m = _LAYER.search(ops[i].name) if ops[i].count > 1 else None
        j = i + 1
        if m is not None:
            while j < n and ops[j].count == ops[i].count and m.group(0) in ops[j].name:
                j += 1
        block = np.arange(i, j)
        parts.append(np.tile(block, ops[i].count) if j > i + 1 else np.repeat(block, ops[i].count))
        i = j
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class LaunchPlan:
    """What the queue reads of a graph, computed once per graph: execution order and op classes."""

    order: np.ndarray  # op index of every execution, in launch order
    heavy: np.ndarray  # [n ops] GEMM or attention (eager_gemm_s) vs other (eager_other_s)
    num_ops: int


def launch_plan(ops: Sequence[Any]) -> LaunchPlan:
    heavy = np.array([isinstance(op, GemmOp | AttentionOp) for op in ops], dtype=bool)
    return LaunchPlan(order=execution_order(ops), heavy=heavy, num_ops=len(ops))


@dataclass(frozen=True, slots=True)
class HostSchedule:
    """The queue's outcome: wall time, and per op the total GPU wait before its executions."""

    wall_s: float
    wait_s: np.ndarray  # [n ops] summed over the op's executions
    host_s: float  # the host's own busy time (step_s + all c_j)


def op_host_s(plan: LaunchPlan, launch: LaunchMode, host: HostCoeffs) -> np.ndarray:
    """Host cost of one launch of each op in `launch` mode (graphs: 0; the graph launch is per step)."""
    if launch == "graphs":
        return np.zeros(plan.num_ops)
    if launch == "engine":
        return np.full(plan.num_ops, host.engine_op_s)
    return np.where(plan.heavy, host.eager_gemm_s, host.eager_other_s)


def schedule(
    latency_s: np.ndarray,
    ops: Sequence[Any] | LaunchPlan,
    launch: LaunchMode,
    host: HostCoeffs,
    sm_clock_hz: np.ndarray | float,
) -> HostSchedule:
    """Run the launch queue of the module docstring over `ops` (or their plan) with per-execution GPU
    times `latency_s` at SM clocks `sm_clock_hz` (per op, or one for all: the dispatch gap's clock)."""
    plan = ops if isinstance(ops, LaunchPlan) else launch_plan(ops)
    lat = np.asarray(latency_s, dtype=float)
    order = plan.order
    t = lat[order]
    c = op_host_s(plan, launch, host)[order]
    clock_hz = np.broadcast_to(np.asarray(sm_clock_hz, dtype=float), lat.shape)
    if not np.all(np.isfinite(clock_hz) & (clock_hz > 0.0)):
        raise ConfigError("the launch queue needs finite, positive SM clocks (sm_clock_hz)")
    g = host.kernel_gap_cycles / clock_hz[order]  # the gap before each execution, at its kernel's clock
    if launch == "graphs" and c.size:
        # A graph launch costs no more than its first kernel's eager launch, and its kernels dispatch no
        # slower than a stream's: graphs are never slower than eager launches of the same kernels.
        c[0] = min(host.graph_launch_s, op_host_s(plan, "eager", host)[order[0]])
        g = np.minimum(host.graph_kernel_gap_s, g)
    issued = host.step_s + np.cumsum(c)
    before = np.cumsum(t + g) - t  # GPU time before each start, its own dispatch gap included
    s = np.maximum.accumulate(issued + host.launch_latency_s - before)
    wait = np.diff(s, prepend=0.0) + g
    wall = float(s[-1] + before[-1] + t[-1]) if s.size else 0.0
    per_op = np.bincount(order, weights=wait, minlength=plan.num_ops)
    return HostSchedule(wall_s=wall, wait_s=per_op, host_s=float(issued[-1]) if s.size else 0.0)


# Kernel groups whose shipped Ampere latency coefficients were fitted on wall times that include host
# launch overhead (LLMCompass softmax / layernorm / GELU sweeps: time.time() around one PyTorch call, data
# README section 4): their eps_s (~45 us) is host time, not GPU time. Every prediction drops it to the
# launch floor the Hopper set already uses for the same groups: with a launch mode the queue owns host time,
# without one the prediction is GPU time alone (a 4,096-element add took 47 us on an A100, 5 on an H100).
HOST_TIMED_GROUPS: tuple[str, ...] = ("elementwise", "norm", "softmax")
LAUNCH_FLOOR_S = 2e-6
_GPU_ONLY: dict[int, tuple[Any, Any]] = {}  # id(coeffs) -> (coeffs, its GPU-only version)


def gpu_only_coeffs(coeffs: Any) -> Any:
    """`coeffs` (a CoeffSet, a CoeffTable or None) with eps_s <= LAUNCH_FLOOR_S in HOST_TIMED_GROUPS; a
    CoeffSet keeps its other fields (the fused-MoE correction), a set with nothing to trim is returned as
    is. Cached per object (sets and tables are values): every prediction of a search gets the same result,
    whose table keeps its matrix cache."""
    if coeffs is None:
        return None
    hit = _GPU_ONLY.get(id(coeffs))
    if hit is not None and hit[0] is coeffs:
        return hit[1]
    table = coeff_table(coeffs)
    trimmed = {
        g: dataclasses.replace(c, eps_s=LAUNCH_FLOOR_S)
        for g, c in table.groups.items()
        if g.split("/")[0] in HOST_TIMED_GROUPS and c.eps_s > LAUNCH_FLOOR_S
    }
    out = coeffs
    if trimmed:
        gpu_only = CoeffTable(groups={**table.groups, **trimmed})
        out = gpu_only if isinstance(coeffs, CoeffTable) else dataclasses.replace(coeffs, table=gpu_only)
    if len(_GPU_ONLY) >= 64:  # user-built sets (fits, files) come and go
        _GPU_ONLY.clear()
    _GPU_ONLY[id(coeffs)] = (coeffs, out)
    return out

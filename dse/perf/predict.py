"""Workload-level latency, energy and power: kernel estimates + power model + power cap + host queue.

`predict_graph(graph, gpu, point)` is the one call the CLI, the serving predictor and the search make:

1. every op is estimated by the kernel model at the requested clock; a graph (a pass: a forward pass; a
   training step's graphs together) whose mean power, gaps included, exceeds the cap runs at the highest
   clock where it fits (`dse.perf.pass_cap`: the GPU's controller averages power over about a second);
   each engine step of a serving run is a pass of its own (`dse.serving.step_table.capped_steps`);
2. each kernel's power comes from `dse.perf.power` (idle + active + DRAM + on-chip modules);
3. with a launch mode (`launch`: eager, graphs, engine) the host enqueues the kernels asynchronously
   (`dse.perf.host`): the GPU waits only when the host falls behind, drawing gap power (idle + the
   fitted gap term); without one (None, the library default) the workload is GPU time only;
4. totals: latency_s = the queue's wall time (busy time without a launch mode), energy_j = every kernel's
   and every wait's energy, avg_power_w = energy_j / latency_s. Per kernel, by name and by kind a kernel's
   energy is its own, and the waits are a part of their own (`dse.perf.kernel_rows`).

History of the host rule. Until issue 16 a fixed host gap h per kernel launch was added to the wall time
(`--host-gap-us`): on the EnergAIzer A100 workloads it fitted best among single-constant rules (latency
MAPE 11.7% at h = 19.5 us), but it charges host time to large workloads whose host runs ahead of the GPU,
and it did not transfer (H100 whole models ~32% off). The queue of `dse.perf.host` replaces it; its host
costs are calibrated on the same whole-run data (`dse.calibrate.fit.host`).

Everything is vectorized over the kernels of the graph; the per-kernel Python work is building the
`KernelPrediction` values (`dse.perf.kernel_rows`) when they are read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

from dse.errors import ConfigError
from dse.hardware.spec import GpuSpec
from dse.perf.bounds import kernel_bounds, summarize
from dse.perf.coeffs import PowerCoeffs, default_power_coeffs
from dse.perf.distinct import distinct_ops
from dse.perf.dvfs import row_estimator
from dse.perf.host import (
    DEFAULT_HOST,
    HostCoeffs,
    LaunchMode,
    LaunchPlan,
    check_launch,
    gpu_only_coeffs,
    launch_plan,
    schedule,
)
from dse.perf.kernel_rows import KernelPrediction, KernelRows, op_counts
from dse.perf.multiclock import Estimator
from dse.perf.pass_cap import CapRule, PassRows, group_slices, pass_capped_rows, pass_groups, sliced_rows
from dse.perf.power import ENERGY_KEYS, GpuPowerTerms, gap_power_w, gpu_power_terms
from dse.perf.types import OperatingPoint
from dse.units import MHZ
from dse.workload.graph import WorkloadGraph


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadPrediction:
    """A workload's predicted latency, energy and power, with its kernels.

    latency_s: wall time, kernels plus the GPU's waits for the host; busy_s: kernels only; host_s:
    the host's own busy time (0 without a launch mode); launch: the launch mode or "none".
    energy_j: kernels and waits; gap_energy_j: the waits' share of it (the GPU idling for the host, at
    gap power; 0 without a launch mode). avg_power_w = energy_j / latency_s. peak_power_w: the highest
    kernel power. effective_clock_hz: the busy-time-weighted mean of the kernels' effective clocks;
    min_effective_clock_hz the lowest. requested_clock_hz and power_cap_w: what the operating point asked
    for (clamped to the GPU; cap default = TDP).
    """

    name: str
    gpu: str
    latency_s: float
    busy_s: float
    energy_j: float
    avg_power_w: float
    peak_power_w: float
    effective_clock_hz: float
    min_effective_clock_hz: float
    requested_clock_hz: float
    power_cap_w: float
    launch: str
    host_s: float
    gap_energy_j: float = 0.0
    _by_module: dict[str, float] = field(default_factory=dict, hash=False, repr=False)
    _kernels: KernelRows = field(default_factory=KernelRows.empty, hash=False, repr=False)

    @property
    def kernels(self) -> tuple[KernelPrediction, ...]:
        """The kernels' predictions, in graph order."""
        return self._kernels.predictions()

    def energy_j_by_module(self) -> dict[str, float]:
        """Energy per ENERGY_KEYS term (idle, active, dram, l2, smem, tensor, cuda, sfu); sums to energy_j."""
        return dict(self._by_module)

    def energy_j_by_name(self) -> dict[str, float]:
        """Energy per op name (each kernel's own, all executions), plus the waits for the host as
        `HOST_GAP_PART` under a launch mode (`dse.perf.kernel_rows`); sums to energy_j."""
        return self._kernels.by_name()

    def bound_by_shares(self) -> dict[str, float]:
        """Shares of the wall time by what bounds it (`dse.perf.bounds`): kernel time by the kernel's label,
        gaps as host."""
        return self._kernels.bound_by_shares()

    def energy_j_by_kind(self) -> dict[str, float]:
        """Energy per op kind, as `energy_j_by_name` (the waits as `HOST_GAP_PART`); sums to energy_j."""
        return self._kernels.by_kind()

    def to_dict(self, kernels: bool = True) -> dict[str, Any]:
        """JSON-ready dict with SI keys."""
        out: dict[str, Any] = {
            "name": self.name,
            "gpu": self.gpu,
            "latency_s": self.latency_s,
            "busy_s": self.busy_s,
            "energy_j": self.energy_j,
            "gap_energy_j": self.gap_energy_j,
            "avg_power_w": self.avg_power_w,
            "peak_power_w": self.peak_power_w,
            "effective_clock_hz": self.effective_clock_hz,
            "min_effective_clock_hz": self.min_effective_clock_hz,
            "requested_clock_hz": self.requested_clock_hz,
            "power_cap_w": self.power_cap_w,
            "launch": self.launch,
            "host_s": self.host_s,
            "num_kernels": sum(op.count for op in self._kernels.ops),
            "energy_j_by_module": self.energy_j_by_module(),
            "energy_j_by_kind": self.energy_j_by_kind(),
            **{f"bound_{k}" if k == "shares" else k: v for k, v in summarize(self.bound_by_shares()).items()},
        }
        if kernels:
            out["kernels"] = [k.to_dict() for k in self.kernels]
        return out


def predict_graph(
    graph: WorkloadGraph,
    gpu: GpuSpec,
    point: OperatingPoint | None = None,
    coeffs: Any = None,
    power_coeffs: PowerCoeffs | None = None,
    *,
    launch: str | None = None,
    host: HostCoeffs = DEFAULT_HOST,
    estimator: Estimator | None = None,
    cap_rule: CapRule = "pass",
) -> WorkloadPrediction:
    """Latency, energy and power of `graph` on `gpu` at `point`.

    Args:
        graph: the ops in execution order (each with its repeat count).
        gpu: the GPU (catalog entry plus any overrides).
        point: requested SM clock (default: boost) and power cap (default: TDP).
        coeffs: latency coefficients for the kernel model (None: none, the uncorrected analytical model;
            `dse.perf.coeffs.load_default_coeffs(gpu)` is the shipped set every prediction uses).
        power_coeffs: energy coefficients (None: the shipped set for the GPU's architecture).
        launch: eager, graphs or engine: the asynchronous host queue of `dse.perf.host`; None: GPU time
            only. Either way the latency groups whose coefficients carry host time lose it
            (`dse.perf.host.gpu_only_coeffs`).
        host: the queue's host costs (default: the calibrated `DEFAULT_HOST`).
        estimator: the kernel model as a `KernelEstimate` estimator (default: the registry's families,
            through `dse.perf.multiclock.op_rows`); tests inject stand-ins.
        cap_rule: "pass" (the graph's mean power under the cap, `dse.perf.pass_cap`) or "kernel" (each
            kernel on its own: a kernel in a loop).

    Raises:
        ConfigError: an unknown launch mode or a power cap below the GPU's minimum.
    """
    return predict_graphs(
        [graph], gpu, point, coeffs, power_coeffs, launch=launch, host=host, estimator=estimator,
        cap_rule=cap_rule,
    )[0]  # fmt: skip


def predict_graphs(
    graphs: Sequence[WorkloadGraph],
    gpu: GpuSpec,
    point: OperatingPoint | None = None,
    coeffs: Any = None,
    power_coeffs: PowerCoeffs | None = None,
    *,
    launch: str | None = None,
    host: HostCoeffs = DEFAULT_HOST,
    estimator: Estimator | None = None,
    passes: Sequence[Sequence[int]] | None = None,
    runs: Sequence[float] | None = None,
    cap_rule: CapRule = "pass",
) -> list[WorkloadPrediction]:
    """`predict_graph` of each graph, with one kernel-model pass (and one power-cap search) over the ops of
    all of them: a kernel's rows depend on that kernel and its clock alone, and each graph is its own pass
    under the cap, so each result equals the graph predicted on its own, and the fixed cost of a
    kernel-model call is paid once. `passes` and `runs` group graphs that run as one pass under the cap,
    as in `predict_graph_totals` (a static serving batch: its prefill and its decode steps); `cap_rule`
    as in `predict_graph`."""
    mode = None if launch is None else check_launch(launch)
    coeffs = gpu_only_coeffs(coeffs)  # host time is the launch queue's, or not predicted
    point = point or OperatingPoint()
    pc = power_coeffs or default_power_coeffs(gpu)
    terms = gpu_power_terms(gpu)
    groups, weight = pass_groups(passes, runs, len(graphs), cap_rule)
    ops = [op for g in graphs for op in g.ops]
    if not ops:
        return [_empty(g, gpu, point, mode or "none") for g in graphs]
    ends = np.cumsum([len(g.ops) for g in graphs])
    spans = [np.arange(int(e) - len(g.ops), int(e)) for g, e in zip(graphs, ends, strict=True)]
    members = [np.concatenate([spans[i] for i in group]) for group in groups]
    plans = [None if mode is None else launch_plan(g.ops) for g in graphs]  # the host queue's, if any
    counts = [op_counts(g) for g in graphs]

    def graph_energy(i: int, lat: np.ndarray, power_w: np.ndarray, f: np.ndarray) -> tuple[float, float]:
        count, plan = counts[i], plans[i]
        if mode is None or plan is None:  # no gaps: adding their zeros changes no bit (the cap search's
            # probes call this per clock, so the gap power's interpolations are skipped); `lat + 0.0` is a
            # new array as `lat + gap` was: BLAS's dot sums in an order that depends on the alignment of
            # its operands, and `lat` may be a view at any offset
            return float(np.dot(count, lat * power_w)), float(np.dot(count, lat + 0.0))
        gap = schedule(lat, plan, mode, host, f).wait_s / count
        gp = gap_power_w(f, terms, pc)["total"]
        return float(np.dot(count, lat * power_w + gap * gp)), float(np.dot(count, lat + gap))

    def pass_energy(p: int, rows: dict[str, np.ndarray], parts: dict[str, np.ndarray]) -> tuple[float, float]:
        energy_j = wall_s = 0.0
        lat, power_w, f = rows["latency_s"], parts["total"], rows["sm_clock_hz"]
        for i, sl in group_slices(groups[p], graphs):
            if sl.stop > sl.start:
                e, t = graph_energy(i, lat[sl], power_w[sl], f[sl])
                energy_j, wall_s = energy_j + weight[i] * e, wall_s + weight[i] * t
        return energy_j, wall_s

    with np.errstate(divide="ignore", invalid="ignore"):  # an impossible kernel: reported by check_finite
        rows_fn = row_estimator(estimator)
        out = pass_capped_rows(
            ops, members, gpu, point, coeffs, pc, terms, pass_energy, rows_fn, rule=cap_rule
        )
    results: list[WorkloadPrediction | None] = [None] * len(graphs)
    for p, group in enumerate(groups):
        for i, sl in group_slices(group, graphs):
            g, rows, parts = graphs[i], sliced_rows(out.rows[p], sl), sliced_rows(out.power[p], sl)
            if not g.ops:
                results[i] = _empty(g, gpu, point, mode or "none")
                continue
            check_finite(g.ops, rows["latency_s"], parts["total"], gpu)
            results[i] = _assemble(
                g, gpu, rows, parts, out.exceeded[p][sl], out, pc, terms, mode, host, plans[i]
            )
    return [r for r in results if r is not None]


def _assemble(
    graph: WorkloadGraph,
    gpu: GpuSpec,
    a: dict[str, np.ndarray],
    p: dict[str, np.ndarray],
    exceeded: np.ndarray,
    passes: PassRows,
    pc: PowerCoeffs,
    terms: GpuPowerTerms,
    mode: LaunchMode | None,
    host: HostCoeffs,
    plan: LaunchPlan | None,
) -> WorkloadPrediction:
    """The prediction of `graph` from its rows `a` and power parts `p` at its pass's clock (`passes` gives
    the requested clock and the cap), with the host queue in launch `mode` (`plan`: its launch plan, None
    without a mode): energies and totals."""
    ops = graph.ops
    lat = a["latency_s"]
    f = a["sm_clock_hz"]
    count = op_counts(graph)
    if mode is None or plan is None:
        gap, host_s, gapless = np.zeros_like(lat), 0.0, True
    else:
        queue = schedule(lat, plan, mode, host, f)
        gap, host_s, gapless = queue.wait_s / count, queue.host_s, False
    gp = gap_power_w(f, terms, pc)
    # [n, len(ENERGY_KEYS)] the kernels' own energy of all executions (ENERGY_KEYS: idle, active, dram, then
    # on-chip). The waits for the host count in the totals and modules, per kernel apart from its own
    # energy (`dse.perf.kernel_rows`).
    run = np.column_stack([p["idle"], p["active"], p["dram"], p["onchip"]]) * lat[:, None]
    own = run * count[:, None]
    own_j = own.sum(axis=1)
    energy, k_energy, gap_j = own, own_j, np.zeros_like(lat)
    if not gapless:  # (without gaps their energy's zeros would change no bit of the sums)
        run[:, 0] += gp["idle"] * gap
        run[:, 1] += gp["active"] * gap
        energy, gap_j = run * count[:, None], count * gp["total"] * gap
        k_energy = energy.sum(axis=1)
    by_module = dict(zip(ENERGY_KEYS, energy.sum(axis=0).tolist(), strict=True))
    busy = float(np.dot(count, lat))
    wall = busy if gapless else busy + float(np.dot(count, gap))
    total_e = float(k_energy.sum())
    bounds = kernel_bounds(a["util"], lat, gap, f, passes.requested_clock_hz)
    arrays = {
        "latency_s": lat,
        "gap_s": gap,
        "power_w": p["total"],
        "gap_power_w": gp["total"],
        "clock_hz": f,
    }
    arrays |= {"count": count, "exceeded": exceeded, "energy": own, "energy_j": own_j, "gap_energy_j": gap_j}
    kernels = KernelRows(ops, arrays, bounds, waits=not gapless)
    return WorkloadPrediction(
        name=graph.name,
        gpu=gpu.name,
        latency_s=wall,
        busy_s=busy,
        energy_j=total_e,
        avg_power_w=total_e / wall if wall > 0 else 0.0,
        peak_power_w=float(p["total"].max()),
        effective_clock_hz=_weighted_clock_hz(count * lat, f),
        min_effective_clock_hz=float(f.min()),
        requested_clock_hz=passes.requested_clock_hz,
        power_cap_w=passes.power_cap_w,
        launch=mode or "none",
        host_s=host_s,
        gap_energy_j=float(gap_j.sum()),
        _by_module=by_module,
        _kernels=kernels,
    )


class GraphTotals(NamedTuple):
    """Per graph: kernel time (s), energy (J) and kernel time x SM clock (Hz s; divided by the time, the
    time-weighted clock the kernels ran at)."""

    latency_s: np.ndarray
    energy_j: np.ndarray
    clock_hz_s: np.ndarray


def predict_graph_totals(
    graphs: Sequence[WorkloadGraph],
    gpu: GpuSpec,
    point: OperatingPoint | None = None,
    coeffs: Any = None,
    power_coeffs: PowerCoeffs | None = None,
    *,
    passes: Sequence[Sequence[int]] | None = None,
    runs: Sequence[float] | None = None,
    cap_rule: CapRule = "pass",
    idle_share: float = 0.0,
) -> GraphTotals:
    """(latency_s, energy_j, clock_hz_s) of each graph, as `predict_graph` gives them without host gaps, in
    one vectorized pass over all their ops (tested equal to the graphs predicted one by one).

    The power cap holds the mean power of a pass (`dse.perf.pass_cap`): by default each graph is its own
    pass; `passes` groups graphs (indices, each graph in one group) that run as one, `runs[i]` times graph i
    per run of its pass (default 1), e.g. a training step's microbatches and its optimizer step.
    `cap_rule="kernel"`: each kernel on its own instead (a kernel in a loop).
    `idle_share`: seconds each pass idles per second of its kernels (a pipeline's bubble), at idle power,
    counted in its mean (the returned totals are the kernels' alone)."""
    point = point or OperatingPoint()
    coeffs = gpu_only_coeffs(coeffs)  # GPU time only (`predict_graphs`)
    pc = power_coeffs or default_power_coeffs(gpu)
    terms = gpu_power_terms(gpu)
    groups, weight = pass_groups(passes, runs, len(graphs), cap_rule)
    sizes = np.array([len(g.ops) for g in graphs])
    if not sizes.sum():
        return GraphTotals(np.zeros(len(graphs)), np.zeros(len(graphs)), np.zeros(len(graphs)))
    if cap_rule == "kernel":  # clocks per kernel: one group evaluates each distinct kernel once
        groups = [list(range(len(graphs)))]
    distinct, where, counts = distinct_ops(graphs)
    # Per pass: its distinct kernels and how often each runs per run of the pass.
    members, per_run = [], []
    for group in groups:
        idx = np.concatenate([where[i] for i in group])
        c = np.concatenate([weight[i] * counts[i] for i in group])
        uniq, inv = np.unique(idx, return_inverse=True)
        members.append(uniq)
        per_run.append(np.bincount(inv, weights=c, minlength=uniq.size))

    def pass_energy(p: int, rows: dict[str, np.ndarray], parts: dict[str, np.ndarray]) -> tuple[float, float]:
        lat = rows["latency_s"]
        busy_s = float(np.dot(per_run[p], lat))
        idle_j = idle_share * busy_s * float(terms.idle_power_w(np.asarray(rows["sm_clock_hz"].max())))
        return float(np.dot(per_run[p], lat * parts["total"])) + idle_j, busy_s * (1.0 + idle_share)

    with np.errstate(divide="ignore", invalid="ignore"):  # an impossible kernel: reported by check_finite
        out = pass_capped_rows(distinct, members, gpu, point, coeffs, pc, terms, pass_energy, rule=cap_rule)
    latency_s, energy_j, clock_hz_s = np.zeros(len(graphs)), np.zeros(len(graphs)), np.zeros(len(graphs))
    for p, group in enumerate(groups):
        lat, power_w = out.rows[p]["latency_s"], out.power[p]["total"]
        clock_hz = out.rows[p]["sm_clock_hz"]
        check_finite([distinct[j] for j in members[p].tolist()], lat, power_w, gpu)
        pos = np.searchsorted(members[p], np.concatenate([where[i] for i in group]))
        row_s = np.concatenate([counts[i] for i in group]) * lat[pos]
        graph_of = np.repeat(group, [where[i].size for i in group])
        latency_s += np.bincount(graph_of, weights=row_s, minlength=len(graphs))
        energy_j += np.bincount(graph_of, weights=row_s * power_w[pos], minlength=len(graphs))
        clock_hz_s += np.bincount(graph_of, weights=row_s * clock_hz[pos], minlength=len(graphs))
    return GraphTotals(latency_s, energy_j, clock_hz_s)


def check_finite(ops: Sequence[Any], latency_s: np.ndarray, power_w: np.ndarray, gpu: GpuSpec) -> None:
    """ConfigError naming the first kernel the GPU cannot run (a non-finite latency or power), so that no
    NaN or infinity leaves the model: e.g. an SM overridden to hold fewer threads than one thread block."""
    bad = ~(np.isfinite(latency_s) & np.isfinite(power_w))
    if bad.any():
        op = ops[int(np.flatnonzero(bad)[0])]
        raise ConfigError(
            f"{gpu.name}: kernel '{op.name}' cannot run on this GPU (no thread block of it fits an SM, or a "
            "rate is zero): check the sm.* fields (max_threads, max_threadblocks, registers, smem_bytes)"
        )


def _weighted_clock_hz(weight: np.ndarray, f: np.ndarray) -> float:
    """Weighted mean clock, clamped to [min, max] so rounding never leaves the range."""
    total = float(weight.sum())
    mean = float(np.dot(weight, f) / total) if total > 0 else float(f.mean())
    return min(max(mean, float(f.min())), float(f.max()))


def _empty(graph: WorkloadGraph, gpu: GpuSpec, point: OperatingPoint, launch: str) -> WorkloadPrediction:
    from dse.perf.dvfs import power_cap_w, requested_clock_hz

    f = requested_clock_hz(gpu, point)
    return WorkloadPrediction(
        name=graph.name,
        gpu=gpu.name,
        latency_s=0.0,
        busy_s=0.0,
        energy_j=0.0,
        avg_power_w=0.0,
        peak_power_w=0.0,
        effective_clock_hz=f,
        min_effective_clock_hz=f,
        requested_clock_hz=f,
        power_cap_w=power_cap_w(gpu, point),
        launch=launch,
        host_s=0.0,
        _by_module=dict.fromkeys(ENERGY_KEYS, 0.0),
    )


def predict_command_payload(prediction: WorkloadPrediction, *, kernels: bool = False) -> dict[str, Any]:
    """What `dse predict --json` prints: the SI dict plus clocks in MHz (the CLI is the I/O edge)."""
    out = prediction.to_dict(kernels=kernels)
    out["effective_clock_mhz"] = prediction.effective_clock_hz / MHZ
    out["min_effective_clock_mhz"] = prediction.min_effective_clock_hz / MHZ
    out["requested_clock_mhz"] = prediction.requested_clock_hz / MHZ
    return out

"""Whole-model runs: a transformer built in torch from an `LlmArch` (random weights), measured end to end, and
its energy split per operator by aligning the power trace with the profiler's kernel timeline.

    runner = build_torch_llm(load_model_config("llama-3.1-8b"), batch=1, seq_len=2048)  # torch_llm.py
    result = measure_model(runner, gpu, MeasureProtocol())   # ModelMeasurement
    result.breakdown["by_op"]["prefill/llama-3.1-8b/layer[0-31]/attn/qkv_proj"]    # J per forward pass

The torch model (`dse.measure.torch_llm`) runs the ops `dse.workload.llm` puts in the graph, in the same
order, and wraps each in a `record_function` named exactly like the graph op
(`<model>/layer[0-31]/attn/qkv_proj`), so measured and predicted breakdowns share keys (`serving.py`
prefixes them with the phase, as here).

Alignment (seed 002's trace-based alignment), in three clocks made one:

    profiler clock   [dse::sync]   k1 ███  k2 ██████  k3 ██ ...      kernels from the chrome trace; each
                                                                     kernel's op = the innermost dse
                                                                     annotation around its launch call
    host clock       t_sync ─────── t0 ────────────────────── t1     offset = t_sync - ts(dse::sync)
    power trace      s  s  s  s  s  s  s  s  s  s  s  s  s  s  s     on the host clock (sampler)

Each kernel interval (shifted by the offset) receives the integral of the interpolated power over its time
(`sampler.attribute_energy`; concurrent kernels share); time in [t0, t1] with no kernel running is reported
as `(idle)`. These shares are then scaled to the end-to-end energy per pass measured over >= 1 s windows
(energy counter), so `by_op` (with `(idle)`) sums to `energy_j`; the unscaled numbers are kept under
`profiled`. With a 10 ms trace and a sensor that averages 25 of every 100 ms, ops far shorter than that
get energy in proportion to their duration times the local power level: per-op numbers resolve power
differences only between long phases, and `(idle)` includes the profiler's own launch overhead.
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from dse.calibrate.data.samples import KernelSample
from dse.errors import MeasurementError
from dse.measure.harness import (
    GpuProbe,
    MeasureProtocol,
    Window,
    counter_available,
    measure_idle_power_w,
    measure_kernel,
    rel_std,
)
from dse.measure.nvml import locked_clocks
from dse.measure.sampler import PowerTrace, attribute_energy

logger = logging.getLogger(__name__)

SYNC_MARKER = "dse::sync"
IDLE = "(idle)"
OTHER = "(other kernels)"
KERNEL_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
MAX_PROFILED_PASSES = 200


# ---- timeline parsing and alignment (pure; tested on synthetic traces)


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelEvent:
    """One GPU kernel (or memcpy/memset) on the profiler clock, with the op whose annotation launched it."""

    name: str
    op: str
    start_s: float
    end_s: float
    stream: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeline:
    kernels: tuple[KernelEvent, ...]
    markers: dict[str, float] = field(default_factory=dict)  # annotation name -> first start (profiler s)

    def shifted(self, offset_s: float) -> Timeline:
        """The same timeline with `offset_s` added to every time (profiler clock -> host clock)."""
        kernels = tuple(
            KernelEvent(
                name=k.name, op=k.op, start_s=k.start_s + offset_s, end_s=k.end_s + offset_s, stream=k.stream
            )
            for k in self.kernels
        )
        return Timeline(kernels=kernels, markers={n: t + offset_s for n, t in self.markers.items()})


def _innermost(
    annotations: list[tuple[float, float, str]], points: list[tuple[float, int]]
) -> dict[int, str]:
    """For each (time, id) point, the name of the innermost annotation [start, end] containing it (sweep)."""
    out: dict[int, str] = {}
    events: list[tuple[float, int, int, Any]] = []  # (time, order, kind, payload): opens before points
    for start, end, name in annotations:
        events.append((start, 0, 0, (end, name)))
    for t, ident in points:
        events.append((t, 1, 1, ident))
    events.sort(key=lambda e: (e[0], e[1]))
    stack: list[tuple[float, str]] = []
    for t, _, kind, payload in events:
        while stack and stack[-1][0] < t:
            stack.pop()
        if kind == 0:
            stack.append(payload)
        else:
            live = [name for end, name in stack if end >= t]
            if live:
                out[payload] = live[-1]
    return out


def parse_chrome_trace(trace: Mapping[str, Any] | str | Path, *, op_prefix: str = "") -> Timeline:
    """Kernels of a torch-profiler chrome trace, each tagged with the op annotation that launched it.

    A kernel's op is the innermost CPU `user_annotation` (a `record_function`) whose name starts with
    `op_prefix` and that encloses the runtime call (`cudaLaunchKernel` ...) sharing the kernel's
    `correlation` id; kernels without one fall back to an enclosing `gpu_user_annotation`, else op "".
    Times are in seconds on the profiler's clock; `markers` holds the first start of every annotation whose
    name starts with `dse::`.
    """
    # A trace file holds either the profiler's {"traceEvents": [...]} object or a bare event list.
    data: Any = json.loads(Path(trace).read_text()) if isinstance(trace, str | Path) else trace
    events: Iterable[Mapping[str, Any]] = data.get("traceEvents", []) if isinstance(data, Mapping) else data
    kernels: list[tuple[str, float, float, Any, int]] = []
    runtime: dict[Any, tuple[float, tuple[Any, Any]]] = {}
    cpu_ann: dict[tuple[Any, Any], list[tuple[float, float, str]]] = {}
    gpu_ann: list[tuple[float, float, str]] = []
    markers: dict[str, float] = {}
    for e in events:
        if e.get("ph") != "X":
            continue
        cat = str(e.get("cat", "")).lower()
        name = str(e.get("name", ""))
        ts, dur = float(e.get("ts", 0.0)) * 1e-6, float(e.get("dur", 0.0)) * 1e-6
        args = e.get("args") or {}
        if cat in KERNEL_CATEGORIES:
            kernels.append(
                (name, ts, ts + dur, args.get("correlation"), int(args.get("stream", e.get("tid", 0)) or 0))
            )
        elif cat in ("cuda_runtime", "cuda_driver"):
            if "correlation" in args:
                runtime[args["correlation"]] = (ts, (e.get("pid"), e.get("tid")))
        elif cat == "user_annotation":
            if name.startswith("dse::"):
                markers.setdefault(name, ts)
            if name.startswith(op_prefix):
                cpu_ann.setdefault((e.get("pid"), e.get("tid")), []).append((ts, ts + dur, name))
        elif cat == "gpu_user_annotation" and name.startswith(op_prefix):
            gpu_ann.append((ts, ts + dur, name))
    launch_op: dict[Any, str] = {}
    by_thread: dict[Any, list[tuple[float, Any]]] = {}
    for corr, (ts, thread) in runtime.items():
        by_thread.setdefault(thread, []).append((ts, corr))
    for thread, points in by_thread.items():
        launch_op.update(_innermost(cpu_ann.get(thread, []), points))
    gpu_op = _innermost(gpu_ann, [(start, i) for i, (_, start, _, _, _) in enumerate(kernels)])
    out = [
        KernelEvent(
            name=name, op=launch_op.get(corr) or gpu_op.get(i, ""), start_s=start, end_s=end, stream=stream
        )
        for i, (name, start, end, corr, stream) in enumerate(kernels)
    ]
    out.sort(key=lambda k: k.start_s)
    return Timeline(kernels=tuple(out), markers=markers)


def energy_breakdown(
    trace: PowerTrace | tuple[Any, Any],
    kernels: Iterable[KernelEvent],
    window: tuple[float, float],
    *,
    num_passes: int = 1,
    prefix: str = "",
) -> dict[str, Any]:
    """Per-op energy (J per pass) of a window from a power trace and a kernel timeline on the same clock.

    Returns `{"by_op": {prefix + op: J}, "by_module": {}, "kernel_time_s_by_op": {...}, "energy_j": J,
    "idle_j": J, "window_s": s, "num_passes": n}`; `by_op` includes `(idle)` (no kernel running) so that
    it sums to `energy_j`, the window's energy per pass. Kernels without an op go to `(other kernels)`.
    """
    t_s, power_w = (trace.t_s, trace.power_w) if isinstance(trace, PowerTrace) else trace
    intervals = [(k.op or OTHER, k.start_s, k.end_s) for k in kernels]
    result = attribute_energy(t_s, power_w, intervals, window)
    scale = 1.0 / max(1, num_passes)
    by_op = {prefix + name: energy * scale for name, energy in result.by_name.items()}
    by_op[prefix + IDLE] = result.unattributed_j * scale
    busy = {prefix + name: seconds * scale for name, seconds in result.busy_s.items()}
    return {
        "by_op": by_op,
        "by_module": {},  # hardware modules are not observable from a power trace
        "kernel_time_s_by_op": busy,
        "energy_j": result.total_j * scale,
        "idle_j": result.unattributed_j * scale,
        "window_s": (window[1] - window[0]) * scale,
        "num_passes": num_passes,
    }


# ---- measurement (GPU- and runner-agnostic; tested on ReplayGpu with a fake runner)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfiledRun:
    """What a runner returns from a profiled run: the chrome trace and host-clock times around it."""

    trace: Mapping[str, Any]
    marker_host_s: float  # host time taken right before the SYNC_MARKER annotation
    t0_s: float
    t1_s: float
    num_passes: int


class ModelRunner(Protocol):
    """A model ready to run forward passes (TorchLlm; fakes in tests)."""

    name: str  # op-name prefix: the arch name
    label: str  # e.g. "llama-3.1-8b/prefill"
    kernel_name: str
    meta: dict[str, Any]

    def run(self, num_calls: int) -> int: ...
    def profile(self, num_passes: int, now_s: Callable[[], float]) -> ProfiledRun: ...
    def release(self) -> None: ...


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class ModelMeasurement:
    """End-to-end sample (kind "model", per forward pass), per-op breakdown, and the data behind them."""

    sample: KernelSample
    breakdown: dict[str, Any]
    power_trace: PowerTrace
    timeline: Timeline  # on the host clock


def measure_model(
    runner: ModelRunner,
    gpu: GpuProbe,
    protocol: MeasureProtocol,
    *,
    sm_clock_hz: float | None = None,
    gpu_label: str | None = None,
    phase: str = "prefill",
    source: str = "dse-measure-model",
) -> ModelMeasurement:
    """Measure forward passes end to end (harness protocol), then one profiled run for the breakdown."""
    use_counter = counter_available(gpu)
    with locked_clocks(gpu, sm_clock_hz, settle_s=protocol.settle_s):
        idle_power_w = measure_idle_power_w(gpu, protocol, use_counter=use_counter)
        power_limit_w = gpu.power_limit_w()
        # A forward pass may itself last seconds: no minimum call count, just >= window_s per window.
        windows = measure_kernel(gpu, runner, replace(protocol, min_calls=1), use_counter=use_counter)
        latency_s = float(np.mean([w.latency_s for w in windows]))
        num_passes = max(1, min(MAX_PROFILED_PASSES, math.ceil(protocol.window_s / latency_s)))
        gpu.sleep_s(protocol.cooldown_s)
        sampler = gpu.sampler(protocol.sample_period_s)
        sampler.start()
        try:
            profiled = runner.profile(num_passes, gpu.now_s)
        finally:
            power_trace = sampler.stop()
    aligned = _aligned_timeline(profiled, op_prefix=f"{runner.name}/")
    profiled_breakdown = energy_breakdown(
        power_trace,
        aligned.kernels,
        (profiled.t0_s, profiled.t1_s),
        num_passes=profiled.num_passes,
        prefix=f"{phase}/",
    )
    sample = _model_sample(
        runner,
        windows,
        protocol,
        gpu=gpu_label or gpu.name,
        sm_clock_hz=sm_clock_hz,
        power_limit_w=power_limit_w,
        idle_power_w=idle_power_w,
        latency_s=latency_s,
        source=source,
    )
    breakdown = _model_breakdown(runner, sample, profiled, profiled_breakdown, phase=phase)
    return ModelMeasurement(sample=sample, breakdown=breakdown, power_trace=power_trace, timeline=aligned)


def _aligned_timeline(profiled: ProfiledRun, *, op_prefix: str) -> Timeline:
    """The profiled run's kernel timeline moved onto the host clock via the SYNC_MARKER annotation."""
    timeline = parse_chrome_trace(profiled.trace, op_prefix=op_prefix)
    if SYNC_MARKER not in timeline.markers:
        raise MeasurementError(
            f"the profiler trace has no '{SYNC_MARKER}' annotation: cannot align it with power"
        )
    return timeline.shifted(profiled.marker_host_s - timeline.markers[SYNC_MARKER])


def _model_sample(
    runner: ModelRunner,
    windows: Sequence[Window],
    protocol: MeasureProtocol,
    *,
    gpu: str,
    sm_clock_hz: float | None,
    power_limit_w: float,
    idle_power_w: float,
    latency_s: float,
    source: str,
) -> KernelSample:
    """The end-to-end sample (kind "model", per forward pass) from the measured windows."""
    per_call = [w.energy_j / w.num_calls for w in windows]
    energy_j = float(np.mean(per_call))
    meta = runner.meta
    return KernelSample(
        gpu=gpu,
        kind="model",
        name=runner.label,
        dtype=str(meta.get("precision", "")),
        variant=str(meta.get("attention", "")),
        batch=meta.get("batch"),
        seq_len_q=meta.get("seq_len_q"),
        seq_len_kv=meta.get("seq_len_kv"),
        sm_clock_hz=sm_clock_hz,
        avg_sm_clock_hz=float(np.nanmean([w.avg_sm_clock_hz for w in windows])),
        power_limit_w=power_limit_w,
        latency_s=latency_s,
        avg_power_w=energy_j / latency_s,
        energy_j=energy_j,
        trace_energy_j=float(np.mean([w.trace_energy_j / w.num_calls for w in windows])),
        idle_power_w=idle_power_w,
        num_calls=int(round(np.mean([w.num_calls for w in windows]))),
        num_repeats=len(windows),
        latency_rel_std=rel_std([w.latency_s for w in windows]),
        energy_rel_std=rel_std(per_call),
        stable=rel_std(per_call) <= protocol.max_rel_std
        and rel_std([w.latency_s for w in windows]) <= protocol.max_rel_std,
        num_samples=sum(w.num_samples for w in windows),
        temp_c=float(np.nanmean([w.temp_c for w in windows])),
        throttle_reasons=",".join(sorted({r for w in windows for r in w.throttle_reasons})),
        energy_method="trace" if all(math.isnan(w.counter_energy_j) for w in windows) else "counter",
        source=source,
    )


def _model_breakdown(
    runner: ModelRunner,
    sample: KernelSample,
    profiled: ProfiledRun,
    profiled_breakdown: dict[str, Any],
    *,
    phase: str,
) -> dict[str, Any]:
    """The per-op breakdown: the trace's per-op shares scaled to the sample's end-to-end energy."""
    # NOTE(dse): the trace sets each op's share; the total is the end-to-end energy per pass from >= 1 s
    # windows (energy counter), which a short profiled run sampled at 10 ms cannot match (aliasing, and the
    # profiler's own overhead). The unscaled trace numbers stay under "profiled".
    energy_j = sample.energy_j
    trace_total = profiled_breakdown["energy_j"]
    scale = energy_j / trace_total if trace_total > 0 else math.nan
    by_op = {name: value * scale for name, value in profiled_breakdown["by_op"].items()}
    return {
        "model": runner.name,
        "gpu": sample.gpu,
        "phase": phase,
        **runner.meta,
        "sm_clock_hz": sample.sm_clock_hz,
        "avg_sm_clock_hz": sample.avg_sm_clock_hz,
        "latency_s": sample.latency_s,
        "energy_j": energy_j,
        "avg_power_w": sample.avg_power_w,
        "idle_power_w": sample.idle_power_w,
        "by_op": by_op,
        "by_module": {},
        "energy_j_by_name": dict(by_op),
        "energy_j_by_module": {},
        "kernel_time_s_by_op": profiled_breakdown["kernel_time_s_by_op"],
        "profiled": {
            "latency_s": (profiled.t1_s - profiled.t0_s) / profiled.num_passes,
            "energy_j": trace_total,
            "idle_j": profiled_breakdown["idle_j"],
            "num_passes": profiled.num_passes,
            "by_op": profiled_breakdown["by_op"],
        },
    }

"""measure_ops(): the kernel measurement protocol (zeus `profile.py` style), GPU- and launcher-agnostic.

For each SM clock (locked, or observed with `--no-lock`), then for each op:

    clock   lock f ─ settle ─ idle window ──────────────────────────────────────────── reset f (finally)
                              P_idle(f) = ΔE / Δt
    op      prepare ─ 1 call ─ warm-up >= warmup_s ─┬─ cooldown + jitter ─ window ─┬─ ... ─ release
            (inputs,          (latency guess)       └───────── repeats >= 3 ───────┘
             kernel name)
    window  sampler.start   E0,t0 ─[ N calls back to back ]─ sync   t1,E1   sampler.stop
              |-s--s--s--s--s--s--s--s--s--s--s--s--s--s--s--s--s--s--s--s--s--s--|   s: power sample, ~10 ms
                            └────── t1 - t0 >= window_s >= 1 s ──────┘
            N = max(min_calls, window_s / latency guess)

    per window  latency = (t1 - t0) / N         energy = (E1 - E0) / N   (counter; trace integral if none)
    gate        rel. stddev of per-call energy and latency over the windows <= max_rel_std, else add windows
                up to max_repeats; still above: the sample is kept with stable=False

The cooldown lets the sensor's averaging window clear the previous kernel; the random jitter varies the
phase of the sensor's 25-of-100 ms boxcar across repeats (hardware-facts 5.2-5.3). Idle power is measured
at each clock, so `KernelSample.dynamic_energy_j` is energy above idle at that clock.

The harness talks to two small interfaces: a GPU probe (`NvmlGpu`, or `ReplayGpu` on a virtual clock) and
a launcher (`TorchLauncher`, or `ReplayGpu.launcher()`), so the whole protocol runs in tests without a GPU.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, Protocol

import numpy as np

from dse.calibrate.data.samples import KernelSample, op_fields
from dse.errors import ConfigError, MeasurementError
from dse.measure.names import parse_kernel_name
from dse.measure.nvml import decode_throttle_reasons, locked_clocks
from dse.measure.sampler import PowerTrace
from dse.workload.ops import Op

logger = logging.getLogger(__name__)

MIN_WINDOW_S = 1.0


class UnsupportedOpError(MeasurementError):
    """This GPU or software stack cannot run the op (e.g. fp8 before Ada/Hopper): it is skipped."""


class Sampler(Protocol):
    def start(self) -> Any: ...
    def stop(self) -> PowerTrace: ...


class GpuProbe(Protocol):
    """What the harness needs from a GPU (`NvmlGpu`, `ReplayGpu`), all in SI units."""

    name: str

    def now_s(self) -> float: ...
    def sleep_s(self, seconds: float) -> None: ...
    def energy_j(self) -> float: ...
    def power_w(self) -> float: ...
    def sm_clock_hz(self) -> float: ...
    def power_limit_w(self) -> float: ...
    def temp_c(self) -> float: ...
    def throttle_reasons(self) -> tuple[str, ...]: ...
    def lock_sm_clock(self, sm_clock_hz: float) -> None: ...
    def reset_sm_clock(self) -> None: ...
    def sampler(self, period_s: float) -> Sampler: ...


class PreparedKernel(Protocol):
    """An op with its inputs allocated, ready to run back to back."""

    kernel_name: str

    def run(self, num_calls: int) -> int:
        """Run at least `num_calls` calls, wait until the GPU is done, return the calls run."""
        ...

    def release(self) -> None: ...


class Launcher(Protocol):
    def prepare(self, op: Op) -> PreparedKernel: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasureProtocol:
    """How long and how often to measure. Defaults follow hardware-facts 5.3 and zeus `profile.py`.

    Args (fields):
        warmup_s: run the kernel this long before the first window (clocks, caches, temperature settle).
        window_s: minimum length of one measurement window; at least 1 s (the sensor and counter update
            every 20-100 ms, so shorter windows read stale values).
        min_calls: at least this many calls per window.
        repeats: windows per op; more (up to `max_repeats`) while the stability gate fails.
        max_rel_std: stability gate on the relative stddev of per-call energy and latency across windows.
        cooldown_s: idle time before each window; `jitter_s` adds a uniform random delay on top.
        idle_s: length of the idle-power window at each clock.
        settle_s: wait after locking a clock.
        sample_period_s: power-sampler period.
        seed: seeds the jitter.
    """

    warmup_s: float = 1.0
    window_s: float = 1.0
    min_calls: int = 32
    repeats: int = 3
    max_repeats: int = 6
    max_rel_std: float = 0.05
    cooldown_s: float = 0.5
    jitter_s: float = 0.1
    idle_s: float = 2.0
    settle_s: float = 0.5
    sample_period_s: float = 0.01
    seed: int = 0

    def __post_init__(self) -> None:
        if self.window_s < MIN_WINDOW_S:
            raise ConfigError(f"window_s {self.window_s} is below {MIN_WINDOW_S} s: NVML readings go stale")
        if self.repeats < 2 or self.max_repeats < self.repeats:
            raise ConfigError("need repeats >= 2 and max_repeats >= repeats for the stability gate")
        if min(self.warmup_s, self.cooldown_s, self.jitter_s, self.idle_s, self.settle_s) < 0:
            raise ConfigError("protocol durations must be >= 0")
        if self.sample_period_s <= 0 or self.min_calls < 1 or self.max_rel_std <= 0:
            raise ConfigError("sample_period_s, min_calls and max_rel_std must be positive")


@dataclass(frozen=True, slots=True, kw_only=True)
class Window:
    """One measurement window: `num_calls` calls between t0 and t1."""

    t0_s: float
    t1_s: float
    num_calls: int
    counter_energy_j: float  # NaN without an energy counter
    trace_energy_j: float
    num_samples: int
    avg_sm_clock_hz: float
    temp_c: float
    throttle_reasons: tuple[str, ...]

    @property
    def duration_s(self) -> float:
        return self.t1_s - self.t0_s

    @property
    def energy_j(self) -> float:
        return self.trace_energy_j if math.isnan(self.counter_energy_j) else self.counter_energy_j

    @property
    def latency_s(self) -> float:
        return self.duration_s / self.num_calls


def rel_std(values: Sequence[float]) -> float:
    """Sample standard deviation over mean (0 for fewer than two values)."""
    arr = np.asarray(values, dtype=float)
    if arr.size < 2 or arr.mean() == 0:
        return 0.0
    return float(arr.std(ddof=1) / abs(arr.mean()))


def counter_available(gpu: GpuProbe) -> bool:
    try:
        gpu.energy_j()
    except MeasurementError as exc:
        logger.warning("no total-energy counter (%s): energy comes from the integrated power trace", exc)
        return False
    return True


def measure_window(
    gpu: GpuProbe, body: Callable[[], int], protocol: MeasureProtocol, *, use_counter: bool = True
) -> tuple[Window, PowerTrace]:
    """Run `body` (which returns the calls it ran) inside one synchronized window and measure it."""
    sampler = gpu.sampler(protocol.sample_period_s)
    sampler.start()
    try:
        e0 = gpu.energy_j() if use_counter else math.nan
        t0 = gpu.now_s()
        num_calls = body()
        t1 = gpu.now_s()
        e1 = gpu.energy_j() if use_counter else math.nan
    finally:
        trace = sampler.stop()
    clock = trace.aux_mean("sm_clock_hz", t0, t1)
    temp = trace.aux_mean("temp_c", t0, t1)
    masks = trace.aux_in("throttle_mask", t0, t1)
    reasons: set[str] = set()
    for mask in masks[np.isfinite(masks)]:
        reasons.update(decode_throttle_reasons(int(mask)))
    if math.isnan(clock):  # window shorter than the telemetry period: read once now
        clock = gpu.sm_clock_hz()
    if math.isnan(temp):
        temp = gpu.temp_c()
    reasons.update(gpu.throttle_reasons())
    window = Window(
        t0_s=t0,
        t1_s=t1,
        num_calls=max(1, num_calls),
        counter_energy_j=e1 - e0,
        trace_energy_j=trace.energy_j(t0, t1),
        num_samples=trace.num_samples(t0, t1),
        avg_sm_clock_hz=clock,
        temp_c=temp,
        throttle_reasons=tuple(sorted(reasons)),
    )
    return window, trace


def measure_idle_power_w(gpu: GpuProbe, protocol: MeasureProtocol, *, use_counter: bool = True) -> float:
    """Mean board power over `idle_s` of doing nothing (at whatever clock is set now)."""
    if protocol.idle_s <= 0:
        return math.nan

    def idle() -> int:
        gpu.sleep_s(protocol.idle_s)
        return 1

    window, _ = measure_window(gpu, idle, protocol, use_counter=use_counter)
    return window.energy_j / window.duration_s if window.duration_s > 0 else math.nan


def _calls_for_window(latency_s: float, protocol: MeasureProtocol) -> int:
    """Calls for one window: 10% above `window_s` at `latency_s`, and at least `min_calls`."""
    return max(protocol.min_calls, math.ceil(1.1 * protocol.window_s / max(latency_s, 1e-9)))


def measure_kernel(
    gpu: GpuProbe,
    kernel: PreparedKernel,
    protocol: MeasureProtocol,
    *,
    rng: random.Random | None = None,
    use_counter: bool = True,
) -> list[Window]:
    """Warm up `kernel`, then measure windows until the gate passes or `max_repeats` windows were taken.

    The gate looks at the latest `repeats` windows; when they agree within `max_rel_std` they are returned
    (earlier windows, e.g. from a clock or temperature still ramping, are dropped). Otherwise all
    `max_repeats` windows are returned and the caller flags the sample unstable. Windows shorter than
    `window_s` are discarded and re-measured with more calls.
    """
    rng = rng or random.Random(protocol.seed)
    t0 = gpu.now_s()
    n = kernel.run(1)
    guess = max((gpu.now_s() - t0) / max(n, 1), 1e-7)
    if protocol.warmup_s > 0:
        t0 = gpu.now_s()
        n = kernel.run(max(1, math.ceil(protocol.warmup_s / guess)))
        guess = max((gpu.now_s() - t0) / max(n, 1), 1e-7)
    num_calls = _calls_for_window(guess, protocol)
    windows: list[Window] = []
    for _ in range(2 * protocol.max_repeats):
        gpu.sleep_s(protocol.cooldown_s + rng.uniform(0.0, protocol.jitter_s))
        window, _ = measure_window(gpu, partial(kernel.run, num_calls), protocol, use_counter=use_counter)
        if window.duration_s < protocol.window_s:  # the guess was off (launch overhead, caches): redo
            logger.debug("window of %.3f s is short; re-measuring with more calls", window.duration_s)
            num_calls = _calls_for_window(window.latency_s, protocol)
            continue
        windows.append(window)
        if len(windows) >= protocol.repeats:
            recent = windows[-protocol.repeats :]
            if is_stable(recent, protocol.max_rel_std):
                return recent  # earlier, unsettled windows (if any) are dropped: that is the retry
        if len(windows) >= protocol.max_repeats:
            break
    if not windows:
        raise MeasurementError(f"could not get a window of >= {protocol.window_s} s (latency keeps changing)")
    return windows


def is_stable(windows: Sequence[Window], max_rel_std: float) -> bool:
    energy = [w.energy_j / w.num_calls for w in windows]
    latency = [w.latency_s for w in windows]
    return rel_std(energy) <= max_rel_std and rel_std(latency) <= max_rel_std


def sample_from_windows(
    op: Op,
    windows: Sequence[Window],
    *,
    gpu_label: str,
    sm_clock_hz: float | None,
    power_limit_w: float,
    idle_power_w: float,
    kernel_name: str,
    max_rel_std: float,
    source: str,
) -> KernelSample:
    """Aggregate the windows of one op into a KernelSample (per-call means over the windows)."""
    per_call_energy = [w.energy_j / w.num_calls for w in windows]
    per_call_trace = [w.trace_energy_j / w.num_calls for w in windows]
    latencies = [w.latency_s for w in windows]
    latency = float(np.mean(latencies))
    energy = float(np.mean(per_call_energy))
    config = parse_kernel_name(kernel_name) if kernel_name else None
    method = "trace" if all(math.isnan(w.counter_energy_j) for w in windows) else "counter"
    return KernelSample(
        gpu=gpu_label,
        **op_fields(op),
        sm_clock_hz=sm_clock_hz,
        avg_sm_clock_hz=float(np.nanmean([w.avg_sm_clock_hz for w in windows])),
        power_limit_w=power_limit_w,
        latency_s=latency,
        avg_power_w=energy / latency,
        energy_j=energy,
        trace_energy_j=float(np.mean(per_call_trace)),
        idle_power_w=idle_power_w,
        num_calls=int(round(np.mean([w.num_calls for w in windows]))),
        num_repeats=len(windows),
        latency_rel_std=rel_std(latencies),
        energy_rel_std=rel_std(per_call_energy),
        stable=is_stable(windows, max_rel_std),
        num_samples=sum(w.num_samples for w in windows),
        temp_c=float(np.nanmean([w.temp_c for w in windows])),
        throttle_reasons=",".join(sorted({r for w in windows for r in w.throttle_reasons})),
        kernel_name=kernel_name,
        tile=config.tile if config else "",
        stages=config.stages if config else None,
        warp_specialized=config.warp_specialized if config else None,
        split_k=config.split_k if config else None,
        energy_method=method,
        source=source,
    )


def _measure_one(
    op: Op,
    gpu: GpuProbe,
    launcher: Launcher,
    protocol: MeasureProtocol,
    *,
    rng: random.Random,
    use_counter: bool,
    gpu_label: str,
    sm_clock_hz: float | None,
    power_limit_w: float,
    idle_power_w: float,
    source: str,
) -> KernelSample | None:
    try:
        kernel = launcher.prepare(op)
    except UnsupportedOpError as exc:
        logger.warning("skipping %s: %s", op.name, exc)
        return None
    try:
        windows = measure_kernel(gpu, kernel, protocol, rng=rng, use_counter=use_counter)
    finally:
        kernel.release()
    sample = sample_from_windows(
        op,
        windows,
        gpu_label=gpu_label,
        sm_clock_hz=sm_clock_hz,
        power_limit_w=power_limit_w,
        idle_power_w=idle_power_w,
        kernel_name=kernel.kernel_name,
        max_rel_std=protocol.max_rel_std,
        source=source,
    )
    if not sample.stable:
        logger.warning(
            "%s: unstable after %d windows (energy %.1f%%, latency %.1f%% rel. std)",
            op.name,
            sample.num_repeats,
            100 * sample.energy_rel_std,
            100 * sample.latency_rel_std,
        )
    return sample


def measure_ops(
    ops: Sequence[Op],
    clocks: Sequence[float | None],
    protocol: MeasureProtocol,
    gpu_handle: GpuProbe,
    launcher: Launcher,
    *,
    gpu_label: str | None = None,
    source: str = "dse-measure",
    on_sample: Callable[[KernelSample], None] | None = None,
) -> list[KernelSample]:
    """Measure each op at each SM clock; returns one KernelSample per (clock, op) that could run.

    Args:
        ops: the ops to measure (each run alone, back to back, `count` ignored).
        clocks: SM clocks to lock in Hz; `None` entries measure at whatever clock the GPU picks (no lock).
        protocol: warm-up, window, repeats and gate settings.
        gpu_handle: `NvmlGpu` or `ReplayGpu`.
        launcher: prepares ops for running (`TorchLauncher`, `ReplayGpu.launcher()`).
        gpu_label: the `gpu` column (default: the probe's name).
        source: the `source` column.
        on_sample: called with each sample as soon as it is measured (progress, incremental writes).

    Ops the launcher cannot run (`UnsupportedOpError`) are skipped with a warning. Locked clocks are
    reset when this returns or raises.
    """
    if not clocks:
        raise ConfigError("no clocks to measure at (use [None] for the GPU's own choice)")
    label = gpu_label or gpu_handle.name
    use_counter = counter_available(gpu_handle)
    rng = random.Random(protocol.seed)
    samples: list[KernelSample] = []
    for clock in clocks:
        # NOTE(dse): the `with` sits in this frame (not in a generator) so that the clock is reset as soon as
        # anything raises, not when a suspended generator is garbage-collected.
        with locked_clocks(gpu_handle, clock, settle_s=protocol.settle_s):
            idle_power_w = measure_idle_power_w(gpu_handle, protocol, use_counter=use_counter)
            power_limit_w = gpu_handle.power_limit_w()
            logger.info(
                "clock %s: idle power %.1f W",
                "unlocked" if clock is None else f"{clock / 1e6:.0f} MHz",
                idle_power_w,
            )
            for op in ops:
                sample = _measure_one(
                    op,
                    gpu_handle,
                    launcher,
                    protocol,
                    rng=rng,
                    use_counter=use_counter,
                    gpu_label=label,
                    sm_clock_hz=clock,
                    power_limit_w=power_limit_w,
                    idle_power_w=idle_power_w,
                    source=source,
                )
                if sample is None:
                    continue
                samples.append(sample)
                if on_sample is not None:
                    on_sample(sample)
    return samples


def with_label(samples: Sequence[KernelSample], **fields: Any) -> list[KernelSample]:
    """Copies of `samples` with some fields replaced (e.g. `source`)."""
    return [replace(s, **fields) for s in samples]

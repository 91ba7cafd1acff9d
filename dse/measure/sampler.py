"""Power traces: the sampler thread, trapezoid integration, and alignment of a trace with an op timeline.

The sampler follows seed 001's MTSM (multi-threaded synchronized monitoring): a thread reads power while
the main thread runs the kernels, and only the samples inside the kernel window count. Here the thread
runs a little before and after the window (so both edges are covered), the window edges are timestamps
on the same clock, and integration is clipped to them:

    sampler.start()             t0 = now()   run kernels, synchronize   t1 = now()   trace = sampler.stop()
       |--s--s--s--s--s--s--s--s--s--s--s--s--s--s--s--s--s--s--s--s--s--|
                                 [=========== integrate over t0..t1 ===========]

Power between samples is linear in time (the trapezoid rule); before the first and after the last sample it
is held constant. `attribute_energy` splits a window's energy over an operator timeline (seed 002's
trace-based alignment, with Smaragdine's equal split among concurrent operators): per-op energies plus the
unattributed gaps sum exactly to the window's integral.

NOTE(dse): the A100/H100 power sensor averages only 25 ms of every 100 ms (hardware-facts 5.2), so a
10 ms trace sees steps of ~100 ms. Per-kernel energies are therefore taken from >= 1 s windows (and the
energy counter), and per-op attribution inside one forward pass resolves only ops much longer than that.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from dse.errors import MeasurementError

logger = logging.getLogger(__name__)

UNATTRIBUTED = "(unattributed)"


def _as_arrays(
    t_s: Sequence[float] | np.ndarray, power_w: Sequence[float] | np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    t = np.asarray(t_s, dtype=float)
    p = np.asarray(power_w, dtype=float)
    if t.ndim != 1 or t.shape != p.shape:
        raise ValueError(f"trace times and powers must be 1-D of equal length, got {t.shape} and {p.shape}")
    if t.size == 0:
        raise MeasurementError("empty power trace: the sampler recorded no samples")
    if np.any(np.diff(t) < 0):
        order = np.argsort(t, kind="stable")
        t, p = t[order], p[order]
    return t, p


def trapezoid_energy_j(
    t_s: Sequence[float] | np.ndarray,
    power_w: Sequence[float] | np.ndarray,
    start_s: float | None = None,
    end_s: float | None = None,
) -> float:
    """Energy of a power trace over [start_s, end_s] (default: first to last sample), trapezoid rule.

    Window edges between samples are interpolated linearly; outside the samples power is held constant.
    """
    t, p = _as_arrays(t_s, power_w)
    lo = t[0] if start_s is None else start_s
    hi = t[-1] if end_s is None else end_s
    if hi < lo:
        raise ValueError(f"window end {hi} before start {lo}")
    inside = t[(t > lo) & (t < hi)]
    points = np.concatenate(([lo], inside, [hi]))
    return float(np.trapezoid(np.interp(points, t, p), points))


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class PowerTrace:
    """Power samples (`t_s`, `power_w`) and low-rate telemetry (`aux_t_s`, `aux[name]`) on one clock."""

    t_s: np.ndarray
    power_w: np.ndarray
    aux_t_s: np.ndarray = field(default_factory=lambda: np.zeros(0))
    aux: dict[str, np.ndarray] = field(default_factory=dict)

    def __len__(self) -> int:
        return int(self.t_s.size)

    def energy_j(self, start_s: float | None = None, end_s: float | None = None) -> float:
        return trapezoid_energy_j(self.t_s, self.power_w, start_s, end_s)

    def mean_power_w(self, start_s: float, end_s: float) -> float:
        if end_s <= start_s:
            return float(np.interp(start_s, self.t_s, self.power_w))
        return self.energy_j(start_s, end_s) / (end_s - start_s)

    def num_samples(self, start_s: float, end_s: float) -> int:
        return int(np.count_nonzero((self.t_s >= start_s) & (self.t_s <= end_s)))

    def aux_in(self, name: str, start_s: float, end_s: float) -> np.ndarray:
        """Telemetry values of `name` sampled inside [start_s, end_s] (may be empty)."""
        values = self.aux.get(name)
        if values is None:
            return np.zeros(0)
        return values[(self.aux_t_s >= start_s) & (self.aux_t_s <= end_s)]

    def aux_mean(self, name: str, start_s: float, end_s: float) -> float:
        values = self.aux_in(name, start_s, end_s)
        return float(np.mean(values)) if values.size else float("nan")

    def rows(self) -> dict[str, np.ndarray]:
        """Columns for a DataFrame of the power samples (telemetry left out: different times)."""
        return {"t_s": self.t_s, "power_w": self.power_w}


@dataclass(frozen=True, slots=True, kw_only=True)
class Attribution:
    """Energy of a window split over named intervals; `by_name` + `unattributed_j` == `total_j`."""

    by_name: dict[str, float]
    unattributed_j: float
    total_j: float
    busy_s: dict[str, float]


def attribute_energy(
    t_s: Sequence[float] | np.ndarray,
    power_w: Sequence[float] | np.ndarray,
    intervals: Iterable[tuple[str, float, float]],
    window: tuple[float, float] | None = None,
) -> Attribution:
    """Split the energy of a power trace over named time intervals (an op or kernel timeline).

    Each elementary segment between consecutive breakpoints (samples and interval edges) carries the exact
    integral of the linearly interpolated power; it goes in equal shares to the intervals active in it
    (concurrent kernels share, as in Smaragdine), or to `unattributed_j` when none is active. Several
    intervals may carry the same name (every launch of one op): their energies add up.

    Args:
        t_s, power_w: the trace.
        intervals: (name, start_s, end_s) on the trace's clock.
        window: the span to account for (default: from the earliest to the latest interval edge);
            intervals are clipped to it.
    """
    t, p = _as_arrays(t_s, power_w)
    spans = [(name, float(a), float(b)) for name, a, b in intervals]
    if window is None:
        if not spans:
            raise ValueError("no intervals and no window to attribute energy over")
        window = (min(a for _, a, _ in spans), max(b for _, _, b in spans))
    lo, hi = window
    names = sorted({name for name, _, _ in spans})
    if hi <= lo:
        return Attribution(
            by_name=dict.fromkeys(names, 0.0),
            unattributed_j=0.0,
            total_j=0.0,
            busy_s=dict.fromkeys(names, 0.0),
        )
    starts = np.clip(np.array([a for _, a, _ in spans], dtype=float), lo, hi)
    ends = np.clip(np.array([b for _, _, b in spans], dtype=float), lo, hi)
    ends = np.maximum(ends, starts)
    inside = t[(t > lo) & (t < hi)]
    breaks = np.unique(np.concatenate(([lo, hi], inside, starts, ends)))
    power_at = np.interp(breaks, t, p)
    seg_len = np.diff(breaks)
    seg_energy = 0.5 * (power_at[1:] + power_at[:-1]) * seg_len
    # Active interval count per segment: +1 at each start, -1 at each end (sweep line).
    delta = np.zeros(breaks.size)
    np.add.at(delta, np.searchsorted(breaks, starts), 1.0)
    np.add.at(delta, np.searchsorted(breaks, ends), -1.0)
    active = np.cumsum(delta)[:-1]
    share = np.divide(seg_energy, active, out=np.zeros_like(seg_energy), where=active > 0.5)
    share_len = np.divide(seg_len, active, out=np.zeros_like(seg_len), where=active > 0.5)
    cum = np.concatenate(([0.0], np.cumsum(share)))
    cum_len = np.concatenate(([0.0], np.cumsum(share_len)))
    i0, i1 = np.searchsorted(breaks, starts), np.searchsorted(breaks, ends)
    by_name = dict.fromkeys(names, 0.0)
    busy = dict.fromkeys(names, 0.0)
    for (name, _, _), a, b in zip(spans, i0, i1, strict=True):
        by_name[name] += float(cum[b] - cum[a])
        busy[name] += float(cum_len[b] - cum_len[a])
    total = float(seg_energy.sum())
    unattributed = float(seg_energy[active <= 0.5].sum())
    return Attribution(by_name=by_name, unattributed_j=unattributed, total_j=total, busy_s=busy)


class PowerSampler:
    """A thread reading power every `period_s` (and telemetry every `aux_every` samples) until stopped.

    Use as `with sampler: ...` or `start()` / `stop() -> PowerTrace`. A failed read stops the thread and is
    raised again by `stop()`.
    """

    def __init__(
        self,
        read_power_w: Callable[[], float],
        *,
        period_s: float = 0.01,
        read_aux: Callable[[], dict[str, float]] | None = None,
        aux_every: int = 10,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        """Build a sampler; nothing runs until `start()`.

        Args:
            read_power_w: returns board power now.
            period_s: target sampling period (10 ms: about 4x faster than the sensor's own update).
            read_aux: optional telemetry (clocks, temperature) read every `aux_every`-th sample.
            aux_every: telemetry decimation.
            clock: timebase shared with the window edges (the harness's `now_s`).
        """
        if period_s <= 0:
            raise ValueError("period_s must be positive")
        self.period_s = period_s
        self._read_power_w = read_power_w
        self._read_aux = read_aux
        self._aux_every = max(1, aux_every)
        self._clock = clock
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._t: list[float] = []
        self._p: list[float] = []
        self._aux_t: list[float] = []
        self._aux: list[dict[str, float]] = []
        self.trace: PowerTrace | None = None

    def _sample(self, index: int) -> None:
        before = self._clock()
        value = self._read_power_w()
        after = self._clock()
        self._t.append(0.5 * (before + after))  # the read's midpoint: NVML calls take 0.1-1 ms
        self._p.append(value)
        if self._read_aux is not None and index % self._aux_every == 0:
            self._aux.append(self._read_aux())
            self._aux_t.append(self._clock())

    def _run(self) -> None:
        index = 1
        next_t = self._clock() + self.period_s
        try:
            while not self._stop.wait(max(0.0, next_t - self._clock())):
                self._sample(index)
                index += 1
                next_t += self.period_s
                now = self._clock()
                if next_t < now:  # fell behind (slow NVML call): skip missed ticks, do not burst
                    next_t = now + self.period_s
        except BaseException as exc:  # re-raised by stop()
            self._error = exc

    def start(self) -> PowerSampler:
        if self._thread is not None:
            raise RuntimeError("sampler already started")
        self._sample(0)  # one synchronous sample: the trace starts before the window does
        self._thread = threading.Thread(target=self._run, name="dse-power-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> PowerTrace:
        if self._thread is None:
            raise RuntimeError("sampler not started")
        if self.trace is not None:
            return self.trace
        self._stop.set()
        self._thread.join()
        if self._error is not None:
            raise MeasurementError(f"power sampler failed: {self._error}") from self._error
        self._sample(-1)  # and one after the window ends
        aux_names = sorted({k for row in self._aux for k in row})
        aux = {k: np.array([row.get(k, np.nan) for row in self._aux], dtype=float) for k in aux_names}
        self.trace = PowerTrace(
            t_s=np.array(self._t), power_w=np.array(self._p), aux_t_s=np.array(self._aux_t), aux=aux
        )
        return self.trace

    def __enter__(self) -> PowerSampler:
        return self.start()

    def __exit__(self, exc_type: object, *rest: object) -> None:
        """Stop the thread; the trace is in `self.trace` (kept None when the body raised)."""
        if self._thread is None or self._stop.is_set():
            return
        if exc_type is None:
            self.trace = self.stop()
        else:
            self._stop.set()
            self._thread.join()

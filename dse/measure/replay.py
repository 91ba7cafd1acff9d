"""ReplayGpu: a GPU on a virtual clock that serves recorded samples (tests, `--dry-run`).

It implements the harness's GPU probe (`now_s`, `sleep_s`, `energy_j`, `power_w`, clocks, `sampler`) and,
through `launcher()`, its launcher: running an op advances the virtual clock by calls x latency at the
recorded power, so the energy counter and the sampled trace integrate to known values. A 1-s window costs
no wall time, which lets tests drive `measure_ops` end to end (zeus `tests/profile_data` replay).

    gpu = ReplayGpu(read_samples("tests/data/samples/h200_sxm+gemm.csv"))
    samples = measure_ops(ops, [None], MeasureProtocol(), gpu, gpu.launcher())

Ops with no recorded sample use `fallback(op, sm_clock_hz) -> (latency_s, avg_power_w)` when given
(`synthetic_fallback(spec)` for `--dry-run`), else are skipped as unsupported. Samples are matched on the
op's kind, dtype and shape (not its name; a shape within `SHAPE_REL_TOL`), and on the nearest recorded clock.
"""

from __future__ import annotations

import bisect
import logging
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dse.calibrate.data.samples import SHAPE_FIELDS, KernelSample, op_fields
from dse.errors import MeasurementError
from dse.hardware.spec import GpuSpec
from dse.measure.harness import UnsupportedOpError
from dse.measure.nvml import NO_LOCK_HINT
from dse.measure.sampler import PowerTrace
from dse.workload.graph import WorkloadGraph
from dse.workload.ops import ElementwiseOp, GemmOp, Op

logger = logging.getLogger(__name__)

Fallback = Callable[[Op, float], tuple[float, float]]
_KEY_FIELDS = ("kind", "dtype", "variant", *SHAPE_FIELDS)


def op_key(fields: dict[str, object]) -> tuple[object, ...]:
    """Matching key of an op or sample: kind, dtype, variant and shape (batch 1 == unset)."""
    values = {f: fields.get(f) for f in _KEY_FIELDS}
    if values["kind"] == "gemm" and values["batch"] in (None, 1):
        values["batch"] = 1
    return tuple(values[f] if values[f] != "" else None for f in _KEY_FIELDS)


def _sample_key(sample: KernelSample) -> tuple[object, ...]:
    return op_key({f: getattr(sample, f) for f in _KEY_FIELDS})


# A shape written with 6 significant digits (`%g`: 2^27 as 1.34218e+08, the shipped H100 file) is off by at
# most half a unit in its 6th digit: 5e-6 relative. Exact matching made every such row up.
SHAPE_REL_TOL = 5e-6


def _same_shape(a: tuple[object, ...], b: tuple[object, ...]) -> bool:
    """Keys equal, integers within SHAPE_REL_TOL of each other (a 6-digit rounding of the same shape)."""
    return all(
        x == y or (isinstance(x, int) and isinstance(y, int) and math.isclose(x, y, rel_tol=SHAPE_REL_TOL))
        for x, y in zip(a, b, strict=True)
    )


@dataclass(frozen=True, slots=True)
class _Segment:
    t0_s: float
    t1_s: float
    power_w: float


class ReplayGpu:
    """A virtual GPU replaying recorded samples; see the module docstring.

    Args:
        samples: recorded samples to serve.
        name: the probe's name (the `gpu` column by default).
        idle_power_w: board power when nothing runs, or a function of the SM clock (samples' own
            `idle_power_w` wins at their clock).
        power_limit_w: reported power limit.
        default_sm_clock_hz: the clock when none is locked.
        can_lock: False makes `lock_sm_clock` fail like NVML without root.
        noise_rel: relative stddev of per-run multiplicative noise on latency and power.
        seed: seeds the noise.
        fallback: (op, sm_clock_hz) -> (latency_s, avg_power_w) for ops without a recorded sample.
        has_energy_counter: False makes `energy_j` fail like a pre-Volta GPU.
        temp_c: reported temperature.
    """

    def __init__(
        self,
        samples: Sequence[KernelSample] = (),
        *,
        name: str = "replay",
        idle_power_w: float | Callable[[float], float] = 60.0,
        power_limit_w: float = 700.0,
        default_sm_clock_hz: float = 1.98e9,
        can_lock: bool = True,
        noise_rel: float = 0.0,
        seed: int = 0,
        fallback: Fallback | None = None,
        has_energy_counter: bool = True,
        temp_c: float = 45.0,
    ) -> None:
        self.name = name
        self.index = 0
        self._idle_power_w = idle_power_w
        self._power_limit_w = power_limit_w
        self._default_clock_hz = default_sm_clock_hz
        self._can_lock = can_lock
        self._noise_rel = noise_rel
        self._rng = random.Random(seed)
        self._fallback = fallback
        self._has_counter = has_energy_counter
        self._temp_c = temp_c
        self._now = 0.0
        self._energy = 0.0
        self._segments: list[_Segment] = []
        self._starts: list[float] = []
        self._idle_cache: dict[float, float] = {}
        self._locked_hz: float | None = None
        self.lock_log: list[tuple[str, float | None]] = []  # ("lock", hz) / ("reset", None): for tests
        self._table: dict[tuple[object, ...], list[KernelSample]] = {}
        for s in samples:
            if s.kind != "model":
                self._table.setdefault(_sample_key(s), []).append(s)

    # ---- virtual time and power
    def now_s(self) -> float:
        return self._now

    def _advance(self, seconds: float, power_w: float) -> None:
        if seconds <= 0:
            return
        self._segments.append(_Segment(self._now, self._now + seconds, power_w))
        self._starts.append(self._now)
        self._now += seconds
        self._energy += power_w * seconds

    def sleep_s(self, seconds: float) -> None:
        self._advance(max(0.0, seconds), self.idle_power_w_now())

    def idle_power_w_now(self) -> float:
        clock = self.sm_clock_hz()
        cached = self._idle_cache.get(clock)
        if cached is not None:
            return cached
        at_clock = [
            s.idle_power_w
            for group in self._table.values()
            for s in group
            if s.sm_clock_hz is not None
            and abs(s.sm_clock_hz - clock) < 1e6
            and not math.isnan(s.idle_power_w)
        ]
        if at_clock:
            value = float(np.median(at_clock))
        else:
            value = self._idle_power_w(clock) if callable(self._idle_power_w) else self._idle_power_w
        self._idle_cache[clock] = value
        return value

    def power_at(self, t_s: float) -> float:
        """Board power at virtual time `t_s` (idle outside recorded activity)."""
        i = bisect.bisect_right(self._starts, t_s) - 1
        if i < 0:
            return self.idle_power_w_now()
        return self._segments[i].power_w  # the last segment holds at and after its end

    def energy_between_j(self, t0_s: float, t1_s: float) -> float:
        """Exact energy of the recorded activity between two virtual times."""
        total = 0.0
        for seg in self._segments:
            lo, hi = max(seg.t0_s, t0_s), min(seg.t1_s, t1_s)
            if hi > lo:
                total += seg.power_w * (hi - lo)
        return total

    # ---- probe interface (SI)
    def energy_j(self) -> float:
        if not self._has_counter:
            raise MeasurementError(
                "this GPU or driver does not support read the total-energy counter (replay)"
            )
        return self._energy

    def power_w(self) -> float:
        return self.power_at(self._now)

    def sm_clock_hz(self) -> float:
        return self._locked_hz if self._locked_hz is not None else self._default_clock_hz

    def mem_clock_hz(self) -> float:
        return math.nan  # not recorded: `.env.json` says null

    def uuid(self) -> str:
        """No board behind it: the value NVML's UUID takes in a replay's `.env.json`."""
        return "replay"

    def power_limit_w(self) -> float:
        return self._power_limit_w

    def temp_c(self) -> float:
        return self._temp_c

    def throttle_reasons(self) -> tuple[str, ...]:
        return ()

    def lock_sm_clock(self, sm_clock_hz: float) -> None:
        if not self._can_lock:
            raise MeasurementError(
                f"no permission to lock the SM clock at {sm_clock_hz / 1e6:.0f} MHz "
                f"(Insufficient Permissions): {NO_LOCK_HINT}"
            )
        self._locked_hz = sm_clock_hz
        self.lock_log.append(("lock", sm_clock_hz))

    def reset_sm_clock(self) -> None:
        self._locked_hz = None
        self.lock_log.append(("reset", None))

    @property
    def locked_sm_clock_hz(self) -> float | None:
        return self._locked_hz

    def sampler(self, period_s: float = 0.01) -> VirtualSampler:
        return VirtualSampler(self, period_s)

    def launcher(self) -> ReplayLauncher:
        return ReplayLauncher(self)

    # ---- ops
    def _recorded(self, key: tuple[object, ...]) -> list[KernelSample]:
        """The recorded samples of a key: exact, else of a shape within SHAPE_REL_TOL (`_same_shape`)."""
        exact = self._table.get(key)
        if exact:
            return exact
        return next((group for k, group in self._table.items() if _same_shape(k, key)), [])

    def recorded_for(self, sample: KernelSample) -> tuple[KernelSample, ...]:
        """The recorded samples `sample`'s op is replayed from (none: the fallback made its numbers up)."""
        return tuple(self._recorded(_sample_key(sample)))

    def lookup(self, op: Op) -> tuple[float, float, str]:
        """(latency_s, avg_power_w, kernel_name) of `op` at the current clock.

        Raises:
            UnsupportedOpError: no recorded sample and no fallback.
        """
        candidates = self._recorded(op_key(op_fields(op)))
        clock = self.sm_clock_hz()
        if candidates:
            best = min(candidates, key=lambda s: abs((s.sm_clock_hz or s.avg_sm_clock_hz or clock) - clock))
            return best.latency_s, best.avg_power_w, best.kernel_name
        if self._fallback is not None:
            latency_s, power_w = self._fallback(op, clock)
            return latency_s, power_w, ""
        raise UnsupportedOpError(f"no recorded sample for {op.name} ({op_fields(op)['kind']}, {op.dtype})")

    def run_calls(self, latency_s: float, power_w: float, num_calls: int) -> None:
        """Advance the clock by `num_calls` calls, with one noise draw for the whole run."""
        scale_t = max(0.1, self._rng.gauss(1.0, self._noise_rel)) if self._noise_rel else 1.0
        scale_p = max(0.1, self._rng.gauss(1.0, self._noise_rel)) if self._noise_rel else 1.0
        self._advance(latency_s * scale_t * num_calls, power_w * scale_p)


class VirtualSampler:
    """Samples a ReplayGpu's power every `period_s` of virtual time between start() and stop()."""

    def __init__(self, gpu: ReplayGpu, period_s: float) -> None:
        self._gpu = gpu
        self.period_s = period_s
        self._t0: float | None = None

    def start(self) -> VirtualSampler:
        self._t0 = self._gpu.now_s()
        return self

    def stop(self) -> PowerTrace:
        if self._t0 is None:
            raise RuntimeError("sampler not started")
        t1 = self._gpu.now_s()
        # Sample at mid-period points so that a piecewise-constant trace integrates exactly except at steps.
        num = max(1, int(math.ceil((t1 - self._t0) / self.period_s)))
        t = np.concatenate(([self._t0], self._t0 + (np.arange(num) + 0.5) * self.period_s, [t1]))
        t = np.clip(t, self._t0, t1)
        power = np.array([self._gpu.power_at(x) for x in t])
        aux_t = t[::10]
        aux = {
            "sm_clock_hz": np.full(aux_t.size, self._gpu.sm_clock_hz()),
            "temp_c": np.full(aux_t.size, self._gpu.temp_c()),
            "throttle_mask": np.zeros(aux_t.size),
        }
        return PowerTrace(t_s=t, power_w=power, aux_t_s=aux_t, aux=aux)


class ReplayKernel:
    """A prepared op on a ReplayGpu."""

    def __init__(self, gpu: ReplayGpu, op: Op) -> None:
        self._gpu = gpu
        self.op = op
        self.latency_s, self.avg_power_w, self.kernel_name = gpu.lookup(op)

    def run(self, num_calls: int) -> int:
        self._gpu.run_calls(self.latency_s, self.avg_power_w, num_calls)
        return num_calls

    def release(self) -> None:
        pass


class ReplayLauncher:
    """Launcher for a ReplayGpu (the harness's `launcher` argument)."""

    def __init__(self, gpu: ReplayGpu) -> None:
        self._gpu = gpu

    def prepare(self, op: Op) -> ReplayKernel:
        return ReplayKernel(self._gpu, op)


def synthetic_fallback(spec: GpuSpec, *, launch_overhead_s: float = 4e-6) -> Fallback:
    """Made-up but plausible (latency, power) from a catalog GpuSpec, for `--dry-run` only.

    NOT a model and not calibrated: roofline time at 70% of peak FLOP/s or 80% of DRAM bandwidth plus a
    launch overhead, power between idle and TDP by the busier of compute and memory. It exists so that a
    dry run exercises the full pipeline and writes a well-formed file; rows are tagged `synthetic`.
    """

    def estimate(op: Op, sm_clock_hz: float) -> tuple[float, float]:
        if isinstance(op, GemmOp) and op.dtype != "fp32" and op.dtype in spec.sm.tensor_flop_per_clk:
            peak = spec.tensor_peak_flop_per_s(op.dtype, sm_clock_hz)
        else:
            peak = spec.fp32_peak_flop_per_s(sm_clock_hz)
        compute_s = op.flop / (0.7 * peak)
        memory_s = op.min_dram_bytes / (0.8 * spec.memory.bw_bytes_per_s)
        if isinstance(op, ElementwiseOp):
            compute_s = 0.0
        latency_s = max(compute_s, memory_s) + launch_overhead_s
        busy = max(compute_s, memory_s) / latency_s
        idle_w = float(spec.power.idle_power_w.at(sm_clock_hz))
        dynamic = (
            (0.75 if compute_s >= memory_s else 0.45) * busy * (sm_clock_hz / spec.clocks.sm_clock_max_hz)
        )
        return latency_s, min(spec.power.tdp_w, idle_w + dynamic * (spec.power.tdp_w - idle_w))

    return estimate


class ReplayModelRunner:
    """A workload graph "run" on a ReplayGpu: the `ModelRunner` for tests and `dse measure model --dry-run`.

    Ops run in graph order, layer ops (names with `/layer[`) interleaved layer by layer, each call at the
    op's replayed (latency, power) with `gap_s` of idle between kernels. `profile()` returns a chrome trace
    shaped like the torch profiler's (user annotations, runtime launches, kernels with correlation ids)
    on a profiler clock offset from the virtual clock by `profiler_offset_s`, so alignment is exercised.
    `expected_energy_j_by_op()` gives the exact per-op energy of one pass.
    """

    def __init__(
        self,
        gpu: ReplayGpu,
        graph: WorkloadGraph,
        *,
        name: str,
        gap_s: float = 2e-6,
        profiler_offset_s: float = 1000.0,
    ) -> None:
        self._gpu = gpu
        self.graph = graph
        self.name = name
        self.label = graph.name
        self.kernel_name = ""
        meta = graph.meta
        seq_len = int(meta.get("seq_len", meta.get("context_len", 1)))  # type: ignore[call-overload]
        decode = meta.get("phase") == "decode"
        self.meta: dict[str, object] = {
            "precision": meta.get("precision", ""),
            "attention": meta.get("attention", ""),
            "batch": meta.get("batch"),
            "seq_len": seq_len,
            "seq_len_q": 1 if decode else seq_len,
            "seq_len_kv": seq_len + 1 if decode else seq_len,
        }
        self._gap_s = gap_s
        self._offset_s = profiler_offset_s
        self._costs = {op.name: gpu.lookup(op)[:2] for op in graph.ops}
        self._order = self._schedule()

    def _schedule(self) -> list[Op]:
        layer_ops = [op for op in self.graph.ops if "/layer[" in op.name]
        num_layers = max((op.count for op in layer_ops), default=0)
        before: list[Op] = []
        after: list[Op] = []
        seen_layer = False
        for op in self.graph.ops:
            if "/layer[" in op.name:
                seen_layer = True
            else:
                (after if seen_layer else before).extend([op] * op.count)
        per_layer = [op for op in layer_ops for _ in range(op.count // max(num_layers, 1))]
        return before + per_layer * num_layers + after

    def pass_latency_s(self) -> float:
        return sum(self._costs[op.name][0] + self._gap_s for op in self._order)

    def pass_energy_j(self) -> float:
        idle = self._gpu.idle_power_w_now()
        return sum(lat * p + self._gap_s * idle for lat, p in (self._costs[op.name] for op in self._order))

    def expected_energy_j_by_op(self) -> dict[str, float]:
        """Exact energy of each op in one pass (kernel time x power, gaps excluded)."""
        out: dict[str, float] = {}
        for op in self._order:
            latency_s, power_w = self._costs[op.name]
            out[op.name] = out.get(op.name, 0.0) + latency_s * power_w
        return out

    def run(self, num_calls: int) -> int:
        # Unprofiled passes as one segment of the same duration and energy (keeps long windows cheap).
        latency_s = self.pass_latency_s()
        self._gpu.run_calls(latency_s, self.pass_energy_j() / latency_s, num_calls)
        return num_calls

    def profile(self, num_passes: int, now_s: Callable[[], float]) -> Any:
        from dse.measure.model_run import SYNC_MARKER, ProfiledRun

        events: list[dict[str, Any]] = []

        def us(t: float) -> float:
            return (t + self._offset_s) * 1e6

        marker_host_s = now_s()
        events.append(
            {
                "ph": "X",
                "cat": "user_annotation",
                "name": SYNC_MARKER,
                "pid": 1,
                "tid": 1,
                "ts": us(marker_host_s),
                "dur": 1.0,
            }
        )
        t0 = now_s()
        corr = 0
        for _ in range(num_passes):
            for op in self._order:
                latency_s, power_w = self._costs[op.name]
                self._gpu.sleep_s(self._gap_s)
                start = self._gpu.now_s()
                corr += 1
                launch = start - 1e-6
                events.append(
                    {
                        "ph": "X",
                        "cat": "user_annotation",
                        "name": op.name,
                        "pid": 1,
                        "tid": 1,
                        "ts": us(launch - 1e-7),
                        "dur": 0.5,
                    }
                )
                events.append(
                    {
                        "ph": "X",
                        "cat": "cuda_runtime",
                        "name": "cudaLaunchKernel",
                        "pid": 1,
                        "tid": 1,
                        "ts": us(launch),
                        "dur": 0.3,
                        "args": {"correlation": corr},
                    }
                )
                self._gpu.run_calls(latency_s, power_w, 1)
                events.append(
                    {
                        "ph": "X",
                        "cat": "kernel",
                        "name": f"replay_kernel<{op_fields(op)['kind']}>",
                        "pid": 0,
                        "tid": 7,
                        "ts": us(start),
                        "dur": latency_s * 1e6,
                        "args": {"correlation": corr, "stream": 7},
                    }
                )
        t1 = now_s()
        return ProfiledRun(
            trace={"traceEvents": events},
            marker_host_s=marker_host_s,
            t0_s=t0,
            t1_s=t1,
            num_passes=num_passes,
        )

    def release(self) -> None:
        pass

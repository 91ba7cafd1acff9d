"""Whole-model runs: a transformer built in torch from an `LlmArch` (random weights), measured end to end, and
its energy split per operator by aligning the power trace with the profiler's kernel timeline.

    runner = build_torch_llm(load_model_config("llama-3.1-8b"), batch=1, seq_len=2048)
    result = measure_model(runner, gpu, MeasureProtocol())   # ModelMeasurement
    result.breakdown["by_op"]["prefill/llama-3.1-8b/layer[0-31]/attn/qkv_proj"]    # J per forward pass

The torch model runs the ops `dse.workload.llm` puts in the graph, in the same order, and wraps each in a
`record_function` named exactly like the graph op (`<model>/layer[0-31]/attn/qkv_proj`), so measured and
predicted breakdowns share keys (`serving.py` prefixes them with the phase, as here).

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
import tempfile
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from dse.errors import ConfigError, MeasurementError
from dse.measure.harness import (
    GpuProbe,
    MeasureProtocol,
    counter_available,
    measure_idle_power_w,
    measure_kernel,
    rel_std,
)
from dse.measure.nvml import locked_clocks
from dse.measure.sampler import PowerTrace, attribute_energy
from dse.measure.samples import KernelSample
from dse.workload.llm import LlmArch

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
    if isinstance(trace, str | Path):
        trace = json.loads(Path(trace).read_text())
    events = trace.get("traceEvents", []) if isinstance(trace, Mapping) else trace
    kernels, runtime, cpu_ann, gpu_ann = [], {}, {}, []
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
    timeline = parse_chrome_trace(profiled.trace, op_prefix=f"{runner.name}/")
    if SYNC_MARKER not in timeline.markers:
        raise MeasurementError(
            f"the profiler trace has no '{SYNC_MARKER}' annotation: cannot align it with power"
        )
    aligned = timeline.shifted(profiled.marker_host_s - timeline.markers[SYNC_MARKER])
    profiled_breakdown = energy_breakdown(
        power_trace,
        aligned.kernels,
        (profiled.t0_s, profiled.t1_s),
        num_passes=profiled.num_passes,
        prefix=f"{phase}/",
    )
    per_call = [w.energy_j / w.num_calls for w in windows]
    energy_j = float(np.mean(per_call))
    meta = dict(runner.meta)
    sample = KernelSample(
        gpu=gpu_label or gpu.name,
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
    # NOTE(dse): the trace sets each op's share; the total is the end-to-end energy per pass from >= 1 s
    # windows (energy counter), which a short profiled run sampled at 10 ms cannot match (aliasing, and the
    # profiler's own overhead). The unscaled trace numbers stay under "profiled".
    trace_total = profiled_breakdown["energy_j"]
    scale = energy_j / trace_total if trace_total > 0 else math.nan
    by_op = {name: value * scale for name, value in profiled_breakdown["by_op"].items()}
    breakdown = {
        "model": runner.name,
        "gpu": sample.gpu,
        "phase": phase,
        **meta,
        "sm_clock_hz": sm_clock_hz,
        "avg_sm_clock_hz": sample.avg_sm_clock_hz,
        "latency_s": latency_s,
        "energy_j": energy_j,
        "avg_power_w": sample.avg_power_w,
        "idle_power_w": idle_power_w,
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
    return ModelMeasurement(sample=sample, breakdown=breakdown, power_trace=power_trace, timeline=aligned)


# ---- the torch model (needs a GPU; imported lazily)


def _check_arch(arch: LlmArch, precision: str, attention: str, phase: str, kv_len: int) -> None:
    if precision not in ("fp32", "tf32", "bf16", "fp16"):
        raise ConfigError(f"model runs support precision fp32, tf32, bf16 or fp16, not '{precision}'")
    if attention not in ("flash", "eager"):
        raise ConfigError(f"attention '{attention}' is not flash or eager")
    if phase not in ("prefill", "decode"):
        raise ConfigError(f"phase '{phase}' is not prefill or decode")
    if phase == "decode" and arch.family != "decoder":
        raise ConfigError(f"{arch.name} is an encoder: it has no decode phase")
    if kv_len > arch.max_position_embeddings:
        raise ConfigError(
            f"{kv_len} tokens exceed {arch.name}'s max_position_embeddings {arch.max_position_embeddings}"
        )


class TorchLlm:
    """`arch` as eager torch ops with random weights, one forward pass of `phase` per `run` call.

    Prefill: `batch` sequences of `seq_len` tokens (causal for decoders), LM head on the last token of each
    sequence. Decode: one new token per sequence against a KV cache of `seq_len` tokens. Op annotations are
    the `dse.workload.llm` graph names; see the module docstring.
    """

    def __init__(
        self,
        arch: LlmArch,
        *,
        batch: int,
        seq_len: int,
        phase: str = "prefill",
        precision: str = "bf16",
        attention: str = "flash",
        device_index: int = 0,
        seed: int = 0,
    ) -> None:
        from dse.measure.kernels import import_torch, torch_dtype

        _check_arch(arch, precision, attention, phase, seq_len if phase == "prefill" else seq_len + 1)
        torch = import_torch()
        if not torch.cuda.is_available():
            raise MeasurementError(
                "PyTorch sees no CUDA GPU: dse measure needs a CUDA build of PyTorch and a GPU"
            )
        self.torch = torch
        self.arch, self.batch, self.phase, self.attention = arch, batch, phase, attention
        self.q_len = seq_len if phase == "prefill" else 1
        self.kv_len = seq_len if phase == "prefill" else seq_len + 1
        self.dtype = torch_dtype(torch, precision)
        self.name = arch.name
        self.label = f"{arch.name}/{phase}"
        self.kernel_name = ""
        self.meta = {
            "precision": precision,
            "attention": attention,
            "batch": batch,
            "seq_len": seq_len,
            "seq_len_q": self.q_len,
            "seq_len_kv": self.kv_len,
        }
        self.device = torch.device("cuda", device_index)
        self._native_gqa = True
        self._previous_tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        self._check_memory()
        self._gen = torch.Generator(device=self.device)
        self._gen.manual_seed(seed)
        self._build()

    def _check_memory(self) -> None:
        a, item = self.arch, self.torch.tensor([], dtype=self.dtype).element_size()
        cache = a.kv_cache_elements_per_token * self.batch * self.kv_len if a.causal else 0
        acts = 8 * self.batch * self.q_len * max(a.hidden_size, a.intermediate_size * 2)
        scores = self.batch * a.num_heads * self.q_len * self.kv_len if self.attention == "eager" else 0
        need = (a.num_params + cache + acts + 2 * scores) * item
        free, _ = self.torch.cuda.mem_get_info(self.device)
        if need > 0.9 * free:
            raise MeasurementError(
                f"{a.name} at batch {self.batch} x {self.kv_len} tokens needs about "
                f"{need / 2**30:.1f} GiB; the GPU has {free / 2**30:.1f} GiB free"
            )

    def _w(self, *shape: int, std: float = 0.02) -> Any:
        x = self.torch.empty(*shape, device=self.device, dtype=self.dtype)
        return x.normal_(0.0, std, generator=self._gen)

    def _build(self) -> None:
        a, torch = self.arch, self.torch
        d, e, ff = a.hidden_size, a.embed_dim, a.intermediate_size
        b, sq = self.batch, self.q_len
        self.tok_emb = self._w(a.vocab_size, e)
        self.ids = torch.randint(0, a.vocab_size, (b, sq), device=self.device, generator=self._gen)
        self.proj_in = self._w(d, e) if e != d else None
        self.proj_out = self._w(e, d) if e != d else None
        self.pos_emb = self._w(a.num_position_embeddings, d) if a.position_embedding == "learned" else None
        start = self.kv_len - sq
        self.pos_ids = torch.arange(start, start + sq, device=self.device).expand(b, sq)
        self.type_emb = self._w(a.type_vocab_size, d) if a.type_vocab_size else None
        self.type_ids = torch.zeros(b, sq, dtype=torch.long, device=self.device)
        self.embed_norm = self._norm_weights() if a.embedding_norm else None
        self.final_norm = self._norm_weights() if a.final_norm else None
        self.lm_head = None
        if a.family == "decoder":
            self.lm_head = self.tok_emb if a.tie_word_embeddings else self._w(a.vocab_size, e)
        self.pooler = (self._w(d, d), self._w(d)) if a.pooler else None
        if a.position_embedding == "rope":
            half = a.head_dim // 2
            inv = 1.0 / (float(a.rope_theta or 10000.0) ** (torch.arange(half, device=self.device) / half))
            ang = torch.arange(start, start + sq, device=self.device)[:, None] * inv[None, :]
            emb = torch.cat((ang, ang), dim=-1)
            self.cos, self.sin = emb.cos().to(self.dtype), emb.sin().to(self.dtype)
        self.layers = []
        num_up = 2 if a.gated_mlp else 1
        for _ in range(a.num_layers):
            qkv_out = a.q_dim + 2 * a.kv_dim
            layer = {
                "attn_norm": self._norm_weights(),
                "mlp_norm": self._norm_weights(),
                "qkv": self._w(qkv_out, d),
                "qkv_b": self._w(qkv_out) if a.qkv_bias else None,
                "o": self._w(d, a.q_dim),
                "o_b": self._w(d) if a.o_bias else None,
                "up": self._w(num_up * ff, d),
                "up_b": self._w(num_up * ff) if a.mlp_bias else None,
                "down": self._w(d, ff),
                "down_b": self._w(d) if a.mlp_bias else None,
            }
            if a.causal:
                layer["k_cache"] = self._w(b, a.num_kv_heads, self.kv_len, a.head_dim, std=1.0)
                layer["v_cache"] = self._w(b, a.num_kv_heads, self.kv_len, a.head_dim, std=1.0)
            self.layers.append(layer)
        last = a.num_layers - 1
        self._layer_prefix = f"{a.name}/layer[0-{last}]" if last else f"{a.name}/layer[0]"
        if self.attention == "eager" and a.causal and sq > 1:
            keep = torch.ones(sq, self.kv_len, device=self.device, dtype=torch.bool).tril(
                diagonal=self.kv_len - sq
            )
            self.mask = torch.zeros(sq, self.kv_len, device=self.device, dtype=self.dtype).masked_fill(
                ~keep, float("-inf")
            )
        else:
            self.mask = None

    def _norm_weights(self) -> tuple[Any, Any]:
        d = self.arch.hidden_size
        w = 1.0 + self._w(d)
        return (w, self._w(d)) if self.arch.norm == "layernorm" else (w, None)

    def _norm(self, x: Any, weights: tuple[Any, Any]) -> Any:
        F = self.torch.nn.functional
        w, bias = weights
        d, eps = self.arch.hidden_size, self.arch.norm_eps
        if self.arch.norm == "layernorm":
            return F.layer_norm(x, (d,), w, bias, eps)
        if hasattr(F, "rms_norm"):
            return F.rms_norm(x, (d,), w, eps)
        xf = x.float()
        return (xf * self.torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(self.dtype) * w

    def _act(self, x: Any) -> Any:
        F = self.torch.nn.functional
        return {"silu": F.silu, "relu": F.relu}.get(
            self.arch.activation, lambda t: F.gelu(t, approximate="tanh")
        )(x)

    def _rotate(self, x: Any) -> Any:
        half = x.shape[-1] // 2
        return x * self.cos + self.torch.cat((-x[..., half:], x[..., :half]), dim=-1) * self.sin

    def _attend(self, q: Any, k: Any, v: Any) -> Any:
        torch, a = self.torch, self.arch
        F = torch.nn.functional
        if self.attention == "eager":
            if a.num_kv_heads != a.num_heads:  # Hugging Face `repeat_kv`
                rep = a.num_heads // a.num_kv_heads
                k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
            scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(a.head_dim))
            if self.mask is not None:
                scores = scores + self.mask
            return torch.matmul(torch.softmax(scores, dim=-1), v)
        from torch.nn.attention import SDPBackend, sdpa_kernel

        causal = a.causal and self.q_len > 1
        # Flash attention has no fp32 kernels; PyTorch's memory-efficient one is the fused fp32 choice.
        half = self.dtype in (torch.bfloat16, torch.float16)
        backend = SDPBackend.FLASH_ATTENTION if half else SDPBackend.EFFICIENT_ATTENTION
        with sdpa_kernel([backend]):
            if a.num_kv_heads == a.num_heads:
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            if self._native_gqa:
                try:
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
                except (TypeError, RuntimeError) as exc:  # torch < 2.5, or a backend without GQA
                    logger.info("no native GQA in SDPA (%s): expanding K/V", str(exc).splitlines()[0])
                    self._native_gqa = False
            rep = a.num_heads // a.num_kv_heads
            return F.scaled_dot_product_attention(
                q, k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1), is_causal=causal
            )

    def forward(self) -> Any:
        torch, a = self.torch, self.arch
        F = torch.nn.functional
        rf = torch.profiler.record_function
        b, sq, pre, root = self.batch, self.q_len, self._layer_prefix, a.name
        with rf(f"{root}/embed/tokens"):
            x = F.embedding(self.ids, self.tok_emb)  # [b, s, e]
        if self.proj_in is not None:
            with rf(f"{root}/embed/project_in"):
                x = F.linear(x, self.proj_in)
        extra = []
        if self.pos_emb is not None:
            with rf(f"{root}/embed/positions"):
                extra.append(F.embedding(self.pos_ids + (2 if a.model_type == "opt" else 0), self.pos_emb))
        if self.type_emb is not None:
            with rf(f"{root}/embed/token_types"):
                extra.append(F.embedding(self.type_ids, self.type_emb))
        for table in extra:
            with rf(f"{root}/embed/add"):
                x = x + table
        if self.embed_norm is not None:
            with rf(f"{root}/embed/norm"):
                x = self._norm(x, self.embed_norm)
        for layer in self.layers:
            x = self._attention_block(x, layer, pre, b, sq)
            x = self._mlp_block(x, layer, pre)
        if self.final_norm is not None:
            with rf(f"{root}/final_norm"):
                x = self._norm(x, self.final_norm)
        if self.proj_out is not None:
            with rf(f"{root}/project_out"):
                x = F.linear(x, self.proj_out)
        out = x
        if self.lm_head is not None:
            with rf(f"{root}/lm_head"):
                out = F.linear(x[:, -1, :], self.lm_head)  # [b, vocab]: last token of each sequence
        if self.pooler is not None:
            with rf(f"{root}/pooler/dense"):
                out = F.linear(x[:, 0, :], self.pooler[0], self.pooler[1])
            with rf(f"{root}/pooler/act"):
                out = torch.tanh(out)
        return out

    def _attention_block(self, x: Any, layer: dict[str, Any], pre: str, b: int, sq: int) -> Any:
        a, torch = self.arch, self.torch
        F, rf = torch.nn.functional, torch.profiler.record_function
        h = x
        if a.norm_position == "pre":
            with rf(f"{pre}/attn/norm"):
                h = self._norm(x, layer["attn_norm"])
        with rf(f"{pre}/attn/qkv_proj"):
            qkv = F.linear(h, layer["qkv"], layer["qkv_b"])  # [b, s, (h + 2kv) * hd]
        q, k, v = qkv.split([a.q_dim, a.kv_dim, a.kv_dim], dim=-1)
        q = q.view(b, sq, a.num_heads, a.head_dim).transpose(1, 2)
        k = k.view(b, sq, a.num_kv_heads, a.head_dim).transpose(1, 2)
        v = v.view(b, sq, a.num_kv_heads, a.head_dim).transpose(1, 2)
        if a.position_embedding == "rope":
            with rf(f"{pre}/attn/rotary"):
                q, k = self._rotate(q), self._rotate(k)
        if a.causal:
            with rf(f"{pre}/attn/kv_cache_write"):
                layer["k_cache"][:, :, self.kv_len - sq :].copy_(k)
                layer["v_cache"][:, :, self.kv_len - sq :].copy_(v)
            k, v = layer["k_cache"], layer["v_cache"]
        with rf(f"{pre}/attn/attention"):
            o = self._attend(q, k, v)  # [b, h, s, hd]
            o = o.transpose(1, 2).reshape(b, sq, a.q_dim)  # the layout copy counts as attention
        with rf(f"{pre}/attn/o_proj"):
            o = F.linear(o, layer["o"], layer["o_b"])
        with rf(f"{pre}/attn/residual_add"):
            x = x + o
        if a.norm_position == "post":
            with rf(f"{pre}/attn/norm"):
                x = self._norm(x, layer["attn_norm"])
        return x

    def _mlp_block(self, x: Any, layer: dict[str, Any], pre: str) -> Any:
        a, torch = self.arch, self.torch
        F, rf = torch.nn.functional, torch.profiler.record_function
        h = x
        if a.norm_position == "pre":
            with rf(f"{pre}/mlp/norm"):
                h = self._norm(x, layer["mlp_norm"])
        if a.gated_mlp:
            with rf(f"{pre}/mlp/gate_up_proj"):
                gu = F.linear(h, layer["up"], layer["up_b"])
            with rf(f"{pre}/mlp/act"):
                gate, up = gu.chunk(2, dim=-1)
                h = self._act(gate) * up
        else:
            with rf(f"{pre}/mlp/up_proj"):
                h = F.linear(h, layer["up"], layer["up_b"])
            with rf(f"{pre}/mlp/act"):
                h = self._act(h)
        with rf(f"{pre}/mlp/down_proj"):
            h = F.linear(h, layer["down"], layer["down_b"])
        with rf(f"{pre}/mlp/residual_add"):
            x = x + h
        if a.norm_position == "post":
            with rf(f"{pre}/mlp/norm"):
                x = self._norm(x, layer["mlp_norm"])
        return x

    # ---- ModelRunner interface
    def run(self, num_calls: int) -> int:
        with self.torch.inference_mode():
            for _ in range(num_calls):
                self.forward()
        self.torch.cuda.synchronize()
        return num_calls

    def profile(self, num_passes: int, now_s: Callable[[], float]) -> ProfiledRun:
        torch = self.torch
        from torch.profiler import ProfilerActivity, profile, record_function

        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            torch.cuda.synchronize()
            marker_host_s = now_s()
            with record_function(SYNC_MARKER):
                pass
            t0 = now_s()
            self.run(num_passes)
            t1 = now_s()
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "trace.json"
            prof.export_chrome_trace(str(path))
            trace = json.loads(path.read_text())
        return ProfiledRun(trace=trace, marker_host_s=marker_host_s, t0_s=t0, t1_s=t1, num_passes=num_passes)

    def release(self) -> None:
        self.layers = []
        self.torch.backends.cuda.matmul.allow_tf32 = self._previous_tf32
        self.torch.cuda.empty_cache()


def build_torch_llm(
    arch: LlmArch,
    *,
    batch: int,
    seq_len: int,
    phase: str = "prefill",
    precision: str = "bf16",
    attention: str = "flash",
    device_index: int = 0,
    seed: int = 0,
) -> TorchLlm:
    """A TorchLlm for `arch` (raises MeasurementError without torch or a GPU, ConfigError on bad options)."""
    return TorchLlm(
        arch,
        batch=batch,
        seq_len=seq_len,
        phase=phase,
        precision=precision,
        attention=attention,
        device_index=device_index,
        seed=seed,
    )

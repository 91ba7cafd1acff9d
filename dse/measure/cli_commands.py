"""The functions behind `dse measure kernels` and `dse measure model` (the CLI only parses flags and prints).

    measure_kernels_command("gemm", [1410, 1980], Path("h100.parquet"))    # locked clocks (root)
    measure_kernels_command("all", None, Path("h100.parquet"), no_lock=True)  # observe the GPU's own clocks
    measure_kernels_command("gemm", None, Path("dry.parquet"), dry_run=True)  # no GPU: synthetic replay
    measure_model_command("llama-3.1-8b", 1, 2048, Path("runs/llama8b-b1-s2048"))

Clocks: `--clocks-mhz` locks each listed SM clock in turn (snapped to the nearest supported one); without
it the highest supported clock is locked; `--no-lock` locks nothing and records the clocks the GPU picks
(it cannot be combined with `--clocks-mhz`). Locking needs root; the error says so.

Without an NVIDIA GPU/driver, or without PyTorch, these raise `MeasurementError` with a one-line message
(the CLI prints it and exits 2). Outputs are never overwritten: an existing file or run folder is an error.
"""

from __future__ import annotations

import json
import logging
import math
import os
import tempfile
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from dse.calibrate.data.samples import (
    KernelSample,
    check_sample_values,
    is_synthetic,
    read_samples,
    samples_frame,
    write_samples,
)
from dse.config.jsonio import with_nulls
from dse.errors import ConfigError, MeasurementError
from dse.measure.harness import MeasureProtocol, measure_ops
from dse.measure.suites import build_suite
from dse.units import MHZ

if TYPE_CHECKING:
    from dse.workload.llm import LlmArch
    from dse.workload.ops import Op

logger = logging.getLogger(__name__)

DRY_RUN_GPU = "h100-sxm"
# The `source` of rows a dry run makes up (their `energy_method` is `synthetic`); rows it replays from a
# recorded file are `replay:<file>` (`energy_method` `replay`).
SYNTHETIC_SOURCE = "dry-run:synthetic"


MAX_CLOCK_MHZ = 10_000.0  # past any GPU's SM clock: a typo (a real GPU snaps the rest to its supported set)


def _resolve_clocks(clocks_mhz: Sequence[float] | None, no_lock: bool) -> list[float | None] | None:
    """Requested clocks in Hz; [None] for --no-lock; None for "the highest supported" (resolved later)."""
    if no_lock:
        if clocks_mhz:
            raise ConfigError(
                "--no-lock records the clocks the GPU picks; it cannot be combined with --clocks-mhz"
            )
        return [None]
    if not clocks_mhz:
        return None
    if not all(math.isfinite(c) and 1 <= c <= MAX_CLOCK_MHZ for c in clocks_mhz):  # NaN / inf were samples
        raise ConfigError(f"--clocks-mhz must be MHz in [1, {MAX_CLOCK_MHZ:g}], got {list(clocks_mhz)}")
    return [float(c) * MHZ for c in clocks_mhz]


def _snap_clocks(gpu: Any, clocks: list[float | None] | None) -> list[float | None]:
    if clocks is not None and all(c is None for c in clocks):
        return clocks  # --no-lock: nothing to look up (some GPUs cannot list their clocks)
    supported = gpu.supported_sm_clocks_hz()
    if clocks is None:
        return [max(supported)] if supported else [None]
    from dse.measure.nvml import nearest_clock_hz

    out: list[float | None] = []
    for clock in clocks:
        if clock is None:
            out.append(None)
            continue
        snapped = nearest_clock_hz(clock, supported)
        if snapped != clock:
            logger.warning("%.0f MHz is not a supported SM clock; using %.0f MHz", clock / MHZ, snapped / MHZ)
        out.append(snapped)
    return out


def _check_new(path: Path) -> None:
    """--out must be new and its folder writable, checked before measuring: a measurement that cannot be
    written is lost (a read-only disk found only at the end cost the whole run)."""
    if path.exists():
        raise ConfigError(f"{path} exists; measurements are never overwritten: choose a new --out")
    folder = path.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".dse-write-test-"):
            pass
    except OSError as exc:
        raise ConfigError(f"--out {path}: cannot write in {folder} ({exc.strerror or exc})") from None


def _cuda_index(gpu_index: int) -> int:
    """NVML index of CUDA device `gpu_index` (NVML ignores CUDA_VISIBLE_DEVICES; torch does not)."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES", "").strip()
    if not visible:
        return gpu_index
    entries = [v.strip() for v in visible.split(",") if v.strip()]
    if gpu_index < len(entries) and entries[gpu_index].isdigit():
        return int(entries[gpu_index])
    raise MeasurementError(
        f"CUDA_VISIBLE_DEVICES={visible!r}: cannot map CUDA device {gpu_index} to an NVML index (use indices)"
    )


def _open_gpu_and_torch(gpu_index: int) -> Any:
    """Open the GPU through NVML, then make sure torch is importable: both failures are one-line errors."""
    from dse.measure.kernels import import_torch
    from dse.measure.nvml import NvmlGpu

    gpu = NvmlGpu.open(_cuda_index(gpu_index))
    try:
        import_torch()
    except MeasurementError:
        gpu.close()
        raise
    return gpu


def _write_env(path: Path, gpu: Any, extra: dict[str, Any]) -> None:
    from dse.measure.env import collect_env

    env = {**collect_env(gpu), **extra}
    # Strict JSON: a value the probe does not know (a replay's memory clock, NaN) is null, not `NaN`.
    plain = with_nulls(json.loads(json.dumps(env, default=str)))
    path.write_text(json.dumps(plain, indent=2, allow_nan=False) + "\n")


def _dry_run_gpu(gpu_name: str | None, replay: Path | None) -> tuple[Any, str, list[KernelSample]]:
    from dse.hardware.catalog import load_gpu
    from dse.measure.replay import ReplayGpu, synthetic_fallback

    spec = load_gpu(gpu_name or DRY_RUN_GPU)
    recorded = read_samples(replay) if replay is not None else []
    _check_replay_gpu(replay, recorded, spec)
    if replay is not None and recorded:  # held to what calibrate and validate accept: no NaN, no -300 W
        frame = samples_frame(recorded)
        frame["file"] = replay.name
        frame["row"] = range(1, len(frame) + 1)
        clocks = (spec.clocks.sm_clock_min_hz, spec.clocks.sm_clock_max_hz)
        check_sample_values(frame, spec.power.tdp_w, clocks)  # the rows are spec's: _check_replay_gpu
    gpu = ReplayGpu(
        recorded,
        name=spec.name,
        idle_power_w=lambda f: float(spec.power.idle_power_w.at(f)),
        power_limit_w=spec.power.tdp_w,
        default_sm_clock_hz=spec.clocks.sm_clock_max_hz,
        fallback=synthetic_fallback(spec),
    )
    return gpu, spec.name, recorded


def _check_replay_gpu(replay: Path | None, recorded: Sequence[KernelSample], spec: Any) -> None:
    """Recorded rows of the GPU the dry run pretends to be: its rows are labelled that GPU and fitted, so
    another GPU's rows came out as, say, H100 measurements that `calibrate --gpu h100-sxm` took."""
    from dse.hardware.catalog import gpu_matches

    foreign = sorted({s.gpu for s in recorded if not gpu_matches(s.gpu, spec)})
    if foreign:
        raise ConfigError(
            f"--replay {replay}: samples of {', '.join(repr(g) for g in foreign)}, but the dry run "
            f"pretends to be {spec.name}; replay samples measured on {spec.name}"
        )


def measure_kernels_command(
    suite: str,
    clocks_mhz: Sequence[float] | None,
    out: Path,
    no_lock: bool = False,
    dry_run: bool = False,
    *,
    gpu_index: int = 0,
    replay: Path | None = None,
    gpu_name: str | None = None,
    protocol: MeasureProtocol | None = None,
) -> Path:
    """Measure a kernel suite at a list of clocks and write the samples (parquet or CSV by suffix).

    Args:
        suite: gemm, attention, softmax, norm, elementwise, all (or smoke).
        clocks_mhz: SM clocks to lock, MHz; None: the highest supported clock.
        out: samples file (`.parquet` or `.csv`); `<out>.env.json` records the machine.
        no_lock: lock nothing, record the clocks the GPU runs at.
        dry_run: no GPU: replay `replay` samples where they match, synthetic values elsewhere (marked by
            `energy_method` `replay` / `synthetic`: `_marked`); exercises the whole pipeline in seconds.
        gpu_index: CUDA device index.
        replay: recorded samples file for the dry run.
        gpu_name: catalog GPU the dry run pretends to be (default h100-sxm).
        protocol: measurement protocol (default `MeasureProtocol()`).

    Returns:
        The samples file written.
    """
    out = Path(out)
    if out.suffix not in (".parquet", ".csv"):
        raise ConfigError(f"--out {out}: samples are written as .parquet or .csv")
    _check_new(out)
    ops = build_suite(suite)
    requested = _resolve_clocks(clocks_mhz, no_lock)
    protocol = protocol or MeasureProtocol()
    env_path = out.with_name(out.name + ".env.json")
    if dry_run:
        _measure_kernels_dry_run(
            ops, requested, protocol, out, env_path, suite=suite, gpu_name=gpu_name, replay=replay
        )
        return out
    from dse.hardware.catalog import catalog_gpu_name
    from dse.measure.kernels import TorchLauncher

    gpu = _open_gpu_and_torch(gpu_index)
    samples: list[KernelSample] = []
    try:
        clocks = _snap_clocks(gpu, requested)
        launcher = TorchLauncher(gpu_index)
        label = catalog_gpu_name(gpu.name) or gpu.name
        samples = measure_ops(
            ops,
            clocks,
            protocol,
            gpu,
            launcher,
            gpu_label=label,
            source=f"dse-measure:{suite}",
            on_sample=lambda s: logger.info(
                "%s @ %s: %.3g s, %.1f W", s.name, s.sm_clock_hz, s.latency_s, s.avg_power_w
            ),
        )
    finally:
        if samples:  # keep what was measured, also when interrupted
            write_samples(out, samples)
            _write_env(env_path, gpu, {"suite": suite, "no_lock": no_lock})
        gpu.close()
    return out


def _measure_kernels_dry_run(
    ops: list[Op],
    requested: list[float | None] | None,
    protocol: MeasureProtocol,
    out: Path,
    env_path: Path,
    *,
    suite: str,
    gpu_name: str | None,
    replay: Path | None,
) -> None:
    gpu, label, _ = _dry_run_gpu(gpu_name, replay)
    _check_dry_run_clocks(requested, gpu_name or DRY_RUN_GPU)
    clocks = requested if requested is not None else [gpu.sm_clock_hz()]
    samples = measure_ops(
        ops, clocks, protocol, gpu, gpu.launcher(), gpu_label=label, source=SYNTHETIC_SOURCE
    )
    write_samples(out, [_marked(s, gpu.recorded_for(s), replay) for s in samples])
    _write_env(env_path, gpu, {"dry_run": True, "suite": suite})


def _marked(sample: KernelSample, recorded: Sequence[KernelSample], replay: Path | None) -> KernelSample:
    """A dry run's row marked as what it is: a copy of measured rows of the replayed file, or made up
    (`dse calibrate` refuses those). Both were labelled with the file's name, and calibrate fitted the
    made-up rows as measured; a replayed row that was itself made up stays made up."""
    if replay is not None and recorded and not any(is_synthetic(r) for r in recorded):
        return replace(sample, source=f"replay:{replay.name}", energy_method="replay")
    return replace(sample, source=SYNTHETIC_SOURCE, energy_method="synthetic")


def _check_dry_run_clocks(requested: list[float | None] | None, gpu_name: str) -> None:
    """A dry run's --clocks-mhz within the replayed GPU's SM clock range: a real run snaps each to the
    nearest clock the GPU supports, a dry run would record samples at clocks no GPU of its kind runs."""
    from dse.hardware.catalog import load_gpu

    spec = load_gpu(gpu_name)
    lo, hi = spec.clocks.sm_clock_min_hz, spec.clocks.sm_clock_max_hz
    outside = [c for c in requested or () if c is not None and not lo <= c <= hi]
    if outside:
        raise ConfigError(
            f"--clocks-mhz {outside[0] / MHZ:g} is outside the SM clock range of {spec.name}: "
            f"{lo / MHZ:g}-{hi / MHZ:g} MHz (a dry run replays that GPU)"
        )


def measure_model_command(
    model: str,
    batch: int,
    seq_len: int,
    out: Path,
    no_lock: bool = False,
    *,
    phase: str = "prefill",
    precision: str = "bf16",
    attention: str = "flash",
    clock_mhz: float | None = None,
    gpu_index: int = 0,
    dry_run: bool = False,
    gpu_name: str | None = None,
    protocol: MeasureProtocol | None = None,
) -> Path:
    """Measure one model end to end with a per-op energy breakdown; writes a run folder and returns it.

    Folder contents: `samples.parquet` (one `kind="model"` row, per forward pass), `breakdown.json`
    (`by_op` / `by_module` in the serving-prediction layout, J per pass), `power_trace.parquet` and
    `kernels.parquet` (the profiled window's power samples and kernel timeline, host clock), `env.json`.

    Args:
        model: catalog model name or config.json path (`dse models`).
        batch, seq_len: sequences and tokens per sequence (decode: KV-cache length).
        out: run folder (must not exist yet).
        no_lock: lock nothing, record the clocks the GPU runs at.
        phase: prefill or decode.
        precision, attention: as in `dse workload show` (fp8 is not supported for measured runs).
        clock_mhz: SM clock to lock (default: the highest supported).
        gpu_index: CUDA device index.
        dry_run: no GPU: the workload graph replayed on a synthetic ReplayGpu.
        gpu_name: catalog GPU the dry run pretends to be.
        protocol: measurement protocol.
    """
    from dse.workload.models import load_model_config
    from dse.workload.vision import is_vision_model

    if is_vision_model(model):  # the harness builds LLM layers in torch; a CNN / ViT has no builder there
        raise ConfigError(f"measure model takes an LLM; '{model}' is a vision model (see `dse models`)")
    out = Path(out)
    _check_new(out)
    arch = load_model_config(model)
    requested = _resolve_clocks([clock_mhz] if clock_mhz else None, no_lock)
    protocol = protocol or MeasureProtocol()
    if dry_run:
        _measure_model_dry_run(
            arch,
            out,
            requested,
            protocol,
            batch=batch,
            seq_len=seq_len,
            phase=phase,
            precision=precision,
            attention=attention,
            gpu_name=gpu_name,
        )
    else:
        _measure_model_on_gpu(
            arch,
            out,
            requested,
            protocol,
            batch=batch,
            seq_len=seq_len,
            phase=phase,
            precision=precision,
            attention=attention,
            gpu_index=gpu_index,
            no_lock=no_lock,
        )
    return out


def _measure_model_dry_run(
    arch: LlmArch,
    out: Path,
    requested: list[float | None] | None,
    protocol: MeasureProtocol,
    *,
    batch: int,
    seq_len: int,
    phase: str,
    precision: str,
    attention: str,
    gpu_name: str | None,
) -> None:
    """The workload graph replayed on a synthetic ReplayGpu, written like a measured run."""
    from dse.measure.model_run import measure_model
    from dse.measure.replay import ReplayModelRunner
    from dse.workload.llm import build_decode_graph, build_prefill_graph

    gpu, label, _ = _dry_run_gpu(gpu_name, None)
    if phase == "decode":
        graph = build_decode_graph(
            arch, batch=batch, context_len=seq_len, precision=precision, attention=attention
        )
    elif phase == "prefill":
        graph = build_prefill_graph(
            arch, batch=batch, seq_len=seq_len, precision=precision, attention=attention
        )
    else:
        raise ConfigError(f"phase '{phase}' is not prefill or decode")
    runner = ReplayModelRunner(gpu, graph, name=arch.name)
    clock = requested[0] if requested is not None else gpu.sm_clock_hz()
    result = measure_model(
        runner, gpu, protocol, sm_clock_hz=clock, gpu_label=label, phase=phase, source=SYNTHETIC_SOURCE
    )
    _write_run(out, replace(result, sample=replace(result.sample, energy_method="synthetic")))
    _write_env(out / "env.json", gpu, {"dry_run": True, "model": arch.name})


def _measure_model_on_gpu(
    arch: LlmArch,
    out: Path,
    requested: list[float | None] | None,
    protocol: MeasureProtocol,
    *,
    batch: int,
    seq_len: int,
    phase: str,
    precision: str,
    attention: str,
    gpu_index: int,
    no_lock: bool,
) -> None:
    from dse.hardware.catalog import catalog_gpu_name
    from dse.measure.model_run import measure_model
    from dse.measure.torch_llm import build_torch_llm

    gpu = _open_gpu_and_torch(gpu_index)
    try:
        clock = _snap_clocks(gpu, requested)[0]
        runner = build_torch_llm(
            arch,
            batch=batch,
            seq_len=seq_len,
            phase=phase,
            precision=precision,
            attention=attention,
            device_index=gpu_index,
        )
        try:
            result = measure_model(
                runner,
                gpu,
                protocol,
                sm_clock_hz=clock,
                gpu_label=catalog_gpu_name(gpu.name) or gpu.name,
                phase=phase,
            )
        finally:
            runner.release()
        _write_run(out, result)
        _write_env(out / "env.json", gpu, {"model": arch.name, "no_lock": no_lock})
    finally:
        gpu.close()


def _write_run(out: Path, result: Any) -> None:
    out.mkdir(parents=True, exist_ok=False)
    write_samples(out / "samples.parquet", [result.sample])
    (out / "breakdown.json").write_text(json.dumps(result.breakdown, indent=2, default=float) + "\n")
    pd.DataFrame(result.power_trace.rows()).to_parquet(out / "power_trace.parquet", index=False)
    kernels = pd.DataFrame(
        [
            {"name": k.name, "op": k.op, "start_s": k.start_s, "end_s": k.end_s, "stream": k.stream}
            for k in result.timeline.kernels
        ],
        columns=["name", "op", "start_s", "end_s", "stream"],
    )
    kernels.to_parquet(out / "kernels.parquet", index=False)

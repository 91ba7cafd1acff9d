"""What batching design points into one kernel-model call per family would save: a flash search point's
first-pass family calls, made once per point and once for B points stacked, where the B points share a GPU
and differ in their clock (the only per-row hardware input the families take today).

    .venv/bin/python benchmarks/batch_gain.py [--batch 4 16 64] [--repeats 5]

Per family: CPU ms per point of B calls of the point's rows, each at one clock, against one call of the B
stacked copies at per-row clocks (choices made at each row's own clock, no memo), and whether the stacked
call's latencies equal the separate calls' (the families are elementwise in their rows). The points of
`studies/llm_serving.yaml` differ in their GPU (DRAM bandwidth, SMs, Tensor-Core rate), so batching them
needs those as per-row inputs first (the GEMM model's `gemm_arrays` among them); this measures the gain
that would buy. `--across-gpus` measures the GEMM family where it takes per-row GPU values
(`dse.perf.gpu_rows`): the first-pass GEMM calls of B flash points of the study, each on its own GPU and
clock, against one call of their stacked rows (every output array checked equal).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from same_numbers import _study_points  # noqa: E402


def first_pass_calls() -> dict[str, tuple[Any, ...]]:
    """Each family's first call in a flash point of the study: (inputs, gpu, clocks, coeffs, keywords)."""
    from dse.perf import multiclock
    from dse.search.objective import evaluate_point

    calls: dict[str, tuple[Any, ...]] = {}
    family_call = multiclock._family_call

    def grab(key: str, inputs: Any, gpu: Any, fs: Any, coeffs: Any, **kw: Any) -> Any:
        calls.setdefault(key, (inputs, gpu, fs, coeffs, kw))
        return family_call(key, inputs, gpu, fs, coeffs, **kw)

    points, ctx = _study_points(20)
    multiclock._family_call = grab
    try:
        evaluate_point(next(p for p in points if p["attention"] == "flash"), ctx)
    finally:
        multiclock._family_call = family_call
    return calls


def _stacked(inputs: dict[str, Any], n: int, copies: int) -> dict[str, Any]:
    def stack(v: Any) -> Any:
        if isinstance(v, tuple) and len(v) == n:
            return v * copies
        if isinstance(v, np.ndarray) and v.shape[:1] == (n,):
            return np.concatenate([v] * copies)
        return v

    return {k: stack(v) for k, v in inputs.items()}


def compare(key: str, call: tuple[Any, ...], batch: int, repeats: int) -> tuple[float, float, bool]:
    """(separate, stacked) CPU seconds per point and whether their latencies are equal."""
    from dse.perf import multiclock

    inputs, gpu, fs, coeffs, kw = call
    n = len(fs)
    kw = {**kw, "choice_memo": None, "choice_clock_hz": None}
    clocks = np.linspace(gpu.clocks.sm_clock_min_hz, gpu.clocks.sm_clock_max_hz, batch)
    big, big_fs = _stacked(inputs, n, batch), np.repeat(clocks, n)

    def separate() -> list[Any]:
        return [multiclock._family_call(key, inputs, gpu, np.full(n, c), coeffs, **kw) for c in clocks]

    def stacked() -> Any:
        return multiclock._family_call(key, big, gpu, big_fs, coeffs, **kw)

    equal = np.array_equal(
        np.concatenate([out["latency_s"] for out in separate()]), stacked()["latency_s"], equal_nan=True
    )
    t_sep, t_big = [], []
    for _ in range(repeats):  # alternated
        t0 = time.process_time()
        separate()
        t_sep.append(time.process_time() - t0)
        t0 = time.process_time()
        stacked()
        t_big.append(time.process_time() - t0)
    return min(t_sep) / batch, min(t_big) / batch, equal


def gemm_calls(count: int) -> list[tuple[Any, ...]]:
    """The first GEMM call of each of `count` flash points of the study (each on its own GPU)."""
    from dse.perf import multiclock
    from dse.search.objective import evaluate_point

    calls: list[tuple[Any, ...]] = []
    family_call = multiclock._family_call

    def grab(key: str, inputs: Any, gpu: Any, fs: Any, coeffs: Any, **kw: Any) -> Any:
        if key == "gemm" and len(calls) < wanted:
            calls.append((inputs, gpu, fs, coeffs, kw))
        return family_call(key, inputs, gpu, fs, coeffs, **kw)

    points, ctx = _study_points(8 * count)
    multiclock._family_call = grab
    try:
        for params in (p for p in points if p["attention"] == "flash"):
            wanted = len(calls) + 1  # the point's first call only
            evaluate_point(params, ctx)
            if len(calls) == count:
                break
    finally:
        multiclock._family_call = family_call
    return calls


def compare_across_gpus(calls: list[tuple[Any, ...]], repeats: int) -> tuple[float, float, bool]:
    """(separate, stacked) CPU seconds per point of the GEMM calls `calls` and whether every output array
    of the stacked call equals the separate calls'."""
    from dse.perf import gemm
    from dse.perf.gpu_rows import GpuRows

    def sep_call(call: tuple[Any, ...]) -> dict[str, Any]:
        inputs, gpu, fs, coeffs, kw = call
        choice = kw["choice_clock_hz"]
        return gemm.gemm_arrays(**inputs, gpu=gpu, sm_clock_hz=fs, coeffs=coeffs, choice_clock_hz=choice,
                                choice_memo={})  # fmt: skip

    def joined(key: str) -> Any:
        parts = [c[0][key] for c in calls]
        return sum(parts, ()) if isinstance(parts[0], tuple) else np.concatenate(parts)

    gpus = [c[1] for c in calls]
    index = np.concatenate([np.full(len(c[2]), i) for i, c in enumerate(calls)])
    fs = np.concatenate([c[2] for c in calls])
    big = {key: joined(key) for key in calls[0][0]}
    choice = np.concatenate([np.broadcast_to(c[4]["choice_clock_hz"], len(c[2])) for c in calls])

    def stacked() -> dict[str, Any]:
        rows = GpuRows.of(gpus[0], gpus, index)
        return gemm.gemm_arrays(**big, gpu=gpus[0], sm_clock_hz=fs, coeffs=calls[0][3], gpu_rows=rows,
                                choice_clock_hz=choice, choice_memo={})  # fmt: skip

    sep, one = [sep_call(c) for c in calls], stacked()
    keys = ("latency_s", "util", "dram_bytes", "l2_bytes", "tile_idx", "split", "group")
    equal = all(
        np.array_equal(np.concatenate([np.asarray(o[k]) for o in sep], axis=-1), one[k]) for k in keys
    )
    t_sep, t_big = [], []
    for _ in range(repeats):  # alternated
        t0 = time.process_time()
        for c in calls:
            sep_call(c)
        t_sep.append(time.process_time() - t0)
        t0 = time.process_time()
        stacked()
        t_big.append(time.process_time() - t0)
    return min(t_sep) / len(calls), min(t_big) / len(calls), equal


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--batch", type=int, nargs="+", default=[4, 16, 64])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--across-gpus", action="store_true", help="GEMM calls of points on distinct GPUs")
    args = parser.parse_args()
    if args.across_gpus:
        for b in args.batch:
            sep, big, equal = compare_across_gpus(gemm_calls(b), args.repeats)
            print(f"gemm, {b:3d} points on their own GPUs: {sep * 1e3:6.3f} -> {big * 1e3:6.3f} ms a point"
                  f"{'' if equal else '  (outputs differ)'}")  # fmt: skip
        return 0
    calls = first_pass_calls()
    totals = {b: [0.0, 0.0] for b in args.batch}
    for key, call in calls.items():
        for b in args.batch:
            sep, big, equal = compare(key, call, b, args.repeats)
            totals[b][0] += sep
            totals[b][1] += big
            rows = len(call[2])
            print(f"{key:17s} {rows:4d} rows x {b:3d} points: {sep * 1e3:6.3f} -> {big * 1e3:6.3f} ms a point"
                  f"{'' if equal else '  (latencies differ)'}")  # fmt: skip
    for b, (sep, big) in totals.items():
        print(f"all families, {b:3d} points: {sep * 1e3:6.3f} -> {big * 1e3:6.3f} ms a point")
    return 0


if __name__ == "__main__":
    sys.exit(main())

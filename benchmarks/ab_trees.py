"""In-process A/B of two source trees: one worker process per tree, alternated block by block.

    .venv/bin/python benchmarks/ab_trees.py BASE_TREE [NEW_TREE] [--blocks 8] [--units eager flash ...]

The shared 2-core machine's speed drifts by 2x within minutes, so separate runs of two trees do not
compare. This starts a worker on each tree (`PYTHONPATH`; NEW_TREE defaults to this checkout), and asks
them in turn, block after block (the order flipped every block), for one block of each unit; each worker
reports the CPU time (`time.process_time`) per call of its block. Printed: the median and minimum block of
each tree and their ratios (new / base). Units:

- `eager`, `flash`: random points of `studies/llm_serving.yaml` (the seeded draw of `same_numbers.py`)
  with eager or flash attention, `evaluate_point` each (30 a block);
- `eager_qk`, `eager_pv`: eager attention's batched decode GEMMs alone (`gemm.gemm_arrays` on the 256-row
  calls of those eager points, a fresh choice memo each, 20 a block);
- `predict`: `dse bench`'s static predict (Llama-3.1-8B on H100, batch 32, 1024 in / 256 out; 10 a block);
- `point`: `dse bench`'s `evaluate_point` (GDDR7 H100 at 1500 MHz; 10 a block).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
UNITS = ("eager", "flash", "eager_qk", "eager_pv", "predict", "point")


def _units() -> dict[str, Callable[[], int]]:
    """Each unit's block (it returns its number of calls), built in the worker's tree."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    from same_numbers import _study_points

    from dse.hardware.catalog import load_gpu
    from dse.perf import attention_eager, gemm
    from dse.search.objective import EvalContext, evaluate_point
    from dse.serving.static import ServingRequest, predict_serving
    from dse.workload.models import load_model_config

    drawn, ctx = _study_points(480)
    points = {kind: [p for p in drawn if p["attention"] == kind][:30] for kind in ("eager", "flash")}
    calls: list[dict[str, Any]] = []

    class _Capture:  # eager attention's reference to gemm, keeping its gemm_arrays calls
        def __getattr__(self, name: str) -> Any:
            return getattr(gemm, name)

        @staticmethod
        def gemm_arrays(**kw: Any) -> Any:
            calls.append(kw)
            return gemm.gemm_arrays(**kw)

    attention_eager.gemm = _Capture()  # type: ignore[assignment]
    for p in points["eager"]:
        evaluate_point(p, ctx)
    attention_eager.gemm = gemm
    big = [c for c in calls if len(c["m"]) >= 128]
    qk = [c for c in big if c["k"][-1] == c["k"][-2]][:20]  # QK^T: k is the head dim on every row
    pv = [c for c in big if c["k"][-1] != c["k"][-2]][:20]

    def gemms(block: list[dict[str, Any]]) -> int:
        for c in block:
            gemm.gemm_arrays(**{**c, "choice_memo": {}})
        return len(block)

    def evaluate(block: list[dict[str, Any]]) -> int:
        for p in block:
            evaluate_point(p, ctx)
        return len(block)

    def repeat(fn: Callable[[], Any], n: int = 10) -> int:
        for _ in range(n):
            fn()
        return n

    # `dse bench`'s cases (`dse.bench.bench_serving_predict`, `bench_search_point`)
    arch, h100 = load_model_config("llama-3.1-8b"), load_gpu("h100-sxm")
    request = ServingRequest(batch=32, input_tokens=1024, output_tokens=256)
    bench_ctx = EvalContext(batch=32, input_tokens=1024, output_tokens=256)
    gddr7 = {"gpu.memory.technology": "gddr7", "gpu.memory.bus_width_bits": 512, "sm_clock_mhz": 1500}

    return {
        "eager": lambda: evaluate(points["eager"]),
        "flash": lambda: evaluate(points["flash"]),
        "eager_qk": lambda: gemms(qk),
        "eager_pv": lambda: gemms(pv),
        "predict": lambda: repeat(lambda: predict_serving(arch, h100, request)),
        "point": lambda: repeat(lambda: evaluate_point(gddr7, bench_ctx)),
    }


def worker() -> int:
    """Answer unit names on stdin with the CPU ms per call of one block of that unit."""
    units = _units()
    for unit in units.values():  # warm-up: graphs, op tables, coefficient files
        unit()
    print("ready", flush=True)
    for line in sys.stdin:
        t0 = time.process_time()
        n = units[line.strip()]()
        print(json.dumps((time.process_time() - t0) / n * 1e3), flush=True)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("base", type=Path, help="the base tree (PYTHONPATH of its worker)")
    parser.add_argument("new", type=Path, nargs="?", default=ROOT, help="the new tree (default: this one)")
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--units", nargs="+", choices=UNITS, default=list(UNITS))
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker()
    trees = {"base": args.base.resolve(), "new": args.new.resolve()}
    procs = {
        name: subprocess.Popen(
            [sys.executable, __file__, str(tree), "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env={**os.environ, "PYTHONPATH": str(tree)},
            cwd=tree,
        )
        for name, tree in trees.items()
    }
    for name, proc in procs.items():
        assert proc.stdin is not None and proc.stdout is not None
        if proc.stdout.readline().strip() != "ready":
            sys.exit(f"the {name} worker ({trees[name]}) did not start")
    ms: dict[str, dict[str, list[float]]] = {name: {u: [] for u in args.units} for name in trees}
    for block in range(args.blocks):
        order = list(trees) if block % 2 == 0 else list(trees)[::-1]
        for unit in args.units:
            for name in order:
                proc = procs[name]
                assert proc.stdin is not None and proc.stdout is not None
                proc.stdin.write(unit + "\n")
                proc.stdin.flush()
                ms[name][unit].append(json.loads(proc.stdout.readline()))
    for proc in procs.values():
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait()
    print(
        f"CPU ms per call, median / minimum of {args.blocks} blocks; base {trees['base']}, new {trees['new']}"
    )
    print(f"{'unit':10s} {'base':>17s} {'new':>17s} {'new / base':>14s}")
    for unit in args.units:
        b, n = ms["base"][unit], ms["new"][unit]
        mb, mn, lo_b, lo_n = statistics.median(b), statistics.median(n), min(b), min(n)
        print(
            f"{unit:10s} {mb:8.3f} / {lo_b:6.3f} {mn:8.3f} / {lo_n:6.3f} {mn / mb:6.3f} / {lo_n / lo_b:.3f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())

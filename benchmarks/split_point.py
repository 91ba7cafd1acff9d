"""Where a search point's CPU time goes: each kernel family's calls, and everything around them.

    .venv/bin/python benchmarks/split_point.py [--points 60] [--repeats 3]

Random points of `studies/llm_serving.yaml` (the seeded draw of `benchmarks/same_numbers.py`), flash and
eager attention apart. Per family (`dse.perf.multiclock`'s calls; the GEMMs inside eager attention also
as `gemm (eager)`, whose time is inside `attention_eager`'s): CPU ms, calls and rows per point, and the
cost of the family's first call cut to one row (about its fixed cost). "outside the families": the same
points with every family call answered from a memo of its own earlier result, so what remains is the rest
of a point (GPU build, power-cap search bookkeeping, energies, phases, breakdowns, metrics, cost). The three
runs alternate, `--repeats` rounds; CPU time (`time.process_time`), minimum over the rounds. The timers
add a little to the families' times; on a shared machine read the shares more than the milliseconds.
"""

from __future__ import annotations

import argparse
import collections
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from same_numbers import _study_points  # noqa: E402


@dataclass
class _Tally:
    """Per family: CPU seconds, calls and rows."""

    spent: collections.defaultdict[str, float] = field(default_factory=lambda: collections.defaultdict(float))
    calls: collections.Counter[str] = field(default_factory=collections.Counter)
    rows: collections.Counter[str] = field(default_factory=collections.Counter)

    def add(self, key: str, spent_s: float, rows: int) -> None:
        self.spent[key] += spent_s
        self.calls[key] += 1
        self.rows[key] += rows


@contextmanager
def _family_timer(tally: _Tally, first: dict[str, Any]) -> Iterator[None]:
    """Time `multiclock._family_call` by family and `gemm.gemm_arrays` called from eager attention;
    `first`: each family's first call's arguments."""
    from dse.perf import attention_eager, multiclock

    family_call, gemm_mod = multiclock._family_call, attention_eager.gemm
    gemm_arrays = gemm_mod.gemm_arrays

    def timed_family(key: str, inputs: Any, gpu: Any, fs: Any, *args: Any, **kw: Any) -> Any:
        first.setdefault(key, (inputs, gpu, fs, args, kw))
        t0 = time.process_time()
        out = family_call(key, inputs, gpu, fs, *args, **kw)
        tally.add(key, time.process_time() - t0, len(fs))
        return out

    class _Gemm:  # eager attention's module reference to gemm, with a timed gemm_arrays
        def __getattr__(self, name: str) -> Any:
            return getattr(gemm_mod, name)

        @staticmethod
        def gemm_arrays(**kw: Any) -> Any:
            t0 = time.process_time()
            out = gemm_arrays(**kw)
            tally.add("gemm (eager)", time.process_time() - t0, len(kw["m"]))
            return out

    multiclock._family_call = timed_family
    attention_eager.gemm = _Gemm()  # type: ignore[assignment]
    try:
        yield
    finally:
        multiclock._family_call = family_call
        attention_eager.gemm = gemm_mod


@contextmanager
def _memoized_families() -> Iterator[None]:
    """Family calls answered from a memo of their first result (keyed by family, clocks and inputs)."""
    from dse.perf import multiclock

    family_call = multiclock._family_call
    memo: dict[Any, Any] = {}

    def cached(key: str, inputs: Any, gpu: Any, fs: Any, coeffs: Any, **kw: Any) -> Any:
        # The GPU by value (points on different GPUs share the per-model op tables, so the inputs' ids alone
        # mixed their results up); the inputs are kept in the memo so that their ids are never reused.
        k = (
            key,
            gpu.model_dump_json(),
            fs.tobytes(),
            tuple(map(id, inputs.values())),
            kw.get("choice_clock_hz"),
        )
        if k not in memo:
            memo[k] = (family_call(key, inputs, gpu, fs, coeffs, **kw), inputs)
        return memo[k][0]

    multiclock._family_call = cached
    try:
        yield
    finally:
        multiclock._family_call = family_call


def _one_row_s(key: str, call: tuple[Any, ...], repeats: int) -> float:
    """CPU seconds of family `key`'s call `call` cut to its first row, the choice memo left out."""
    from dse.perf import multiclock

    inputs, gpu, fs, args, kw = call

    def row(v: Any) -> Any:
        return v[:1] if isinstance(v, tuple | np.ndarray) and len(v) == len(fs) else v

    one = {k: row(v) for k, v in inputs.items()}
    kw = {**kw, "choice_memo": None}
    return min(_cpu_per_call(lambda: multiclock._family_call(key, one, gpu, fs[:1], *args, **kw), 20)
               for _ in range(repeats))  # fmt: skip


def _cpu_per_call(fn: Callable[[], Any], n: int) -> float:
    t0 = time.process_time()
    for _ in range(n):
        fn()
    return (time.process_time() - t0) / n


def split(points: list[dict[str, Any]], ctx: Any, repeats: int) -> dict[str, Any]:
    """Per repeat, in turn: the points as they run, with their family calls timed, and with the family
    calls memoized; the minimum of each (the family times of the fastest timed round)."""
    from dse.search.objective import evaluate_point

    def run_all() -> float:
        t0 = time.process_time()
        for p in points:
            evaluate_point(p, ctx)
        return (time.process_time() - t0) / len(points)

    run_all()  # warm-up: graphs, op tables, coefficient files
    totals, outside, timed = [], [], []
    first: dict[str, Any] = {}
    for _ in range(repeats):
        totals.append(run_all())
        tally = _Tally()
        with _family_timer(tally, first):
            timed.append((run_all(), tally))
        with _memoized_families():
            run_all()  # fills the memo with each point's calls
            outside.append(run_all())
    n = len(points)
    t = min(timed, key=lambda r: r[0])[1]
    one = {k: _one_row_s(k, call, repeats) for k, call in first.items()}
    families = {k: (t.calls[k] / n, t.rows[k] / t.calls[k], t.spent[k] / n, one.get(k)) for k in t.spent}
    return {"total_s": min(totals), "outside_s": min(outside), "families": families}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--points", type=int, default=60, help="points per attention kind")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    drawn, ctx = _study_points(8 * args.points)
    for attention in ("flash", "eager"):
        points = [p for p in drawn if p["attention"] == attention][: args.points]
        out = split(points, ctx, args.repeats)
        total_ms, outside_ms = out["total_s"] * 1e3, out["outside_s"] * 1e3
        print(f"{attention}: {len(points)} points, {total_ms:.2f} ms CPU per point")
        for key, (ncalls, nrows, spent_s, one_s) in sorted(out["families"].items(), key=lambda kv: -kv[1][2]):
            fixed = f"; one row {one_s * 1e3:.2f} ms" if one_s is not None else ""
            print(f"  {key:18s} {spent_s * 1e3:6.2f} ms  {ncalls:5.2f} calls x {nrows:5.0f} rows{fixed}")
        print(f"  outside the families {outside_ms:6.2f} ms ({outside_ms / total_ms:.0%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Toy evaluators with known Pareto fronts, and a tiny entry point to run a study in a subprocess.

They stand in for `dse.search.objective.evaluate_point` in the search tests: module-level (picklable by
reference for process pools and Ray), deterministic, and each declares its `metric_names`.

    python -m search.toy STUDY OUT_DIR [N_POINTS]     # with tests/ on PYTHONPATH (the resume test does this)
"""

from __future__ import annotations

import math
import os
import sys
import time
from collections.abc import Mapping
from typing import Any


def zdt1(params: Mapping[str, Any], ctx: Any) -> dict[str, Any]:
    """ZDT1 over x0..x{n-1} in [0, 1]: the front is f2 = 1 - sqrt(f1) (all x1.. = 0)."""
    xs = [float(params[k]) for k in sorted(params) if k.startswith("x")]
    f1 = xs[0]
    g = 1.0 + 9.0 * sum(xs[1:]) / max(1, len(xs) - 1)
    return {"f1": f1, "f2": g * (1.0 - math.sqrt(f1 / g)), "g": g}


zdt1.metric_names = ("f1", "f2", "g")  # type: ignore[attr-defined]


def schaffer(params: Mapping[str, Any], ctx: Any) -> dict[str, Any]:
    """Schaffer N.1 on x: f1 = x^2, f2 = (x-2)^2, front for x in [0, 2]; `mode` adds failures/infeasibility.

    `mode: boom` raises (a failed point); `mode: tight` is infeasible by the model's own verdict;
    `budget` (if present) is compared by a study constraint `f1 <= budget`.
    """
    x = float(params["x"])
    mode = params.get("mode", "ok")
    if mode == "boom":
        raise ValueError(f"boom at x={x:g}")
    out: dict[str, Any] = {"f1": x * x, "f2": (x - 2.0) ** 2, "budget": float(params.get("budget", 1e9))}
    if mode == "tight":
        out["feasible"] = False
        out["infeasible_reason"] = "does not fit"
    return out


schaffer.metric_names = ("f1", "f2", "budget")  # type: ignore[attr-defined]


def slow_zdt1(params: Mapping[str, Any], ctx: Any) -> dict[str, Any]:
    """ZDT1 that burns about 1 ms of CPU per point (to measure executor throughput)."""
    t_end = time.perf_counter() + 1e-3
    while time.perf_counter() < t_end:
        pass
    return zdt1(params, ctx)


slow_zdt1.metric_names = zdt1.metric_names  # type: ignore[attr-defined]


def sleepy_zdt1(params: Mapping[str, Any], ctx: Any) -> dict[str, Any]:
    """ZDT1 that sleeps 20 ms per point, so that a subprocess can be killed mid-run."""
    time.sleep(0.02)
    return zdt1(params, ctx)


sleepy_zdt1.metric_names = zdt1.metric_names  # type: ignore[attr-defined]


def flat(params: Mapping[str, Any], ctx: Any) -> dict[str, Any]:
    """The same objectives everywhere: the hypervolume never improves after the first batch."""
    return {"f1": 1.0, "f2": 1.0, "g": 1.0}


flat.metric_names = zdt1.metric_names  # type: ignore[attr-defined]


def die_once(params: Mapping[str, Any], ctx: Any) -> dict[str, Any]:
    """Kill the worker process the first time any worker sees $DSE_TEST_MARKER missing (a lost worker)."""
    marker = os.environ["DSE_TEST_MARKER"]
    if not os.path.exists(marker):
        with open(marker, "w") as fh:
            fh.write("died once\n")
        os._exit(17)
    return zdt1(params, ctx)


die_once.metric_names = zdt1.metric_names  # type: ignore[attr-defined]


_CALLS = {"n": 0}


def ctrl_c_after_40(params: Mapping[str, Any], ctx: Any) -> dict[str, Any]:
    """ZDT1 that raises KeyboardInterrupt (as Ctrl-C would) on its 41st call in this process."""
    _CALLS["n"] += 1
    if _CALLS["n"] == 41:
        raise KeyboardInterrupt
    return zdt1(params, ctx)


ctrl_c_after_40.metric_names = zdt1.metric_names  # type: ignore[attr-defined]


def main(argv: list[str]) -> None:
    from dse.search.runner import run_study

    study, out = argv[0], argv[1]
    n_points = int(argv[2]) if len(argv) > 2 else None
    summary = run_study(study, out=out, n_points=n_points, executor="serial", evaluator=sleepy_zdt1)
    print(summary.run_dir)


if __name__ == "__main__":
    main(sys.argv[1:])


def sleepy(params: Mapping[str, Any], ctx: Any) -> dict[str, Any]:
    """Schaffer after a 30 s sleep: a chunk a stop must not wait for."""
    time.sleep(30.0)
    return schaffer(params, ctx)


sleepy.metric_names = schaffer.metric_names  # type: ignore[attr-defined]

"""In-process A/B of the GEMM candidate choice: this tree's `gemm._best_candidate` against a git revision's.

    .venv/bin/python benchmarks/ab_gemm.py [--base HEAD] [--points 100]

The shared 2-core machine's speed drifts by 2x within minutes, so separate runs of the old and the new tree
cannot be compared: this loads the revision's `dse/perf/gemm.py` as a second module and alternates the two
choosers call by call in one process. It checks that both give identical arrays, then prints per-call
ratios (new / old) for `gemm_arrays` calls shaped like eager decode attention's QK^T (m = 1, k = 128,
kv length per row) and the mean over a mix of random points of `studies/llm_serving.yaml`. The revision's
gemm.py must run against this tree's helper modules: the default, HEAD, measures uncommitted edits of
`_best_candidate`; an older revision (round 2 compared b4a38a0~1) stops with a message once the helpers
it calls have changed since.
"""

from __future__ import annotations

import argparse
import importlib.util
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from dse.hardware.catalog import load_gpu
from dse.perf import gemm

ROOT = Path(__file__).resolve().parent.parent


def load_revision(rev: str) -> Any:
    src = subprocess.run(
        ["git", "show", f"{rev}:dse/perf/gemm.py"], cwd=ROOT, check=True, capture_output=True, text=True
    ).stdout
    path = Path(tempfile.mkdtemp()) / "gemm_base.py"
    path.write_text(src, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("dse.perf.gemm_base", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def alternate(fn: Any, old: Any, new: Any, repeats: int) -> tuple[float, float]:
    """(mean old s, mean new s) of `fn()` with gemm's chooser swapped between calls."""
    t_old: list[float] = []
    t_new: list[float] = []
    for _ in range(repeats):
        for chooser, times in ((old, t_old), (new, t_new)):
            gemm._best_candidate = chooser
            t0 = time.process_time()
            fn()
            times.append(time.process_time() - t0)
    gemm._best_candidate = new
    return float(np.mean(t_old)), float(np.mean(t_new))


def report(label: str, t_old: float, t_new: float) -> None:
    print(f"{label}: old {t_old * 1e3:.2f} ms, new {t_new * 1e3:.2f} ms, new / old {t_new / t_old:.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="HEAD")
    parser.add_argument("--points", type=int, default=100)
    args = parser.parse_args()
    base = load_revision(args.base)
    old, new = base._best_candidate, gemm._best_candidate
    gpu = load_gpu("h100-sxm")
    rng = np.random.default_rng(0)
    for rows in (10, 60, 256):
        kw: dict[str, Any] = {
            "m": np.ones(rows),
            "n": rng.integers(64, 2048, rows).astype(float),
            "k": np.full(rows, 128.0),
            "batch": np.full(rows, 32.0),
            "dtype": ["bf16"] * rows,
            "out_dtype": ["bf16"] * rows,
            "b_shared": np.zeros(rows, dtype=bool),
            "gpu": gpu,
            "sm_clock_hz": np.full(rows, 1.5e9),
        }
        try:
            a = base.gemm_arrays(**kw)
        except (TypeError, AttributeError, ImportError) as exc:  # its helpers' signatures have moved on
            raise SystemExit(
                f"--base {args.base}: its gemm.py does not run against this tree: {exc}"
            ) from None
        b = gemm.gemm_arrays(**kw)
        assert all(np.array_equal(a[key], b[key]) for key in ("latency_s", "util", "tile_idx", "split"))
        t_old, t_new = alternate(lambda kw=kw: gemm.gemm_arrays(**kw), old, new, 60)
        report(f"gemm_arrays, {rows} QK^T rows", t_old, t_new)
    import optuna

    from dse.search.objective import evaluate_point
    from dse.search.samplers import OptunaSampler
    from dse.search.study import load_study

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    cfg = load_study(ROOT / "studies" / "llm_serving.yaml").config
    ctx = cfg.eval_context()
    points = [a.point for a in OptunaSampler(cfg, optuna.samplers.RandomSampler(seed=0)).ask(args.points)]
    t_old, t_new = alternate(lambda: [evaluate_point(p, ctx) for p in points], old, new, 3)
    report(f"study mix, mean of {len(points)} points", t_old / len(points), t_new / len(points))


if __name__ == "__main__":
    main()

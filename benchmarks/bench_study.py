"""Study throughput: points per second of a 10,000-point NSGA-II run of `studies/llm_serving.yaml`.

    .venv/bin/python benchmarks/bench_study.py [--n-points 10000] [--executor serial ray process]

Runs the study once per executor into a temporary directory and prints wall seconds and points/s (Ray's
start-up included). The issue's target: 10,000 points in <= 60 s wall on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from dse.search.runner import run_study

STUDY = Path(__file__).resolve().parents[1] / "studies" / "llm_serving.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-points", type=int, default=10_000)
    parser.add_argument("--executor", nargs="+", default=["serial", "ray"])
    args = parser.parse_args()
    rows = []
    for executor in args.executor:
        with tempfile.TemporaryDirectory() as out:
            t0 = time.perf_counter()
            summary = run_study(STUDY, out=out, n_points=args.n_points, executor=executor)
            wall_s = time.perf_counter() - t0
        rows.append(
            {
                "executor": executor, "n_points": summary.n_points, "wall_s": round(wall_s, 1),
                "points_per_s": round(summary.n_points / wall_s, 1), "stop_reason": summary.stop_reason,
                "cpus": os.cpu_count(),
            }
        )  # fmt: skip
        print(json.dumps(rows[-1]), flush=True)


if __name__ == "__main__":
    main()

"""cProfile summaries of the model's units of work, written to `benchmarks/profiles/<unit>.txt`.

    .venv/bin/python benchmarks/profile_units.py [--units predict_serving evaluate_point driver] [--top 30]

`predict_serving` and `evaluate_point` are the `dse bench` cases (one warm-up call, then 10 profiled
calls); `driver` runs 2,000 points of `studies/llm_serving.yaml` serially with a trivial evaluator, so only
the search driver (Optuna ask/tell, the log, the front) shows. Each file lists the top functions by own
time and by cumulative time; cProfile roughly doubles the run time, so read shares, not milliseconds.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "benchmarks" / "profiles"


def trivial_point(params: Mapping[str, Any], ctx: Any) -> dict[str, Any]:
    """A stand-in evaluator with the study's metrics and no model: the driver's cost alone."""
    sms = float(params.get("gpu.num_sms", 132))
    return {
        "e2e_latency_s": 1.0 / sms + float(params.get("sm_clock_mhz", 1980)) * 1e-4,
        "energy_per_output_token_j": sms * 0.01 + float(params.get("gpu.memory.energy_factor", 1.0)),
        "avg_power_w": 500.0,
        "tdp_w": 700.0,
        "feasible": True,
        "memory_fits": True,
    }


def _units() -> dict[str, Callable[[], Callable[[], Any]]]:
    def predict_serving() -> Callable[[], Any]:
        from dse.hardware.catalog import load_gpu
        from dse.serving.static import ServingRequest, predict_serving
        from dse.workload.models import load_model_config

        arch, spec = load_model_config("llama-3.1-8b"), load_gpu("h100-sxm")
        request = ServingRequest(batch=32, input_tokens=1024, output_tokens=256)
        return lambda: [predict_serving(arch, spec, request) for _ in range(10)]

    def evaluate_point() -> Callable[[], Any]:
        from dse.search.objective import EvalContext, evaluate_point

        ctx = EvalContext(batch=32, input_tokens=1024, output_tokens=256)
        params = {"gpu.memory.technology": "gddr7", "gpu.memory.bus_width_bits": 512, "sm_clock_mhz": 1500}
        return lambda: [evaluate_point(params, ctx) for _ in range(10)]

    def driver() -> Callable[[], Any]:
        from dse.search.runner import run_study

        def run() -> Any:
            with tempfile.TemporaryDirectory() as out:
                study = ROOT / "studies" / "llm_serving.yaml"
                return run_study(study, out=out, n_points=2000, executor="serial", evaluator=trivial_point)

        return run

    return {"predict_serving": predict_serving, "evaluate_point": evaluate_point, "driver": driver}


def profile_unit(name: str, top: int) -> str:
    fn = _units()[name]()
    fn()  # warm-up: imports, catalog and coefficient files
    prof = cProfile.Profile()
    prof.enable()
    fn()
    prof.disable()
    text = io.StringIO()
    stats = pstats.Stats(prof, stream=text)
    stats.strip_dirs().sort_stats("tottime").print_stats(top)
    stats.sort_stats("cumulative").print_stats(top)
    return text.getvalue()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--units", nargs="+", default=list(_units()))
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--suffix", default="", help="appended to the file names (e.g. _before)")
    args = parser.parse_args()
    OUT.mkdir(parents=True, exist_ok=True)
    for name in args.units:
        path = OUT / f"{name}{args.suffix}.txt"
        path.write_text(profile_unit(name, args.top), encoding="utf-8")
        print(path)


if __name__ == "__main__":
    main()

"""Every float the model gives on a fixed set of cases, dumped as repr strings, so that a speed change can
be shown bit-identical to a base revision.

    PYTHONPATH=BASE   python benchmarks/same_numbers.py --out base.json [--points 200]
    PYTHONPATH=.      python benchmarks/same_numbers.py --out new.json  [--points 200]
    python benchmarks/same_numbers.py --compare base.json new.json

The cases: `--points` random points of `studies/llm_serving.yaml` (a seeded uniform draw of its space, eager
and flash, bf16 and fp8, clocks over the whole grid), the same number of those points again at a binding
450 W cap, both sets again in chunks of 8 through `evaluate_chunk` (as a search's workers run them), static
predicts of three models on H100 / A100 / B200 (with and without a cap, eager and flash), two
`predict_load` runs, a training step, and the `--json` output of a `dse whatif` and a capped `dse
predict`. `--compare` names every case whose values differ and exits 1 when one does.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def _flat(value: Any, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(path, repr) of every leaf: floats as repr (exact), other leaves as their repr too."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    elif hasattr(value, "model_dump"):
        value = value.model_dump()
    elif hasattr(value, "tolist"):
        value = value.tolist()
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _flat(v, f"{prefix}.{k}")
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            yield from _flat(v, f"{prefix}[{i}]")
    else:
        yield prefix, repr(value)


def _study_points(n: int) -> tuple[list[dict[str, Any]], Any]:
    from dse.search.space import ChoiceParam, FloatParam, IntParam
    from dse.search.study import load_study

    study = load_study(ROOT / "studies" / "llm_serving.yaml").config
    rng = random.Random(29)

    def suggest(name: str, spec: Any) -> Any:
        if isinstance(spec, ChoiceParam):
            return rng.choice(spec.values)
        if isinstance(spec, IntParam):
            return rng.randrange(spec.low, spec.high + 1, spec.step or 1)
        if isinstance(spec, FloatParam):
            return rng.uniform(spec.low, spec.high)
        raise TypeError(f"{name}: {type(spec).__name__}")

    space = study.search_space()
    return [space.to_point(space.sample(suggest)) for _ in range(n)], study.eval_context()


def cases(n_points: int) -> Iterator[tuple[str, Any]]:
    """(name, result) of every case, evaluated one after the other in this process."""
    from dse.hardware.catalog import load_gpu
    from dse.perf.types import OperatingPoint
    from dse.search.objective import evaluate_chunk, evaluate_point
    from dse.serving.load import LoadRequest, predict_load
    from dse.serving.static import ServingRequest, predict_serving
    from dse.training.parallel import ParallelLayout
    from dse.training.predict import predict_training
    from dse.training.step import TrainingRequest
    from dse.workload.models import load_model_config

    points, ctx = _study_points(n_points)
    for i, params in enumerate(points):
        yield f"point {i} {params}", _guard(evaluate_point, params, ctx)
    for i, params in enumerate(points):
        capped = {**params, "power_cap_w": 450.0}
        yield f"capped point {i} {params}", _guard(evaluate_point, capped, ctx)
    # the same points as a search's workers get them: chunks of 8 (`evaluate_chunk`, which may share work)
    for label, extra in (("chunked", {}), ("chunked capped", {"power_cap_w": 450.0})):
        for start in range(0, len(points), 8):
            chunk = [{**p, **extra} for p in points[start : start + 8]]
            for j, res in enumerate(evaluate_chunk(chunk, ctx, evaluate_point)):
                yield f"{label} point {start + j}", {"metrics": res["metrics"], "error": res["error"]}
    for model in ("llama-3.1-8b", "qwen3-30b-a3b", "llama-3.1-70b"):
        arch = load_model_config(model)
        for gpu_name in ("h100-sxm", "a100-sxm-80gb", "b200"):
            gpu = load_gpu(gpu_name)
            for attention in ("flash", "eager"):
                for cap in (None, 400.0):
                    req = ServingRequest(batch=8, input_tokens=512, output_tokens=64, attention=attention)
                    point = OperatingPoint(power_cap_w=cap)
                    name = f"static {model} {gpu_name} {attention} cap {cap}"
                    yield name, _guard(predict_serving, arch, gpu, req, point)
    arch, h100 = load_model_config("llama-3.1-8b"), load_gpu("h100-sxm")
    for conc in (8, 64):
        req_l = LoadRequest(mode="concurrency", concurrency=conc, num_requests=200, input_tokens=512,
                            output_tokens=128)  # fmt: skip
        yield f"load concurrency {conc}", _guard(predict_load, arch, h100, req_l)
    train = TrainingRequest(
        micro_batch=2, global_batch=64, seq_len=4096, precision="bf16", recompute="selective",
        layout=ParallelLayout(num_gpus=8, fsdp=True),
    )  # fmt: skip
    yield "training llama-3.1-8b 8 gpus fsdp", _guard(predict_training, "llama-3.1-8b", h100, train)
    for args in _CLI_CASES:
        yield "dse " + " ".join(args), _cli_json(args)


# CLI commands whose --json output is compared: a what-if of the memory, and a predict at a binding cap.
_CLI_CASES: tuple[tuple[str, ...], ...] = (
    ("whatif", "h100-sxm", "--memory", "gddr7", "--bus-width-bits", "512", "--json"),
    (
        "predict",
        "--model",
        "llama-3.1-8b",
        "--gpu",
        "a100-sxm-80gb",
        "--batch",
        "16",
        "--power-cap-w",
        "300",
        "--json",
    ),
)


def _cli_json(args: tuple[str, ...]) -> Any:
    """The parsed --json output of `dse ARGS`, or its exit code and output when it fails."""
    from typer.testing import CliRunner

    from dse.cli import app

    result = CliRunner().invoke(app, list(args))
    if result.exit_code != 0:
        return f"exit {result.exit_code}: {result.output}"
    return json.loads(result.stdout)


def _guard(fn: Any, *args: Any) -> Any:
    try:
        result = fn(*args)
    except Exception as exc:  # noqa: BLE001 - an error is a value to compare too
        return f"{type(exc).__name__}: {exc}"
    if hasattr(result, "metrics") and callable(result.metrics):
        return {"metrics": result.metrics(), "estimate": result}
    return result


def dump(n_points: int, out: Path) -> int:
    values = {name: dict(_flat(result)) for name, result in cases(n_points)}
    out.write_text(json.dumps(values, indent=0, sort_keys=True))
    print(f"{out}: {len(values)} cases, {sum(len(v) for v in values.values())} values")
    return 0


def compare(a: Path, b: Path) -> int:
    old, new = json.loads(a.read_text()), json.loads(b.read_text())
    bad = [name for name in old.keys() | new.keys() if old.get(name) != new.get(name)]
    for name in sorted(bad)[:20]:
        diff = {k for k in old.get(name, {}).keys() | new.get(name, {}).keys()
                if old.get(name, {}).get(k) != new.get(name, {}).get(k)}  # fmt: skip
        print(f"differs: {name}: {sorted(diff)[:5]}")
    total = sum(len(v) for v in old.values())
    print(f"{len(old)} cases, {total} values: {len(bad)} cases differ")
    return 1 if bad else 0


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--points", type=int, default=200)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--compare", type=Path, nargs=2, metavar=("BASE", "NEW"))
    args = parser.parse_args()
    if args.compare:
        return compare(*args.compare)
    if args.out is None:
        parser.error("give --out FILE or --compare BASE NEW")
    return dump(args.points, args.out)


if __name__ == "__main__":
    sys.exit(main())

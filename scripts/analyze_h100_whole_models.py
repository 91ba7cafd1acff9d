"""Where the whole-model latency error lies (issue 16): GPU time against host time, and the GPU time by
kernel family, on our H100 runs (`dse/calibrate/measured`) and the EnergAIzer A100 / A10 runs.

    PYTHONPATH=. .venv/bin/python scripts/analyze_h100_whole_models.py          # ~1 min
    ... --rows         # also every H100 run with its predicted GPU time per family (ms)

Printed:

- per model, precision and bound (host-bound: the profiler's kernel time under half the wall time): the
  GPU time error (`dse predict`'s busy time against the profiler's summed kernel time), the time outside
  the kernels (wall - busy, measured and predicted), the wall-time and power errors;
- per model and GPU, the measured GPU time regressed on the predicted time of two groups of families:
  linear in the tokens (GEMMs, norms, elementwise over activations, convolutions) and quadratic (the
  batched score / value GEMMs, the softmax and every elementwise pass over the [B, H, S, S] scores). A
  factor above 1 is GPU time the model lacks in that group. A100 / A10 rows have no kernel time: their
  wall time less the predicted host time stands for it, on rows the model puts at least 70% GPU-bound.

Findings (session 32) are in the README's accuracy table (`h100_own_models`) and the own-H100 paragraph.
"""

from __future__ import annotations

import argparse

import numpy as np
import pandas as pd

from dse.calibrate.fit.power_sets import ENERGAIZER_GPU, energaizer_frame, energaizer_graph, latency_coeffs
from dse.calibrate.validate.own_h100 import own_h100_model_predictions
from dse.hardware.catalog import load_gpu
from dse.perf.predict import WorkloadPrediction, predict_graphs
from dse.perf.types import OperatingPoint
from dse.workload.graph import WorkloadGraph
from dse.workload.ops import ElementwiseOp, GemmOp, NormOp, SoftmaxOp

LINEAR = ("gemm", "conv", "norm", "elementwise")
QUADRATIC = ("score_gemm", "softmax", "score_elementwise")
MIN_BUSY_SHARE = 0.7  # A100 / A10 rows the model puts at least this GPU-bound
MIN_SHARE_SPAN = 0.1  # the quadratic share must vary this much over a model's rows to fit both factors


def family(op: object, scores: set[int]) -> str:
    """The op's family; `scores`: the element counts of the graph's softmax inputs."""
    if isinstance(op, GemmOp):
        return "conv" if op.name.endswith(":conv2d") else "score_gemm" if op.batch > 1 else "gemm"
    if isinstance(op, SoftmaxOp):
        return "softmax"
    if isinstance(op, NormOp):
        return "norm"
    if isinstance(op, ElementwiseOp) and op.num_elements in scores:
        return "score_elementwise"
    return "elementwise"


def family_ms(graphs: list[WorkloadGraph], preds: list[WorkloadPrediction]) -> pd.DataFrame:
    """Predicted GPU time per family (ms), one row per graph."""
    rows = []
    for graph, pred in zip(graphs, preds, strict=True):
        scores = {op.rows * op.cols for op in graph.ops if isinstance(op, SoftmaxOp)}
        out = dict.fromkeys(LINEAR + QUADRATIC, 0.0)
        for op, k in zip(graph.ops, pred.kernels, strict=True):
            out[family(op, scores)] += k.latency_s * k.count * 1e3
        rows.append(out)
    return pd.DataFrame(rows)


def own_h100() -> pd.DataFrame:
    """Our H100 runs with their predictions and the predicted GPU time per family."""
    runs = own_h100_model_predictions()
    gpu = load_gpu("h100-sxm")
    graphs = [
        energaizer_graph(p, prec) for p, prec in zip(runs["workload_path"], runs["precision"], strict=True)
    ]
    preds = predict_graphs(graphs, gpu, OperatingPoint(), latency_coeffs("default", gpu), launch="eager")
    out = pd.concat([runs, family_ms(graphs, preds)], axis=1)
    out["gpu"] = "h100"
    out["measured_gpu_ms"] = out["gpu_busy_s"] * 1e3
    return out


def energaizer(which: str) -> pd.DataFrame:
    """EnergAIzer runs of `which` (a100, a10) at their measured clocks, their wall time less the predicted
    host time as `measured_gpu_ms`."""
    df = energaizer_frame(which)
    gpu = load_gpu(ENERGAIZER_GPU[which])
    parts = []
    for clock_hz, part in df.groupby("clock_hz"):
        graphs = [
            energaizer_graph(p, prec)
            for p, prec in zip(part["workload_path"], part["precision"], strict=True)
        ]
        point = OperatingPoint(sm_clock_hz=float(clock_hz))
        preds = predict_graphs(graphs, gpu, point, latency_coeffs("default", gpu), launch="eager")
        fam = family_ms(graphs, preds).set_index(part.index)
        host_ms = np.array([(p.latency_s - p.busy_s) * 1e3 for p in preds])
        busy_share = np.array([p.busy_s / p.latency_s for p in preds])
        parts.append(
            part.assign(measured_gpu_ms=part["latency_s"] * 1e3 - host_ms, busy_share=busy_share).join(fam)
        )
    out = pd.concat(parts)
    out["gpu"] = which
    return out[out["busy_share"] >= MIN_BUSY_SHARE]


def split_table(runs: pd.DataFrame) -> pd.DataFrame:
    """GPU and host error per model, precision and bound (H100 runs)."""
    runs = runs.assign(
        gpu_err_pct=(runs["pred_busy_s"] / runs["gpu_busy_s"] - 1) * 100,
        wall_err_pct=(runs["pred_latency_s"] / runs["latency_s"] - 1) * 100,
        power_err_pct=(runs["pred_power_w"] / runs["avg_power_w"] - 1) * 100,
        outside_ms=(runs["latency_s"] - runs["gpu_busy_s"]) * 1e3,
        pred_outside_ms=(runs["pred_latency_s"] - runs["pred_busy_s"]) * 1e3,
    )
    keys = ["model", "precision", "host_bound"]
    cols = ["gpu_err_pct", "wall_err_pct", "power_err_pct", "outside_ms", "pred_outside_ms"]
    return runs.groupby(keys)[cols].mean().join(runs.groupby(keys).size().rename("n")).round(1)


def group_factors(runs: pd.DataFrame) -> pd.DataFrame:
    """Per GPU, model and precision: measured GPU time ~ a x linear + b x quadratic (relative least
    squares)."""
    rows = []
    for (gpu, model, precision), g in runs.groupby(["gpu", "model", "precision"]):
        lin, quad = g[list(LINEAR)].sum(axis=1), g[list(QUADRATIC)].sum(axis=1)
        y = g["measured_gpu_ms"].to_numpy()
        share = quad / (lin + quad)
        if len(g) < 3 or share.max() - share.min() < MIN_SHARE_SPAN:  # the two groups cannot be told apart
            continue
        x = np.c_[lin, quad] / y[:, None]
        (a, b), *_ = np.linalg.lstsq(x, np.ones(len(y)), rcond=None)
        bias = (g[list(LINEAR + QUADRATIC)].sum(axis=1) / y - 1).mean() * 100
        rows.append((gpu, model, precision, len(g), a, b, share.mean(), bias))
    cols = ["gpu", "model", "precision", "n", "linear_x", "quadratic_x", "quadratic_share", "gpu_bias_pct"]
    return pd.DataFrame(rows, columns=cols).round(2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", action="store_true", help="print every H100 run's family times")
    args = parser.parse_args()
    pd.set_option("display.width", 200)
    pd.set_option("display.max_rows", 500)
    h100 = own_h100()
    print("H100 runs: GPU time, time outside the kernels, wall time and power\n")
    print(split_table(h100).to_string(), "\n")
    gpu_bound = h100[~h100["host_bound"]]
    both = pd.concat([gpu_bound, energaizer("a100"), energaizer("a10")], ignore_index=True)
    print("Measured GPU time against the predicted linear and quadratic families\n")
    print(group_factors(both).to_string(), "\n")
    if args.rows:
        cols = ["model", "precision", "batch", "seq_len", "measured_gpu_ms", *LINEAR, *QUADRATIC]
        print(h100[cols].round(2).to_string())


if __name__ == "__main__":
    main()

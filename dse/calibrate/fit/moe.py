"""Fused-MoE layers as model inputs, and the fit of the grouped-GEMM correction (`dse.perf.moe`).

A row of aiconfigurator's vLLM fused-MoE tables (`load_aiconfigurator_moe`) is one MoE layer on one
GPU without the router GEMM: dse models it as the top-k kernel plus `dse.workload.moe.routed_expert_ops`
(align, grouped gate/up, activation, grouped down, combine) of the rank-0 shard (`inter_size /
moe_tp_size` wide, `num_experts / moe_ep_size` experts). Each op is predicted as `dse predict` does at the
default operating point (boost requested, capped at the TDP by the cap rule); a row's latency is the sum.

The fit. With every other op and the dense GEMM coefficients fixed, a grouped GEMM's latency is
`lambda_pro t_pro + lambda_main sum_j w_j max(dl load_j, dm math_j / math_eff) + lambda_epi t_epi + eps +
experts x expert_s` (`dse.perf.moe`); `fit_moe_class` finds (math_eff, expert_s) of one MMA dtype class
by bounded least squares on the relative error of the layer latency (scipy), in two passes: the capped
clocks depend on the latencies, so the second pass takes the clocks under the first pass's fit.

Datasets: balanced routing only (the power-law rows time the busiest EP rank: an imbalance question,
not a kernel one), layers of at least 10 us, and no expert parallelism for the fit. NOTE(dse): the
collector's EP shards run vLLM's masked EP (every rank aligns, activates and combines all t k token
copies; the kernel writes zeros for the copies of other ranks' experts), while dse's per-GPU ops hold
only the rank's own copies, as an all-to-all dispatch delivers them; the EP rows are validated
separately (`expert_parallel`) and not fitted. `MOE_LABELS` maps the table's dtypes to dse's: `bf16`
(Triton `fused_moe`), `fp8_block` (Triton and FlashInfer CUTLASS), `mxfp4` (gpt-oss Triton and Marlin
W4A16), and `fp8` per-tensor (FlashInfer CUTLASS, slow below ~2k tokens: README section 5), which is
validated but not fitted. `int4_wo` has no dse dtype and is left out.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from datetime import date

import numpy as np
import pandas as pd

from dse import __version__
from dse.calibrate.data.aiconfigurator import AIC_MOE_FILES, load_aiconfigurator_moe
from dse.calibrate.data.common import split_holdout
from dse.calibrate.fit.kernels import CATALOG_GPU, MIN_LATENCY_S, file_sha256
from dse.hardware.catalog import load_gpu
from dse.hardware.spec import GpuSpec
from dse.perf import gemm
from dse.perf.coeffs import CoeffSet, MoeCoeffs, MoeKernelFit, default_power_coeffs, load_default_coeffs
from dse.perf.dvfs import capped_rows
from dse.perf.moe import scale_math
from dse.perf.multiclock import family_arrays
from dse.perf.pipeline import correct
from dse.perf.power import gpu_power_terms
from dse.perf.types import OperatingPoint, coeff_table
from dse.workload.moe import routed_expert_ops
from dse.workload.ops import Dtype, GemmOp, Op, SoftmaxOp

try:
    from scipy.optimize import least_squares
except ImportError as exc:  # pragma: no cover - scipy is a declared dependency
    raise ImportError("dse.calibrate.fit.moe needs scipy: pip install scipy") from exc

# dse label -> (recorded moe_dtype, dse expert dtype, fitted)
MOE_LABELS: dict[str, tuple[str, Dtype, bool]] = {
    "bf16": ("bfloat16", "bf16", True),
    "fp8_block": ("fp8_block", "fp8", True),
    "mxfp4": ("w4a16_mxfp4", "fp4", True),
    "fp8": ("fp8", "fp8", False),
}
FIT_GPU = "h100_sxm"  # fitted here; h200_sxm is the transfer test
_EFF_BOUNDS = (0.05, 1.0)


@dataclass(frozen=True, slots=True, kw_only=True)
class MoeLayers:
    """The measured layers of one (GPU, label) and their ops: `ops[row_of[i]]` is op i's layer."""

    gpu: str  # catalog name
    label: str
    frame: pd.DataFrame
    ops: tuple[Op, ...]
    row_of: np.ndarray

    @property
    def latency_s(self) -> np.ndarray:
        return self.frame["latency_s"].to_numpy(dtype=float)


def load_moe_layers(
    gpu_key: str, label: str, *, expert_parallel: bool = False, min_latency_s: float = MIN_LATENCY_S
) -> MoeLayers:
    """Balanced-routing layers of one GPU and dse label (module docstring) with their ops: the layers
    without expert parallelism (`moe_ep_size` 1), or (`expert_parallel`) those with."""
    recorded, expert_dtype, _ = MOE_LABELS[label]
    df = load_aiconfigurator_moe(gpu_key)
    keep = (
        (df["moe_dtype"] == recorded)
        & (df["distribution"] == "balanced")
        & (df["latency_s"] >= min_latency_s)
        & ((df["moe_ep_size"] > 1) if expert_parallel else (df["moe_ep_size"] == 1))
    )
    frame = df[keep].reset_index(drop=True)
    ops: list[Op] = []
    row_of: list[int] = []
    for i, r in enumerate(frame.itertuples(index=False)):
        layer = layer_ops(r, expert_dtype)
        ops += layer
        row_of += [i] * len(layer)
    return MoeLayers(
        gpu=CATALOG_GPU[gpu_key], label=label, frame=frame, ops=tuple(ops), row_of=np.array(row_of, dtype=int)
    )


def layer_ops(r: object, expert_dtype: Dtype) -> list[Op]:
    """The ops of one table row (a `load_aiconfigurator_moe` row as a named tuple): top-k, then the routed
    experts of the rank-0 shard."""
    t, e = int(r.num_tokens), int(r.num_experts)  # type: ignore[attr-defined]
    ops: list[Op] = [SoftmaxOp(name="moe/mlp/topk", rows=t, cols=e, dtype="bf16")]
    return ops + routed_expert_ops(
        "moe/mlp",
        hidden_size=int(r.hidden_size),  # type: ignore[attr-defined]
        expert_width=math.ceil(int(r.inter_size) / int(r.moe_tp_size)),  # type: ignore[attr-defined]
        num_experts=e,
        k=int(r.topk),  # type: ignore[attr-defined]
        tokens=t,
        expert_dtype=expert_dtype,
        act_dtype="bf16",
        ep_size=int(r.moe_ep_size),  # type: ignore[attr-defined]
        balanced=True,
    )


def predict_layers(layers: MoeLayers, coeffs: CoeffSet | None, gpu: GpuSpec | None = None) -> dict:
    """Per-layer latency_s [rows] at the default operating point, and each op's clock (`sm_clock_hz`)."""
    gpu = gpu or load_gpu(layers.gpu)
    pc = default_power_coeffs(gpu)
    capped = capped_rows(list(layers.ops), gpu, OperatingPoint(), coeffs, pc, gpu_power_terms(gpu))
    per_op = capped.rows["latency_s"]
    latency_s = np.bincount(layers.row_of, weights=per_op, minlength=len(layers.frame))
    return {"latency_s": latency_s, "sm_clock_hz": capped.rows["sm_clock_hz"], "op_latency_s": per_op}


@dataclass(frozen=True, slots=True, kw_only=True)
class _Design:
    """What the fit varies: the grouped GEMMs' timelines; everything else is a fixed time per layer."""

    fixed_s: np.ndarray  # [rows] the other ops
    gemm_tl: object  # Timeline of the grouped GEMMs
    gemm_coeffs: np.ndarray  # [G, 6] their dense phase coefficients
    gemm_experts: np.ndarray  # [G]
    gemm_row: np.ndarray  # [G] layer of each grouped GEMM


def _design(layers: MoeLayers, coeffs: CoeffSet, gpu: GpuSpec) -> _Design:
    pred = predict_layers(layers, coeffs, gpu)
    is_grouped = np.array([isinstance(o, GemmOp) and o.grouped for o in layers.ops])
    idx = np.nonzero(is_grouped)[0]
    sub = [op for op in (layers.ops[i] for i in idx.tolist()) if isinstance(op, GemmOp)]
    out = family_arrays("gemm", sub, gpu, pred["sm_clock_hz"][idx], replace(coeffs, moe=None))
    fixed = np.bincount(
        layers.row_of[~is_grouped], weights=pred["op_latency_s"][~is_grouped], minlength=len(layers.frame)
    )
    table = coeff_table(coeffs).matrix(gemm.GROUPS)
    return _Design(
        fixed_s=fixed,
        gemm_tl=out["timeline"],
        gemm_coeffs=table[out["group"]],
        gemm_experts=np.array([o.batch for o in sub], dtype=float),
        gemm_row=layers.row_of[idx],
    )


def _layer_latency(d: _Design, math_eff: float, expert_s: float, rows: int) -> np.ndarray:
    g = len(d.gemm_row)
    lat, _ = correct(scale_math(d.gemm_tl, np.full(g, 1.0 / math_eff)), d.gemm_coeffs)  # type: ignore[arg-type]
    lat = lat + d.gemm_experts * expert_s
    return d.fixed_s + np.bincount(d.gemm_row, weights=lat, minlength=rows)


def fit_moe_class(
    layers: list[MoeLayers], coeffs: CoeffSet, *, passes: int = 2
) -> tuple[MoeKernelFit, float]:
    """(math_eff, expert_s) of one MMA dtype class on `layers` (module docstring); returns the fit and
    its training MAPE. `coeffs` carries the dense GEMM corrections (its own MoE set is replaced)."""
    fit = MoeKernelFit()
    mape = float("nan")
    for _ in range(passes):
        # Clocks under the current fit (the first pass: the dense model), then the fit at those clocks.
        designs = []
        for lay in layers:
            gpu = load_gpu(lay.gpu)
            cs = replace(coeffs, moe=_single(gpu.architecture, fit))
            designs.append((_design(lay, cs, gpu), lay.latency_s))

        def resid(x: np.ndarray, designs: list = designs) -> np.ndarray:
            parts = [_layer_latency(d, x[0], x[1] * 1e-6, y.size) / y - 1.0 for d, y in designs]
            return np.concatenate(parts)

        x0 = np.array([fit.math_eff, fit.expert_s * 1e6])
        res = least_squares(
            resid, x0, bounds=([_EFF_BOUNDS[0], 0.0], [_EFF_BOUNDS[1], np.inf]), loss="soft_l1", f_scale=0.1
        )
        n = sum(y.size for _, y in designs)
        mape = float(np.mean(np.abs(resid(res.x))))
        fit = MoeKernelFit(
            math_eff=float(res.x[0]), expert_s=float(res.x[1] * 1e-6), num_samples=n, mape_train=mape
        )
    return fit, mape


def _single(arch: str, fit: MoeKernelFit) -> MoeCoeffs:
    return MoeCoeffs(architecture=arch.lower(), groups=dict.fromkeys(FIT_KEYS, fit))


# MoeCoeffs key -> the labels fitted for it (on FIT_GPU's training split).
FIT_KEYS: dict[str, tuple[str, ...]] = {"f16": ("bf16",), "f8": ("fp8_block",), "f16_wo": ("mxfp4",)}
HOLDOUT_FRAC, HOLDOUT_SEED = 0.2, 0


def train_test(layers: MoeLayers) -> tuple[MoeLayers, MoeLayers]:
    """The fixed 80/20 split of the layers (seed 0), as the dense kernel fits use."""
    train, test = split_holdout(layers.frame, frac=HOLDOUT_FRAC, seed=HOLDOUT_SEED)
    return _rows(layers, train.index.to_numpy()), _rows(layers, test.index.to_numpy())


def _rows(layers: MoeLayers, rows: np.ndarray) -> MoeLayers:
    keep = np.isin(layers.row_of, rows)
    new_index = np.full(len(layers.frame), -1)
    new_index[rows] = np.arange(rows.size)
    return MoeLayers(
        gpu=layers.gpu,
        label=layers.label,
        frame=layers.frame.iloc[rows].reset_index(drop=True),
        ops=tuple(op for op, k in zip(layers.ops, keep, strict=True) if k),
        row_of=new_index[layers.row_of[keep]],
    )


def fit_moe_coeffs(gpu_key: str = FIT_GPU, coeffs: CoeffSet | None = None) -> MoeCoeffs:
    """Fit every key of FIT_KEYS on the training 80 % of `gpu_key`'s balanced layers, with the dense
    corrections of `coeffs` (default: the GPU's shipped set). Provenance records the data and errors."""
    gpu = load_gpu(CATALOG_GPU[gpu_key])
    cs = coeffs or load_default_coeffs(gpu)
    groups: dict[str, MoeKernelFit] = {}
    for key, labels in FIT_KEYS.items():
        train = [train_test(load_moe_layers(gpu_key, label))[0] for label in labels]
        groups[key], _ = fit_moe_class(train, cs)
    name = AIC_MOE_FILES[gpu_key]
    provenance = {
        "source": f"aiconfigurator/{name}",
        "sha256": file_sha256(name, "aiconfigurator"),
        "rows": "distribution balanced, moe_ep_size 1, latency >= 10 us, training 80 % (seed 0)",
        "labels": {k: list(v) for k, v in FIT_KEYS.items()},
        "method": "scipy least_squares (soft_l1, f_scale 0.1) on relative layer-latency error; 2 passes of "
        "capped clocks; dense GEMM corrections of the shipped set",
        "dense_coeffs": cs.name,
        "created": date.today().isoformat(),
        "dse_version": __version__,
    }
    return MoeCoeffs(architecture=gpu.architecture.lower(), groups=groups, provenance=provenance)

"""Measured kernel latencies as model inputs, and the fit of a family's coefficient groups.

`kernel_datasets()` names every dataset the kernel model is fitted or validated on (aiconfigurator
GEMM and attention tables, LLMCompass A100 sweeps); `load_samples(spec)` turns one into a
`KernelSamples` value; `evaluate(samples, gpu, coeffs, clock_hz)` runs the vectorized family model on it;
and `fit_groups(samples, gpu, clock_hz=...)` fits the groups that the samples exercise
(`dse.calibrate.fit.latency.fit_group` per group, plus family-level fallback entries fitted on all of the
family's rows).

Clocks. Every table was measured at the GPU's default clocks under its default power limit, where
compute-bound kernels throttle. Each row is evaluated at the clock the model itself gives it there
(`default_clock_hz`: boost requested, the TDP as the cap, `dse.perf.dvfs.capped_rows`), which is what
`dse predict` does at its default operating point. So the fitted corrections describe the kernel at the
clock it runs at, and the cap is counted once: by the cap rule, not again by a fitted derate. The clocks
depend on the latency coefficients (power = energy / time), so the fit takes them from a given set (the
shipped one, then the result of a first pass: `scripts/fit_default_coeffs.py`).

GEMM tile selection depends on the coefficients (the model picks the candidate it predicts fastest), so
the GEMM fit alternates: select with the current coefficients, fit each group, repeat (`gemm_rounds`
times), keeping the round with the lowest training MAPE.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import cast

import numpy as np
import pandas as pd

from dse.calibrate.data.aiconfigurator import load_aiconfigurator_attention, load_aiconfigurator_gemm
from dse.calibrate.data.common import data_root, split_holdout
from dse.calibrate.data.llmcompass import load_llmcompass
from dse.calibrate.fit.latency import fit_group
from dse.hardware.catalog import load_gpu
from dse.hardware.spec import GpuSpec
from dse.perf import attention, elementwise, gemm, reduction
from dse.perf.coeffs import GroupInfo, PowerCoeffs, load_default_coeffs
from dse.perf.multiclock import RowEstimator, op_rows
from dse.perf.types import CoeffTable, OperatingPoint, PhaseCoeffs
from dse.workload.ops import AttentionOp, Dtype, ElementwiseOp, GemmOp, NormOp, Op, SoftmaxOp

MIN_LATENCY_S = 10e-6  # acceptance filter: kernels of at least 10 us
# A group gets its own coefficients only with enough samples to pin them down; smaller groups use their
# parent's (`CoeffTable.lookup`). A family's top-level key is fitted from fewer (the LLMCompass sweeps).
MIN_GROUP_SAMPLES = 30
MIN_FAMILY_SAMPLES = 8

# Context-attention tables whose op includes vLLM's KV-cache write (`reshape_and_cache_flash`) before the
# kernel. In the H100 table (vLLM 0.24.0) latency grows with the number of KV heads at fixed query heads
# (8 x 1024 tokens, 8 heads: 78 us with 1 KV head, 120 us with 8), as the copy does; in the H200 table
# (vLLM 0.22.0) it stays flat (62 -> 64 us), so that collector timed the kernel alone.
CACHE_WRITE_TABLES: frozenset[tuple[str, str]] = frozenset({("aiconfigurator", "h100_sxm")})

# Dataset GPU keys -> catalog names.
CATALOG_GPU: dict[str, str] = {
    "h100_sxm": "h100-sxm",
    "h200_sxm": "h200-sxm",
    "a100_sxm": "a100-sxm-80gb",
    "a100_80gb": "a100-sxm-80gb",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class DatasetSpec:
    """One validation / fitting dataset: which loader, which rows."""

    family: str  # gemm | attention_flash | attention_decode | softmax | layernorm | elementwise
    source: str  # aiconfigurator | llmcompass
    gpu_key: str  # dataset GPU key (h100_sxm, ...)
    label: str  # dtype or phase (bf16, fp8, fp8_block, context, generation, softmax, ...)


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelSamples:
    spec: DatasetSpec
    frame: pd.DataFrame  # the measured rows (loader columns, SI units)
    path: str

    @property
    def latency_s(self) -> np.ndarray:
        return self.frame["latency_s"].to_numpy(dtype=float)

    @property
    def gpu(self) -> str:
        return CATALOG_GPU[self.spec.gpu_key]

    def subset(self, frame: pd.DataFrame) -> KernelSamples:
        return KernelSamples(spec=self.spec, frame=frame, path=self.path)


def kernel_datasets() -> list[DatasetSpec]:
    """Every dataset of the kernel model: fitted (H100 / A100) and forecast-only (H200)."""
    aic = "aiconfigurator"
    return [
        DatasetSpec(family="gemm", source=aic, gpu_key="h100_sxm", label="bf16"),
        DatasetSpec(family="gemm", source=aic, gpu_key="h100_sxm", label="fp8"),
        DatasetSpec(family="attention_flash", source=aic, gpu_key="h100_sxm", label="context"),
        DatasetSpec(family="attention_decode", source=aic, gpu_key="h100_sxm", label="generation"),
        DatasetSpec(family="gemm", source=aic, gpu_key="a100_sxm", label="bf16"),
        DatasetSpec(family="softmax", source="llmcompass", gpu_key="a100_80gb", label="softmax"),
        DatasetSpec(family="layernorm", source="llmcompass", gpu_key="a100_80gb", label="layernorm"),
        DatasetSpec(family="elementwise", source="llmcompass", gpu_key="a100_80gb", label="gelu"),
        DatasetSpec(family="gemm", source="llmcompass", gpu_key="a100_80gb", label="bf16"),
        DatasetSpec(family="gemm", source=aic, gpu_key="h200_sxm", label="bf16"),
        DatasetSpec(family="gemm", source=aic, gpu_key="h200_sxm", label="fp8_block"),
        DatasetSpec(family="attention_flash", source=aic, gpu_key="h200_sxm", label="context"),
        DatasetSpec(family="attention_decode", source=aic, gpu_key="h200_sxm", label="generation"),
    ]


def load_samples(spec: DatasetSpec) -> KernelSamples:
    """The measured rows of one dataset (full attention only: sliding-window rows are dropped)."""
    if spec.source == "aiconfigurator" and spec.family == "gemm":
        df = load_aiconfigurator_gemm(spec.gpu_key)
        df = df[df["dtype"] == spec.label]
    elif spec.source == "aiconfigurator":
        df = load_aiconfigurator_attention(spec.gpu_key, spec.label)  # type: ignore[arg-type]
        df = df[df["window_size"] == 0]
    else:
        df = load_llmcompass("matmul" if spec.family == "gemm" else spec.label)
    df = df.reset_index(drop=True)
    return KernelSamples(spec=spec, frame=df, path=str(df["source"].iloc[0]) if len(df) else "")


@cache
def file_sha256(name: str, source: str) -> str:
    """sha256 of a data file under the data root (for provenance)."""
    path = Path(data_root()) / source / name
    return hashlib.sha256(path.read_bytes()).hexdigest()


def evaluate(
    samples: KernelSamples,
    gpu: GpuSpec | None = None,
    coeffs: object | None = None,
    clock_hz: np.ndarray | float | None = None,
    choice_clock_hz: float | None = None,
) -> dict:
    """Run the family model on the samples' shapes at `clock_hz` (one per row, or one for all; default:
    the boost clock). `default_clock_hz` gives the clocks the rows were measured at in the model.
    `choice_clock_hz`: the clock GEMM tiles are chosen at (default: each row's own clock, as a GEMM
    throttled under the cap or locked at a clock runs the tile best there, `dse.perf.pass_cap`)."""
    gpu = gpu or load_gpu(samples.gpu)
    df = samples.frame
    n = len(df)
    f = gpu.clocks.boost_clock_hz if clock_hz is None else clock_hz
    clock = np.broadcast_to(np.asarray(f, dtype=float), (n,)).astype(float)
    fam = samples.spec.family
    if fam == "gemm":
        dtype = {"fp8_block": "fp8"}.get(samples.spec.label, samples.spec.label)
        out_dtype = "bf16"
        return gemm.gemm_arrays(
            m=df["m"].to_numpy(float),
            n=df["n"].to_numpy(float),
            k=df["k"].to_numpy(float),
            batch=np.ones(n),
            dtype=[dtype] * n,
            out_dtype=[out_dtype] * n,
            b_shared=np.zeros(n, dtype=bool),
            gpu=gpu,
            sm_clock_hz=clock,
            coeffs=coeffs,
            # vLLM's fp8 linear layers (CutlassFP8ScaledMMLinearKernel) were timed with their activation
            # quantization: the fp8 rows include it (ignored for 16-bit rows).
            act_quant=np.ones(n, dtype=bool),
            choice_clock_hz=None if choice_clock_hz is None else np.full(n, float(choice_clock_hz)),
        )
    if fam in ("attention_flash", "attention_decode"):
        act_b = np.full(n, 2.0)
        kv_b = np.where(df["kv_dtype"].to_numpy() == "fp8", 1.0, 2.0)
        common = dict(
            batch=df["batch"].to_numpy(float),
            seq_len_q=df["seq_len_q"].to_numpy(float),
            seq_len_kv=df["seq_len_kv"].to_numpy(float),
            num_heads=df["num_heads"].to_numpy(float),
            num_kv_heads=df["num_kv_heads"].to_numpy(float),
            head_dim=df["head_dim"].to_numpy(float),
            act_bytes=act_b,
            kv_bytes=kv_b,
            gpu=gpu,
            sm_clock_hz=clock,
            coeffs=coeffs,
        )
        if fam == "attention_flash":
            cache_write = (samples.spec.source, samples.spec.gpu_key) in CACHE_WRITE_TABLES
            return attention.flash_arrays(causal=np.ones(n, dtype=bool), cache_write=cache_write, **common)
        return attention.decode_arrays(**common)
    if fam in ("softmax", "layernorm"):
        return reduction.reduction_arrays(
            kind=np.full(n, reduction.KINDS.index(fam)),
            rows=df["rows"].to_numpy(float),
            cols=df["cols"].to_numpy(float),
            dtype_bytes=np.full(n, 2.0),
            gpu=gpu,
            sm_clock_hz=clock,
            coeffs=coeffs,
        )
    if fam == "elementwise":
        return elementwise.elementwise_arrays(
            kind=np.full(n, elementwise.KINDS.index(samples.spec.label)),
            num_elements=df["num_elements"].to_numpy(float),
            in_bytes=np.full(n, 2.0),
            out_bytes=np.full(n, 2.0),
            gpu=gpu,
            sm_clock_hz=clock,
            coeffs=coeffs,
        )
    raise ValueError(f"unknown kernel family {fam!r}")


def sample_ops(samples: KernelSamples) -> list[Op]:
    """The dse op of every row, as `evaluate` runs it (the input of the power model's cap rule)."""
    df, spec = samples.frame, samples.spec
    fam = spec.family
    if fam == "gemm":
        # The dataset label names the GEMM dtype (GemmOp rejects any other); fp8_block is fp8 data.
        dtype = cast(Dtype, {"fp8_block": "fp8"}.get(spec.label, spec.label))
        return [
            GemmOp(name=f"k{i}", m=int(m), n=int(n_), k=int(k), dtype=dtype, out_dtype="bf16", act_quant=True)
            for i, (m, n_, k) in enumerate(zip(df["m"], df["n"], df["k"], strict=True))
        ]
    if fam in ("attention_flash", "attention_decode"):
        cols = ["batch", "num_heads", "num_kv_heads", "head_dim", "seq_len_q", "seq_len_kv", "kv_dtype"]
        return [
            AttentionOp(
                name=f"k{i}",
                batch=int(b),
                num_heads=int(h),
                num_kv_heads=int(kvh),
                head_dim=int(d),
                seq_len_q=int(sq),
                seq_len_kv=int(skv),
                causal=True,
                backend="flash" if fam == "attention_flash" else "decode",
                dtype="bf16",
                kv_dtype="fp8" if kv == "fp8" else "bf16",
            )
            for i, (b, h, kvh, d, sq, skv, kv) in enumerate(df[cols].itertuples(index=False))
        ]
    if fam == "softmax":
        return [
            SoftmaxOp(name=f"k{i}", rows=int(r), cols=int(c))
            for i, (r, c) in enumerate(zip(df["rows"], df["cols"], strict=True))
        ]
    if fam == "layernorm":
        return [
            NormOp(name=f"k{i}", rows=int(r), cols=int(c), kind="layernorm")
            for i, (r, c) in enumerate(zip(df["rows"], df["cols"], strict=True))
        ]
    if fam == "elementwise":
        return [
            ElementwiseOp(name=f"k{i}", kind=spec.label, num_elements=int(e))
            for i, e in enumerate(df["num_elements"])
        ]
    raise ValueError(f"unknown kernel family {fam!r}")


def default_clock_hz(
    samples: KernelSamples,
    gpu: GpuSpec | None = None,
    coeffs: object | None = None,
    power_coeffs: PowerCoeffs | None = None,
) -> np.ndarray:
    """The clock of every row at the default operating point (boost requested, capped at the GPU's TDP),
    by the model's cap rule with latency coefficients `coeffs` (None: uncorrected) and energy
    coefficients `power_coeffs` (default: the shipped set of the GPU's architecture). Module docstring."""
    from dse.perf.coeffs import default_power_coeffs
    from dse.perf.dvfs import capped_rows
    from dse.perf.power import gpu_power_terms

    gpu = gpu or load_gpu(samples.gpu)
    if samples.frame.empty:
        return np.zeros(0)
    pc = power_coeffs or default_power_coeffs(gpu)
    ops, terms = sample_ops(samples), gpu_power_terms(gpu)
    capped = capped_rows(ops, gpu, OperatingPoint(), coeffs, pc, terms, sample_rows_fn(samples))
    return capped.rows["sm_clock_hz"]


def sample_rows_fn(samples: KernelSamples) -> RowEstimator:
    """The row estimator that models `sample_ops(samples)` as `evaluate` does: `op_rows`, with the
    KV-cache write for the context-attention tables that timed it (`CACHE_WRITE_TABLES`)."""
    spec = samples.spec
    if spec.family == "attention_flash" and (spec.source, spec.gpu_key) in CACHE_WRITE_TABLES:
        return functools.partial(op_rows, cache_write=True)
    return op_rows


def evaluate_at_default_point(
    samples: KernelSamples, gpu: GpuSpec | None = None, coeffs: object | None = None
) -> dict:
    """`evaluate` at `default_clock_hz` under the same coefficients: each row as `dse predict` gives it
    at the default operating point (what the validation scores), throttled GEMMs on the tile best at the
    clock they run at, as the shipped fits chose them."""
    gpu = gpu or load_gpu(samples.gpu)
    return evaluate(samples, gpu, coeffs, default_clock_hz(samples, gpu, coeffs))


def group_names(family: str) -> tuple[str, ...]:
    return {
        "gemm": gemm.GROUPS,
        "attention_flash": attention.FLASH_GROUPS,
        "attention_decode": attention.DECODE_GROUPS,
        "softmax": reduction.GROUPS,
        "layernorm": reduction.GROUPS,
        "elementwise": elementwise.GROUPS,
    }[family]


def _fallback_keys(group: str) -> list[str]:
    parts = group.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


def fit_buckets(
    out: dict, latency_s: np.ndarray, mask: np.ndarray, names: tuple[str, ...], huber_m: float | None
) -> dict[str, tuple[PhaseCoeffs, GroupInfo]]:
    """Fit every group the masked rows exercise, and its parent keys (the fallbacks), on those rows.

    `out` is a family model's output (`timeline`, `group` indices into `names`); a group needs
    MIN_GROUP_SAMPLES rows, a family's top-level key MIN_FAMILY_SAMPLES.
    """
    tl = out["timeline"]
    buckets: dict[str, np.ndarray] = {}
    for gi in np.unique(out["group"][mask]):
        sel = mask & (out["group"] == gi)
        buckets[names[gi]] = sel
        for key in _fallback_keys(names[gi]):
            buckets[key] = buckets.get(key, np.zeros_like(mask)) | sel
    fits: dict[str, tuple[PhaseCoeffs, GroupInfo]] = {}
    for name, sel in buckets.items():
        idx = np.nonzero(sel)[0]
        if idx.size < (MIN_FAMILY_SAMPLES if "/" not in name else MIN_GROUP_SAMPLES):
            continue

        def features_at(dm: float, dl: float, idx: np.ndarray = idx) -> np.ndarray:
            return tl.features(dm, dl)[idx]

        fit = fit_group(features_at, latency_s[idx], huber_m=huber_m)
        fits[name] = (
            fit.coeffs,
            GroupInfo(num_samples=fit.num_samples, mape_train=fit.mape, provenance="fit"),
        )
    return fits


def _fit_once(
    samples: KernelSamples, out: dict, mask: np.ndarray, huber_m: float | None
) -> dict[str, tuple[PhaseCoeffs, GroupInfo]]:
    return fit_buckets(out, samples.latency_s, mask, group_names(samples.spec.family), huber_m)


def fit_groups(
    samples: KernelSamples,
    gpu: GpuSpec | None = None,
    *,
    clock_hz: np.ndarray | float | None = None,
    min_latency_s: float = MIN_LATENCY_S,
    gemm_rounds: int = 3,
    huber_m: float | None = 0.05,
) -> tuple[dict[str, tuple[PhaseCoeffs, GroupInfo]], float]:
    """Fit the coefficient groups exercised by `samples` (the training rows), each row at `clock_hz`
    (default: the boost clock; the shipped fits pass `default_clock_hz`).

    Returns the groups (with their fallback entries) and the training MAPE over rows >= min_latency_s.
    """
    gpu = gpu or load_gpu(samples.gpu)
    y = samples.latency_s
    mask = y >= min_latency_s
    rounds = gemm_rounds if samples.spec.family == "gemm" else 1
    table = CoeffTable()
    best: tuple[float, dict] | None = None
    for _ in range(rounds):
        out = evaluate(samples, gpu, table, clock_hz)
        fits = _fit_once(samples, out, mask, huber_m)
        table = CoeffTable(groups={k: v[0] for k, v in fits.items()})
        pred = evaluate(samples, gpu, table, clock_hz)["latency_s"]
        mape = float(np.mean(np.abs(pred[mask] / y[mask] - 1.0)))
        if best is None or mape < best[0]:
            best = (mape, fits)
    assert best is not None
    return best[1], best[0]


# Datasets fitted for each shipped architecture set (all on the training 80 % of a seed-0 split).
FIT_DATASETS: dict[str, tuple[tuple[str, str, str, str], ...]] = {
    "hopper": (
        ("gemm", "aiconfigurator", "h100_sxm", "bf16"),
        ("gemm", "aiconfigurator", "h100_sxm", "fp8"),
        ("attention_flash", "aiconfigurator", "h100_sxm", "context"),
        ("attention_decode", "aiconfigurator", "h100_sxm", "generation"),
    ),
    "ampere": (
        ("gemm", "aiconfigurator", "a100_sxm", "bf16"),
        ("softmax", "llmcompass", "a100_80gb", "softmax"),
        ("layernorm", "llmcompass", "a100_80gb", "layernorm"),
        ("elementwise", "llmcompass", "a100_80gb", "gelu"),
    ),
}
HOLDOUT_FRAC = 0.2
HOLDOUT_SEED = 0


def train_test(samples: KernelSamples) -> tuple[KernelSamples, KernelSamples]:
    """The fixed hold-out split used for fitting (train) and validation (test)."""
    train, test = split_holdout(samples.frame, frac=HOLDOUT_FRAC, seed=HOLDOUT_SEED)
    return samples.subset(train), samples.subset(test)


def fit_architecture(
    arch: str, *, clock_coeffs: object | None = None, progress: object | None = None
) -> tuple[dict[str, tuple[PhaseCoeffs, GroupInfo]], list[dict], dict[str, float]]:
    """Fit every dataset of `arch` on its training split, each row at its default-operating-point clock
    (`default_clock_hz`) under the latency coefficients `clock_coeffs` (None: the shipped set).

    Returns the merged groups (a family-level key fitted by two datasets, e.g. `gemm` by bf16 and fp8,
    keeps the first dataset's fit), the source records (file, sha256, rows) and the training MAPE per
    dataset.
    """
    groups: dict[str, tuple[PhaseCoeffs, GroupInfo]] = {}
    sources: list[dict] = []
    errors: dict[str, float] = {}
    for family, source, gpu_key, label in FIT_DATASETS[arch]:
        spec = DatasetSpec(family=family, source=source, gpu_key=gpu_key, label=label)
        samples = load_samples(spec)
        train, _ = train_test(samples)
        gpu = load_gpu(train.gpu)
        ref = load_default_coeffs(gpu) if clock_coeffs is None else clock_coeffs
        clocks = default_clock_hz(train, gpu, ref)
        fits, mape = fit_groups(train, gpu, clock_hz=clocks)
        for name, value in fits.items():
            groups.setdefault(name, value)
        sources.append(
            {
                "file": f"{source}/{samples.path}",
                "sha256": file_sha256(samples.path, source),
                "rows": int(len(samples.frame)),
                "train_rows": int(len(train.frame)),
                "dataset": f"{family}:{gpu_key}:{label}",
            }
        )
        errors[f"{family}:{gpu_key}:{label}"] = mape
        if callable(progress):
            below = clocks < gpu.clocks.boost_clock_hz - 1.0
            progress(
                f"{family} {gpu_key} {label}: {len(fits)} groups, train MAPE {mape:.3f}; "
                f"{below.mean():.0%} of rows below boost (median {np.median(clocks) / 1e6:.0f} MHz)"
            )
    return groups, sources, errors

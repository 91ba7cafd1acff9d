"""Validation of measured sample files (`dse validate samples`), and the shared aiconfigurator tables
(`shared/data`) converted to sample files.

`validate_samples` scores the fitted coefficients (a `dse calibrate` file read by
`dse.calibrate.fit.samples.load_calibration`, or a fit made here by `dse.calibrate.fit.samples.calibrate`)
against the shipped default set and the uncorrected model, per family and clock, on the hold-out split of
`dse.calibrate.fit.sample_set.split_mask` (the same split as `dse calibrate`'s), with the rows predicted
as the prediction path gives them (`dse.calibrate.fit.samples.predict`).

`samples_from_aiconfigurator` converts the aiconfigurator rows of `shared/data` to `KernelSample` rows: a
real-data path into `dse.calibrate.fit.samples.calibrate`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np

from dse.calibrate.data.aiconfigurator import load_aiconfigurator_attention, load_aiconfigurator_gemm
from dse.calibrate.data.samples import KernelSample
from dse.calibrate.fit.kernels import MIN_LATENCY_S
from dse.calibrate.fit.sample_set import FAMILIES, HOLDOUT_FRAC, SEED, SampleSet, load_sample_set, split_mask
from dse.calibrate.fit.samples import (
    calibrate,
    check_generation,
    load_calibration,
    mape,
    power_mask,
    predict,
    warn_synthetic,
)
from dse.errors import ConfigError
from dse.hardware.spec import GpuSpec
from dse.perf.coeffs import default_power_coeffs, load_default_coeffs

# aiconfigurator power is a 1 s NVML mean over loops of >= 0.3-1 s: only kernels this long read right.
AIC_MIN_POWER_LATENCY_S = 1e-3


# ------------------------------------------------------------------------------------------ validation

VARIANTS: tuple[str, ...] = ("fitted", "default", "uncorrected")


def validate_samples(
    paths: Sequence[str | Path],
    *,
    coeffs_path: str | Path | None = None,
    gpu: str | GpuSpec | None = None,
    holdout_frac: float | None = None,
    seed: int | None = None,
    families: Iterable[str] | None = None,
    min_latency_s: float = MIN_LATENCY_S,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """MAPE rows per family and clock on the hold-out split: fitted vs shipped default vs uncorrected.

    `fitted` is the coefficient file `coeffs_path` (scored on the split it was fitted with when it was
    fitted on any of these files, else on all rows), or, without one, a fit on the training split made
    here. Latency is scored on kernels >= `min_latency_s`; power and energy on rows with measured power.
    Returns the rows and a header (gpu, split, coefficient sources).
    """
    if coeffs_path is not None:
        cs, pc, info = load_calibration(coeffs_path)
    ss = load_sample_set(paths, gpu, families)
    frac = holdout_frac if holdout_frac is not None else HOLDOUT_FRAC
    sd = seed if seed is not None else SEED
    if coeffs_path is not None:
        check_generation(coeffs_path, cs, ss.gpu)  # scored as `dse predict` would use it: not at all
        warn_synthetic(ss)  # made-up rows left out (else the fit below says so)
        fitted_on = {s.get("sha256") for s in cs.sources}
        given = {s["sha256"] for s in ss.sources}
        overlap = bool(given & fitted_on)
        if overlap and given != fitted_on:
            # The split is drawn over the distinct shapes of all files given: another set of files would
            # redraw it and score rows the fit trained on as held out.
            names = ", ".join(sorted(str(s.get("file", "?")) for s in cs.sources))
            raise ConfigError(
                f"{coeffs_path} was fitted on {names}: validate it with exactly those files (scored on their "
                "hold-out split) or only with files it never saw (scored on all rows), not a mix"
            )
        if overlap:
            frac = float(info.get("holdout_frac", frac)) if holdout_frac is None else frac
            sd = int(info.get("seed", sd)) if seed is None else sd
            is_test = split_mask(ss.frame, frac, sd)
            split = f"hold-out {frac:g} of shapes, seed {sd} (as fitted)"
        else:
            is_test = np.ones(len(ss.frame), dtype=bool)
            split = "all rows (none of these files was fitted)"
        fitted_latency, fitted_power, fitted_name = cs, pc, str(coeffs_path)
    else:
        is_test = split_mask(ss.frame, frac, sd)
        cal = calibrate(
            paths, ss.gpu, holdout_frac=frac, seed=sd, families=families, min_latency_s=min_latency_s
        )
        fitted_latency, fitted_power, fitted_name = cal.coeffs, cal.power, "fitted here on the training split"
        split = f"hold-out {frac:g} of shapes, seed {sd}"
    test = ss.take(is_test)
    default_power = default_power_coeffs(ss.gpu)
    variants = {
        "fitted": (fitted_latency, fitted_power or default_power),
        "default": (load_default_coeffs(ss.gpu), default_power),
        "uncorrected": (None, default_power),
    }
    preds = {v: predict(test, lat_c, pow_c) for v, (lat_c, pow_c) in variants.items()}
    pmask = power_mask(test.frame)
    out = []
    frame = test.frame
    for family in [f for f in FAMILIES if f in set(frame["family"])]:
        fam_sel = (frame["family"] == family).to_numpy()
        clocks = sorted(set(frame.loc[fam_sel, "clock"]), key=_clock_order)
        for clock in clocks + (["all"] if len(clocks) > 1 else []):
            sel = fam_sel & ((frame["clock"] == clock).to_numpy() if clock != "all" else True)
            out.append(_score(family, clock, sel, test, preds, pmask, min_latency_s))
    header = {
        "gpu": ss.gpu.name,
        "split": split,
        "fitted": fitted_name,
        "fitted_gpu": fitted_latency.gpu,
        "default": load_default_coeffs(ss.gpu).name,
        "power_fitted": fitted_power is not None,
        "files": [s["file"] for s in ss.sources],
        "skipped_kinds": dict(ss.skipped),
    }
    return out, header


def _clock_order(label: str) -> float:
    return float(label.split()[0]) if label != "default" else math.inf


def _score(
    family: str,
    clock: str,
    sel: np.ndarray,
    test: SampleSet,
    preds: dict,
    pmask: np.ndarray,
    min_latency_s: float,
) -> dict[str, Any]:
    lat = test.latency_s
    lsel = sel & (lat >= min_latency_s)
    psel = sel & pmask
    energy = test.frame["energy_j"].to_numpy(float)
    esel = psel & np.isfinite(energy) & (energy > 0)
    power = test.frame["avg_power_w"].to_numpy(float)
    row: dict[str, Any] = {"family": family, "clock": clock, "n": int(lsel.sum())}
    for v in VARIANTS:
        row[f"latency_{v}"] = mape(preds[v][0][lsel], lat[lsel])
    row["n_power"] = int(psel.sum())
    for v in VARIANTS:
        row[f"power_{v}"] = mape(preds[v][1][psel], power[psel])
    for v in VARIANTS:
        row[f"energy_{v}"] = mape(preds[v][2][esel], energy[esel])
    return row


# ------------------------------------------------------------------------- shared/data as samples


def samples_from_aiconfigurator(gpu_key: str, family: str, *, dtype: str | None = None) -> list[KernelSample]:
    """aiconfigurator rows (shared/data) as KernelSample rows: a real-data path into `calibrate`.

    Args:
        gpu_key: `h100_sxm`, `h200_sxm` (with power) or `a100_sxm` (GEMM only).
        family: `gemm`, `attention_flash` (context table) or `attention_decode` (generation table).
        dtype: GEMM dtype to keep (`bf16`, `fp8`; default all but `fp8_block`, which has no model dtype).

    Full attention only (sliding-window rows dropped) and KV cache of the attention dtype only (the schema
    has no KV dtype). Power (1 s NVML means) is kept only for kernels of >= AIC_MIN_POWER_LATENCY_S;
    energy_j = power x latency. No clock was locked or recorded: sm_clock_hz is None.
    """
    from dse.calibrate.fit.kernels import CATALOG_GPU

    if gpu_key not in CATALOG_GPU:
        raise ConfigError(
            f"unknown aiconfigurator gpu {gpu_key!r}; allowed: {', '.join(sorted(CATALOG_GPU))}"
        )
    gpu = CATALOG_GPU[gpu_key]
    if family == "gemm":
        df = load_aiconfigurator_gemm(gpu_key)
        df = df[df["dtype"] == dtype] if dtype else df[df["dtype"] != "fp8_block"]
    elif family in ("attention_flash", "attention_decode"):
        phase: Literal["context", "generation"] = "context" if family == "attention_flash" else "generation"
        df = load_aiconfigurator_attention(gpu_key, phase)
        df = df[(df["window_size"] == 0) & (df["kv_dtype"] == df["attn_dtype"])]
    else:
        raise ConfigError(f"unknown family {family!r}; allowed: gemm, attention_flash, attention_decode")
    source = f"aiconfigurator:{df['source'].iloc[0]}" if len(df) else "aiconfigurator"
    out = []
    for r in df.itertuples(index=False):
        lat = float(r.latency_s)
        p = float(r.power_w) if lat >= AIC_MIN_POWER_LATENCY_S else math.nan
        common: dict[str, Any] = {
            "gpu": gpu,
            "latency_s": lat,
            "avg_power_w": p,
            "energy_j": p * lat,
            "power_limit_w": float(r.power_limit_w),
            "energy_method": "nvml_power_mean",
            "source": source,
        }
        if family == "gemm":
            shape = f"{r.m}x{r.n}x{r.k}"
            out.append(
                KernelSample(
                    kind="gemm",
                    name=f"gemm_{r.dtype}_{shape}",
                    dtype=r.dtype,
                    # vLLM timed its fp8 linear layers with their dynamic activation quantization
                    variant="act_quant" if r.dtype == "fp8" else "",
                    m=int(r.m),
                    n=int(r.n),
                    k=int(r.k),
                    batch=1,
                    **common,
                )
            )
        else:
            out.append(
                KernelSample(
                    kind=family,
                    name=f"{family}_b{r.batch}_q{r.seq_len_q}_kv{r.seq_len_kv}_h{r.num_heads}x{r.num_kv_heads}"
                    f"_d{r.head_dim}",
                    dtype=r.attn_dtype,
                    variant="flash" if family == "attention_flash" else "decode",
                    causal=True,
                    batch=int(r.batch),
                    seq_len_q=int(r.seq_len_q),
                    seq_len_kv=int(r.seq_len_kv),
                    num_heads=int(r.num_heads),
                    num_kv_heads=int(r.num_kv_heads),
                    head_dim=int(r.head_dim),
                    **common,
                )
            )
    return out

"""Experiment (not shipped): a per-GPU sustained DRAM bandwidth in the analytical kernel model, and what it
does to the cross-generation transfer of the GEMM corrections.

    .venv/bin/python scripts/experiment_sustained_bw.py                  # A100 0.77, H100 0.90 (~6 min)
    .venv/bin/python scripts/experiment_sustained_bw.py --a100 1 --h100 1 # the shipped model, for comparison

The analytical model streams DRAM at the datasheet bandwidth. Measured streaming kernels reach less, and by
a different share on each GPU: LLMCompass's A100 GELU sweep (`../shared/data/llmcompass/a100_gelu.csv`)
peaks at 1.56 TB/s of 2.04 (0.77), our H100 copy and add kernels
(`dse/calibrate/measured/h100_sxm_kernels.csv`) at 2.98-3.04 TB/s of 3.35 (0.89-0.91). The fitted
corrections absorb the difference on their own GPU, so the A100 set slows every H100 GEMM that streams its
weights and the H100 set speeds the A100's up.

This script scales `Rates.dram_bw_bytes_per_s` by the given fractions (patched into the modules that build
rates; nothing in dse changes), refits the bf16 GEMM corrections on each GPU's aiconfigurator training split
(`dse.calibrate.fit.kernels.fit_groups`, one pass, clocks from the shipped sets) and scores each set on
both GPUs' hold-out rows (>= 10 us). Session 23 (2-core VM):

    fractions        H100 own / A100 set / analytical    A100 own / H100 set / analytical
    1.00, 1.00       9.3% / 29.1% / 15.1%                7.3% / 18.7% / 27.0%
    0.77, 0.90       8.6% / 14.2% / 11.9%                7.7% / 14.7% / 20.2%

Shipping it means a GPU field with a sourced fraction per catalog GPU and a refit of every latency set, the
MoE and power sets and the constants fitted downstream of them (host time per step, B200 idle).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from typing import Any

import numpy as np

import dse.perf.rates as rates_module
from dse.calibrate.fit import kernels as fit
from dse.hardware.catalog import load_gpu
from dse.perf.coeffs import CoeffSet
from dse.perf.types import CoeffTable


def patch_rates(fractions: dict[str, float]) -> None:
    """Every dse module's `rates_at` scales the DRAM bandwidth of the named GPUs."""
    original = rates_module.rates_at

    def rates_at(gpu: Any, sm_clock_hz: Any) -> Any:
        r = original(gpu, sm_clock_hz)
        bw = r.dram_bw_bytes_per_s * fractions.get(gpu.name, 1.0)
        return dataclasses.replace(r, dram_bw_bytes_per_s=bw)

    for module in list(sys.modules.values()):
        if (
            getattr(module, "__name__", "").startswith("dse.")
            and getattr(module, "rates_at", None) is original
        ):
            module.rates_at = rates_at  # type: ignore[attr-defined]


def _mape(pred: np.ndarray, meas: np.ndarray) -> float:
    return float(100 * np.mean(np.abs(pred / meas - 1)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a100", type=float, default=0.77, help="A100 SXM 80GB sustained DRAM fraction")
    parser.add_argument("--h100", type=float, default=0.90, help="H100 SXM sustained DRAM fraction")
    args = parser.parse_args(argv)
    # the modules that build rates, imported before the patch replaces their `rates_at`
    import dse.perf.attention  # noqa: F401
    import dse.perf.elementwise  # noqa: F401
    import dse.perf.gemm  # noqa: F401
    import dse.perf.gemm_rows  # noqa: F401
    import dse.perf.reduction  # noqa: F401

    patch_rates({"a100-sxm-80gb": args.a100, "h100-sxm": args.h100})
    specs = [
        s for s in fit.kernel_datasets()
        if s.family == "gemm" and s.source == "aiconfigurator" and s.label == "bf16"
        and s.gpu_key in ("h100_sxm", "a100_sxm")
    ]  # fmt: skip
    sets: dict[str, CoeffSet] = {}
    tests: dict[str, tuple[Any, Any]] = {}
    for spec in specs:
        start = time.time()
        train, test = fit.train_test(fit.load_samples(spec))
        gpu = load_gpu(train.gpu)
        fits, mape = fit.fit_groups(train, gpu, clock_hz=fit.default_clock_hz(train, gpu, None))
        table = CoeffTable(groups={name: pc for name, (pc, _info) in fits.items()})
        sets[spec.gpu_key] = CoeffSet(name=spec.gpu_key, architecture=gpu.architecture, table=table)
        tests[spec.gpu_key] = (test.subset(test.frame[test.latency_s >= fit.MIN_LATENCY_S]), gpu)
        print(f"{spec.gpu_key}: fitted in {time.time() - start:.0f} s, train MAPE {mape:.3f}", flush=True)
    for key, (test, gpu) in tests.items():
        for source, cs in sets.items():
            out = fit.evaluate_at_default_point(test, gpu, cs)
            print(f"{key} hold-out, {source} set: {_mape(out['latency_s'], test.latency_s):.1f}%")
        out = fit.evaluate_at_default_point(test, gpu, None)
        print(f"{key} hold-out, analytical: {_mape(out['analytical_s'], test.latency_s):.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Experiment (not shipped): a per-GPU sustained DRAM bandwidth in the analytical kernel model, and what it
does to the cross-generation transfer of the GEMM corrections.

    .venv/bin/python scripts/experiment_sustained_bw.py                  # A100 0.77, H100 0.90 (~6-14 min)
    .venv/bin/python scripts/experiment_sustained_bw.py --a100 1 --h100 1 # the shipped model, for comparison
    .venv/bin/python scripts/experiment_sustained_bw.py --streaming      # each table's streaming fit (~10 s)

The analytical model streams DRAM at the datasheet bandwidth. Measured streaming kernels reach less, and by
a different share on each GPU: LLMCompass's A100 GELU sweep (`../shared/data/llmcompass/a100_gelu.csv`)
peaks at 1.56 TB/s of 2.04 (0.77), our H100 copy and add kernels
(`dse/calibrate/measured/h100_sxm_kernels.csv`) at 2.98-3.04 TB/s of 3.35 (0.89-0.91). The fitted
corrections absorb the difference on their own GPU, so the A100 set slows every H100 GEMM that streams its
weights and the H100 set speeds the A100's up.

This script scales `Rates.dram_bw_bytes_per_s` by the given fractions (patched into the modules that build
rates; nothing in dse changes), refits the bf16 GEMM corrections on each GPU's aiconfigurator training split
(`dse.calibrate.fit.kernels.fit_groups`, one pass, clocks from the shipped sets) and scores each set on
both GPUs' hold-out rows (>= 10 us), the other GPU's set also with its fixed costs (eps) held in SM cycles
at each GPU's boost clock instead of in seconds, and the A100 set on the H100 fp8 GEMMs (a quarter of the
H100 rows of `dse validate transfer`'s kernel row; they take the A100 set's family-level `gemm` entry).
Session 23 / session 30 (2-core VM; "cycles": the cross set's fixed costs in SM cycles):

    fractions        H100 own / A100 set (cycles) / analytical    A100 own / H100 set (cycles) / analytical
    1.00, 1.00       9.3% / 29.1% (25.8%) / 15.1%                 7.3% / 18.7% (16.7%) / 27.0%
    0.77, 0.90       8.6% / 14.2% (12.1%) / 11.9%                 7.7% / 14.7% (13.0%) / 20.2%
    H100 fp8 GEMMs, A100 set: 36.2% (32.4%) at 1.00; 25.2% (21.4%) at 0.77 / 0.90 (analytical 14.7%)

At 0.77 / 0.90 with the fixed costs in cycles, the cross errors sit in the large-GEMM schedules: A100 set on
H100 bf16 large 13.2% and stream-K 17.3% (median 1.12x / 1.15x slow); H100 set on A100 split-K 17.5% and
stream-K 13.6% (0.83x / 0.90x fast); A100 set on H100 fp8 small 43% (1.35x slow). Dropping the cross set's
math and load derates as well (`without_derates`; the A100's large GEMMs carry a load derate of 2) gives
A100 set -> H100 bf16 9.6%, but H100 set -> A100 13.8% (13.0% with them) and the fp8 rows 21.4% either way:
the derates do not transfer in one direction and are needed in the other, so this is no rule either.

`--streaming` fits each aiconfigurator bf16 table's weight-streaming GEMMs (m <= 16, >= 16 MB of weights)
as a fixed cost plus bytes over a sustained bandwidth (relative least squares): A100 0.762 of its catalog
bandwidth + 6.5 us (9.2 thousand cycles at 1410 MHz), H100 0.878 + 3.6 us (7.2k at 1980), H200 0.883 +
3.9 us (7.6k at 1980). The H200's HBM3e streams at the H100's share (same memory controllers, another
memory), and the fixed cost is the same in neither seconds (A100 1.8x H100) nor cycles (1.3x).

Shipping it means a GPU field with a sourced fraction per catalog GPU and a refit of every latency set, the
MoE and power sets and the constants fitted downstream of them (host time per step, B200 idle); session
23's full refit (every set, one pass) read 16.9% / 13.4% on the two kernel transfer rows, but moved the
GDDR GPUs: the A10 forecast 11.3 -> 15.1% at 1.0, the RTX 4090 inference rows 18.4 / 15.5 -> 32.2 / 24.9%
at aiconfigurator's 0.8 default, and our H100 eager whole models 17.6 -> 19.7%.
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
from dse.calibrate.fit.kernels import DatasetSpec
from dse.hardware.catalog import load_gpu
from dse.perf.coeffs import CoeffSet
from dse.perf.gemm import GROUPS as GEMM_GROUPS
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


def eps_in_cycles(cs: CoeffSet, from_hz: float, to_hz: float) -> CoeffSet:
    """`cs` with every group's fixed cost held in SM cycles instead of seconds (moved from a GPU whose
    boost clock is `from_hz` to one at `to_hz`)."""
    groups = {
        name: dataclasses.replace(pc, eps_s=pc.eps_s * from_hz / to_hz)
        for name, pc in cs.table.groups.items()
    }
    return dataclasses.replace(cs, table=CoeffTable(groups=groups))


def without_derates(cs: CoeffSet) -> CoeffSet:
    """`cs` with its math and load derates at 1 (each GPU's own feed rates, as the analytical model has
    them), the lambdas and fixed costs kept."""
    groups = {
        name: dataclasses.replace(pc, math_derate=1.0, load_derate=1.0)
        for name, pc in cs.table.groups.items()
    }
    return dataclasses.replace(cs, table=CoeffTable(groups=groups))


def _print_eps(sets: dict[str, CoeffSet], clocks_hz: dict[str, float]) -> None:
    """Each set's fitted bf16 GEMM fixed costs, in us and in thousands of SM cycles at its boost clock."""
    for key, cs in sets.items():
        for name in sorted(cs.table.groups):
            eps = cs.table.groups[name].eps_s
            print(f"  {key} {name}: eps {eps * 1e6:.1f} us = {eps * clocks_hz[key] / 1e3:.1f} kcycles")


def _fit_sets(specs: list[Any]) -> tuple[dict[str, CoeffSet], dict[str, tuple[Any, Any]]]:
    """The bf16 GEMM corrections refitted on each GPU's training split, and each GPU's hold-out rows."""
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
    return sets, tests


def _score(label: str, test: Any, gpu: Any, sets: dict[str, CoeffSet], clocks_hz: dict[str, float]) -> None:
    """One hold-out table under each set (the other GPU's also with its fixed costs in cycles)."""
    for source, cs in sets.items():
        out = fit.evaluate_at_default_point(test, gpu, cs)
        line = f"{label}, {source} set: {_mape(out['latency_s'], test.latency_s):.1f}%"
        if clocks_hz[source] != gpu.clocks.boost_clock_hz:
            moved = eps_in_cycles(cs, clocks_hz[source], gpu.clocks.boost_clock_hz)
            out = fit.evaluate_at_default_point(test, gpu, moved)
            line += f" (fixed costs in cycles: {_mape(out['latency_s'], test.latency_s):.1f}%"
            bare = fit.evaluate_at_default_point(test, gpu, without_derates(moved))
            line += f"; and without its derates: {_mape(bare['latency_s'], test.latency_s):.1f}%)"
            print(line, flush=True)
            _print_by_group(bare, test.latency_s)
        else:
            print(line, flush=True)
        _print_by_group(out, test.latency_s)
    out = fit.evaluate_at_default_point(test, gpu, None)
    print(f"{label}, analytical: {_mape(out['analytical_s'], test.latency_s):.1f}%", flush=True)


def streaming_fit(gpu_key: str) -> tuple[float, float, int]:
    """(sustained DRAM fraction, fixed cost s, rows) of a GPU's weight-streaming bf16 GEMMs.

    The aiconfigurator rows with m <= 16 and at least 16 MB of weights read each weight once, so their
    latency is a fixed cost plus bytes over the sustained bandwidth; fitted on relative error (as MAPE
    scores it), as a fraction of the catalog bandwidth."""
    spec = DatasetSpec(family="gemm", source="aiconfigurator", gpu_key=gpu_key, label="bf16")
    samples = fit.load_samples(spec)
    df = samples.frame
    m, n, k = (df[c].to_numpy(float) for c in ("m", "n", "k"))
    moved_b = 2.0 * (n * k + m * k + m * n)
    keep = (m <= 16) & (moved_b >= 16e6)
    y = samples.latency_s[keep]
    design = np.stack([np.ones(keep.sum()), moved_b[keep]], axis=1) / y[:, None]
    fixed_s, s_per_b = np.linalg.lstsq(design, np.ones(keep.sum()), rcond=None)[0]
    bw = load_gpu(samples.gpu).memory.bw_bytes_per_s
    return float(1.0 / s_per_b / bw), float(fixed_s), int(keep.sum())


def _print_streaming() -> None:
    for key in ("a100_sxm", "h100_sxm", "h200_sxm"):
        frac, fixed_s, rows = streaming_fit(key)
        clock_hz = load_gpu(fit.CATALOG_GPU[key]).clocks.boost_clock_hz
        print(
            f"{key}: {rows} weight-streaming GEMMs: {frac:.3f} of the catalog bandwidth"
            f" + {fixed_s * 1e6:.1f} us ({fixed_s * clock_hz / 1e3:.1f} kcycles at {clock_hz / 1e6:.0f} MHz)"
        )


def _print_by_group(out: dict, latency_s: np.ndarray) -> None:
    """MAPE and median ratio (predicted / measured) per GEMM group of one scored table."""
    ratio = out["latency_s"] / latency_s
    for gi in np.unique(out["group"]):
        sel = out["group"] == gi
        print(
            f"    {GEMM_GROUPS[gi]}: n {sel.sum()}, {100 * np.mean(np.abs(ratio[sel] - 1)):.1f}%,"
            f" median ratio {np.median(ratio[sel]):.2f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--a100", type=float, default=0.77, help="A100 SXM 80GB sustained DRAM fraction")
    parser.add_argument("--h100", type=float, default=0.90, help="H100 SXM sustained DRAM fraction")
    parser.add_argument(
        "--streaming",
        action="store_true",
        help="only the weight-streaming fit of each GPU's GEMM table (~10 s)",
    )
    args = parser.parse_args(argv)
    if args.streaming:
        _print_streaming()
        return 0
    # the modules that build rates, imported before the patch replaces their `rates_at`
    import dse.perf.attention  # noqa: F401
    import dse.perf.elementwise  # noqa: F401
    import dse.perf.gemm  # noqa: F401
    import dse.perf.gemm_rows  # noqa: F401
    import dse.perf.reduction  # noqa: F401

    patch_rates({"a100-sxm-80gb": args.a100, "h100-sxm": args.h100})
    pick = [("h100_sxm", "bf16"), ("a100_sxm", "bf16"), ("h100_sxm", "fp8")]
    specs = {
        (s.gpu_key, s.label): s for s in fit.kernel_datasets()
        if s.family == "gemm" and s.source == "aiconfigurator" and (s.gpu_key, s.label) in pick
    }  # fmt: skip
    sets, tests = _fit_sets([specs[k] for k in pick[:2]])
    clocks_hz = {key: gpu.clocks.boost_clock_hz for key, (_test, gpu) in tests.items()}
    _print_eps(sets, clocks_hz)
    for key, (test, gpu) in tests.items():
        _score(f"{key} bf16 hold-out", test, gpu, sets, clocks_hz)
    # the H100 fp8 GEMMs are in the kernel transfer row too: the A100 set has no fp8 groups, so they take
    # its family-level `gemm` entry (scored under the A100 set only; the own column needs an fp8 refit)
    _train, fp8 = fit.train_test(fit.load_samples(specs[pick[2]]))
    gpu = load_gpu(fp8.gpu)
    fp8 = fp8.subset(fp8.frame[fp8.latency_s >= fit.MIN_LATENCY_S])
    _score("h100_sxm fp8 hold-out", fp8, gpu, {"a100_sxm": sets["a100_sxm"]}, clocks_hz)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Regenerate the shipped kernel-latency coefficient sets (dse/perf/data/coeffs_{hopper,ampere}.json).

    .venv/bin/python scripts/fit_default_coeffs.py            # both sets (~20 minutes: two passes)
    .venv/bin/python scripts/fit_default_coeffs.py --arch hopper --passes 1

Each set is fitted on the training 80 % of a seed-0 hold-out split of its datasets
(`dse.calibrate.fit.kernels.FIT_DATASETS`), so `dse.calibrate.validate.kernels.validate_kernels` reports
honest hold-out errors. Families without data on an architecture are transferred from the other set and marked
so in each group's `provenance`.

Each row is fitted at the clock the model gives it at the default operating point (boost requested, capped
at the TDP: `dse.calibrate.fit.kernels.default_clock_hz`). That clock depends on the latency coefficients,
so the fit runs in passes: the first takes the clocks from the shipped sets, each later pass from the
previous pass's sets.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path

import dse
from dse.calibrate.fit.kernels import HOLDOUT_FRAC, HOLDOUT_SEED, fit_architecture
from dse.perf.coeffs import CoeffSet, GroupInfo, save_coeffs
from dse.perf.types import CoeffTable, PhaseCoeffs

OUT_DIR = Path(__file__).resolve().parents[1] / "dse" / "perf" / "data"
GPU_OF = {"hopper": "h100-sxm", "ampere": "a100-sxm-80gb"}
# Launch floor given to transferred streaming kernels on Hopper: the smallest H100 GEMMs of the
# aiconfigurator data (CUDA graphs) take 2.2-2.6 us, so an empty kernel costs about 2 us.
LAUNCH_FLOOR_S = 2e-6
METHOD = (
    "per-group cvxpy QP: Huber (M = 0.05) on relative error, lambda_pro >= 0, lambda_main >= 1, "
    "lambda_epi >= 1, eps >= 0, grid over one math or load derate in [1, 2]; GEMM tile selection "
    f"re-done with the fitted coefficients (3 rounds); kernels >= 10 us; hold-out {HOLDOUT_FRAC:.0%} "
    f"seed {HOLDOUT_SEED} excluded from the fit; each row at the model's clock at the default operating "
    "point (boost, capped at the TDP by the power model), under the previous pass's coefficients (the "
    "shipped set's in the first pass)"
)


def _transfer(
    src: dict[str, tuple[PhaseCoeffs, GroupInfo]], prefixes: tuple[str, ...], note: str, eps_s: float | None
) -> dict[str, tuple[PhaseCoeffs, GroupInfo]]:
    out = {}
    for name, (c, info) in src.items():
        if not name.startswith(prefixes):
            continue
        if eps_s is not None:
            c = PhaseCoeffs(
                lambda_pro=c.lambda_pro,
                lambda_main=c.lambda_main,
                lambda_epi=c.lambda_epi,
                eps_s=eps_s,
                math_derate=c.math_derate,
                load_derate=c.load_derate,
            )
        out[name] = (c, GroupInfo(num_samples=info.num_samples, mape_train=info.mape_train, provenance=note))
    return out


def _power_created(arch: str) -> str:
    """When the energy set the clocks were decided with was made (it is refitted after this script)."""
    from dse.perf.coeffs import load_power_coeffs

    return f"created {load_power_coeffs(arch).provenance.get('created', 'unknown')}"


def _fit_pass(clock_coeffs: dict[str, CoeffTable | None], p: int) -> tuple[dict, dict]:
    """Both architectures fitted at the clocks `clock_coeffs` give, and the cross-architecture transfers."""
    fits = {}
    for arch in ("hopper", "ampere"):
        print(f"pass {p}: fitting {arch} ...", flush=True)
        fits[arch] = fit_architecture(
            arch, clock_coeffs=clock_coeffs[arch], progress=lambda msg: print("  " + msg, flush=True)
        )
    transfers = {
        "hopper": _transfer(
            fits["ampere"][0],
            ("softmax", "norm", "elementwise"),
            "transferred: lambdas of the ampere fit (LLMCompass A100), eps = 2 us launch floor",
            LAUNCH_FLOOR_S,
        ),
        "ampere": _transfer(
            fits["hopper"][0],
            ("attention",),
            "transferred: hopper fit (H100 vLLM FlashAttention-3); no A100 attention data",
            None,
        ),
    }
    return fits, transfers


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--arch", choices=["hopper", "ampere", "all"], default="all")
    parser.add_argument("--out-dir", type=Path, default=OUT_DIR)
    parser.add_argument("--passes", type=int, default=2, help="clock / fit passes (module docstring)")
    args = parser.parse_args(argv)
    if args.passes < 1:
        parser.error("--passes must be at least 1")
    clock_coeffs: dict[str, CoeffTable | None] = {"hopper": None, "ampere": None}  # None: the shipped sets
    fits: dict = {}
    transfers: dict = {}
    for p in range(1, args.passes + 1):
        fits, transfers = _fit_pass(clock_coeffs, p)
        clock_coeffs = {
            arch: CoeffTable(groups={k: v[0] for k, v in {**transfers[arch], **fits[arch][0]}.items()})
            for arch in fits
        }
    today = dt.date.today().isoformat()
    for arch in ("hopper", "ampere") if args.arch == "all" else (args.arch,):
        groups, sources, errors = fits[arch]
        merged = {**transfers[arch], **groups}
        cs = CoeffSet(
            name=f"{arch}-default",
            architecture=arch,
            gpu=GPU_OF[arch],
            created=today,
            dse_version=dse.__version__,
            sources=tuple(sources),
            method=f"{METHOD}; {args.passes} pass(es); cap rule with the energy set "
            f"power_{arch}.json as shipped when fitted ({_power_created(arch)})",
            notes="kernel latency corrections (EnergAIzer eq. 3) for the dse analytical kernel model",
            fit_error=errors,
            table=CoeffTable(groups={k: v[0] for k, v in merged.items()}),
            group_info={k: v[1] for k, v in merged.items()},
        )
        path = args.out_dir / f"coeffs_{arch}.json"
        save_coeffs(cs, path)
        print(f"wrote {path} ({len(merged)} groups)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

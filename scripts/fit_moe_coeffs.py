"""Fit the fused-MoE grouped-GEMM correction (`dse.perf.moe`) on aiconfigurator's H100 vLLM MoE table and
write `dse/perf/data/moe_hopper.json` (`dse.calibrate.fit.moe.fit_moe_coeffs`).

    .venv/bin/python scripts/fit_moe_coeffs.py            # ~1 min on 2 cores
"""

from __future__ import annotations

from pathlib import Path

from dse.calibrate.fit.moe import fit_moe_coeffs
from dse.perf.coeffs import write_moe_coeffs

OUT = Path(__file__).resolve().parents[1] / "dse" / "perf" / "data" / "moe_hopper.json"

if __name__ == "__main__":
    coeffs = fit_moe_coeffs()
    write_moe_coeffs(coeffs, OUT)
    for key, fit in coeffs.groups.items():
        us = fit.expert_s * 1e6
        print(f"{key}: math_eff {fit.math_eff:.3f}, expert_s {us:.2f} us, train MAPE {fit.mape_train:.3f}")
    print(f"wrote {OUT}")

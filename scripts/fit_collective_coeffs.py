"""Fit the shipped collective-communication coefficients (`dse/perf/data/collectives_<arch>.json`).

    .venv/bin/python scripts/fit_collective_coeffs.py            # writes collectives_{hopper,blackwell}.json
    .venv/bin/python scripts/fit_collective_coeffs.py --dry-run  # fit and print, write nothing

hopper: the aiconfigurator H100 SXM tables only, so H200 stays an out-of-sample check of the same
generation; blackwell: the B200 SXM tables. Ampere and Ada borrow hopper's (dse.perf.coeffs).
`dse validate collectives` prints the per-table errors.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from dse.calibrate.fit.collectives import build_collective_coeffs, load_comm_samples
from dse.perf.coeffs import write_collective_coeffs

SHIPPED = {"hopper": "h100_sxm", "blackwell": "b200_sxm"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="fit and print, write nothing")
    args = parser.parse_args()
    samples = load_comm_samples()
    out_dir = Path(__file__).resolve().parents[1] / "dse" / "perf" / "data"
    for arch, system in SHIPPED.items():
        coeffs = build_collective_coeffs(system, arch, samples)
        for key, fit in coeffs.fits.items():
            print(f"{arch:9} {key:24} n={fit.num_samples:4d} mape={100 * (fit.mape_train or 0):5.1f}%")
        if not args.dry_run:
            write_collective_coeffs(coeffs, out_dir / f"collectives_{arch}.json")


if __name__ == "__main__":
    main()

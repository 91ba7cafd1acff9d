"""Fit the v1 energy coefficients (independent per generation) and print their held-out errors.

The shipped sets come from the joint fit (`scripts/fit_power_joint.py`); these v1 sets are kept as
`power_{ampere,hopper}-v1.json` for comparison (`dse validate transfer`).

    .venv/bin/python scripts/fit_power_coeffs.py            # writes dse/perf/data/power_*-v1.json
    .venv/bin/python scripts/fit_power_coeffs.py --dry-run  # fit and validate, write nothing
    .venv/bin/python scripts/fit_power_coeffs.py --only hopper  # refit one set, keep the other file

ampere: EnergAIzer A100 PCIe 40 GB forward passes (900 MHz set and 510-1410 MHz DVFS sweep), training
workloads of the by-workload split, through the eager host queue (dse.perf.host); no A10 data.
hopper: aiconfigurator H200 GEMM and generation-attention power tables, kernels >= 1 ms, training rows,
through the 700 W cap (context attention is validated only: `validate_power.HOPPER_FAMILY_WEIGHT` says
why). The latency model
uses its shipped default coefficients (`dse.perf.coeffs.load_default_coeffs`). See
`dse.calibrate.validate.power` for the data rules.
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import sys
from pathlib import Path

import dse
from dse.calibrate.data.aiconfigurator import AIC_ATTENTION_FILES, AIC_GEMM_FILES
from dse.calibrate.data.common import data_root
from dse.calibrate.data.energaizer import ENERGAIZER_FILES
from dse.calibrate.fit.power_sets import H200_FAMILIES, a100_split, fit_ampere, fit_hopper, h200_split
from dse.calibrate.validate.power import rows_frame, validate_power
from dse.hardware.catalog import load_gpu
from dse.perf.coeffs import PowerCoeffs, load_default_coeffs, load_power_coeffs, write_power_coeffs

OUT_DIR = Path(__file__).resolve().parents[1] / "dse" / "perf" / "data"


def _sources(parts: list[tuple[str, str]]) -> list[dict[str, str]]:
    root = data_root()
    out = []
    for folder, name in parts:
        path = root / folder / name
        out.append({"file": f"{folder}/{name}", "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
    return out


def _stamp(pc: PowerCoeffs, sources: list[dict[str, str]], latency_coeffs: str) -> PowerCoeffs:
    prov = {
        **pc.provenance,
        "created": datetime.date.today().isoformat(),
        "dse_version": dse.__version__,
        "sources": sources,
        "latency_coeffs": latency_coeffs,
        "method": pc.provenance.get(
            "method",
            "dse.calibrate.fit.power.fit_power_rows (cvxpy, relative least squares, coefficients >= 0)",
        ),
        "units": "J/byte (l2, smem), J per bf16-equivalent FLOP (tensor), J/FLOP (cuda), J/op (sfu), "
        "dimensionless (dram_scale, x catalog e_bit), J per SM cycle (active, gap), at 1 V",
    }
    return PowerCoeffs(**{**pc.to_dict(), "provenance": prov})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true", help="fit and validate, write nothing")
    parser.add_argument("--out", type=Path, default=OUT_DIR)
    parser.add_argument(
        "--only",
        choices=("ampere", "hopper"),
        help="fit and write only this set; the other is validated from its shipped file",
    )
    args = parser.parse_args(argv)

    if args.only == "hopper":
        ampere = load_power_coeffs("ampere-v1")
    else:
        a100 = load_gpu("a100-pcie-40gb")
        lat_a = load_default_coeffs(a100)
        train, _ = a100_split()
        ampere, _ = fit_ampere(train, coeffs=lat_a, cache_={})
        ampere = _stamp(
            ampere,
            _sources([("energaizer", ENERGAIZER_FILES["a100"]), ("energaizer", ENERGAIZER_FILES["dvfs"])]),
            lat_a.name,
        )
        print("ampere:", ampere.to_dict())
    if args.only == "ampere":
        hopper = load_power_coeffs("hopper-v1")
        rows = validate_power(ampere=ampere, hopper=hopper, include_train=True)
        print(rows_frame(rows).to_string())
        if not args.dry_run:
            args.out.mkdir(parents=True, exist_ok=True)
            write_power_coeffs(ampere, args.out / "power_ampere-v1.json")
            print(f"wrote {args.out / 'power_ampere-v1.json'}")
        return 0

    h200 = load_gpu("h200-sxm")
    lat_h = load_default_coeffs(h200)
    trains = {f: h200_split(f)[0] for f in H200_FAMILIES}
    hopper, clocks = fit_hopper(trains, coeffs=lat_h)
    hopper = _stamp(
        hopper,
        _sources(
            [("aiconfigurator", AIC_GEMM_FILES["h200_sxm"])]
            + [("aiconfigurator", AIC_ATTENTION_FILES[("h200_sxm", p)]) for p in ("context", "generation")]
        ),
        lat_h.name,
    )
    print("hopper:", hopper.to_dict())
    for family, f in clocks.items():
        lo, hi, mean = f.min() / 1e6, f.max() / 1e6, f.mean() / 1e6
        print(f"  {family}: effective clock {lo:.0f}-{hi:.0f} MHz, mean {mean:.0f}")

    rows = validate_power(ampere=ampere, hopper=hopper, include_train=True)
    print(rows_frame(rows).to_string())
    if not args.dry_run:
        args.out.mkdir(parents=True, exist_ok=True)
        if args.only != "hopper":
            write_power_coeffs(ampere, args.out / "power_ampere-v1.json")
            print(f"wrote {args.out / 'power_ampere-v1.json'}")
        write_power_coeffs(hopper, args.out / "power_hopper-v1.json")
        print(f"wrote {args.out / 'power_hopper-v1.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

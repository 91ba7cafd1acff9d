"""Joint power fit (`dse.calibrate.fit.power_joint`): both NVML variants, in-sample and leave-one-out.

    .venv/bin/python scripts/fit_power_joint.py                 # print the comparison, write nothing
    .venv/bin/python scripts/fit_power_joint.py --out DIR      # write the refitted sets to DIR

Rows: the shipped sets; the joint fit on A100 whole models + H200 kernels + the 30 ML.ENERGY H100 serving
runs of `dse validate serving` + our H100 kernels and whole models, Hopper's capacitance ratio fitted (each
NVML variant; the serving runs linearized through the load model, `dse.calibrate.fit.power_serving`, ~4
minutes); the same without our H100 whole models (kernel -> whole-model transfer on H100); and the same
method on one generation's kernel or whole-model data only, predicting the other (leave one generation out;
no serving rows in these). Errors are on the held-out splits of `dse.calibrate.fit.power_sets` (our H100
rows: in-sample where fitted). With --out it writes the "downweight" variant's sets: power_ampere.json and
power_hopper.json (both generations), power_hopper-loo.json (Hopper energies of the A100-only fit) and
power_ampere-loo.json (Ampere energies of the H200-only fit) and power_hopper-kernels.json (the joint fit
without our H100 whole models), which `dse validate transfer` uses for its transfer rows.

The shipped sets in dse/perf/data were written by this script under the earlier host queue (a fixed 15 us
dispatch gap) and kept when the gap became SM cycles: their provenance's `host` and `host_note` say so and
what a refit under the new gap gave. Run with `--out DIR` to compare; writing into dse/perf/data replaces
them (and drops `host_note`).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

import numpy as np
import pandas as pd
from fit_power_coeffs import _sources, _stamp  # scripts/ is sys.path[0] when run as a script

from dse.calibrate.data.aiconfigurator import AIC_ATTENTION_FILES, AIC_GEMM_FILES
from dse.calibrate.data.energaizer import ENERGAIZER_FILES
from dse.calibrate.data.mlenergy import MLENERGY_FILE
from dse.calibrate.fit import power_sets as ps
from dse.calibrate.fit.host import FITTED, SHIPPED_FIT, fit_host_coeffs
from dse.calibrate.fit.power import PowerRows, mape, rows_from_runs
from dse.calibrate.fit.power_joint import NVML_VARIANTS, H200Family, JointFit, fit_joint, generation_scale
from dse.calibrate.fit.power_serving import ServingRun, serving_power_rows
from dse.calibrate.validate.power import energaizer_predictions, h200_predictions
from dse.hardware.catalog import load_gpu
from dse.perf.coeffs import PowerCoeffs, load_default_coeffs, load_power_coeffs, write_power_coeffs
from dse.perf.dvfs import row_estimator

FAMILIES = ("gemm", "attention_generation", "attention_context")
JOINT_DATA = (
    "EnergAIzer A100 whole models + aiconfigurator H200 + ML.ENERGY H100 serving (30 runs) + our H100 "
    "kernels and whole models (dse/calibrate/measured)"
)


def _errors(amp: PowerCoeffs, hop: PowerCoeffs, data: dict) -> dict[str, float]:
    pa = energaizer_predictions(data["a100_test"], amp, cache_=data["memo"])
    out = {"a100_power": 100 * mape(pa["pred_power_w"].to_numpy(), pa["power_w"].to_numpy())}
    errs = []
    for f in FAMILIES:
        p = h200_predictions(data["test"][f], hop, data["tab_test"][f])
        e = np.abs(p["pred_power_w"].to_numpy() / p["power_w"].to_numpy() - 1.0)
        out[f"h200_{f}"] = 100 * float(e.mean())
        if f != "attention_context":
            errs.append(e)
    out["h200_kernels"] = 100 * float(np.concatenate(errs).mean())
    a10 = energaizer_predictions(ps.energaizer_frame("a10"), amp, cache_=data["memo"])
    out["a10_power"] = 100 * mape(a10["pred_power_w"].to_numpy(), a10["power_w"].to_numpy())
    serving = data["serving"]  # linear in the shared energies at the prior ratio: rows scaled to it
    shared = hop.vector() / generation_scale("hopper")
    out["mlenergy_power"] = 100 * mape(serving.predict_w(shared), serving.power_w)
    for key, rows in (
        ("h100_kernels", data["h100k"]),
        ("h100_fp8", data["h100fp8"]),
        ("h100_models", data["h100m"]),
    ):
        out[key] = 100 * mape(rows.predict_w(hop.vector()), rows.power_w)
    return out


def _serving_rows() -> PowerRows:
    """The ML.ENERGY H100 rows of `dse validate serving` as joint-fit rows (module docstring)."""
    from dse.calibrate.validate.serving import MLENERGY_GPU, mlenergy_load_requests

    runs = [
        ServingRun(model=model, gpu=MLENERGY_GPU, load=load, power_w=float(r["avg_power_w"]))
        for r, model, load in mlenergy_load_requests()
    ]
    return serving_power_rows(runs, load_power_coeffs("hopper"))


def _data() -> dict:
    a100, h200 = load_gpu("a100-pcie-40gb"), load_gpu("h200-sxm")
    lat_a = ps.energaizer_latency_coeffs(load_default_coeffs(a100), a100)
    lat_h = load_default_coeffs(h200)
    train_a, test_a = ps.a100_split()
    memo: dict = {}
    runs = ps.energaizer_runs(train_a, a100, lat_a, row_estimator(None), memo)
    host, host_mape = fit_host_coeffs(runs, train_a["latency_s"].to_numpy(), names=SHIPPED_FIT)
    rows_a = rows_from_runs(runs, train_a["avg_power_w"].to_numpy(), host)
    train = {f: ps.h200_split(f)[0] for f in FAMILIES}
    test = {f: ps.h200_split(f)[1] for f in FAMILIES}
    h200_fams = {
        f: H200Family(
            table=ps.h200_table(train[f], h200, lat_h, row_estimator(None)),
            power_w=train[f]["power_w"].to_numpy(),
            latency_s=train[f]["latency_s"].to_numpy(),
        )
        for f in FAMILIES
    }
    tab_test = {f: ps.h200_table(test[f], h200, lat_h, row_estimator(None)) for f in FAMILIES}
    lat_own = load_default_coeffs(load_gpu("h100-sxm"))
    h100k, frame = ps.own_h100_kernel_rows(lat_own, include_fp8=True)
    fp8 = frame["name"].str.startswith(ps.H100_FIT_EXCLUDE).to_numpy()
    return {
        "h100k": _subset(h100k, ~fp8),
        "h100fp8": _subset(h100k, fp8),
        "h100m": ps.own_h100_model_rows(lat_own, host)[0],
        "rows_a": rows_a,
        "host": host,
        "host_mape": host_mape,
        "a100_test": test_a,
        "memo": memo,
        "h200": h200_fams,
        "test": test,
        "tab_test": tab_test,
        "serving": _serving_rows(),
    }


def _subset(rows: PowerRows, keep: np.ndarray) -> PowerRows:
    return PowerRows(
        features_j=rows.features_j[keep],
        wall_s=rows.wall_s[keep],
        idle_w=rows.idle_w[keep],
        power_w=rows.power_w[keep],
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write candidate sets (joint, downweight) here")
    args = parser.parse_args(argv)
    data = _data()
    amp0, hop0 = load_power_coeffs("ampere"), load_power_coeffs("hopper")
    start = amp0.vector()
    table = [{"set": "shipped", **_errors(amp0, hop0, data)}]
    fits, loo = {}, {}
    for nvml in NVML_VARIANTS:
        own = {"h100_kernels": data["h100k"], "h100_models": data["h100m"]}
        both = fit_joint(
            data["rows_a"], data["h200"], serving=data["serving"], hopper=own, nvml=nvml, start=start
        )
        kernels_only = fit_joint(
            data["rows_a"],
            data["h200"],
            serving=data["serving"],
            hopper={"h100_kernels": data["h100k"]},
            nvml=nvml,
            start=start,
        )
        only_a = fit_joint(data["rows_a"], {}, nvml=nvml, start=start)
        only_h = fit_joint(None, data["h200"], nvml=nvml, start=start)
        fits[nvml], loo[nvml] = both, (only_a, only_h, kernels_only)
        table.append(
            {
                "set": f"joint/{nvml} (in-sample), ratio {both.hopper_node}",
                **_errors(both.ampere, both.hopper, data),
            }
        )
        table.append(
            {
                "set": f"joint/{nvml}, no H100 whole models, ratio {kernels_only.hopper_node}",
                **_errors(kernels_only.ampere, kernels_only.hopper, data),
            }
        )
        a_to_h = _errors(only_a.ampere, only_a.hopper, data)
        h_to_a = _errors(only_h.ampere, only_h.hopper, data)
        table.append(
            {"set": f"joint/{nvml}: A100 only -> H200", **{k: v for k, v in a_to_h.items() if "h200" in k}}
        )
        table.append(
            {
                "set": f"joint/{nvml}: H200 only -> A100, A10",
                **{k: v for k, v in h_to_a.items() if "h200" not in k},
            }
        )
        print(nvml, "shared N7 energies:", np.array2string(both.shared, precision=3), both.status, flush=True)
    print(pd.DataFrame(table).round(2).to_string())
    if args.out:
        _write(args.out, fits["downweight"], loo["downweight"], data)
    return 0


def _own_sources() -> list[dict[str, str]]:
    from dse.calibrate.measured import MEASURED_DIR

    names = ("h100_sxm_kernels.csv", "h100_sxm_whole_models.csv")
    return [
        {
            "file": f"dse/calibrate/measured/{n}",
            "sha256": hashlib.sha256((MEASURED_DIR / n).read_bytes()).hexdigest(),
        }
        for n in names
    ]


def _write(out: Path, both: JointFit, loo: tuple[JointFit, JointFit, JointFit], data: dict) -> None:
    """The shipped sets of the "downweight" variant, stamped with provenance (module docstring)."""
    src_a = _sources([("energaizer", ENERGAIZER_FILES["a100"]), ("energaizer", ENERGAIZER_FILES["dvfs"])])
    src_s = _sources([("mlenergy", MLENERGY_FILE)]) + _own_sources()
    src_h = _sources(
        [("aiconfigurator", AIC_GEMM_FILES["h200_sxm"])]
        + [("aiconfigurator", AIC_ATTENTION_FILES[("h200_sxm", p)]) for p in ("context", "generation")]
    )
    host = {n: getattr(data["host"], n) for n in FITTED}
    only_a, only_h, kernels_only = loo
    sets = {
        "ampere": (both.ampere, both, src_a + src_h + src_s, JOINT_DATA),
        "hopper": (both.hopper, both, src_a + src_h + src_s, JOINT_DATA),
        "hopper-loo": (only_a.hopper, only_a, src_a, "EnergAIzer A100 whole models only"),
        "ampere-loo": (only_h.ampere, only_h, src_h, "aiconfigurator H200 kernel tables only"),
        "hopper-kernels": (
            kernels_only.hopper,
            kernels_only,
            src_a + src_h + src_s,
            "the joint data without our H100 whole models (kernels -> whole models on H100)",
        ),
    }
    out.mkdir(parents=True, exist_ok=True)
    for name, (pc, fit, src, what) in sets.items():
        prov = {
            "name": name,
            "data": what,
            "host": host,
            "host_fit_mape": data["host_mape"],
            "split": f"train rows of split_holdout(frac={ps.HOLDOUT_FRAC}, seed={ps.SEED}), A100 by workload",
            "method": "dse.calibrate.fit.power_joint.fit_joint (cvxpy, weighted mean absolute relative "
            "error, physical bounds, shared N7 energies x node capacitance per generation)",
            "train_mape": fit.train_mape,
            "hopper_node_capacitance": fit.hopper_node,
            "solver_status": fit.status,
            **pc.provenance,
        }
        pc = _stamp(PowerCoeffs(**{**pc.to_dict(), "provenance": prov}), src, "default")
        write_power_coeffs(pc, out / f"power_{name}.json")
        print(f"wrote {out / f'power_{name}.json'}")


if __name__ == "__main__":
    sys.exit(main())

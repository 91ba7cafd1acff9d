"""Where the multi-GPU / MoE serving TTFT error lies (issue 17): aiconfigurator's multi-GPU silicon rows
(`dse.calibrate.validate.silicon_multigpu`) by engine, model, layout, concurrency and prompt length.

    PYTHONPATH=. .venv/bin/python scripts/analyze_multigpu_ttft.py            # all 1,225 rows, ~12 min
    PYTHONPATH=. .venv/bin/python scripts/analyze_multigpu_ttft.py --rows 60  # the validation's sample
    ... --cache /tmp/mg.pkl     # keep the predictions (and reuse them on the next run)

Each row is predicted as `dse validate serving` does, and once more alone (one request, concurrency 1: the
isolated TTFT, one prompt's prefill plus the arrival steps of `dse.serving.scheduler`). Printed:

- share: each slice's part of the summed absolute TTFT error (%), with its MAPE, median signed error and the
  fraction of rows predicted too long (over);
- at low concurrency (<= 32 clients): the shortfall (measured - predicted TTFT) in isolated TTFTs and in
  e2e / C (the mean time between two completions of a closed loop of C clients, e2e = TTFT + (osl - 1) x
  TPOT, both measured): a shortfall that scales with the isolated TTFT is prefill work on the GPU, one that
  scales with e2e / C grows with the output length and is not (a request waiting for another's completion).

Findings (session 31, base 23c5610; README, serving accuracy) are in the README's serving section.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pandas as pd

from dse.calibrate.validate.common import load_metrics
from dse.calibrate.validate.silicon import gap_analysis
from dse.calibrate.validate.silicon_multigpu import multigpu_frame, multigpu_load_request, multigpu_rows
from dse.errors import DseError

LOW_CONCURRENCY = 32
CONCURRENCY_BINS = [0, 4, 16, 64, 128, 1024]
CONCURRENCY_LABELS = ["<=4", "5-16", "17-64", "65-128", ">128"]


def predictions(max_rows: int | None) -> pd.DataFrame:
    """`multigpu_frame` with each row's source kind (gap analysis or not) and its isolated TTFT."""
    df = multigpu_frame(max_rows)
    rows = multigpu_rows().set_index("id")
    df["gap_analysis"] = [gap_analysis(rows.loc[i]) for i in df["id"]]
    df["version"] = df["id"].map(rows["backend_version"])
    iso = {}
    for i in df["id"]:
        model, gpu, load = multigpu_load_request(rows.loc[i])
        alone = dataclasses.replace(load, concurrency=1, num_requests=1, length_dist="fixed")
        try:
            iso[i] = load_metrics(model, gpu, alone)["ttft_s"]
        except DseError:
            iso[i] = float("nan")
    df["iso_ttft_s"] = df["id"].map(iso)
    return df


def scored(df: pd.DataFrame) -> pd.DataFrame:
    """The rows that ran, with their signed and absolute errors and the low-concurrency shortfall units."""
    ok = df[(df["error"] == "") & df["feasible"].astype(bool)].copy()
    ok["err"] = ok["ttft_s"] / ok["meas_ttft_s"] - 1.0
    ok["ape"] = ok["err"].abs() * 100
    ok["tpot_ape"] = (ok["tpot_s"] / ok["meas_tpot_s"] - 1.0).abs() * 100
    ok["clients"] = pd.cut(ok["concurrency"], CONCURRENCY_BINS, labels=CONCURRENCY_LABELS)
    e2e_s = ok["meas_ttft_s"] + (ok["output_tokens"] - 1) * ok["meas_tpot_s"]
    ok["short_s"] = ok["meas_ttft_s"] - ok["ttft_s"]
    ok["short_per_iso"] = ok["short_s"] / ok["iso_ttft_s"]
    ok["short_per_gap"] = ok["short_s"] / (e2e_s / ok["concurrency"])
    ok["meas_per_iso"] = ok["meas_ttft_s"] / ok["iso_ttft_s"]
    ok["pred_per_iso"] = ok["ttft_s"] / ok["iso_ttft_s"]
    return ok


def share_table(ok: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """Per slice: rows, TTFT MAPE, median signed error, share of the summed error, share over, TPOT MAPE."""
    g = ok.groupby(keys, observed=True)
    return pd.DataFrame(
        {
            "rows": g.size(),
            "ttft_mape_pct": g["ape"].mean().round(1),
            "median_err_pct": (g["err"].median() * 100).round(0),
            "share_pct": (g["ape"].sum() / ok["ape"].sum() * 100).round(1),
            "over": g["err"].apply(lambda s: (s > 0).mean()).round(2),
            "tpot_mape_pct": g["tpot_ape"].mean().round(1),
        }
    ).sort_values("share_pct", ascending=False)


def shortfall_table(ok: pd.DataFrame) -> pd.DataFrame:
    """At <= LOW_CONCURRENCY clients, per engine, source kind, model, layout and prompt length: medians of the
    isolated TTFT, the shortfall (ms, in isolated TTFTs, in e2e / C) and the measured and predicted TTFT in
    isolated TTFTs."""
    low = ok[ok["concurrency"] <= LOW_CONCURRENCY]
    g = low.groupby(["backend", "gap_analysis", "model", "layout", "input_tokens"])
    return pd.DataFrame(
        {
            "rows": g.size(),
            "iso_ms": (g["iso_ttft_s"].median() * 1e3).round(0),
            "short_ms": (g["short_s"].median() * 1e3).round(0),
            "short_per_iso": g["short_per_iso"].median().round(2),
            "short_per_e2e_over_c": g["short_per_gap"].median().round(2),
            "meas_per_iso": g["meas_per_iso"].median().round(2),
            "pred_per_iso": g["pred_per_iso"].median().round(2),
        }
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--rows", type=int, default=None, help="an even sample of this many rows (default all)"
    )
    parser.add_argument("--cache", type=Path, default=None, help="pickle of the predictions: read if present")
    args = parser.parse_args()
    if args.cache is not None and args.cache.exists():
        df = pd.read_pickle(args.cache)
    else:
        df = predictions(args.rows)
        if args.cache is not None:
            df.to_pickle(args.cache)
    ok = scored(df)
    pd.set_option("display.width", 200)
    pd.set_option("display.max_rows", 500)
    print(f"rows {len(ok)}: TTFT MAPE {ok['ape'].mean():.1f}%, median error {ok['err'].median() * 100:+.0f}%")
    for keys in (
        ["backend"],
        ["backend", "model"],
        ["backend", "gap_analysis", "clients"],
        ["backend", "input_tokens"],
    ):
        print(f"\nTTFT error by {', '.join(keys)}\n{share_table(ok, keys).to_string()}")
    print(f"\nShortfall at <= {LOW_CONCURRENCY} clients\n{shortfall_table(ok).to_string()}")
    for name, drop in (
        ("TensorRT-LLM gap-analysis rows", (ok["backend"] == "trtllm") & ok["gap_analysis"]),
        ("TensorRT-LLM rows", ok["backend"] == "trtllm"),
    ):
        print(f"TTFT MAPE without the {name}: {ok.loc[~drop, 'ape'].mean():.1f}% ({int((~drop).sum())} rows)")


if __name__ == "__main__":
    main()

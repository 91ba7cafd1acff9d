"""Sample-file cells no measurement gives, found by a fuzzer (session 35, F2 and F4): each was a traceback or
was fitted without a word; each is now one line naming the file, row and column, with exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.fuzz_helpers import gemm_samples, refused

SHIPPED = Path(__file__).parents[2] / "dse" / "calibrate" / "measured" / "h100_sxm_kernels.csv"
NO_POWER = {"avg_power_w": "", "power_w": "", "energy_j": ""}  # as the H100 tables: no power measured


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        # past int64: an OverflowError traceback from the samples frame
        ({"num_calls": "1e308"}, "column num_calls: 1e+308 is not a count in [1, 2^53)"),
        ({"num_calls": str(2**70)}, f"column num_calls: {2**70} is not a count"),
        ({"m": str(2**70)}, f"column m: {2**70} is not an integer below 2^53"),
        # counts below one were fitted (a window of -3 calls, no repeats)
        ({"num_calls": "-3"}, "column num_calls: -3 is not a count in [1, 2^53)"),
        ({"num_repeats": "0"}, "column num_repeats: 0 is not a count"),
        ({"num_samples": "-1"}, "column num_samples: -1 is not a count in [0, 2^53)"),
        ({"stages": "0"}, "column stages: 0 is not a count"),
        # a limit no board has was taken for the TDP without a word (NaN, an empty cell, still means "not
        # recorded": the H100 tables record none)
        ({"power_limit_w": "inf"}, "row 1, sample 'g', column power_limit_w: inf W is not a power limit"),
        ({"power_limit_w": "0"}, "column power_limit_w: 0 W is not a power limit in (0, 700] W"),
        ({"power_limit_w": "-1"}, "column power_limit_w: -1 W"),
        ({"power_limit_w": "5000"}, "column power_limit_w: 5000 W is not a power limit in (0, 700] W"),
        # refused as "power cap 100 W is not allowed", with no file, row or column
        (
            {"power_limit_w": "100", **NO_POWER},
            "row 1, sample 'g', column power_limit_w: 100 W is no limit h100-sxm",
        ),
        # a typo in `kind` was left out as "a family not fitted" (calibration review, session 36); so was an
        # empty one
        ({"kind": "gemmm"}, "row 1, column kind: unknown kind 'gemmm' (known: gemm, attention_flash,"),
        ({"kind": ""}, "row 1, column kind: unknown kind ''"),
        # a 2-hour kernel with no power measured was fitted
        ({"latency_s": "7200", **NO_POWER}, "row 1, sample 'g', column latency_s: 7200 s is over 3600 s"),
    ],
)
@pytest.mark.parametrize("command", ["calibrate", "validate"])
def test_an_impossible_cell_is_named_by_file_row_and_column(
    tmp_path: Path, command: str, fields: dict, needle: str
) -> None:
    path = str(gemm_samples(tmp_path, **fields))
    args = {
        "calibrate": ["calibrate", path, "--gpu", "h100-sxm", "-o", str(tmp_path / "c.json")],
        "validate": ["validate", "samples", path, "--gpu", "h100-sxm"],
    }[command]
    output = refused(args, "s.csv", needle)
    assert len(" ".join(output.split())) < 300, output  # one line (as wrapped)


def test_a_replay_with_a_count_past_int64_is_one_line(tmp_path: Path) -> None:
    path = gemm_samples(tmp_path, num_calls=str(2**70))
    out = tmp_path / "out.csv"
    refused(["measure", "kernels", "--out", str(out), "--suite", "smoke", "--dry-run", "--replay", str(path)],
            "s.csv", "row 1, column num_calls")  # fmt: skip
    assert not out.exists()


def test_a_kind_typo_in_the_shipped_file_is_refused_not_left_out(tmp_path: Path) -> None:
    """The report's case: row 3 of the shipped H100 file as `gemmm`, fitted with --families gemm, said
    "left out: ... 1 gemmm" and fitted the other 20 GEMM rows (exit 0)."""
    import pandas as pd

    frame = pd.read_csv(SHIPPED)
    assert frame.loc[2, "kind"] == "gemm"  # row 3 (header not counted) is a GEMM the fit takes
    frame.loc[2, "kind"] = "gemmm"
    path = tmp_path / "badkind.csv"
    frame.to_csv(path, index=False)
    out = tmp_path / "c.json"
    refused(["calibrate", str(path), "--gpu", "h100-sxm", "-o", str(out), "--families", "gemm"],
            f"{path}: row 3, column kind: unknown kind 'gemmm'")  # fmt: skip
    assert not out.exists()

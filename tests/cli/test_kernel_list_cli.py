"""`dse predict --kernels` as a newcomer read it (session 36): per-kernel energy, the precision reported,
the refusal of a dtype the GPU has no Tensor Cores for, and TF32 on a GPU without it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dse.cli import app

runner = CliRunner()


def gemm(dim: int, prec: str = "bf16", use_tc: bool = True, kind: str = "gemm") -> list[object]:
    desc = {"batch": 1, "dimM": dim, "dimN": dim, "dimK": dim, "precM": prec, "useTensorCore": use_tc}
    return [desc, [kind]]


ADD = [{"dim": 1 << 20, "op": "pointwise_add", "prec": "bf16"}, ["elementwise"]]


def write(tmp_path: Path, entries: list, name: str = "k.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(entries))
    return str(path)


def predict(*args: str) -> dict:
    result = runner.invoke(app, ["predict", *args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_a_kernels_energy_leaves_out_the_wait_for_the_host_before_it(tmp_path: Path) -> None:
    """Finding 2: the first kernel of an eager list carried the pass's 1 ms framework entry in its energy,
    so a small add read as the hottest kernel. Each kernel's energy is now its own, and the waits are a
    part of their own in the JSON and in --breakdown; the total is unchanged."""
    path = write(tmp_path, [ADD, gemm(4096), ADD, gemm(4096)])
    out = predict("--kernels", path, "--gpu", "h100-sxm")
    kernels = out["kernels"]
    for k in kernels:  # a kernel's energy: its power over its own time
        assert k["energy_j"] == pytest.approx(k["count"] * k["power_w"] * k["latency_s"], rel=1e-12)
        assert k["gap_energy_j"] == pytest.approx(k["count"] * k["gap_power_w"] * k["gap_s"], rel=1e-12)
    add, first_gemm = kernels[0], kernels[1]
    # the add moves 6 MB (a few us), the GEMM does 137 GFLOP (~0.1 ms): the GEMM is the hotter kernel
    assert first_gemm["energy_j"] > 10 * add["energy_j"]
    assert add["gap_s"] >= 1e-3  # the entry is still there, as the add's wait
    assert out["gap_energy_j"] == pytest.approx(sum(k["gap_energy_j"] for k in kernels), rel=1e-12)
    assert sum(k["energy_j"] for k in kernels) + out["gap_energy_j"] == pytest.approx(
        out["energy_j"], rel=1e-12
    )
    assert out["energy_j_by_kind"]["host_gaps"] == pytest.approx(out["gap_energy_j"], rel=1e-12)
    text = runner.invoke(app, ["predict", "--kernels", path, "--gpu", "h100-sxm", "--breakdown"])
    assert text.exit_code == 0 and "host_gaps" in text.stdout and "each kernel's own" in text.stdout
    rows = [line for line in text.stdout.splitlines() if "k/" in line]
    # the kernels by energy: the GEMMs before the adds (the first add was the top row)
    assert "gemm" in rows[0] and "gemm" in rows[1] and "pointwise_add" in rows[-1]


def test_the_precision_reported_is_the_one_priced_not_the_file_names(tmp_path: Path) -> None:
    """Finding 5: a bf16 list saved as `..._pfp32_...` said fp32 (JSON and header), a hand-named one said
    nothing, and an fp8 list named `_pbf16_` said bf16."""
    bf16 = write(tmp_path, [gemm(2048)], "my_fp32_pfp32_b1.json")
    assert predict("--kernels", bf16, "--gpu", "h100-sxm")["precision"] == "bf16"
    assert predict("--kernels", bf16, "--gpu", "h100-sxm", "--precision", "bf16")["precision"] == "bf16"
    fp32 = predict("--kernels", bf16, "--gpu", "h100-sxm", "--precision", "fp32")
    modules = fp32["kernels"][0]["energy_j_by_module"]  # re-typed and priced so: CUDA-core math
    assert fp32["precision"] == "fp32" and modules["tensor"] == 0.0 < modules["cuda"]
    header = runner.invoke(app, ["predict", "--kernels", bf16, "--gpu", "h100-sxm"]).stdout.splitlines()[0]
    assert header == "my_fp32_pfp32_b1 on h100-sxm (bf16)"
    fp8 = write(tmp_path, [gemm(2048, "fp8")], "mymodel_x_pbf16_b1.json")
    assert predict("--kernels", fp8, "--gpu", "h100-sxm")["precision"] == "fp8"
    hand = write(tmp_path, [gemm(2048), gemm(2048, "fp8")], "hand.json")
    assert predict("--kernels", hand, "--gpu", "h100-sxm")["precision"] == "mixed"


def test_an_fp8_gemm_on_a_gpu_without_fp8_names_the_entry_and_a_16_bit_remedy(tmp_path: Path) -> None:
    """Finding 6: the refusal named no file or entry and advised --precision fp32, which runs the GEMMs on
    the CUDA cores (15x the bf16 time on an A100). The remedy it names now works: the bf16 run of the list
    prices the fp8 GEMM as the list's own bf16 GEMM of the same shape."""
    path = write(tmp_path, [gemm(4096), gemm(4096, "fp8")], "mixed_fp8.json")
    refused = runner.invoke(app, ["predict", "--kernels", path, "--gpu", "a100-sxm-80gb"])
    assert refused.exit_code == 2
    message = refused.stderr.replace("\n", " ")
    assert f"{path}: entry 1 (gemm, fp8)" in message and "no fp8 tensor cores" in message
    assert "--precision bf16 or fp16" in message and "--precision fp32" not in message
    out = predict("--kernels", path, "--gpu", "a100-sxm-80gb", "--precision", "bf16")
    bf16, fp8 = out["kernels"]
    assert out["precision"] == "bf16" and fp8["latency_s"] == pytest.approx(bf16["latency_s"], rel=1e-12)
    fp4 = runner.invoke(
        app, ["predict", "--kernels", write(tmp_path, [gemm(4096, "fp4")]), "--gpu", "h100-sxm"]
    )
    assert fp4.exit_code == 2 and "entry 0 (gemm, fp4)" in fp4.stderr and "--precision bf16" in fp4.stderr


@pytest.mark.parametrize(
    ("entry", "precision"), [(gemm(4096, "fp32"), None), (gemm(4096, kind="conv2d"), "fp32")]
)
def test_tf32_on_a_v100_is_priced_on_its_cuda_cores(
    tmp_path: Path, entry: list, precision: str | None
) -> None:
    """Finding 7: a TF32 GEMM (precM fp32 on Tensor Cores), and the convolutions of a CNN list under
    --precision fp32, ran on the V100's fp16 Tensor Cores: 87 TFLOP/s on a card whose FP32 peak is 15.7
    (`dse gpu show v100-sxm2`). Volta has no TF32: they run in FP32 on the CUDA cores, as the same list's
    CUDA-core fp32 GEMM does, and a note says so."""
    args = ["--kernels", write(tmp_path, [entry]), "--gpu", "v100-sxm2"]
    args += [] if precision is None else ["--precision", precision]
    out = predict(*args)
    cuda = predict(
        "--kernels", write(tmp_path, [gemm(4096, "fp32", use_tc=False)], "cuda.json"), "--gpu", "v100-sxm2"
    )
    (k,) = out["kernels"]
    assert k["latency_s"] == pytest.approx(cuda["kernels"][0]["latency_s"], rel=1e-12)
    assert 2 * 4096**3 / k["latency_s"] <= 15.67e12 and k["bound_by"] == "cuda"
    noted = runner.invoke(app, ["predict", *args])
    assert noted.exit_code == 0 and "no TF32 Tensor Cores" in noted.stderr

"""KernelSample files: round trips, aliases, ops <-> samples, suites, env."""

from __future__ import annotations

import math
from unittest import mock

import pandas as pd
import pynvml as real_pynvml
import pytest

from dse.calibrate.data.samples import (
    KernelSample,
    op_fields,
    op_from_sample,
    read_samples,
    samples_frame,
    write_samples,
)
from dse.errors import ConfigError
from dse.hardware.catalog import catalog_gpu_name
from dse.measure.env import collect_env
from dse.measure.replay import ReplayGpu
from dse.measure.suites import SUITES, build_suite
from dse.workload.ops import AttentionOp, ElementwiseOp, GemmOp, NormOp, SoftmaxOp

OPS = [
    GemmOp(name="g", m=16, n=4096, k=4096, batch=2, dtype="fp16"),
    AttentionOp(
        name="a",
        batch=2,
        num_heads=32,
        num_kv_heads=8,
        head_dim=128,
        seq_len_q=1,
        seq_len_kv=4097,
        backend="decode",
    ),
    SoftmaxOp(name="s", rows=4096, cols=1024, dtype="fp32"),
    NormOp(name="n", rows=512, cols=4096, kind="rmsnorm"),
    ElementwiseOp(name="e", kind="silu_mul", num_elements=2**20),
    # the fields that differ from the op's defaults: output dtype, shared weight, fp8 KV cache
    GemmOp(name="g8", m=64, n=4096, k=4096, dtype="fp8", out_dtype="bf16", b_shared=True),
    GemmOp(name="g8q", m=64, n=4096, k=4096, dtype="fp8", out_dtype="bf16", b_shared=True, act_quant=True),
    AttentionOp(
        name="a8",
        batch=4,
        num_heads=32,
        num_kv_heads=8,
        head_dim=128,
        seq_len_q=1,
        seq_len_kv=2048,
        backend="decode",
        kv_dtype="fp8",
    ),
    ElementwiseOp(name="c", kind="cast", num_elements=2**20, out_dtype="fp32"),
]


def _sample(op, **extra) -> KernelSample:
    return KernelSample(
        gpu="h100-sxm", **op_fields(op), latency_s=1e-4, avg_power_w=500.0, energy_j=0.05, **extra
    )


@pytest.mark.parametrize("op", OPS, ids=lambda op: type(op).__name__)
def test_ops_round_trip_through_samples(op):
    assert op_from_sample(_sample(op)) == op


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_ops_round_trip_through_files(tmp_path, suffix):
    path = write_samples(tmp_path / f"ops{suffix}", [_sample(op) for op in OPS])
    assert [op_from_sample(s) for s in read_samples(path)] == OPS


def test_model_rows_are_not_ops():
    with pytest.raises(ConfigError, match="not a single kernel"):
        op_from_sample(KernelSample(gpu="x", kind="model", latency_s=1.0, avg_power_w=1.0, energy_j=1.0))
    with pytest.raises(ConfigError, match="does not describe a valid op"):
        op_from_sample(
            KernelSample(
                gpu="x",
                kind="gemm",
                m=0,
                n=1,
                k=1,
                dtype="bf16",
                latency_s=1.0,
                avg_power_w=1.0,
                energy_j=1.0,
            )
        )


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_files_round_trip_with_missing_values(tmp_path, suffix):
    samples = [
        _sample(
            OPS[0],
            sm_clock_hz=1.41e9,
            stable=False,
            throttle_reasons="sw_power_cap",
            kernel_name="k,with comma",
            tile="128x256x64",
            stages=4,
            warp_specialized=True,
            split_k=False,
            idle_power_w=80.0,
        ),
        _sample(OPS[1]),  # sm_clock_hz None, NaN telemetry, None flags
    ]
    path = write_samples(tmp_path / f"deep/dir/s{suffix}", samples)
    back = read_samples(path)
    assert back[0] == samples[0]
    assert back[1].sm_clock_hz is None and back[1].stages is None and back[1].split_k is None
    assert math.isnan(back[1].idle_power_w) and back[1].causal is True and back[1].variant == "decode"
    assert back[0].dynamic_energy_j == pytest.approx(0.05 - 80.0 * 1e-4)


def test_frame_has_aliases_and_nullable_types():
    frame = samples_frame([_sample(OPS[2])])
    assert frame.loc[0, "power_w"] == 500.0 and frame.loc[0, "power_cap_w"] is not None
    assert str(frame["m"].dtype) == "Int64" and frame["m"].isna().all()
    assert str(frame["stable"].dtype) == "boolean"


def test_a_file_with_only_power_w_reads(tmp_path):
    path = tmp_path / "aic.csv"
    pd.DataFrame(
        {
            "gpu": ["h200_sxm"],
            "kind": ["gemm"],
            "m": [1],
            "n": [2],
            "k": [3],
            "dtype": ["bf16"],
            "latency_s": [1e-3],
            "power_w": [600.0],
            "energy_j": [0.6],
            "extra": ["ignored"],
        }
    ).to_csv(path)
    (sample,) = read_samples(path)
    assert sample.avg_power_w == 600.0 and (sample.m, sample.n, sample.k) == (1, 2, 3)


def test_bad_files(tmp_path):
    with pytest.raises(ConfigError, match="no such samples file"):
        read_samples(tmp_path / "none.parquet")
    (tmp_path / "x.json").write_text("{}")
    with pytest.raises(ConfigError, match=".parquet or .csv"):
        read_samples(tmp_path / "x.json")
    with pytest.raises(ConfigError, match=".parquet or .csv"):
        write_samples(tmp_path / "x.txt", [])
    pd.DataFrame({"gpu": ["x"]}).to_csv(tmp_path / "thin.csv", index=False)
    with pytest.raises(ConfigError, match="missing column"):
        read_samples(tmp_path / "thin.csv")


@pytest.mark.parametrize("suite", SUITES)
def test_suites_build_valid_uniquely_named_ops(suite):
    ops = build_suite(suite)
    assert ops and len({op.name for op in ops}) == len(ops)
    assert all(op.count == 1 for op in ops)
    if suite in ("gemm", "all"):
        fp8 = [op for op in ops if isinstance(op, GemmOp) and op.dtype == "fp8"]
        assert fp8 and all(op.c_dtype == "bf16" for op in fp8)
    if suite == "all":
        kinds = {type(op) for op in ops}
        assert kinds == {GemmOp, AttentionOp, SoftmaxOp, NormOp, ElementwiseOp}


def test_unknown_suite():
    with pytest.raises(ConfigError, match="unknown suite"):
        build_suite("conv")


@pytest.mark.parametrize(
    ("nvml_name", "catalog"),
    [
        ("NVIDIA H100 80GB HBM3", "h100-sxm"),
        ("NVIDIA H100 PCIe", "h100-pcie"),
        ("NVIDIA H200", "h200-sxm"),
        ("NVIDIA A100-SXM4-80GB", "a100-sxm-80gb"),
        ("NVIDIA A100-SXM4-40GB", "a100-sxm-40gb"),
        ("NVIDIA A100-PCIE-40GB", "a100-pcie-40gb"),
        ("NVIDIA A100 80GB PCIe", "a100-pcie-80gb"),
        ("NVIDIA A10", "a10"),
        ("NVIDIA A40", "a40"),
        ("NVIDIA L4", "l4"),
        ("NVIDIA L40S", "l40s"),
        ("NVIDIA GeForce RTX 4090", "rtx-4090"),
        ("NVIDIA GeForce RTX 3090", "rtx-3090"),
        ("Tesla V100-SXM2-16GB", "v100-sxm2"),
        ("Tesla V100-SXM2-32GB", None),
        ("NVIDIA GeForce RTX 2080 Ti", None),
        ("NVIDIA GeForce RTX 3090 Ti", None),  # 84 SMs at 450 W, not the 3090's 82 at 350 W
        ("NVIDIA GeForce RTX 4090 D", None),
        ("NVIDIA GH200 480GB", None),
        ("NVIDIA H200 NVL", None),
        ("NVIDIA H100 NVL", None),
        ("NVIDIA GB200", None),
        ("NVIDIA B200", "b200"),
    ],
)
def test_catalog_names_of_nvml_products(nvml_name, catalog):
    assert catalog_gpu_name(nvml_name) == catalog


def test_collect_env_describes_a_given_gpu_and_reports_missing_nvml():
    env = collect_env(ReplayGpu(name="replay-h100"))
    assert env["gpus"][0]["name"] == "replay-h100" and env["gpus"][0]["power_limit_w"] == 700.0
    assert env["packages"]["numpy"] and "python" in env
    with mock.patch("dse.measure.nvml.pynvml", autospec=True) as fake:
        fake.nvmlInit.side_effect = real_pynvml.NVMLError_DriverNotLoaded()
        env = collect_env()
    assert env["nvml_error"].startswith("no NVIDIA GPU/driver found") and "gpus" not in env

"""Power validation plumbing: splits by workload, precision re-typing, fits and MAPE rows (stand-in model)."""

from __future__ import annotations

import numpy as np
import pytest

from dse.calibrate.fit.host import SHIPPED_FIT, fit_host_coeffs, with_costs
from dse.calibrate.fit.power import as_precision, fit_through_cap, kernel_table, mape
from dse.calibrate.fit.power_sets import (
    H200_FAMILIES,
    HOPPER_BOUNDS,
    HOPPER_FAMILY_WEIGHT,
    MIN_KERNEL_S,
    a100_split,
    energaizer_frame,
    energaizer_runs,
    fit_ampere,
    h200_frame,
    h200_ops,
    h200_split,
)
from dse.calibrate.validate.power import (
    _summary,
    energaizer_predictions,
    h200_power_repeatability,
    rows_frame,
    validate_power,
)
from dse.errors import ConfigError
from dse.hardware.catalog import load_gpu
from dse.perf.coeffs import PowerCoeffs
from dse.perf.dvfs import row_estimator
from dse.perf.host import DEFAULT_HOST
from dse.workload.energaizer import load_kernel_list
from dse.workload.ops import AttentionOp, ElementwiseOp, GemmOp
from tests.perf.power_fakes import roofline_estimator
from tests.shared_data import needs_shared_data


@pytest.fixture(scope="module")
def split():
    return a100_split()


@needs_shared_data
def test_a100_split_is_by_workload_and_drops_invalid(split):
    train, test = split
    assert set(train["workload"]).isdisjoint(test["workload"])
    assert train["valid"].all() and test["valid"].all()
    assert set(train["dataset"]) == {"a100_900", "a100_dvfs"}
    assert (
        0.15 < test["workload"].nunique() / (train["workload"].nunique() + test["workload"].nunique()) < 0.25
    )
    again = a100_split()
    assert again[1]["workload"].tolist() == test["workload"].tolist()


@needs_shared_data
def test_as_precision_fp32_rules():
    rows = energaizer_frame("a100")
    path = rows[rows["model"] == "qwen2-1.5b"]["workload_path"].iloc[0]
    g = load_kernel_list(path)
    f = as_precision(g, "fp32")
    assert as_precision(g, "bf16") is g
    assert not any(isinstance(o, ElementwiseOp) and o.kind == "cast" for o in f.ops)
    assert {o.dtype for o in f.ops} == {"fp32"}
    conv = energaizer_frame("a100")
    conv_path = conv[conv["model"] == "resnet101"]["workload_path"].iloc[0]
    r = as_precision(load_kernel_list(conv_path), "fp32")
    assert {o.dtype for o in r.ops if isinstance(o, GemmOp) and o.name.endswith(":conv2d")} == {"tf32"}
    with pytest.raises(ConfigError, match="fp8"):
        as_precision(g, "fp8")


@needs_shared_data
def test_h200_frames_and_ops():
    for family in H200_FAMILIES:
        df = h200_frame(family)
        assert (df["latency_s"] >= MIN_KERNEL_S).all() and df["power_w"].notna().all()
    ctx = h200_frame("attention_context").head(3)
    ops = h200_ops(ctx)
    assert all(isinstance(o, AttentionOp) and o.backend == "flash" for o in ops)
    gen = h200_ops(h200_frame("attention_generation").head(2))
    assert all(o.backend == "decode" and o.seq_len_q == 1 for o in gen)
    g = h200_ops(h200_frame("gemm").head(2))
    assert all(isinstance(o, GemmOp) and o.b_shared for o in g)


@needs_shared_data
def test_fit_and_predict_energaizer_with_stand_in_model(split):
    train, test = split
    train = train.groupby("workload").head(2).head(40)
    memo: dict = {}
    pc, rows = fit_ampere(train, estimator=roofline_estimator, cache_=memo)
    assert np.all(pc.vector() >= 0) and pc.provenance["host"]["step_s"] >= 0
    assert pc.provenance["num_runs"] == len(train)
    pred = energaizer_predictions(test.head(10), pc, estimator=roofline_estimator, cache_=memo)
    assert list(pred.index) == list(test.head(10).index)
    assert np.allclose(pred["pred_energy_j"], pred["pred_power_w"] * pred["pred_latency_s"])
    assert (pred["pred_latency_s"] >= pred["pred_busy_s"]).all()
    row = _summary("a100_dvfs", "test", "all", pred, "x")
    assert row.num_samples == 10 and 0 <= row.power_mape < 1


@needs_shared_data
def test_host_fit_recovers_planted_host_costs():
    gpu = load_gpu("a100-pcie-40gb")
    rows = energaizer_frame("a100").head(12)
    runs = energaizer_runs(rows, gpu, None, row_estimator(roofline_estimator))
    planted = with_costs(DEFAULT_HOST, np.array([0.5e-3, 30e-6, 12e-6, 3e3]))  # seconds; the gap in cycles
    measured = np.array([r.wall_s(planted) for r in runs])
    fitted, err = fit_host_coeffs(runs, measured)
    assert err < 0.01
    # host-bound runs pin the host costs; the GPU gap is only seen where the GPU is the bound
    assert fitted.eager_other_s == pytest.approx(planted.eager_other_s, rel=0.15)
    # a subset (the shipped fit: the gap alone) recovers its planted value and keeps the others as given
    gap = with_costs(planted, np.array([8e3]), names=SHIPPED_FIT)
    measured_gap = np.array([r.wall_s(gap) for r in runs])
    start = with_costs(gap, np.array([2e3]), names=SHIPPED_FIT)
    gap_only, err_gap = fit_host_coeffs(runs, measured_gap, base=start, names=SHIPPED_FIT)
    assert err_gap < 0.01 and gap_only.kernel_gap_cycles == pytest.approx(8e3, rel=0.1)
    assert (gap_only.step_s, gap_only.eager_gemm_s) == (gap.step_s, gap.eager_gemm_s)
    with pytest.raises(ValueError, match="names"):
        fit_host_coeffs(runs, measured, names=("launch_s",))


def test_fit_through_cap_recovers_coefficients_of_capped_kernels():
    gpu = load_gpu("h100-sxm")
    ops = [GemmOp(name=f"g{i}", m=2**i, n=8192, k=8192) for i in range(4, 14)]
    table = kernel_table(ops, gpu, np.arange(1005e6, 1981e6, 15e6), None, row_estimator(roofline_estimator))
    truth = PowerCoeffs(
        architecture="hopper",
        tensor_j_per_flop=0.5e-12,
        l2_j_per_byte=5e-12,
        dram_scale=1.0,
        active_j_per_sm_cycle=3e-10,
    ).vector()
    cap = 600.0
    idx = table.effective_index(truth, 1980e6, cap)
    assert (idx < idx.max()).any()  # some kernels are throttled
    measured = table.power_w(truth)[idx, np.arange(len(ops))]
    free = np.array([0, 2, 6])
    lower, upper = np.zeros(8), np.full(8, np.inf)
    starts = []
    for scale in (0.5, 2.0):
        start = truth.copy()
        start[free] *= scale
        starts.append(start)
    fit, got = fit_through_cap(
        table, measured, 1980e6, cap, starts=starts, free=free, lower=lower, upper=upper
    )
    assert fit.mape < 0.01
    assert np.all(table.power_w(fit.coeffs)[got, np.arange(len(ops))] <= cap + 1e-9)
    assert fit.coeffs[5] == truth[5]  # not free: kept from the first start


@pytest.mark.slow
def test_shipped_coefficients_meet_the_a100_targets():
    """The acceptance numbers of the shipped sets with the shipped latency model (re-fit if this fails)."""
    rows = rows_frame(validate_power(datasets=("a100_dvfs", "a100_900")))
    dvfs = rows[(rows["dataset"] == "a100_dvfs") & (rows["group"] == "all")].iloc[0]
    assert dvfs["power_mape"] <= 0.10
    assert dvfs["latency_mape"] <= 0.12
    assert rows[rows["dataset"] == "a100_900"].iloc[0]["power_mape"] <= 0.12


def test_v1_hopper_coefficients_are_physical():
    """DRAM energy at least the HBM3e device energy plus PHY; L2 and shared memory in their SRAM ranges."""
    from dse.perf.coeffs import load_power_coeffs

    pc = load_power_coeffs("hopper-v1")
    for name, (lo, hi) in HOPPER_BOUNDS.items():
        assert lo <= getattr(pc, name) <= hi, name
    assert pc.dram_scale >= 1.0
    assert pc.provenance["bounds"] == {n: list(b) for n, b in HOPPER_BOUNDS.items()}
    assert pc.provenance["family_weight"] == HOPPER_FAMILY_WEIGHT


def test_shipped_sets_come_from_one_physical_set():
    """Shipped Ampere and Hopper sets: the same shared N7 energies, within the physical bounds, scaled by
    each generation's capacitance ratio."""
    from dse.calibrate.fit.power_joint import NAMES, PHYSICAL_BOUNDS, generation_scale
    from dse.perf.coeffs import load_power_coeffs

    amp, hop = load_power_coeffs("ampere"), load_power_coeffs("hopper")
    shared = np.asarray(amp.provenance["shared_n7"])
    np.testing.assert_allclose(amp.vector(), shared, rtol=1e-12)
    # Hopper's capacitance ratio was fitted on our H100 measurements (NODE_GRID), recorded in the provenance
    node = hop.provenance["node_capacitance"]["hopper"]
    assert hop.provenance["hopper_node_capacitance"] == node
    np.testing.assert_allclose(hop.vector(), shared * generation_scale("hopper", node), rtol=1e-12)
    for name, value in zip(NAMES, shared, strict=True):
        lo, hi = PHYSICAL_BOUNDS[name]
        assert lo * (1 - 1e-9) <= value <= hi * (1 + 1e-9), name


@needs_shared_data
def test_a10_idle_estimate_lies_below_every_a10_run():
    """Idle power at the runs' clock bounds every run's average power from below (a run adds dynamic power);
    the catalog's A10 idle table is an estimate from other GPUs, so the A10 data are its only check."""
    gpu = load_gpu("a10")
    runs = energaizer_frame("a10")
    idle = np.asarray(gpu.power.idle_power_w.at(runs["clock_hz"].to_numpy()))
    assert np.all(idle < runs["avg_power_w"].to_numpy())


# Acceptance targets of issue 4 still missed, with the figure measured when the xfail was last updated
# (coefficients refitted after the latency fit moved to the cap-rule clock, 2026-11-22). Never loosened: a
# met target turns the strict xfail into a failure, and then the entry goes. (GEMM met it: 7.8%.) The data
# rows' own repeatability (`h200_power_repeatability`: 15.1% context, 7.9% generation) says how far
# the data itself goes.
_H200_MISSED = {
    "attention_context": "45.8% power MAPE: measured power does not follow the kernel's work (falls with "
    "sequence length at equal work per tile; a nearest-neighbour fit on shape and latency misses by "
    "15%); the model predicts the cap, the 90th percentile of the data",
    "attention_generation": "17.0% power MAPE (13.9% when Tensor-Core work was util x rate x latency, "
    "which charged the decode math derate's stall time as MMA work): head_dim 512 decode rows with a few "
    "KV tokens run 1.7 ms against 0.03-0.2 ms predicted (latency model), and MHA decode at batch 1024 "
    "with a few KV tokens draws 440-470 W against ~300 W predicted; DRAM-bound MHA decode reads 645-685 W "
    "against ~545 W",
}


@pytest.fixture(scope="module")
def h200_rows():
    return rows_frame(validate_power(datasets=("h200",)))


@pytest.mark.slow
@pytest.mark.parametrize(
    "family",
    [
        pytest.param(
            f, marks=[pytest.mark.xfail(strict=True, reason=_H200_MISSED[f])] if f in _H200_MISSED else []
        )
        for f in H200_FAMILIES
    ],
)
def test_shipped_coefficients_meet_the_h200_target(h200_rows, family):
    """Issue 4: H200 long-kernel (>= 1 ms) power MAPE <= 8% on the held-out rows of each family."""
    sel = (h200_rows["dataset"] == f"h200_{family}") & (h200_rows["split"] == "test")
    row = h200_rows[sel & (h200_rows["group"] == "all")].iloc[0]
    assert row["num_samples"] > 30
    assert row["power_mape"] <= 0.08


@needs_shared_data
def test_repeatability_separates_gemm_power_from_attention_power():
    """The measured rows predicting themselves (nearest neighbours in shape, dtype and measured latency):
    H200 GEMM power repeats to a few percent, context attention power does not, so the 8% target there
    lies below what the readings themselves support (`h200_power_repeatability`)."""
    gemm = h200_power_repeatability("gemm")
    context = h200_power_repeatability("attention_context")
    assert gemm < 0.05
    assert context > 0.10
    # it is a real regressor: it beats a constant (the training median) by a wide margin on GEMMs
    train, test = h200_split("gemm")
    constant = mape(np.full(len(test), train["power_w"].median()), test["power_w"].to_numpy())
    assert gemm < 0.5 * constant


@pytest.mark.slow
def test_shipped_coefficients_meet_the_a10_forecast_target():
    """Issue 4: A10 power forecast MAPE <= 15% with coefficients fitted on no A10 data."""
    from dse.calibrate.data.energaizer import ENERGAIZER_FILES
    from dse.perf.coeffs import load_power_coeffs

    pc = load_power_coeffs("ampere")
    assert all(ENERGAIZER_FILES["a10"] not in s["file"] for s in pc.provenance["sources"])
    rows = rows_frame(validate_power(datasets=("a10",)))
    a10 = rows[(rows["dataset"] == "a10") & (rows["group"] == "all")].iloc[0]
    assert a10["num_samples"] == 80
    assert a10["power_mape"] <= 0.15

"""Registry: every op type has an estimator; graph totals weigh by count; order is kept."""

from __future__ import annotations

import json

import pytest

from dse.perf.coeffs import load_coeffs, load_default_coeffs, neutral_coeffs, save_coeffs
from dse.perf.registry import ESTIMATORS, estimate_graph, estimate_op, estimate_ops
from dse.perf.types import OperatingPoint
from dse.workload.graph import WorkloadGraph
from dse.workload.ops import OP_TYPES, AttentionOp, ElementwiseOp, GemmOp, NormOp, SoftmaxOp

OPS = [
    GemmOp(name="qkv", m=512, n=6144, k=4096, count=32),
    AttentionOp(
        name="attn",
        batch=1,
        num_heads=32,
        num_kv_heads=8,
        head_dim=128,
        seq_len_q=512,
        seq_len_kv=512,
        count=32,
    ),
    SoftmaxOp(name="sm", rows=512, cols=32000),
    NormOp(name="norm", rows=512, cols=4096, kind="rmsnorm", count=65),
    ElementwiseOp(name="act", kind="silu_mul", num_elements=512 * 14336, count=32),
    GemmOp(name="lm_head", m=512, n=32000, k=4096),
]


def test_every_op_type_has_an_estimator():
    assert set(ESTIMATORS) == set(OP_TYPES)


def test_estimate_ops_keeps_order_and_matches_scalar(h100, hopper_coeffs):
    p = OperatingPoint(sm_clock_hz=1.4e9)
    many = estimate_ops(OPS, h100, p, hopper_coeffs)
    assert [e.name for e in many] == [o.name for o in OPS]
    assert many == [estimate_op(o, h100, p, hopper_coeffs) for o in OPS]
    assert all(e.sm_clock_hz == 1.4e9 for e in many)


def test_graph_total_is_count_weighted(h100, hopper_coeffs):
    g = WorkloadGraph(name="toy", ops=tuple(OPS))
    est = estimate_graph(g, h100, OperatingPoint(), hopper_coeffs)
    assert est.latency_s == pytest.approx(sum(k.latency_s * k.count for k in est.kernels))
    assert est.flop == pytest.approx(sum(o.flop * o.count for o in OPS))
    assert sum(est.by_kind().values()) == pytest.approx(est.latency_s)


def test_default_clock_is_the_boost_clock(h100):
    e = estimate_op(OPS[0], h100, OperatingPoint())
    assert e.sm_clock_hz == h100.clocks.boost_clock_hz


def test_coefficients_change_latency_not_traffic(h100, hopper_coeffs):
    raw = estimate_op(OPS[0], h100, OperatingPoint(), None)
    fitted = estimate_op(OPS[0], h100, OperatingPoint(), hopper_coeffs)
    assert fitted.latency_s > raw.latency_s
    assert fitted.analytical_s == pytest.approx(raw.analytical_s, rel=0.3)
    assert fitted.flop == raw.flop


def test_coeff_set_round_trip(tmp_path, hopper_coeffs):
    path = tmp_path / "c.json"
    save_coeffs(hopper_coeffs, path)
    back = load_coeffs(path)
    assert back.table == hopper_coeffs.table
    assert back.sources == hopper_coeffs.sources
    assert back.architecture == "hopper"


def test_default_sets_by_architecture(h100, a100):
    assert load_default_coeffs(h100).architecture == "hopper"
    assert load_default_coeffs(a100).architecture == "ampere"
    assert load_default_coeffs("ada").name == "neutral"  # no Ada data decides (LATENCY_FALLBACK)
    # Blackwell borrows Hopper's corrections and fused-MoE set, as its power set does
    blackwell, hopper = load_default_coeffs("blackwell"), load_default_coeffs(h100)
    assert blackwell.name == hopper.name and blackwell.table == hopper.table
    assert blackwell.moe is not None
    assert neutral_coeffs().table.lookup("gemm/f16/large").as_tuple() == (1.0, 1.0, 1.0, 0.0, 1.0, 1.0)


def test_shipped_sets_have_provenance(hopper_coeffs, ampere_coeffs):
    for cs in (hopper_coeffs, ampere_coeffs):
        assert cs.sources and all(len(s["sha256"]) == 64 for s in cs.sources)
        assert cs.dse_version and cs.created and cs.method
        assert cs.fit_error
        for name, c in cs.table.groups.items():
            assert c.lambda_main >= 1.0 and c.lambda_epi >= 1.0 and c.lambda_pro >= 0.0 and c.eps_s >= 0.0, (
                name
            )
            assert c.math_derate >= 1.0 and c.load_derate >= 1.0, name


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (lambda d: d.pop("groups"), "groups: expected a non-empty object"),
        (lambda d: d.update(groups={}), "groups: expected a non-empty object"),
        (lambda d: d.update(architecture="hopperr"), "architecture 'hopperr' is not one of"),
    ],
)
def test_a_coefficient_file_that_corrects_nothing_or_names_no_architecture_is_refused(
    tmp_path, ampere_coeffs, change, needle
) -> None:
    """A newcomer's copies of the shipped file without `groups` predicted uncorrected kernels without a word,
    and one stamped 'hopperr' passed as an Ampere set on an A100."""
    from dse.errors import ConfigError

    path = tmp_path / "c.json"
    save_coeffs(ampere_coeffs, path)
    data = json.loads(path.read_text())
    change(data)
    path.write_text(json.dumps(data))
    with pytest.raises(ConfigError, match=needle):
        load_coeffs(path)

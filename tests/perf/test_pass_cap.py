"""The power cap on a pass's mean power (`dse.perf.pass_cap`): one clock per pass."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dse.hardware.catalog import load_gpu
from dse.perf.coeffs import default_power_coeffs
from dse.perf.dvfs import capped_rows, clock_grid_hz
from dse.perf.power import gpu_power_terms
from dse.perf.predict import predict_graph, predict_graph_totals, predict_graphs
from dse.perf.types import OperatingPoint
from dse.workload.graph import WorkloadGraph
from dse.workload.ops import ElementwiseOp, GemmOp
from tests.perf.power_fakes import roofline_estimator

H100 = load_gpu("h100-sxm")
# H100 with a limit far above anything it draws: the mean power at any clock, unthrottled.
UNCAPPED = H100.model_copy(update={"power": H100.power.model_copy(update={"tdp_w": 1e5})})
HOT = GemmOp(name="hot", m=8192, n=8192, k=8192)


def _mix(cool: int) -> WorkloadGraph:
    """A big GEMM followed by `cool` streaming kernels of 2^26 elements (DRAM-bound, cooler)."""
    ops = (HOT, ElementwiseOp(name="cool", kind="add", num_elements=1 << 26, count=cool))
    return WorkloadGraph(name=f"mix{cool}", ops=ops)


def test_hot_kernel_in_a_cool_pass_is_not_throttled():
    """Our H100: bf16 GEMMs in a loop settle at the 700 W cap near 1400 MHz, while eager passes that mix
    them with cooler kernels ran at 1980 MHz averaging 600-690 W (`dse/calibrate/measured` README). The
    model: the GEMM alone is throttled, the same GEMM in a pass whose mean fits is not."""
    alone = predict_graph(WorkloadGraph(name="hot", ops=(HOT,)), H100)
    assert alone.effective_clock_hz < H100.clocks.boost_clock_hz
    assert alone.avg_power_w <= H100.power.tdp_w + 1e-9
    mixed = predict_graph(_mix(400), H100)
    assert mixed.avg_power_w < H100.power.tdp_w
    assert mixed.effective_clock_hz == H100.clocks.boost_clock_hz
    assert mixed.peak_power_w > H100.power.tdp_w  # the GEMM itself draws more, for its milliseconds


@pytest.mark.parametrize("launch", [None, "eager"])
@pytest.mark.parametrize("cap", [300.0, 420.0, 550.0])
def test_the_pass_runs_at_the_highest_grid_clock_whose_mean_fits(launch, cap):
    """Against an exhaustive search: the mean power of the pass at every grid clock (the roofline stand-in
    has no tile choice, so each clock's prediction is the pass at that clock)."""
    graph = _mix(40)
    grid = clock_grid_hz(H100)
    means = [
        predict_graph(
            graph, UNCAPPED, OperatingPoint(sm_clock_hz=f), estimator=roofline_estimator, launch=launch
        )
        for f in grid
    ]
    fits = [f for f, p in zip(grid, means, strict=True) if p.avg_power_w <= cap]
    capped = predict_graph(
        graph, H100, OperatingPoint(power_cap_w=cap), estimator=roofline_estimator, launch=launch
    )
    assert fits, "the test's caps are reachable"
    assert capped.effective_clock_hz == pytest.approx(max(fits))
    assert capped.avg_power_w <= cap + 1e-9


@settings(max_examples=25, deadline=None)
@given(
    m=st.integers(1, 16384),
    n=st.integers(1, 16384),
    k=st.integers(1, 16384),
    cap=st.floats(200.0, 700.0),
)
def test_a_pass_of_one_kernel_is_the_per_kernel_rule(m, n, k, cap):
    """A kernel timed in a loop is a pass of one kernel: the same clock as `capped_rows`' per-kernel search
    (itself tested exhaustively in test_dvfs)."""
    op = GemmOp(name="g", m=m, n=n, k=k)
    point = OperatingPoint(power_cap_w=cap)
    pc = default_power_coeffs(H100)
    per_kernel = capped_rows([op], H100, point, None, pc, gpu_power_terms(H100))
    one = predict_graph(WorkloadGraph(name="g", ops=(op,)), H100, point)
    assert one.effective_clock_hz == per_kernel.rows["sm_clock_hz"][0]
    assert one.kernels[0].cap_exceeded == bool(per_kernel.cap_exceeded[0])


def test_graphs_predicted_together_equal_graphs_one_by_one():
    graphs = [_mix(c) for c in (1, 5, 40, 400)]
    point = OperatingPoint(power_cap_w=450.0)
    together = predict_graphs(graphs, H100, point)
    assert len({p.effective_clock_hz for p in together}) > 1  # the passes throttle differently
    for g, p in zip(graphs, together, strict=True):
        alone = predict_graph(g, H100, point)
        assert p.latency_s == pytest.approx(alone.latency_s, rel=1e-12)
        assert p.energy_j == pytest.approx(alone.energy_j, rel=1e-12)


def test_totals_group_graphs_into_one_pass():
    """`passes` makes graphs share one clock set by their joint mean (a training step's microbatches and
    optimizer); alone, the hot graph throttles deeper than inside the group."""
    hot, cool = WorkloadGraph(name="hot", ops=(HOT,)), _mix(400)
    cap = OperatingPoint(power_cap_w=500.0)
    lat_own, _, _ = predict_graph_totals([hot, cool], H100, cap)
    lat_joint, en_joint, _ = predict_graph_totals([hot, cool], H100, cap, passes=[[0, 1]], runs=[1.0, 1.0])
    assert lat_joint[0] < lat_own[0]  # hot runs at the group's (higher) clock
    assert float(en_joint.sum() / lat_joint.sum()) <= 500.0 + 1e-9
    with pytest.raises(ValueError, match="exactly once"):
        predict_graph_totals([hot, cool], H100, cap, passes=[[0]])


def test_lower_cap_never_raises_the_clock():
    graph = _mix(40)
    clocks = [
        predict_graph(graph, H100, OperatingPoint(power_cap_w=c)).effective_clock_hz
        for c in np.linspace(250.0, 700.0, 10)
    ]
    assert all(a <= b for a, b in zip(clocks, clocks[1:], strict=False))


def test_passes_group_graphs_in_any_order():
    """Results come back in graph order whatever the grouping; each pass equals that pass predicted alone."""
    empty = WorkloadGraph(name="empty", ops=())
    g0, g1, g2 = _mix(40), WorkloadGraph(name="hot", ops=(HOT,)), _mix(400)
    point = OperatingPoint(power_cap_w=450.0)
    together = predict_graphs([g0, g1, g2, empty], H100, point, passes=[[2, 0], [1, 3]], runs=[2, 1, 1, 1])
    assert [p.name for p in together] == ["mix40", "hot", "mix400", "empty"]
    pair = predict_graphs([g2, g0], H100, point, passes=[[0, 1]], runs=[1, 2])
    for a, b in (
        (together[0], pair[1]),
        (together[2], pair[0]),
        (together[1], predict_graph(g1, H100, point)),
    ):
        assert a.latency_s == pytest.approx(b.latency_s, rel=1e-12)
        assert a.energy_j == pytest.approx(b.energy_j, rel=1e-12)
    assert together[3].latency_s == 0.0
    # two runs of the cooler graph lower the pair's mean: it runs faster than the hot graph alone
    assert together[0].effective_clock_hz == together[2].effective_clock_hz > together[1].effective_clock_hz


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"passes": [[0]]}, "exactly once"),
        ({"passes": [[0, 1], []]}, "exactly once"),
        ({"runs": [1.0]}, "runs must be 2"),
        ({"runs": [1.0, -0.5]}, "runs must be 2"),
        ({"runs": [1.0, float("nan")]}, "runs must be 2"),
        ({"cap_rule": "kernels"}, "cap rule"),
    ],
)
def test_bad_passes_runs_and_rules_are_errors(kwargs, match):
    graphs = [_mix(1), WorkloadGraph(name="hot", ops=(HOT,))]
    with pytest.raises(ValueError, match=match):
        predict_graphs(graphs, H100, **kwargs)
    with pytest.raises(ValueError, match=match):
        predict_graph_totals(graphs, H100, **kwargs)


def test_idle_time_in_a_pass_lets_it_run_faster():
    """A pipeline's bubble idles inside the controller's window: counted in the mean, the kernels may run
    at a higher clock, and the mean with the idle time still fits the cap."""
    hot = WorkloadGraph(name="hot", ops=(HOT,))
    cap_w = 500.0
    point = OperatingPoint(power_cap_w=cap_w)
    busy_s, busy_j, _ = predict_graph_totals([hot], H100, point)
    lat_s, energy_j, _ = predict_graph_totals([hot], H100, point, idle_share=1.0)
    assert lat_s[0] < busy_s[0]
    assert busy_j[0] / busy_s[0] <= cap_w + 1e-9
    kernels_w = energy_j[0] / lat_s[0]
    assert kernels_w > cap_w  # the kernels alone draw more than the cap, the idle half brings the mean down
    # the mean (kernels, then as long at idle power at the pass's clock, between the table's ends) fits
    idle = gpu_power_terms(H100).idle_power_w
    lowest_w = float(idle(np.asarray(H100.clocks.sm_clock_min_hz)))
    highest_w = float(idle(np.asarray(H100.clocks.boost_clock_hz)))
    assert (kernels_w + lowest_w) / 2 <= cap_w + 1e-9
    assert (kernels_w + highest_w) / 2 >= 0.97 * cap_w  # and it is not throttled far below the cap


def test_a_pipelined_training_step_holds_its_kernels_at_the_cap():
    """Under a binding cap a 4-stage pipeline's kernels (micro-batches and optimizer, one pass) average the
    cap, not far below it; the bubble idles outside that pass, so the step's mean falls below the cap
    (crediting the bubble against the cap let the kernels run over it)."""
    from dse.training.parallel import ParallelLayout
    from dse.training.predict import predict_training
    from dse.training.step import TrainingRequest

    req = TrainingRequest(
        micro_batch=1,
        global_batch=32,
        seq_len=4096,
        precision="bf16",
        layout=ParallelLayout(num_gpus=8, pp=4),
    )
    for cap_w in (450.0, 600.0):
        est = predict_training("llama-3.1-8b", H100, req, OperatingPoint(power_cap_w=cap_w))
        kernels = ("forward", "backward", "optimizer")
        kernel_w = sum(est.phase_energy_j[k] for k in kernels) / sum(est.phase_time_s[k] for k in kernels)
        assert 0.97 * cap_w <= kernel_w <= cap_w * (1 + 1e-6)
        assert est.avg_power_w < kernel_w


def test_eager_attention_gemms_keep_the_kernel_chosen_at_the_choice_clock():
    """A GEMM runs the kernel chosen at its choice clock (`choice_clock_hz`) whatever clock it runs at.
    Eager attention's two batched GEMMs ignored it: Llama-3.1-8B's PV product at 2,048 tokens of context
    picks another kernel at 1,000 MHz than at 1,980."""
    from dse.perf.multiclock import family_arrays, family_of
    from dse.workload.llm import build_decode_graph
    from dse.workload.models import load_model_config

    gpu = load_gpu("h100-sxm")
    graph = build_decode_graph(
        load_model_config("llama-3.1-8b"), batch=1, context_len=2048, precision="bf16", attention="eager"
    )
    ops = [o for o in graph.ops if family_of(o) == "attention_eager"]
    high, low = np.full(len(ops), 1.98e9), np.full(len(ops), 1.0e9)
    chosen_high = family_arrays("attention_eager", ops, gpu, high)["parts"]["pv"]["tile_idx"]
    chosen_low = family_arrays("attention_eager", ops, gpu, low)["parts"]["pv"]["tile_idx"]
    assert not np.array_equal(chosen_high, chosen_low)  # the shape where the choice depends on the clock
    kept = family_arrays("attention_eager", ops, gpu, low, choice_clock_hz=1.98e9, choice_memo={})
    assert np.array_equal(kept["parts"]["pv"]["tile_idx"], chosen_high)


@pytest.mark.parametrize(
    ("model", "gpu_name", "cap_w"), [("mixtral-8x7b", "b200", 400.0), ("mixtral-8x7b", "h100-sxm", 300.0)]
)
def test_a_capped_decode_is_the_fastest_locked_clock_that_fits(model, gpu_name, cap_w):
    """Under a cap the pass runs as it would locked at its effective clock, and no grid clock whose locked
    pass fits the cap is faster. Mixtral's decode on B200 under 400 W took 23.7 ms at the default clock
    (reported at 900 MHz, on kernels chosen for 1,965 MHz) but 21.6 ms locked at 600 MHz, where its mean fits
    too: asking for a lower clock made a capped GPU faster (physics review, session 35)."""
    from dse.workload.llm import build_decode_graph
    from dse.workload.models import load_model_config

    gpu = load_gpu(gpu_name)
    graph = build_decode_graph(load_model_config(model), batch=16, context_len=300, precision="bf16")
    capped = predict_graph(graph, gpu, OperatingPoint(power_cap_w=cap_w))
    assert capped.effective_clock_hz < gpu.clocks.boost_clock_hz  # the cap binds
    at_clock = predict_graph(graph, gpu, OperatingPoint(sm_clock_hz=capped.effective_clock_hz))
    assert capped.latency_s == pytest.approx(at_clock.latency_s, rel=1e-9)
    for f in clock_grid_hz(gpu)[::4]:
        locked = predict_graph(graph, gpu, OperatingPoint(sm_clock_hz=float(f)))
        if locked.avg_power_w <= cap_w:
            assert capped.latency_s <= locked.latency_s * (1 + 1e-9), f / 1e6


def test_a_small_pass_guessed_a_few_clocks_high_is_searched_in_one_call(monkeypatch):
    """A static batch's prefill pass (15 distinct kernels) over the cap: the compute-bound guess lands
    above the answer, as the docstring expects of a pass with DRAM-bound time, and the first probe's
    clocks under the guess bracket the answer, so the search makes one kernel-model call after the first
    pass (it made two while the first probe held only the guess's neighbours)."""
    from dse.perf import pass_cap
    from dse.serving.static import ServingRequest, predict_serving
    from dse.workload.models import load_model_config

    probes: list[np.ndarray] = []
    searches: list[pass_cap._PassSearch] = []
    probe = pass_cap._PassSearch._probe

    def counted(self, which, fine_idx, *args):
        probes.append(np.asarray(fine_idx))
        searches.append(self)
        return probe(self, which, fine_idx, *args)

    monkeypatch.setattr(pass_cap._PassSearch, "_probe", counted)
    request = ServingRequest(batch=32, input_tokens=1024, output_tokens=256)
    predict_serving(load_model_config("llama-3.1-8b"), H100, request)
    assert len(probes) == 1
    search = searches[0]
    assert search.members[0].size <= 20 and search.hi[0] == search.lo[0] + 1
    guess = probes[0][1]  # the clock above the guess comes first
    assert guess - search.lo[0] >= 2  # the guess's neighbours alone would not have closed the bracket

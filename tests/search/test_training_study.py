"""Training studies (`workload: {mode: training}`): a point is `dse predict --training`, the checks name
the field, and the shipped study runs."""

from __future__ import annotations

from pathlib import Path

import pytest

from dse.errors import ConfigError
from dse.hardware.catalog import load_gpu
from dse.search.objective import evaluate_point
from dse.search.runner import run_study
from dse.search.study import load_study, study_from_dict
from dse.training.parallel import ParallelLayout
from dse.training.predict import predict_training
from dse.training.step import TrainingRequest

REPO = Path(__file__).resolve().parents[2]
STUDY = {
    "name": "train",
    "model": "mpt-1b",
    "gpu": "h100-sxm",
    "workload": {"mode": "training", "num_gpus": 8, "micro_batch": 4, "global_batch": 64, "seq_len": 2048},
    "space": {"sm_clock_mhz": {"values": [1200, 1980]}, "fsdp": {"values": [False, True]}},
    "objectives": {"step_time_s": "minimize", "energy_per_token_j": "minimize"},
    "search": {"sampler": "grid", "n_points": 10, "executor": "serial"},
}


def test_a_training_point_is_the_cli_prediction() -> None:
    cfg = study_from_dict(STUDY)
    got = evaluate_point({"sm_clock_mhz": 1200, "fsdp": True}, cfg.eval_context())
    from dse.perf.types import OperatingPoint

    request = TrainingRequest(
        micro_batch=4, global_batch=64, seq_len=2048, layout=ParallelLayout(num_gpus=8, fsdp=True)
    )
    want = predict_training(
        "mpt-1b", load_gpu("h100-sxm"), request, OperatingPoint(sm_clock_hz=1200e6)
    ).metrics()
    for key in ("step_time_s", "tokens_per_s_per_gpu", "energy_per_token_j", "avg_power_w", "mfu"):
        assert got[key] == want[key]
    assert got["sm_clock_hz"] == 1200e6 and got["feasible"] is True


def test_training_study_runs(tmp_path: Path) -> None:
    summary = run_study(study_from_dict(STUDY), out=tmp_path)
    assert (summary.n_points, summary.n_failed) == (4, 0)
    assert summary.front_size >= 1
    # counts stay integers in the run log, as `dse predict --training --json` prints them (they were 8.0)
    import json

    (log,) = tmp_path.rglob("points.jsonl")
    metrics = json.loads(log.read_text().splitlines()[0])["metrics"]
    assert metrics["num_gpus"] == 8 and isinstance(metrics["num_gpus"], int)
    assert isinstance(metrics["step_time_s"], float)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"space": {"mode": {"values": ["training", "static"]}}}, "do not mix the modes"),
        ({"space": {"concurrency": {"values": [4]}}}, "not a training parameter"),
        ({"objectives": {"ttft_s": "minimize"}}, "unknown metric 'ttft_s'"),
        # a vision step reports per sample, an LLM's per token: every point failed on the other kind's metric
        ({"model": "resnet-50", "workload": {"mode": "training", "num_gpus": 8, "micro_batch": 32}},
         r"objectives\.energy_per_token_j: unknown metric"),
        ({"objectives": {"energy_per_sample_j": "minimize"}}, r"objectives\.energy_per_sample_j: unknown"),
        ({"workload": {"mode": "training", "recompute": "most"}}, "recompute"),
        ({"workload": {**STUDY["workload"], "precision": "mxfp4"}},
         r"workload\.precision: mxfp4 is a serving"),
        # a GPU field past its own bounds, at load and in the unit written (it failed at every point)
        ({"space": {"gpu.clocks.sm_clock_max_mhz": {"values": [1500, 9e9]}}},
         r"space\.gpu\.clocks\.sm_clock_max_mhz\.values\.1: .* 100000 MHz \(got 9e\+09 MHz\)"),
        # above the 1,000,000 GPUs a layout holds (`dse predict --num-gpus`): every point failed at run time
        ({"workload": {**STUDY["workload"], "num_gpus": 2_000_000}}, r"workload\.num_gpus: .*1000000"),
        ({"space": {"num_gpus": {"values": [8, 2_000_000]}}}, r"space\.num_gpus: workload key 'num_gpus'"),
        # a key the model never reads, written or searched: refused at load (every point ran without it)
        ({"workload": {**STUDY["workload"], "image_size": 160}}, r"workload\.image_size: .*not a vision"),
        ({"space": {"memory_format": {"values": ["nchw", "nhwc"]}}}, r"space\.memory_format: .*not a vision"),
        ({"model": "resnet-50", "workload": {**STUDY["workload"], "seq_len": 4096}},
         r"workload\.seq_len: resnet-50 is a vision model"),
    ],
)  # fmt: skip
def test_training_study_errors_name_the_field(change: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        study_from_dict({**STUDY, **change})


def test_a_training_run_resumes_and_reports_from_its_resolved_study(tmp_path: Path) -> None:
    """study.resolved.yaml writes every workload default (memory_format: nchw for an LLM, attention_kernel:
    fa2 and seq_len: 2048 for a vision model): the model-kind check refused the run's own file, so --resume
    and the report's energy breakdowns failed (a newcomer's finding)."""
    vision = {"mode": "training", "num_gpus": 8, "micro_batch": 32}
    for model, workload, energy in (
        ("mpt-1b", STUDY["workload"], "energy_per_token_j"),
        ("resnet-50", vision, "energy_per_sample_j"),
    ):
        space = {"sm_clock_mhz": {"values": [1980]}}
        objectives = {"step_time_s": "minimize", energy: "minimize"}
        study = {**STUDY, "model": model, "workload": workload, "space": space, "objectives": objectives}
        run_study(study_from_dict(study), out=tmp_path / model)
        (resolved,) = (tmp_path / model).rglob("study.resolved.yaml")
        assert load_study(resolved).config.model == model


def test_the_shipped_training_study_loads() -> None:
    cfg = load_study(REPO / "studies" / "training.yaml").config
    assert cfg.workload.mode == "training" and "energy_per_token_j" in cfg.objectives


@pytest.mark.parametrize(("key", "value"), [("objective", "finetune"), ("memory_format", "nhwc")])
def test_a_training_option_the_model_lacks_is_an_error_not_a_duplicate_point(key: str, value: str) -> None:
    # mpt-1b is a decoder LLM: a fine-tuning objective or a convolution layout would be silently ignored,
    # making points that differ only in it duplicates.
    cfg = study_from_dict(STUDY)
    with pytest.raises(ConfigError, match=key):
        evaluate_point({"sm_clock_mhz": 1200, key: value}, cfg.eval_context())


def test_the_attention_kernel_is_a_study_key() -> None:
    """`attention_kernel` in the workload (or the space) reaches the request: fa3 is faster than the
    default fa2 on Hopper, as `dse predict --training --attention-kernel fa3` is."""
    fa2 = evaluate_point({"fsdp": True}, study_from_dict(STUDY).eval_context())
    study = {**STUDY, "workload": {**STUDY["workload"], "attention_kernel": "fa3"}}
    fa3 = evaluate_point({"fsdp": True}, study_from_dict(study).eval_context())
    assert fa3["step_time_s"] < fa2["step_time_s"]
    searched = evaluate_point(
        {"fsdp": True, "attention_kernel": "fa3"}, study_from_dict(STUDY).eval_context()
    )
    assert searched["step_time_s"] == pytest.approx(fa3["step_time_s"], rel=1e-12)


LLAMA_TP = {**STUDY, "model": "llama-3.1-8b", "space": {"tp": {"values": [2]}}}


def test_megatron_layout_keys_are_study_keys() -> None:
    """cp, distributed_optimizer and tp_comm_overlap reach the step as `dse predict` flags do; a quoted
    "false" is refused naming the key, as in the workload: section (it ran as true: bool("false"))."""
    ctx = study_from_dict(LLAMA_TP).eval_context()
    on = evaluate_point({"tp": 2, "tp_comm_overlap": True}, ctx)
    off = evaluate_point({"tp": 2, "tp_comm_overlap": False}, ctx)
    assert off["step_time_s"] > on["step_time_s"]
    with pytest.raises(ConfigError, match="workload key 'tp_comm_overlap'"):
        evaluate_point({"tp": 2, "tp_comm_overlap": "false"}, ctx)
    split = evaluate_point({"tp": 1, "cp": 2, "distributed_optimizer": True}, ctx)
    assert (split["cp"], split["dp"]) == (2, 4)
    # contiguous chunks: the last context-parallel rank's extra causal work lengthens the step
    flat = evaluate_point({"tp": 1, "cp": 2, "cp_load_balance": False}, ctx)
    assert flat["step_time_s"] > evaluate_point({"tp": 1, "cp": 2}, ctx)["step_time_s"]


def test_ep_dispatcher_is_a_study_key() -> None:
    """A MoE study's ep_dispatcher reaches the step as --ep-dispatcher does: DeepEP's per-node copies
    shorten a two-node expert-parallel step."""
    moe = {
        **STUDY, "model": "qwen3-30b-a3b",
        "workload": {
            **STUDY["workload"], "num_gpus": 16, "micro_batch": 1, "global_batch": 32, "seq_len": 4096,
        },
        "space": {"ep": {"values": [16]}},
    }  # fmt: skip
    ctx = study_from_dict(moe).eval_context()
    deepep = evaluate_point({"ep": 16, "distributed_optimizer": True, "ep_dispatcher": "deepep"}, ctx)
    alltoall = evaluate_point({"ep": 16, "distributed_optimizer": True}, ctx)
    assert deepep["step_time_s"] < alltoall["step_time_s"]


@pytest.mark.parametrize(
    ("space", "message"),
    [
        ({"vp": {"values": [1.5]}}, r"space\.vp: workload key 'vp'"),
        ({"cp": {"values": ["two"]}}, r"space\.cp: workload key 'cp'"),
        ({"tp_comm_overlap": {"values": ["maybe"]}}, "tp_comm_overlap"),
        # the clock and the cap are checked as a serving study and `dse predict --training` check them
        # (5,000 MHz ran at 1,980 and "abc" failed every point at run time)
        ({"sm_clock_mhz": {"values": [1200, 5000]}}, r"space\.sm_clock_mhz.*outside h100-sxm's SM clock"),
        ({"power_cap_w": {"values": [400, "abc"]}}, r"space\.power_cap_w.*finite number"),
        ({"power_cap_w": {"values": [50]}}, r"space\.power_cap_w"),
        # mxfp4 (a serving checkpoint's MoE experts, accepted in serving studies) failed every training point
        ({"precision": {"values": ["bf16", "mxfp4"]}}, r"space\.precision\.values\.1: mxfp4 is a serving"),
    ],
)
def test_space_values_a_workload_key_cannot_take_are_refused_at_load(space: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        study_from_dict({**STUDY, "space": space})


def test_expert_parallel_and_lora_rank_reach_the_step() -> None:
    moe = {**STUDY, "model": "qwen3-30b-a3b", "space": {"ep": {"values": [1, 8]}}}
    ctx = study_from_dict(moe).eval_context()
    one, eight = evaluate_point({"ep": 1}, ctx), evaluate_point({"ep": 8}, ctx)
    assert (one["ep"], eight["ep"]) == (1, 8) and eight["memory_bytes"] < one["memory_bytes"]
    dense = study_from_dict({**STUDY, "space": {"lora_rank": {"values": [0, 16]}}}).eval_context()
    full, lora = evaluate_point({"lora_rank": 0}, dense), evaluate_point({"lora_rank": 16}, dense)
    assert lora["lora_rank"] == 16 and lora["step_time_s"] < full["step_time_s"]


def test_workload_ranges_are_checked_at_their_ends_not_enumerated() -> None:
    """A 2-million-wide integer range loads at once (it was enumerated value by value); a float range on
    an integer key and a boolean for a number are refused at load."""
    study_from_dict({**STUDY, "space": {"micro_batch": {"type": "int", "low": 1, "high": 2_000_000}}})
    with pytest.raises(ConfigError, match="float range draws fractions"):
        study_from_dict({**STUDY, "space": {"lora_rank": {"type": "float", "low": 1.0, "high": 8.0}}})
    with pytest.raises(ConfigError, match="workload key 'ep': True is not a valid value"):
        study_from_dict({**STUDY, "space": {"ep": {"values": [True]}}})


def test_a_key_no_point_reads_is_refused_at_load() -> None:
    """Training keys in a serving study and serving keys in a training study ran without effect and were
    dropped from the resolved study; now the check names them."""
    with pytest.raises(ConfigError, match=r"workload\.input_tokens.*not read"):
        study_from_dict({**STUDY, "workload": {**STUDY["workload"], "input_tokens": 512}})
    serving = {
        "name": "serve", "model": "llama-3.1-8b", "gpu": "h100-sxm",
        "workload": {"batch": 8, "input_tokens": 128, "output_tokens": 16},
        "space": {"sm_clock_mhz": {"values": [1200, 1980]}, "lora_rank": {"values": [0, 8]}},
        "objectives": {"e2e_latency_s": "minimize", "energy_per_output_token_j": "minimize"},
        "search": {"sampler": "grid", "n_points": 4, "executor": "serial"},
    }  # fmt: skip
    with pytest.raises(ConfigError, match=r"space\.lora_rank.*not read"):
        study_from_dict(serving)
    with pytest.raises(ConfigError, match=r"workload\.packed_sample_len.*not read"):
        study_from_dict({**serving, "space": {"sm_clock_mhz": {"values": [1200]}},
                         "workload": {**serving["workload"], "packed_sample_len": 64}})  # fmt: skip


def test_a_cost_fact_is_a_training_study_parameter() -> None:
    """`cost.<path>` is a space parameter in training studies as in serving ones (the README's cost
    section); it was refused as 'not a training parameter' though the points price with it."""
    study = {**STUDY, "space": {"cost.memory_usd_per_gb.hbm3": {"values": [10, 20]}}}
    study["objectives"] = {"step_time_s": "minimize", "usd_per_million_tokens": "minimize"}
    ctx = study_from_dict(study).eval_context()
    cheap = evaluate_point({"cost.memory_usd_per_gb.hbm3": 10}, ctx)
    dear = evaluate_point({"cost.memory_usd_per_gb.hbm3": 20}, ctx)
    assert dear["memory_cost_usd"] == pytest.approx(2 * cheap["memory_cost_usd"])
    assert dear["step_time_s"] == cheap["step_time_s"]
    bad = {**STUDY, "space": {"cost.memory_usd_per_gb.hbm9": {"values": [10]}}}
    with pytest.raises(ConfigError, match="hbm9"):
        study_from_dict(bad)
    negative = {**STUDY, "space": {"cost.memory_usd_per_gb.hbm3": {"values": [10, -5]}}}
    with pytest.raises(ConfigError, match=r"space\.cost\.memory_usd_per_gb\.hbm3\.values\.1"):
        study_from_dict(negative)


def test_a_layout_or_batch_no_point_can_run_is_refused_at_load() -> None:
    """A newcomer's studies with tp 3 or a global batch of 7 on 8 GPUs loaded, then failed every point
    ("--num-gpus 8 is not a multiple of tp x pp x cp = 3"), where a serving study's tp 3 is refused at
    load. Now: refused where written, in the study's key names; a searched value that runs with some
    other point's values loads."""
    workload = STUDY["workload"]
    with pytest.raises(ConfigError, match=r"workload\.global_batch: no point .*: global batch 7"):
        study_from_dict({**STUDY, "workload": {**workload, "global_batch": 7}})
    with pytest.raises(ConfigError, match=r"workload\.tp: .*num_gpus 8 is not a multiple of tp x pp x cp"):
        study_from_dict({**STUDY, "workload": {**workload, "tp": 3}})
    with pytest.raises(ConfigError, match=r"space\.tp\.values\.2: tp 3: no point of this study can run it"):
        study_from_dict({**STUDY, "space": {"tp": {"values": [1, 2, 3]}}})
    # global batch 64 with micro batch 4: dp 8 (tp 1) runs it, so micro batch 16 does too with tp 2 (dp 4)
    study_from_dict({**STUDY, "space": {"tp": {"values": [1, 2]}, "micro_batch": {"values": [4, 16]}}})
    # a reviewer's studies the first version refused: num_gpus 6 runs at the workload's tp 1, which the
    # `when` leaves it (tp 4 only on 8 GPUs); and ep 4 on 4 GPUs, the space varying ep beside num_gpus
    gb48 = {**workload, "global_batch": 48}
    study_from_dict({**STUDY, "workload": gb48, "space": {
        "num_gpus": {"values": [6, 8]}, "tp": {"values": [4], "when": {"num_gpus": 8}}}})  # fmt: skip
    moe = {**STUDY, "model": "qwen3-30b-a3b", "workload": {**workload, "ep": 8, "micro_batch": 1}}
    study_from_dict({**moe, "space": {"num_gpus": {"values": [4, 8]}, "ep": {"values": [4, 8]}}})

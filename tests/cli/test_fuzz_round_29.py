"""A newcomer's and a fuzzer's findings (session 29): each was a traceback, a hang or a silent wrong answer.
Each now gives one clear line naming the file or field, with the exit code of its kind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dse.cli import app
from tests.cli.fuzz_helpers import gemm_samples, refused, runner

# one logged point, as `dse run` writes it: enough for `dse report` to draw a run
POINT = {"point_id": "p0", "params": {"batch": 8}, "metrics": {"e2e_latency_s": 1.0, "energy_j": 2.0}}
STUDY = """\
name: tiny
gpu: h100-sxm
workload: {batch: 8, input_tokens: 64, output_tokens: 8}
space: {batch: {values: [8]}}
objectives: {e2e_latency_s: minimize, energy_j: minimize}
search: {sampler: grid, n_points: 1, executor: serial}
"""
HOSTILE_JSON = {
    "non-UTF-8": b"\xff\xfe\x8c{}",
    "nested past the parser": b"[" * 100_000 + b"]" * 100_000,
}


@pytest.mark.parametrize("name", ["summary.json", "env.json", "breakdowns.json"])
@pytest.mark.parametrize("content", list(HOSTILE_JSON), ids=list(HOSTILE_JSON))
def test_a_damaged_run_file_is_a_warning_in_report_not_a_traceback(
    tmp_path: Path, name: str, content: str
) -> None:
    # the report reads these files best-effort (a killed run lacks them): a damaged one was a
    # UnicodeDecodeError or RecursionError traceback with exit 1, as a merely truncated one never was
    (tmp_path / "points.jsonl").write_text(json.dumps(POINT) + "\n")
    (tmp_path / name).write_bytes(HOSTILE_JSON[content])
    result = runner.invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "Traceback" not in result.output
    assert (tmp_path / "report.html").is_file()


def test_a_resume_of_a_run_whose_env_file_is_damaged_is_refused_in_one_line(tmp_path: Path) -> None:
    # the run's fingerprint is unknown then, as for a run of an older version: one error, exit 2
    (tmp_path / "study.resolved.yaml").write_text(STUDY)
    (tmp_path / "points.jsonl").write_text(json.dumps(POINT) + "\n")
    (tmp_path / "env.json").write_bytes(HOSTILE_JSON["nested past the parser"])
    result = runner.invoke(app, ["run", "--resume", str(tmp_path)])
    assert result.exit_code == 2, result.output
    assert "fingerprint unknown" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize(
    ("objectives", "divisions", "needle"),
    [
        # Optuna builds the reference directions as comb(M + p - 1, p) tuples of p: p = 1e5 took 23 GB
        ("e2e_latency_s: minimize, energy_j: minimize", 1001, "less than or equal to 1000"),
        # 3 objectives, p = 140: comb(142, 2) = 142 * 141 / 2 = 10,011 directions
        ("e2e_latency_s: minimize, energy_j: minimize, ttft_s: minimize", 140, "10,011 reference directions"),
    ],
)
def test_nsga3_reference_directions_past_any_population_are_refused_at_load(
    tmp_path: Path, objectives: str, divisions: int, needle: str
) -> None:
    study = STUDY.replace("{e2e_latency_s: minimize, energy_j: minimize}", "{" + objectives + "}")
    study = study.replace("sampler: grid", f"sampler: {{kind: nsga3, dividing_parameter: {divisions}}}")
    path = tmp_path / "s.yaml"
    path.write_text(study)
    out = refused(["run", str(path), "--out", str(tmp_path / "res")], "dividing_parameter", needle)
    assert f"{path}:6" in out  # the line of the search section


def test_nsga3_directions_at_the_bound_load() -> None:
    from dse.search.search_config import Nsga3SamplerConfig

    # comb(141, 2) = 141 * 140 / 2 = 9,870 directions: under 10,000
    assert Nsga3SamplerConfig(kind="nsga3", dividing_parameter=139).directions_problem(3) is None


def test_a_reference_point_whose_box_overflows_is_refused_at_load(tmp_path: Path) -> None:
    # 1e300 s x 1e300 J is 1e600, past the float range: the run's hypervolume was inf and summary.json
    # said `"hypervolume": Infinity`, which is not JSON
    path = tmp_path / "s.yaml"
    path.write_text(STUDY + "reference_point: {e2e_latency_s: 1e300, energy_j: 1e300}\n")
    out = refused(["run", str(path), "--out", str(tmp_path / "res")], "reference_point", "overflows")
    assert f"{path}:7" in out


def test_a_run_file_holds_strict_json_even_for_a_non_finite_number(tmp_path: Path) -> None:
    from dse.search.rundir import write_json

    # a reference point of 0 tokens/s to maximize passes the box check, yet 1e306 s x 1e5 tokens/s is inf
    write_json(tmp_path / "summary.json", {"hypervolume": float("inf"), "reference_point": [1e306, 0.0]})
    strict = json.loads((tmp_path / "summary.json").read_text(), parse_constant=lambda c: pytest.fail(c))
    assert strict == {"hypervolume": None, "reference_point": [1e306, 0.0]}


def test_a_float_step_finer_than_the_grid_or_the_sampler_can_count_is_refused(tmp_path: Path) -> None:
    from dse.search.space import FloatParam

    # 900 MHz in steps of 1e-300 is 9e302 steps: Optuna's 28-digit decimals raised DivisionImpossible
    # (a traceback, exit 1) and the grid sampler, rounding each value to 12 decimals, found 1000 MHz
    # again and again and never ended
    study = STUDY.replace(
        "{batch: {values: [8]}}", "{sm_clock_mhz: {type: float, low: 1000, high: 1900, step: 1.0e-300}}"
    ).replace("sampler: grid", "sampler: random")
    path = tmp_path / "s.yaml"
    path.write_text(study)
    out = refused(["run", str(path), "--out", str(tmp_path / "res")], "space.sm_clock_mhz", "too fine")
    assert f"{path}:4" in out
    with pytest.raises(ValueError, match="too fine"):  # a float near 1.98e9 is a multiple of 2.4e-7
        FloatParam(type="float", low=1.5e9, high=1.98e9, step=1e-7)
    finest = FloatParam(type="float", low=0.5, high=1.0, step=1e-12).grid_values()
    assert [next(finest) for _ in range(3)] == [0.5, 0.500000000001, 0.500000000002]


@pytest.mark.parametrize(
    ("old", "new", "needle"),
    [
        # each ran: `true` as 1 (a batch of 1, all of the GPU's memory for the engine, a 1 s budget) and a
        # quoted number as the number, where `search.n_points` refused both (a GPU file refuses true/false)
        ("batch: 8,", "batch: true,", "workload.batch: Input should be a valid integer (got True)"),
        ("input_tokens: 64", "input_tokens: '64'", "workload.input_tokens: Input should be a valid integer"),
        ("batch: 8,", "mode: concurrency, concurrency: 2, gpu_memory_utilization: true,", "(got True)"),
        ("executor: serial", "executor: serial, time_budget_s: true", "search.time_budget_s"),
        ("search:", "cost: {pue: true}\nsearch:", "cost.pue: Input should be a valid number (got True)"),
        ("search:", "cost: {facts: {operation.pue: true}}\nsearch:", "cost.facts.operation.pue"),
        ("search:", "reference_point: {e2e_latency_s: true, energy_j: 9}\nsearch:", "e2e_latency_s"),
        ("{batch: {values: [8]}}", "{batch: {type: int, low: true, high: 8}}", "space.batch.low"),
    ],
)
def test_a_study_number_written_as_true_or_quoted_is_refused(
    tmp_path: Path, old: str, new: str, needle: str
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(STUDY.replace(old, new, 1))
    refused(["run", str(path), "--out", str(tmp_path / "res")], needle)


@pytest.mark.parametrize(
    ("param", "needle"),
    [
        # the Scalar union's error named its first branch: "space.batch.value.bool: Input should be a
        # valid boolean (got nan)", for a value that no branch takes
        ("{value: .nan}", "space.batch.value: value is nan"),
        ("{values: [8, null]}", "space.batch.values: value 1 is null"),
        ("{values: [[8]]}", "space.batch.values: value 0 is [8]"),
        ("{values: [8], when: {precision: null}}", "space.batch.when: precision: value is null"),
    ],
)
def test_a_parameter_value_that_is_no_scalar_is_named_without_a_union_branch(
    tmp_path: Path, param: str, needle: str
) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(
        STUDY.replace("{batch: {values: [8]}}", f"{{precision: {{values: [bf16]}}, batch: {param}}}")
    )
    out = refused(
        ["run", str(path), "--out", str(tmp_path / "res")], needle, "finite numbers, names or true/false"
    )
    assert ".bool" not in out


def test_report_out_that_is_a_device_or_a_pipe_is_refused_not_replaced(tmp_path: Path) -> None:
    import os
    import stat

    # the page was written beside it and renamed over it: run as root, `--out /dev/null` (or /dev/full,
    # /dev/stdout) replaced the device node with an HTML file; a named pipe here stands for them
    (tmp_path / "points.jsonl").write_text(json.dumps(POINT) + "\n")
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    refused(["report", str(tmp_path), "--out", str(fifo)], "not a regular file")
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_an_html_or_coefficient_output_that_is_a_pipe_is_refused_before_the_work(tmp_path: Path) -> None:
    import os

    from dse.cli.common import check_output_file
    from dse.errors import DseError

    # `dse sweep ... --html PIPE` (also compare's --html, calibrate's -o) ran the sweep, then blocked for
    # ever opening a named pipe nobody reads; it is refused up front as a directory is
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(DseError, match="--html .*pipe: not a regular file"):
        check_output_file(fifo, "--html", "sweep.html")
    check_output_file(tmp_path / "new.html", "--html", "sweep.html")  # a new file in a writable folder


def test_a_study_folder_given_for_a_run_names_its_newest_run(tmp_path: Path) -> None:
    # `dse report results/<study>` (the README's `<run-id>` left out) said only "is this a run directory?"
    study = tmp_path / "tiny"
    for run_id in ("20260101T000000Z-aaaa", "20260301T000000Z-bbbb"):  # ids sort by their start time
        (study / run_id).mkdir(parents=True)
        (study / run_id / "points.jsonl").write_text(json.dumps(POINT) + "\n")
        (study / run_id / "study.resolved.yaml").write_text(STUDY)
    newest = str(study / "20260301T000000Z-bbbb")
    refused(["report", str(study)], "it holds 2 runs of a study", newest)
    refused(["run", "--resume", str(study)], "it holds 2 runs of a study", newest)


@pytest.mark.parametrize(
    "command", [["calibrate", "-o", "c.json", "--gpu", "h100-sxm"], ["validate", "samples"]]
)
def test_a_samples_file_given_twice_or_copied_is_refused(tmp_path: Path, command: list[str]) -> None:
    import shutil

    # its rows counted twice: beside another file, that file's kernels weighed half as much, unsaid
    first = gemm_samples(tmp_path)
    copy = shutil.copy(first, tmp_path / "copy.csv")
    args = [a if a != "c.json" else str(tmp_path / "c.json") for a in command]
    refused([*args, str(first), str(first)], "given twice; give each samples file once")
    refused([*args, str(first), str(copy)], f"a copy of {first}")


def test_a_gpu_file_next_to_the_study_is_found_as_its_space_file_is(tmp_path: Path) -> None:
    import shutil

    import yaml

    import dse.hardware

    # `space:` was looked for next to the study, `gpu:` only from the working directory: a study kept
    # beside its GPU file failed with "GPU file 'my-gpu.yaml' does not exist" unless run from that folder
    shutil.copy(
        Path(dse.hardware.__file__).parent / "data" / "gpus" / "h100-sxm.yaml", tmp_path / "my-gpu.yaml"
    )
    path = tmp_path / "s.yaml"
    path.write_text(STUDY.replace("gpu: h100-sxm", "gpu: my-gpu.yaml"))
    result = runner.invoke(app, ["run", str(path), "--out", str(tmp_path / "res"), "--no-report"])
    assert result.exit_code == 0, result.output
    (resolved,) = (tmp_path / "res" / "tiny").glob("*/study.resolved.yaml")
    # absolute in the run's own copy: a report or a resume reads it from the run directory
    assert yaml.safe_load(resolved.read_text())["gpu"] == str((tmp_path / "my-gpu.yaml").resolve())


def test_a_set_path_through_a_field_says_the_section_has_no_sections() -> None:
    # clocks holds fields only (dse gpu fields): the message ended "sections: " with nothing after it
    out = refused(
        ["gpu", "show", "h100-sxm", "--set", "clocks.sm_clock_max_mhz.x=1"], "clocks has fields only"
    )
    assert "sections: \n" not in out and not out.rstrip().endswith("sections:")


@pytest.mark.parametrize("rate", ["1.0e300", "1.0e-9"])
def test_a_workload_request_rate_outside_the_simulated_range_is_refused_at_load(
    tmp_path: Path, rate: str
) -> None:
    # dse predict --request-rate takes 1e-6..1e9 req/s and a space value is checked alike; the workload's
    # own value was not: every point failed with the reason and the run exited 1 ("no feasible point")
    path = tmp_path / "s.yaml"
    workload = f"{{mode: request_rate, request_rate_per_s: {rate}, input_tokens: 64, output_tokens: 8}}"
    path.write_text(
        STUDY.replace("{batch: 8, input_tokens: 64, output_tokens: 8}", workload).replace(
            "space: {batch: {values: [8]}}", "space: {sm_clock_mhz: {values: [1500]}}"
        )
    )
    out = refused(
        ["run", str(path), "--out", str(tmp_path / "res")], "request_rate_per_s must be a number in"
    )
    assert f"{path}:3" in out


@pytest.mark.parametrize(
    "gpu", ["g" * 300 + ".yaml", "~nosuchuser-s29/g.yaml"], ids=["too-long", "unknown-user"]
)
def test_a_gpu_path_no_file_system_can_hold_is_a_missing_gpu_file(tmp_path: Path, gpu: str) -> None:
    # looking next to the study called exists() / expanduser() unguarded: OSError (name too long) or
    # RuntimeError (no such user) tracebacks with exit 1, where the missing file had been named (exit 2)
    path = tmp_path / "s.yaml"
    path.write_text(STUDY.replace("gpu: h100-sxm", f"gpu: {gpu}"))
    result = runner.invoke(app, ["run", str(path), "--out", str(tmp_path / "res"), "--no-report"])
    assert result.exit_code == 2, result.output
    assert "does not exist" in result.output and "Traceback" not in result.output


def test_a_study_path_means_the_file_next_to_the_study_from_any_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import shutil

    import yaml

    import dse.hardware

    # space: was looked for next to the study first, gpu:/model: in the working directory first, and a
    # run made from the study's folder kept `gpu: my-gpu.yaml` relative, which a report or resume from
    # elsewhere could not find: one order (the study's folder first) and an absolute path in the run
    h100 = Path(dse.hardware.__file__).parent / "data" / "gpus" / "h100-sxm.yaml"
    (tmp_path / "study").mkdir()
    (tmp_path / "cwd").mkdir()
    shutil.copy(h100, tmp_path / "study" / "my-gpu.yaml")
    (tmp_path / "cwd" / "my-gpu.yaml").write_text("not: a gpu file\n")  # would be refused if read
    path = tmp_path / "study" / "s.yaml"
    path.write_text(STUDY.replace("gpu: h100-sxm", "gpu: my-gpu.yaml"))
    gpus = []
    for cwd, study in ((tmp_path / "cwd", str(path)), (tmp_path / "study", "s.yaml")):
        monkeypatch.chdir(cwd)
        out = tmp_path / f"res-{cwd.name}"
        result = runner.invoke(app, ["run", study, "--out", str(out), "--no-report"])
        assert result.exit_code == 0, result.output
        (resolved,) = (out / "tiny").glob("*/study.resolved.yaml")
        gpus.append(yaml.safe_load(resolved.read_text())["gpu"])
    assert gpus == [str((tmp_path / "study" / "my-gpu.yaml").resolve())] * 2


def test_a_float_step_finer_than_1e_12_in_si_units_is_a_grid_of_distinct_values() -> None:
    from dse.search.space import FloatParam

    # the step bound was also an absolute 1e-12 (grid values kept 12 decimals), which refused valid SI values:
    # HBM energy is a few pJ/bit, 3e-12..6e-12 J/bit in steps of 0.5 pJ is 7 values (6 steps)
    grid = list(FloatParam(type="float", low=3e-12, high=6e-12, step=5e-13).grid_values())
    assert len(set(grid)) == 7
    assert grid == pytest.approx([(3 + 0.5 * i) * 1e-12 for i in range(7)], rel=1e-12)
    # and below 1e-12 as above it, the grid is rounded relative to the step: 0.1 + 0.2 steps is 0.3 exactly
    assert list(FloatParam(type="float", low=0.0, high=3e-13, step=1e-13).grid_values())[3] == 3e-13


@pytest.mark.parametrize("maximized_first", [True, False], ids=["maximized-first", "maximized-last"])
def test_the_reference_box_counts_the_minimized_values_in_any_order(
    tmp_path: Path, maximized_first: bool
) -> None:
    # the check multiplied the values in written order: 0 tokens/s to maximize first gave 0 x 1e306 x 1e306
    # = 0 (passed; the run's hypervolume was inf), last gave inf x 0 = nan (refused): 1e306 s x 1e306 J alone
    # is past the float range (~1.8e308) whatever else the study maximizes
    objectives = "{e2e_latency_s: minimize, energy_j: minimize, output_tokens_per_s: maximize}"
    refs = ["e2e_latency_s: 1e306", "energy_j: 1e306"]
    refs = ["output_tokens_per_s: 0", *refs] if maximized_first else [*refs, "output_tokens_per_s: 0"]
    path = tmp_path / "s.yaml"
    study = STUDY.replace("{e2e_latency_s: minimize, energy_j: minimize}", objectives)
    path.write_text(study + f"reference_point: {{{', '.join(refs)}}}\n")
    refused(["run", str(path), "--out", str(tmp_path / "res")], "reference_point", "overflows")


def test_a_large_bound_on_a_maximized_metric_does_not_size_the_reference_box() -> None:
    from dse.search.study import study_from_dict

    # a maximized metric's side of the box is each point's distance above its bound, not the bound itself:
    # 1e200 s x (a bound of 1e200 tokens/s) was refused as a 1e400 box
    data = yaml_study()
    data["objectives"] = {"e2e_latency_s": "minimize", "output_tokens_per_s": "maximize"}
    data["reference_point"] = {"e2e_latency_s": 1e200, "output_tokens_per_s": 1e200}
    assert study_from_dict(data).reference_point == data["reference_point"]


def yaml_study() -> dict[str, object]:
    import yaml

    data: dict[str, object] = yaml.safe_load(STUDY)
    return data


@pytest.mark.parametrize(("key", "value"), [("tp", "2"), ("tp", 2.5), ("tp", True), ("fsdp", "true")])
def test_a_training_space_value_follows_the_workload_sections_rule(key: str, value: object) -> None:
    from dse.errors import ConfigError
    from dse.search.training_point import workload_value

    # a training space's values went through a lax check: '2' was a tp of 2 and 'true' an fsdp of True,
    # where the same value in the workload: section (a strict model) was refused naming its field
    with pytest.raises(ConfigError, match=f"workload key '{key}'"):
        workload_value(key, value)
    assert workload_value("tp", 2.0) == 2 and type(workload_value("tp", 2.0)) is int  # 2.0 is 2, as below


def test_an_integer_written_in_e_notation_is_that_integer() -> None:
    from dse.errors import ConfigError
    from dse.search.study import study_from_dict

    # the YAML loader reads 1e1 as the float 10.0 and the strict sections refused it for an integer field;
    # who writes num_requests: 1e4 means 10,000 requests (a fraction, 10.5, stays refused)
    data = yaml_study()
    data["workload"] = {"mode": "request_rate", "request_rate_per_s": 1.0, "num_requests": 1e1}
    data["space"] = {"max_num_seqs": {"type": "int", "low": 1, "high": 1e1}}
    data["search"] = {"sampler": "random", "n_points": 2e0, "executor": "serial"}
    cfg = study_from_dict(data)
    assert (cfg.workload.num_requests, cfg.space["max_num_seqs"].high, cfg.search.n_points) == (10, 10, 2)
    assert type(cfg.workload.num_requests) is int
    data["workload"] = {**data["workload"], "num_requests": 10.5}
    with pytest.raises(ConfigError, match="workload.num_requests"):
        study_from_dict(data)


def test_a_run_whose_saved_study_fails_a_newer_check_still_reports(tmp_path: Path) -> None:
    # the report recomputes energy breakdowns from the run's study.resolved.yaml: a check added since the
    # run refused it and `dse report` exited 2, so each new check made older runs unreportable
    (tmp_path / "points.jsonl").write_text(json.dumps(POINT) + "\n")
    newer = STUDY + "reference_point: {e2e_latency_s: 1e306, energy_j: 1e306}\n"  # refused since round 29
    (tmp_path / "study.resolved.yaml").write_text(newer)
    result = runner.invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "without energy breakdowns" in result.output and "reference_point" in result.output
    assert (tmp_path / "report.html").is_file()

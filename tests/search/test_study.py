"""Study files: valid ones load; malformed ones give `file:line: field: message (allowed: ...)`."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from dse.errors import ConfigError
from dse.search.study import StudyConfig, load_study, resolved_yaml, study_hash

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted((REPO / "studies").glob("*.yaml"))

GOOD = """\
name: good
gpu: h100-sxm
space:
  gpu.num_sms: {type: int, low: 96, high: 132, step: 4}
  sm_clock_mhz: {values: [1410, 1755, 1980]}
  precision: {values: [bf16, fp8]}
objectives:
  e2e_latency_s: minimize
  energy_per_output_token_j: minimize
constraints:
  - avg_power_w <= tdp_w
search: {sampler: {kind: nsga2, population: 16}, n_points: 100, executor: serial}
"""


def write(tmp_path: Path, text: str, name: str = "study.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_good_study_loads_with_defaults(tmp_path: Path) -> None:
    cfg = load_study(write(tmp_path, GOOD)).config
    assert cfg.model == "llama-3.1-8b"
    assert cfg.workload.precision is None  # the checkpoint's quantization, else bf16 (per point)
    assert cfg.search.effective_batch_size == 16
    assert cfg.constraints[0].value == "tdp_w"
    assert cfg.search_space().paths == ["gpu.num_sms", "sm_clock_mhz", "precision"]


def test_resolved_yaml_round_trips_and_hash_ignores_budgets(tmp_path: Path) -> None:
    cfg = load_study(write(tmp_path, GOOD)).config
    again = load_study(write(tmp_path, resolved_yaml(cfg), "resolved.yaml")).config
    assert again == cfg
    assert study_hash(cfg) == study_hash(cfg.with_overrides(n_points=5, executor="ray"))
    assert study_hash(cfg) != study_hash(cfg.with_overrides(seed=3))


@pytest.mark.parametrize("path", SHIPPED, ids=[p.name for p in SHIPPED])
def test_shipped_studies_load(path: Path) -> None:
    cfg = load_study(path).config
    assert isinstance(cfg, StudyConfig)
    assert len(cfg.objectives) == 2


def test_space_file_is_resolved_relative_to_the_study(tmp_path: Path) -> None:
    (tmp_path / "spaces").mkdir()
    write(tmp_path / "spaces", "parameters:\n  precision: {values: [bf16, fp8]}\n", "s.yaml")
    study = GOOD.split("space:")[0] + "space: spaces/s.yaml\nobjectives: {e2e_latency_s: minimize}\n"
    cfg = load_study(write(tmp_path, study)).config
    assert list(cfg.space) == ["precision"]


def test_a_model_folder_named_bare_beside_the_study_is_that_folder(tmp_path: Path) -> None:
    """`--model my-8b` reads the folder my-8b/config.json; a study's `model: my-8b` beside its folder looked
    the name up in the catalog only ('unknown model'), unless written with a slash."""
    folder = tmp_path / "my-8b"
    folder.mkdir()
    shipped = REPO / "dse" / "workload" / "data" / "models" / "llama-3.1-8b.json"
    (folder / "config.json").write_text(shipped.read_text())
    study = write(tmp_path, GOOD.replace("name: good", "name: good\nmodel: my-8b"))
    assert load_study(study).config.model == str(folder.resolve())
    # a bare catalog name stays a name, whatever folders lie beside the study
    (tmp_path / "llama-3.1-8b").mkdir()
    study = write(tmp_path, GOOD.replace("name: good", "name: good\nmodel: llama-3.1-8b"))
    assert load_study(study).config.model == "llama-3.1-8b"


@pytest.mark.parametrize("ref", ['""', ".", "spaces"])
def test_a_space_path_naming_a_folder_is_one_error_naming_the_study(tmp_path: Path, ref: str) -> None:
    """`space: ""` (hypothesis found it) resolved to the study's folder, which load_yaml then failed to read
    as 'studies: cannot read: Is a directory': an error that named neither the study nor its key."""
    (tmp_path / "spaces").mkdir()
    study = GOOD.split("space:")[0] + f"space: {ref}\nobjectives: {{e2e_latency_s: minimize}}\n"
    path = write(tmp_path, study)
    expected = rf"{path.name}:\d+: space: .* names the folder .*, not a space file"
    with pytest.raises(ConfigError, match=expected):
        load_study(path)


def test_a_count_keys_integral_float_values_are_ints(tmp_path: Path) -> None:
    """YAML reads `1.6e1` as 16.0: a count key's list refused it ('concurrency must be an integer >= 1 (got
    16.0)') where a study section's or an int range's `1e4` is 10000; 16.5 stays refused."""
    loaded = "workload: {mode: concurrency}\nspace:\n"
    serving = "  concurrency: {values: [8, 1.6e1, 3.2e+1]}\n  num_requests: {value: 2e2}\n"
    cfg = load_study(write(tmp_path, GOOD.replace("space:\n", loaded + serving))).config
    assert [(v, type(v)) for v in cfg.space["concurrency"].values] == [(8, int), (16, int), (32, int)]
    assert (cfg.space["num_requests"].value, type(cfg.space["num_requests"].value)) == (200, int)
    for values, message in (("[16, 1.6e1]", "value 16 is listed twice"), ("[16, 16.5]", r"got 16\.5")):
        text = GOOD.replace("space:\n", f"{loaded}  concurrency: {{values: {values}}}\n")
        with pytest.raises(ConfigError, match=rf"study.yaml:\d+: space\.concurrency\.values.*{message}"):
            load_study(write(tmp_path, text))


# (case id, study text, line, substrings the message must contain)
MALFORMED = [
    (
        "unknown-top-key",
        GOOD.replace("objectives:", "objectivez:"),
        7,
        ["objectivez", "unknown key", "allowed:", "objectives"],
    ),
    (
        "unknown-param-key",
        GOOD.replace("step: 4}", "step: 4, hihg: 3}"),
        4,
        ["space.gpu.num_sms.hihg", "unknown key 'hihg'", "allowed:", "high"],
    ),
    ("wrong-type", GOOD.replace("low: 96", "low: many"), 4, ["space.gpu.num_sms.low", "integer", "many"]),
    (
        "low-above-high",
        GOOD.replace("low: 96, high: 132", "low: 140, high: 132"),
        4,
        ["space.gpu.num_sms", "must not exceed"],
    ),
    ("empty-values", GOOD.replace("[bf16, fp8]", "[]"), 6, ["space.precision.values", "at least 1"]),
    (
        "unknown-sampler",
        GOOD.replace("kind: nsga2", "kind: cmaes"),
        12,
        ["search.sampler", "cmaes", "allowed:", "nsga2", "tpe"],
    ),
    (
        "unknown-direction",
        GOOD.replace("e2e_latency_s: minimize", "e2e_latency_s: minimise"),
        8,
        ["objectives.e2e_latency_s", "minimise", "allowed: minimize, maximize"],
    ),
    (
        "unknown-metric",
        GOOD.replace("e2e_latency_s: minimize", "latency: minimize"),
        8,
        ["objectives.latency", "unknown metric 'latency'", "allowed:", "e2e_latency_s"],
    ),
    (
        "bad-constraint",
        GOOD.replace("avg_power_w <= tdp_w", "avg_power_w =< tdp_w"),
        11,
        ["constraints.0", "cannot parse constraint", "allowed:"],
    ),
    (
        "constraint-unknown-metric",
        GOOD.replace("<= tdp_w", "<= tdp_watts"),
        11,
        ["constraints.0", "unknown metric 'tdp_watts'"],
    ),
    (
        "missing-space-file",
        GOOD.replace("space:\n", "space: spaces/nope.yaml\nxspace:\n"),
        3,
        ["space", "spaces/nope.yaml", "not found"],
    ),
    (
        "yaml-syntax",
        GOOD.replace("values: [1410, 1755, 1980]}", "values: [1410, 1755, 1980}"),
        5,
        ["invalid YAML"],
    ),
    (
        "unknown-path-prefix",
        GOOD.replace("gpu.num_sms:", "chip.num_sms:"),
        4,
        [
            "space.chip.num_sms",
            "unknown parameter path 'chip.num_sms'",
            "allowed:",
            "gpu.<field>",
            "sm_clock_mhz",
        ],
    ),
    (
        "unknown-gpu-field",
        GOOD.replace("gpu.num_sms:", "gpu.num_smz:"),
        4,
        ["space.gpu.num_smz", "'num_smz' is not a field of gpu", "allowed:", "num_sms"],
    ),
    (
        "duplicate-key",
        GOOD.replace(
            "  precision: {values: [bf16, fp8]}\n",
            "  precision: {values: [bf16, fp8]}\n  precision: {value: bf16}\n",
        ),
        7,
        ["space.precision", "given twice", "line 6"],
    ),
    (
        "unknown-param-type",
        GOOD.replace("type: int", "type: integer"),
        4,
        ["space.gpu.num_sms", "integer", "allowed:", "int", "float"],
    ),
    (
        "param-without-kind",
        GOOD.replace("{values: [1410, 1755, 1980]}", "{choices: [1410]}"),
        5,
        ["space.sm_clock_mhz", "type: int|float", "values: [...]"],
    ),
    (
        "bad-precision-value",
        GOOD.replace("[bf16, fp8]", "[bf16, fp7]"),
        6,
        ["space.precision.values.1", "'fp7'", "allowed:", "fp8"],
    ),
    (
        "bad-engine-value",
        GOOD.replace("precision: {values: [bf16, fp8]}", "engine: {values: [vllm, tgi]}"),
        6,
        ["space.engine.values.1", "'tgi'", "allowed:", "trtllm"],
    ),
    (
        "bad-kv-dtype-value",
        GOOD.replace("precision: {values: [bf16, fp8]}", "kv_dtype: {values: [fp8, int4]}"),
        6,
        ["space.kv_dtype.values.1", "'int4'", "allowed:", "bf16"],
    ),
    (
        "when-unknown-param",
        GOOD.replace("{values: [bf16, fp8]}", "{values: [bf16, fp8], when: {attn: flash}}"),
        6,
        ["space.precision.when.attn", "not a parameter", "allowed:", "sm_clock_mhz"],
    ),
    (
        "grid-needs-step",
        GOOD.replace("kind: nsga2, population: 16", "kind: grid").replace(
            "{values: [1410, 1755, 1980]}", "{type: float, low: 1000, high: 1980}"
        ),
        5,
        ["space.sm_clock_mhz", "grid sampler needs a finite space", "step"],
    ),
    (
        "zero-budget",
        GOOD.replace("n_points: 100", "n_points: 0"),
        12,
        ["search.n_points", "greater than or equal to 1"],
    ),
    (
        "boolean-budget",  # pydantic's lax mode read `true` as 1
        GOOD.replace("n_points: 100", "n_points: true"),
        12,
        ["search.n_points", "valid integer"],
    ),
    (
        "long-name",  # the name is a directory: past the file system's 255 bytes it was an OSError traceback
        GOOD.replace("name: good", "name: " + "a" * 300),
        1,
        ["name", "at most 100 characters"],
    ),
    (
        "missing-objectives",
        GOOD.replace("objectives:\n  e2e_latency_s: minimize\n  energy_per_output_token_j: minimize\n", ""),
        1,
        ["objectives", "required key is missing"],
    ),
    (
        "clock-out-of-range",
        GOOD.replace("[1410, 1755, 1980]", "[1410, 2100]"),
        5,
        ["space.sm_clock_mhz.values.1", "2100 MHz is outside h100-sxm's SM clock range 345-1980 MHz"],
    ),
    (
        "cap-below-minimum",
        GOOD.replace("precision: {values: [bf16, fp8]}", "power_cap_w: {values: [400, 150]}"),
        6,
        ["space.power_cap_w.values.1", "power cap 150 W is not allowed", "minimum settable limit"],
    ),
    (  # above the TDP a cap does not bind: the point repeated the 700 W one under another label
        "cap-above-tdp",
        GOOD.replace("precision: {values: [bf16, fp8]}", "power_cap_w: {values: [400, 5000]}"),
        6,
        ["space.power_cap_w.values.1", "5000 W is above the TDP of h100-sxm (700 W)"],
    ),
    (
        "batch-not-int",
        GOOD.replace("precision: {values: [bf16, fp8]}", "batch: {values: [8, 0.5]}"),
        6,
        ["space.batch.values.1", "integer >= 1"],
    ),
    (  # a fuzz run: every point failed at run time (no feasible point), as a workload.batch of it is refused
        "batch-past-2^31",
        GOOD.replace("precision: {values: [bf16, fp8]}", "batch: {type: int, low: 1, high: 3000000000}"),
        6,
        ["space.batch.high", "integer in [1, 2147483647]", "3000000000"],
    ),
    (
        "unknown-model-value",
        GOOD.replace("precision: {values: [bf16, fp8]}", "model: {values: [llama-9]}"),
        6,
        ["space.model.values.0", "llama-9"],
    ),
    (
        "fraction-out-of-range",
        GOOD.replace(
            "gpu.num_sms: {type: int, low: 96, high: 132, step: 4}",
            "gpu.memory.data_rate_frac: {type: float, low: 0, high: 1.5}",
        ),
        4,
        ["space.gpu.memory.data_rate_frac.high", "[0, 1]"],
    ),
    (  # every 9e9 MHz point failed, each with `clocks.sm_clock_max_hz: ... <= 100000000000`
        "gpu-field-out-of-its-range",
        GOOD.replace(
            "gpu.num_sms: {type: int, low: 96, high: 132, step: 4}",
            "gpu.clocks.sm_clock_max_mhz: {values: [1500, 9.0e9]}",
        ),
        4,
        ["space.gpu.clocks.sm_clock_max_mhz.values.1", "less than or equal to 100000 MHz (got 9e+09 MHz)"],
    ),
    (
        "gpu-count-out-of-its-range",
        GOOD.replace("low: 96", "low: 0"),
        4,
        ["space.gpu.num_sms.low", "greater than 0 (got 0)"],
    ),
    ("unknown-gpu", GOOD.replace("gpu: h100-sxm", "gpu: h900"), 2, ["gpu", "unknown GPU 'h900'"]),
    (  # the union's first branch spoke: "values.0.bool: Input should be a valid boolean (got nan)"
        "nan-in-values",
        GOOD.replace("sm_clock_mhz: {values: [1410, 1755, 1980]}", "sm_clock_mhz: {values: [.nan, 1755]}"),
        5,
        ["space.sm_clock_mhz.values", "value 0 is nan", "finite numbers, names or true/false"],
    ),
    (  # accepted, and the hypervolume stayed 0 whatever the run found (a fuzzer's finding)
        "reference-below-every-point",
        GOOD.replace(
            "constraints:", "reference_point: {e2e_latency_s: -1, energy_per_output_token_j: 5}\nconstraints:"
        ),
        10,
        ["reference_point.e2e_latency_s", "no point is below it"],
    ),
    (  # was `study.yaml:1: (top level): reference_point must give exactly the objectives ...`
        "reference-point-key-of-no-objective",
        GOOD.replace(
            "constraints:",
            "reference_point:\n  e2e_latency_s: 9\n  energy_per_output_token_j: 5\n  energy_j: 3\n"
            "constraints:",
        ),
        13,
        ["reference_point.energy_j:", "'energy_j' is not an objective", "allowed: e2e_latency_s, energy_per"],
    ),
    (
        "reference-point-missing-an-objective",
        GOOD.replace("constraints:", "reference_point: {e2e_latency_s: 10}\nconstraints:"),
        10,
        ["reference_point:", "no bound for energy_per_output_token_j"],
    ),
    (  # every point failed "batch must be an integer in [1, 2147483647]" and the run exited 1
        "huge-batch",
        GOOD.replace("gpu: h100-sxm", "gpu: h100-sxm\nworkload: {batch: 1000000000000000000000000000000}"),
        3,
        ["workload.batch", "less than or equal to 2147483647"],
    ),
    (
        "unknown-executor",
        GOOD.replace("executor: serial", "executor: dask"),
        12,
        ["search.executor", "'dask'", "allowed: ray, process, serial"],
    ),
]


@pytest.mark.parametrize(
    ("text", "line", "needles"), [c[1:] for c in MALFORMED], ids=[c[0] for c in MALFORMED]
)
def test_malformed_study_gives_file_line_field(
    tmp_path: Path, text: str, line: int, needles: list[str]
) -> None:
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_study(path)
    msg = str(info.value)
    assert f"{path}:{line}:" in msg, msg
    for needle in needles:
        assert needle in msg, f"{needle!r} not in {msg!r}"
    assert "Traceback" not in msg


def test_error_inside_space_file_names_that_file(tmp_path: Path) -> None:
    space = write(
        tmp_path, "description: x\nparameters:\n  precision: {values: [bf16, fp8], hihg: 1}\n", "sp.yaml"
    )
    study = GOOD.split("space:")[0] + "space: sp.yaml\nobjectives: {e2e_latency_s: minimize}\n"
    with pytest.raises(ConfigError) as info:
        load_study(write(tmp_path, study))
    assert f"{space}:3: parameters.precision.hihg: unknown key 'hihg'" in str(info.value)


def test_yaml_1_2_floats(tmp_path: Path) -> None:
    text = GOOD.replace(
        "constraints:\n  - avg_power_w <= tdp_w", "constraints:\n  - {metric: avg_power_w, value: 7e2}"
    )
    cfg = load_study(write(tmp_path, text)).config
    assert cfg.constraints[0].value == 700.0


def _cli_has_run() -> bool:
    try:
        from dse.cli import app
    except Exception:  # noqa: BLE001
        return False
    return any(
        getattr(c, "name", None) == "run" or getattr(c.callback, "__name__", "") == "run_cmd"
        for c in app.registered_commands
    )


@pytest.mark.skipif(not _cli_has_run(), reason="`dse run` is not wired in dse/cli.py yet")
@pytest.mark.parametrize(
    ("text", "line"), [(c[1], c[2]) for c in MALFORMED[:10]], ids=[c[0] for c in MALFORMED[:10]]
)
def test_cli_exit_code_2_without_traceback(tmp_path: Path, text: str, line: int) -> None:
    path = write(tmp_path, text)
    proc = subprocess.run(
        [sys.executable, "-m", "dse", "run", str(path)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr + proc.stdout
    assert f":{line}:" in proc.stderr.replace("\n", "")


def test_cli_style_overrides_are_validated(tmp_path: Path) -> None:
    cfg = load_study(write(tmp_path, GOOD)).config
    assert cfg.with_overrides(n_points=5, seed=2).search.n_points == 5
    with pytest.raises(ConfigError, match="--executor 'dask'.*allowed: ray, process, serial"):
        cfg.with_overrides(executor="dask")
    with pytest.raises(ConfigError, match="--n-points 0"):
        cfg.with_overrides(n_points=0)


def test_resolved_study_keeps_unicode_readable(tmp_path) -> None:  # noqa: ANN001
    """The report shows study.resolved.yaml: 'ünï 🚀' stays itself, not '\\xFCn\\xEF \\U0001F680'."""
    path = tmp_path / "s.yaml"
    path.write_text(GOOD + "description: ünï 🚀\n", encoding="utf-8")
    text = resolved_yaml(load_study(path).config)
    assert "ünï 🚀" in text and "\\x" not in text


def test_a_study_path_that_is_no_regular_file_says_so(tmp_path: Path) -> None:
    """A folder or a named pipe given as the study was 'not found' though it exists."""
    import os

    with pytest.raises(ConfigError, match="is not a regular file"):
        load_study(tmp_path)
    if hasattr(os, "mkfifo"):
        os.mkfifo(tmp_path / "pipe.yaml")
        with pytest.raises(ConfigError, match="is not a regular file"):
            load_study(tmp_path / "pipe.yaml")
    with pytest.raises(ConfigError, match="not found"):
        load_study(tmp_path / "missing.yaml")

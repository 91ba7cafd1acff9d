"""JSON files users give, read safely (`dse.config.jsonio`): one ConfigError naming the file, never a
traceback, a hang or memory exhaustion."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dse.config.jsonio import read_json_file
from dse.errors import ConfigError
from dse.perf.coeffs import load_coeffs
from dse.workload.energaizer import load_kernel_list
from dse.workload.models import load_model_config

SHIPPED = Path(__file__).resolve().parents[2] / "dse" / "perf" / "data" / "coeffs_hopper.json"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\xff\xfe{}", "not UTF-8 text"),
        (b"[" * 100_000, "nested too deeply"),  # Python's parser would raise RecursionError
        (b'{"a": NaN}', "NaN is not a JSON number"),
        (b'{"a": Infinity}', "Infinity is not a JSON number"),
        (b"null", "expected a JSON object at the top level, got NoneType"),
        (b"[1, 2]", "expected a JSON object at the top level, got list"),
        (b"{", "not valid JSON"),
        (b'{"a": 1, "a": 2}', "key 'a' appears twice"),  # parsers would keep the last silently
        (b'{"x": [{"b": 1, "b": 1}]}', "key 'b' appears twice"),  # nested objects too
    ],
)
def test_hostile_or_wrong_files_are_one_error(tmp_path: Path, content: bytes, message: str) -> None:
    path = tmp_path / "f.json"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=message):
        read_json_file(path, "coefficient file", expect=dict)


def test_missing_files_directories_and_devices(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        read_json_file(tmp_path / "no.json", "kernel list")
    with pytest.raises(ConfigError, match="is a directory"):
        read_json_file(tmp_path, "kernel list")
    if Path("/dev/zero").exists():  # read no further than the size cap
        with pytest.raises(ConfigError, match="more than"):
            read_json_file("/dev/zero", "coefficient file")


def test_a_model_config_with_a_key_twice_is_refused(tmp_path: Path) -> None:
    """A config.json whose hidden_size was appended again: refused by name, not run with the last copy."""
    text = (Path(__file__).resolve().parents[2] / "dse/workload/data/models/llama-3.1-8b.json").read_text()
    path = tmp_path / "config.json"
    path.write_text(text.replace('"hidden_size": 4096,', '"hidden_size": 4096,\n  "hidden_size": 8192,'))
    with pytest.raises(ConfigError, match="model config .*config.json: key 'hidden_size' appears twice"):
        load_model_config(path)


def test_every_json_input_uses_it(tmp_path: Path) -> None:
    deep = tmp_path / "deep.json"
    deep.write_text("[" * 100_000, encoding="utf-8")
    for load in (load_coeffs, load_kernel_list, load_model_config):
        with pytest.raises(ConfigError, match="nested too deeply"):
            load(deep)


@pytest.mark.parametrize(
    ("field", "value"),
    [("lambda_main", -1.0), ("lambda_main", 0.0), ("eps_s", -1.0), ("eps_s", 1e300), ("load_derate", 0.5),
     ("math_derate", 1e9), ("lambda_pro", "x"), ("eps_s", True)],
)  # fmt: skip
def test_coefficients_out_of_range_are_refused(tmp_path: Path, field: str, value: object) -> None:
    """A negative or absurd correction made predictions negative or infinite with exit 0."""
    data = json.loads(SHIPPED.read_text(encoding="utf-8"))
    for group in data["groups"].values():
        group[field] = value
    path = tmp_path / "c.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ConfigError, match=field):
        load_coeffs(path)
    load_coeffs(SHIPPED)  # the shipped set is inside every range


def test_model_dimensions_are_bounded(tmp_path: Path) -> None:
    config = {"model_type": "llama", "hidden_size": 4096, "num_hidden_layers": 10**12,
              "num_attention_heads": 32, "intermediate_size": 14336, "vocab_size": 128256}  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    with pytest.raises(ConfigError, match="num_hidden_layers"):
        load_model_config(path)


@pytest.mark.parametrize(
    "groups", [{"gemm": 5}, {"gemm": [{}]}, [], None, {"gemm": {"lambda_main": 10**400}}]
)
def test_malformed_groups_are_one_error(tmp_path: Path, groups: object) -> None:
    """Groups of the wrong kind were TypeError / AttributeError tracebacks, a 400-digit number an
    OverflowError."""
    path = tmp_path / "c.json"
    path.write_text(json.dumps({"schema": "dse.coeffs/1", "groups": groups}), encoding="utf-8")
    with pytest.raises(ConfigError, match="group"):
        load_coeffs(path)

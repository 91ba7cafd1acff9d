"""The one YAML loader on hostile input, and a fuzz of the study, space and GPU schemas through it.

Every bad document must end in one ConfigError (exit code 2 at the CLI) whose message names the file:
never a traceback, a hang, or memory growing with an alias bomb.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dse.config.yamlio import MAX_YAML_BYTES, load_yaml, parse_yaml
from dse.errors import DseError
from dse.hardware.catalog import load_gpu
from dse.hardware.overrides import parse_set_options
from dse.search.study import load_study

REPO = Path(__file__).resolve().parents[2]
STUDY = (REPO / "studies" / "llm_serving.yaml").read_text()
SPACE = (REPO / "spaces" / "h100_like.yaml").read_text()
GPU = (REPO / "dse" / "hardware" / "data" / "gpus" / "h100-sxm.yaml").read_text()


def laughs(levels: int) -> str:
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (laughs(9), "values once aliases are expanded"),
        ("a: &x [1, *x]\n", "recursive anchor"),
        ("a: " + "[" * 3000 + "]" * 3000 + "\n", "nested deeper than 64"),
        ("? [a, b]\n: 1\n", "mapping key must be a plain value"),
        ("num_sms: 1\nnum_sms: 2\n", "given twice"),
        ("a: [" + ",".join(["1"] * 60_000) + "]\n", "more than 20000 values"),
        ("a: [1\n", "invalid YAML"),
        ("a:\tb\n", "invalid YAML"),
    ],
)
def test_hostile_documents_are_one_config_error_naming_the_file(text: str, message: str) -> None:
    t0 = time.perf_counter()
    with pytest.raises(DseError, match=message) as info:
        parse_yaml(text, "hostile.yaml")
    assert str(info.value).startswith("hostile.yaml")
    assert time.perf_counter() - t0 < 10.0  # no hang (generous: the 2-core machine is shared)


def test_bytes_that_are_not_utf8_or_too_many(tmp_path: Path) -> None:
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes(b"name: caf\xe9\n")
    with pytest.raises(DseError, match=r"latin1\.yaml:1: not UTF-8 text \(byte 0xe9 at offset 9\)"):
        load_yaml(bad)
    big = tmp_path / "big.yaml"
    big.write_bytes(b"# " + b"x" * MAX_YAML_BYTES + b"\n")
    with pytest.raises(
        DseError, match=rf"big\.yaml: more than {MAX_YAML_BYTES} bytes"
    ):  # not its 1st byte over
        load_yaml(big)
    bom = tmp_path / "bom.yaml"
    bom.write_bytes(b"\xef\xbb\xbfa: 1\n")
    assert load_yaml(bom)[0] == {"a": 1}


def test_unreadable_paths_are_config_errors(tmp_path: Path) -> None:
    with pytest.raises(DseError, match="cannot read"):
        load_yaml(tmp_path)  # a directory
    with pytest.raises(DseError, match="does not exist"):
        load_gpu(tmp_path / ("x" * 300 + ".yaml"))  # a name too long for the file system
    with pytest.raises(DseError, match="unknown GPU"):
        load_gpu("y" * 5000)


def test_duplicate_keys_in_a_gpu_file_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text(GPU + "\nnum_sms: 200\n")
    with pytest.raises(DseError, match=r"dup\.yaml:\d+: num_sms: key 'num_sms' given twice"):
        load_gpu(path)


def test_set_values_use_the_same_loader() -> None:
    assert parse_set_options(["num_sms=1.44e2", "tdp_w=7E+2"]) == {"num_sms": 144.0, "tdp_w": 700.0}
    with pytest.raises(DseError, match="not a list or mapping"):
        parse_set_options(["num_sms=[1, 2]"])
    with pytest.raises(DseError, match="not a scalar"):
        parse_set_options(["num_sms=&a [*a]"])


# --- fuzz: mutated study, space and GPU documents --------------------------------------------------------
# 1,100 documents in the default run; `make fuzz` sets DSE_FUZZ_EXAMPLES for a longer one.
FUZZ_SCALE = max(1.0, int(os.environ.get("DSE_FUZZ_EXAMPLES", "0")) / 400)
FIXTURE_OK = [HealthCheck.function_scoped_fixture]  # tmp_path is rewritten by each example

_SCALARS = st.one_of(
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=12),
    st.booleans(),
    st.none(),
)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)
_TEXT_EDITS = st.sampled_from(
    ["", "\t", ": [", "]", "&a ", "*a", "\x00", "\ufeff", "{", "- ", "\n  x: 1", "?"]
)


def _mutate(base: str, data: st.DataObject) -> str:
    """A document from `base`: a top-level value replaced, a key dropped, or raw text spliced in."""
    doc = yaml.safe_load(base)
    choice = data.draw(st.integers(0, 2))
    if choice == 0 and isinstance(doc, dict):
        key = data.draw(st.sampled_from(sorted(doc)))
        doc[key] = data.draw(_VALUES)
        return yaml.safe_dump(doc, allow_unicode=True)
    if choice == 1 and isinstance(doc, dict):
        doc.pop(data.draw(st.sampled_from(sorted(doc))))
        return yaml.safe_dump(doc)
    at = data.draw(st.integers(0, len(base)))
    return base[:at] + data.draw(_TEXT_EDITS) + base[at:]


def _only_config_errors(load, path: Path) -> None:
    try:
        load(path)
    except DseError as exc:
        assert path.name in str(exc), str(exc)


@settings(max_examples=int(400 * FUZZ_SCALE), deadline=None, suppress_health_check=FIXTURE_OK)
@given(data=st.data())
def test_fuzzed_gpu_files_load_or_fail_cleanly(tmp_path: Path, data: st.DataObject) -> None:
    path = tmp_path / "fuzz-gpu.yaml"
    path.write_text(_mutate(GPU, data), encoding="utf-8")
    _only_config_errors(load_gpu, path)


@settings(max_examples=int(400 * FUZZ_SCALE), deadline=None, suppress_health_check=FIXTURE_OK)
@given(data=st.data())
def test_fuzzed_studies_load_or_fail_cleanly(tmp_path: Path, data: st.DataObject) -> None:
    (tmp_path / "spaces").mkdir(exist_ok=True)
    (tmp_path / "spaces" / "h100_like.yaml").write_text(SPACE)
    path = tmp_path / "studies" / "fuzz-study.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(_mutate(STUDY, data), encoding="utf-8")
    _only_config_errors(load_study, path)


@settings(max_examples=int(300 * FUZZ_SCALE), deadline=None, suppress_health_check=FIXTURE_OK)
@given(data=st.data())
def test_fuzzed_spaces_load_or_fail_cleanly(tmp_path: Path, data: st.DataObject) -> None:
    (tmp_path / "spaces").mkdir(exist_ok=True)
    space = tmp_path / "spaces" / "h100_like.yaml"
    space.write_text(_mutate(SPACE, data), encoding="utf-8")
    path = tmp_path / "studies" / "study.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(STUDY)
    try:
        load_study(path)
    except DseError as exc:
        assert "h100_like.yaml" in str(exc) or "study.yaml" in str(exc), str(exc)


def test_an_integer_too_long_to_read_is_a_config_error() -> None:
    with pytest.raises(DseError, match="huge.yaml:1: a value cannot be read"):
        parse_yaml("seed: " + "9" * 5000 + "\n", "huge.yaml")


def test_a_value_that_fails_both_branches_of_a_union_is_one_line(tmp_path: Path) -> None:
    """A constraint bound takes a number or a metric name: NaN failed both, and pydantic's second branch
    ('constraints.0.value.str: Input should be a valid string') came as a second, misleading line."""
    text = (
        "name: t\nmodel: llama-3.1-8b\ngpu: h100-sxm\nworkload: {batch: 8}\n"
        "objectives: {e2e_latency_s: minimize}\nconstraints: ['e2e_latency_s <= nan']\n"
        "space: {sm_clock_mhz: {values: [1200, 1980]}}\n"
    )
    path = tmp_path / "s.yaml"
    path.write_text(text)
    with pytest.raises(DseError) as info:
        load_study(path)
    assert "\n" not in str(info.value) and "finite number" in str(info.value)


def test_a_non_utf8_set_value_is_one_line() -> None:
    """YAML's reader error spans two lines ('in "<unicode string>", position 0')."""
    with pytest.raises(DseError) as info:
        parse_set_options(["gpu.num_sms=\udcff"])
    assert "\n" not in str(info.value) and "gpu.num_sms" in str(info.value)

"""Search spaces: grid enumeration, conditions, aliases, point ids, descriptions."""

from __future__ import annotations

import pytest
from pydantic import TypeAdapter, ValidationError

from dse.search.space import ParamSpec, SearchSpace, point_id

PARAMS = TypeAdapter(dict[str, ParamSpec])


def space(data: dict) -> SearchSpace:
    return SearchSpace(PARAMS.validate_python(data))


def test_grid_is_the_product_of_inclusive_ranges() -> None:
    s = space(
        {
            "a": {"type": "int", "low": 1, "high": 5, "step": 2},
            "b": {"type": "float", "low": 0.1, "high": 0.3, "step": 0.1},
            "c": {"values": ["x", "y"]},
            "d": {"value": 7},
        }
    )
    grid = list(s.iter_grid())
    assert len(grid) == 3 * 3 * 2
    assert grid[0] == {"a": 1, "b": 0.1, "c": "x", "d": 7}
    assert {p["b"] for p in grid} == {0.1, 0.2, 0.3}  # no 0.30000000000000004
    assert len({point_id(p) for p in grid}) == len(grid)


def test_conditional_parameters_and_shared_paths() -> None:
    s = space(
        {
            "tech": {"values": ["hbm3", "gddr7"]},
            "hbm_bus": {"path": "bus", "values": [4096, 5120], "when": {"tech": "hbm3"}},
            "gddr_bus": {"path": "bus", "values": [384, 512], "when": {"tech": ["gddr7"]}},
            "extra": {"value": 1, "when": {"hbm_bus": 5120}},
        }
    )
    assert s.problems() == []
    grid = list(s.iter_grid())
    assert grid == [
        {"tech": "hbm3", "bus": 4096},
        {"tech": "hbm3", "bus": 5120, "extra": 1},
        {"tech": "gddr7", "bus": 384},
        {"tech": "gddr7", "bus": 512},
    ]
    assert s.paths == ["tech", "bus", "extra"]


def test_dependency_order_puts_parents_first() -> None:
    s = space({"child": {"values": [1, 2], "when": {"parent": "on"}}, "parent": {"values": ["on", "off"]}})
    assert s.order == ("parent", "child")
    values = s.sample(lambda name, spec: spec.values[0])
    assert values == {"parent": "on", "child": 1}


def test_cycles_and_clashing_paths_are_reported() -> None:
    with pytest.raises(ValueError, match="cycle"):
        space({"a": {"values": [1], "when": {"b": 1}}, "b": {"values": [1], "when": {"a": 1}}})
    s = space({"a": {"path": "p", "values": [1]}, "b": {"path": "p", "values": [2]}})
    assert "share a path" in s.problems()[0][1]


def test_point_id_is_canonical() -> None:
    assert point_id({"a": 1, "b": "x"}) == point_id({"b": "x", "a": 1})
    assert point_id({"a": 1}) != point_id({"a": 1.5})


def test_describe_for_summary() -> None:
    d = space(
        {"n": {"type": "int", "low": 1, "high": 4}, "p": {"values": ["bf16"]}, "k": {"value": 3}}
    ).describe()
    assert [x["kind"] for x in d] == ["int", "categorical", "constant"]
    assert d[0]["low"] == 1 and d[0]["high"] == 4 and d[1]["values"] == ["bf16"]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"values": [1, 2**63]}, "does not fit in 64 bits"),
        ({"type": "int", "low": -(2**63) - 1, "high": 4}, "does not fit in 64 bits"),
        ({"value": 10**30}, "does not fit in 64 bits"),
        ({"type": "float", "low": 0.0, "high": float("inf")}, "finite"),
        ({"values": [1.0, float("nan")]}, "finite"),
    ],
)
def test_parameters_hold_only_numbers_a_run_can_store(raw: dict, message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        TypeAdapter(ParamSpec).validate_python(raw)


def test_huge_ranges_are_counted_and_enumerated_without_building_them() -> None:
    # a fuzz run: {type: int, low: 1, high: 2^31 - 1} built a list of 2^31 integers to size the space
    # (the run was killed for memory) and high 2^63 - 1 was a MemoryError traceback
    s = space(
        {
            "a": {"type": "int", "low": -(2**63), "high": 2**63 - 1},
            "b": {"type": "float", "low": 0.5, "high": 1.5, "step": 1e-12},
        }
    )
    assert s.grid_size_bound() == 2**64 * (10**12 + 1)
    first = next(s.iter_grid())
    assert first == {"a": -(2**63), "b": 0.5}


def test_a_float_step_too_small_to_count_is_a_validation_error() -> None:
    # (high - low) / step overflowed to inf: an OverflowError traceback instead of a field error
    with pytest.raises(ValidationError, match="step"):
        TypeAdapter(ParamSpec).validate_python({"type": "float", "low": 0.5, "high": 1e300, "step": 1e-300})
    assert list(space({"c": {"type": "float", "low": 0.25, "high": 0.25}}).iter_grid()) == [{"c": 0.25}]


@pytest.mark.parametrize("step", [None, 1.0])
def test_a_float_range_wider_than_a_float_is_named_as_such(step: float | None) -> None:
    # high - low overflowed: the sampler raised OverflowError at run time (no step), or the message blamed
    # the step; a range of finite ends whose width is not finite is refused for what it is
    with pytest.raises(ValidationError, match="high - low overflows"):
        TypeAdapter(ParamSpec).validate_python({"type": "float", "low": -1e308, "high": 1e308, "step": step})


def test_a_when_on_a_missing_parameter_of_a_one_parameter_space_says_so() -> None:
    """It read "(allowed: )": the space had no other parameter to name."""
    problems = space({"batch": {"values": [1, 2], "when": {"nonexistent": 3}}}).problems()
    assert problems == [
        (
            ("batch", "when", "nonexistent"),
            "'nonexistent' is not a parameter of this space (allowed: none: add it)",
        )
    ]


def test_a_when_on_a_stepped_float_holds_for_the_samplers_rounded_draw() -> None:
    # Optuna draws 0.7 + 2 x 0.1 = 0.8999999999999999 for a step of 0.1: a `when: {ef: 0.9}` never held and
    # the guarded parameter was off for the whole run (review)
    sp = space(
        {
            "ef": {"type": "float", "low": 0.7, "high": 1.3, "step": 0.1},
            "x": {"type": "int", "low": 1, "high": 4, "when": {"ef": 0.9}},
        }
    )
    assert sp.is_active("x", {"ef": 0.7 + 2 * 0.1})
    assert not sp.is_active("x", {"ef": 1.0})


def test_a_grid_cut_short_warns_that_its_first_parameters_keep_their_first_values(caplog) -> None:
    # a 24-point run of the 120-point training grid ran every point at one clock, and nothing said so
    import logging
    from pathlib import Path

    from dse.search.samplers import build_sampler
    from dse.search.study import load_study

    study = load_study(Path(__file__).resolve().parents[2] / "studies" / "training.yaml").config
    with caplog.at_level(logging.WARNING, logger="dse.search.samplers"):
        build_sampler(study.with_overrides(n_points=24))
    assert "shuffle: true" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="dse.search.samplers"):
        build_sampler(study)
    assert caplog.text == ""

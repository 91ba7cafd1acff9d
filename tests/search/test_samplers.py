"""Samplers: seeded and reproducible; the fast NSGA-II/III bookkeeping proposes what Optuna's own does."""

from __future__ import annotations

import hashlib
import math
import warnings

import optuna
import pytest

from dse.search.samplers import OptunaSampler, Outcome, _fast_ga_classes, _public_suggest, build_sampler
from dse.search.space import FloatParam
from dse.search.study import study_from_dict

from .toy import zdt1

SPACE = {
    "x0": {"type": "float", "low": 0.0, "high": 1.0},
    "x1": {"type": "float", "low": 0.0, "high": 1.0, "step": 0.05},
    "n": {"type": "int", "low": 1, "high": 64, "log": True},
    "c": {"values": ["a", "b", "c"]},
    "k": {"value": 3},
}


def study(kind: str, seed: int = 0, **sampler: object) -> object:
    return study_from_dict(
        {
            "name": "s",
            "space": SPACE,
            "objectives": {"f1": "minimize", "f2": "minimize"},
            "search": {"sampler": {"kind": kind, **sampler}, "seed": seed},
        },
        evaluator=zdt1,
    )


def drive(kind: str, n_batches: int = 4, batch: int = 8, seed: int = 0, **sampler: object) -> list[dict]:
    s = build_sampler(study(kind, seed, **sampler))
    points = []
    for _ in range(n_batches):
        asks = s.ask(batch)
        for a in asks:
            f = zdt1({"x0": a.values["x0"], "x1": a.values["x1"]}, None)
            s.tell(a, Outcome(values=(f["f1"], f["f2"]), constraints={"c0": a.values["n"] - 32.0}))
            points.append(a.point)
    return points


# Every sampler kind, with settings small enough for a few dozen points.
SAMPLER_CASES: list[tuple[str, dict]] = [
    ("random", {}),
    ("qmc", {}),
    ("nsga2", {"population": 8}),
    ("nsga3", {"population": 8}),
    ("tpe", {"n_startup_trials": 4}),
]


@pytest.mark.parametrize(("kind", "extra"), SAMPLER_CASES)
def test_samplers_are_reproducible_and_respect_the_space(kind: str, extra: dict) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    a = drive(kind, **extra)
    b = drive(kind, **extra)
    c = drive(kind, seed=1, **extra)
    assert a == b
    assert a != c
    for p in a:
        assert 0.0 <= p["x0"] <= 1.0 and p["c"] in ("a", "b", "c") and p["k"] == 3
        assert math.isclose(p["x1"] / 0.05, round(p["x1"] / 0.05), abs_tol=1e-9)
        assert isinstance(p["n"], int) and 1 <= p["n"] <= 64


def test_grid_sampler_enumerates_once_and_shuffles_by_seed() -> None:
    cfg = study_from_dict(
        {
            "name": "g",
            "space": {"a": {"values": [1, 2, 3]}, "b": {"type": "int", "low": 0, "high": 3}},
            "objectives": {"f1": "minimize"},
            "search": {"sampler": {"kind": "grid", "shuffle": True}, "seed": 5},
        },
        evaluator=zdt1,
    )
    s = build_sampler(cfg)
    pts = [a.point for a in s.ask(100)]
    assert len(pts) == 12 and s.exhausted
    assert len({(p["a"], p["b"]) for p in pts}) == 12
    again = [a.point for a in build_sampler(cfg).ask(100)]
    assert again == pts
    ordered = [
        a.point
        for a in build_sampler(
            cfg.model_copy(
                update={
                    "search": cfg.search.model_copy(
                        update={"sampler": cfg.search.sampler.model_copy(update={"shuffle": False})}
                    )
                }
            )
        ).ask(100)
    ]
    assert ordered[0] == {"a": 1, "b": 0} and ordered != pts


@pytest.mark.parametrize("which", [0, 1])
def test_fast_ga_proposes_exactly_what_optuna_does(which: int) -> None:
    """Same seed, same tells: the incremental generation bookkeeping must not change a single point."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    fast_cls = _fast_ga_classes()[which]
    stock_cls = (optuna.samplers.NSGAIISampler, optuna.samplers.NSGAIIISampler)[which]

    def run(cls: type) -> str:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            sampler = cls(population_size=10, seed=3)
        st = optuna.create_study(directions=["minimize", "minimize"], sampler=sampler)
        trace = []
        for _ in range(12):  # 12 generations
            trials = [st.ask() for _ in range(10)]
            for t in trials:
                x = t.suggest_float("x", 0.0, 1.0)
                y = t.suggest_float("y", 0.0, 1.0)
                c = t.suggest_categorical("c", ["p", "q"])
                trace.append((round(x, 12), round(y, 12), c))
            for i, t in enumerate(trials):
                p = t.params
                if i == 3:  # a failed trial leaves its generation open
                    st.tell(t, state=optuna.trial.TrialState.FAIL)
                    continue
                t.set_constraint("c0", p["y"] - 0.8)
                st.tell(t, [p["x"], 1 - p["x"] ** 0.5 + p["y"] + (p["c"] == "q")])
        return hashlib.sha1(repr(trace).encode()).hexdigest()

    assert run(fast_cls) == run(stock_cls)


@pytest.mark.parametrize(
    ("kind", "extra"), [*SAMPLER_CASES, ("tpe", {"n_startup_trials": 4, "multivariate": True})]
)
def test_prebuilt_distributions_propose_what_the_suggest_methods_do(
    kind: str, extra: dict, monkeypatch: pytest.MonkeyPatch
) -> None:
    """OptunaSampler reuses one distribution per parameter and skips Trial.suggest_*: not a single point
    may change (conditional, single-valued and fixed parameters included)."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    space = {
        **SPACE,
        "m": {"values": ["p", "q"]},
        "z": {"type": "float", "low": 0.0, "high": 1.0, "when": {"m": "q"}},
        "one": {"values": ["only"]},
        "flat": {"type": "float", "low": 2.0, "high": 2.0},
    }

    def run() -> list[dict]:
        cfg = study_from_dict(
            {
                "name": "s",
                "space": space,
                "objectives": {"f1": "minimize", "f2": "minimize"},
                "search": {"sampler": {"kind": kind, **extra}, "seed": 2},
            },
            evaluator=zdt1,
        )
        s = build_sampler(cfg)
        points = []
        for _ in range(5):
            for a in s.ask(8):
                f = zdt1({"x0": a.values["x0"], "x1": a.values["x1"]}, None)
                s.tell(a, Outcome(values=(f["f1"], f["f2"]), constraints={"c0": a.values["n"] - 32.0}))
                points.append(a.point)
        return points

    fast = run()

    def stock(self: OptunaSampler, trial: object, name: str, spec: object) -> object:
        if isinstance(spec, FloatParam) and spec.low == spec.high:
            return spec.low
        return _public_suggest(trial, name, spec)  # the suggest_* methods, a new distribution per call

    monkeypatch.setattr(OptunaSampler, "_suggest", stock)
    assert fast == run()
    assert any("z" in p for p in fast) and any("z" not in p for p in fast)

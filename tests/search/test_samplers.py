"""Samplers: seeded and reproducible; the fast NSGA-II/III bookkeeping proposes what Optuna's own does."""

from __future__ import annotations

import hashlib
import json
import math
import warnings
from pathlib import Path

import optuna
import pytest

from dse.search.runner import run_study
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


def _toy_run(tmp_path: Path, kind: str, seed: int, **search: object) -> list[dict]:
    """A 40-point study minimizing ZDT1's g = 1 + 4.5 (x1 + x2) (least at x1 = x2 = 0), run serially."""
    cfg = study_from_dict(
        {
            "name": f"toy-{kind}-{seed}",
            "space": {f"x{i}": {"type": "float", "low": 0.0, "high": 1.0} for i in range(3)},
            "objectives": {"g": "minimize"},
            "search": {"sampler": kind, "n_points": 40, "executor": "serial", "seed": seed, **search},
        },
        evaluator=zdt1,
    )
    summary = run_study(cfg, out=tmp_path, evaluator=zdt1)
    return [json.loads(line) for line in (summary.run_dir / "points.jsonl").read_text().splitlines()]


def test_tpe_learns_from_results_within_a_few_dozen_points(tmp_path: Path) -> None:
    """The runner tells a batch only after asking all of it, and the batch was 64 for every sampler without
    a population: a 40-point TPE study was the random sampler's, point for point. TPE's default batch is
    its startup trials now, so it is guided from the 11th point on."""
    for seed in (0, 1, 2):
        tpe, rnd = _toy_run(tmp_path, "tpe", seed), _toy_run(tmp_path, "random", seed)
        tpe_ids, rnd_ids = [r["point_id"] for r in tpe], [r["point_id"] for r in rnd]
        # the startup trials come from Optuna's RandomSampler with the same seed: the random sampler's points
        assert tpe_ids[:10] == rnd_ids[:10]
        assert not set(tpe_ids[10:]) & set(rnd_ids[10:])  # continuous draws: no point in common after
        # modelling where g is low, it ends nearer g's least value than 40 independent draws do
        assert min(r["metrics"]["g"] for r in tpe) < min(r["metrics"]["g"] for r in rnd)


def test_default_batch_per_sampler(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A generation for the genetic samplers, the startup trials for TPE, 64 for those that learn nothing;
    a TPE batch larger than its startup trials is allowed and said to be drawn at random."""
    assert study("nsga2", population=12).search.effective_batch_size == 12  # type: ignore[attr-defined]
    assert study("tpe", n_startup_trials=7).search.effective_batch_size == 7  # type: ignore[attr-defined]
    assert study("random").search.effective_batch_size == 64  # type: ignore[attr-defined]
    assert study("qmc").search.effective_batch_size == 64  # type: ignore[attr-defined]
    # one batch of 40: TPE sees no result before its last point, and draws all as its RandomSampler does
    tpe = [r["point_id"] for r in _toy_run(tmp_path, "tpe", 0, batch_size=40)]
    assert tpe == [r["point_id"] for r in _toy_run(tmp_path, "random", 0)]
    assert "tpe: batch_size 40 is above n_startup_trials 10, so the first 40 points are drawn at random" in (
        caplog.text
    )

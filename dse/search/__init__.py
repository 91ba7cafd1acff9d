"""Design-space search: study files, samplers, executors, the run log, Pareto fronts.

    from dse.search import run_study
    summary = run_study("studies/llm_serving.yaml", n_points=500, executor="process")

Modules (one concept each):

    yamlio      YAML with line numbers; pydantic errors as `file:line: field: message (allowed: ...)`
    space       parameter kinds, SearchSpace (conditions, grid enumeration), point ids
    study       StudyConfig schema, load_study, resolved study and its hash
    objective   evaluate_point (LLM serving, picklable), evaluate_chunk, EvalContext
    feasibility the model's verdict plus the study's constraints -> feasible, reason
    samplers    grid enumerator and Optuna ask/tell samplers (random, qmc, nsga2, nsga3, tpe)
    executors   serial, process and Ray executors over chunks of points
    rundir      run directory layout, the append-only points.jsonl, trials.parquet, pareto.csv, resume
    runlock     one dse run at a time per run directory (an flock on its run.lock)
    pareto      numpy Pareto masks and hypervolume
    progress    ProgressState and a rich progress bar
    runner      run_study: the batch driver, stopping rules, resume

Optuna and Ray are imported only here, lazily (`import dse.search` imports neither).
"""

from __future__ import annotations

from typing import Any

__all__ = ["RunSummary", "load_study", "run_study"]


def __getattr__(name: str) -> Any:
    if name in ("run_study", "RunSummary"):
        from dse.search import runner

        return getattr(runner, name)
    if name == "load_study":
        from dse.search.study import load_study

        return load_study
    raise AttributeError(f"module 'dse.search' has no attribute {name!r}")

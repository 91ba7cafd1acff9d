"""`dse bench`: CPU time of the model's units of work, measured in this process."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from dse.cli.common import JsonOpt, console, friendly, print_json
from dse.errors import DseError


@friendly
def bench_cmd(
    repeats: Annotated[int, typer.Option("--repeats", help="Timed repeats (median reported).")] = 20,
    as_json: JsonOpt = False,
) -> None:
    """CPU time of one serving predict (Llama-3.1-8B, H100, batch 32, 1024/256), of one search point and
    its cost ledger, of a 1,000-request simulation under load (concurrency 64), of a TP8 MoE serving
    predict and of an 8-GPU training step."""
    from dse.bench import (
        bench_cost_of_point,
        bench_search_point,
        bench_serving_load,
        bench_serving_moe_tp8,
        bench_serving_predict,
        bench_training_step,
    )

    if not 1 <= repeats <= 10_000:  # a median of nothing was a StatisticsError traceback
        raise DseError(f"--repeats must be in [1, 10000], got {repeats}")
    results = [bench_serving_predict(repeats=repeats), bench_search_point(repeats=repeats)]
    results.append(bench_cost_of_point(repeats=repeats))
    results += bench_serving_load(repeats=max(1, min(repeats, 5)))
    results += [
        bench_serving_moe_tp8(repeats=max(1, min(repeats, 3))),
        bench_training_step(repeats=max(1, min(repeats, 5))),
    ]
    if as_json:
        print_json({"results": [r.to_dict() for r in results]})
        return
    table = Table("what", "CPU ms (median)", "CPU ms (min)", "wall ms (median)", "repeats")
    for r in results:
        table.add_row(
            r.name,
            f"{r.cpu_s_median * 1e3:.2f}",
            f"{r.cpu_s_min * 1e3:.2f}",
            f"{r.wall_s_median * 1e3:.2f}",
            str(r.repeats),
        )
    console.print(table)

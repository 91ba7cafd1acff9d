"""`dse whatif`: a baseline GPU against a changed one for one serving workload, side by side, each side
priced, with the lines that say how each side's price or rent was set and what the change can move."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated, Any

import typer
from rich.text import Text

from dse.cli.common import (
    AttentionOpt,
    BusOpt,
    CapOpt,
    ClockOpt,
    CoeffsOpt,
    EngineOpt,
    JsonOpt,
    KvDtypeOpt,
    MemoryOpt,
    ModelOpt,
    PrecisionOpt,
    RateOpt,
    SamplingOpt,
    SetOpt,
    console,
    esc,
    friendly,
    gpu_from_options,
    implied_precision,
    operating_point,
    print_json,
    print_note,
    resolve_precision,
    with_options,
)
from dse.cli.cost import (
    COST_ROWS,
    LEDGER_ROWS,
    CostArgs,
    cost_title,
    cost_warning,
    price_line,
    price_moves,
    prices_moved_with_build,
    rent_basis,
    serving_cost,
)
from dse.cli.load import LOAD_ROWS, LoadArgs, load_title, load_warnings, plain_warnings
from dse.cli.predict import estimate_serving
from dse.cost.build import price_fact
from dse.cost.operation import CostOptions
from dse.errors import DseError
from dse.serving import DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS
from dse.serving.load import LoadEstimate

# The two sides, as `--json` keys them and `--gpu-usd-per-hour baseline=X,changed=Y` names them.
SIDES = ("baseline", "changed")
SIDE_FORM = "baseline=X,changed=Y"  # how a price or rent flag gives each side its own
# The ledger rows of the table: dies, memory, package and board, the parts the build cost adds up.
BUILD_ROWS = tuple(row for row in LEDGER_ROWS if row[0] != "usd_per_million_input_tokens")


@friendly
@with_options(load=LoadArgs, cost=CostArgs)
def whatif_cmd(
    gpu: Annotated[str, typer.Argument(help="The baseline GPU (catalog name or YAML path).")],
    model: ModelOpt = "llama-3.1-8b",
    input_tokens: Annotated[int, typer.Option("--input-tokens")] = DEFAULT_INPUT_TOKENS,
    output_tokens: Annotated[int, typer.Option("--output-tokens")] = DEFAULT_OUTPUT_TOKENS,
    precision: PrecisionOpt = None,
    attention: AttentionOpt = "flash",
    kv_dtype: KvDtypeOpt = None,
    engine: EngineOpt = None,
    sampling: SamplingOpt = None,
    clock_mhz: ClockOpt = None,
    power_cap_w: CapOpt = None,
    memory: MemoryOpt = None,
    bus_width_bits: BusOpt = None,
    data_rate_gbps: RateOpt = None,
    sets: SetOpt = None,
    coeffs: CoeffsOpt = None,
    as_json: JsonOpt = False,
    *,
    load: LoadArgs,
    cost: CostArgs,
) -> None:
    """Baseline GPU against the changed one (--memory ..., --set ...) for one serving workload: a static
    batch (--batch, default 32) or a load mode (--concurrency, --request-rate, --max-throughput). One
    --gpu-price-usd is the baseline's, the changed GPU's moves with its build cost; one rent is both sides';
    either flag takes each side's as baseline=X,changed=Y."""
    new_gpu = gpu_from_options(gpu, memory, bus_width_bits, data_rate_gbps, sets)  # refuses a bare bus width
    if memory is None and not sets:
        given = (("--clock-mhz", clock_mhz), ("--power-cap-w", power_cap_w))
        both = " and ".join(flag for flag, value in given if value is not None)
        raise DseError(
            "say what changes: --memory TECH [--bus-width-bits N --data-rate-gbps X] and/or --set PATH=VALUE"
            + (f" (both sides run at the {both} given; a GPU's clock range: --set clocks.*)" if both else "")
        )
    base_gpu = gpu_from_options(gpu, None, None, None, None)
    point = operating_point(
        clock_mhz, power_cap_w, {f"the baseline {gpu}": base_gpu, f"the changed {gpu}": new_gpu}
    )
    # `--set cost.*` changes the changed side's prices, as `--set gpu.*` its GPU; the flags price both, a
    # rent named per side each its own
    per_side = cost.per_gpu(SIDES, noun="side")
    costs = (per_side["baseline"].options(None), per_side["changed"].options(sets))
    if load.mode() == "static" and load.batch is None:
        load = replace(load, batch=32)
    precision, precision_note = resolve_precision(precision, model)
    options = {"precision": precision, "attention": attention, "kv_dtype": kv_dtype}
    options |= {"engine": engine, "sampling": sampling}
    with implied_precision(precision, precision_note):
        runs = [
            estimate_serving(model, g, load, input_tokens, output_tokens, point, coeffs, **options)
            for g in (base_gpu, new_gpu)
        ]
    priced = _priced((base_gpu, new_gpu), runs, costs, cost.shared_price_usd())
    print_note(precision_note)
    _show_whatif(base_gpu, new_gpu, runs, priced, as_json)
    if not as_json:
        _print_cost_lines(base_gpu, new_gpu, priced, cost, costs[1])


def _priced(
    gpus: tuple[Any, Any], runs: list[Any], costs: tuple[CostOptions, CostOptions], price_usd: float | None
) -> list[dict[str, Any]]:
    """Each side's cost keys. One `--gpu-price-usd` for both is the baseline's price, and the changed GPU's
    moves with its build cost (`prices_moved_with_build`, `dse compare`'s rule too)."""
    base, new = (
        serving_cost(g, est, c, f"{side}: ") for g, est, c, side in zip(gpus, runs, costs, SIDES, strict=True)
    )
    if price_usd is not None:
        builds = (base.get("gpu_cost_usd"), new.get("gpu_cost_usd"))
        moved_usd = prices_moved_with_build(
            price_usd, builds, ("the baseline", "the changed GPU"), SIDE_FORM
        )[1]
        if moved_usd != price_usd:
            new = serving_cost(gpus[1], runs[1], replace(costs[1], gpu_price_usd=moved_usd), "changed: ")
    return [base, new]


def _workload_fields(est: Any) -> dict[str, Any]:
    """What a side of `dse whatif --json` ran: the model, the request and (under load) the engine settings
    `dse predict --json` reports, without its per-op breakdowns."""
    return {k: v for k, v in est.to_dict().items() if k != "gpu" and not isinstance(v, dict)}


def _show_whatif(
    base_gpu: Any, new_gpu: Any, runs: list[Any], costs: list[dict[str, Any]], as_json: bool
) -> None:
    from dse.cli.render import SERVING_ROWS, bound_text, compare_table

    under_load = isinstance(runs[0], LoadEstimate)
    sides = [
        {**g.summary(), **_workload_fields(est), **est.metrics(), **cost}
        for g, est, cost in zip((base_gpu, new_gpu), runs, costs, strict=True)
    ]
    for side, est in zip(sides, runs, strict=True):  # what bounds each phase: a change's effect, explained
        side["bound_by"] = est.bound_by
        if under_load:
            side["warnings"] = plain_warnings(est)
    if as_json:
        mode = runs[0].request.mode if under_load else "static"
        print_json({"mode": mode, "baseline": sides[0], "changed": sides[1]})
        return
    bandwidth = (("memory_bw_bytes_per_s", "memory bandwidth (TB/s)", 1e-12, ".2f"),)
    rows = bandwidth + (LOAD_ROWS if under_load else SERVING_ROWS) + BUILD_ROWS + COST_ROWS
    memory = (new_gpu.memory.technology, new_gpu.memory.bus_width_bits)
    same_memory = memory == (base_gpu.memory.technology, base_gpu.memory.bus_width_bits)
    label = "changed" if same_memory else f"{memory[0]} {memory[1]}-bit"  # name the memory only if it moved
    note = ""
    if under_load:
        title = load_title(runs[0])
        base_e, new_e = (est.engine for est in runs)
        if (base_e.max_num_seqs, base_e.max_batched_tokens) != (new_e.max_num_seqs, new_e.max_batched_tokens):
            # the engine's defaults follow the GPU (vLLM's by device memory): say so, not credit the hardware
            note = (
                f"the changed GPU runs the {new_e.name} engine's defaults for it: max {new_e.max_num_seqs} "
                f"seqs, {new_e.max_batched_tokens} tokens/step (--max-num-seqs / --max-batched-tokens set "
                "them for both)"
            )
    else:
        r = runs[0].request
        title = f"{runs[0].model}: static batch of {r.batch}, {r.input_tokens} in / {r.output_tokens} out, "
        title += r.precision
    console.print(Text(title))  # a paragraph at the console's width, not wrapped to the table
    console.print(compare_table(sides[0], sides[1], rows, (base_gpu.name, label)))
    if note:
        console.print(note, highlight=False)
    for name, side, est in zip(SIDES, sides, runs, strict=True):
        status = (
            "feasible" if side["feasible"] else f"[bold red]infeasible:[/] {esc(side['infeasible_reason'])}"
        )
        bound = bound_text(est.bound_by)
        console.print(f"{name}: {status}" + (f"; {bound}" if bound else ""))
        for warning in load_warnings(est):
            console.print(f"{name}: {warning}")


def _print_cost_lines(
    base_gpu: Any, new_gpu: Any, costs: list[dict[str, Any]], cost: CostArgs, changed: CostOptions
) -> None:
    """Under the table: the cost view and how each side was priced (`_cost_line`), each side's cost warning
    (a die past the reticle, ...), and a note when the change is the die's alone (`_die_only_note`)."""
    line = _cost_line(costs, cost, new_gpu, changed)
    if line is not None:
        console.print(esc(line), highlight=False)
    for name, side in zip(SIDES, costs, strict=True):
        if side.get("cost_note") and side.get("usd_per_gpu_hour") is not None:  # unpriced: said on stderr
            console.print(f"{name}: {cost_warning(side['cost_note'])}", highlight=False)
    if (note := _die_only_note(base_gpu, new_gpu)) is not None:
        console.print(note, highlight=False)


def _cost_line(costs: list[dict[str, Any]], cost: CostArgs, new_gpu: Any, changed: CostOptions) -> str | None:
    """`dse predict`'s cost view line (`cost_title`), with how the changed side was priced: a rent for both
    (or each side's), a given price (`price_line`), its `--set cost.gpu_price_usd.<gpu>` or the published
    price moved with the build cost, or no price at all. None when neither side could be priced (stderr
    said why)."""
    base, new = costs
    shown = base if base.get("cost_view") else new
    if not shown.get("cost_view"):
        return None
    if shown["cost_view"] == "renter":
        return rent_basis(shown, cost.gpu_usd_per_hour, "side", SIDE_FORM)
    line = cost_title(shown)
    if new.get("gpu_price_usd") is None:  # the cannot-be-priced warning says why: no price to explain
        return f"{line}: the changed GPU is not priced (its warning says why)"
    moved = price_moves((base.get("gpu_cost_usd"), new.get("gpu_cost_usd")))
    rest = f"the changed GPU's, {new['gpu_price_usd']:,.0f},"
    given = price_line(cost, "the baseline", rest, "side", SIDE_FORM, moved)
    if given is not None:
        return f"{line}: {given}"
    basis, path = new.get("gpu_price_basis"), price_fact(new_gpu)
    if basis == "set" and path is not None:  # the user's price, not the published one, moved
        value = changed.facts().value(path)
        return f"{line}: the changed GPU's price is --set cost.{path}={value:,.0f} moved with its build cost"
    if basis == "published":
        return f"{line}: the changed GPU's price is the baseline's published price moved with its build cost"
    return line


def _die_only_note(base_gpu: Any, new_gpu: Any) -> str | None:
    """The note for a what-if of `die.*` fields alone (process node, dies, physical counts, published area):
    they size the die and so its cost and embodied carbon, and nothing the performance and power models read
    (a newcomer read the same energy on a 12-nm H100 as the model's verdict on the node)."""
    if base_gpu.die == new_gpu.die or base_gpu.model_copy(update={"die": new_gpu.die}) != new_gpu:
        return None
    return (
        "note: only die.* fields changed, and they feed die area, build cost, price and embodied carbon "
        "only: speed, power and energy are the baseline's (a process node's energy per operation and clocks "
        "are not modelled from the node: set clocks.*, power.* or sm.* fields for them)"
    )

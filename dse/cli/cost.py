"""Cost and carbon at the CLI: the options every predicting command shares, the cost block, `dse cost facts`
and `dse validate area`."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Annotated, Any

import typer
from rich.table import Table

from dse.cli.common import JsonOpt, console, err_console, esc, friendly, on_command_line, print_json
from dse.config.jsonio import with_nulls
from dse.cost.facts import SCENARIOS, grid_gco2_per_kwh, load_cost_facts, split_cost_overrides
from dse.cost.operation import (
    COST_KEYS,
    CostOptions,
    Throughput,
    cost_outputs,
    operation_value_problem,
    renter_ignores,
    renter_problem,
)
from dse.errors import DseError, UnpricedError

CostScenarioOpt = Annotated[
    str,
    typer.Option("--cost-scenario", help=f"Every price at the {'|'.join(SCENARIOS)} end of its range."),
]
LifetimeOpt = Annotated[
    float | None,
    typer.Option(
        "--lifetime-years",
        help="Years the GPU is used (default 5): amortizes the price (owner view) and embodied carbon.",
    ),
]
UtilizationOpt = Annotated[
    float | None,
    typer.Option(
        "--utilization",
        help="Share of the lifetime serving (default 1): amortizes the price (owner view) and embodied "
        "carbon; a renter's $/GPU-hour is per hour served.",
    ),
]
ElectricityOpt = Annotated[
    float | None,
    typer.Option("--electricity-usd-per-kwh", help="Electricity price (default 0.0826, US industrial 2025)."),
]
PueOpt = Annotated[float | None, typer.Option("--pue", help="Facility PUE (default 1.3).")]
GridOpt = Annotated[
    str | None,
    typer.Option(
        "--grid-gco2-per-kwh",
        help="Grid carbon: a number or a region (world, us, france ...; default world).",
    ),
]
RentOpt = Annotated[
    str | None,
    typer.Option(
        "--gpu-usd-per-hour",
        help="Renter view: $ per GPU-hour, replacing the owner's ledger. `dse compare`: one price for every "
        "GPU, or each GPU's as NAME=PRICE,... (h100-sxm=2.99,l40s=0.9). `dse whatif`: one price for both "
        "sides, or each side's as baseline=PRICE,changed=PRICE (baseline=2.99,changed=2.2).",
        show_default=False,
    ),
]
PriceOpt = Annotated[
    float | None,
    typer.Option(
        "--gpu-price-usd",
        help="Owner view: purchase price per GPU (default: derived). `dse whatif`: the baseline's price; the "
        "changed GPU's moves with its build cost, as a catalog GPU's published price does.",
    ),
]
# How the CLI names the renter's rate in a refusal of the owner's prices beside it (`renter_problem`).
RENT_FLAG = "--gpu-usd-per-hour (the renter's view)"


@dataclass(frozen=True, slots=True, kw_only=True)
class CostArgs:
    """The cost options of a predicting command (each field is its option: `with_options(cost=CostArgs)`)."""

    cost_scenario: CostScenarioOpt = "mid"
    lifetime_years: LifetimeOpt = None
    utilization: UtilizationOpt = None
    electricity_usd_per_kwh: ElectricityOpt = None
    pue: PueOpt = None
    grid_gco2_per_kwh: GridOpt = None
    gpu_usd_per_hour: RentOpt = None
    gpu_price_usd: PriceOpt = None

    def options(self, sets: list[str] | None) -> CostOptions:
        """The options with the `cost.` paths of `--set`, checked now, not mid-run."""
        from dse.cost.operation import check_operation_value
        from dse.hardware.overrides import parse_set_options

        rate_usd_per_h = self.usd_per_gpu_hour()
        for key in ("lifetime_years", "utilization", "electricity_usd_per_kwh", "pue", "gpu_price_usd"):
            value = getattr(self, key)
            if value is not None:  # the flag's own range, before the facts are built from it
                check_operation_value(key, value)
        _, cost_sets = split_cost_overrides(parse_set_options(sets))
        owner_only = [
            flag for flag, value in (("--gpu-price-usd", self.gpu_price_usd),
                                     ("--electricity-usd-per-kwh", self.electricity_usd_per_kwh))
            if value is not None
        ] + [f"--set cost.{path}" for path in cost_sets if renter_ignores(path)]  # fmt: skip
        if rate_usd_per_h is not None and owner_only:
            # the rate replaces the owner's ledger: a price, tariff or server multiplier would show, unused
            raise DseError(renter_problem(owner_only, RENT_FLAG))
        for key in ("lifetime_years", "utilization", "electricity_usd_per_kwh", "pue", "grid_gco2_per_kwh"):
            if getattr(self, key) is not None and f"operation.{key}" in cost_sets:  # the flag won, unsaid
                flag = "--" + key.replace("_", "-")
                raise DseError(f"{flag} and --set cost.operation.{key} set the same fact; give one")
        options = CostOptions(
            self.cost_scenario, cost_sets, self.lifetime_years, self.utilization,
            self.electricity_usd_per_kwh, self.pue, self.grid_gco2_per_kwh, rate_usd_per_h,
            self.gpu_price_usd,
        )  # fmt: skip
        grid_gco2_per_kwh(options.facts(), options.grid)  # validates scenario, paths, ranges and the grid
        return options

    def usd_per_gpu_hour(self) -> float | None:
        """`--gpu-usd-per-hour` as one price (None: not given), in its range; a price per named GPU is
        `dse compare`'s (`per_gpu`), refused here."""
        if self.gpu_usd_per_hour is None:
            return None
        if "=" in self.gpu_usd_per_hour:
            raise DseError(
                f"--gpu-usd-per-hour {self.gpu_usd_per_hour}: NAME=PRICE prices each GPU of `dse compare` "
                "(each side of `dse whatif`); give one $ per GPU-hour here"
            )
        return _rent_usd_per_h(self.gpu_usd_per_hour)

    def per_gpu(self, gpus: Sequence[str], noun: str = "GPU") -> dict[str, CostArgs]:
        """Each compared GPU's cost options (`dse compare`; `dse whatif`'s sides, `noun` "side"):
        `--gpu-usd-per-hour NAME=PRICE,...` gives each its own price and must name every GPU (as written on
        the command line), and nothing else; one price (or none) is every GPU's. DseError naming the GPU and
        the price at fault."""
        text = self.gpu_usd_per_hour
        if text is None or ("=" not in text and "," not in text):
            return dict.fromkeys(gpus, self)
        if "=" not in text:  # prices by name: a reordered command line cannot move one to another GPU
            prices = [p.strip() for p in text.split(",")]
            named_prices = zip(
                gpus, prices if len(prices) == len(gpus) else ["PRICE"] * len(gpus), strict=True
            )
            raise DseError(
                f"--gpu-usd-per-hour {text}: name each {noun}'s price, "
                + ",".join(f"{gpu}={price}" for gpu, price in named_prices)
            )
        named: dict[str, str] = {}
        for item in text.split(","):
            name, equals, price = (part.strip() for part in item.rpartition("="))
            if not equals or not name:  # "2.99,l40s=0.9": one price for all and one named, both meant?
                raise DseError(
                    f"--gpu-usd-per-hour {text}: give one price for every {noun}, or NAME=PRICE for each of "
                    f"{', '.join(gpus)}, not {item.strip() or 'an empty item'}"
                )
            if name in named:
                raise DseError(f"--gpu-usd-per-hour {text}: {name} is priced twice")
            if name not in gpus:
                raise DseError(
                    f"--gpu-usd-per-hour {text}: {name} is not a compared {noun} ({', '.join(gpus)})"
                )
            _rent_usd_per_h(price, name)
            named[name] = price
        missing = [name for name in dict.fromkeys(gpus) if name not in named]
        if missing:
            raise DseError(
                f"--gpu-usd-per-hour {text}: no price for {', '.join(missing)} (NAME=PRICE for every "
                f"compared {noun}, or one price for all)"
            )
        return {name: replace(self, gpu_usd_per_hour=named[name]) for name in gpus}

    def context_fields(self, sets: list[str] | None) -> tuple[tuple[str, Any], ...]:
        """The options (checked as `options` checks them) as an `EvalContext.cost`, the form a study's `cost:`
        section takes, for the commands that evaluate search points (`dse sweep`, `dse compare`). The
        `--set cost.*` facts are not in it: those commands pass them as each point's `cost.<path>`."""
        options = self.options(sets)
        return (
            ("scenario", options.scenario), ("lifetime_years", options.lifetime_years),
            ("utilization", options.utilization),
            ("electricity_usd_per_kwh", options.electricity_usd_per_kwh), ("pue", options.pue),
            ("grid_gco2_per_kwh", options.grid),
            ("gpu_usd_per_hour", options.gpu_usd_per_hour), ("gpu_price_usd", options.gpu_price_usd),
        )  # fmt: skip

    def refuse(self, ctx: typer.Context | None, sets: list[str] | None, what: str) -> None:
        """Cost options where nothing is priced (`what` runs instead) are an error, as the other flags a
        mode does not read are: `--pue 20` beside --phase was accepted, never checked, and ignored. A flag
        counts when written at any value (`--cost-scenario mid`), so does a `--set cost.*` path."""
        written = set(on_command_line(ctx, *(f.name for f in fields(self)))) if ctx is not None else set()
        given = [f"--{f.name.replace('_', '-')}" for f in fields(self)
                 if f.name in written or getattr(self, f.name) != f.default]  # fmt: skip
        given += [f"--set cost.{path}" for path in cost_set_paths(sets)]
        if given:
            raise DseError(
                f"{', '.join(given)}: {what} is not priced; cost options apply to serving predictions, "
                "what-ifs and training steps"
            )


def _rent_usd_per_h(text: str, gpu: str | None = None) -> float:
    """One $ per GPU-hour of `--gpu-usd-per-hour` (`gpu`: the GPU it prices, NAME=PRICE) in its range."""
    flag = "--gpu-usd-per-hour" + (f" {gpu}={text}:" if gpu is not None else "")
    try:
        value = float(text)
    except ValueError:
        raise DseError(f"{flag} {text.strip()!r} is not a number ($ per GPU-hour)") from None
    problem = operation_value_problem("gpu_usd_per_hour", value)
    if problem is not None:
        raise DseError(f"{flag} {problem}")
    return value


def cost_set_paths(sets: list[str] | None) -> list[str]:
    """The cost facts `--set cost.PATH=VALUE` names (without `cost.`)."""
    from dse.hardware.overrides import parse_set_options

    return list(split_cost_overrides(parse_set_options(sets))[1])


def throughput_of(est: Any) -> Throughput:
    """What the ledger needs from a static-batch or load estimate."""
    from dse.serving.load import LoadEstimate

    if isinstance(est, LoadEstimate):
        return Throughput.from_metrics(est.metrics())
    return Throughput.from_metrics(est.metrics(), float(est.request.batch * est.request.input_tokens))


def serving_cost(gpu: Any, est: Any, options: CostOptions) -> dict[str, Any]:
    """The cost keys of one serving estimate; the build ledger alone when it is infeasible."""
    if not est.feasible:
        out = priced(lambda: cost_outputs(gpu, Throughput(1, 0.0, 0.0, 0.0), options), COST_KEYS)
        return {**out, **{k: None for k in ("usd_per_million_output_tokens", "gco2_per_output_token")}}
    return priced(lambda: cost_outputs(gpu, throughput_of(est), options), COST_KEYS)


def priced(ledger: Callable[[], dict[str, Any]], keys: Sequence[str]) -> dict[str, Any]:
    """`ledger()`, or its keys as null with `cost_note` and a warning when the GPU cannot be priced (a file
    without a `die` section, a die no wafer holds): the prediction it prices is not lost over its cost."""
    try:
        return ledger()
    except UnpricedError as exc:  # a bad cost input (an unknown process node, ...) stays an error
        err_console.print(f"warning: not priced: {esc(exc)}")
        return {**dict.fromkeys(keys), "cost_note": f"not priced: {exc}"}


# (key, label, scale, format) for the cost block of text output
COST_ROWS: tuple[tuple[str, str, float, str], ...] = (
    ("die_area_mm2", "die area (mm²)", 1.0, ".0f"),
    ("gpu_cost_usd", "GPU build cost ($)", 1.0, ",.0f"),
    ("gpu_price_usd", "GPU price ($)", 1.0, ",.0f"),
    ("usd_per_gpu_hour", "$ per GPU-hour", 1.0, ".3f"),
    ("usd_per_million_output_tokens", "$ per million output tokens", 1.0, ".3r"),
    ("energy_cost_fraction", "energy share of cost (%)", 100.0, ".1f"),
    ("gco2_per_output_token", "gCO2 per output token (operational)", 1.0, ".3g"),
    ("embodied_gco2_per_output_token", "gCO2 per output token (embodied)", 1.0, ".3g"),
)
LEDGER_ROWS: tuple[tuple[str, str, float, str], ...] = (
    ("die_cost_usd", "dies ($)", 1.0, ",.0f"),
    ("memory_cost_usd", "memory ($)", 1.0, ",.0f"),
    ("package_cost_usd", "package ($)", 1.0, ",.0f"),
    ("board_cost_usd", "board and server share ($)", 1.0, ",.0f"),
    # the prefill's share of the all-in output price above: the two are not additive (README)
    (
        "usd_per_million_input_tokens",
        "$ per million input tokens (prefill, inside the output price)",
        1.0,
        ".3r",
    ),
)


def cost_block(cost: dict[str, Any], rows: Any) -> Any:
    """The text output's cost block: a table of `rows` and a warning with its `cost_note` (a die past the
    reticle, ...), or the line saying why the GPU was not priced."""
    from rich.console import Group
    from rich.text import Text

    from dse.cli.render import metrics_table

    note = cost.get("cost_note")
    if note and all(cost.get(row[0]) is None for row in rows):  # `priced`: every value of the block is null
        return esc(f"cost and carbon: {note}")
    table = metrics_table(cost, rows, cost_title(cost))
    return Group(table, Text.from_markup(cost_warning(note))) if note else table


def cost_warning(note: str) -> str:
    """The warning line (console markup) of a priced ledger's `cost_note`."""
    return f"[bold yellow]warning:[/] {esc(note)}"


def cost_title(cost: dict[str, Any]) -> str:
    view = (
        "renter ($/GPU-hour given)" if cost["cost_view"] == "renter" else "owner (price amortized + energy)"
    )
    # a GPU without a published price is priced at its build cost times H100's ratio: an estimate to say
    estimate = (
        "; GPU price estimated (no published price: build cost x the default markup; --gpu-price-usd sets it)"
        if cost.get("gpu_price_basis") == "markup" and cost["cost_view"] == "owner"
        else ""
    )
    return f"cost and carbon: {view} view, {cost['cost_scenario']} prices{estimate}"


def rent_basis(cost: dict[str, Any], rent: str | None, noun: str, form: str) -> str:
    """The line under a side-by-side table (`dse compare` of GPUs, `dse whatif` of sides; `noun`) naming its
    cost view: in the renter's, whether each has its own $ per GPU-hour (`rent`, the flag's text; `form`,
    how to give each its own). One rate for all favours the fastest by construction: a design that is
    cheaper to build is charged a dearer one's rent. The "GPU price" row is then no part of the cost."""
    line = cost_title(cost)
    if cost["cost_view"] == "owner":
        return line
    if "=" in (rent or ""):
        return f"{line}: each {noun} at its own $ per GPU-hour; the GPU price row is not in the cost"
    return (
        f"{line}: one $ per GPU-hour for every {noun} (--gpu-usd-per-hour {form} prices each), so $ per "
        "token follows speed alone, not build cost; the GPU price row is not in the cost"
    )


@friendly
def facts_cmd(
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print one JSON list: path, value, low, high, unit (each fact's own, as the table shows "
            "it: mm2, USD/wafer, kgCO2e/cm2 ...), date, tag, source.",
        ),
    ] = False,
) -> None:
    """Every cost and carbon constant: value, range, unit, date, tag and source (`--set cost.PATH=X`)."""
    facts = load_cost_facts()
    rows = [{"path": p, **asdict(f)} for p, f in sorted(facts.entries.items())]
    if as_json:
        print_json(with_nulls(rows))
        return
    table = Table(title="cost facts (override with --set cost.PATH=VALUE; tags V R E D)")
    for col in ("path", "value", "low..high", "unit", "date", "tag", "source"):
        table.add_column(col, overflow="fold", ratio=3 if col == "source" else None)
    for r in rows:
        table.add_row(
            r["path"], f"{r['value']:g}", f"{r['low']:g}..{r['high']:g}", r["unit"], r["date"], r["tag"],
            esc(r["source"]),
        )  # fmt: skip
    console.print(table)


@friendly
def validate_area_cmd(
    as_json: JsonOpt = False,
    components: Annotated[
        bool, typer.Option("--components", help="With --json: the GA100 component split instead.")
    ] = False,
) -> None:
    """Die area of every catalog GPU, leaving its die out of the fit, and the GA100 component split."""
    from dse.calibrate.validate.area import ga100_components, validate_area

    if as_json:
        print_json(with_nulls(ga100_components() if components else validate_area()))
        return
    rows = validate_area()
    table = Table(
        title="die area: leave-one-die-out prediction vs published (error % null: no published area)"
    )
    for col in ("gpu", "process_node", "published_mm2", "predicted_mm2", "error_pct"):
        table.add_column(col, justify="left" if col in ("gpu", "process_node") else "right")
    for r in rows:
        pub = "estimate" if r["published_mm2"] is None else f"{r['published_mm2']:.1f}"
        err = "-" if r["error_pct"] is None else f"{r['error_pct']:+.1f}"
        table.add_row(r["gpu"], r["process_node"], pub, f"{r['predicted_mm2']:.1f}", err)
    console.print(table)
    split = Table(title="GA100 by component (die shot: LLMCompass, cost-facts.md 1.5)")
    for col in ("component", "published_mm2", "predicted_mm2", "error_pct"):
        split.add_column(col, justify="left" if col == "component" else "right")
    for r in ga100_components():
        split.add_row(
            r["component"], f"{r['published_mm2']:.1f}", f"{r['predicted_mm2']:.1f}", f"{r['error_pct']:+.1f}"
        )
    console.print(split)

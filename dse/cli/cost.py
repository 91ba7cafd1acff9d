"""Cost and carbon at the CLI: the options every predicting command shares, the cost block, `dse cost facts`
and `dse validate area`."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Annotated, Any

import typer
from rich.table import Table

from dse.cli.common import JsonOpt, console, err_console, esc, friendly, on_command_line, print_json
from dse.config.jsonio import with_nulls
from dse.cost.build import build_cost, price_moved_with_build
from dse.cost.facts import SCENARIOS, grid_gco2_per_kwh, load_cost_facts, split_cost_overrides
from dse.cost.operation import (
    COST_KEYS,
    OPERATION_RANGES,
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
    str | None,
    typer.Option(
        "--gpu-price-usd",
        help="Owner view: purchase price per GPU (default: derived). `dse compare`: the first GPU's price, "
        "the others' moving with their build cost, or each GPU's as NAME=PRICE,... (h100-sxm=30000,"
        "l40s=9000). `dse whatif`: the baseline's, the changed GPU's moving with its build cost, or each "
        "side's as baseline=PRICE,changed=PRICE.",
        show_default=False,
    ),
]
GPU_FORM = "NAME=PRICE,..."  # how a price or rent flag of `dse compare` gives each GPU its own
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

        rate_usd_per_h, price_usd = self.usd_per_gpu_hour(), self.usd_price()
        for key in ("lifetime_years", "utilization", "electricity_usd_per_kwh", "pue"):
            value = getattr(self, key)
            if value is not None:  # the flag's own range, before the facts are built from it
                check_operation_value(key, value)
        _, cost_sets = split_cost_overrides(parse_set_options(sets))
        owner_only = [
            flag for flag, value in (("--gpu-price-usd", price_usd),
                                     ("--electricity-usd-per-kwh", self.electricity_usd_per_kwh))
            if value is not None
        ] + [f"--set cost.{path}" for path in cost_sets if renter_ignores(path)]  # fmt: skip
        if rate_usd_per_h is not None and owner_only:
            # the rate replaces the owner's ledger: a price, tariff or server multiplier would show, unused
            raise DseError(renter_problem(owner_only, RENT_FLAG))
        for path in cost_sets:
            flag = self.flag_setting(path)
            if flag is not None:  # the flag won, unsaid
                raise DseError(f"{flag} and --set cost.{path} set the same fact; give one")
        options = CostOptions(
            self.cost_scenario, cost_sets, self.lifetime_years, self.utilization,
            self.electricity_usd_per_kwh, self.pue, self.grid_gco2_per_kwh, rate_usd_per_h, price_usd,
        )  # fmt: skip
        grid_gco2_per_kwh(options.facts(), options.grid)  # validates scenario, paths, ranges and the grid
        return options

    def flag_setting(self, path: str) -> str | None:
        """The flag given that sets the cost fact at `path` (`cost.` optional), or None: beside a `--set` or a
        swept value of that fact one of the two went unread. `--gpu-price-usd` replaces every published price
        (`cost.gpu_price_usd.*`), an operation flag its `cost.operation.*` fact."""
        key = path.strip().removeprefix("cost.")
        if key.startswith("gpu_price_usd.") and self.gpu_price_usd is not None:
            return "--gpu-price-usd"
        name = key.removeprefix("operation.")
        if key.startswith("operation.") and name in _FACT_FLAGS and getattr(self, name) is not None:
            return "--" + name.replace("_", "-")
        return None

    def usd_per_gpu_hour(self) -> float | None:
        """`--gpu-usd-per-hour` as one price (None: not given), in its range; a price per named GPU is
        `dse compare`'s (`per_gpu`), refused here."""
        return _one_value(RENT, self.gpu_usd_per_hour)

    def usd_price(self) -> float | None:
        """`--gpu-price-usd` as one price (None: not given), in its range; per named GPU, refused here."""
        return _one_value(PRICE, self.gpu_price_usd)

    def shared_price_usd(self) -> float | None:
        """The one `--gpu-price-usd` given for every GPU or side (None: none, or one each by name), which
        `dse compare` and `dse whatif` move with each other design's build cost
        (`prices_moved_with_build`)."""
        text = self.gpu_price_usd
        return None if text is None or "=" in text or "," in text else self.usd_price()

    def per_gpu(self, gpus: Sequence[str], noun: str = "GPU") -> dict[str, CostArgs]:
        """Each compared GPU's cost options (`dse compare`; `dse whatif`'s sides, `noun` "side"):
        `--gpu-usd-per-hour` or `--gpu-price-usd` as NAME=PRICE,... gives each its own price and must name
        every GPU (as written on the command line), and nothing else; one price (or none) is every GPU's.
        DseError naming the GPU and the price at fault."""
        rents = _per_name(RENT, self.gpu_usd_per_hour, gpus, noun)
        prices = _per_name(PRICE, self.gpu_price_usd, gpus, noun)
        return {
            name: replace(
                self,
                gpu_usd_per_hour=rents.get(name, self.gpu_usd_per_hour),
                gpu_price_usd=prices.get(name, self.gpu_price_usd),
            )
            for name in gpus
        }

    def context_fields(
        self, sets: list[str] | None, price_usd: float | None = None
    ) -> tuple[tuple[str, Any], ...]:
        """The options (checked as `options` checks them) as an `EvalContext.cost`, the form a study's `cost:`
        section takes, for the commands that evaluate search points (`dse sweep`, `dse compare`; `price_usd`:
        a compared GPU's price moved from the one given, `compare_prices`). The `--set cost.*` facts are not
        in it: those commands pass them as each point's `cost.<path>`."""
        options = self.options(sets)
        if price_usd is not None:
            options = replace(options, gpu_price_usd=price_usd)
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


# The operation facts with a flag of their own (`--pue` sets `cost.operation.pue`).
_FACT_FLAGS = ("lifetime_years", "utilization", "electricity_usd_per_kwh", "pue", "grid_gco2_per_kwh")


@dataclass(frozen=True, slots=True)
class _PriceFlag:
    """A price flag that takes one number or one per named GPU: its name, OPERATION_RANGES key and unit."""

    flag: str
    key: str
    unit: str
    what: str  # what one number gives, in the refusal of NAME=PRICE where one price is read


RENT = _PriceFlag("--gpu-usd-per-hour", "gpu_usd_per_hour", "$ per GPU-hour", "one $ per GPU-hour")
PRICE = _PriceFlag("--gpu-price-usd", "gpu_price_usd", "$", "one purchase price")


def _one_value(kind: _PriceFlag, text: str | None) -> float | None:
    """`kind`'s flag as one price (None: not given), in its range; NAME=PRICE is refused here."""
    if text is None:
        return None
    if "=" in text:
        raise DseError(
            f"{kind.flag} {text}: NAME=PRICE prices each GPU of `dse compare` (each side of `dse whatif`); "
            f"give {kind.what} here"
        )
    return _flag_value(kind, text)


def _flag_value(kind: _PriceFlag, text: str, gpu: str | None = None) -> float:
    """One number of `kind`'s flag (`gpu`: the GPU it prices, NAME=PRICE) in its range."""
    flag = kind.flag + (f" {gpu}={text}:" if gpu is not None else "")
    try:
        value = float(text)
    except ValueError:
        raise DseError(f"{flag} {text.strip()!r} is not a number ({kind.unit})") from None
    problem = operation_value_problem(kind.key, value)
    if problem is not None:
        raise DseError(f"{flag} {problem}")
    return value


def _per_name(kind: _PriceFlag, text: str | None, gpus: Sequence[str], noun: str) -> dict[str, str]:
    """`kind`'s flag as NAME=PRICE,... over `gpus` (`per_gpu`), each checked; {} for one price or none."""
    flag = kind.flag
    if text is None or ("=" not in text and "," not in text):
        return {}
    if "=" not in text:  # prices by name: a reordered command line cannot move one to another GPU
        prices = [p.strip() for p in text.split(",")]
        named_prices = zip(gpus, prices if len(prices) == len(gpus) else ["PRICE"] * len(gpus), strict=True)
        raise DseError(
            f"{flag} {text}: name each {noun}'s price, "
            + ",".join(f"{gpu}={price}" for gpu, price in named_prices)
        )
    named: dict[str, str] = {}
    for item in text.split(","):
        name, equals, price = (part.strip() for part in item.rpartition("="))
        if not equals or not name:  # "2.99,l40s=0.9": one price for all and one named, both meant?
            raise DseError(
                f"{flag} {text}: give one price for every {noun}, or NAME=PRICE for each of "
                f"{', '.join(gpus)}, not {item.strip() or 'an empty item'}"
            )
        if name in named:
            raise DseError(f"{flag} {text}: {name} is priced twice")
        if name not in gpus:
            raise DseError(f"{flag} {text}: {name} is not a compared {noun} ({', '.join(gpus)})")
        _flag_value(kind, price, name)
        named[name] = price
    missing = [name for name in dict.fromkeys(gpus) if name not in named]
    if missing:
        raise DseError(
            f"{flag} {text}: no price for {', '.join(missing)} (NAME=PRICE for every compared {noun}, or "
            "one price for all)"
        )
    return named


def prices_moved_with_build(
    price_usd: float, build_usd: Sequence[float | None], labels: Sequence[str], form: str
) -> list[float]:
    """One `--gpu-price-usd` over several designs (`dse compare`'s GPUs, `dse whatif`'s sides; `labels`
    name them, the first's price is the one given): each other design's price moves with its build cost
    (`price_moved_with_build`), the rule that moves a catalog GPU's published price for a what-if. One price
    for all made a GDDR7 H100, 28% cheaper to build, 36% dearer per token. A design without a build cost (no
    die, a die no wafer holds), or all of them when the first has none, is priced as given. DseError naming
    the price given and the one derived when that leaves the flag's range (`form`: how to give each)."""
    first, moved = build_usd[0], [price_usd]
    for label, build in zip(labels[1:], build_usd[1:], strict=True):
        if not first or build is None:
            moved.append(price_usd)
            continue
        usd = price_moved_with_build(price_usd, first, build)
        if operation_value_problem(PRICE.key, usd) is not None:
            high = OPERATION_RANGES[PRICE.key][1]
            raise DseError(
                f"--gpu-price-usd {price_usd:g} is {labels[0]}'s price; {label}'s moves with its build "
                f"cost (x{build / first:.4g}) to {usd:.3g}, past the flag's range [0, {high:g}]: give each "
                f"its own (--gpu-price-usd {form})"
            )
        moved.append(usd)
    return moved


def price_moves(build_usd: Sequence[float | None]) -> bool:
    """Whether `prices_moved_with_build` moves the first design's price to any other (both have a build
    cost)."""
    return bool(build_usd[0]) and any(build is not None for build in build_usd[1:])


def compare_prices(
    cost: CostArgs, specs: Mapping[str, Any], sets: list[str] | None
) -> tuple[dict[str, float], bool]:
    """`dse compare`'s one `--gpu-price-usd` over its GPUs (`specs`, in order): the first's price as given,
    each other's moved with its build cost (`prices_moved_with_build`), and whether any moved (`price_moves`);
    ({}, False) when none or one each was given."""
    price_usd = cost.shared_price_usd()
    if price_usd is None:
        return {}, False
    options = cost.options(sets)
    builds = [build_cost_usd(spec, options) for spec in specs.values()]
    prices = prices_moved_with_build(price_usd, builds, list(specs), GPU_FORM)
    return dict(zip(specs, prices, strict=True)), price_moves(builds)


def build_cost_usd(gpu: Any, options: CostOptions) -> float | None:
    """`gpu`'s build cost under `options`' facts, None when it has none (no die, a die no wafer holds)."""
    try:
        return build_cost(gpu, options.facts()).gpu_cost_usd
    except UnpricedError:
        return None


def price_line(cost: CostArgs, first: str, rest: str, noun: str, form: str, moved: bool) -> str | None:
    """How a given `--gpu-price-usd` priced a side-by-side table (`dse compare`'s GPUs, `dse whatif`'s
    sides, `noun`), None when none was given: one each by name (`form`), or one that is `first`'s price and
    moves with the build cost for `rest` (`moved`; else it priced every one as given)."""
    if cost.gpu_price_usd is None:
        return None
    price_usd = cost.shared_price_usd()
    if price_usd is None:
        return f"each {noun} at its own --gpu-price-usd"
    given = f"--gpu-price-usd {price_usd:,.0f}"
    if not moved:
        return f"{given} prices every {noun} (no build cost to move a price with; {form} prices each)"
    return (
        f"{given} is {first}'s price; {rest} moves with its build cost, as a catalog GPU's published price "
        f"does for a what-if ({form} prices each)"
    )


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


def serving_cost(gpu: Any, est: Any, options: CostOptions, who: str = "") -> dict[str, Any]:
    """The cost keys of one serving estimate; the build ledger alone when it is infeasible. `who` names
    the side of a what-if in a warning ("changed: ")."""
    if not est.feasible:
        out = priced(lambda: cost_outputs(gpu, Throughput(1, 0.0, 0.0, 0.0), options), COST_KEYS, who)
        return {**out, **{k: None for k in ("usd_per_million_output_tokens", "gco2_per_output_token")}}
    return priced(lambda: cost_outputs(gpu, throughput_of(est), options), COST_KEYS, who)


def priced(ledger: Callable[[], dict[str, Any]], keys: Sequence[str], who: str = "") -> dict[str, Any]:
    """`ledger()`, or its keys as null with `cost_note` and a warning (prefixed by `who`) when the GPU
    cannot be priced (a file without a `die` section, a die no wafer holds): the prediction it prices is
    not lost over its cost."""
    try:
        return ledger()
    except UnpricedError as exc:  # a bad cost input (an unknown process node, ...) stays an error
        err_console.print(f"{esc(who)}warning: not priced: {esc(exc)}")
        return {**dict.fromkeys(keys), "cost_note": f"not priced: {exc}"}


# (key, label, scale, format) for the cost block of text output
COST_ROWS: tuple[tuple[str, str, float, str], ...] = (
    ("die_area_mm2", "die area (mm²)", 1.0, ".0f"),
    ("gpu_cost_usd", "GPU build cost ($)", 1.0, ",.0f"),
    ("gpu_price_usd", "GPU price ($)", 1.0, ",.0f"),
    ("usd_per_gpu_hour", "$ per GPU-hour", 1.0, ".3r"),
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

"""Rich tables for the CLI (the report edge: SI values shown in ms, J, W, MHz, GiB)."""

from __future__ import annotations

from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from dse.cli.common import esc
from dse.units import format_change, format_value

# (metric key, label, scale, format) for serving estimates.
SERVING_ROWS: tuple[tuple[str, str, float, str], ...] = (
    ("ttft_s", "TTFT (ms)", 1e3, ".2f"),
    ("tpot_s", "TPOT (ms)", 1e3, ".3f"),
    ("e2e_latency_s", "end-to-end latency (s)", 1.0, ".3f"),
    ("output_tokens_per_s", "output tokens/s", 1.0, ".0f"),
    ("energy_j", "energy (J)", 1.0, ".1f"),
    ("energy_per_output_token_j", "energy per output token (mJ)", 1e3, ".2f"),
    ("energy_per_request_j", "energy per request (J)", 1.0, ".2f"),
    ("avg_power_w", "average power (W)", 1.0, ".0f"),
    ("peak_power_w", "peak kernel power (W)", 1.0, ".0f"),
    ("effective_clock_hz", "effective SM clock (MHz)", 1e-6, ".0f"),
    ("weight_bytes", "weights (GiB)", 2**-30, ".2f"),
    ("kv_cache_bytes", "KV cache (GiB)", 2**-30, ".2f"),
    ("activation_bytes", "activations (GiB)", 2**-30, ".2f"),
    ("memory_bytes", "memory needed (GiB)", 2**-30, ".2f"),
    ("memory_capacity_bytes", "memory capacity (GiB)", 2**-30, ".1f"),
)

GRAPH_ROWS: tuple[tuple[str, str, float, str], ...] = (
    ("latency_s", "latency (ms)", 1e3, ".3f"),
    ("busy_s", "GPU busy (ms)", 1e3, ".3f"),
    ("energy_j", "energy (J)", 1.0, ".4g"),
    # a vision forward pass's only (`vision_pass_fields`): the training step's keys, per image
    ("samples_per_s", "images/s", 1.0, ",.1f"),
    ("energy_per_sample_j", "energy per image (J)", 1.0, ".4g"),
    ("avg_power_w", "average power (W)", 1.0, ".1f"),
    ("peak_power_w", "peak kernel power (W; the cap holds the mean)", 1.0, ".1f"),
    ("effective_clock_hz", "effective SM clock (MHz)", 1e-6, ".0f"),
    ("requested_clock_hz", "requested SM clock (MHz)", 1e-6, ".0f"),
    ("power_cap_w", "power cap (W)", 1.0, ".0f"),
    ("memory_bytes", "memory (GiB)", 1.0 / 2**30, ".2f"),
)


def metrics_table(
    values: dict[str, Any], rows: tuple[tuple[str, str, float, str], ...], title: str
) -> RenderableType:
    """A two-column table of `rows` under `title`. The title is a paragraph of its own at the console's width:
    as the table's title it wrapped to the narrow table in short centred lines."""
    table = Table("metric", "value")
    for key, label, scale, fmt in rows:
        if isinstance(values.get(key), int | float):
            table.add_row(label, format_value(values[key] * scale, fmt))
    return Group(Text(title), table)


def compare_table(
    base: dict[str, Any],
    other: dict[str, Any],
    rows: tuple[tuple[str, str, float, str], ...],
    titles: tuple[str, str],
) -> Table:
    """Side by side with the change (the `dse whatif` view): relative, or in percentage points for a row
    shown in % (a share going from 14.7% to 17.7% is +3.0 points, not +20%). A row with a number on one
    side only (the other cannot run) shows it beside "-"; a row with none is skipped."""
    table = Table("metric", esc(titles[0]), esc(titles[1]), "change")  # its caller prints the title above it
    for key, label, scale, fmt in rows:
        a, b = _number(base.get(key)), _number(other.get(key))
        if a is None or b is None:
            if a is not None or b is not None:
                shown = ["-" if v is None else format_value(v * scale, fmt) for v in (a, b)]
                table.add_row(label, *shown, "")
            continue
        if "%" in label or fmt.endswith("%"):  # a share: "(%)" rows are scaled to %, "%" formats from 1
            change = f"{(b - a) * scale * (100.0 if fmt.endswith('%') else 1.0):+.1f} points"
        else:
            change = format_change((b - a) / a) if a else ""
        table.add_row(label, format_value(a * scale, fmt), format_value(b * scale, fmt), change)
    return table


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def breakdown_table(
    energy_j: dict[str, float], title: str, limit: int | None = None, column: str = "energy (J)"
) -> Table:
    """Parts (energies unless `column` says otherwise) sorted by size, with shares; a total row that the
    parts sum to."""
    total = sum(energy_j.values())
    table = Table(title=title)
    table.add_column("part", overflow="fold")
    table.add_column(column, justify="right")
    table.add_column("share", justify="right")
    items = sorted(energy_j.items(), key=lambda kv: -kv[1])
    shown = items if limit is None else items[:limit]
    for name, value in shown:
        table.add_row(esc(name), f"{value:.4g}", f"{value / total:.1%}" if total else "-")
    if len(shown) < len(items):
        rest = sum(v for _, v in items[len(shown) :])
        table.add_row(
            f"({len(items) - len(shown)} more)", f"{rest:.4g}", f"{rest / total:.1%}" if total else "-"
        )
    table.add_row("total", f"{total:.4g}", "100.0%", style="bold")
    return table


def bound_text(bound_by: dict[str, Any]) -> str:
    """One line: what bounds each phase, with its share of the phase's time (`dse.perf.bounds`)."""
    parts = []
    for phase, summary in bound_by.items():
        label, shares = summary.get("bound_by"), summary.get("shares") or {}
        if label:
            rest = ", ".join(f"{k} {v:.0%}" for k, v in list(shares.items())[1:3] if v >= 0.05)
            parts.append(f"{phase}: {label} ({shares[label]:.0%}{'; ' + rest if rest else ''})")
    return "bound by " + " · ".join(parts) if parts else ""


def weight_only_note(gpu: Any, precision: str) -> str | None:
    """The note for fp8 weights served on a GPU without fp8 Tensor Cores (A100, A10): they run as weight-only
    GEMMs that dequantize to 16 bits (vLLM's Marlin kernels on Ampere), not as fp8 math."""
    if precision != "fp8" or "fp8" in gpu.sm.tensor_flop_per_clk:
        return None
    return (
        f"note: {gpu.name} has no fp8 Tensor Cores: the fp8 weights are read as 8-bit and dequantized "
        "to 16 bits for 16-bit math (weight-only GEMMs, as vLLM's Marlin kernels run them on Ampere)"
    )

"""Roofline of one design point: each kernel of its prefill and of a decode step at its arithmetic intensity
(FLOP per minimum DRAM byte) and achieved FLOP/s, one colour per kernel family, under the GPU's roofs.

A kernel far below both roofs is limited by something else (L2, latency, launch, a power cap); its
`bound_by` label is in the hover. Kernels without FLOPs (copies, embeddings) cannot sit on a log axis and are
counted in the title instead. Marker area follows the kernel's share of the phase's time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dse.report._imports import try_import
from dse.report.markup import plotly_text

with try_import() as _imports:
    import plotly.graph_objects as go

FAMILY_COLORS = {
    "gemm": "#dd8452",
    "attention": "#4c72b0",
    "elementwise": "#55a868",
    "rmsnorm": "#8172b3",
    "layernorm": "#8172b3",
    "softmax": "#64b5cd",
    "reduction": "#937860",
}
PHASE_SYMBOLS = {"prefill": "circle", "decode": "diamond"}


def _roof_traces(roofs: Mapping[str, float], x_lo: float, x_hi: float) -> list[Any]:
    """min(peak, bandwidth x intensity) for the Tensor-Core and CUDA-core peaks over DRAM."""
    xs = np.geomspace(x_lo, x_hi, 200)
    traces = []
    for key, label, dash in (
        ("tensor_peak_flop_per_s", "Tensor-Core roof", "solid"),
        ("cuda_peak_flop_per_s", "CUDA-core roof", "dot"),
    ):
        ys = np.minimum(roofs[key], roofs["dram_bw_bytes_per_s"] * xs)
        traces.append(
            go.Scatter(
                x=xs, y=ys, mode="lines", name=label, line={"color": "#333", "dash": dash, "width": 1.5},
                hoverinfo="skip",
            )
        )  # fmt: skip
    return traces


def plot_roofline(data: Mapping[str, Any], title: str = "") -> Any | None:
    """The roofline figure of `dse.search.breakdown.roofline_for_inputs` data; None without kernels."""
    _imports.check()
    kernels: Sequence[Mapping[str, Any]] = data.get("kernels") or []
    drawn = [k for k in kernels if k["flop"] > 0 and k["dram_bytes"] > 0 and k["latency_s"] > 0]
    if not drawn:
        return None
    phase_time = {
        p: sum(k["latency_s"] * k["count"] for k in kernels if k["phase"] == p) for p in PHASE_SYMBOLS
    }
    intensity = np.array([k["flop"] / k["dram_bytes"] for k in drawn])
    fig = go.Figure()
    for trace in _roof_traces(data, intensity.min() / 2, intensity.max() * 2):
        fig.add_trace(trace)
    for family in sorted({str(k["kind"]) for k in drawn}):
        for phase, symbol in PHASE_SYMBOLS.items():
            rows = [k for k in drawn if k["kind"] == family and k["phase"] == phase]
            if not rows:
                continue
            share = np.array([k["latency_s"] * k["count"] / max(phase_time[phase], 1e-30) for k in rows])
            fig.add_trace(
                go.Scatter(
                    x=[k["flop"] / k["dram_bytes"] for k in rows],
                    y=[k["flop"] / k["latency_s"] for k in rows],
                    mode="markers",
                    name=f"{family} ({phase})",
                    marker={
                        "symbol": symbol,
                        "color": FAMILY_COLORS.get(family, "#999"),
                        "size": 6 + 30 * np.sqrt(share),
                        "line": {"width": 0.5, "color": "#222"},
                    },
                    customdata=[
                        [plotly_text(k["name"]), k["bound_by"], 100 * s, k["latency_s"] * 1e6]
                        for k, s in zip(rows, share, strict=True)
                    ],
                    hovertemplate="%{customdata[0]}<br>%{x:.3g} FLOP/byte, %{y:.3g} FLOP/s<br>"
                    "bound by %{customdata[1]}; %{customdata[3]:.3g} µs, %{customdata[2]:.1f}% of the phase"
                    "<extra></extra>",
                )  # fmt: skip
            )
    skipped = len(kernels) - len(drawn)
    note = f" ({skipped} kernels without FLOPs not drawn)" if skipped else ""
    fig.update_layout(
        title={"text": title + note, "x": 0.5, "font": {"size": 13}},
        xaxis={"title": {"text": "arithmetic intensity (FLOP per DRAM byte)"}, "type": "log"},
        yaxis={"title": {"text": "achieved FLOP/s"}, "type": "log"},
        template="plotly_white",
        height=480,
        margin={"l": 70, "r": 30, "t": 60, "b": 60},
    )
    return fig

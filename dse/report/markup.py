"""HTML pieces the report's sections share: escaping and key-value tables."""

from __future__ import annotations

import html
from collections.abc import Sequence
from typing import Any

from dse.report.table import fmt_value


def esc(value: Any) -> str:
    """Text for HTML: every user-written string (study names, parameter values, reasons) goes through it."""
    return html.escape(str(value), quote=True)


def plotly_text(value: Any) -> str:
    """User text for a Plotly trace name, axis label or hover value. Plotly reads tags (`<b>`, `<br>`) in
    them and decodes only a few entities (`&amp;`, `&lt;`, `&gt;` and numeric ones, not `&quot;`), so `&`, `<`
    and `>` are escaped and quotes kept. Hover templates refer to such text (`%{fullData.name}`,
    `%{customdata}`) rather than pasting it in, where a `%{` would be template syntax."""
    return html.escape(str(value), quote=False)


def kv_table(pairs: Sequence[tuple[str, Any]]) -> str:
    rows = "".join(f"<tr><td>{esc(k)}</td><td>{esc(fmt_value(v))}</td></tr>" for k, v in pairs)
    return f'<table class="kv">{rows}</table>'

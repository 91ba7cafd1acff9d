"""The first kernel-model pass of several design points with a family's rows in one call.

A search point's prediction starts with one kernel-model pass over its graphs' ops at the requested clock
(`dse.perf.pass_cap`), one call per kernel family, whose cost is mostly each family's fixed numpy work
(the GEMM call of ~20 rows about a millisecond). `prefetch` runs the rows of many points' first passes as
one call per family of `FAMILIES` (those that take per-row GPU values, `dse.perf.gpu_rows`) and keeps each
point's share; `dse.perf.multiclock.op_rows` takes a share instead of calling the family when its call is
that share's exactly (the same op table, GPU value, clocks, choice clock and coefficients), so every value
is the one its own call gives (each row of a family call is a function of its own inputs; tested). Shares
are kept until the next `prefetch` (one chunk of points) and each is taken once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from dse.hardware.spec import GpuSpec
from dse.perf.gpu_rows import GpuRows, shared_values

# The families whose rows a call takes on several GPUs, and what `op_rows` reads of a call's output.
FAMILIES: tuple[str, ...] = ("gemm", "elementwise", "reduction", "attention_flash", "attention_decode")
_KEPT = ("util", "latency_s", "dram_bytes", "flop")


@dataclass(frozen=True, slots=True)
class FirstPass:
    """What a point's first kernel-model pass runs: its ops at the requested clock `clock_hz` on `gpu`
    with `coeffs` (`dse.serving.static.first_pass`)."""

    ops: Sequence[Any]
    gpu: GpuSpec
    clock_hz: float
    coeffs: Any


@dataclass(frozen=True, slots=True)
class _Share:
    inputs: dict[str, Any]  # a family's inputs of the op table, held: their id keys the share
    gpu: GpuSpec
    fs: np.ndarray
    coeffs: Any
    out: dict[str, np.ndarray]


# (id of a family's inputs, choice clock, id of the coefficients) -> shares of the last prefetch.
_READY: dict[tuple[int, float, int], list[_Share]] = {}


def take_share(inputs: dict[str, Any], gpu: GpuSpec, fs: np.ndarray, coeffs: Any, choice_hz: Any) -> Any:
    """The prefetched output of the family call `inputs` on `gpu` at clocks `fs` with `coeffs`, GEMM
    kernels chosen at `choice_hz` (a float), fresh choices; None when no share is that call."""
    if not _READY or not isinstance(choice_hz, float):
        return None
    shares = _READY.get((id(inputs), choice_hz, id(coeffs)))
    for i, share in enumerate(shares or ()):
        if share.gpu == gpu and np.array_equal(share.fs, fs):
            return shares.pop(i).out  # type: ignore[union-attr]  # shares is a list here
    return None


def prefetch(passes: Sequence[FirstPass]) -> None:
    """Run the rows of `passes` of each family of `FAMILIES` in one call per group of GPUs that one call
    can take (equal `gpu_rows.shared_values`, same coefficients; the same input fields), and keep each
    pass's share for `take_share`; drops earlier shares."""
    from dse.perf.multiclock import families_rows

    _READY.clear()
    groups: dict[tuple[Any, ...], list[FirstPass]] = {}  # passes that one call can take: GpuRows.of's rule
    for fp in passes:
        groups.setdefault((shared_values(fp.gpu), id(fp.coeffs)), []).append(fp)
    for group in (g for g in groups.values() if len(g) > 1):  # a pass alone gains nothing: it calls the model
        rows_of = [families_rows(fp.ops, fp.gpu, fp.clock_hz) for fp in group]
        for key in FAMILIES:
            found = [(fp, *rows[key]) for fp, rows in zip(group, rows_of, strict=True) if key in rows]
            fields = {tuple(inputs) for _, inputs, _ in found}
            if len(found) > 1 and len(fields) == 1:  # stackable: the same input fields (batch norm's)
                _prefetch_group(key, found)


def _prefetch_group(key: str, group: list[tuple[FirstPass, dict[str, Any], np.ndarray]]) -> None:
    from dse.perf.multiclock import _family_call

    inputs = [g[1] for g in group]
    sizes = [len(g[2]) for g in group]
    ends = np.cumsum(sizes)
    base = group[0][0]

    def joined(field: str) -> Any:
        parts = [i[field] for i in inputs]
        return sum(parts, ()) if isinstance(parts[0], tuple) else np.concatenate(parts)

    fs = np.concatenate([g[2] for g in group])
    choice = np.repeat([g[0].clock_hz for g in group], sizes)
    rows = GpuRows(tuple(g[0].gpu for g in group), np.repeat(np.arange(len(group)), sizes))  # one group's
    with np.errstate(divide="ignore", invalid="ignore"):  # as `predict_graphs`' own pass
        out = _family_call(
            key, {field: joined(field) for field in inputs[0]}, base.gpu, fs, base.coeffs, cache_write=False,
            choice_clock_hz=choice, choice_memo={}, gpu_rows=rows,
        )  # fmt: skip
    for (fp, fam_inputs, f), end, size in zip(group, ends.tolist(), sizes, strict=True):
        sl = slice(end - size, end)
        share = {name: np.asarray(out[name])[..., sl] for name in _KEPT}
        at = (id(fam_inputs), fp.clock_hz, id(fp.coeffs))
        _READY.setdefault(at, []).append(_Share(fam_inputs, fp.gpu, f, fp.coeffs, share))

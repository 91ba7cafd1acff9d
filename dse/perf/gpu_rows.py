"""Kernel-model rows on several GPUs in one call: the design points of a search, whose GPUs differ in SM
count, DRAM bandwidth and Tensor-Core rates.

A kernel-model call costs mostly its fixed numpy work, so the first pass of many design points would be
cheaper as one call per family; but no two points of a space with a continuous DRAM data rate share a GPU,
so such a call needs each row's GPU values. `GpuRows` names each row's GPU; the call reads every other
GPU value from its base GPU, so `GpuRows.of` checks that the GPUs agree on them: every module rate of
`dse.perf.rates.rates_at` but the SM count and the DRAM bandwidth (per clock, so at any clock), the clock
range and the dtypes that have Tensor Cores. A `Rates` field added later is compared too.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np

from dse.hardware.spec import GpuSpec
from dse.perf.pipeline import lookup_rows
from dse.perf.rates import Rates, rates_at, tensor_flop_per_clk

# The `Rates` fields that may differ between the GPUs of one call (the rows carry them).
PER_ROW_RATES: tuple[str, ...] = ("num_sms", "dram_bw_bytes_per_s")


def shared_values(gpu: GpuSpec) -> tuple[tuple[str, Any], ...]:
    """What a call over several GPUs reads from its base GPU alone, as (name, value) pairs (hashable: GPUs
    with equal ones can share a call): the module rates per clock (at 1 Hz) but `PER_ROW_RATES`, the clock
    range and the dtypes with Tensor Cores."""
    rates = rates_at(gpu, 1.0)
    out = [
        (f.name, np.asarray(getattr(rates, f.name)).tolist())
        for f in fields(Rates)
        if f.name not in PER_ROW_RATES
    ]
    out.append(("clocks", gpu.clocks))
    out.append(("tensor dtypes", tuple(sorted(d for d, v in gpu.sm.tensor_flop_per_clk.items() if v > 0))))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class GpuRows:
    """Row i of a kernel-model call runs on `gpus[index[i]]`; the GPUs share every value but those the
    rows carry (`of` checks it)."""

    gpus: tuple[GpuSpec, ...]
    index: np.ndarray

    @classmethod
    def of(cls, base: GpuSpec, gpus: Sequence[GpuSpec], index: Sequence[int] | np.ndarray) -> GpuRows:
        """Rows on `gpus` (row i on `gpus[index[i]]`) in a call whose base GPU is `base`. ValueError when
        a GPU differs from `base` in a value the rows do not carry, or an index is out of range."""
        idx = np.asarray(index, dtype=np.intp)
        if idx.ndim != 1 or (idx.size and (idx.min() < 0 or idx.max() >= len(gpus))):
            raise ValueError(f"GPU row index must be a list of integers in [0, {len(gpus) - 1}]")
        want = shared_values(base)
        for gpu in {id(g): g for g in gpus}.values():
            got = shared_values(gpu)
            differ = [name for (name, value), (_, other) in zip(want, got, strict=True) if other != value]
            if differ:
                raise ValueError(
                    f"GPU {gpu.name!r} differs from {base.name!r} in {', '.join(differ)}: one kernel-model "
                    f"call takes GPUs that differ only in SM count, DRAM bandwidth and Tensor-Core rates"
                )
        return cls(tuple(gpus), idx)

    def per_row(self, values: Sequence[float]) -> np.ndarray:
        """Each row's entry of `values` (one per GPU)."""
        return np.asarray(values, dtype=float)[self.index]

    def num_sms(self) -> np.ndarray:
        return self.per_row([g.num_sms for g in self.gpus])

    def dram_bw_bytes_per_s(self) -> np.ndarray:
        return self.per_row([g.memory.bw_bytes_per_s for g in self.gpus])

    def tensor_rate(self, dtype: str) -> np.ndarray:
        """Each row's `rates.tensor_flop_per_clk` of its GPU in one `dtype` (once per GPU)."""
        return self.per_row([tensor_flop_per_clk(g, dtype) for g in self.gpus])

    def tensor_flop_per_clk(self, dtype: Sequence[str]) -> np.ndarray:
        """Each row's `rates.tensor_flop_per_clk` of its GPU for its `dtype[i]` (once per distinct pair)."""
        pairs = list(zip(self.index.tolist(), dtype, strict=True))
        rate = {pair: tensor_flop_per_clk(self.gpus[pair[0]], pair[1]) for pair in set(pairs)}
        return np.array([rate[pair] for pair in pairs], dtype=float)


def tensor_rates(
    gpu: GpuSpec, gpu_rows: GpuRows | None, dtype: Sequence[str]
) -> tuple[dict[str, float], np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
    """Tensor-Core FLOP per clock per SM of `gpu` by distinct dtype (a call has a handful of dtypes and up
    to thousands of rows), each row's (of its own GPU on a call over `gpu_rows`), and then the rows'
    (SM count, DRAM bandwidth) too (None: `gpu`'s)."""
    tc_of = {d: tensor_flop_per_clk(gpu, d) for d in set(dtype)}
    if gpu_rows is None:
        return tc_of, lookup_rows(tc_of, dtype), None
    return tc_of, gpu_rows.tensor_flop_per_clk(dtype), (gpu_rows.num_sms(), gpu_rows.dram_bw_bytes_per_s())


def streaming_rates(gpu_rows: GpuRows | None) -> dict[str, Any]:
    """The per-row machine keywords of `pipeline.streaming_timeline` on a call over `gpu_rows` (the SM
    count and DRAM bandwidth; none on one GPU, whose `pipeline.machine_rates` are every row's)."""
    if gpu_rows is None:
        return {}
    return {"rates_num_sms": gpu_rows.num_sms(), "dram_bw_bytes_per_s": gpu_rows.dram_bw_bytes_per_s()}


def rows_rates(rates: Rates, gpu_rows: GpuRows | None) -> Rates:
    """`rates` (of the call's GPU) with each row's SM count and DRAM bandwidth on a call over `gpu_rows`
    (the attention families read them from their `Rates`)."""
    if gpu_rows is None:
        return rates
    return replace(rates, num_sms=gpu_rows.num_sms(), dram_bw_bytes_per_s=gpu_rows.dram_bw_bytes_per_s())

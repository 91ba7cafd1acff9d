"""The step table of the load model: an engine step's latency and energy over a grid of steps.

Each cell (decode tokens, prompt tokens, KV context) is one step graph (`step_graph`), all predicted in one
vectorized pass of the kernel and power model (`predict_graph_totals`); a step between cells is
interpolated (`StepTable.__call__`).

Power cap: each kernel at the highest clock where its own power fits (`dse.perf.dvfs.capped_rows`, the
rule for a kernel timed in a loop). The GPU's limit acts on its mean power over about a second
(`dse.perf.pass_cap`), tens to hundreds of engine steps, so the physical rule for a serving run is one clock
holding the run's mean at the cap. Not done here: finding that clock costs a step table and a simulation per
clock tried (tried: 4 simulations, ~190 ms instead of ~40 ms for 1,000 requests), and evaluating each step
as its own pass costs more still. The per-kernel rule throttles a prefill-heavy step's GEMMs deeper than
such a run would be.
"""

from __future__ import annotations

import bisect
import functools
import math
from typing import Any

import numpy as np

from dse.hardware.spec import GpuSpec
from dse.perf.coeffs import load_default_coeffs
from dse.perf.dvfs import idle_power_w
from dse.perf.predict import predict_graph_totals
from dse.perf.types import OperatingPoint
from dse.serving.parallel import combine_step, step_comm
from dse.serving.presets import EnginePreset
from dse.serving.steps import pow2_grid, prompt_token_grid, prompts_of
from dse.workload.engine import ENGINES, engine_step_graph
from dse.workload.graph import WorkloadGraph
from dse.workload.llm import LlmArch
from dse.workload.sharding import SINGLE, Parallelism, shard_arch, shard_graph

Cell = tuple[int, int, int]


@functools.lru_cache(maxsize=4096)
def step_graph(
    arch: LlmArch, decodes: int, prefills: int, each: int, context_len: int, precision: str, engine: str,
    sampling: str, kv_dtype: str | None, par: Parallelism = SINGLE,
) -> WorkloadGraph:  # fmt: skip
    """An engine step's graph as one GPU of `par` runs it, cached: it does not depend on the GPU or the
    clock, which a search varies far more often than the workload (graphs are immutable values)."""
    graph = engine_step_graph(
        shard_arch(arch, par), decodes=decodes, prefills=prefills, input_tokens=each,
        context_len=context_len, precision=precision, engine=ENGINES[engine], sampling=sampling,
        kv_dtype=kv_dtype,
    )  # fmt: skip
    return shard_graph(graph, arch, par)


class StepTable:
    """Latency and energy of an engine step, interpolated over a grid evaluated on first use (module
    docstring)."""

    def __init__(
        self,
        arch: LlmArch,
        gpu: GpuSpec,
        point: OperatingPoint,
        coeffs: Any,
        power_coeffs: Any,
        *,
        precision: str,
        preset: EnginePreset,
        kv_dtype: str | None,
        mean_input: int,
        max_decodes: int,
        max_prompt_tokens: int,
        context_range: tuple[int, int],
        par: Parallelism = SINGLE,
    ) -> None:
        self.arch, self.gpu, self.point, self.par = arch, gpu, point, par
        self.coeffs = load_default_coeffs(gpu) if coeffs is None else coeffs
        self.power_coeffs = power_coeffs
        self.precision, self.preset, self.kv_dtype = precision, preset, kv_dtype
        self.mean_input = mean_input
        self.d_grid = np.array(pow2_grid(max(1, max_decodes)), float)
        # One-token prompts too: a prompt-only step of a short chunk still reads every weight.
        p_grid = prompt_token_grid(mean_input, max(1, max_prompt_tokens))
        self.p_grid = np.array(sorted({*p_grid, 1}), float)
        lo, hi = context_range
        self.c_grid = np.unique(np.array([lo, round(math.sqrt(lo * hi)), hi], float))
        self._grids = (self.d_grid.tolist(), self.p_grid.tolist(), self.c_grid.tolist())  # for `_bracket`
        self.cells: dict[Cell, tuple[float, float]] = {}
        self.comm_s: dict[Cell, float] = {}  # communication in each cell's latency
        self.evaluations = 0
        # An uncaptured step lasts at least its layers' host dispatch (the launches run ahead of the GPU
        # and it waits only when they fall behind). Every layer counts under pipeline parallelism too: a
        # step's latency here runs the stages in series (`combine_step`), and a stage's host dispatches its
        # layers only once the previous stage has handed over.
        self.eager_floor_s = preset.eager_layer_host_s * arch.num_layers
        self.idle_w = run_idle_power_w(gpu, point or OperatingPoint())  # host waits and comm gaps draw it

    def _graph(self, a: int, b: int, c: int) -> WorkloadGraph:
        d, p_tokens = int(self.d_grid[a]), int(self.p_grid[b])
        k, each = prompts_of(p_tokens, self.mean_input) if p_tokens else (0, self.mean_input)
        return step_graph(
            self.arch, d, k, each, max(1, int(self.c_grid[c])), self.precision, self.preset.name,
            self.preset.sampling, self.kv_dtype, self.par,
        )  # fmt: skip

    def _evaluate_all(self) -> None:
        """Every cell of the grid in one vectorized pass of the kernel model (`predict_graph_totals`)."""
        keys = [
            (a, b, c)
            for a in range(len(self.d_grid))
            for b in range(len(self.p_grid))
            for c in range(len(self.c_grid))
            if self.d_grid[a] or self.p_grid[b]
        ]
        graphs = [self._graph(*key) for key in keys]
        latency_s, energy_j, _ = predict_graph_totals(
            graphs, self.gpu, self.point, self.coeffs, self.power_coeffs, cap_rule="kernel"
        )
        if not self.par.is_single:
            latency_s, energy_j = self._with_comm(keys, np.asarray(latency_s), np.asarray(energy_j))
        self.cells = {key: (float(t), float(e)) for key, t, e in zip(keys, latency_s, energy_j, strict=True)}
        self.evaluations = len(keys)

    def _with_comm(
        self, keys: list[tuple[int, int, int]], kernel_s: np.ndarray, kernel_j: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Cells' latency and energy per GPU with the collectives and stage hand-offs (`serving.parallel`)."""
        tokens = np.array([self.d_grid[a] + self.p_grid[b] for a, b, _ in keys])
        decode_only = np.array([self.p_grid[b] == 0 for _, b, _ in keys])
        clock_hz = self.point.sm_clock_hz or self.gpu.clocks.sm_clock_default_hz or None
        comm = step_comm(
            self.arch, self.gpu, self.par, tokens=tokens, engine=self.preset.name,
            precision=self.precision, decode_only=decode_only, sm_clock_hz=clock_hz,
        )  # fmt: skip
        self.comm_s = {key: float(t) for key, t in zip(keys, comm.total_s, strict=True)}
        return combine_step(kernel_s, kernel_j, comm, self.par, idle_power_w=self.idle_w)

    def comm_fraction(self, decodes: float) -> float:
        """Share of a decode step's time (`decodes` running, mid context) spent communicating."""
        if not self.cells:
            self._evaluate_all()
        c_mid = float(self.c_grid[len(self.c_grid) // 2])
        total = comm = 0.0
        for a, wa in _bracket(self._grids[0], max(1.0, decodes)):
            for c, wc in _bracket(self._grids[2], c_mid):
                total += wa * wc * self.cells.get((a, 0, c), (0.0, 0.0))[0]
                comm += wa * wc * self.comm_s.get((a, 0, c), 0.0)
        return float(comm / total) if total > 0 else 0.0

    def _cell(self, a: int, b: int, c: int) -> tuple[float, float]:
        if not self.cells:
            self._evaluate_all()
        return self.cells.get((a, b, c), (0.0, 0.0))  # (0, 0): a step of nothing

    def __call__(
        self, decodes: int, prompt_tokens: int, prompts: int, context_len: float
    ) -> tuple[float, float]:
        del prompts  # costed as the fewest equal prompts of the mean length (`prompts_of`)
        if prompt_tokens == 0:
            decodes = self.preset.padded_decodes(decodes)
        lat = en = 0.0
        for a, wa in _bracket(self._grids[0], decodes):
            for b, wb in _bracket(self._grids[1], prompt_tokens):
                for c, wc in _bracket(self._grids[2], context_len):
                    w = wa * wb * wc
                    if w:
                        cell_lat, cell_en = self._cell(a, b, c)
                        lat += w * cell_lat
                        en += w * cell_en
        if lat < self.eager_floor_s and self.preset.launch_mode(decodes, prompt_tokens) == "eager":
            en += (self.eager_floor_s - lat) * self.idle_w
            lat = self.eager_floor_s
        return lat, en


def _bracket(grid: list[float], x: float) -> tuple[tuple[int, float], ...]:
    """Grid indices around `x` with linear weights (clamped to the grid's ends); lists from `StepTable`
    (`bisect` on a short list is several times faster than `np.searchsorted`)."""
    n = len(grid)
    if n == 1 or x <= grid[0]:
        return ((0, 1.0),)
    if x >= grid[-1]:
        return ((n - 1, 1.0),)
    j = bisect.bisect_left(grid, x) - 1
    w = (x - grid[j]) / (grid[j + 1] - grid[j])
    return ((j, 1.0 - w), (j + 1, w))


def run_idle_power_w(gpu: GpuSpec, point: OperatingPoint) -> float:
    """Idle power at the clock the run asks for (default: the GPU's default application clock)."""
    clock_hz = point.sm_clock_hz or gpu.clocks.sm_clock_default_hz or gpu.clocks.sm_clock_max_hz
    return float(idle_power_w(gpu, clock_hz))

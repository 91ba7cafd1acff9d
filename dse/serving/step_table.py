"""The step table of the load model: an engine step's latency and energy over a grid of steps.

Each cell (decode tokens, prompt tokens, KV context) is one step graph (`step_graph`), predicted in one
vectorized pass of the kernel and power model (`dse.perf.graph_parts.predict_graph_parts`): every cell of
the grid on the first call of `StepTable.__call__`, or only the cells a batch of steps needs
(`StepTable.costs`, a closed loop's run; a cell's numbers are the same either way). A step between cells is
interpolated. A decode step padded to a captured CUDA graph costs the padded batch's dense ops and its real
sequences' attention and sampling (`StepTable._corners`): each decode-only cell also keeps those ops' own
latency and energy, which a padded step takes at its real batch.

Power cap (`capped_steps`): each step runs at the highest grid clock at or below the requested one where its
kernels' mean power fits the cap, as a pass of `dse.perf.pass_cap` does: the limiter averages a step's hot
GEMMs with its cooler kernels, so a step whose mean fits runs every kernel at the requested clock. A step
over the cap is evaluated once more, at 0.7x the clock (and lower where its cap lies lower:
CAP_PROBE_FRACTIONS) with the GEMM tiles chosen for the requested clock (a throttled GPU keeps them). Its
latency between two evaluated clocks is a + b / f (exact for compute-bound and DRAM-bound kernels) and each
term of its energy follows its own clock law (`dse.perf.power`), so its mean is known at every grid clock
without more kernel-model calls: within ~1.5% of an exact search per step (`cap_rule="pass"`, which cost
~3x the whole table) at the GPUs' own limits, ~5% on a few large-batch A100 PCIe decode steps and under
caps far below them. The mean is the kernels' own: the communication and host waits of a step (at idle
power) are not in it, which throttles a multi-GPU or host-bound step slightly more than the limiter would.

Which rule, on the serving data (`dse validate serving`, shipped energies): the limiter acts on a mean over
about a second on our H100 (`dse/calibrate/measured`), tens to hundreds of steps, which argues for one clock
per run; that rule left prefill steps unthrottled and read the silicon TTFTs 35.7 -> 38.2% and the ML.ENERGY
H100 power 7.3 -> 9.3%. Each kernel under the cap on its own (the rule before) throttled the GEMMs of
large-batch decode steps that a step's mean does not: B200 decode ran at ~1650 MHz, the large models' chat
rows' power 12% under the ML.ENERGY readings. Each step its own pass reads both sets best (the README's
accuracy section has the figures).
"""

from __future__ import annotations

import bisect
import functools
import math
from typing import Any

import numpy as np

from dse.hardware.spec import GpuSpec
from dse.perf.coeffs import load_default_coeffs
from dse.perf.dvfs import clock_grid_hz, idle_power_w, power_cap_w, requested_clock_hz
from dse.perf.graph_parts import GraphParts, predict_graph_parts
from dse.perf.power import GpuPowerTerms, gpu_power_terms
from dse.perf.types import OperatingPoint
from dse.serving.parallel import StepComm, combine_step, step_comm
from dse.serving.presets import REFERENCE_LAYER_LAUNCHES, EnginePreset
from dse.serving.steps import pow2_grid, prompt_token_grid, prompts_of
from dse.workload.engine import ENGINES, engine_step_graph, is_sampler_op, per_sequence_op
from dse.workload.graph import WorkloadGraph
from dse.workload.llm import ATTENTION_PART_SUFFIXES, LlmArch
from dse.workload.sharding import EXPERT_GEMMS, EXPERT_ROWWISE, SINGLE, Parallelism, shard_arch, shard_graph

Cell = tuple[int, int, int]
# A step over the cap is evaluated again at these fractions of the requested clock (0: the lowest), each
# only where the cap lies below the one before (module docstring): H100 GEMMs in a loop settle at the 700 W
# cap at ~1400 of 1980 MHz (0.7), about as deep as a step's mean needs at a GPU's own limit.
CAP_PROBE_FRACTIONS = (0.7, 0.45, 0.0)
# Steps `StepTable.costs` brackets at a time: a chunk's cell corners take ~1 KB per step in Python objects,
# and a run's first few thousand steps visit nearly every cell it will (later chunks add few passes).
COSTS_CHUNK = 16_384


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


# The routed experts' ops: one launch for an engine that runs them as one op (`EngineProfile.one_call_moe`)
_ROUTED_EXPERT_OPS = frozenset((*EXPERT_GEMMS, *EXPERT_ROWWISE, "experts_combine"))


@functools.lru_cache(maxsize=256)
def layer_launches(arch: LlmArch, engine: str) -> int:
    """Kernel launches of all of `arch`'s decoder layers in one eager step of `engine` (the host dispatches
    each; `dse.serving.presets`): its graph of one 1,024-token prompt (half the context where that is
    shorter) in 16-bit weights on one GPU, without the embedding, head and sampler, which run once per step
    whatever the depth (a dense Llama: 10 a layer). A local attention the probe prices in parts (a window
    shorter than the prompt: `ATTENTION_PART_SUFFIXES`) is one launch."""
    tokens = min(1024, arch.max_position_embeddings // 2)
    graph = step_graph(arch, 0, 1, tokens, tokens, "bf16", engine, "greedy", None)
    calls: dict[str, int] = {}  # kernel call -> the layers that launch it
    one_call_moe = ENGINES[engine].one_call_moe
    for op in graph.ops:
        if "/layer[" in op.name:
            name = next(
                (op.name.removesuffix(s) for s in ATTENTION_PART_SUFFIXES if op.name.endswith(s)), op.name
            )
            block, _, leaf = name.rpartition("/")
            if one_call_moe and leaf in _ROUTED_EXPERT_OPS:
                name = f"{block}/fused_moe"
            calls[name] = max(calls.get(name, 0), op.count)
    return sum(calls.values())


class StepTable:
    """Latency and energy of an engine step, interpolated over a grid of cells evaluated when first needed:
    all of them on the first call, or those a batch of steps needs (`costs`) (module docstring)."""

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
        self.arch, self.gpu, self.point, self.par = arch, gpu, point or OperatingPoint(), par
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
        # (latency, energy) of the ops of each decode-only cell that run on the real sequences only
        # (`_real_rows_graph`): CUDA-graph padding (`_corners`) pads the others alone
        self.real_cells: dict[Cell, tuple[float, float]] = {}
        self.comm_s: dict[Cell, float] = {}  # communication in each cell's latency
        self.evaluations = 0  # cells evaluated so far, over every pass
        self._complete = False  # every cell of the grid evaluated (`_evaluate_all`)
        # An uncaptured step lasts at least its layers' host dispatch (the launches run ahead of the GPU
        # and it waits only when they fall behind). Every layer counts under pipeline parallelism too: a
        # step's latency here runs the stages in series (`combine_step`), and a stage's host dispatches its
        # layers only once the previous stage has handed over.
        self.eager_floor_s = (
            preset.eager_layer_host_s * layer_launches(arch, preset.name) / REFERENCE_LAYER_LAUNCHES
            if preset.eager_layer_host_s
            else 0.0
        )
        self.idle_w = run_idle_power_w(gpu, point or OperatingPoint())  # host waits and comm gaps draw it

    def _graph(self, a: int, b: int, c: int) -> WorkloadGraph:
        d, p_tokens = int(self.d_grid[a]), int(self.p_grid[b])
        k, each = prompts_of(p_tokens, self.mean_input) if p_tokens else (0, self.mean_input)
        return step_graph(
            self.arch, d, k, each, max(1, int(self.c_grid[c])), self.precision, self.preset.name,
            self.preset.sampling, self.kv_dtype, self.par,
        )  # fmt: skip

    def _evaluate_all(self) -> None:
        """Every cell of the grid in one vectorized pass of the kernel model (`capped_steps`): what a
        simulation that needs its steps' costs as it goes (an open loop's arrivals) evaluates first."""
        self._evaluate(
            [
                (a, b, c)
                for a in range(len(self.d_grid))
                for b in range(len(self.p_grid))
                for c in range(len(self.c_grid))
            ]
        )
        self._complete = True

    def _evaluate(self, keys: list[Cell]) -> None:
        """The cells of `keys` not evaluated yet, in one pass. A cell's numbers are its own (each step is
        costed and capped alone), so they do not depend on which cells share the pass."""
        keys = [
            k for k in dict.fromkeys(keys) if k not in self.cells and (self.d_grid[k[0]] or self.p_grid[k[1]])
        ]
        if not keys:
            return
        graphs = [self._graph(*key) for key in keys]
        # The real-row ops of the decode-only cells, in the same pass (no op the steps do not have): priced
        # at the clock the cap gives them alone, the step's own wherever the step fits the cap (decode
        # attention reads the KV cache at the DRAM's pace: a few % off where the step throttles).
        decode_only = [i for i, (_, b, _) in enumerate(keys) if self.p_grid[b] == 0]
        real_graphs = [_real_rows_graph(graphs[i]) for i in decode_only]
        latency_s, energy_j = capped_steps(
            graphs + real_graphs, self.gpu, self.point, self.coeffs, self.power_coeffs
        )
        real_s, real_j = latency_s[len(keys) :], energy_j[len(keys) :]
        latency_s, energy_j = latency_s[: len(keys)], energy_j[: len(keys)]
        if not self.par.is_single:
            latency_s, energy_j = self._with_comm(keys, latency_s, energy_j)
            # a share of the kernels moves as the kernels do: with pp, the waiting stages' idle draw too
            real_s, real_j = combine_step(
                real_s, real_j, _no_comm(len(real_s)), self.par, idle_power_w=self.idle_w
            )
        self.cells.update(
            (key, (float(t), float(e))) for key, t, e in zip(keys, latency_s, energy_j, strict=True)
        )
        self.real_cells.update(
            (keys[i], (float(t), float(e))) for i, t, e in zip(decode_only, real_s, real_j, strict=True)
        )
        self.evaluations += len(keys)

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
        self.comm_s.update((key, float(t)) for key, t in zip(keys, comm.total_s, strict=True))
        return combine_step(kernel_s, kernel_j, comm, self.par, idle_power_w=self.idle_w)

    def comm_fraction(self, decodes: float) -> float:
        """Share of a decode step's time (`decodes` running, mid context) spent communicating."""
        corners = [
            (a, wa * wc, c)
            for a, wa in _bracket(self._grids[0], max(1.0, decodes))
            for c, wc in self._mid_context()
            if wa * wc  # a zero weight adds nothing: its cell need not be evaluated
        ]
        self._evaluate([(a, 0, c) for a, _, c in corners])
        total = comm = 0.0
        for a, w, c in corners:
            total += w * self.cells.get((a, 0, c), (0.0, 0.0))[0]  # (0, 0): the empty step
            comm += w * self.comm_s.get((a, 0, c), 0.0)
        return float(comm / total) if total > 0 else 0.0

    def _mid_context(self) -> tuple[tuple[int, float], ...]:
        return _bracket(self._grids[2], float(self.c_grid[len(self.c_grid) // 2]))

    def __call__(
        self, decodes: int, prompt_tokens: int, prompts: int, context_len: float
    ) -> tuple[float, float]:
        del prompts  # costed as the fewest equal prompts of the mean length (`prompts_of`)
        if not self._complete:
            self._evaluate_all()
        decodes, corners, shift = self._corners(decodes, prompt_tokens, context_len)
        return self._interpolate(decodes, prompt_tokens, corners, shift)

    def costs(self, steps: list[tuple[int, int, int, float]]) -> list[tuple[float, float]]:
        """`self(*step)` of each step, evaluating only the cells these steps need (on several GPUs also the
        decode cells `comm_fraction` reads), in one pass: a run whose steps do not depend on their times (a
        closed loop, an offline run) costs them after it is scheduled. Steps are taken COSTS_CHUNK at a time
        to bound the memory of their corners; a later chunk evaluates only cells no earlier one needed."""
        out: list[tuple[float, float]] = []
        keys: list[Cell] = []
        if not self.par.is_single:  # the decode steps `comm_fraction` reads, in the first pass
            keys = [(a, 0, c) for a in range(len(self.d_grid)) for c, w in self._mid_context() if w]
        for start in range(0, len(steps), COSTS_CHUNK):
            chunk = steps[start : start + COSTS_CHUNK]
            prepared = [self._corners(d, p, ctx) for d, p, _, ctx in chunk]
            self._evaluate(keys + [key for _, corners, shift in prepared for key, _ in corners + shift])
            keys = []
            out += [
                self._interpolate(d, step[1], c, shift)
                for (d, c, shift), step in zip(prepared, chunk, strict=True)
            ]
        return out

    def _corners(
        self, decodes: int, prompt_tokens: int, context_len: float
    ) -> tuple[int, list[tuple[Cell, float]], list[tuple[Cell, float]]]:
        """(decodes as the engine runs them, the cells around the step with their nonzero weights, the
        weights that move its real-row ops from the padded batch to the real one).

        A decode step the engine runs as a captured CUDA graph replays the graph of the smallest captured
        batch that holds it: its dense ops (GEMMs, norms, activations, elementwise) compute every padded
        row, but the padding slots hold no sequence (vLLM and SGLang give them a KV length of 0), so
        attention reads the real sequences' KV cache alone, and the engine samples the real rows alone,
        outside the graph (vLLM's model runner picks them by `logits_indices`, SGLang slices the graph's
        output to the real batch): the step is dense(padded) + real-row ops(real) (`_real_rows_graph`).
        Before, the whole step ran at the padded batch, attention and sampling of the padding slots at the
        mean context included: one client past a graph size (16 -> 17 on an H100, Llama-3.1-8B) raised the
        TPOT 6% at flat throughput."""
        real = decodes
        if prompt_tokens == 0:
            decodes = self.preset.padded_decodes(decodes)
        corners = self._around(decodes, prompt_tokens, context_len)
        if decodes == real:
            return decodes, corners, []
        down = [(key, -w) for key, w in corners]  # prompt_tokens is 0: these are decode-only cells
        return decodes, corners, down + self._around(real, 0, context_len)

    def _around(self, decodes: int, prompt_tokens: int, context_len: float) -> list[tuple[Cell, float]]:
        """The cells around a step with their nonzero (trilinear) weights."""
        corners = [
            ((a, b, c), wa * wb * wc)
            for a, wa in _bracket(self._grids[0], decodes)
            for b, wb in _bracket(self._grids[1], prompt_tokens)
            for c, wc in _bracket(self._grids[2], context_len)
        ]
        return [(key, w) for key, w in corners if w]

    def _interpolate(
        self,
        decodes: int,
        prompt_tokens: int,
        corners: list[tuple[Cell, float]],
        shift: list[tuple[Cell, float]],
    ) -> tuple[float, float]:
        lat = en = 0.0
        for key, w in corners:
            cell_lat, cell_en = self.cells.get(key, (0.0, 0.0))  # (0, 0): a step of nothing
            lat += w * cell_lat
            en += w * cell_en
        for key, w in shift:  # the real-row ops at the real batch, not the padded one (`_corners`)
            real_lat, real_en = self.real_cells.get(key, (0.0, 0.0))
            lat += w * real_lat
            en += w * real_en
        if lat < self.eager_floor_s and self.preset.launch_mode(decodes, prompt_tokens) == "eager":
            en += (self.eager_floor_s - lat) * self.idle_w
            lat = self.eager_floor_s
        return lat, en


def _real_rows_graph(graph: WorkloadGraph) -> WorkloadGraph:
    """The ops of a decode step that a padded CUDA graph runs on its real sequences only (`_corners`): those
    whose work follows the sequences (`per_sequence_op`: attention over each one's KV cache, a linear
    recurrence over its state) and the sampler. The LM head stays with the padded ops (SGLang captures it;
    vLLM computes the real rows' logits, a GEMM of a few rows as fast as of a few more)."""
    ops = tuple(op for op in graph.ops if per_sequence_op(op) or is_sampler_op(op))
    return WorkloadGraph(name=f"{graph.name}/real_rows", ops=ops, meta=graph.meta)


def _no_comm(n: int) -> StepComm:
    """No communication for `n` steps: `combine_step` of a share of the kernels alone."""
    zero = np.zeros(n)
    return StepComm(latency_s=zero, energy_j=zero, handoff_s=zero, handoff_link_j=zero)


def capped_steps(
    graphs: list[WorkloadGraph], gpu: GpuSpec, point: OperatingPoint | None, coeffs: Any, power_coeffs: Any
) -> tuple[np.ndarray, np.ndarray]:
    """(latency_s, energy_j) of each step's kernels, each step at the highest grid clock at or below the
    requested one where its kernels' mean power fits the cap (module docstring): one kernel-model call at
    the requested clock, then one at each CAP_PROBE_FRACTIONS clock for the steps still over the cap at
    every clock above it (usually one). A step over the cap even at the lowest clock runs there."""
    point = point or OperatingPoint()
    f_req, cap_w = requested_clock_hz(gpu, point), power_cap_w(gpu, point)
    at_req = predict_graph_parts(graphs, gpu, f_req, coeffs, power_coeffs)
    latency_s = at_req.latency_s.copy()
    energy_j = sum(at_req.energy_j.values(), np.zeros(len(graphs)))
    over = np.flatnonzero(energy_j > cap_w * latency_s)
    grid = clock_grid_hz(gpu, hi_hz=f_req)
    grid = grid[grid < f_req - 1e-3]
    if not over.size or not grid.size:  # none over, or requested at the bottom: they run there
        return latency_s, energy_j
    terms = gpu_power_terms(gpu)
    # Per step over: its latency at the requested clock and the probes so far ([steps, clocks], descending).
    clocks, lat = [f_req], [latency_s[over]]
    todo = np.arange(over.size)  # steps whose crossing lies below the last probe
    for fraction in CAP_PROBE_FRACTIONS:
        f_probe = float(grid[max(int(np.searchsorted(grid, fraction * f_req, side="right")) - 1, 0)])
        if not todo.size or f_probe >= clocks[-1] - 1e-3:
            break
        steps = [graphs[i] for i in over[todo].tolist()]
        probe = predict_graph_parts(steps, gpu, f_probe, coeffs, power_coeffs)
        column = np.full(over.size, np.nan)  # steps not probed keep their fit above this clock
        column[todo] = probe.latency_s
        clocks.append(f_probe)
        lat.append(column)
        t, e = _over_grid(at_req, over, np.array(clocks), np.stack(lat, axis=1), grid, terms)
        above = grid >= f_probe - 1e-3
        todo = todo[~(e[todo][:, above] <= cap_w * t[todo][:, above]).any(axis=1)]
    t, e = _over_grid(at_req, over, np.array(clocks), np.stack(lat, axis=1), grid, terms)
    fits = e <= cap_w * t
    k = np.where(fits.any(axis=1), grid.size - 1 - np.argmax(fits[:, ::-1], axis=1), 0)
    rows = np.arange(over.size)
    latency_s[over], energy_j[over] = t[rows, k], e[rows, k]
    return latency_s, energy_j


def _over_grid(
    at_req: GraphParts, over: np.ndarray, clocks: np.ndarray, lat: np.ndarray, grid: np.ndarray,
    terms: GpuPowerTerms,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """[steps over, grid clocks] latency and energy of the steps `over`, moved from the requested clock
    (clocks[0]) to each grid clock. Latency: a + b / f through the two evaluated clocks around f (below the
    lowest one a step was evaluated at, the line through its lowest two), exact for a step of compute-bound
    and DRAM-bound kernels. Energy: each term by its own clock law (`dse.perf.power`): idle power x time,
    the active term x f V^2 x time, on-chip module work x V^2, DRAM fixed."""
    # the segment of each grid clock: the evaluated pair just above and below it (NaN: not evaluated there)
    known = np.isfinite(lat)
    last = known.sum(axis=1) - 1  # per step, the index of its lowest evaluated clock (>= 1)
    seg = np.clip(np.searchsorted(-clocks, -grid, side="right") - 1, 0, len(clocks) - 2)
    seg = np.minimum(seg[None, :], last[:, None] - 1)
    rows = np.arange(len(over))[:, None]
    f_hi, f_lo = clocks[seg], clocks[seg + 1]
    t_hi, t_lo = lat[rows, seg], lat[rows, seg + 1]
    b = np.maximum((t_lo - t_hi) / (1.0 / f_lo - 1.0 / f_hi), 0.0)
    a = np.maximum(t_hi - b / f_hi, 0.0)
    f = grid[None, :]
    t = a + b / f
    f_req, t_req = clocks[0], lat[:, :1]
    v2 = terms.v2(f) / terms.v2(np.asarray(f_req))
    part = {k: v[over][:, None] for k, v in at_req.energy_j.items()}
    active = part["active"] * (f / f_req) * v2 * t / np.maximum(t_req, 1e-30)
    e = terms.idle_power_w(f) * t + active + part["dram"] + part["onchip"] * v2
    return t, e


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

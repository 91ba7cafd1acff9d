"""A chosen GEMM candidate's timeline and traffic (`full_result`), from what its evaluation derived.

`dse.perf.gemm` chooses each row's candidate by evaluating every candidate (`_evaluate`, then its score),
and then needs the chosen one's timeline. Every value of an evaluation is elementwise in the row and the
candidate, so a row run at its choice clock gets the same bits from the choice's own evaluation of its
candidate (`KeptScores.inputs`, a gather) as from evaluating that candidate again (`result_inputs`): the
power-cap search's first pass, where every row runs at the requested clock, skips the second evaluation.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.perf.arrays import CandidatePlan, GemmResult, GemmRows, PhaseTimes
from dse.perf.pipeline import MODULE_INDEX, Timeline, empty_busy

# Stream-K: the partial tiles a slot fixes up through the workspace (charged even when tiles divide evenly).
SK_FIX_TILES = 1.0

# What `full_result` reads of an evaluation: (part of the `CandidatePlan`, or "times", field).
_READ: tuple[tuple[str, str], ...] = (
    *(("geo", f) for f in ("grid", "stream_k", "units", "slots", "step_bytes", "mt_avg", "nt_avg")),
    ("traffic", "dram_bytes"),
    ("traffic", "l2_bytes"),
    ("sched", "sk_act"),
    *(
        ("costs", f)
        for f in (
            "out_cta_bytes",
            "fix_bytes",
            "out_dram",
            "red_bytes",
            "red_dram_bytes",
            "smem_rd_bytes",
            "flop_step",
            "math_flop_per_s_per_sm",
            "dequant_flop_step",
        )
    ),  # fmt: skip
    *(("times", f) for f in ("t_pro_s", "t_epi_s", "steps", "load_s", "math_s")),
)


@dataclass(frozen=True, slots=True)
class ResultInputs:
    """The values of an evaluation (`gemm._evaluate`) that `full_result` reads, by `_READ`'s field name."""

    values: dict[str, np.ndarray]


def result_inputs(p: CandidatePlan, t: PhaseTimes) -> ResultInputs:
    """What `full_result` reads of the evaluation `p`, `t`."""
    return ResultInputs(
        {name: getattr(t if part == "times" else getattr(p, part), name) for part, name in _READ}
    )


@dataclass(frozen=True, slots=True)
class KeptScores:
    """The candidate choice's evaluation of problems x candidates: a grid (`pos` None, arrays broadcasting
    to `shape` [problems, scored candidates]; `col_of` each candidate's column, -1 where not scored, None
    for all of them) or the valid pairs only (arrays of `shape` [pairs], `pos` [problems, candidates]
    each pair's position, -1 where not evaluated)."""

    plan: CandidatePlan
    times: PhaseTimes
    shape: tuple[int, ...]
    pos: np.ndarray | None
    col_of: np.ndarray | None

    def inputs(self, problem: np.ndarray, cand: np.ndarray) -> ResultInputs | None:
        """`result_inputs` of problem `problem[i]` at candidate `cand[i]` for each row i, as columns
        [rows, 1] (the shape of a fresh evaluation's); None when one of those pairs was not evaluated."""
        at: tuple[np.ndarray, ...] = (problem, cand)
        if self.pos is not None:
            at = (self.pos[problem, cand],)
        elif self.col_of is not None:
            at = (problem, self.col_of[cand])
        if (at[-1] < 0).any():
            return None

        def take(a: np.ndarray) -> np.ndarray:
            if isinstance(a, np.ndarray) and a.shape == self.shape:
                return a[at][:, None]
            if self.pos is None and np.ndim(a) == 2:  # a grid's [1, C] or [n, 1]: index its other axis alone
                got = a[tuple(ix if size > 1 else 0 for ix, size in zip(at, a.shape, strict=True))]
                if got.ndim:
                    return got[:, None]
            return np.broadcast_to(a, self.shape)[at][:, None]

        return ResultInputs(
            {
                name: take(getattr(self.times if part == "times" else getattr(self.plan, part), name))
                for part, name in _READ
            }
        )


def full_result(r: GemmRows, x: ResultInputs, simt: bool) -> GemmResult:
    """The `Timeline` (with module busy times) and traffic of one chosen candidate per row (the GPU's SM
    count and DRAM bandwidth are the rows')."""
    v = x.values
    sms, bw_dram = r.num_sms, r.dram_bw_bytes_per_s
    l2_tot, smem_sm = r.l2_bw_bytes_per_s, r.smem_bw_per_sm_bytes_per_s
    g, stream_k, units, out_dram = v["grid"], v["stream_k"], v["units"], v["out_dram"]
    red_b, red_dram_b = v["red_bytes"], v["red_dram_bytes"]
    dram_ab, l2_ab = v["dram_bytes"], v["l2_bytes"]
    shape = np.broadcast_shapes(*(np.shape(v[k]) for k in ("t_pro_s", "t_epi_s", "load_s", "steps")))

    def flat(a: np.ndarray | float) -> np.ndarray:
        if isinstance(a, np.ndarray) and a.shape == shape:  # most are: skip broadcast_to's fixed cost
            return a.ravel()
        return np.broadcast_to(a, shape).ravel()

    busy = empty_busy(flat(v["t_pro_s"]).shape[0])
    w_b = g * v["out_cta_bytes"]  # C (or split-K partials)
    fix_total_b = np.where(stream_k, SK_FIX_TILES * v["sk_act"] * v["fix_bytes"], 0.0)  # L2-resident
    smem_total = units * (v["step_bytes"] + v["smem_rd_bytes"])
    busy[1, MODULE_INDEX["dram"]] = flat(dram_ab / bw_dram)
    busy[1, MODULE_INDEX["l2"]] = flat(l2_ab / l2_tot)
    busy[1, MODULE_INDEX["smem"]] = flat(smem_total / (smem_sm * sms))
    busy[1, MODULE_INDEX["cuda" if simt else "tensor"]] = flat(
        units * v["flop_step"] / (v["math_flop_per_s_per_sm"] * sms)
    )
    if not simt:  # the dequantization of weight-only B tiles (zero elsewhere)
        busy[1, MODULE_INDEX["cuda"]] = flat(
            units * v["dequant_flop_step"] / (r.fp32_flop_per_s_per_sm * sms)
        )
    busy[2, MODULE_INDEX["dram"]] = flat((w_b * out_dram + red_dram_b) / bw_dram)
    busy[2, MODULE_INDEX["l2"]] = flat((w_b + red_b + fix_total_b) / l2_tot)
    busy[2, MODULE_INDEX["smem"]] = flat(w_b / (smem_sm * sms))
    busy[2, MODULE_INDEX["cuda"]] = flat(
        g * v["mt_avg"] * v["nt_avg"] * 2.0 / (r.fp32_flop_per_s_per_sm * sms)
    )
    timeline = Timeline(
        t_pro=flat(v["t_pro_s"]),
        t_epi=flat(v["t_epi_s"]),
        main_w=flat(v["steps"])[None, :],
        main_load=flat(v["load_s"])[None, :],
        main_math=flat(v["math_s"])[None, :],
        busy=busy,
        sm_active_frac=flat(np.where(stream_k, 1.0, np.minimum(1.0, g / sms))),
    )
    return GemmResult(
        timeline=timeline,
        dram_bytes=flat(dram_ab + w_b * out_dram + red_dram_b),
        l2_bytes=flat(l2_ab + w_b + red_b + fix_total_b),
        smem_bytes=flat(smem_total + w_b),
        grid=flat(np.where(stream_k, np.minimum(v["slots"], g), g)),
    )

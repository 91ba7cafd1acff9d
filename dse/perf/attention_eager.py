"""Eager attention (backend `eager`): the unfused kernels of PyTorch's SDPA math path, summed.

The batched GEMM S = Q K^T (scores written to DRAM), a softmax over the rows of S (the mask and the
1/sqrt(d) scale fused into it), and the batched GEMM O = P V; with GQA the K/V heads are first repeated
(two elementwise copies). The causal mask does not save work. One estimate per op with the latencies and
traffic summed (`dse.perf.attention.estimate_many` builds them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dse.hardware.spec import GpuSpec
from dse.perf import elementwise, gemm, reduction
from dse.perf.pipeline import float_rows, lookup_rows
from dse.perf.rates import DTYPE_BYTES
from dse.perf.types import CoeffTable


def eager_arrays(
    *,
    batch,
    seq_len_q,
    seq_len_kv,
    num_heads,
    num_kv_heads,
    head_dim,
    dtype: list[str] | tuple[str, ...],
    gpu: GpuSpec,
    sm_clock_hz,
    coeffs: CoeffTable | object | None = None,
    choice_clock_hz: Any = None,
    choice_memo: gemm.ChoiceMemo = None,
) -> dict[str, Any]:
    """Eager attention as its kernels (QK^T GEMM, softmax, PV GEMM, GQA repeat copies), summed.

    `choice_clock_hz` and `choice_memo` reach the two GEMMs as in `gemm.gemm_arrays`, as every other
    GEMM's do."""
    num = np.asarray(batch).shape[0]
    bc = lambda x: float_rows(x, num)  # noqa: E731
    b, sq, skv, h, hkv, d, f = (
        bc(x) for x in (batch, seq_len_q, seq_len_kv, num_heads, num_kv_heads, head_dim, sm_clock_hz)
    )
    act_b = lookup_rows(DTYPE_BYTES, dtype)

    def batched_gemm(m: np.ndarray, n: np.ndarray, k: np.ndarray) -> dict[str, Any]:
        """One GEMM per (sequence, head): the eager QK^T and PV products."""
        no_share = np.zeros(num, dtype=bool)
        return gemm.gemm_arrays(m=m, n=n, k=k, batch=b * h, dtype=dtype, out_dtype=dtype, b_shared=no_share,
                                gpu=gpu, sm_clock_hz=f, coeffs=coeffs, choice_clock_hz=choice_clock_hz,
                                choice_memo=choice_memo)  # fmt: skip

    qk = batched_gemm(sq, skv, d)
    sm = reduction.reduction_arrays(
        kind=np.zeros(num, dtype=int),
        rows=b * h * sq,
        cols=skv,
        dtype_bytes=act_b,
        gpu=gpu,
        sm_clock_hz=f,
        coeffs=coeffs,
    )
    pv = batched_gemm(sq, d, skv)
    rep = elementwise.elementwise_arrays(
        kind=np.full(num, elementwise.KINDS.index("copy")),
        num_elements=b * h * skv * d,
        in_bytes=act_b,
        out_bytes=act_b,
        gpu=gpu,
        sm_clock_hz=f,
        coeffs=coeffs,
    )
    gqa = (hkv < h).astype(float) * 2.0  # repeat K and V
    parts = [(qk, 1.0), (sm, 1.0), (pv, 1.0), (rep, gqa)]
    out: dict[str, Any] = {}
    for key in ("latency_s", "analytical_s", "flop", "dram_bytes", "l2_bytes", "smem_bytes"):
        out[key] = sum(p[key] * w for p, w in parts)
    out["util"] = sum(p["util"] * (p["latency_s"] * w) for p, w in parts) / np.maximum(
        out["latency_s"], 1e-30
    )
    out["parts"] = {"qk": qk, "softmax": sm, "pv": pv, "repeat_kv": rep}
    out["gqa_copies"] = gqa
    return out


def eager_tiles(out: dict[str, Any]) -> list[str]:
    """Kernel names of each row of an `eager_arrays` result: its GEMM tiles and any GQA copies."""
    p = out["parts"]
    return [
        "qk:{} + softmax + pv:{}{}".format(
            gemm.tile_name(p["qk"], i),
            gemm.tile_name(p["pv"], i),
            " + repeat_kv x2" if out["gqa_copies"][i] else "",
        )
        for i in range(len(out["gqa_copies"]))
    ]

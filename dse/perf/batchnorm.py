"""Batch-norm kernels at their library's launch configuration (`ElementwiseOp.bn_layout`).

bf16 batch norm does not take cuDNN's kernels in PyTorch (fp16 and fp32 do): it runs ATen's
(aten/src/ATen/native/cuda/Normalization.cuh, the kernel names in our H100 profile,
`dse/calibrate/measured/h100_sxm_training_kernels.csv`). They load one element per access, not 16-byte
vectors, and their grids follow the channels, so their bandwidth is set by loads in flight (Little's law
in `pipeline.streaming_timeline`), not by the DRAM peak. Facts from that header (PyTorch 2.x):

- channels-last (`flexible_launch_configs`): a block of `x = min(2^floor(log2 C), 32)` channels by
  `y = min(2^floor(log2(rows / 16)), 512 / x)` rows (widened to 512 threads), a grid of `ceil(C / x)` by
  `min(ceil(rows / (16 y)), 128)`; the statistics and backward-reduce kernels drop a grid of fewer than 8
  row blocks to 1. Each thread issues `ELEMENTS_PER_ITER = 4` loads of every input per iteration.
- NCHW: the statistics and the backward (one kernel that reduces x and dy, then writes dx: our graph's
  `bn_bwd_reduce` + `bn_bwd_apply`) run one block per channel, `(t, 512 / t)` threads with `t` the
  power of two >= H*W (32..512); the normalize kernel `(t, max(64 / t, 1))` threads with
  `t = max(pow2(H*W / 4), min(pow2(H*W), 64))`, a grid of C by `min(256K / C, ceil(N / that))`. Each
  thread loops over one element per input at a time (the compiler's unrolling overlaps a few).
- cuDNN's NCHW training kernels (fp16, fp32, TF32): a per-channel grid like ATen's (NOTE in
  `native_launch`).

The loads each thread actually keeps in flight are fitted (`ELEMENTS_IN_FLIGHT`).

Approximations: ATen's NCHW backward is one kernel that the graph lists as two ops (its launch and prologue
counted twice, microseconds); above 2^31 elements ATen's NCHW path switches to a separate reduce kernel
(block from the batch size) not modelled; a network's odd NCHW-strided tensor in a channels-last graph (one
backward reduce in MobileNet-V2 and EfficientNet-B0's profiles) is priced channels-last.

NOTE(perf): resident threads per SM are taken as 1024 (two 512-thread blocks): these kernels' register use
is not published, and a full 2048 would make the channels-last ones DRAM-bound, against the profile (the
statistics kernel read 0.63 TB/s, the others 2.0-2.4 TB/s, on H100).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["ELEMENTS_IN_FLIGHT", "LAYOUTS", "launch_arrays", "native_launch"]

_MAX_BLOCK = 512
_ELEMENTS_PER_THREAD = 16
_TILE_W = 32
_MAX_H_BLOCK = 128
_RESIDENT_THREADS = 1024
_INPUTS = {"bn_stats": 1, "bn_apply": 1, "bn_bwd_reduce": 2, "bn_bwd_apply": 2}
_COOP = ("bn_stats", "bn_bwd_reduce")  # grid reductions
# Elements of each input in flight per thread (Little's law), fitted: the kernels' time per ResNet-50 step
# in our H100 profile (`h100_sxm_training_kernels.csv`, bf16, batch 256) at 1024 resident threads per SM.
# Held out: the same kernels in ResNet-18, ResNet-152, MobileNet-V2 and EfficientNet-B0 (channels-last)
# and ResNet-18 (NCHW), `tests/perf/test_batchnorm.py`. The pattern is the structure's: the reductions
# (Welford statistics, the backward's sums) carry a dependency chain through their loop and keep 1.3-2.3
# elements in flight; the normalize passes, with independent iterations, 3-5 (ELEMENTS_PER_ITER = 4
# channels-last).
ELEMENTS_IN_FLIGHT: dict[tuple[str, str], float] = {
    ("nhwc", "bn_stats"): 1.4,
    ("nhwc", "bn_apply"): 4.9,
    ("nhwc", "bn_bwd_reduce"): 2.3,
    ("nhwc", "bn_bwd_apply"): 2.8,
    ("nchw", "bn_stats"): 1.3,
    ("nchw", "bn_apply"): 3.1,
    ("nchw", "bn_bwd_reduce"): 1.45,  # one kernel reduces and then writes dx: one fitted value for both
    ("nchw", "bn_bwd_apply"): 1.45,
    # cuDNN's NCHW kernels (fp16, fp32, TF32), one fitted value per direction: ResNet-50 fp16 NCHW
    ("cudnn-nchw", "bn_stats"): 4.3,
    ("cudnn-nchw", "bn_apply"): 4.3,
    ("cudnn-nchw", "bn_bwd_reduce"): 2.0,
    ("cudnn-nchw", "bn_bwd_apply"): 2.0,
}
LAYOUTS = ("nhwc", "nchw", "cudnn-nchw")


def _pow2_floor(x: np.ndarray) -> np.ndarray:
    return np.exp2(np.floor(np.log2(np.maximum(x, 1.0))))


def _threads_for(n: np.ndarray) -> np.ndarray:
    """ATen's getNumThreads: the smallest of 32, 64, 128, 256, 512 holding n (512 above)."""
    return np.clip(np.exp2(np.ceil(np.log2(np.maximum(n, 1.0)))), 32.0, float(_MAX_BLOCK))


def _channels_last(kind: str, rows: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    bx = np.minimum(_pow2_floor(c), _TILE_W)
    by = np.minimum(_pow2_floor(np.ceil(rows / _ELEMENTS_PER_THREAD)), _MAX_BLOCK / bx)
    bx = np.where(bx * by != _MAX_BLOCK, np.minimum(_pow2_floor(c), _MAX_BLOCK / by), bx)
    gy = np.minimum(np.ceil(rows / (by * _ELEMENTS_PER_THREAD)), _MAX_H_BLOCK)
    if kind in _COOP:
        gy = np.where(gy < 8, 1.0, gy)
    return np.ceil(c / bx) * gy, bx * by


def _nchw(kind: str, n: np.ndarray, hw: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if kind == "bn_apply":
        tf = np.maximum(_threads_for(np.floor(hw / 4)), np.minimum(_threads_for(hw), 64.0))
        tb = np.maximum(np.floor(64.0 / tf), 1.0)
        gy = np.clip(np.minimum(np.floor(256 * 1024 / c), np.ceil(n / tb)), 1.0, 65535.0)
        return c * gy, tf * tb
    tf = _threads_for(hw)
    return c.astype(float), tf * np.maximum(np.floor(_MAX_BLOCK / tf), 1.0)


def native_launch(
    kind: str,
    layout: str,
    batch: np.ndarray,
    channels: np.ndarray,
    num_elements: np.ndarray,
    elem_bytes: np.ndarray | float,
) -> dict[str, np.ndarray]:
    """Grid, threads per block, resident blocks per SM and bytes in flight per thread of the `kind`
    kernel (one of bn_stats, bn_apply, bn_bwd_reduce, bn_bwd_apply) over `[batch, H*W, channels]` of
    elements of `elem_bytes` (per row)."""
    n, c = np.asarray(batch, dtype=float), np.asarray(channels, dtype=float)
    hw = np.asarray(num_elements, dtype=float) / (n * c)
    if layout == "nhwc":
        grid, threads = _channels_last(kind, n * hw, c)
    elif layout == "nchw":
        grid, threads = _nchw(kind, n, hw, c)
    else:
        # NOTE(perf): cuDNN's NCHW kernels (`bn_fw_tr_1C11`, `bn_bw_1C11`: one channel's scale and bias) are
        # taken as one 512-thread block per channel like ATen's; their launch is not published (the
        # profile's template arguments, 32 to 512, hint at other block sizes): the fitted values absorb it.
        grid, threads = _nchw("bn_stats", n, hw, c)
    per_thread = ELEMENTS_IN_FLIGHT[(layout, kind)] * _INPUTS[kind] * np.asarray(elem_bytes, dtype=float)
    return {
        "grid": grid,
        "threads": threads,
        "conc": np.maximum(np.floor(_RESIDENT_THREADS / threads), 1.0),
        "in_flight_b": np.broadcast_to(per_thread, grid.shape).astype(float),
    }


def launch_arrays(
    kinds: Sequence[str],
    layouts: Sequence[str],
    batch: Any,
    channels: Any,
    num_elements: np.ndarray,
    elem_bytes: np.ndarray,
) -> dict[str, np.ndarray]:
    """`native_launch` per row (grid, threads, conc, in_flight_b), NaN for rows with no layout ("")."""
    num = len(kinds)
    b, c = np.asarray(batch, dtype=float), np.asarray(channels, dtype=float)
    if not len(layouts) == b.size == c.size == num:
        raise ValueError("bn_layout, bn_batch and bn_channels need one entry per op")
    out = {key: np.full(num, np.nan) for key in ("grid", "threads", "conc", "in_flight_b")}
    for layout in set(layouts) - {""}:
        for kind in set(kinds):
            rows = np.array([lay == layout and k == kind for lay, k in zip(layouts, kinds, strict=True)])
            if rows.any():
                launch = native_launch(kind, layout, b[rows], c[rows], num_elements[rows], elem_bytes[rows])
                for key, values in launch.items():
                    out[key][rows] = values
    return out

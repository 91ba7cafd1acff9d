"""Depthwise convolution kernels (MobileNet-V2, EfficientNet): forward, data and weight gradient.

A depthwise convolution has one R x S filter per channel: 2 R S FLOP per output and no reuse for the
tensor cores, so its kernels are CUDA-core streams (`dse.workload.vision`: one op of (I + O) / 2 elements
for I input and O output elements). Which library runs it is PyTorch's choice (`dse.workload.vision`,
`_Builder.cudnn_depthwise`): cuDNN for channels-last, PyTorch's own kernels (`_aten` kinds) for most NCHW
layers. Our H100 profile (cuDNN 9.19, `dse/calibrate/measured/h100_sxm_training_kernels.csv`) names
cuDNN's three: `conv2d_c1_k1_nhwc_specialized`, `dgrad2d_c1_k1_nhwc_specialized` and `wgrad2d_c1_k1_nhwc`
(+ `_reduce` and `wgrad2d_grouped_direct`, the filters' partial sums). None reaches the DRAM peak: over
the I + O bytes each moves, EfficientNet-B0 / MobileNet-V2 (bf16, batch 256) ran 1.60 / 2.18 TB/s
forward, 0.67 / 0.95 data gradient and 1.21 / 1.56 weight gradient, against 2.7-3.0 TB/s for PyTorch's
vectorized elementwise kernels in the same profile. They are latency-bound: each output waits on R x S
tap loads and FMAs (the data gradient of a strided layer gathers dy through a divisibility test per tap),
so a thread keeps few bytes in flight. They are priced as streams at the elementwise launch (128-thread
blocks, full occupancy) whose threads keep `BYTES_IN_FLIGHT` bytes of loads in flight (Little's law in
`pipeline.streaming_timeline`), per kernel: on the same bytes the data gradient takes 2.3-2.4x the
forward's time in both networks and the weight gradient 1.3-1.4x (`tests/perf/test_depthwise.py`). On a
GPU with fewer resident threads per byte of DRAM bandwidth (GDDR parts) the DRAM peak binds first.

NOTE(perf): PyTorch's own NCHW kernels (aten/src/ATen/native/cuda/DepthwiseConv2d.cu) are not in our
profile: their forward and data gradient take cuDNN's values, their weight gradient re-reads x and dy once
per tap (`dse.workload.backward`). Older cuDNN differs: timm's RTX 3090 channels-last rows (PyTorch 1.12,
cuDNN 8.3) train MobileNet-V2 and EfficientNet-B0 15-17% slower than these values predict.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["BYTES_IN_FLIGHT", "DIRECTIONS", "in_flight_bytes", "is_depthwise"]

DIRECTIONS = ("", "_dgrad", "_wgrad")
# Bytes of loads each thread keeps in flight per kernel (filter size, direction), fitted on the summed
# kernel time per step in our H100 profile: 3x3 on MobileNet-V2's (3x3 only), 5x5 on what EfficientNet-B0's
# 3x3 layers at those values leave of its time. A 5x5 kernel keeps about half a 3x3's in flight (its 25
# taps per output against 9). Six values from six sums: an exact fit, no depthwise kernel held out (the
# whole steps of EfficientNet-B4 and of other GPUs are, `dse validate training`). The streaming
# elementwise kernels keep 64 (4 x 16-byte vectors).
BYTES_IN_FLIGHT: dict[str, float] = {
    "depthwise3x3": 4.9,
    "depthwise3x3_dgrad": 2.13,
    "depthwise3x3_wgrad": 3.5,
    "depthwise5x5": 2.4,
    "depthwise5x5_dgrad": 0.98,
    "depthwise5x5_wgrad": 1.93,
}


def is_depthwise(kind: str) -> bool:
    return kind.startswith("depthwise")


def in_flight_bytes(kinds: Sequence[str]) -> np.ndarray:
    """Bytes in flight per thread of each depthwise kind in `kinds` (`BYTES_IN_FLIGHT`; PyTorch's own
    kernels, `_aten`, at cuDNN's values: module docstring), NaN for others."""
    return np.array([BYTES_IN_FLIGHT[k.replace("_aten", "")] if is_depthwise(k) else np.nan for k in kinds])

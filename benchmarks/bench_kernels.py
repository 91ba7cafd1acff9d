"""Kernel estimates per second, vectorized, on one core.

    .venv/bin/python benchmarks/bench_kernels.py [--n 100000] [--repeat 3]

Times the family array functions (`gemm_arrays`, `flash_arrays`, `decode_arrays`, `reduction_arrays`,
`elementwise_arrays`) on N random shapes each, at random SM clocks, with the shipped H100 coefficients,
and the object path `estimate_ops` (which also builds one `KernelEstimate` per op) on a smaller mix.
BLAS / OpenMP threads are pinned to 1 before numpy is imported.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from dse.hardware.catalog import load_gpu  # noqa: E402
from dse.perf import attention, elementwise, gemm, reduction  # noqa: E402
from dse.perf.coeffs import load_default_coeffs  # noqa: E402
from dse.perf.registry import estimate_ops  # noqa: E402
from dse.perf.types import OperatingPoint  # noqa: E402
from dse.workload.ops import AttentionOp, ElementwiseOp, GemmOp, NormOp, SoftmaxOp  # noqa: E402


def _log_int(rng, lo, hi, n):
    return np.round(np.exp(rng.uniform(np.log(lo), np.log(hi), n)))


def _families(n: int, gpu, coeffs, rng):
    clocks = rng.uniform(0.5, 1.0, n) * gpu.clocks.sm_clock_max_hz
    dt = rng.choice(["bf16", "fp8"], n).tolist()
    return {
        "gemm": lambda: gemm.gemm_arrays(
            m=_log_int(rng, 1, 16384, n),
            n=_log_int(rng, 64, 32768, n),
            k=_log_int(rng, 64, 32768, n),
            batch=np.ones(n),
            dtype=dt,
            out_dtype=["bf16"] * n,
            b_shared=np.zeros(n, bool),
            gpu=gpu,
            sm_clock_hz=clocks,
            coeffs=coeffs,
        ),
        "attention_flash": lambda: attention.flash_arrays(
            batch=_log_int(rng, 1, 64, n),
            seq_len_q=(s := _log_int(rng, 16, 16384, n)),
            seq_len_kv=s,
            num_heads=np.full(n, 32.0),
            num_kv_heads=np.full(n, 8.0),
            head_dim=np.full(n, 128.0),
            causal=np.ones(n, bool),
            act_bytes=np.full(n, 2.0),
            kv_bytes=np.full(n, 2.0),
            gpu=gpu,
            sm_clock_hz=clocks,
            coeffs=coeffs,
        ),
        "attention_decode": lambda: attention.decode_arrays(
            batch=_log_int(rng, 1, 512, n),
            seq_len_q=np.ones(n),
            seq_len_kv=_log_int(rng, 16, 131072, n),
            num_heads=np.full(n, 32.0),
            num_kv_heads=np.full(n, 8.0),
            head_dim=np.full(n, 128.0),
            act_bytes=np.full(n, 2.0),
            kv_bytes=np.full(n, 2.0),
            gpu=gpu,
            sm_clock_hz=clocks,
            coeffs=coeffs,
        ),
        "softmax_norm": lambda: reduction.reduction_arrays(
            kind=rng.integers(0, 3, n),
            rows=_log_int(rng, 1, 65536, n),
            cols=_log_int(rng, 32, 65536, n),
            dtype_bytes=np.full(n, 2.0),
            gpu=gpu,
            sm_clock_hz=clocks,
            coeffs=coeffs,
        ),
        "elementwise": lambda: elementwise.elementwise_arrays(
            kind=rng.integers(0, len(elementwise.KINDS), n),
            num_elements=_log_int(rng, 1e3, 1e9, n),
            in_bytes=np.full(n, 2.0),
            out_bytes=np.full(n, 2.0),
            gpu=gpu,
            sm_clock_hz=clocks,
            coeffs=coeffs,
        ),
    }


def _ops(n: int, rng) -> list:
    ops: list = []
    for i in range(n):
        r = i % 5
        if r == 0:
            ops.append(GemmOp(name="g", m=int(_log_int(rng, 1, 8192, 1)[0]), n=4096, k=4096))
        elif r == 1:
            ops.append(
                AttentionOp(
                    name="a",
                    batch=8,
                    num_heads=32,
                    num_kv_heads=8,
                    head_dim=128,
                    seq_len_q=1,
                    seq_len_kv=int(_log_int(rng, 16, 32768, 1)[0]),
                    backend="decode",
                )
            )
        elif r == 2:
            ops.append(SoftmaxOp(name="s", rows=4096, cols=int(_log_int(rng, 32, 32768, 1)[0])))
        elif r == 3:
            ops.append(NormOp(name="n", rows=int(_log_int(rng, 1, 8192, 1)[0]), cols=4096, kind="rmsnorm"))
        else:
            ops.append(
                ElementwiseOp(name="e", kind="silu_mul", num_elements=int(_log_int(rng, 1e3, 1e8, 1)[0]))
            )
    return ops


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="shapes per family")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    gpu = load_gpu("h100-sxm")
    coeffs = load_default_coeffs(gpu)
    rng = np.random.default_rng(0)
    total_n, total_s = 0, 0.0
    print(f"{'family':<18} {'N':>8} {'best s':>8} {'estimates/s':>12}")
    for name, fn in _families(args.n, gpu, coeffs, rng).items():
        fn()  # warm-up
        best = min(_timed(fn) for _ in range(args.repeat))
        total_n += args.n
        total_s += best
        print(f"{name:<18} {args.n:>8} {best:>8.3f} {args.n / best:>12,.0f}")
    print(f"{'all families':<18} {total_n:>8} {total_s:>8.3f} {total_n / total_s:>12,.0f}")
    ops = _ops(10_000, rng)
    best = min(_timed(lambda: estimate_ops(ops, gpu, OperatingPoint(), coeffs)) for _ in range(args.repeat))
    print(
        f"{'estimate_ops':<18} {len(ops):>8} {best:>8.3f} {len(ops) / best:>12,.0f}  (KernelEstimate objects)"
    )


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


if __name__ == "__main__":
    main()

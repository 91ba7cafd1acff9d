"""A short kernel power sweep with dse's own NVML harness, at the GPU's own clocks (nothing locked).

Thirty-odd ops that carry most of an LLM's time and power: bf16 GEMMs of Llama-3.1-8B's projections from a
decode batch (M=16) to long prefills, fp8 GEMMs, memory-bound elementwise and norm kernels, flash
prefill and decode attention. The protocol is shortened to fit a lent GPU's minutes (0.5 s warm-up,
2-3 windows of >= 1 s read on the energy counter), which the default `dse measure kernels` protocol
(1 s warm-up, 3 windows) would take twice as long for.

    python benchmarks/device/kernel_power.py --out $OUT/kernels_h100.csv
    python benchmarks/device/kernel_power.py --out /tmp/k.csv --dry-run     # no GPU: synthetic samples
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from dse.calibrate.data.samples import KernelSample, write_samples
from dse.measure.harness import MeasureProtocol, measure_ops
from dse.measure.suites import GEMM_NK
from dse.workload.ops import AttentionOp, ElementwiseOp, GemmOp, NormOp, Op

PROTOCOL = MeasureProtocol(
    warmup_s=0.5, window_s=1.0, repeats=2, max_repeats=3, cooldown_s=0.25, jitter_s=0.05, settle_s=0.0
)


def ops() -> list[Op]:
    out: list[Op] = []
    for m in (16, 1024, 4096, 16384):
        for n, k in GEMM_NK:
            out.append(GemmOp(name=f"gemm_bf16_{m}x{n}x{k}", m=m, n=n, k=k, b_shared=True))
    for m in (4096, 16384):
        for n, k in ((4096, 4096), (28672, 4096), (8192, 8192)):
            out.append(
                GemmOp(
                    name=f"gemm_fp8_{m}x{n}x{k}", m=m, n=n, k=k, dtype="fp8", out_dtype="bf16", b_shared=True
                )
            )
    for kind in ("copy", "add", "silu_mul"):
        out.append(ElementwiseOp(name=f"{kind}_bf16_{2**27}", kind=kind, num_elements=2**27))
    out.append(NormOp(name="rmsnorm_bf16_65536x4096", rows=65536, cols=4096, kind="rmsnorm"))
    out.append(
        AttentionOp(
            name="attn_flash_prefill_b4_s2048_h32_kv8_d128",
            batch=4,
            num_heads=32,
            num_kv_heads=8,
            head_dim=128,
            seq_len_q=2048,
            seq_len_kv=2048,
        )
    )
    out.append(
        AttentionOp(
            name="attn_decode_decode_b128_ctx1024_h32_kv8_d128",
            batch=128,
            num_heads=32,
            num_kv_heads=8,
            head_dim=128,
            seq_len_q=1,
            seq_len_kv=1025,
            backend="decode",
        )
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    samples: list[KernelSample] = []

    def keep(sample: KernelSample) -> None:  # write after every op: a cut-short run keeps its samples
        samples.append(sample)
        write_samples(args.out, samples)
        print(f"{sample.name:48s} {sample.latency_s * 1e6:10.1f} us {sample.avg_power_w:6.1f} W", flush=True)

    if args.dry_run:
        from dse.measure.cli_commands import _dry_run_gpu

        gpu, label, _ = _dry_run_gpu(None, None)
        measure_ops(ops(), [None], PROTOCOL, gpu, gpu.launcher(), gpu_label=label, on_sample=keep)
        return
    from dse.hardware.catalog import catalog_gpu_name
    from dse.measure.cli_commands import _open_gpu_and_torch, _write_env
    from dse.measure.kernels import TorchLauncher

    gpu = _open_gpu_and_torch(0)
    try:
        label = catalog_gpu_name(gpu.name) or gpu.name
        measure_ops(
            ops(),
            [None],
            PROTOCOL,
            gpu,
            TorchLauncher(0),
            gpu_label=label,
            source="dse-device",
            on_sample=keep,
        )
    finally:
        if samples:
            _write_env(args.out.with_name(args.out.name + ".env.json"), gpu, {"protocol": repr(PROTOCOL)})
        gpu.close()


if __name__ == "__main__":
    main()

"""Training steps (and vision forward passes) on a real GPU, at its own clocks, for `dse validate training`.

Each shape is one model at one batch: torchvision CNNs and ViT-B/16 on random 224 px images (380 px for
EfficientNet-B4) with random labels, SGD with momentum; GPT-2 language models built from configs with
AdamW on random tokens. Everything is plain eager PyTorch as a user writes it: `torch.autocast(bf16)` over
fp32 master weights for "bf16" (`torch.autocast(float16)` for "fp16", without a GradScaler), no autocast
for "fp32" (PyTorch's defaults then: TF32 convolutions in cuDNN, FP32 matmuls), `cudnn.benchmark` on,
data already on the GPU (no input pipeline), PyTorch SDPA for the language models' attention. Nothing is
downloaded; weights are random.

Per shape: >= 0.5 s and 3 steps of warm-up (cuDNN's algorithm search), then a window of >= `window_s`:
wall time per step, energy per step from the NVML total-energy counter, a 50 ms poll of power, SM clock
and temperature, CUDA events around forward (with the loss), backward and the optimizer step, and the
peak allocated and reserved memory. Rows are appended to `<out>/training_steps.csv` as they are measured,
so a run cut short keeps what it measured.

    python benchmarks/device/training_steps.py --out $OUT --budget-s 200
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from whole_models import Poller, energy_j  # noqa: E402  (the same NVML poll and counter)

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# (mode, model, precision, batch, image size or sequence length, memory format); the budget cuts the tail.
SHAPES: tuple[tuple[str, str, str, int, int, str], ...] = (
    ("train", "resnet-50", "bf16", 256, 224, "channels_last"),
    ("train", "resnet-50", "bf16", 256, 224, "contiguous"),
    ("train", "resnet-50", "fp32", 256, 224, "channels_last"),
    ("train", "gpt2", "bf16", 16, 1024, ""),
    ("train", "mpt-1b", "bf16", 8, 2048, ""),
    ("train", "vit-b-16", "bf16", 128, 224, ""),
    ("train", "resnet-18", "bf16", 256, 224, "channels_last"),
    ("train", "mobilenet-v2", "bf16", 256, 224, "channels_last"),
    ("train", "efficientnet-b0", "bf16", 256, 224, "channels_last"),
    ("train", "vgg-16", "bf16", 128, 224, "channels_last"),
    ("train", "resnet-152", "bf16", 128, 224, "channels_last"),
    ("train", "efficientnet-b4", "bf16", 64, 380, "channels_last"),
    ("train", "mpt-350m", "bf16", 16, 2048, ""),
    ("infer", "resnet-50", "bf16", 256, 224, "channels_last"),
    ("infer", "vit-b-16", "bf16", 128, 224, ""),
    ("infer", "efficientnet-b0", "bf16", 256, 224, "channels_last"),
    ("infer", "resnet-50", "fp32", 256, 224, "channels_last"),
)
TORCHVISION = {
    "resnet-18": "resnet18",
    "resnet-50": "resnet50",
    "resnet-152": "resnet152",
    "mobilenet-v2": "mobilenet_v2",
    "efficientnet-b0": "efficientnet_b0",
    "efficientnet-b4": "efficientnet_b4",
    "vgg-16": "vgg16",
    "vit-b-16": "vit_b_16",
}
# GPT-2 architecture (LayerNorm, GELU MLP of 4d, learned positions) at MPT's widths (llm-foundry's
# mpt-350m/mpt-1b: vocabulary 50368), standing in for MPT, whose HF port has no SDPA attention.
LMS = {
    "gpt2": {"n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257},
    "mpt-350m": {"n_embd": 1024, "n_layer": 24, "n_head": 16, "vocab_size": 50368},
    "mpt-1b": {"n_embd": 2048, "n_layer": 24, "n_head": 16, "vocab_size": 50368},
}
FIELDS = (
    "gpu", "mode", "model", "precision", "batch", "image_size", "seq_len", "memory_format", "optimizer",
    "iterations", "step_time_ms", "energy_j", "avg_power_w", "poll_avg_power_w", "avg_sm_clock_mhz",
    "min_sm_clock_mhz", "avg_temp_c", "forward_ms", "backward_ms", "optimizer_ms", "peak_allocated_bytes",
    "peak_reserved_bytes",
)  # fmt: skip


def build(torch: Any, model: str, size: int, layers: int | None) -> tuple[Any, str]:
    """(module, kind) with kind 'image' or 'tokens'; `layers` shrinks the language models (CPU smoke test)."""
    if model in LMS:
        import transformers as tf

        dims = dict(LMS[model])
        if layers:
            dims["n_layer"] = layers
        config = tf.GPT2Config(n_positions=size, **dims)
        config._attn_implementation = "sdpa"
        return tf.GPT2LMHeadModel(config), "tokens"
    import torchvision

    kwargs: dict[str, Any] = {"weights": None}
    if model.startswith("vit"):
        kwargs["image_size"] = size
    return getattr(torchvision.models, TORCHVISION[model])(**kwargs), "image"


def make_step(torch: Any, net: Any, kind: str, shape: tuple[Any, ...], device: Any, events: list[Any]) -> Any:
    """One training step (or forward pass) closure; records CUDA events at its phase boundaries."""
    mode, model, precision, batch, size, fmt = shape
    gen = torch.Generator(device=device).manual_seed(batch * 7919 + size)
    if kind == "tokens":
        x = torch.randint(0, net.config.vocab_size, (batch, size), device=device, generator=gen)
        y = None
    else:
        x = torch.randn(batch, 3, size, size, device=device, generator=gen)
        if fmt == "channels_last":
            x = x.contiguous(memory_format=torch.channels_last)
        y = torch.randint(0, 1000, (batch,), device=device, generator=gen)
    if mode == "train":
        if kind == "tokens":
            opt = torch.optim.AdamW(net.parameters(), lr=1e-4, weight_decay=0.1)
        else:
            opt = torch.optim.SGD(net.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    amp = precision in ("bf16", "fp16")
    amp_dtype = torch.float16 if precision == "fp16" else torch.bfloat16
    cuda = device.type == "cuda"

    def mark() -> None:
        if cuda:
            ev = torch.cuda.Event(enable_timing=True)
            ev.record()
            events.append(ev)

    def step() -> None:
        mark()
        if mode == "infer":
            with torch.inference_mode(), torch.autocast(device.type, amp_dtype, enabled=amp):
                net(x)
            mark()
            return
        with torch.autocast(device.type, amp_dtype, enabled=amp):
            loss = net(input_ids=x, labels=x).loss if kind == "tokens" else loss_fn(net(x), y)
        mark()
        loss.backward()
        mark()
        opt.step()
        opt.zero_grad(set_to_none=True)
        mark()

    return step


def phases_ms(events: list[Any], per_step: int) -> list[float]:
    """Mean milliseconds between consecutive marks of each step, per phase."""
    n = len(events) // per_step
    sums = [0.0] * (per_step - 1)
    for i in range(n):
        evs = events[i * per_step : (i + 1) * per_step]
        for k in range(per_step - 1):
            sums[k] += evs[k].elapsed_time(evs[k + 1])
    return [s / max(n, 1) for s in sums]


def measure(
    torch: Any, step: Any, events: list[Any], per_step: int, nv: Any, h: Any, window_s: float
) -> dict:
    cuda = torch.cuda.is_available()
    sync = torch.cuda.synchronize if cuda else (lambda: None)
    t_end, warm = time.perf_counter() + 0.5, 0
    while warm < 3 or time.perf_counter() < t_end:
        step()
        sync()
        warm += 1
    events.clear()
    t0 = time.perf_counter()
    step()
    sync()
    iterations = max(3, math.ceil(window_s / max(time.perf_counter() - t0, 1e-6)))
    events.clear()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    with Poller(nv, h) if h is not None else _Null() as poller:
        e0, t0 = energy_j(nv, h), time.perf_counter()
        for _ in range(iterations):
            step()
        sync()
        t1, e1 = time.perf_counter(), energy_j(nv, h)
    power, clock, min_clock, temp = poller.means() if h is not None else (math.nan,) * 4
    phases = phases_ms(events, per_step) if cuda else [math.nan] * (per_step - 1)
    phases += [0.0] * (3 - len(phases))
    return {
        "iterations": iterations,
        "step_time_ms": (t1 - t0) / iterations * 1e3,
        "energy_j": (e1 - e0) / iterations,
        "avg_power_w": (e1 - e0) / (t1 - t0),
        "poll_avg_power_w": power,
        "avg_sm_clock_mhz": clock,
        "min_sm_clock_mhz": min_clock,
        "avg_temp_c": temp,
        "forward_ms": phases[0],
        "backward_ms": phases[1],
        "optimizer_ms": phases[2],
        "peak_allocated_bytes": torch.cuda.max_memory_allocated() if cuda else 0,
        "peak_reserved_bytes": torch.cuda.max_memory_reserved() if cuda else 0,
    }


def parse_shapes(text: str) -> list[tuple[str, str, str, int, int, str]]:
    """`--shapes` entries, e.g. `train:resnet-50:fp16:256:224:channels_last`."""
    out = []
    for entry in text.split(","):
        mode, model, precision, batch, size, fmt = entry.split(":")
        out.append((mode, model, precision, int(batch), int(size), fmt))
    return out


def profile_kernels(torch: Any, step: Any, events: list[Any], shape: tuple[Any, ...], path: Path) -> None:
    """Appends one row per kernel name: calls and GPU microseconds per step, over 3 profiled steps."""
    from torch.profiler import ProfilerActivity, profile

    steps, cuda = 3, torch.cuda.is_available()
    kind = "CUDA" if cuda else "CPU"  # CPU ops stand in for kernels in a smoke test
    with profile(activities=[ProfilerActivity.CUDA if cuda else ProfilerActivity.CPU]) as prof:
        for _ in range(steps):
            step()
        if cuda:
            torch.cuda.synchronize()
    events.clear()
    totals: dict[str, list[float]] = {}
    for evt in prof.events():
        if str(getattr(evt, "device_type", "")).endswith(kind):
            entry = totals.setdefault(evt.name, [0.0, 0.0])
            entry[0] += 1
            entry[1] += evt.time_range.elapsed_us()
    new_file = not path.exists()
    with path.open("a", newline="") as fh:
        writer = csv.writer(fh)
        if new_file:
            writer.writerow(["mode", "model", "precision", "batch", "size", "memory_format", "kernel",
                             "calls_per_step", "us_per_step"])  # fmt: skip
        for name, (calls, us) in sorted(totals.items(), key=lambda kv: -kv[1][1]):
            writer.writerow([*shape, name[:300], calls / steps, round(us / steps, 2)])


class _Null:
    def __enter__(self) -> _Null:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget-s", type=float, default=200.0)
    parser.add_argument("--window-s", type=float, default=2.0)
    parser.add_argument("--only", default="", help="only these models (comma list)")
    parser.add_argument(
        "--shapes",
        default="",
        help="instead of the table: mode:model:precision:batch:size:format,... (format may be empty)",
    )
    parser.add_argument("--batch", type=int, default=0, help="this batch instead of the table's")
    parser.add_argument("--profile", action="store_true", help="also write each shape's kernels by name")
    parser.add_argument("--layers", type=int, default=None, help="shrink language models (CPU smoke test)")
    parser.add_argument("--scale", type=int, default=1, help="divide batch and size by this (CPU smoke test)")
    args = parser.parse_args()
    import torch

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    torch.backends.cudnn.benchmark = True
    nv: Any = None
    h: Any = None
    gpu = torch.cuda.get_device_name(0) if cuda else "cpu"
    meta: dict[str, Any] = {"gpu": gpu, "torch": torch.__version__}
    if cuda:
        import pynvml as nv

        nv.nvmlInit()
        h = nv.nvmlDeviceGetHandleByIndex(0)
        meta.update(
            power_limit_w=nv.nvmlDeviceGetPowerManagementLimit(h) / 1e3,
            max_sm_clock_mhz=nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM),
            driver=nv.nvmlSystemGetDriverVersion(),
            cudnn=torch.backends.cudnn.version(),
            allow_tf32_matmul=torch.backends.cuda.matmul.allow_tf32,
            allow_tf32_cudnn=torch.backends.cudnn.allow_tf32,
        )
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "training_steps_meta.json").write_text(json.dumps(meta, indent=2, default=str))
    print(json.dumps(meta, default=str), flush=True)
    path = args.out / "training_steps.csv"
    wanted = {m for m in args.only.split(",") if m}
    deadline = time.perf_counter() + args.budget_s
    new_file = not path.exists()
    with path.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS)
        if new_file:
            writer.writeheader()
        for mode, model, precision, batch, size, fmt in parse_shapes(args.shapes) if args.shapes else SHAPES:
            if wanted and model not in wanted:
                continue
            if time.perf_counter() > deadline:
                print("budget spent; stopping", flush=True)
                break
            batch = args.batch or batch
            batch, size = max(1, batch // args.scale), max(32, size // args.scale)
            shape = (mode, model, precision, batch, size, fmt)
            try:
                row = run_shape(torch, shape, device, nv, h, args)
            except Exception as exc:  # out of memory or a library's refusal: keep going with the next shape
                print(f"{shape}: {type(exc).__name__} ({str(exc)[:160]})", flush=True)
                if cuda:
                    torch.cuda.empty_cache()
                continue
            writer.writerow({"gpu": gpu, **row})
            fh.flush()
            print(
                f"{mode} {model:16s} {precision} b{batch:<4d} {size:5d} {fmt:13s} "
                f"{row['step_time_ms']:9.2f} ms "
                f"{row['avg_power_w']:6.1f} W clk {row['avg_sm_clock_mhz']:6.0f} fwd {row['forward_ms']:.1f} "
                f"bwd {row['backward_ms']:.1f} opt {row['optimizer_ms']:.1f} "
                f"peak {row['peak_allocated_bytes'] / 2**30:.1f} GiB",
                flush=True,
            )
    if cuda:
        nv.nvmlShutdown()


def run_shape(torch: Any, shape: tuple[Any, ...], device: Any, nv: Any, h: Any, args: Any) -> dict[str, Any]:
    mode, model, precision, batch, size, fmt = shape
    if device.type == "cuda":
        torch.cuda.empty_cache()
    with device:  # built on the GPU: a 1.3B-parameter init on the host CPU would take seconds
        net, kind = build(torch, model, size, args.layers)
    if fmt == "channels_last":
        net = net.to(memory_format=torch.channels_last)
    net.train(mode == "train")
    events: list[Any] = []
    step = make_step(torch, net, kind, shape, device, events)
    per_step = 2 if mode == "infer" else 4
    result = measure(torch, step, events, per_step, nv, h, args.window_s)
    if args.profile:
        profile_kernels(torch, step, events, shape, args.out / "kernel_profile.csv")
    del net, step
    return {
        "mode": mode,
        "model": model,
        "precision": precision,
        "batch": batch,
        "image_size": size if kind == "image" else "",
        "seq_len": size if kind == "tokens" else "",
        "memory_format": fmt,
        "optimizer": "" if mode == "infer" else ("adamw" if kind == "tokens" else "sgd"),
        **result,
    }


if __name__ == "__main__":
    main()

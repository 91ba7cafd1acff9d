"""Whole-model forward passes on a real GPU by the EnergAIzer artifact's protocol, at the GPU's own clocks.

The EnergAIzer artifact (`../shared/data/energaizer`, its README section 1) ran Hugging Face models built
from configs in eager PyTorch, one `torch.cuda.synchronize()` after each forward pass, and reported wall
time and whole-board energy per pass. This script does the same for the models and shapes of its
workload JSONs, so `dse predict --kernels <json> --gpu <this gpu>` can be compared with a measurement of
the same kernel list. Differences from the artifact, on purpose:

- clocks are not locked (we never change a lent GPU's settings): the SM clock is polled and recorded;
- windows are about 2 s per shape instead of 30 s, after a warm-up, and energy is the NVML total-energy
  counter over the window (a 50 ms poll of power, clock and temperature is kept beside it);
- one extra profiled pass per shape records how many kernels a pass launches and their summed GPU time,
  which separates host-bound passes (wall time >> GPU time) from GPU-bound ones.

Weights are random (std per the model's own init), inputs random token ids or images: nothing is
downloaded (HF_HUB_OFFLINE). Rows are appended to `<out>/whole_models.csv` as they are measured, so a run
cut short keeps what it measured.

    python benchmarks/device/whole_models.py --out $OUT --budget-s 300
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import threading
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# Order: what the budget cuts last matters least (the GPT-2 and OPT sweeps are the largest).
BATCHES_LM = {
    "bert-large": ((1, 2, 8, 16, 32), (128, 256, 512)),
    "qwen2-1.5b": ((1, 2, 4, 8), (128, 512, 1024, 2048, 4096)),
    "opt-1.3b": ((1, 2, 4, 8), (128, 512, 1024, 2048, 4096)),
    "gpt2": ((1, 2, 8, 16, 32), (128, 512, 1024, 2048, 4096)),
}
BATCHES_VISION = {"vit-large": (8, 16, 32), "mobilevit-small": (8, 16, 32, 64), "resnet101": (8, 16, 32, 64)}
JSON_PREFIX = {
    "bert-large": "bertmodel_large",
    "gpt2": "gpt2model_gpt2",
    "opt-1.3b": "optmodel_opt-1p3b",
    "qwen2-1.5b": "qwen2model_qwen2-1p5b",
    "vit-large": "vitmodel_large",
    "mobilevit-small": "mobilevitmodel_small",
    "resnet101": "resnet101_",
}
FIELDS = (
    "gpu",
    "model",
    "precision",
    "batch",
    "seq_len",
    "mode",
    "attention",
    "iterations",
    "energy_j",
    "time_ms",
    "avg_power_w",
    "poll_avg_power_w",
    "avg_sm_clock_mhz",
    "min_sm_clock_mhz",
    "avg_temp_c",
    "total_run_s",
    "gpu_busy_ms",
    "kernels_per_pass",
    "workload_json",
)


def build_model(torch: Any, name: str, layers: int | None, attention: str = "eager") -> tuple[Any, str]:
    """The model (on the GPU, fp32) and its input kind ('tokens' or 'image'); `layers` shrinks it (tests)."""
    import transformers as tf

    def n(default: int) -> int:
        return layers or default

    if name == "resnet101":
        import torchvision

        return torchvision.models.resnet101(weights=None), "image224"
    configs = {
        "bert-large": lambda: tf.BertConfig(
            hidden_size=1024, num_hidden_layers=n(24), num_attention_heads=16, intermediate_size=4096
        ),
        "gpt2": lambda: tf.GPT2Config(n_positions=4096, n_layer=n(12)),
        "opt-1.3b": lambda: tf.OPTConfig(
            hidden_size=2048,
            num_hidden_layers=n(24),
            ffn_dim=8192,
            num_attention_heads=32,
            word_embed_proj_dim=2048,
            max_position_embeddings=4096,
        ),
        "qwen2-1.5b": lambda: tf.Qwen2Config(
            hidden_size=1536,
            intermediate_size=8960,
            num_hidden_layers=n(28),
            num_attention_heads=12,
            num_key_value_heads=2,
            vocab_size=151936,
            max_position_embeddings=32768,
            rope_theta=1e6,
            tie_word_embeddings=True,
        ),
        "vit-large": lambda: tf.ViTConfig(
            hidden_size=1024, num_hidden_layers=n(24), num_attention_heads=16, intermediate_size=4096
        ),
        "mobilevit-small": lambda: tf.MobileViTConfig(),
    }
    classes = {
        "bert-large": tf.BertModel,
        "gpt2": tf.GPT2Model,
        "opt-1.3b": tf.OPTModel,
        "qwen2-1.5b": tf.Qwen2Model,
        "vit-large": tf.ViTModel,
        "mobilevit-small": tf.MobileViTModel,
    }
    config = configs[name]()
    # The artifact's kernel lists hold softmax kernels: attention ran eagerly.
    config._attn_implementation = attention
    kind = "image256" if name == "mobilevit-small" else "image224" if name == "vit-large" else "tokens"
    return classes[name](config), kind


class Poller:
    """Polls power, SM clock and temperature every `period_s` in a thread (NVML)."""

    def __init__(self, nvml: Any, handle: Any, period_s: float = 0.05) -> None:
        self.nvml, self.handle, self.period_s = nvml, handle, period_s
        self.samples: list[tuple[float, float, float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        nv, h = self.nvml, self.handle
        while not self._stop.is_set():
            self.samples.append(
                (
                    time.perf_counter(),
                    nv.nvmlDeviceGetPowerUsage(h) / 1e3,
                    float(nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
                    float(nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
                )
            )
            self._stop.wait(self.period_s)

    def __enter__(self) -> Poller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def means(self) -> tuple[float, float, float, float]:
        if not self.samples:
            return (math.nan,) * 4
        cols = list(zip(*self.samples, strict=True))
        return (
            sum(cols[1]) / len(cols[1]),
            sum(cols[2]) / len(cols[2]),
            min(cols[2]),
            sum(cols[3]) / len(cols[3]),
        )


def energy_j(nvml: Any, handle: Any) -> float:
    return nvml.nvmlDeviceGetTotalEnergyConsumption(handle) / 1e3 if handle is not None else math.nan


def profile_pass(torch: Any, run: Any) -> tuple[float, int]:
    """(summed GPU kernel time in ms, kernel count) of one pass, from the torch profiler."""
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    busy_us, count = 0.0, 0
    for evt in prof.events():
        if str(getattr(evt, "device_type", "")).endswith("CUDA"):
            busy_us += evt.time_range.elapsed_us()
            count += 1
    return busy_us / 1e3, count


def measure_shape(torch: Any, run: Any, nv: Any, handle: Any, window_s: float) -> dict[str, float]:
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    t_end = time.perf_counter() + 0.3
    warm = 0
    while warm < 3 or time.perf_counter() < t_end:  # warm-up (cuBLAS heuristics, clocks)
        run()
        sync()
        warm += 1
    t0 = time.perf_counter()
    run()
    sync()
    t_iter = time.perf_counter() - t0
    iterations = max(3, math.ceil(window_s / max(t_iter, 1e-6)))
    poller = Poller(nv, handle) if handle is not None else None
    if poller:
        poller.__enter__()
    e0, t0 = energy_j(nv, handle), time.perf_counter()
    for _ in range(iterations):
        run()
        sync()
    t1, e1 = time.perf_counter(), energy_j(nv, handle)
    if poller:
        poller.__exit__()
    power, clock, min_clock, temp = poller.means() if poller else (math.nan,) * 4
    busy_ms, kernels = profile_pass(torch, run) if torch.cuda.is_available() else (math.nan, 0)
    total_s = t1 - t0
    return {
        "iterations": iterations,
        "energy_j": (e1 - e0) / iterations,
        "time_ms": total_s / iterations * 1e3,
        "avg_power_w": (e1 - e0) / total_s,
        "poll_avg_power_w": power,
        "avg_sm_clock_mhz": clock,
        "min_sm_clock_mhz": min_clock,
        "avg_temp_c": temp,
        "total_run_s": total_s,
        "gpu_busy_ms": busy_ms,
        "kernels_per_pass": kernels,
    }


def shapes(precisions: list[str]) -> list[tuple[str, str, int, int | None]]:
    out: list[tuple[str, str, int, int | None]] = []
    for precision in precisions:
        for model, vbatches in BATCHES_VISION.items():
            out += [(model, precision, b, None) for b in vbatches]
        for model, (batches, seqs) in BATCHES_LM.items():
            out += [(model, precision, b, s) for b in batches for s in seqs]
    return out


def json_name(model: str, batch: int, seq: int | None) -> str:
    if seq is None:
        return f"workloads/all/{JSON_PREFIX[model]}_pbf16_b{batch}_freq900.json"
    return f"workloads/all/{JSON_PREFIX[model]}_pbf16_b{batch}_s{seq}_modeprefill.json"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--budget-s", type=float, default=300.0)
    parser.add_argument("--window-s", type=float, default=2.0)
    parser.add_argument("--precisions", default="bf16,fp32")
    parser.add_argument("--models", default="")
    parser.add_argument("--attention", default="eager", choices=("eager", "sdpa"))
    parser.add_argument("--batches", default="", help="only these batch sizes (comma list)")
    parser.add_argument("--max-seq", type=int, default=0, help="only sequence lengths up to this")
    parser.add_argument("--layers", type=int, default=None, help="shrink models (CPU smoke test only)")
    args = parser.parse_args()
    import torch

    cuda = torch.cuda.is_available()
    device = torch.device("cuda" if cuda else "cpu")
    nv: Any = None
    handle: Any = None
    if cuda:
        import pynvml as nv

        nv.nvmlInit()
        handle = nv.nvmlDeviceGetHandleByIndex(0)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "whole_models.csv"
    gpu_name = torch.cuda.get_device_name(0) if cuda else "cpu"
    meta: dict[str, Any] = {"gpu": gpu_name, "torch": torch.__version__}
    if cuda:
        torch.zeros(1, device=device)
        e0, t0 = energy_j(nv, handle), time.perf_counter()
        time.sleep(3.0)
        meta["idle_power_w_with_context"] = (energy_j(nv, handle) - e0) / (time.perf_counter() - t0)
        meta["power_limit_w"] = nv.nvmlDeviceGetPowerManagementLimit(handle) / 1e3
        meta["max_sm_clock_mhz"] = nv.nvmlDeviceGetMaxClockInfo(handle, nv.NVML_CLOCK_SM)
        meta["driver"] = nv.nvmlSystemGetDriverVersion()
    import transformers

    meta["transformers"] = transformers.__version__
    (args.out / "whole_models_meta.json").write_text(json.dumps(meta, indent=2, default=str))
    print(json.dumps(meta, default=str), flush=True)
    deadline = time.perf_counter() + args.budget_s
    wanted = [m for m in args.models.split(",") if m]
    batches = {int(b) for b in args.batches.split(",") if b}
    todo = [
        s
        for s in shapes(args.precisions.split(","))
        if (not wanted or s[0] in wanted)
        and (not batches or s[2] in batches)
        and (not args.max_seq or s[3] is None or s[3] <= args.max_seq)
    ]
    new_file = not path.exists()
    with path.open("a", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=FIELDS)
        if new_file:
            writer.writeheader()
        built: tuple[str, str, Any, str] | None = None
        for model, precision, batch, seq in todo:
            if time.perf_counter() > deadline:
                print("budget spent; stopping", flush=True)
                break
            dtype = {"bf16": torch.bfloat16, "fp32": torch.float32}[precision]
            if built is None or built[:2] != (model, precision):
                built = None
                torch.cuda.empty_cache() if cuda else None
                net, kind = build_model(torch, model, args.layers, args.attention)
                built = (model, precision, net.to(device=device, dtype=dtype).eval(), kind)
            net, kind = built[2], built[3]
            gen = torch.Generator(device=device).manual_seed(batch * 7919 + (seq or 0))
            if kind == "tokens":
                vocab = net.config.vocab_size
                ids = torch.randint(0, vocab, (batch, seq), device=device, generator=gen)
                inputs: dict[str, Any] = {"input_ids": ids}
            else:
                size = 256 if kind == "image256" else 224
                pixels = torch.randn(batch, 3, size, size, device=device, generator=gen, dtype=dtype)
                inputs = {"pixel_values": pixels} if model != "resnet101" else {"x": pixels}

            def run(net: Any = net, inputs: dict[str, Any] = inputs) -> None:
                with torch.inference_mode():
                    if "x" in inputs:
                        net(inputs["x"])
                    else:
                        net(**inputs)

            try:
                result = measure_shape(torch, run, nv, handle, args.window_s)
            except torch.OutOfMemoryError as exc:  # record nothing for a shape that does not fit
                print(f"{model} {precision} b{batch} s{seq}: out of memory ({exc})", flush=True)
                torch.cuda.empty_cache()
                continue
            row = {
                "gpu": gpu_name,
                "model": model,
                "precision": precision,
                "batch": batch,
                "seq_len": seq if seq is not None else "",
                "mode": "prefill" if seq is not None else "",
                "attention": args.attention if seq is not None else "",
                "workload_json": json_name(model, batch, seq),
                **result,
            }
            writer.writerow(row)
            fh.flush()
            print(
                f"{model:16s} {precision} b{batch:<3d} s{seq or '-':<5} {result['time_ms']:9.3f} ms "
                f"{result['avg_power_w']:6.1f} W clk {result['avg_sm_clock_mhz']:6.0f} "
                f"busy {result['gpu_busy_ms']:8.3f} ms k={result['kernels_per_pass']}",
                flush=True,
            )
    if cuda:
        nv.nvmlShutdown()


if __name__ == "__main__":
    main()

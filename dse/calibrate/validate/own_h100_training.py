"""Our H100 training steps and vision forward passes (`dse/calibrate/measured/h100_sxm_training.csv`)
against the model, predicted as `dse predict` predicts them.

    frame = own_h100_training_predictions()   # one row per measured shape: measured and predicted
    rows = own_h100_training_rows()            # MAPE per group and metric (the `dse validate training` rows)

The batch-norm launch values (`dse.perf.batchnorm`) were fitted on the kernels of three of these steps
(ResNet-50 bf16 NHWC and NCHW, fp16 NCHW): their groups are reported again over the held-out rows alone.
Nothing else was fitted on them.

- Vision training (torchvision, `dse predict --model M --training --optimizer sgd --micro-batch B
  --precision P --memory-format F`): bf16 is `torch.autocast` over fp32 weights; the "fp32" rows ran
  PyTorch's defaults, TF32 convolutions in cuDNN, so they are predicted as `--precision tf32`.
- Vision forward passes (`dse predict --model M --batch B`): eval mode, GPU time (no launch queue).
- Language-model training: Hugging Face GPT-2 modules (learned positions, LayerNorm, GELU MLP) at GPT-2's
  and MPT-350M/1B's widths, eager with `torch.autocast` and SDPA attention, AdamW; predicted as they ran:
  the harness's GPT2Config (`HF_GPT2_WIDTHS`) with `autocast` (fp32 weights and gradients, per-step weight
  casts, an fp32 residual stream and LayerNorms: `dse.training.autocast`), `eager_ops` (GPT-2's GELU as
  its tanh formula, in fp32 under autocast: `dse.training.eager`), `adamw-foreach` (torch's default
  AdamW) and the fa3 attention kernel (the profile shows cuDNN's fused attention), with the shipped
  training ratios, as `dse predict` prices such a step. Not modelled: the config's dropout, the key/value
  cache Hugging Face concatenates in training and the unaligned head GEMMs of GPT-2's 50,257-token
  vocabulary (`dse validate training`'s README row).

Metrics: step (or pass) time, the card's average power and the energy per step from the NVML counter,
the forward and backward phase times (CUDA events), and tensor memory (PyTorch's peak allocated bytes
against the model's `memory_bytes` less its fixed allowance for the context and allocator).
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pandas as pd

from dse.training.memory import RESERVED_BYTES

__all__ = ["own_h100_training_predictions", "own_h100_training_rows"]

METRICS = ("step_time_s", "avg_power_w", "energy_j", "forward_s", "backward_s", "memory_bytes")


# The harness's GPT2Config widths (`benchmarks/device/training_steps.py` LMS: GPT-2's, and MPT-350M/1B's
# with llm-foundry's 50,368 vocabulary), built as it built them, with n_positions = the sequence length
HF_GPT2_WIDTHS: dict[str, dict[str, int]] = {
    "gpt2": {"n_embd": 768, "n_layer": 12, "n_head": 12, "vocab_size": 50257},
    "mpt-350m": {"n_embd": 1024, "n_layer": 24, "n_head": 16, "vocab_size": 50368},
    "mpt-1b": {"n_embd": 2048, "n_layer": 24, "n_head": 16, "vocab_size": 50368},
}


@cache
def _hf_gpt2(model: str, seq_len: int) -> Any:
    from dse.workload.models import arch_from_hf_config

    config = {"model_type": "gpt2", **HF_GPT2_WIDTHS[model], "n_positions": seq_len}
    return arch_from_hf_config(config, name=f"hf-gpt2-{model}", source="training_steps.py")


def _group(row: pd.Series) -> str:
    if row["mode"] == "infer":
        return "own-h100/torchvision-forward"
    if row["model"] in HF_GPT2_WIDTHS:
        return "own-h100/hf-eager-llm-train"
    return f"own-h100/torchvision-train-{'tf32' if row['precision'] == 'fp32' else row['precision']}"


def _predict_row(row: pd.Series) -> dict[str, float]:
    from dse.calibrate.measured import H100_GPU
    from dse.hardware.catalog import load_gpu
    from dse.perf.coeffs import load_default_coeffs
    from dse.perf.predict import predict_graph
    from dse.training.llm import predict_llm_training
    from dse.training.parallel import ParallelLayout
    from dse.training.step import TrainingRequest
    from dse.training.vision import predict_vision_training
    from dse.workload.vision import build_vision_graph, load_vision_model

    gpu = load_gpu(H100_GPU)
    precision = "tf32" if row["precision"] == "fp32" else str(row["precision"])
    batch = int(row["batch"])
    fmt = str(row["memory_format"]) or "nchw"
    if row["mode"] == "infer":
        graph, _ = build_vision_graph(
            load_vision_model(str(row["model"])), batch=batch, image_size=int(row["image_size"]),
            precision=precision, memory_format=fmt,
        )  # fmt: skip
        # as `dse predict` runs a forward pass: the generation's shipped latency corrections (a training
        # step runs them too, attention aside: `dse.training.step.training_latency_coeffs`)
        pred = predict_graph(graph, gpu, coeffs=load_default_coeffs(gpu))
        return {"step_time_s": pred.latency_s, "avg_power_w": pred.avg_power_w, "energy_j": pred.energy_j,
                "forward_s": pred.latency_s}  # fmt: skip
    layout = ParallelLayout(num_gpus=1)
    if row["model"] in HF_GPT2_WIDTHS:
        seq = int(row["seq_len"])
        req = TrainingRequest(
            micro_batch=batch, global_batch=batch, seq_len=seq, precision=precision,
            optimizer="adamw-foreach", eager_ops=True, autocast=True, attention_kernel="fa3", layout=layout,
        )  # fmt: skip
        est = predict_llm_training(_hf_gpt2(str(row["model"]), seq), gpu, req)
    else:
        req = TrainingRequest(
            micro_batch=batch, global_batch=batch, image_size=int(row["image_size"]), precision=precision,
            optimizer="sgd", memory_format=fmt, layout=layout,
        )  # fmt: skip
        est = predict_vision_training(load_vision_model(str(row["model"])), gpu, req)
    m = est.metrics()
    return {
        "step_time_s": est.step_time_s, "avg_power_w": m["avg_power_w"], "energy_j": m["energy_per_step_j"],
        "forward_s": est.phase_time_s["forward"], "backward_s": est.phase_time_s["backward"],
        "memory_bytes": m["memory_bytes"] - RESERVED_BYTES,
    }  # fmt: skip


@cache
def own_h100_training_predictions() -> pd.DataFrame:
    """Measured and predicted (`pred_<metric>`) values of every shape, with its validation group."""
    from dse.calibrate.measured import load_own_h100_training

    df = load_own_h100_training()
    df = df.assign(group=[_group(r) for _, r in df.iterrows()], memory_bytes=df["peak_allocated_bytes"])
    # `dse.perf.batchnorm`'s values were fitted on these steps' kernels: ResNet-50 bf16 (both layouts) and
    # fp16 NCHW training
    fitted = (df["mode"] == "train") & (df["model"] == "resnet-50")
    df["fitted"] = fitted & (
        (df["precision"] == "bf16") | ((df["precision"] == "fp16") & (df["memory_format"] == "nchw"))
    )
    df.loc[df["mode"] == "infer", ["backward_s", "memory_bytes"]] = float("nan")
    preds = [_predict_row(r) for _, r in df.iterrows()]
    for metric in METRICS:
        df[f"pred_{metric}"] = [p.get(metric, float("nan")) for p in preds]
    return df


def own_h100_training_rows() -> list[dict[str, Any]]:
    """MAPE, median absolute error and median bias (predicted / measured - 1) per group and metric, and
    per group again over its held-out rows (`<group> held out`) where some were fitted."""
    frame = own_h100_training_predictions()
    held = frame[~frame["fitted"]]
    held = held.assign(group=held["group"] + " held out")
    held = held[held["group"].isin({g + " held out" for g in frame[frame["fitted"]]["group"]})]
    rows: list[dict[str, Any]] = []
    for (group, metric), part in _long(pd.concat([frame, held])).groupby(["group", "metric"], sort=False):
        err = (part["pred"] - part["meas"]).abs() / part["meas"]
        rows.append(
            {
                "source": group, "metric": metric, "n": len(part), "held_out": group.endswith(" held out"),
                "mape": float(err.mean()),
                "median_ape": float(err.median()), "bias": float((part["pred"] / part["meas"]).median() - 1),
            }
        )  # fmt: skip
    return rows


def _long(frame: pd.DataFrame) -> pd.DataFrame:
    parts = [
        pd.DataFrame({"group": frame["group"], "metric": m, "meas": frame[m], "pred": frame[f"pred_{m}"]})
        for m in METRICS
    ]
    return pd.concat(parts, ignore_index=True).dropna()

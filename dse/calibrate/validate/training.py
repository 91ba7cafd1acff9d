"""`dse validate training`: the training-step model against the shared training data (README section 7).

LLM rows (`llm_training_throughput.csv`): each row the model can express is predicted with the row's
layout (GPUs, tp, pp, cp, vp, FSDP, DDP or Megatron's distributed optimizer, micro and global batch,
sequence length, precision, activation checkpointing) and compared on tokens/s per GPU. The recipes'
reduced-layer proxy models (`<model>-proxy-<N>l`) are the catalog model with N layers. Skipped, and
counted by reason: models outside the catalog (Grok-1, Nemotron-3, NeMo's Nemotron 8B / 22B) and rows
whose batch does not divide into the layout. SFT rows run as full-weight steps, LoRA rows with rank
`LORA_RANK` adapters on `NEMO_LORA_TARGETS`. The training ratios are fitted on the
eager-framework rows without tensor or context parallelism (`ratio_fit_rows`); the NVIDIA Megatron /
NeMo / JAX rows are fitted on nothing. GPU names map to catalog GPUs;
the MosaicML A100 40GB is the A100 SXM with 40 GiB of 1555 GB/s HBM2, the torchtitan H100 is the H100 SXM
with 96 GiB of 2.4 TB/s HBM2e at a 500 W cap (README section 7.1).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from functools import cache
from typing import Any

import numpy as np
import pandas as pd

from dse.calibrate.data.training import (
    load_cnn_training,
    load_llm_training,
    load_timm_inference,
    load_timm_training,
)
from dse.calibrate.validate.common import cached_arch
from dse.errors import DseError
from dse.hardware.catalog import load_gpu
from dse.hardware.spec import GpuSpec
from dse.perf.rates import arch_family
from dse.perf.types import OperatingPoint
from dse.training.llm import predict_llm_training
from dse.training.parallel import GPUS_PER_NODE, ParallelLayout
from dse.training.step import (
    TrainingCoeffs,
    TrainingEstimate,
    TrainingRequest,
    attention_scale_of,
)
from dse.workload.arch import LlmArch

__all__ = ["llm_row_request", "validate_llm_training", "validate_timm_training", "validate_training"]

_GPUS: dict[str, tuple[str, tuple[tuple[str, Any], ...], float | None]] = {
    "h100-80gb": ("h100-sxm", (), None),
    "h100-sxm-80gb": ("h100-sxm", (), None),
    "a100-80gb": ("a100-sxm-80gb", (), None),
    "a100-sxm-80gb": ("a100-sxm-80gb", (), None),
    "a100-40gb": ("a100-sxm-40gb", (), None),
    "h200-sxm-141gb": ("h200-sxm", (), None),
    "h100-sxm-96gb-hbm2e-500w": (
        "h100-sxm",
        (("memory.capacity_bytes", 96 * 2**30), ("memory.data_rate_bit_per_s", 3.75e9)),
        500.0,
    ),
    "v100-sxm2-16gb": ("v100-sxm2", (), None),
    "v100-sxm2-32gb": ("v100-sxm2", (("memory.capacity_bytes", 32 * 2**30),), None),
}
_MODELS = {"bert-large-uncased": "bert-large"}
# The LoRA rows do not state a rank: NeMo's default adapter dim (nemo.collections.llm.peft.LoRA, dim=32).
LORA_RANK = 32
# ...nor their targets. NeMo 1.x's fine-tuning config (megatron_gpt_finetuning_config.yaml, the 24.07 rows)
# defaults `lora_tuning.target_modules` to ['attention_qkv'], and NeMo 2.0's fine-tuning recipes in
# performance mode (the dgxc-benchmarking rows, NeMo 24.12) set `peft.target_modules = ['linear_qkv']`: one
# adapter per layer, on the fused qkv projection. Both read from NeMo's sources as we recall them, not
# re-checked against the commits. The data agree: Llama-2-7B at 8 GPUs measures its LoRA step 0.68 x its SFT
# step (16,891 / 24,824 tokens/s), near the 4/6 of its GEMM FLOPs, where adapters on all four projections
# price it at 0.82 (their skinny GEMMs re-read each projection's activations).
NEMO_LORA_TARGETS: tuple[str, ...] = ("qkv_proj",)
# NVIDIA's fine-tuning rows (NeMo's SFT and LoRA recipes) train on SQuAD v1.1 packed into 4,096-token
# sequences (the rows' notes; dgxc-benchmarking's seq_len is derived as 4,096 and runs the same recipe), with
# attention within each sample. A sample is a Wikipedia paragraph (on average about 120-140 words), a question
# and its answer in NeMo's prompt template: a few hundred Llama tokens. 256 is our estimate, not a statement
# of the rows; 128 or 512 move these groups' MAPE by under half a point.
SQUAD_SAMPLE_TOKENS = 256
# Tensor-parallel collectives overlap the GEMMs in Megatron / NeMo (Transformer Engine's userbuffers,
# `tp_comm_overlap`); torchtitan's rows run DTensor TP, vanilla or async (its async TP gained 10% over
# vanilla in its own table: 4809 vs 4378 tokens/s), priced as exposed.
_EXPOSED_TP_SOURCES = ("torchtitan-benchmarks",)
# torchtitan's context-parallel rows (PyTorch's experimental ring attention, torch of 2024-12) scale as
# contiguous chunks do (`ParallelLayout.cp_load_balance` False): Llama-3.1-8B at cp 1 / 2 / 4 / 8 measures
# 3890 / 2540 / 1071 / 548 tokens/s per GPU, and the busiest rank's (2 cp - 1) / cp of the balanced attention
# predicts the cp 4 and cp 8 rows within 3% (balanced chunks: 64% and 75% fast; the 8B and 405B cp 8 rows
# lie past the catalog's 131,072-token context and are not scored). The rows do not state the sharding.
_UNBALANCED_CP_SOURCES = ("torchtitan-benchmarks",)
# Megatron-Bridge's MoE rows are taken to exchange tokens with DeepEP (Megatron's flex dispatcher;
# `dse.training.parallel`): the rows do not name the dispatcher. With Megatron's alltoall dispatcher the
# cross-node rows (Qwen3-235B-A22B at ep 32) are 28-34% slow; with DeepEP's per-node copies within 6%.
_DEEPEP_SOURCES = ("megatron-bridge-perf-summary",)
_PROXY = re.compile(r"(?P<model>.+)-proxy-(?P<layers>\d+)l")
# The sources `fit_training_coeffs` fits the shipped ratios on (`dse.training.step.TRAINING_KERNEL_SCALE`):
# eager PyTorch frameworks. The others are held out.
RATIO_FIT_SOURCES: tuple[str, ...] = (
    "llm-foundry-mpt-benchmarks",
    "torchtitan-benchmarks",
    "nvidia-deeplearningexamples-bert",
)


def ratio_fit_rows(frame: pd.DataFrame) -> pd.Series:
    """The rows of `validate_llm_training`'s frame the shipped ratios are fitted on: the eager frameworks'
    (`RATIO_FIT_SOURCES`) without tensor or context parallelism, so that the ratio is their kernels'
    overhead, not a collective the model prices apart (torchtitan's TP rows run 34% and its long-context CP
    rows 44% faster in the model than measured)."""
    return frame["source"].isin(RATIO_FIT_SOURCES) & (frame["tp"] == 1) & (frame["cp"] == 1)


def row_arch(name: str) -> LlmArch:
    """The catalog model of a row's `model`, a proxy model as its catalog model with fewer layers."""
    proxy = _PROXY.fullmatch(name)
    if proxy is None:
        return cached_arch(_MODELS.get(name, name))
    base = cached_arch(proxy["model"])
    return base.model_copy(update={"name": name, "num_layers": int(proxy["layers"])})


@cache
def _gpu(name: str) -> GpuSpec:
    base, overrides, _ = _GPUS[name]
    return load_gpu(base, dict(overrides) if overrides else None)


def _precision(text: str) -> str:
    text = str(text).lower()
    if "fp8" in text:
        return "fp8"
    for name in ("bf16", "fp16", "tf32", "fp32"):
        if name in text:
            return name
    return "bf16"


def _recompute(value: Any, source: str = "") -> str:
    """The row's recomputation: torchtitan's `selective` is its per-op checkpointing (`op`: its rows say
    "selective (op)", or its llama3_8b.toml default, whose `selective_ac_option` is "op")."""
    text = str(value).lower()
    if text in ("true", "full"):
        return "full"
    if text.startswith("selective"):
        return "op" if source == "torchtitan-benchmarks" else "selective"
    return "none"


def _int(value: Any, default: int = 1) -> int:
    return default if value is None or (isinstance(value, float) and math.isnan(value)) else int(value)


# The attention kernel each source's framework runs (`dse.training.step.ATTENTION_KERNELS`): llm-foundry's
# MPT its Triton kernel (ALiBi), torchtitan PyTorch's SDPA (FlashAttention-2), NVIDIA's NeMo / Megatron
# stacks Transformer Engine's cuDNN fused attention (FA3-class on Hopper). DeepLearningExamples' BERT runs
# none (`_EAGER_ATTENTION_SOURCES`).
SOURCE_ATTENTION_KERNEL: dict[str, str] = {
    "llm-foundry-mpt-benchmarks": "triton",
    "torchtitan-benchmarks": "fa2",
    "megatron-bridge-perf-summary": "fa3",
    "nemo-perf-summary-24.07": "fa3",
    "nvidia-dgxc-benchmarking": "fa3",
    "nemo-long-sequence": "fa3",
}


# DeepLearningExamples' BERT computes attention unfused, as its `modeling.py` (from Hugging Face's
# pytorch-pretrained-BERT) writes it: matmul, scale, mask, softmax, dropout, matmul. Its rows ran NGC 21.11
# (PyTorch 1.11 pre-release), before FlashAttention (2022) and PyTorch's fused SDPA (2.0, 2023); apex's
# fused MHA of NVIDIA's MLPerf BERT is Ampere-only and the V100 rows show the same pattern. With a flash
# kernel its SQuAD rows (384 tokens) were 1.9x fast, its 128-token rows 1.2x.
_EAGER_ATTENTION_SOURCES = ("nvidia-deeplearningexamples-bert",)
# Over half the token slots of BERT's Wikipedia pre-training set at length 512 are padding (Krell et al.
# 2021, arXiv:2107.02027): a sequence holds 256 real tokens on average.
WIKIPEDIA_512_REAL_TOKENS = 256
# DeepLearningExamples' BERT loads its pre-training data with LDDL, whose phase-2 (512-token) set is binned by
# length in 64-token bins (its `--bin-size 64`) and each batch padded to its longest sequence, so a phase-2
# sequence computes its real tokens plus half a bin of padding on average, not 512 (recalled from the
# DeepLearningExamples and LDDL READMEs, not re-checked against the commit). The rows agree: at 512 tokens
# a sequence costs 2.8-3.0x one of 128 tokens (A100 TF32 and FP16, V100 FP16) where 512 dense tokens cost
# over 4x. Its 128-token sequences are mostly full (not shortened).
DLE_BERT_PHASE2_TOKENS = WIKIPEDIA_512_REAL_TOKENS + 64 // 2


def _computed_seq_len(row: pd.Series) -> int:
    """The tokens per sequence a row's step computes: DeepLearningExamples' binned 512-token BERT phase
    (`DLE_BERT_PHASE2_TOKENS`), else its `seq_len_tokens`."""
    seq = _int(row["seq_len_tokens"])
    dle_phase2 = row["source"] == "nvidia-deeplearningexamples-bert" and row["training_mode"] == "pretrain"
    return DLE_BERT_PHASE2_TOKENS if dle_phase2 and seq == 512 else seq


def llm_row_request(row: pd.Series) -> tuple[str, str, TrainingRequest, OperatingPoint] | str:
    """(catalog model, data GPU name, request, operating point) for a row, or why it is skipped."""
    model = str(row["model"])
    try:
        row_arch(model)
    except DseError:
        return "model not in the catalog"
    if row["gpu"] not in _GPUS:
        return "GPU not in the catalog"
    mode = str(row["training_mode"])
    if mode not in ("pretrain", "sft", "lora") and not mode.startswith("finetune"):
        return f"training mode {mode}"
    tp, pp, n = _int(row["tp"]), _int(row["pp"]), _int(row["num_gpus"])
    cp, vp, ep = _int(row["cp"]), _int(row["vp"]), _int(row["ep"])
    dp = n // (tp * pp * cp)
    gbs = _int(row["global_batch_seqs"])
    mb = row["micro_batch_seqs"]
    if not pd.isna(mb):
        micro = _int(mb)
    elif mode in ("sft", "lora") and pd.isna(row["grad_accum_steps"]):
        micro = 1  # NeMo packs fine-tuning samples into sequences, and packed sequences take micro-batch 1
    else:
        micro = max(1, gbs // (dp * _int(row["grad_accum_steps"])))
    if pp > 1 and gbs // (micro * dp) < pp:
        vp, micro = _torchtitan_pipeline(row, pp, gbs // dp)
    sharding = str(row["sharding"])
    fsdp = "FSDP" in sharding and "Megatron" not in sharding
    # Megatron-Bridge states it; NeMo's recipes run Megatron's distributed optimizer by default
    megatron = "distributed optimizer" in sharding or "NeMo" in str(row["software"])
    try:
        layout = ParallelLayout(
            num_gpus=n,
            tp=tp,
            pp=pp,
            cp=cp,
            vp=vp,
            ep=ep,
            fsdp=fsdp,
            distributed_optimizer=megatron and not fsdp,
            tp_comm_overlap=str(row["source"]) not in _EXPOSED_TP_SOURCES,
            cp_load_balance=str(row["source"]) not in _UNBALANCED_CP_SOURCES,
            ep_dispatcher="deepep" if str(row["source"]) in _DEEPEP_SOURCES else "alltoall",
        )
        req = TrainingRequest(
            micro_batch=micro, global_batch=gbs, seq_len=_computed_seq_len(row),
            precision=_precision(row["precision"]),
            recompute=_recompute(row["activation_checkpointing"], str(row["source"])),
            objective="finetune" if mode.startswith("finetune") else "pretrain", layout=layout,
            lora_rank=LORA_RANK if mode == "lora" else 0,
            lora_targets=NEMO_LORA_TARGETS if mode == "lora" else (),
            packed_sample_len=SQUAD_SAMPLE_TOKENS if mode in ("sft", "lora") else 0,
            attention_kernel=_attention_kernel(row), eager_ops=_eager_ops(row),
            attention="eager" if row["source"] in _EAGER_ATTENTION_SOURCES else "flash",
        )  # fmt: skip
    except DseError as exc:
        return f"layout: {str(exc).split(':')[0]}"
    return model, str(row["gpu"]), req, OperatingPoint(power_cap_w=_GPUS[row["gpu"]][2])


def _torchtitan_pipeline(row: pd.Series, pp: int, local_batch: int) -> tuple[int, int]:
    """(vp, micro-batch) of a torchtitan pipeline row, which gives the local batch and the schedule only:
    torchtitan splits the local batch into as many micro-batches as there are pipeline stages (its
    `pipeline_parallel_microbatches` default), pp with 1F1B and pp x 2 with Interleaved 1F1B, whose two
    stages per rank (the fewest it allows) we assume as the rows do not state them."""
    vp = 2 if "interleaved" in str(row["notes"]).lower() else 1
    return vp, max(1, local_batch // (pp * vp))


def _eager_ops(row: pd.Series) -> bool:
    """torchtitan runs eager PyTorch unless a row says `torch.compile` (its tables compare the two: "FSDP"
    against "FSDP + torch.compile"); the other sources' stacks fuse their norms (Megatron / Transformer
    Engine) or have none to fuse (MPT and BERT: LayerNorm and GELU are single kernels in eager PyTorch)."""
    text = f"{row['software']} {row['notes']}"
    return str(row["source"]) == "torchtitan-benchmarks" and "compile" not in text


def _source_label(row: pd.Series) -> str:
    """The row's source, with `/jax` for dgxc-benchmarking's Paxml and MaxText rows (JAX stacks, apart
    from its NeMo rows), `/sft` and `/lora` for fine-tuning rows and `/moe` for mixture-of-experts models."""
    label = f"{row['source']}/jax" if "JAX" in str(row["software"]) else str(row["source"])
    if str(row["training_mode"]) in ("sft", "lora"):
        label += f"/{row['training_mode']}"
    return f"{label}/moe" if str(row["arch"]) == "moe" else label


def _attention_kernel(row: pd.Series) -> str:
    """The row's attention kernel (SOURCE_ATTENTION_KERNEL; FA2 elsewhere, and FA2 for the FA3-class
    stacks on GPUs older than Hopper)."""
    kernel = SOURCE_ATTENTION_KERNEL.get(str(row["source"]), "fa2")
    return "fa2" if kernel == "fa3" and arch_family(_gpu(str(row["gpu"]))) != "hopper" else kernel


def _components(est: TrainingEstimate) -> dict[str, float]:
    """The step time split into the parts the training coefficients scale (for `fit_training_coeffs`)."""
    t = est.phase_time_s
    kernels = t["forward"] + t["backward"] + t["optimizer"]
    attention = t["attention_in_forward_backward"]
    return {"kernel_s": kernels - attention, "attention_s": attention, "other_s": est.step_time_s - kernels}


def fit_training_coeffs(frame: pd.DataFrame) -> tuple[float, float]:
    """(kernel_scale, Triton attention ratio): least relative squares of measured step time = a x kernel_s
    + r x attention_s + other_s over rows predicted with unit coefficients
    (`validate_llm_training(train_coeffs=TrainingCoeffs())`), of one ratio class
    (`dse.training.step.ratio_class`; the uncorrected class's rows predicted with `neutral_coeffs`): r is the
    Triton ratio (fitted) on the rows whose `attention_kernel` is triton and `attention_scale_of` (held) on
    the others (of their `attention` column's implementation, flash where the frame has none)."""
    meas = frame["step_time_s"].to_numpy()
    triton = (frame["attention_kernel"] == "triton").to_numpy()
    if not triton.any():
        raise ValueError("fit_training_coeffs: no row runs the triton kernel, whose ratio the fit needs")
    attention = frame["attention"] if "attention" in frame else pd.Series("flash", index=frame.index)
    held = np.array(
        [attention_scale_of(_gpu(str(g)), str(k), str(a)) if k != "triton" else 0.0
         for g, k, a in zip(frame["gpu"], frame["attention_kernel"], attention, strict=True)]
    )  # fmt: skip
    attn = frame["attention_s"].to_numpy()
    design = np.column_stack([frame["kernel_s"], np.where(triton, attn, 0.0)]) / meas[:, None]
    target = 1.0 - (frame["other_s"].to_numpy() + held * attn) / meas
    (a, b), *_ = np.linalg.lstsq(design, target, rcond=None)
    return float(a), float(b)


def validate_llm_training(
    rows: pd.DataFrame | None = None, train_coeffs: TrainingCoeffs | None = None, coeffs: Any = None
) -> tuple[pd.DataFrame, Counter[str]]:
    """Per-row predictions of tokens/s per GPU (and step time) with the measured values, and skip counts
    (`coeffs`: the latency corrections, None for each GPU's training set)."""
    df = load_llm_training() if rows is None else rows
    out: list[dict[str, Any]] = []
    skipped: Counter[str] = Counter()
    for _, row in df.iterrows():
        meas = row["tokens_per_s_per_gpu"]
        if pd.isna(meas):
            skipped["no tokens/s per GPU measured"] += 1
            continue
        spec = llm_row_request(row)
        if isinstance(spec, str):
            skipped[spec] += 1
            continue
        model, gpu, req, point = spec
        try:
            est = predict_llm_training(
                row_arch(model), _gpu(gpu), req, point, coeffs=coeffs, train_coeffs=train_coeffs
            )
        except DseError as exc:
            skipped[f"model error: {str(exc)}"] += 1
            continue
        m = est.metrics()
        seq = _int(row["seq_len_tokens"])  # as the row counts tokens (`_computed_seq_len` may compute fewer)
        out.append(
            {
                "source": _source_label(row), "gpu": gpu, "model": model, "num_gpus": req.layout.num_gpus,
                "tp": req.layout.tp, "pp": req.layout.pp, "cp": req.layout.cp,
                "seq_len": seq, "precision": req.precision, "recompute": req.recompute,
                "tokens_per_s_per_gpu": float(meas),
                "pred_tokens_per_s_per_gpu": m["tokens_per_s_per_gpu"] * seq / req.seq_len,
                "feasible": m["feasible"], "attention_kernel": req.attention_kernel,
                "attention": req.attention,
                "step_time_s": req.global_batch * seq / (float(meas) * req.layout.num_gpus),
                "pred_step_time_s": est.step_time_s, **_components(est),
            }
        )  # fmt: skip
    return pd.DataFrame(out), skipped


def _mape_rows(frame: pd.DataFrame, metric: str, group: str = "source") -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if frame.empty:
        return rows
    for key, part in frame.groupby(group):
        err = np.abs(part[f"pred_{metric}"] - part[metric]) / part[metric]
        ratio = part[f"pred_{metric}"] / part[metric]
        rows.append(
            {
                "source": key, "metric": metric, "n": len(part), "mape": float(err.mean()),
                "median_ape": float(err.median()), "bias": float(ratio.median() - 1),
            }
        )  # fmt: skip
    return rows


# The DeepLearningExamples ConvNets rows are epoch averages with real ImageNet data (README 7.2), and their
# mixed-precision rows are bound by the input pipeline, not the GPU: on one A100 EfficientNet-B0, its
# WideSE variant and ResNet-50 (a tenth of the FLOPs to 10x) all read 2,470-2,512 img/s, and on eight
# 2,046-2,082 per GPU; on DGX-1 both EfficientNets read 1,299-1,301 on one GPU and 974-984 on eight. So each
# rank's loader gives at most the one-GPU rate, and a node's host CPUs share the node rate among its GPUs:
# (img/s for one GPU, img/s per node of 8), read off the EfficientNet-B0 AMP rows at 1 and 8 GPUs (in-sample;
# the WideSE-B0 and ResNet-50 rows and the 16-GPU rows are held out). The recipe does not state its loader's
# threads; the rates are what these systems' loaders delivered, not a property of the GPU.
DLE_LOADER_SAMPLES_PER_S: dict[str, tuple[float, float]] = {
    "a100-sxm-80gb": (2489.0, 8 * 2081.5),
    "v100-sxm2-16gb": (1301.0, 8 * 973.62),
}


def dle_loader_samples_per_s(gpu: str, num_gpus: int) -> float:
    """The input rate of one rank of a DeepLearningExamples ConvNets row (`DLE_LOADER_SAMPLES_PER_S`): the
    one-GPU rate, or the node's share among the node's GPUs the row runs; 0 (no limit) for another system."""
    one, node = DLE_LOADER_SAMPLES_PER_S.get("v100-sxm2-16gb" if gpu.startswith("v100") else gpu, (0.0, 0.0))
    return min(one, node / min(num_gpus, GPUS_PER_NODE))


def validate_cnn_training() -> tuple[pd.DataFrame, Counter[str]]:
    """DeepLearningExamples ConvNets rows (README 7.2) of catalog vision models on catalog GPUs:
    images/s per GPU at the recipe's memory format, each rank fed at its system's loader rate
    (`dle_loader_samples_per_s`)."""
    from dse.training.vision import predict_vision_training
    from dse.workload.vision import is_vision_model, load_vision_model

    df = load_cnn_training()
    out: list[dict[str, Any]] = []
    skipped: Counter[str] = Counter()
    for _, row in df.iterrows():
        if not is_vision_model(str(row["model"])):
            skipped["vision model not shipped"] += 1
            continue
        try:
            gpu = _gpu(str(row["gpu"]))
        except (KeyError, DseError):
            skipped["GPU not in the catalog"] += 1
            continue
        n, mb = int(row["num_gpus"]), int(row["batch_per_gpu"])
        req = TrainingRequest(
            micro_batch=mb, global_batch=mb * n, image_size=int(row["image_px"]),
            precision=_precision(row["precision"]), optimizer="sgd", memory_format=str(row["memory_format"]),
            layout=ParallelLayout(num_gpus=n),
            loader_samples_per_s=dle_loader_samples_per_s(str(row["gpu"]), n),
        )  # fmt: skip
        est = predict_vision_training(load_vision_model(str(row["model"])), gpu, req)
        out.append(
            {
                "source": f"{row['source']}/{row['model']}", "gpu": row["gpu"], "model": row["model"],
                "images_per_s_per_gpu": float(row["images_per_s_per_gpu"]),
                "pred_images_per_s_per_gpu": est.metrics()["samples_per_s_per_gpu"],
            }
        )  # fmt: skip
    return pd.DataFrame(out), skipped


def validate_timm_training() -> tuple[pd.DataFrame, Counter[str]]:
    """timm `benchmark.py` training steps on one RTX 3090 (README 7.3) of shipped vision models: images/s
    at the row's batch, image size and memory format, AMP (fp16), SGD. Synthetic GPU-resident input: no
    loader stalls. Its timm (PyTorch 1.12) computed a ViT's attention unfused (`--attention eager`); the
    ViT rows are a group of their own (`timm-rtx3090-vit`)."""
    from dse.training.vision import predict_vision_training
    from dse.workload.vision import is_vision_model, load_vision_model

    gpu = load_gpu("rtx-3090")
    out: list[dict[str, Any]] = []
    skipped: Counter[str] = Counter()
    for _, row in load_timm_training().iterrows():
        if not is_vision_model(str(row["model"])):
            skipped["vision model not shipped"] += 1
            continue
        model = load_vision_model(str(row["model"]))
        vit, bs = model.family == "vit", int(row["train_batch_size"])
        req = TrainingRequest(
            micro_batch=bs, global_batch=bs, image_size=int(row["train_img_px"]), precision="fp16",
            optimizer="sgd", memory_format=str(row["memory_format"]), layout=ParallelLayout(num_gpus=1),
            attention="eager" if vit else "flash",
        )  # fmt: skip
        est = predict_vision_training(model, gpu, req)
        out.append(
            {
                "source": f"timm-rtx3090-{'vit' if vit else row['memory_format']}", "model": row["model"],
                "images_per_s_per_gpu": float(row["train_samples_per_s"]),
                "pred_images_per_s_per_gpu": est.metrics()["samples_per_s"], "feasible": est.feasible,
            }
        )  # fmt: skip
    return pd.DataFrame(out), skipped


def validate_timm_inference() -> tuple[pd.DataFrame, Counter[str]]:
    """timm `benchmark.py` forward passes on one RTX 4090 (README 7.3) of shipped vision models: images/s at
    the row's batch and image size, AMP (fp16), NCHW, synthetic input; its timm (PyTorch 2.9) runs a ViT's
    attention fused. A forecast GPU: no kernel or power measurement of it (idle power and V-f estimated).
    Predicted as `dse predict` runs a forward pass, with the generation's shipped latency corrections."""
    from dse.perf.coeffs import load_default_coeffs
    from dse.perf.predict import predict_graph
    from dse.workload.vision import build_vision_graph, is_vision_model, load_vision_model

    gpu = load_gpu("rtx-4090")
    coeffs = load_default_coeffs(gpu)
    out: list[dict[str, Any]] = []
    skipped: Counter[str] = Counter()
    for _, row in load_timm_inference().iterrows():
        if not is_vision_model(str(row["model"])):
            skipped["vision model not shipped"] += 1
            continue
        model, bs = load_vision_model(str(row["model"])), int(row["infer_batch_size"])
        graph, _ = build_vision_graph(
            model, batch=bs, image_size=int(row["infer_img_px"]), precision="fp16", memory_format="nchw"
        )
        pred = predict_graph(graph, gpu, coeffs=coeffs)
        out.append(
            {
                "source": f"timm-rtx4090-infer-{'vit' if model.family == 'vit' else 'cnn'}",
                "model": row["model"], "images_per_s_per_gpu": float(row["infer_samples_per_s"]),
                "pred_images_per_s_per_gpu": bs / pred.latency_s,
            }
        )  # fmt: skip
    return pd.DataFrame(out), skipped


def validate_training() -> dict[str, Any]:
    """MAPE per source and metric over every training set the model can express, and the skipped rows."""
    from dse.calibrate.validate.own_h100_training import own_h100_training_rows
    from dse.calibrate.validate.training_power import validate_mlperf_power, validate_zeus_power

    llm, llm_skipped = validate_llm_training()
    cnn, cnn_skipped = validate_cnn_training()
    timm, timm_skipped = validate_timm_training()
    timm_infer, timm_infer_skipped = validate_timm_inference()
    zeus, zeus_skipped = validate_zeus_power()
    mlperf, mlperf_skipped, host_w = validate_mlperf_power()
    rows = _mape_rows(llm, "tokens_per_s_per_gpu") + _mape_rows(cnn, "images_per_s_per_gpu")
    rows += _mape_rows(timm, "images_per_s_per_gpu") + _mape_rows(timm_infer, "images_per_s_per_gpu")
    rows += _mape_rows(zeus, "avg_gpu_power_w")
    for metric in ("slowdown", "samples_per_s"):  # below the top limits; known epoch sizes
        rows += _mape_rows(zeus.dropna(subset=[metric]) if metric in zeus else zeus, metric)
    rows += _mape_rows(mlperf, "node_power_w") + _mape_rows(mlperf, "samples_per_s_per_gpu")
    rows += own_h100_training_rows()  # our eager PyTorch steps (batch norm fitted on three: its docstring)
    skipped = {
        "llm": llm_skipped,
        "cnn": cnn_skipped,
        "timm": timm_skipped,
        "timm_infer": timm_infer_skipped,
        "zeus": zeus_skipped,
        "mlperf": mlperf_skipped,
    }
    return {
        "rows": rows,
        "skipped": {k: dict(v) for k, v in skipped.items()},
        "mlperf_host_power_w": host_w,
    }

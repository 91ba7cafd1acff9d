"""Communication and GPU accounting of a multi-GPU serving step (DESIGN section 13).

    cost = step_comm(arch, gpu, par, tokens=np.array([32, 8192]), engine="vllm", precision="fp8",
                     decode_only=np.array([True, False]))
    latency_s, energy_j = combine_step(kernel_s, kernel_j, cost, par, idle_power_w=90.0)

One engine step of one replica (`dse.workload.sharding`: the graph is what one GPU computes) adds, on the
critical path (no overlap: a row-parallel GEMM's output is the next norm's input):

- tp > 1: one all-reduce of the step's activations (tokens x hidden in the activation dtype) after
  o_proj in every layer and one after every dense MLP's down projection, with the engine's all-reduce
  (`vllm`, `sglang`, `trtllm`: their custom one/two-shot kernels below their size limits, NCCL above;
  NCCL for the others).
- MoE layers with dp == 1: the tp GPUs hold every token (attention is tensor parallel), each runs its
  experts (or expert slices) on them, and one all-reduce over tp combines the partial outputs (vLLM's
  `FusedMoE` reduce; the same count as a dense MLP).
- MoE layers with dp > 1: the replicas' tokens meet the experts of all tp x dp GPUs. SGLang exchanges
  them with DeepEP (`moe_dispatch` + `moe_combine`, low-latency kernels in decode-only steps, the
  high-throughput ones otherwise, over the copies each token sends to distinct ranks,
  `moe_exchange_bytes`); vLLM and the others all-gather the dp x t tokens and reduce-scatter the
  outputs (vLLM's default `allgather_reducescatter` all2all backend) over the tp x dp GPUs.
- pp > 1: pp - 1 hand-offs of the activations between stages (link latency plus bytes over the link
  bandwidth, link energy per bit). One micro-batch per step: the stages run one after another, so
  a step takes the sum of the stages and each GPU idles the (pp - 1) / pp bubble (DESIGN: `(p - 1) /
  (m + p - 1)` with m = 1). vLLM's virtual engines (pp batches in flight) are not modelled.
- Not counted: the gather of the vocabulary-parallel logits to one rank (rows x vocab / tp per GPU, a
  fraction of one all-reduce) and the embedding's all-reduce (vLLM's vocab-parallel embedding: one
  more all-reduce per step, small beside the 2 per layer).

Energy per GPU: a GPU in a collective draws idle plus link power (`estimate_collective`); the step's
energy per GPU is the kernels' plus the collectives' (plus, with pp, the idle draw of the waiting stages,
shared over the stage GPUs). Every GPU of a replica does the same work, so the replica's energy is its
GPUs times that; J per token counts every GPU (`scale_metrics`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.hardware.spec import GpuSpec
from dse.perf.collectives import ALGORITHMS, estimate_collective, moe_exchange_bytes
from dse.workload.llm import LlmArch, activation_dtype
from dse.workload.ops import BYTES_PER_ELEMENT
from dse.workload.sharding import Parallelism


@dataclass(frozen=True, slots=True, kw_only=True)
class StepComm:
    """Communication of engine steps, per GPU (arrays over the steps): collectives and stage hand-offs."""

    latency_s: np.ndarray
    energy_j: np.ndarray
    handoff_s: np.ndarray
    handoff_link_j: np.ndarray

    @property
    def total_s(self) -> np.ndarray:
        return self.latency_s + self.handoff_s


def all_reduce_algorithm(engine: str) -> str:
    """The all-reduce an engine runs: its own custom kernel where the collective model has one, else NCCL."""
    return engine if engine in ALGORITHMS else "nccl"


def _calls(
    name: str, message_bytes: np.ndarray, num_gpus: int, gpu: GpuSpec, algorithm: str, count: int,
    sm_clock_hz: float | None,
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """(latency, energy per GPU) of `count` calls of one collective."""
    if count == 0 or num_gpus <= 1:
        zero = np.zeros_like(message_bytes)
        return zero, zero
    est = estimate_collective(
        name, message_bytes, num_gpus, gpu, algorithm=algorithm, sm_clock_hz=sm_clock_hz
    )
    return count * np.asarray(est.latency_s, float), count * np.asarray(est.energy_j, float)


def step_comm(
    arch: LlmArch,
    gpu: GpuSpec,
    par: Parallelism,
    *,
    tokens: np.ndarray,
    engine: str,
    precision: str,
    decode_only: np.ndarray,
    sm_clock_hz: float | None = None,
) -> StepComm:
    """Collectives and hand-offs of steps of `tokens` tokens each (one replica's), per GPU (module doc)."""
    t = np.asarray(tokens, float)
    act_bytes = t * arch.hidden_size * BYTES_PER_ELEMENT[activation_dtype(precision)]
    lat, en = np.zeros_like(t), np.zeros_like(t)
    ar = all_reduce_algorithm(engine)
    num_moe = len(arch.moe_layers)
    reduces = arch.num_layers + len(arch.dense_mlp_layers) + (num_moe if par.dp == 1 else 0)
    for add_s, add_j in (_calls("all_reduce", act_bytes, par.tp, gpu, ar, reduces, sm_clock_hz),):
        lat, en = lat + add_s, en + add_j
    stage_gpus = par.tp * par.dp
    if num_moe and par.dp > 1:
        if engine == "sglang":
            exch = moe_exchange_bytes(
                t, hidden_size=arch.hidden_size, topk=arch.num_experts_per_tok,
                num_experts=arch.num_experts, ep_size=par.ep,
            )  # fmt: skip
            for name in ("moe_dispatch", "moe_combine"):
                for algo, mask in (("deepep_ll", decode_only), ("deepep_ht", ~decode_only)):
                    add_s, add_j = _calls(name, exch, par.ep, gpu, algo, num_moe, sm_clock_hz)
                    lat, en = lat + np.where(mask, add_s, 0.0), en + np.where(mask, add_j, 0.0)
        else:
            gathered = par.dp * act_bytes  # every replica's tokens, the all-gather's output
            for name in ("all_gather", "reduce_scatter"):
                add_s, add_j = _calls(name, gathered, stage_gpus, gpu, "nccl", num_moe, sm_clock_hz)
                lat, en = lat + add_s, en + add_j
    handoff_s = np.zeros_like(t)
    handoff_j = np.zeros_like(t)
    if par.pp > 1 and gpu.interconnect is not None:
        link = gpu.interconnect
        handoff_s = (par.pp - 1) * (link.latency_s + act_bytes / link.link_bw_bytes_per_s)
        handoff_j = (par.pp - 1) * act_bytes * 8.0 * link.energy_j_per_bit
    return StepComm(latency_s=lat, energy_j=en, handoff_s=handoff_s, handoff_link_j=handoff_j)


def combine_step(
    kernel_s: np.ndarray, kernel_j: np.ndarray, comm: StepComm, par: Parallelism, *, idle_power_w: float
) -> tuple[np.ndarray, np.ndarray]:
    """(latency, energy per GPU) of steps: kernels of all layers (the graph is one tp rank's), then
    collectives and hand-offs in series; with pp the stages split the work and idle the rest of the step."""
    latency_s = kernel_s + comm.total_s
    busy_j = kernel_j + comm.energy_j + comm.handoff_link_j
    if par.pp == 1:
        return latency_s, busy_j
    idle_s = par.pp * latency_s - kernel_s - comm.latency_s
    return latency_s, (busy_j + idle_power_w * idle_s) / par.pp


# Keys whose value is summed over the GPUs of one replica (its energy) or over the replicas (its rates).
_PER_REPLICA_ENERGY = ("energy_per_output_token_j", "energy_per_request_j")
_OVER_REPLICAS = ("output_tokens_per_s", "requests_per_s")
# Run totals the replicas add up (each simulated the same share): the requests served, like `energy_j`.
_RUN_SUMS = ("num_requests", "preemptions")


def scale_metrics(values: dict[str, float | None], par: Parallelism) -> None:
    """Turn one replica's per-GPU simulation into the deployment's metrics, in place.

    `avg_power_w` stays per GPU; `total_power_w` is all GPUs; J per token and per request count every GPU
    of the replica (the dp replicas carry the same per-token energy); rates, `energy_j`, the requests
    served and the preemptions add up the replicas (`energy_j` all GPUs); `duration_s` and `steps` are one
    replica's (they run side by side).
    """
    values["num_gpus"] = float(par.num_gpus)
    power = values.get("avg_power_w")
    values["total_power_w"] = None if power is None else power * par.num_gpus
    for key in _PER_REPLICA_ENERGY:
        if values.get(key) is not None:
            values[key] = float(values[key] or 0.0) * par.gpus_per_replica
    for key in (*_OVER_REPLICAS, *_RUN_SUMS):
        if values.get(key) is not None:
            values[key] = float(values[key] or 0.0) * par.dp
    if values.get("energy_j") is not None:
        values["energy_j"] = float(values["energy_j"] or 0.0) * par.num_gpus


# Per-request latencies: a mean over requests, so replicas weigh by the requests they serve.
_REQUEST_MEANS = ("ttft_s", "tpot_s", "e2e_latency_s")
_RUN_TOTALS = ("energy_j", "duration_s", "window_s", "steps")


def combine_uneven(
    hi: dict[str, float | None], lo: dict[str, float | None] | None, hi_share: float, idle_w: float
) -> dict[str, float | None]:
    """Deployment metrics when the dp replicas serve unequal client counts (concurrency not a multiple of
    dp): `hi_share` of them with one client more. `hi` and `lo` are the deployment metrics with every
    replica at the larger and the smaller count (`lo` None: the smaller count is 0, idle replicas at
    `idle_w` per GPU). Rates and per-GPU power mix by replica share, mean latencies by requests served,
    J per token is all power over all tokens, requests and preemptions add up by replica share; the other
    totals of one run (`_RUN_TOTALS`) are None; percentiles,
    memory and the rest are the busier replicas' (a conservative tail: the mixture's quantiles lie between
    the two)."""
    out = dict(hi)
    lo = lo or {}

    def mix(key: str, lo_default: float = 0.0) -> float:
        return hi_share * float(hi[key] or 0.0) + (1.0 - hi_share) * float(lo.get(key) or lo_default)

    rate_hi, rate_lo = (
        hi_share * float(hi["requests_per_s"] or 0.0),
        (1.0 - hi_share) * float(lo.get("requests_per_s") or 0.0),
    )
    for key in _REQUEST_MEANS:
        if hi.get(key) is not None:
            out[key] = (rate_hi * float(hi[key] or 0.0) + rate_lo * float(lo.get(key) or 0.0)) / (
                rate_hi + rate_lo
            )
    for key in (*_OVER_REPLICAS, "avg_batch_size"):
        out[key] = mix(key)
    power_w = mix("avg_power_w", idle_w)
    total_w = power_w * float(hi["num_gpus"] or 1.0)
    out["avg_power_w"], out["total_power_w"] = power_w, total_w
    out["energy_per_output_token_j"] = total_w / max(float(out["output_tokens_per_s"] or 0.0), 1e-30)
    out["energy_per_request_j"] = total_w / max(float(out["requests_per_s"] or 0.0), 1e-30)
    for key in _RUN_TOTALS:  # totals of one simulated run: two runs were mixed, so none is this one's
        out[key] = None
    for key in _RUN_SUMS:  # each run served its share of the requests: the mix adds up to the deployment's
        out[key] = float(round(mix(key)))
    return out


__all__ = [
    "StepComm",
    "all_reduce_algorithm",
    "combine_step",
    "combine_uneven",
    "scale_metrics",
    "step_comm",
]

"""Multi-GPU serving layouts: tensor, pipeline, expert and attention-data parallelism of one model.

    par = Parallelism(tp=8, ep=8)                        # DeepSeek on 8 GPUs: attention TP 8, experts EP 8
    check_parallelism(arch, par)                         # ConfigError naming the flag that does not fit
    gpu_arch = shard_arch(arch, par)                     # what one GPU computes (heads / TP, widths / TP ...)
    graph = shard_graph(build_decode_graph(gpu_arch, batch=32, context_len=1024), arch, par)

Layout (vLLM and SGLang, DESIGN section 13): `tp` GPUs split each layer Megatron-style (column-parallel
QKV and gate/up, row-parallel o_proj and down, vocab-parallel embedding and LM head); `dp` attention
replicas, each with its own scheduler and `max_num_seqs`, share the MoE layers; the MoE layers of a
pipeline stage run on all `tp x dp` GPUs, experts split `ep` ways and each expert's width `moe_tp =
tp x dp / ep` ways (aiconfigurator's `moe_tp_size x moe_ep_size = tp_size x attention_dp_size`; vLLM's
`FusedMoEParallelConfig`); `pp` stages split the layers. A dense model with `dp` > 1 is `dp` independent
replicas. GPUs: `tp x dp x pp`.

What one GPU runs (`shard_arch`, then `shard_graph`):

- heads / tp, KV heads / tp; below one KV head per GPU the heads are replicated (tp % kv_heads == 0:
  vLLM's `QKVParallelLinear` keeps `tp / kv_heads` copies of each), so each GPU caches one KV head.
  MLA (DeepSeek) replicates its latent (`kv_a_proj` is a replicated linear): the cache per GPU is the
  whole latent whatever tp is.
- dense MLP width / tp (rounded up: engines pad), vocabulary / tp, shared experts / tp, routed expert
  width / moe_tp; the graph builders then produce the per-GPU GEMMs unchanged.
- routed experts: the grouped GEMMs see the tokens of all `dp` replicas (`dp x t`) and run the experts
  on this GPU, the distinct experts `dp x t` tokens touch divided by `ep`, each with the same mean rows
  as on one GPU (`dse.workload.moe.expert_gemm_shape`); their activation and sort kernels scale the same.
- Norms, router, top-k, residuals and the combine run on each GPU's own tokens, replicated across tp.

NOTE(sharding): the per-GPU weights (`weight_arch`) count the router as E / ep columns instead of E
(DeepSeek-V3: 0.1% of the weights per GPU), so that one arch with E / ep experts gives the experts' share.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass

from dse.errors import ConfigError
from dse.workload.arch import LlmArch
from dse.workload.graph import WorkloadGraph
from dse.workload.moe import expert_gemm_shape
from dse.workload.ops import ElementwiseOp, GemmOp, Op

# Leaf names of the ops of routed experts (`dse.workload.moe`) whose work follows the token copies.
EXPERT_GEMMS = ("experts_gate_up", "experts_down")
EXPERT_ROWWISE = ("experts_act", "experts_align", "experts_gate_up_quant", "experts_down_quant")
PARALLEL_FLAGS: tuple[str, ...] = ("tp", "pp", "ep", "dp")
# GPUs one layout may hold, past the largest clusters built: 10^30 (allowed before) gave 1e32 W, and more inf.
MAX_GPUS = 1_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Parallelism:
    """A serving layout (module docstring): tensor, pipeline, expert and attention-data parallel sizes."""

    tp: int = 1
    pp: int = 1
    ep: int = 1
    dp: int = 1

    def __post_init__(self) -> None:
        for flag in PARALLEL_FLAGS:
            value = getattr(self, flag)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ConfigError(f"--{flag} must be an integer >= 1, got {value!r}")
            if value > MAX_GPUS:
                raise ConfigError(f"--{flag} {value} is above the {MAX_GPUS:,} GPUs a layout may hold")
        if self.num_gpus > MAX_GPUS:
            raise ConfigError(
                f"--tp {self.tp} x --pp {self.pp} x --dp {self.dp} = {self.num_gpus:,} GPUs, above the "
                f"{MAX_GPUS:,} a layout may hold"
            )

    @property
    def num_gpus(self) -> int:
        return self.tp * self.dp * self.pp

    @property
    def gpus_per_replica(self) -> int:
        """GPUs whose energy one replica's tokens carry: its tp x pp (the MoE GPUs are shared by the dp
        replicas, which are the same GPUs)."""
        return self.tp * self.pp

    @property
    def moe_tp(self) -> int:
        """Ways each routed expert's width is split: the stage's GPUs over the expert-parallel size."""
        return self.tp * self.dp // self.ep

    @property
    def is_single(self) -> bool:
        """One GPU and no expert split (an `ep` above 1 on one GPU is a layout to reject, not to ignore)."""
        return self.num_gpus == 1 and self.ep == 1


SINGLE = Parallelism()
# GPUs one NVSwitch (HGX/DGX) node joins: the scope of the collective model (README "Interconnect").
GPUS_PER_NODE = 8


def check_kv_heads(arch: LlmArch, tp: int) -> None:
    """ConfigError unless `tp` divides the KV heads or is a multiple of them (replicated heads; vLLM's rule,
    which training layouts follow too). Latent attention (MLA) has one shared latent: any tp."""
    kv = arch.num_kv_heads
    if not arch.is_mla and kv % tp and tp % kv:
        raise ConfigError(
            f"--tp {tp} must divide {arch.name}'s {kv} KV heads or be a multiple of them (replicated heads)"
        )


def check_parallelism(arch: LlmArch, par: Parallelism) -> None:
    """ConfigError naming the flag unless `arch` can be split as `par` says.

    The rules are vLLM's (`vllm/model_executor/layers/linear.py` `QKVParallelLinear`, `config.py`
    `verify_with_parallel_config`): heads divisible by tp; KV heads divisible by tp, or tp by KV heads
    (replicas); layers at least pp; experts divisible by ep, and ep dividing the tp x dp GPUs of a stage.
    """
    h, tp = arch.num_heads, par.tp
    if h % tp:
        raise ConfigError(f"--tp {tp} must divide {arch.name}'s {h} attention heads")
    check_kv_heads(arch, tp)
    if arch.linear_layers and arch.linear_num_key_heads % tp:
        raise ConfigError(
            f"--tp {tp} must divide {arch.name}'s {arch.linear_num_key_heads} linear-attention key heads"
        )
    if par.pp > arch.num_layers:
        raise ConfigError(f"--pp {par.pp} exceeds {arch.name}'s {arch.num_layers} layers")
    if par.ep > 1 and not arch.is_moe:
        raise ConfigError(f"--ep {par.ep} needs a mixture-of-experts model; {arch.name} is dense")
    if arch.is_moe and arch.num_experts % par.ep:
        raise ConfigError(f"--ep {par.ep} must divide {arch.name}'s {arch.num_experts} experts")
    if (par.tp * par.dp) % par.ep:
        raise ConfigError(f"--ep {par.ep} must divide --tp x --dp = {par.tp * par.dp} (the GPUs of a stage)")
    # Collectives are modelled inside one NVLink/NVSwitch node (`dse.perf.collectives`): a tensor-parallel
    # group, or the group of a MoE model's expert layers (tp x dp GPUs: the dp replicas share them, split
    # by expert or by width), across nodes is refused rather than priced as if it were one node.
    # Independent dp replicas of a dense model and pipeline stages may span nodes.
    if par.tp > GPUS_PER_NODE:
        raise ConfigError(
            f"--tp {par.tp}: tensor parallelism beyond one node ({GPUS_PER_NODE} GPUs) is not modelled"
        )
    if arch.is_moe and (par.ep > 1 or par.dp > 1) and par.tp * par.dp > GPUS_PER_NODE:
        flag = f"--ep {par.ep} with --tp x --dp" if par.ep > 1 else "--tp x --dp"
        raise ConfigError(
            f"{flag} = {par.tp * par.dp}: the expert layers' group (the dp replicas share them) beyond one "
            f"node ({GPUS_PER_NODE} GPUs) is not modelled"
        )


def _ceil_div(value: int, ways: int) -> int:
    return -(-value // ways)


def shard_arch(arch: LlmArch, par: Parallelism) -> LlmArch:
    """The slice of `arch` one GPU computes under `par` (module docstring); `arch` itself on one GPU.

    The expert count is kept (the graph's expert GEMMs are divided by `shard_graph`); `weight_arch` gives
    the per-GPU weights.
    """
    if par.tp == 1 and par.moe_tp == 1:
        return arch
    tp = par.tp
    update: dict[str, object] = {
        "num_heads": arch.num_heads // tp,
        "num_kv_heads": max(1, arch.num_kv_heads // tp),
        "intermediate_size": _ceil_div(arch.intermediate_size, tp),
        "vocab_size": _ceil_div(arch.vocab_size, tp),
    }
    if arch.linear_layers:  # Gated DeltaNet heads split like attention heads (vLLM's column-parallel in_proj)
        update["linear_num_key_heads"] = max(1, arch.linear_num_key_heads // tp)
        update["linear_num_value_heads"] = max(1, arch.linear_num_value_heads // tp)
    if arch.is_moe:
        update["moe_intermediate_size"] = _ceil_div(arch.moe_intermediate_size, par.moe_tp)
        update["shared_expert_intermediate_size"] = _ceil_div(arch.shared_expert_intermediate_size, tp)
    # model_copy skips validation: a slice need not be a model one could load (e.g. 1 KV head of 8 heads
    # is fine, but OPT's learned positions vs vocab are untouched anyway).
    return arch.model_copy(update=update)


def weight_arch(arch: LlmArch, par: Parallelism) -> LlmArch:
    """`shard_arch` with the experts of one GPU (E / ep), whose `weight_bytes` is one GPU's weights
    (pipeline stages aside: divide by pp)."""
    gpu_arch = shard_arch(arch, par)
    if not arch.is_moe or par.ep == 1:
        return gpu_arch
    local = arch.num_experts // par.ep
    return gpu_arch.model_copy(
        update={"num_experts": local, "num_experts_per_tok": min(arch.num_experts_per_tok, local)}
    )


def shard_graph(graph: WorkloadGraph, arch: LlmArch, par: Parallelism) -> WorkloadGraph:
    """A graph of `shard_arch(arch, par)` with its routed experts as one GPU runs them (module docstring).

    `graph.meta["num_tokens"]` is the pass's tokens t (`build_*_graph` and `engine_step_graph` set it).
    Returns `graph` itself for a dense model or when the experts see only this replica's tokens whole.
    """
    if not arch.is_moe or (par.ep == 1 and par.dp == 1):
        return graph
    tokens = int(graph.meta["num_tokens"])  # type: ignore[call-overload]
    copies = par.dp / par.ep  # token copies this GPU's experts get, over one replica's t k
    return shard_experts(
        graph, arch, routed_tokens=par.dp * tokens, ep=par.ep,
        rowwise=lambda n: max(1, math.ceil(n * copies)),
    )  # fmt: skip


def shard_experts(
    graph: WorkloadGraph, arch: LlmArch, *, routed_tokens: int, ep: int, rowwise: Callable[[int], int]
) -> WorkloadGraph:
    """`graph` (an MoE model's, over `graph.meta["num_tokens"]` tokens) with its routed experts as one of `ep`
    expert-parallel GPUs runs them: its share of the experts `routed_tokens` tokens touch, each with the
    rows they bring; the experts' row-wise kernels take `rowwise(elements)` elements on this GPU."""
    tokens = int(graph.meta["num_tokens"])  # type: ignore[call-overload]
    imbalance = float(graph.meta.get("moe_imbalance", 1.0))  # type: ignore[arg-type]
    k = arch.num_experts_per_tok
    num_e, rows = expert_gemm_shape(num_experts=arch.num_experts, k=k, num_tokens=tokens, imbalance=imbalance)
    num_all, rows_all = expert_gemm_shape(
        num_experts=arch.num_experts, k=k, num_tokens=routed_tokens, imbalance=imbalance
    )
    local = max(1, math.ceil(num_all / ep - 1e-9))

    def shard(op: Op) -> Op:
        leaf = op.name.rsplit("/", 1)[-1]
        if isinstance(op, GemmOp) and leaf in EXPERT_GEMMS and op.batch == num_e and op.m == rows:
            return dataclasses.replace(op, batch=local, m=rows_all)
        if isinstance(op, ElementwiseOp) and leaf in EXPERT_ROWWISE:
            return dataclasses.replace(op, num_elements=rowwise(op.num_elements))
        return op

    return dataclasses.replace(graph, ops=tuple(shard(op) for op in graph.ops))


__all__ = [
    "EXPERT_GEMMS",
    "EXPERT_ROWWISE",
    "MAX_GPUS",
    "PARALLEL_FLAGS",
    "SINGLE",
    "Parallelism",
    "check_kv_heads",
    "check_parallelism",
    "shard_arch",
    "shard_experts",
    "shard_graph",
    "weight_arch",
]

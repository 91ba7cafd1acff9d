"""Parallel layout of a training step and the time of its communication (DESIGN.md sections 13-14).

    layout = ParallelLayout(num_gpus=64, tp=1, pp=1, fsdp=True)     # dp = 64 / (tp * pp * cp)

- Data parallel: DDP all-reduces the gradients once per step, in buckets during the last micro-batch's
  backward; FSDP (ZeRO-3) all-gathers each layer's weights before its forward and again before its
  backward and reduce-scatters its gradients, every micro-batch, prefetched so they overlap compute.
- Tensor parallel (Megatron, sequence parallel): per layer forward an all-gather and a reduce-scatter of
  the [tokens, d] activations around attention and again around the MLP (the bytes of two all-reduces),
  the same backward; with `tp_comm_overlap` (Transformer Engine's userbuffers, NeMo's default) they
  overlap the GEMMs they feed (`dse.training.step`), else they sit on the critical path. TP groups stay
  inside a node.
- Distributed optimizer (Megatron's `--use-distributed-optimizer`, ZeRO-1): the fp32 master weights and
  optimizer moments are sharded over the dp x cp ranks, each updates its shard; the gradients are
  reduce-scattered and the updated weights all-gathered, the bytes of one all-reduce, overlapped with the
  backward as DDP's (Megatron's overlap_grad_reduce / overlap_param_gather).
- Pipeline parallel: 1F1B; the bubble is (p - 1) / (m + p - 1) of the step (Narayanan et al. 2021), stage
  hand-offs send one [tokens, d] activation per micro-batch each way. Interleaved 1F1B (virtual pipeline,
  `vp` chunks of L / (p x vp) layers per rank; Narayanan et al. 2021, section 2.2) shrinks the bubble to
  (p - 1) / vp micro-batch times and multiplies the hand-offs by vp, which overlap the other chunks'
  compute (Megatron's overlap_p2p_comm).
- Expert parallel (MoE models; Megatron's alltoall token dispatcher): the `ep` ranks of an expert group,
  drawn from a stage's tp x cp x dp GPUs, each hold E / ep whole experts (expert tensor parallel 1, as
  Megatron-Bridge's MoE recipes set) and run them over the token copies all ep ranks route to them; each
  MoE layer's dispatch and combine all-to-alls (one copy per chosen expert) run forward and again
  backward, on the critical path. With `ep_dispatcher="deepep"` (Megatron's flex dispatcher over DeepEP,
  the kernels DeepSeek built for Hopper: DeepSeek-V3 report, section 3.2.2) a token goes once to each rank
  holding one of its experts (not once per expert) and, past one node, once over InfiniBand to each other
  node holding one, then on by NVLink: the NVLink part is the fitted DeepEP kernel on one node
  (`dse.perf.collectives`), the network part the token copies to distinct remote nodes through each GPU's
  NIC; the step waits for the slower.
- Context parallel (Megatron's CP, ring attention): each of `cp` ranks holds seq / cp tokens of every
  sequence (two load-balanced chunks, so each does 1/cp of the causal attention work); K and V chunks
  travel round the ring, cp - 1 hops per layer forward and twice that backward (dK, dV), overlapped with
  the attention kernels; the weights are replicated over cp, so gradients reduce over dp x cp ranks.
  Without load balancing (`cp_load_balance` False: contiguous chunks, as plain ring attention splits a
  sequence) rank r attends its causal diagonal block and the r full blocks before it, so the last rank does
  (cp - 1/2) blocks of (seq / cp)^2 where a balanced rank does cp / 2, and sets the step (the causal
  imbalance of ring attention: Brandon et al. 2023, "Striped Attention", section 3).

Between nodes. `dse.perf.collectives` models one NVLink/PCIe node. A collective over more than
`GPUS_PER_NODE` GPUs is bounded by the network: NCCL runs one ring per NIC, so the NICs of the group's
GPUs in a node together carry the ring traffic, `bus_bw = g x NIC_BYTES_PER_S x NET_EFF` with g the group's
GPUs per node; the time is the larger of the intra-node model over those g and `wire_bytes(n) / bus_bw`.
A gradient group (dp x cp ranks) has GPUS_PER_NODE / tp GPUs in each node (`grad_ranks_per_node`): the
node's other GPUs belong to the other tp ranks' groups, which reduce at the same time through their own
NICs, so a tp 8 layout's gradients leave each node through one NIC, not eight. NOTE(dse): the NIC rates
are a GPU-independent assumption by architecture (not a catalog field): DGX H100 has eight 400 Gb/s
ConnectX-7 ports (one per GPU, 50 GB/s), DGX A100 eight 200 Gb/s HDR ports (25 GB/s), DGX-1 V100 four
100 Gb/s EDR ports for eight GPUs (6.25 GB/s per GPU) (NVIDIA DGX user guides); `NET_EFF` 0.8 is the
fraction of line rate NCCL's bus bandwidth reaches on such fabrics (E). Not in
../shared/reference/hardware-facts.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.errors import ConfigError
from dse.hardware.spec import GpuSpec
from dse.perf.collectives import collective_time_s, moe_exchange_bytes, wire_bytes
from dse.workload.sharding import MAX_GPUS

__all__ = [
    "EP_DISPATCHERS",
    "GPUS_PER_NODE",
    "NIC_BYTES_PER_S",
    "ParallelLayout",
    "bubble_frac",
    "ep_exchange_bytes",
    "ep_exchange_time_s",
    "group_collective_time_s",
]

GPUS_PER_NODE = 8
NIC_BYTES_PER_S: dict[str, float] = {"hopper": 50e9, "blackwell": 50e9, "ampere": 25e9, "volta": 6.25e9}
NET_EFF = 0.8
_NET_LATENCY_S = 5e-6  # per ring step across the network (E: InfiniBand ~2-5 us per hop)
EP_DISPATCHERS: tuple[str, ...] = ("alltoall", "deepep")


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelLayout:
    """GPUs and how they split the model: dp = num_gpus / (tp * pp * cp) data-parallel replicas (or shards);
    `vp` virtual-pipeline chunks per rank; `fsdp` (ZeRO-3) or `distributed_optimizer` (ZeRO-1)."""

    num_gpus: int = 1
    tp: int = 1
    pp: int = 1
    cp: int = 1
    vp: int = 1
    ep: int = 1
    fsdp: bool = False
    distributed_optimizer: bool = False
    tp_comm_overlap: bool = True
    cp_load_balance: bool = True
    ep_dispatcher: str = "alltoall"

    def __post_init__(self) -> None:
        if self.ep_dispatcher not in EP_DISPATCHERS:
            raise ConfigError(
                f"ep_dispatcher (--ep-dispatcher) '{self.ep_dispatcher}' is not one of "
                + ", ".join(EP_DISPATCHERS)
            )
        for name in ("num_gpus", "tp", "pp", "cp", "vp", "ep"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                flag = name.replace("_", "-")
                raise ConfigError(f"{name} (--{flag}) must be a positive integer, got {value!r}")
        if self.num_gpus > MAX_GPUS:  # 10^30 GPUs ran before (1e32 W)
            raise ConfigError(f"--num-gpus {self.num_gpus} is above the {MAX_GPUS:,} GPUs a layout may hold")
        split = self.tp * self.pp * self.cp
        if self.num_gpus % split:
            raise ConfigError(f"--num-gpus {self.num_gpus} is not a multiple of tp x pp x cp = {split}")
        if self.tp > GPUS_PER_NODE:
            raise ConfigError(
                f"tp {self.tp} spans nodes: tensor parallel groups stay within {GPUS_PER_NODE} GPUs"
            )
        stage = self.tp * self.cp * self.dp
        if stage % self.ep:
            raise ConfigError(
                f"ep {self.ep} (--ep) must divide the tp x cp x dp = {stage} GPUs of a pipeline stage (the "
                "expert-parallel group is drawn from them)"
            )
        if self.vp > 1 and self.pp == 1:
            raise ConfigError(f"vp {self.vp}: virtual pipeline chunks need pipeline parallelism (pp > 1)")
        if self.fsdp and self.ep > 1:
            raise ConfigError(
                "--ep with --fsdp: FSDP sharding of expert weights is not modelled (use the "
                "--distributed-optimizer)"
            )
        if self.fsdp and self.distributed_optimizer:
            raise ConfigError(
                "--fsdp and --distributed-optimizer: FSDP already shards the optimizer states (choose one)"
            )

    @property
    def dp(self) -> int:
        return self.num_gpus // (self.tp * self.pp * self.cp)

    @property
    def grad_ranks(self) -> int:
        """Ranks holding the same weights, over which gradients reduce (and FSDP or the distributed
        optimizer shard): dp x cp."""
        return self.dp * self.cp

    @property
    def grad_ranks_per_node(self) -> int:
        """Ranks of one gradient group (`grad_ranks`) in one node: ranks run tp fastest, then cp and dp
        (Megatron's order), so a node's GPUS_PER_NODE ranks hold GPUS_PER_NODE / tp of them."""
        return max(1, min(self.grad_ranks, GPUS_PER_NODE // self.tp))

    @property
    def optimizer_shards(self) -> int:
        """Ranks the optimizer state (master weights, moments) is split over."""
        return self.grad_ranks if self.fsdp or self.distributed_optimizer else 1


def bubble_frac(pp: int, num_microbatches: int, vp: int = 1) -> float:
    """Idle share of a 1F1B pipeline step: (p - 1) / (m + p - 1); interleaved, (p - 1) / (vp m + p - 1)."""
    return (pp - 1) / (vp * num_microbatches + pp - 1)


def _arch(gpu: GpuSpec) -> str:
    return str(gpu.architecture).lower()


def network_bus_bytes_per_s(gpu: GpuSpec, per_node: int = GPUS_PER_NODE) -> float:
    """Bus bandwidth of a collective that crosses nodes with `per_node` of its ranks in each node: their
    NICs (module docstring)."""
    return per_node * NIC_BYTES_PER_S.get(_arch(gpu), 25e9) * NET_EFF


def group_collective_time_s(
    collective: str, message_bytes: float, num_gpus: int, gpu: GpuSpec, per_node: int = GPUS_PER_NODE
) -> float:
    """One collective over `num_gpus` ranks, `per_node` of them in each node (a gradient group's:
    `ParallelLayout.grad_ranks_per_node`): the node model over those, bounded by the network past one node."""
    if num_gpus <= 1 or message_bytes <= 0:
        return 0.0
    per_node = max(1, min(per_node, num_gpus, GPUS_PER_NODE))
    inside = float(collective_time_s(collective, message_bytes, per_node, gpu)) if per_node > 1 else 0.0
    if num_gpus <= per_node:
        return inside
    steps = 2 * (num_gpus - 1) if collective == "all_reduce" else num_gpus - 1
    if collective == "all_to_all":
        # each GPU sends the (n - 8) / n of its message bound for other nodes through its own NIC
        remote = message_bytes * (num_gpus - GPUS_PER_NODE) / num_gpus
        across = (
            remote / (NIC_BYTES_PER_S.get(_arch(gpu), 25e9) * NET_EFF)
            + steps / GPUS_PER_NODE * _NET_LATENCY_S
        )
        return max(inside, across)
    wire = float(wire_bytes(collective, message_bytes, num_gpus, "nvswitch"))
    across = wire / network_bus_bytes_per_s(gpu, per_node) + steps / per_node * _NET_LATENCY_S
    return max(inside, across)


def ep_exchange_bytes(
    tokens: int, *, hidden_bytes: float, num_experts: int, topk: int, ep: int, dispatcher: str
) -> tuple[float, float]:
    """(message bytes per rank, bytes each GPU sends over its NIC) of one MoE dispatch or combine of `tokens`
    tokens of `hidden_bytes` each (module docstring): alltoall one copy per chosen expert (the network share
    is `group_collective_time_s`'s); deepep one per distinct rank, and over the network one per distinct
    other node, under uniform routing."""
    if dispatcher == "alltoall":
        return tokens * topk * hidden_bytes, 0.0

    def copies(groups: int) -> float:  # bytes to the distinct groups (ranks, nodes) holding a token's experts
        return float(
            moe_exchange_bytes(
                tokens, hidden_size=1, topk=topk, num_experts=num_experts, ep_size=groups,
                bytes_per_elem=hidden_bytes,
            )
        )  # fmt: skip

    message, nodes = copies(ep), ep // GPUS_PER_NODE
    if ep <= GPUS_PER_NODE:
        return message, 0.0
    if ep % GPUS_PER_NODE or num_experts % nodes:  # nodes holding unequal expert shares: per-rank copies
        return message, message * (ep - GPUS_PER_NODE) / ep
    # E[distinct nodes] = nodes x P(a given node hit): all but this node's share leaves through the NIC
    return message, copies(nodes) * (1.0 - 1.0 / nodes)


def ep_exchange_time_s(
    message_bytes: float, network_bytes: float, ep: int, dispatcher: str, gpu: GpuSpec
) -> float:
    """One MoE dispatch or combine over `ep` ranks (module docstring; bytes from `ep_exchange_bytes`)."""
    if dispatcher == "alltoall":
        return group_collective_time_s("all_to_all", message_bytes, ep, gpu)
    inside = 0.5 * sum(
        float(collective_time_s(name, message_bytes, min(ep, GPUS_PER_NODE), gpu, algorithm="deepep_ht"))
        for name in ("moe_dispatch", "moe_combine")
    )
    if ep <= GPUS_PER_NODE:
        return inside
    nic = NIC_BYTES_PER_S.get(_arch(gpu), 25e9) * NET_EFF
    return max(inside, network_bytes / nic + (ep // GPUS_PER_NODE - 1) * _NET_LATENCY_S)


def p2p_time_s(message_bytes: float, gpu: GpuSpec, *, across_nodes: bool) -> float:
    """One pipeline hand-off of `message_bytes` (NVLink inside a node, one NIC between nodes)."""
    if message_bytes <= 0:
        return 0.0
    link = gpu.interconnect
    if across_nodes or link is None:
        return message_bytes / (NIC_BYTES_PER_S.get(_arch(gpu), 25e9) * NET_EFF) + _NET_LATENCY_S
    return message_bytes / link.link_bw_bytes_per_s + link.latency_s


def link_energy_j(collective: str, message_bytes: float, num_gpus: int, gpu: GpuSpec) -> float:
    """Wire energy per GPU of one collective (the link's pJ/bit; network hops priced the same)."""
    if num_gpus <= 1 or gpu.interconnect is None:
        return 0.0
    wire = np.asarray(wire_bytes(collective, message_bytes, num_gpus, "nvswitch"), dtype=float)
    return float(wire) * 8.0 * gpu.interconnect.energy_j_per_bit

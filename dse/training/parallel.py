"""Parallel layout of a training step and the time of its communication (DESIGN.md sections 13-14).

    layout = ParallelLayout(num_gpus=64, tp=1, pp=1, fsdp=True)     # dp = 64 / (tp * pp)

- Data parallel: DDP all-reduces the gradients once per step, in buckets during the last micro-batch's
  backward; FSDP (ZeRO-3) all-gathers each layer's weights before its forward and again before its
  backward and reduce-scatters its gradients, every micro-batch, prefetched so they overlap compute.
- Tensor parallel (Megatron): two all-reduces of the layer's [tokens, d] activations per layer forward and
  two backward, exposed (on the critical path); TP groups stay inside a node.
- Pipeline parallel: 1F1B; the bubble is (p - 1) / (m + p - 1) of the step (Narayanan et al. 2021), stage
  hand-offs send one [tokens, d] activation per micro-batch each way.

Between nodes. `dse.perf.collectives` models one NVLink/PCIe node. A collective over more than
`GPUS_PER_NODE` GPUs is bounded by the network: NCCL runs one ring per NIC, so the node's NICs together
carry the ring traffic, `bus_bw = GPUS_PER_NODE x NIC_BYTES_PER_S x NET_EFF`; the time is the larger of the
intra-node model at 8 GPUs and `wire_bytes(n) / bus_bw`. NOTE(dse): the NIC rates are a GPU-independent
assumption by architecture (not a catalog field): DGX H100 has eight 400 Gb/s ConnectX-7 ports (one per
GPU, 50 GB/s), DGX A100 eight 200 Gb/s HDR ports (25 GB/s), DGX-1 V100 four 100 Gb/s EDR ports for eight
GPUs (6.25 GB/s per GPU) (NVIDIA DGX user guides); `NET_EFF` 0.8 is the fraction of line rate NCCL's
bus bandwidth reaches on such fabrics (E). Not in ../shared/reference/hardware-facts.md.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dse.errors import ConfigError
from dse.hardware.spec import GpuSpec
from dse.perf.collectives import collective_time_s, wire_bytes

__all__ = ["GPUS_PER_NODE", "NIC_BYTES_PER_S", "ParallelLayout", "bubble_frac", "group_collective_time_s"]

GPUS_PER_NODE = 8
NIC_BYTES_PER_S: dict[str, float] = {"hopper": 50e9, "blackwell": 50e9, "ampere": 25e9, "volta": 6.25e9}
NET_EFF = 0.8
_NET_LATENCY_S = 5e-6  # per ring step across the network (E: InfiniBand ~2-5 us per hop)


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelLayout:
    """GPUs and how they split the model: dp = num_gpus / (tp * pp) data-parallel replicas (or shards)."""

    num_gpus: int = 1
    tp: int = 1
    pp: int = 1
    fsdp: bool = False

    def __post_init__(self) -> None:
        for name in ("num_gpus", "tp", "pp"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if self.num_gpus % (self.tp * self.pp):
            raise ConfigError(
                f"--num-gpus {self.num_gpus} is not a multiple of tp x pp = {self.tp * self.pp}"
            )
        if self.tp > GPUS_PER_NODE:
            raise ConfigError(
                f"tp {self.tp} spans nodes: tensor parallel groups stay within {GPUS_PER_NODE} GPUs"
            )

    @property
    def dp(self) -> int:
        return self.num_gpus // (self.tp * self.pp)


def bubble_frac(pp: int, num_microbatches: int) -> float:
    """Idle share of a 1F1B pipeline step: (p - 1) / (m + p - 1)."""
    return (pp - 1) / (num_microbatches + pp - 1)


def _arch(gpu: GpuSpec) -> str:
    return str(gpu.architecture).lower()


def network_bus_bytes_per_s(gpu: GpuSpec) -> float:
    """Bus bandwidth of a collective that crosses nodes (module docstring)."""
    return GPUS_PER_NODE * NIC_BYTES_PER_S.get(_arch(gpu), 25e9) * NET_EFF


def group_collective_time_s(collective: str, message_bytes: float, num_gpus: int, gpu: GpuSpec) -> float:
    """One collective over `num_gpus` ranks: the node model, bounded by the network past one node."""
    if num_gpus <= 1 or message_bytes <= 0:
        return 0.0
    inside = float(collective_time_s(collective, message_bytes, min(num_gpus, GPUS_PER_NODE), gpu))
    if num_gpus <= GPUS_PER_NODE:
        return inside
    wire = float(wire_bytes(collective, message_bytes, num_gpus, "nvswitch"))
    steps = 2 * (num_gpus - 1) if collective == "all_reduce" else num_gpus - 1
    across = wire / network_bus_bytes_per_s(gpu) + steps / GPUS_PER_NODE * _NET_LATENCY_S
    return max(inside, across)


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

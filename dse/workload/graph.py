"""WorkloadGraph: the ordered operators of one workload (one forward pass, one decode step)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from dse.workload.ops import Op, op_kind


@dataclass(frozen=True, slots=True, kw_only=True)
class WorkloadGraph:
    """A sequence of ops in execution order; each op carries its own repeat `count`."""

    name: str
    ops: tuple[Op, ...]
    meta: dict[str, object] = field(default_factory=dict, hash=False, compare=False)

    def __iter__(self) -> Iterator[Op]:
        return iter(self.ops)

    def __len__(self) -> int:
        return len(self.ops)

    @property
    def num_kernels(self) -> int:
        """Kernel launches, counting repeats."""
        return sum(op.count for op in self.ops)

    def total_flop(self) -> float:
        return sum(op.flop * op.count for op in self.ops)

    def total_min_dram_bytes(self) -> float:
        return sum(op.min_dram_bytes * op.count for op in self.ops)

    def rows(self) -> list[dict[str, object]]:
        """One dict per op: name, kind, count, FLOP and bytes per execution and in total."""
        return [
            {
                "name": op.name,
                "kind": op_kind(op),
                "count": op.count,
                "flop": op.flop,
                "min_dram_bytes": op.min_dram_bytes,
                "total_flop": op.flop * op.count,
                "total_min_dram_bytes": op.min_dram_bytes * op.count,
            }
            for op in self.ops
        ]

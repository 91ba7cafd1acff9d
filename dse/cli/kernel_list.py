"""A kernel list as `dse predict --kernels` and `dse workload show --kernels` read it: the EnergAIzer-format
file (`dse.workload.energaizer`), re-typed by `--precision` where given, and checked against the GPU's
Tensor Cores, an error naming the file and the entry as the list's other errors do."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dse.errors import ConfigError


def kernel_list_graph(path: Path, precision: str | None, gpu: Any = None) -> tuple[Any, str | None]:
    """(the graph of the list at `path`, a note for stderr or None). `precision` None prices the dtypes
    the list records; bf16, fp16 or fp32 re-type it (`dse.workload.energaizer.as_precision`). On `gpu`
    (when given) a GEMM whose dtype it has no Tensor Cores for is an error, as serving refuses it, except
    TF32: that runs in FP32 on the CUDA cores of a GPU without it (`dse.perf.rates`), and the note says so."""
    from dse.workload.energaizer import as_precision, load_kernel_list

    graph = load_kernel_list(path)
    if precision is not None:
        graph = as_precision(graph, precision)
    if gpu is None:
        return graph, None
    _check_tensor_cores(graph, gpu, precision)
    return graph, _tf32_note(graph, gpu)


def _check_tensor_cores(graph: Any, gpu: Any, precision: str | None) -> None:
    """ConfigError naming the list's first GEMM whose dtype `gpu` has no Tensor Cores for, and the
    --precision that runs the list on those it has. Until session 36 it named no file or entry and advised
    --precision fp32 for every dtype: CUDA-core FP32, 15x slower than the bf16 an A100 has for fp8."""
    from dse.perf.rates import check_tensor_dtype
    from dse.workload.energaizer import entry_of
    from dse.workload.ops import GemmOp

    rates = gpu.sm.tensor_flop_per_clk
    for op in graph.ops:
        if not isinstance(op, GemmOp) or op.dtype in ("fp32", "tf32", *rates):
            continue
        index, label = entry_of(op.name)
        halves = [d for d in ("bf16", "fp16") if d in rates]
        if halves:
            remedy = (
                f"--precision {' or '.join(halves)} runs the list's 16-bit and narrower Tensor-Core GEMMs "
                "in that type, which this GPU has"
            )
        else:
            remedy = (
                "no --precision fits its Tensor Cores; --precision fp32 runs every GEMM on the CUDA cores"
            )
        given = "" if precision is None else f"; --precision {precision}"
        try:
            check_tensor_dtype(gpu, op.dtype, remedy)
        except ConfigError as exc:
            source = graph.meta.get("source", graph.name)
            raise ConfigError(f"{source}: entry {index} ({label}, {op.dtype}{given}): {exc}") from None


def _tf32_note(graph: Any, gpu: Any) -> str | None:
    from dse.workload.ops import GemmOp

    if "tf32" in gpu.sm.tensor_flop_per_clk:
        return None
    num = sum(op.count for op in graph.ops if isinstance(op, GemmOp) and op.dtype == "tf32")
    if not num:
        return None
    return (
        f"note: {gpu.name} has no TF32 Tensor Cores: the list's TF32 GEMMs and convolutions ({num} launches, "
        "fp32 on Tensor Cores) are priced in FP32 on the CUDA cores, as cuBLAS and cuDNN run them there"
    )

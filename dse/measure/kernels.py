"""Torch launchers: one op -> a ready-to-run kernel on the GPU (the harness's `Launcher`).

torch is imported inside functions only (`import dse` and `import dse.measure.kernels` never import it);
without torch, `TorchLauncher()` raises `MeasurementError("dse measure needs PyTorch: pip install torch")`.

What each op runs (eager PyTorch, as the models in `model_run` do):

    GemmOp        F.linear(x[m,k], W[n,k]) (weights as nn.Linear stores them); batched: torch.bmm;
                  fp8: torch._scaled_mm (per-tensor scales, bf16 out; compute capability >= 8.9);
                  tf32: fp32 with allow_tf32 (restored on release)
    AttentionOp   flash/decode: F.scaled_dot_product_attention restricted to the flash backend (GQA via
                  enable_gqa, bottom-right causal mask when seq_len_q < seq_len_kv); eager: q k^T, mask add,
                  softmax, p v as separate kernels (Hugging Face "eager")
    SoftmaxOp     torch.softmax over the last dim
    NormOp        F.layer_norm / F.rms_norm with affine weights
    ElementwiseOp add, mul, scale, cast, copy, relu, gelu (tanh), silu, silu_mul, gelu_mul, tanh, rotary, exp

Inputs are random normal (power depends on operand values: zeros would under-read, hardware-facts 5.3).
When one call's operands fit in L2, calls rotate over several input copies (up to 8, about twice the L2)
so that weights come from DRAM as they do in a model. Ops shorter than ~50 us are captured in a CUDA
graph of many calls, so launch overhead does not leave the GPU idle inside the window.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

from dse.errors import MeasurementError
from dse.measure.harness import UnsupportedOpError
from dse.measure.names import main_kernel
from dse.workload.ops import AttentionOp, ElementwiseOp, GemmOp, NormOp, Op, SoftmaxOp

logger = logging.getLogger(__name__)

TORCH_HINT = "dse measure needs PyTorch: pip install torch"
GRAPH_BELOW_S = 50e-6  # capture ops shorter than this in a CUDA graph
GRAPH_SPAN_S = 1e-3  # ... of about this many seconds of calls
MAX_INPUT_COPIES = 8


def import_torch() -> Any:
    """Import torch or raise MeasurementError with the install hint."""
    try:
        import torch
    except ImportError as exc:
        raise MeasurementError(TORCH_HINT) from exc
    return torch


def torch_dtype(torch: Any, dtype: str) -> Any:
    table = {
        "fp32": torch.float32,
        "tf32": torch.float32,
        "bf16": torch.bfloat16,
        "fp16": torch.float16,
        "fp8": getattr(torch, "float8_e4m3fn", None),
    }
    value = table.get(dtype)
    if value is None:
        raise UnsupportedOpError(f"dtype {dtype} is not available in this PyTorch build")
    return value


class TorchKernel:
    """An op with allocated inputs; `run(n)` enqueues n calls (graph replays where captured) and syncs."""

    def __init__(
        self, torch: Any, op: Op, call: Callable[[], Any], *, restore: Callable[[], None] | None = None
    ):
        self._torch = torch
        self.op = op
        self._call = call
        self._restore = restore
        self._graph: Any = None
        self.calls_per_graph = 1
        self.kernel_name = ""
        self.kernel_names: list[tuple[str, float]] = []
        self.latency_guess_s = math.nan

    def _time_calls(self, num: int) -> float:
        torch = self._torch
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(num):
            self._call()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) * 1e-3 / num  # ms -> s

    def setup(self, *, profile: bool = True, use_graphs: bool = True) -> TorchKernel:
        """First calls (cuBLAS heuristics, lazy init), latency guess, kernel names, optional CUDA graph."""
        self._time_calls(2)
        self.latency_guess_s = self._time_calls(5)
        if profile:
            self.kernel_names = profile_kernels(self._torch, self._call)
            self.kernel_name = main_kernel(self.kernel_names)
        if use_graphs and self.latency_guess_s < GRAPH_BELOW_S:
            self._capture(max(1, min(2000, math.ceil(GRAPH_SPAN_S / max(self.latency_guess_s, 1e-7)))))
        return self

    def _capture(self, calls: int) -> None:
        torch = self._torch
        try:
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                for _ in range(3):
                    self._call()
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                for _ in range(calls):
                    self._call()
            torch.cuda.synchronize()
        except Exception as exc:  # some ops (host syncs, RNG) cannot be captured: run eagerly
            logger.info("%s: no CUDA graph (%s); running eagerly", self.op.name, exc)
            torch.cuda.synchronize()
            return
        self._graph, self.calls_per_graph = graph, calls

    def run(self, num_calls: int) -> int:
        if self._graph is not None:
            replays = max(1, math.ceil(num_calls / self.calls_per_graph))
            for _ in range(replays):
                self._graph.replay()
            done = replays * self.calls_per_graph
        else:
            for _ in range(num_calls):
                self._call()
            done = num_calls
        self._torch.cuda.synchronize()
        return done

    def release(self) -> None:
        self._graph = None
        self._call = _released
        if self._restore is not None:
            self._restore()
            self._restore = None
        self._torch.cuda.empty_cache()


def _released() -> None:
    raise RuntimeError("kernel released")


def profile_kernels(torch: Any, call: Callable[[], Any]) -> list[tuple[str, float]]:
    """(kernel name, device seconds) of the CUDA kernels one call launches (empty if profiling fails)."""
    try:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            call()
            torch.cuda.synchronize()
        out = []
        for evt in prof.events():
            if str(getattr(evt, "device_type", "")).endswith("CUDA"):
                out.append((evt.name, evt.time_range.elapsed_us() * 1e-6))
        return out
    except Exception as exc:  # CUPTI missing or busy: names are optional
        logger.info("kernel names unavailable: %s", exc)
        return []


class TorchLauncher:
    """Prepares ops as TorchKernels on one CUDA device (the harness's launcher).

    Args:
        device_index: CUDA device (the same GPU as the NvmlGpu; CUDA_VISIBLE_DEVICES can reorder).
        seed: seeds the random inputs.
        profile: record kernel names with the torch profiler.
        use_graphs: capture short ops in CUDA graphs.
        rotate_inputs: rotate over input copies for ops whose operands fit in L2.
    """

    def __init__(
        self,
        device_index: int = 0,
        *,
        seed: int = 0,
        profile: bool = True,
        use_graphs: bool = True,
        rotate_inputs: bool = True,
    ) -> None:
        torch = import_torch()
        if not torch.cuda.is_available():
            raise MeasurementError(
                f"PyTorch sees no CUDA GPU (torch {torch.__version__}, CUDA "
                f"{torch.version.cuda}): dse measure needs a CUDA build of PyTorch and a GPU"
            )
        self._torch = torch
        self.device = torch.device("cuda", device_index)
        torch.cuda.set_device(self.device)
        self._gen = torch.Generator(device=self.device)
        self._gen.manual_seed(seed)
        self.profile = profile
        self.use_graphs = use_graphs
        self.rotate_inputs = rotate_inputs
        props = torch.cuda.get_device_properties(self.device)
        self.l2_bytes = float(getattr(props, "L2_cache_size", 50 * 2**20))
        self.capability = (props.major, props.minor)

    def _randn(self, *shape: int, dtype: Any) -> Any:
        torch = self._torch
        make = torch.float32 if dtype == getattr(torch, "float8_e4m3fn", None) else dtype
        x = torch.randn(*shape, device=self.device, dtype=make, generator=self._gen)
        return x.to(dtype) if make is not dtype else x

    def _copies(self, op: Op) -> int:
        if not self.rotate_inputs or op.min_dram_bytes >= self.l2_bytes:
            return 1
        free, _ = self._torch.cuda.mem_get_info(self.device)
        want = math.ceil(2 * self.l2_bytes / max(op.min_dram_bytes, 1.0))
        fit = int(0.5 * free // max(op.min_dram_bytes, 1.0))
        return max(1, min(MAX_INPUT_COPIES, want, fit))

    def _check_fits(self, op: Op, extra_bytes: float = 0.0) -> None:
        free, _ = self._torch.cuda.mem_get_info(self.device)
        if op.min_dram_bytes + extra_bytes > 0.8 * free:
            raise UnsupportedOpError(
                f"needs {(op.min_dram_bytes + extra_bytes) / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free"
            )

    def prepare(self, op: Op) -> TorchKernel:
        """Allocate inputs for `op`, run it once, and return it ready to measure.

        Raises:
            UnsupportedOpError: dtype, backend or size this GPU/PyTorch cannot run.
        """
        builders: dict[type, Callable[[Any], tuple[Callable[[], Any], Callable[[], None] | None]]] = {
            GemmOp: self._gemm,
            AttentionOp: self._attention,
            SoftmaxOp: self._softmax,
            NormOp: self._norm,
            ElementwiseOp: self._elementwise,
        }
        self._check_fits(op)
        call, restore = builders[type(op)](op)
        kernel = TorchKernel(self._torch, op, call, restore=restore)
        try:
            return kernel.setup(profile=self.profile, use_graphs=self.use_graphs)
        except UnsupportedOpError:
            kernel.release()
            raise
        except RuntimeError as exc:  # a backend refusing the shape or dtype at run time
            kernel.release()
            raise UnsupportedOpError(f"{op.name}: {exc}".splitlines()[0]) from exc

    # ---- builders: each returns (one-call closure, restore-or-None)
    def _cycle(self, sets: list[Any], fn: Callable[..., Any]) -> Callable[[], Any]:
        state = {"i": 0}

        def call() -> Any:
            args = sets[state["i"] % len(sets)]
            state["i"] += 1
            return fn(*args)

        return call

    def _gemm(self, op: GemmOp) -> tuple[Callable[[], Any], Callable[[], None] | None]:
        torch = self._torch
        F = torch.nn.functional
        dt = torch_dtype(torch, op.dtype)
        copies = self._copies(op)
        if op.dtype == "fp8":
            if self.capability < (8, 9):
                raise UnsupportedOpError(
                    f"fp8 GEMMs need compute capability >= 8.9, this GPU is {self.capability}"
                )
            if op.batch > 1 and not op.b_shared:
                raise UnsupportedOpError("batched fp8 GEMMs are not supported by torch._scaled_mm")
            out_dt = torch_dtype(torch, op.c_dtype)
            one = torch.ones((), device=self.device, dtype=torch.float32)
            sets = [
                (self._randn(op.batch * op.m, op.k, dtype=dt), self._randn(op.n, op.k, dtype=dt).t())
                for _ in range(copies)
            ]
            return self._cycle(
                sets, lambda a, b: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=out_dt)
            ), None
        previous = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = op.dtype == "tf32"

        def restore() -> None:
            torch.backends.cuda.matmul.allow_tf32 = previous

        if op.batch == 1 or op.b_shared:
            sets = [
                (self._randn(op.batch * op.m, op.k, dtype=dt), self._randn(op.n, op.k, dtype=dt))
                for _ in range(copies)
            ]
            return self._cycle(sets, F.linear), restore
        sets = [
            (self._randn(op.batch, op.m, op.k, dtype=dt), self._randn(op.batch, op.k, op.n, dtype=dt))
            for _ in range(copies)
        ]
        return self._cycle(sets, torch.bmm), restore

    def _attention(self, op: AttentionOp) -> tuple[Callable[[], Any], None]:
        torch = self._torch
        F = torch.nn.functional
        dt = torch_dtype(torch, op.dtype)
        b, h, kv, d, sq, skv = (
            op.batch,
            op.num_heads,
            op.num_kv_heads,
            op.head_dim,
            op.seq_len_q,
            op.seq_len_kv,
        )
        q = self._randn(b, h, sq, d, dtype=dt)
        k = self._randn(b, kv, skv, d, dtype=dt)
        v = self._randn(b, kv, skv, d, dtype=dt)
        bottom_right = op.causal and 1 < sq < skv
        if op.backend == "eager":
            if kv != h:  # Hugging Face `repeat_kv`, done once here rather than every call
                k, v = k.repeat_interleave(h // kv, dim=1), v.repeat_interleave(h // kv, dim=1)
            kt = k.transpose(-1, -2).contiguous()
            q = q * (1.0 / math.sqrt(d))
            mask = None
            if op.causal and sq > 1:
                offset = skv - sq  # query i sees keys <= i + offset
                keep = torch.ones(sq, skv, device=self.device, dtype=torch.bool).tril(diagonal=offset)
                mask = torch.zeros(sq, skv, device=self.device, dtype=dt).masked_fill(~keep, float("-inf"))

            def eager() -> Any:
                scores = torch.matmul(q, kt)
                if mask is not None:
                    scores = scores + mask
                return torch.matmul(torch.softmax(scores, dim=-1), v)

            return eager, None
        from torch.nn.attention import SDPBackend, sdpa_kernel

        attn_mask = None
        if bottom_right:
            from torch.nn.attention.bias import causal_lower_right

            attn_mask = causal_lower_right(sq, skv)
        is_causal = op.causal and sq == skv and sq > 1
        gqa = {"enable_gqa": True} if kv != h else {}

        def flash() -> Any:
            with sdpa_kernel([SDPBackend.FLASH_ATTENTION]):
                return F.scaled_dot_product_attention(
                    q, k, v, attn_mask=attn_mask, is_causal=is_causal, **gqa
                )

        try:
            flash()
        except (RuntimeError, TypeError) as exc:
            raise UnsupportedOpError(
                f"flash attention refused {op.name}: {str(exc).splitlines()[0]}"
            ) from exc
        return flash, None

    def _softmax(self, op: SoftmaxOp) -> tuple[Callable[[], Any], None]:
        torch = self._torch
        sets = [
            (self._randn(op.rows, op.cols, dtype=torch_dtype(torch, op.dtype)),)
            for _ in range(self._copies(op))
        ]
        return self._cycle(sets, lambda x: torch.softmax(x, dim=-1)), None

    def _norm(self, op: NormOp) -> tuple[Callable[[], Any], None]:
        torch = self._torch
        F = torch.nn.functional
        dt = torch_dtype(torch, op.dtype)
        w = self._randn(op.cols, dtype=dt)
        bias = self._randn(op.cols, dtype=dt)
        sets = [(self._randn(op.rows, op.cols, dtype=dt),) for _ in range(self._copies(op))]
        if op.kind == "layernorm":
            return self._cycle(sets, lambda x: F.layer_norm(x, (op.cols,), w, bias, 1e-5)), None
        if hasattr(F, "rms_norm"):
            return self._cycle(sets, lambda x: F.rms_norm(x, (op.cols,), w, 1e-5)), None

        def rms(x: Any) -> Any:  # torch < 2.4: the Hugging Face LlamaRMSNorm formula
            xf = x.float()
            return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-5)).to(dt) * w

        return self._cycle(sets, rms), None

    def _elementwise(self, op: ElementwiseOp) -> tuple[Callable[[], Any], None]:
        torch = self._torch
        F = torch.nn.functional
        dt = torch_dtype(torch, op.dtype)
        out_dt = torch_dtype(torch, op.out_dtype or op.dtype)
        n = op.num_elements
        kinds: dict[str, Callable[..., Any]] = {
            "add": torch.add,
            "mul": torch.mul,
            "scale": lambda a: a * 0.5,
            "cast": lambda a: a.to(out_dt),
            "relu": torch.relu,
            "gelu": lambda a: F.gelu(a, approximate="tanh"),
            "silu": F.silu,
            "silu_mul": lambda a, b: F.silu(a) * b,
            "gelu_mul": lambda a, b: F.gelu(a, approximate="tanh") * b,
            "tanh": torch.tanh,
            "exp": torch.exp,
        }
        copies = self._copies(op)
        sets: list[tuple[Any, ...]]
        if op.kind == "copy":
            sets = [
                (self._randn(n, dtype=dt), torch.empty(n, device=self.device, dtype=out_dt))
                for _ in range(copies)
            ]
            return self._cycle(sets, lambda src, dst: dst.copy_(src)), None
        if op.kind == "rotary":
            # rows of head_dim 128 rotated with cached cos/sin (Hugging Face `apply_rotary_pos_emb`)
            d = 128
            rows = max(1, n // d)
            cos, sin = self._randn(rows, d, dtype=dt), self._randn(rows, d, dtype=dt)

            def rotary(x: Any) -> Any:
                x1, x2 = x[..., : d // 2], x[..., d // 2 :]
                return x * cos + torch.cat((-x2, x1), dim=-1) * sin

            sets = [(self._randn(rows, d, dtype=dt),) for _ in range(copies)]
            return self._cycle(sets, rotary), None
        fn = kinds.get(op.kind)
        if fn is None:
            raise UnsupportedOpError(f"no launcher for elementwise kind {op.kind}")
        sets = [tuple(self._randn(n, dtype=dt) for _ in range(op.num_inputs)) for _ in range(copies)]
        return self._cycle(sets, fn), None

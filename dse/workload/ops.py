"""Workload operators: immutable values with shapes, dtype, a repeat count and a hierarchical name.

Names follow Smaragdine's qualified names, e.g. `llama-3.1-8b/layer[0-31]/attn/qkv_proj`: a repeated layer
is one op with `count=32`, computed once and multiplied. FLOP and byte counts are per single execution
(multiply by `count` for the total). `min_dram_bytes` is the compulsory traffic: every input read once and
every output written once, the floor any kernel's DRAM traffic must reach.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from dse.errors import ShapeError

Dtype = Literal["fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4"]
DTYPES: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8", "int8", "fp4")
AttentionBackend = Literal["flash", "eager", "decode"]
NormKind = Literal["layernorm", "rmsnorm"]

# Storage size; tf32 is stored as fp32.
BYTES_PER_ELEMENT: dict[str, float] = {
    "fp32": 4.0,
    "tf32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "fp4": 0.5,
}

# Elementwise kinds: CUDA-core FLOP and SFU (transcendental) ops per element, input and output counts.
# Counts are per element of the canonical implementation (e.g. tanh-GELU: ~8 FMA-class ops + 1 tanh).
ELEMENTWISE_KINDS: dict[str, tuple[float, float, int, int]] = {
    # kind: (flop_per_element, sfu_op_per_element, num_inputs, num_outputs)
    "add": (1.0, 0.0, 2, 1),
    "mul": (1.0, 0.0, 2, 1),
    "scale": (1.0, 0.0, 1, 1),  # tensor x scalar or tensor + scalar
    "cast": (0.0, 0.0, 1, 1),
    "copy": (0.0, 0.0, 1, 1),
    "relu": (1.0, 0.0, 1, 1),
    "gelu": (8.0, 1.0, 1, 1),  # tanh approximation
    "silu": (4.0, 1.0, 1, 1),  # x * sigmoid(x): exp on the SFU
    "silu_mul": (5.0, 1.0, 2, 1),  # gated MLP: silu(gate) * up, fused
    "gelu_mul": (9.0, 1.0, 2, 1),
    "tanh": (1.0, 1.0, 1, 1),
    "rotary": (6.0, 0.0, 1, 1),  # q/k rotation with cached cos/sin (the tables' reads count as one input)
    "exp": (1.0, 1.0, 1, 1),
    # Depthwise convolutions (one R x S filter per channel, over the outputs): 2 R S FLOP per output and
    # far too little reuse for the tensor cores, so cuDNN (and PyTorch's own kernels, `_aten`) run them as
    # memory-bound CUDA-core kernels (`dse.perf.depthwise`). The data gradient reads dy and writes dx;
    # cuDNN's weight gradient reads x and dy and writes only the R x S filters (PyTorch's: a per-tap copy,
    # `dse.workload.backward`).
    "depthwise3x3": (18.0, 0.0, 1, 1),
    "depthwise5x5": (50.0, 0.0, 1, 1),
    "depthwise3x3_dgrad": (18.0, 0.0, 1, 1),
    "depthwise5x5_dgrad": (50.0, 0.0, 1, 1),
    "depthwise3x3_wgrad": (18.0, 0.0, 2, 0),
    "depthwise5x5_wgrad": (50.0, 0.0, 2, 0),
    "depthwise3x3_aten": (18.0, 0.0, 1, 1),
    "depthwise5x5_aten": (50.0, 0.0, 1, 1),
    "depthwise3x3_aten_dgrad": (18.0, 0.0, 1, 1),
    "depthwise5x5_aten_dgrad": (50.0, 0.0, 1, 1),
    # Training-mode batch norm (`dse.workload.vision`): a statistics pass that only reads (per-channel sums
    # over N x H x W, written as a few numbers per channel), a normalize pass (x - mean) * invstd * w + b;
    # backward a reduction over x and dy, then dx from x and dy.
    "bn_stats": (2.0, 0.0, 1, 0),
    "bn_apply": (2.0, 0.0, 1, 1),
    "bn_bwd_reduce": (3.0, 0.0, 2, 0),
    "bn_bwd_apply": (4.0, 0.0, 2, 1),
    # A row reduction (eager PyTorch's `mean` / `sum` over the last dimension, `dse.training.eager`): reads
    # every element, writes one per row (negligible).
    "reduce": (1.0, 0.0, 1, 0),
    # Gated DeltaNet (`dse.workload.linear_attention`): a causal depthwise conv1d of width 4 and its SiLU
    # (8 + 4 FLOP, one exp) per channel and token; the decode recurrence over each dk x dv state element:
    # decay, its share of k^T S, the rank-1 update and q^T S (7 FLOP), read and written once.
    "conv4_silu": (12.0, 1.0, 1, 1),
    "delta_rule": (7.0, 0.0, 1, 1),
}


# The largest dimension of an op: 2^53, the last integer a float holds exactly. Kernel lists (user files)
# give element counts past 2^31 (a batch of attention scores), but a larger one is a typo or hostile input
# whose FLOPs and bytes would overflow the float arithmetic of the kernel model.
MAX_OP_DIM = 2**53


def _check_positive(op: object, *fields: str) -> None:
    for field in fields:
        value = getattr(op, field)
        if not isinstance(value, int) or isinstance(value, bool) or not 0 < value <= MAX_OP_DIM:
            where = f"{type(op).__name__} '{getattr(op, 'name', '')}'"
            shown = (
                value
                if not isinstance(value, int) or value.bit_length() < 64
                else f"about 2^{value.bit_length()}"
            )
            big = isinstance(value, int) and not isinstance(value, bool) and value > MAX_OP_DIM
            why = " (a batch, length or model dimension too large)" if big else ""
            raise ShapeError(f"{where}: {field} must be a positive integer up to 2^53, got {shown!r}{why}")


def _check_dtype(op: object, *fields: str) -> None:
    for field in fields:
        value = getattr(op, field)
        if value is not None and value not in BYTES_PER_ELEMENT:
            raise ValueError(f"{type(op).__name__}: {field} '{value}' is not one of {', '.join(DTYPES)}")


@dataclass(frozen=True, slots=True, kw_only=True)
class GemmOp:
    """C[batch, m, n] = A[batch, m, k] @ B[batch or 1, k, n].

    `dtype` is the input dtype: `fp32` runs on CUDA cores, `tf32` is fp32 data on Tensor Cores, the rest on
    Tensor Cores. `out_dtype` defaults to the input dtype (fp8/int8 GEMMs usually write bf16).
    `b_shared`: B is one matrix shared by all batch entries (a weight), read once.
    `act_quant`: an 8-bit GEMM whose kernel estimate includes the dynamic quantization of its activation
    input (vLLM's per-tensor `scaled_fp8_quant`, two short kernels); graphs that quantize in an op of their
    own (`*_quant`) leave it False.
    `b_dtype`: the storage dtype of B (the weights) when it differs from `dtype`: weight-only quantization
    such as MXFP4 experts with bf16 activations (W4A16). B is read at its own bytes; the MMAs run in
    `dtype` unless the GPU has Tensor Cores for `b_dtype` (`dse.perf.moe.math_dtype`).
    `grouped`: a fused-MoE grouped GEMM (vLLM `fused_moe`): `batch` experts, each with its own weights
    (`b_shared` False) and its own routed rows; priced with the MoE kernel correction
    (`dse.perf.moe`).
    """

    name: str
    m: int
    n: int
    k: int
    batch: int = 1
    dtype: Dtype = "bf16"
    out_dtype: Dtype | None = None
    b_shared: bool = False
    act_quant: bool = False
    b_dtype: Dtype | None = None
    grouped: bool = False
    count: int = 1

    def __post_init__(self) -> None:
        _check_positive(self, "m", "n", "k", "batch", "count")
        _check_dtype(self, "dtype", "out_dtype", "b_dtype")

    @property
    def c_dtype(self) -> str:
        return self.out_dtype or ("fp32" if self.dtype == "tf32" else self.dtype)

    @property
    def weight_dtype(self) -> str:
        """Storage dtype of B (`b_dtype`, else `dtype`)."""
        return self.b_dtype or self.dtype

    @property
    def flop(self) -> float:
        return 2.0 * self.batch * self.m * self.n * self.k

    @property
    def min_dram_bytes(self) -> float:
        in_b = BYTES_PER_ELEMENT[self.dtype]
        b_batches = 1 if self.b_shared else self.batch
        return (
            self.batch * self.m * self.k * in_b
            + b_batches * self.k * self.n * BYTES_PER_ELEMENT[self.weight_dtype]
            + self.batch * self.m * self.n * BYTES_PER_ELEMENT[self.c_dtype]
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionOp:
    """Scaled-dot-product attention over `batch` sequences; GQA when num_kv_heads < num_heads.

    The queries are the last `seq_len_q` positions of a context of `seq_len_kv` tokens (prefill: equal;
    one decode step: seq_len_q = 1). Backends: `flash` (one fused kernel), `eager` (QK^T GEMM, softmax and
    PV GEMM with the score matrix in DRAM), `decode` (flash-decoding over the KV cache with split-KV).
    """

    name: str
    batch: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    seq_len_q: int
    seq_len_kv: int
    causal: bool = True
    backend: AttentionBackend = "flash"
    dtype: Dtype = "bf16"
    kv_dtype: Dtype | None = None
    count: int = 1

    def __post_init__(self) -> None:
        _check_positive(
            self, "batch", "num_heads", "num_kv_heads", "head_dim", "seq_len_q", "seq_len_kv", "count"
        )
        _check_dtype(self, "dtype", "kv_dtype")
        if self.num_heads % self.num_kv_heads:
            raise ValueError(
                f"AttentionOp '{self.name}': num_heads {self.num_heads} is not a multiple of num_kv_heads "
                f"{self.num_kv_heads}"
            )
        if self.seq_len_q > self.seq_len_kv:
            raise ValueError(
                f"AttentionOp '{self.name}': seq_len_q {self.seq_len_q} exceeds seq_len_kv {self.seq_len_kv}"
            )
        if self.backend not in ("flash", "eager", "decode"):
            raise ValueError(
                f"AttentionOp '{self.name}': backend '{self.backend}' is not flash, eager or decode"
            )

    @property
    def cache_dtype(self) -> str:
        return self.kv_dtype or self.dtype

    @property
    def num_score_pairs(self) -> float:
        """(query, key) pairs evaluated per head and sequence, honouring the causal mask."""
        sq, skv = self.seq_len_q, self.seq_len_kv
        if not self.causal:
            return float(sq * skv)
        # Query i (0-based within the last sq positions) sees skv - sq + i + 1 keys.
        return float(sq * (skv - sq) + sq * (sq + 1) / 2)

    @property
    def flop(self) -> float:
        """QK^T and PV matmuls: 2 x 2 x d FLOP per (query, key) pair and head."""
        return 4.0 * self.batch * self.num_heads * self.head_dim * self.num_score_pairs

    @property
    def min_dram_bytes(self) -> float:
        act_b = BYTES_PER_ELEMENT[self.dtype]
        kv_b = BYTES_PER_ELEMENT[self.cache_dtype]
        q_and_o = 2 * self.batch * self.seq_len_q * self.num_heads * self.head_dim * act_b
        kv = 2 * self.batch * self.seq_len_kv * self.num_kv_heads * self.head_dim * kv_b
        return q_and_o + kv


@dataclass(frozen=True, slots=True, kw_only=True)
class SoftmaxOp:
    """Row softmax over the last dimension of a [rows, cols] tensor."""

    name: str
    rows: int
    cols: int
    dtype: Dtype = "bf16"
    count: int = 1

    def __post_init__(self) -> None:
        _check_positive(self, "rows", "cols", "count")
        _check_dtype(self, "dtype")

    @property
    def flop(self) -> float:
        return 4.0 * self.rows * self.cols  # max, subtract, sum, divide; exp counted as SFU work

    @property
    def min_dram_bytes(self) -> float:
        return 2.0 * self.rows * self.cols * BYTES_PER_ELEMENT[self.dtype]


@dataclass(frozen=True, slots=True, kw_only=True)
class NormOp:
    """LayerNorm or RMSNorm over the last dimension of [rows, cols], with an affine weight."""

    name: str
    rows: int
    cols: int
    kind: NormKind = "layernorm"
    dtype: Dtype = "bf16"
    count: int = 1

    def __post_init__(self) -> None:
        _check_positive(self, "rows", "cols", "count")
        _check_dtype(self, "dtype")
        if self.kind not in ("layernorm", "rmsnorm"):
            raise ValueError(f"NormOp '{self.name}': kind '{self.kind}' is not layernorm or rmsnorm")

    @property
    def flop(self) -> float:
        per_element = 8.0 if self.kind == "layernorm" else 5.0
        return per_element * self.rows * self.cols

    @property
    def min_dram_bytes(self) -> float:
        b = BYTES_PER_ELEMENT[self.dtype]
        return 2.0 * self.rows * self.cols * b + self.cols * b * (2 if self.kind == "layernorm" else 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class ElementwiseOp:
    """A streaming elementwise kernel of `kind` (see ELEMENTWISE_KINDS) over `num_elements` elements (its
    outputs; a kind without an output, a reduction pass, reads that many per input)."""

    name: str
    kind: str
    num_elements: int
    dtype: Dtype = "bf16"
    out_dtype: Dtype | None = None
    count: int = 1
    # Batch norm at its library's launch configuration (`dse.perf.batchnorm`): ATen's kernels ("nhwc",
    # "nchw"; bf16) or cuDNN's NCHW ones ("cudnn-nchw"); batch and channels size the grid. "" (default):
    # a streaming kernel.
    bn_layout: str = ""
    bn_batch: int = 0
    bn_channels: int = 0

    def __post_init__(self) -> None:
        _check_positive(self, "num_elements", "count")
        _check_dtype(self, "dtype", "out_dtype")
        if self.kind not in ELEMENTWISE_KINDS:
            kinds = ", ".join(ELEMENTWISE_KINDS)
            raise ValueError(f"ElementwiseOp '{self.name}': kind '{self.kind}' is not one of {kinds}")
        if self.bn_layout:
            per_plane = self.bn_batch * self.bn_channels
            if (
                self.bn_layout not in ("nhwc", "nchw", "cudnn-nchw")
                or not self.kind.startswith("bn_")
                or per_plane <= 0
                or self.num_elements % per_plane
            ):
                raise ValueError(
                    f"ElementwiseOp '{self.name}': bn_layout needs a bn_* kind, layout nhwc, nchw or "
                    "cudnn-nchw and a positive bn_batch x bn_channels dividing num_elements"
                )

    @property
    def num_inputs(self) -> int:
        return ELEMENTWISE_KINDS[self.kind][2]

    @property
    def num_outputs(self) -> int:
        """1, or 0 for a reduction pass whose per-channel results are negligible traffic."""
        return ELEMENTWISE_KINDS[self.kind][3]

    @property
    def flop(self) -> float:
        return ELEMENTWISE_KINDS[self.kind][0] * self.num_elements

    @property
    def sfu_op(self) -> float:
        return ELEMENTWISE_KINDS[self.kind][1] * self.num_elements

    @property
    def min_dram_bytes(self) -> float:
        out_b = BYTES_PER_ELEMENT[self.out_dtype or self.dtype] * self.num_outputs
        return self.num_elements * (self.num_inputs * BYTES_PER_ELEMENT[self.dtype] + out_b)


Op = GemmOp | AttentionOp | SoftmaxOp | NormOp | ElementwiseOp
OP_TYPES: tuple[type, ...] = (GemmOp, AttentionOp, SoftmaxOp, NormOp, ElementwiseOp)


def weight_gemm_ops(
    name: str,
    *,
    m: int,
    n: int,
    k: int,
    dtype: Dtype,
    act_dtype: Dtype,
    count: int = 1,
    batch: int = 1,
    b_shared: bool = True,
    b_dtype: Dtype | None = None,
    grouped: bool = False,
) -> list[Op]:
    """A GEMM of activations [batch, m, k] by weights [k, n] (one matrix, or one per batch entry when not
    `b_shared`: MoE experts), preceded for fp8 by the cast that quantizes its `act_dtype` activation.

    8- and 4-bit GEMMs (and weight-only quantized ones, `b_dtype`) write bf16; `grouped`: see `GemmOp`.
    """
    ops: list[Op] = []
    if dtype == "fp8":
        # NOTE(dse): dynamic per-tensor fp8 quantization of the activation is a kernel of its own unless a
        # compiler fuses it into the producer (vLLM `scaled_fp8_quant`); the weights are stored in fp8.
        quant = name.removesuffix("_proj") + "_quant"
        ops.append(
            ElementwiseOp(
                name=quant,
                kind="cast",
                num_elements=batch * m * k,
                dtype=act_dtype,
                out_dtype="fp8",
                count=count,
            )
        )
    out_dtype: Dtype | None = "bf16" if dtype in ("fp8", "fp4") or b_dtype in ("fp8", "fp4") else None
    ops.append(
        GemmOp(
            name=name,
            m=m,
            n=n,
            k=k,
            batch=batch,
            dtype=dtype,
            out_dtype=out_dtype,
            b_shared=b_shared,
            b_dtype=b_dtype,
            grouped=grouped,
            count=count,
        )
    )
    return ops


def op_kind(op: Op) -> str:
    """Short family name used in tables and breakdowns."""
    if isinstance(op, AttentionOp):
        return f"attention_{op.backend}"
    if isinstance(op, NormOp):
        return op.kind
    return {GemmOp: "gemm", SoftmaxOp: "softmax", ElementwiseOp: "elementwise"}[type(op)]

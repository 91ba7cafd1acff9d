"""Kernel suites for `dse measure kernels --suite ...`: lists of ops (pure data, no torch).

Shapes are the ones LLM inference runs: GEMM N x K pairs from Llama-3.1-8B's projections plus squares, token
counts M from decode batches to long prefills; attention over prefill lengths and decode contexts with
GQA and MHA head layouts; reductions and elementwise kernels over activation-sized tensors. One op per
entry (`count=1`); names say what the op is, so the parquet rows are readable on their own.

Sizes: gemm 100 ops, attention 36, softmax 16, norm 24, elementwise 27 per clock. At the default protocol
(1 s warm-up, 3 x 1 s windows, 0.5 s cooldowns) an op takes about 6 s, so `all` is ~20 minutes per clock.
`smoke` has one small op of each kind, for checking a machine.
"""

from __future__ import annotations

from dse.errors import ConfigError
from dse.workload.ops import (
    AttentionBackend,
    AttentionOp,
    Dtype,
    ElementwiseOp,
    GemmOp,
    NormOp,
    Op,
    SoftmaxOp,
)

GEMM_M: tuple[int, ...] = (16, 128, 1024, 4096, 16384)
# (N, K): Llama-3.1-8B qkv, o, gate_up, down projections, plus a square.
GEMM_NK: tuple[tuple[int, int], ...] = (
    (6144, 4096),
    (4096, 4096),
    (28672, 4096),
    (4096, 14336),
    (8192, 8192),
)
GEMM_DTYPES: tuple[Dtype, ...] = ("bf16", "fp16", "fp8", "fp32")

# (num_heads, num_kv_heads, head_dim): Llama-3.1-8B (GQA), Llama-2-7B-like MHA, GPT-2.
ATTENTION_HEADS: tuple[tuple[int, int, int], ...] = ((32, 8, 128), (32, 32, 128), (12, 12, 64))
PREFILL_SHAPES: tuple[tuple[int, int], ...] = ((1, 1024), (4, 2048), (1, 8192))  # (batch, seq_len)
DECODE_SHAPES: tuple[tuple[int, int], ...] = ((1, 4096), (32, 2048), (128, 1024))  # (batch, context)

SOFTMAX_SHAPES: tuple[tuple[int, int], ...] = (
    (4096, 128),
    (4096, 1024),
    (4096, 4096),
    (1024, 32768),
    (65536, 128),
    (65536, 1024),
    (16384, 4096),
    (512, 128256),
)
NORM_SHAPES: tuple[tuple[int, int], ...] = (
    (512, 4096),
    (4096, 4096),
    (16384, 4096),
    (65536, 4096),
    (4096, 768),
    (65536, 768),
    (4096, 8192),
    (16384, 8192),
    (1, 4096),
    (32, 4096),
    (128, 4096),
    (2048, 4096),
)
ELEMENTWISE_KINDS: tuple[str, ...] = (
    "add",
    "mul",
    "gelu",
    "silu",
    "silu_mul",
    "cast",
    "copy",
    "exp",
    "rotary",
)
ELEMENTWISE_SIZES: tuple[int, ...] = (2**20, 2**24, 2**27)

SUITES: tuple[str, ...] = ("gemm", "attention", "softmax", "norm", "elementwise", "all", "smoke")


def gemm_suite() -> list[Op]:
    ops: list[Op] = []
    for dtype in GEMM_DTYPES:
        for n, k in GEMM_NK:
            for m in GEMM_M:
                out: Dtype | None = "bf16" if dtype == "fp8" else None
                ops.append(
                    GemmOp(
                        name=f"gemm_{dtype}_{m}x{n}x{k}",
                        m=m,
                        n=n,
                        k=k,
                        dtype=dtype,
                        out_dtype=out,
                        b_shared=True,
                    )
                )
    return ops


def attention_suite() -> list[Op]:
    ops: list[Op] = []
    prefill_backends: tuple[AttentionBackend, ...] = ("flash", "eager")
    decode_backends: tuple[AttentionBackend, ...] = ("decode", "eager")
    for h, kv, d in ATTENTION_HEADS:
        for backend in prefill_backends:
            for b, s in PREFILL_SHAPES:
                ops.append(
                    AttentionOp(
                        name=f"attn_{backend}_prefill_b{b}_s{s}_h{h}_kv{kv}_d{d}",
                        batch=b,
                        num_heads=h,
                        num_kv_heads=kv,
                        head_dim=d,
                        seq_len_q=s,
                        seq_len_kv=s,
                        causal=True,
                        backend=backend,
                    )
                )
        for backend in decode_backends:
            for b, ctx in DECODE_SHAPES:
                ops.append(
                    AttentionOp(
                        name=f"attn_{backend}_decode_b{b}_ctx{ctx}_h{h}_kv{kv}_d{d}",
                        batch=b,
                        num_heads=h,
                        num_kv_heads=kv,
                        head_dim=d,
                        seq_len_q=1,
                        seq_len_kv=ctx + 1,
                        causal=True,
                        backend=backend,
                    )
                )
    return ops


def softmax_suite() -> list[Op]:
    return [
        SoftmaxOp(name=f"softmax_{dtype}_{r}x{c}", rows=r, cols=c, dtype=dtype)
        for dtype in ("bf16", "fp32")
        for r, c in SOFTMAX_SHAPES
    ]


def norm_suite() -> list[Op]:
    return [
        NormOp(name=f"{kind}_bf16_{r}x{c}", rows=r, cols=c, kind=kind, dtype="bf16")
        for kind in ("layernorm", "rmsnorm")
        for r, c in NORM_SHAPES
    ]


def elementwise_suite() -> list[Op]:
    ops: list[Op] = []
    for kind in ELEMENTWISE_KINDS:
        for size in ELEMENTWISE_SIZES:
            out: Dtype | None = "fp32" if kind == "cast" else None
            ops.append(
                ElementwiseOp(
                    name=f"{kind}_bf16_{size}", kind=kind, num_elements=size, dtype="bf16", out_dtype=out
                )
            )
    return ops


def smoke_suite() -> list[Op]:
    return [
        GemmOp(name="gemm_bf16_4096x4096x4096", m=4096, n=4096, k=4096, b_shared=True),
        AttentionOp(
            name="attn_flash_prefill_b1_s2048_h32_kv8_d128",
            batch=1,
            num_heads=32,
            num_kv_heads=8,
            head_dim=128,
            seq_len_q=2048,
            seq_len_kv=2048,
        ),
        SoftmaxOp(name="softmax_bf16_4096x4096", rows=4096, cols=4096),
        NormOp(name="rmsnorm_bf16_4096x4096", rows=4096, cols=4096, kind="rmsnorm"),
        ElementwiseOp(name="silu_mul_bf16_16777216", kind="silu_mul", num_elements=2**24),
    ]


def build_suite(name: str) -> list[Op]:
    """The ops of suite `name` (one of SUITES; `all` is every suite but `smoke`)."""
    builders = {
        "gemm": gemm_suite,
        "attention": attention_suite,
        "softmax": softmax_suite,
        "norm": norm_suite,
        "elementwise": elementwise_suite,
        "smoke": smoke_suite,
    }
    if name == "all":
        return [
            op for key in ("gemm", "attention", "softmax", "norm", "elementwise") for op in builders[key]()
        ]
    if name not in builders:
        raise ConfigError(f"unknown suite '{name}'; choose one of {', '.join(SUITES)}")
    return builders[name]()

"""CUDA kernel names (as the torch profiler reports them) -> the configuration they encode.

Library kernels carry their tiling in their names; the kernel model's tile choices can be checked against it:

    sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_cluster1x2x1_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas
        cuBLAS, Hopper: CTA tile 128x256x64, cluster 1x2x1, 2x1x1 warpgroups, no segment-K (split-K)
    ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_tn
        cuBLAS, Ampere: 256x128 tile, K-block 64, 3 stages, A transposed ("tn")
    cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x128_32x4_tn_align8
        CUTLASS 2.x: 128x128 tile, K-block 32, 4 stages
    cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_1x2x1_0_tnn_align8_warpspecialized_cooperative_epi_tma
        CUTLASS 3.x: 128x256x64 tile, cluster 1x2x1, stages auto (0), warp-specialized cooperative
    void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<...>>>
        FlashAttention-3 forward (tile and stages when the template arguments are present)
    void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 128, 64, 4, ...>, ...>
        FlashAttention-2 (PyTorch's copy): head dim 128, 128x64 (query x key) block, 4 warps

For GEMMs `tile` is M x N x K of the CTA tile; for attention it is query block x key block x head dim.
Anything unrecognized parses to `op="unknown"` with the fields it could still read (dtype, arch).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_CUTE_TRIPLE = re.compile(r"cute::tuple<\s*cute::C<(\d+)>\s*,\s*cute::C<(\d+)>\s*,\s*cute::C<(\d+)>\s*>")
_LAYOUT = r"(?P<layout>[nt]{2,3})"


@dataclass(frozen=True, slots=True, kw_only=True)
class KernelConfig:
    """What a kernel name says: operation, library, architecture, tiling and scheduling.

    Unknown fields are None (numbers, flags) or "" (strings).
    """

    name: str
    op: str = "unknown"  # gemm, splitk_reduce, attention, attention_combine, attention_bwd, softmax,
    #                      layernorm, rmsnorm, elementwise, reduce, gather, copy, unknown
    library: str = (
        ""  # cublas, cutlass, flash_attn, flash_attn3, pytorch_flash, mem_efficient, cudnn, torch, triton
    )
    arch: str = ""  # sm80, sm90 ... where the name says it
    dtype: str = ""
    tile_m: int | None = None
    tile_n: int | None = None
    tile_k: int | None = None
    stages: int | None = None
    cluster: str = ""
    warps: str = ""  # warp or warpgroup layout ("2x1x1") or count ("4")
    warp_specialized: bool | None = None
    split_k: bool | None = None
    layout: str = ""  # operand transposes, e.g. "tn"
    vector_width: int | None = None
    variant: str = ""  # epilogue (relu), schedule (cooperative), functor (add, silu) ...

    @property
    def tile(self) -> str:
        """`MxNxK` (or `MxN`) of the CTA tile, "" when the name does not show it."""
        dims = [d for d in (self.tile_m, self.tile_n, self.tile_k) if d is not None]
        return "x".join(str(d) for d in dims) if self.tile_m is not None else ""


def _int(value: str | None) -> int | None:
    return int(value) if value is not None else None


def _dtype_token(token: str) -> str:
    """A type spelled in a kernel name -> dse dtype name."""
    t = token.lower()
    if "e4m3" in t or "e5m2" in t or "fp8" in t:
        return "fp8"
    if "bf16" in t or "bfloat16" in t:
        return "bf16"
    if "tf32" in t:
        return "tf32"
    if re.search(r"(?<!b)f16|fp16|half", t):
        return "fp16"
    if re.search(r"int8|s8|i8", t):
        return "int8"
    if "f32" in t or "float" in t or "sgemm" in t:
        return "fp32"
    return ""


def _dtype_in(name: str) -> str:
    """Element type named anywhere in a templated name (first match by precedence)."""
    for pattern, dtype in (
        (r"float_e4m3|float_e5m2|__nv_fp8|e4m3|e5m2", "fp8"),
        (r"BFloat16|bfloat16|bf16", "bf16"),
        (r"c10::Half|half_t|\b__half\b|(?<![bt])f16|fp16", "fp16"),
        (r"\bfloat\b|f32", "fp32"),
    ):
        if re.search(pattern, name):
            return dtype
    return ""


def _split_k(name: str) -> bool | None:
    lower = name.lower()
    if (
        "segment_k_on" in lower
        or "splitk" in lower
        or "split_k" in lower
        or "sliced" in lower
        or "streamk" in lower
    ):
        return True
    if "segment_k_off" in lower:
        return False
    return None


def _arch(name: str) -> str:
    m = re.search(r"(?:^|_|::|<)(sm|Sm)(\d{2,3})", name)
    if m:
        return f"sm{m.group(2)}"
    m = re.match(r"(ampere|hopper|ada|turing|volta|blackwell)_", name)
    if m:
        return {
            "volta": "sm70",
            "turing": "sm75",
            "ampere": "sm80",
            "ada": "sm89",
            "hopper": "sm90",
            "blackwell": "sm100",
        }[m.group(1)]
    m = re.match(r"cutlass_(\d{2,3})_", name)
    return f"sm{m.group(1)}" if m else ""


def _cublas_xmma(name: str) -> KernelConfig | None:
    m = re.match(
        r"(sm\d+)_xmma_gemm_(?P<types>[a-z0-9_]+?)_" + _LAYOUT + r"_n_tilesize(\d+)x(\d+)x(\d+)", name
    )
    if not m:
        return None
    types = m.group("types").split("_")
    dtype = "tf32" if len(types) > 1 and types[1].startswith("tf32") else _dtype_token(types[0])
    stage = re.search(r"_stage(\d+)", name)
    cluster = re.search(r"_cluster(\d+x\d+x\d+)", name)
    warps = re.search(r"_warp(?:group)?size(\d+x\d+x\d+)", name)
    return KernelConfig(
        name=name,
        op="gemm",
        library="cublas",
        arch=m.group(1),
        dtype=dtype,
        tile_m=int(m.group(4)),
        tile_n=int(m.group(5)),
        tile_k=int(m.group(6)),
        stages=_int(stage.group(1) if stage else None),
        cluster=cluster.group(1) if cluster else "",
        warps=warps.group(1) if warps else "",
        split_k=_split_k(name),
        layout=m.group("layout"),
        warp_specialized=True if "warpspecialized" in name or "_ws_" in name else None,
    )


def _cublas_legacy(name: str) -> KernelConfig | None:
    # ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_tn, ampere_sgemm_128x64_tn,
    # ampere_h16816gemm_256x128_ldg8_stages_32x3_tn, turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_tn
    m = re.match(
        r"(volta|turing|ampere|ada|hopper)_(?P<pre>[a-z0-9_]*?)(?P<kind>[shid]\d*gemm|sgemm|hgemm|dgemm)"
        r"(?P<mid>_[a-z0-9]+)*?_(\d+)x(\d+)_(?P<rest>.*)$",
        name,
    )
    if not m:
        return None
    rest = m.group("rest")
    stages = re.search(r"stages_(\d+)x(\d+)", rest)
    layout = re.search(r"_?([nt]{2})$", rest) or re.search(r"(?:^|_)([nt]{2})(?:_|$)", rest)
    kind = m.group("kind")
    dtype = _dtype_token(m.group("pre")) or ("fp32" if kind.startswith("s") and kind in ("sgemm",) else "")
    if not dtype:
        dtype = {"h": "fp16", "s": "fp32", "i": "int8", "d": "fp64"}.get(kind[0], "")
        if kind[0] == "s" and kind != "sgemm":  # s16816gemm: fp32 accumulate, inputs named in the prefix
            dtype = _dtype_token(m.group("pre")) or "fp16"
    variant = "relu" if "_relu" in name else ""
    return KernelConfig(
        name=name,
        op="gemm",
        library="cublas",
        arch=_arch(name),
        dtype=dtype,
        tile_m=int(m.group(5)),
        tile_n=int(m.group(6)),
        tile_k=_int(stages.group(1) if stages else None),
        stages=_int(stages.group(2) if stages else None),
        split_k=_split_k(name),
        layout=layout.group(1) if layout else "",
        variant=variant,
    )


def _cutlass2(name: str) -> KernelConfig | None:
    # cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x128_32x4_tn_align8
    m = re.match(
        r"cutlass_(\d{2,3})_(?P<body>\w*?gemm\w*?)_(\d+)x(\d+)_(\d+)x(\d+)_" + _LAYOUT + r"(?:_|$)", name
    )
    if not m:
        return None
    body = m.group("body")
    dtype_m = re.search(r"_(bf16|f16|fp16|tf32|f32|e4m3|e5m2|s8|i8)_", f"_{body}_")
    variant = next((e for e in ("relu", "gelu", "silu", "bias") if f"_{e}" in body), "")
    return KernelConfig(
        name=name,
        op="gemm",
        library="cutlass",
        arch=f"sm{m.group(1)}",
        dtype=_dtype_token(dtype_m.group(1)) if dtype_m else "",
        tile_m=int(m.group(3)),
        tile_n=int(m.group(4)),
        tile_k=int(m.group(5)),
        stages=int(m.group(6)),
        layout=m.group("layout")[:2],
        split_k=_split_k(name),
        variant=variant,
        warp_specialized=False,  # CUTLASS 2.x kernels are multistage, not warp-specialized
    )


def _cutlass3(name: str) -> KernelConfig | None:
    # cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_1x2x1_0_tnn_align8_warpspecialized_...
    m = re.match(
        r"cutlass3x_(sm\d+)_\w*?gemm_(?P<types>[a-z0-9_]+?)_(\d+)x(\d+)x(\d+)_(\d+x\d+x\d+)_(\d+)_"
        + _LAYOUT
        + r"_align\d+(?P<rest>\w*)",
        name,
    )
    if not m:
        return None
    rest = m.group("rest")
    variant = next((v for v in ("cooperative", "pingpong") if v in rest), "")
    stages = int(m.group(7))
    return KernelConfig(
        name=name,
        op="gemm",
        library="cutlass",
        arch=m.group(1),
        dtype=_dtype_token(m.group("types").split("_")[0]),
        tile_m=int(m.group(3)),
        tile_n=int(m.group(4)),
        tile_k=int(m.group(5)),
        cluster=m.group(6),
        stages=stages or None,  # 0 = "auto": as many as fit in shared memory
        layout=m.group("layout")[:2],
        warp_specialized="warpspecialized" in rest,
        split_k=_split_k(name),
        variant=variant,
    )


def _cute_shapes(name: str) -> tuple[tuple[int, int, int] | None, tuple[int, int, int] | None]:
    """(tile, cluster) from the cute::tuple<C<..>> arguments of a templated CUTLASS 3 / FA3 name."""
    triples = [(int(a), int(b), int(c)) for a, b, c in _CUTE_TRIPLE.findall(name)]
    tile = next((t for t in triples if min(t) >= 16), None)
    cluster = next((t for t in triples if max(t) <= 8), None)
    return tile, cluster


def _cute_gemm(name: str) -> KernelConfig | None:
    if "cutlass::gemm::kernel" not in name and "GemmUniversal" not in name and "MainloopSm" not in name:
        return None
    tile, cluster = _cute_shapes(name)
    mainloop = re.search(r"MainloopSm(\d+)\w*<\s*(\d+)\s*,", name)
    stage_count = re.search(r"StageCount<\s*(\d+)\s*>", name)
    stages = int(mainloop.group(2)) if mainloop else _int(stage_count.group(1) if stage_count else None)
    variant = next((v for v in ("Cooperative", "Pingpong") if f"WarpSpecialized{v}" in name), "").lower()
    return KernelConfig(
        name=name,
        op="gemm",
        library="cutlass",
        arch=f"sm{mainloop.group(1)}" if mainloop else _arch(name),
        dtype=_dtype_in(name),
        tile_m=tile[0] if tile else None,
        tile_n=tile[1] if tile else None,
        tile_k=tile[2] if tile else None,
        stages=stages,
        cluster="x".join(map(str, cluster)) if cluster else "",
        warp_specialized=True if "WarpSpecialized" in name else None,
        split_k=_split_k(name),
        variant=variant,
    )


def _flash(name: str) -> KernelConfig | None:
    lower = name.lower()
    if "flash" not in lower and "fmha" not in lower and "sdpa" not in lower and "attention" not in lower:
        return None
    if "bwd" in lower or "backward" in lower or "dgrad" in lower:
        op = "attention_bwd"
    elif "combine" in lower:
        op = "attention_combine"
    else:
        op = "attention"
    if "FlashAttnFwdSm" in name or "FlashAttnBwdSm" in name or "flash::enable_sm90" in name:
        tile, cluster = _cute_shapes(name)
        stages = re.search(r"CollectiveMainloop\w*Sm\d+<\s*(\d+)\s*,", name)
        return KernelConfig(
            name=name,
            op=op,
            library="flash_attn3",
            arch=_arch(name) or "sm90",
            dtype=_dtype_in(name),
            tile_m=tile[0] if tile else None,
            tile_n=tile[1] if tile else None,
            tile_k=tile[2] if tile else None,
            stages=_int(stages.group(1) if stages else None),
            cluster="x".join(map(str, cluster)) if cluster else "",
            warp_specialized=True,
            split_k=True if "Split" in name and "true" in name.split("Split")[-1][:8] else None,
        )
    if "flash_fwd" in name or "flash_bwd" in name:
        traits = re.search(
            r"Flash_(?:fwd|bwd)_kernel_traits\w*<\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)", name
        )
        library = "pytorch_flash" if "pytorch_flash" in name else "flash_attn"
        return KernelConfig(
            name=name,
            op=op,
            library=library,
            arch=_arch(name),
            dtype=_dtype_in(name),
            tile_m=_int(traits.group(2)) if traits else None,
            tile_n=_int(traits.group(3)) if traits else None,
            tile_k=_int(traits.group(1)) if traits else None,
            warps=traits.group(4) if traits else "",
            split_k=True if "splitkv" in name else (False if traits else None),
            warp_specialized=False,
        )
    m = re.search(r"fmha_cutlass([FB])_(\w+?)_(?:aligned_|notaligned_)?(\d+)x(\d+)_\w*?(sm\d+)", name)
    if m:
        return KernelConfig(
            name=name,
            op="attention_bwd" if m.group(1) == "B" else "attention",
            library="mem_efficient",
            arch=m.group(5),
            dtype=_dtype_token(m.group(2)),
            tile_m=int(m.group(3)),
            tile_n=int(m.group(4)),
        )
    m = re.search(r"cudnn\w*?sdpa\w*?_(sm\d+)\w*?_(\d+)x(\d+)x(\d+)_(\d+x\d+x\d+)", name)
    if m:
        fprop = "fprop" in name
        return KernelConfig(
            name=name,
            op="attention" if fprop else "attention_bwd",
            library="cudnn",
            arch=m.group(1),
            dtype=_dtype_in(name),
            tile_m=int(m.group(2)),
            tile_n=int(m.group(3)),
            tile_k=int(m.group(4)),
            warps=m.group(5),
            warp_specialized=None,
        )
    if "flash" in lower or "fmha" in lower:
        return KernelConfig(name=name, op=op, library="flash_attn", arch=_arch(name), dtype=_dtype_in(name))
    return None


def _torch_kernel(name: str) -> KernelConfig | None:
    lower = name.lower()
    dtype = _dtype_in(name)
    if "softmax" in lower:
        m = re.search(r"cunn_SoftMaxForward\w*<\s*(\d+)\s*,", name)
        variant = "warp_persistent" if "softmax_warp_forward" in name else ("smem" if "Smem" in name else "")
        op = "softmax" if "backward" not in lower else "softmax_bwd"
        return KernelConfig(
            name=name,
            op=op,
            library="torch",
            dtype=dtype,
            variant=variant,
            vector_width=_int(m.group(1)) if m else None,
        )
    if "rms_norm" in lower or "rmsnorm" in lower:
        return KernelConfig(name=name, op="rmsnorm", library="torch", dtype=dtype)
    if "layer_norm" in lower or "layernorm" in lower:
        return KernelConfig(
            name=name,
            op="layernorm",
            library="torch",
            dtype=dtype,
            variant="vectorized" if "vectorized" in lower else "",
        )
    if "splitkreduce" in lower:
        return KernelConfig(name=name, op="splitk_reduce", library="cublas", dtype=dtype, split_k=True)
    if name.startswith("triton_"):
        kind = name.split("_")[
            1
        ]  # poi (pointwise), red (reduction), per (persistent reduction), tem (template)
        op = {"poi": "elementwise", "red": "reduce", "per": "reduce", "tem": "gemm"}.get(kind, "unknown")
        return KernelConfig(name=name, op=op, library="triton", dtype=dtype, variant=name.split("_", 2)[-1])
    if "indexselect" in lower or "index_select" in lower or "embedding" in lower or "gather" in lower:
        return KernelConfig(name=name, op="gather", library="torch", dtype=dtype)
    if "catarraybatchedcopy" in lower:
        return KernelConfig(name=name, op="copy", library="torch", dtype=dtype, variant="cat")
    if "reduce_kernel" in lower:
        m = re.search(r"reduce_kernel<\s*(\d+)\s*,\s*(\d+)", name)
        return KernelConfig(
            name=name,
            op="reduce",
            library="torch",
            dtype=dtype,
            warps=m.group(1) if m else "",
            vector_width=_int(m.group(2)) if m else None,
        )
    if "elementwise_kernel" in lower:
        m = re.search(r"vectorized_elementwise_kernel<\s*(\d+)\s*,", name)
        functor = re.search(r"CUDAFunctor_?(\w+?)<|(\w+?)_kernel(?:_cuda)?\(at::TensorIterator", name)
        variant = next((g for g in functor.groups() if g), "") if functor else ""
        if not variant:  # at::native::binary_internal::MulFunctor inside a generic BinaryFunctor
            wrappers = ("Binary", "Unary", "CUDA", "")
            variant = next(
                (f for f in re.findall(r"(\w+?)Functor", name.replace("::", " ")) if f not in wrappers), ""
            )
        if not variant and "copy" in lower:
            variant = "copy"
        return KernelConfig(
            name=name,
            op="elementwise",
            library="torch",
            dtype=dtype,
            vector_width=_int(m.group(1)) if m else None,
            variant=variant.lower(),
        )
    return None


def parse_kernel_name(name: str) -> KernelConfig:
    """Parse a CUDA kernel name from the profiler into a `KernelConfig` (never raises)."""
    name = name.strip()
    for parser in (_cublas_xmma, _cutlass3, _cutlass2, _cublas_legacy, _flash, _cute_gemm, _torch_kernel):
        config = parser(name)
        if config is not None:
            return config
    return KernelConfig(name=name, arch=_arch(name), dtype=_dtype_in(name))


def main_kernel(names_and_times: list[tuple[str, float]]) -> str:
    """The kernel that dominates an op: the name with the largest total device time."""
    totals: dict[str, float] = {}
    for name, seconds in names_and_times:
        totals[name] = totals.get(name, 0.0) + seconds
    return max(totals, key=lambda n: totals[n]) if totals else ""

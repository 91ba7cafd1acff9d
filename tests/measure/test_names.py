# ruff: noqa: E501  (real kernel names are long; they are kept whole so they can be grepped for)
"""Kernel names as the torch profiler prints them -> tile configurations."""

from __future__ import annotations

import pytest

from dse.measure.names import main_kernel, parse_kernel_name

FA3 = (
    "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<flash::CollectiveMainloopFwdSm90"
    "<2, cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, cute::tuple<cute::C<128>, cute::C<176>, cute::C<128> >, "
    "128, cutlass::bfloat16_t, float, cutlass::arch::Sm90, true, false, false, true, false, false, false, true, true, "
    "false, false, false>, flash::CollectiveEpilogueFwd<cute::tuple<cute::C<128>, cute::C<128>, cute::C<128> >, "
    "cute::tuple<cute::C<1>, cute::C<1>, cute::C<1> >, cutlass::bfloat16_t, cutlass::arch::Sm90, 256, false, true, "
    "false, false>, flash::VarlenDynamicPersistentTileScheduler<128, 256, 128, false, true, true> > > >"
    "(flash::FlashAttnFwdSm90<...>::Params)"
)
CUTE_GEMM = (
    "void cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<cute::tuple<int, int, int, int>, "
    "cutlass::gemm::collective::CollectiveMma<cutlass::gemm::MainloopSm90TmaGmmaWarpSpecialized<4, "
    "cute::tuple<cute::C<2>, cute::C<1>, cute::C<1> >, cutlass::gemm::KernelTmaWarpSpecializedCooperative>, "
    "cute::tuple<cute::C<128>, cute::C<256>, cute::C<64> >, cutlass::float_e4m3_t, cute::tuple<long, cute::C<1>, "
    "long>, cutlass::float_e4m3_t> > >(cutlass::gemm::kernel::GemmUniversal<...>::Params)"
)
PT_FLASH = (
    "void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, "
    "cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, "
    "false, false, false, true, false, false>(pytorch_flash::Flash_fwd_params)"
)
SPLITKV = (
    "void flash_fwd_splitkv_kernel<Flash_fwd_kernel_traits<128, 64, 128, 4, false, false, cutlass::half_t, "
    "Flash_kernel_traits<128, 64, 128, 4, cutlass::half_t> >, false, false, false, false, true, true, false, false>"
    "(Flash_fwd_params)"
)
SOFTMAX = (
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<4, c10::BFloat16, float, c10::BFloat16, "
    "at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, c10::BFloat16 const*, int)"
)
LAYERNORM = (
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float, false>(int, float, "
    "c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, c10::BFloat16*)"
)
ADD = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
    "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)"
)
SILU = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::silu_kernel"
    "(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::"
    "{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> >(int, at::native::(anonymous namespace)::silu_kernel"
    "(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::"
    "{lambda(c10::BFloat16)#1}, std::array<char*, 2ul>)"
)
MUL = (
    "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::BinaryFunctor<float, "
    "float, float, at::native::binary_internal::MulFunctor<float> > >(at::TensorIteratorBase&, "
    "at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> > const&)::"
    "{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<...>)"
)
SPLITK_REDUCE = (
    "void cublasLt::splitKreduce_kernel<32, 16, int, float, __nv_bfloat16, float, __nv_bfloat16, float, "
    "__nv_bfloat16, true, false, false>(cublasLt::cublasSplitKParams<float>, float const*, __nv_bfloat16 const*, "
    "__nv_bfloat16*, float const*, float const*, __nv_bfloat16 const*, float const*, __nv_bfloat16*, void*, long, "
    "float*, int*)"
)

CASES = [
    (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas",
        {
            "op": "gemm",
            "library": "cublas",
            "arch": "sm90",
            "dtype": "bf16",
            "tile": "128x256x64",
            "warps": "2x1x1",
            "split_k": False,
            "layout": "tn",
        },
    ),
    (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_cluster1x2x1_warpgroupsize1x1x1_execute_segment_k_on_kernel__5x_cublas",
        {"tile": "128x128x64", "cluster": "1x2x1", "split_k": True},
    ),
    (
        "sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128x128_cluster1x1x1_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
        {"dtype": "fp8", "tile": "128x128x128"},
    ),
    (
        "sm80_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize128x128x16_stage4_warpsize2x2x1_tensor16x8x8_kernel",
        {
            "arch": "sm80",
            "dtype": "tf32",
            "tile": "128x128x16",
            "stages": 4,
            "warps": "2x2x1",
            "layout": "nn",
        },
    ),
    (
        "ampere_bf16_s16816gemm_bf16_256x128_ldg8_f2f_stages_64x3_tn",
        {
            "op": "gemm",
            "library": "cublas",
            "arch": "sm80",
            "dtype": "bf16",
            "tile": "256x128x64",
            "stages": 3,
            "layout": "tn",
            "split_k": None,
        },
    ),
    (
        "ampere_fp16_s16816gemm_fp16_128x64_sliced1x2_ldg8_f2f_stages_64x4_tn",
        {"dtype": "fp16", "tile": "128x64x64", "stages": 4, "split_k": True},
    ),
    ("ampere_h16816gemm_256x128_ldg8_stages_32x3_tn", {"dtype": "fp16", "tile": "256x128x32", "stages": 3}),
    ("ampere_sgemm_128x64_tn", {"dtype": "fp32", "tile": "128x64", "stages": None}),
    (
        "cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_128x128_32x4_tn_align8",
        {
            "op": "gemm",
            "library": "cutlass",
            "arch": "sm80",
            "dtype": "bf16",
            "tile": "128x128x32",
            "stages": 4,
            "layout": "tn",
            "variant": "relu",
            "warp_specialized": False,
        },
    ),
    (
        "cutlass3x_sm90_tensorop_gemm_bf16_bf16_f32_bf16_bf16_128x256x64_1x2x1_0_tnn_align8_warpspecialized_cooperative_epi_tma",
        {
            "library": "cutlass",
            "arch": "sm90",
            "tile": "128x256x64",
            "cluster": "1x2x1",
            "stages": None,
            "warp_specialized": True,
            "variant": "cooperative",
            "layout": "tn",
        },
    ),
    (
        CUTE_GEMM,
        {
            "op": "gemm",
            "arch": "sm90",
            "dtype": "fp8",
            "tile": "128x256x64",
            "cluster": "2x1x1",
            "stages": 4,
            "warp_specialized": True,
            "variant": "cooperative",
        },
    ),
    (
        "void cutlass::device_kernel<flash::enable_sm90_or_later<flash::FlashAttnFwdSm90<...>>>",
        {"op": "attention", "library": "flash_attn3", "arch": "sm90", "warp_specialized": True, "tile": ""},
    ),
    (
        FA3,
        {
            "op": "attention",
            "library": "flash_attn3",
            "dtype": "bf16",
            "tile": "128x176x128",
            "stages": 2,
            "cluster": "1x1x1",
        },
    ),
    ("flash_fwd_kernel", {"op": "attention", "library": "flash_attn", "tile": ""}),
    (
        PT_FLASH,
        {
            "op": "attention",
            "library": "pytorch_flash",
            "dtype": "bf16",
            "tile": "128x64x128",
            "warps": "4",
            "split_k": False,
        },
    ),
    (
        SPLITKV,
        {"op": "attention", "library": "flash_attn", "dtype": "fp16", "tile": "64x128x128", "split_k": True},
    ),
    (
        "fmha_cutlassF_bf16_aligned_64x128_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t, "
        "cutlass::arch::Sm80, true, 64, 128, 128, true, true>::Params)",
        {"op": "attention", "library": "mem_efficient", "arch": "sm80", "tile": "64x128"},
    ),
    (
        "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_3_128x128x128_4x1x1_kernel0_0",
        {"op": "attention", "library": "cudnn", "arch": "sm90", "tile": "128x128x128", "warps": "4x1x1"},
    ),
    (SOFTMAX, {"op": "softmax", "library": "torch", "dtype": "bf16", "vector_width": 4}),
    ("void at::native::(anonymous namespace)::cunn_SoftMaxForward<...>", {"op": "softmax", "dtype": ""}),
    (LAYERNORM, {"op": "layernorm", "dtype": "bf16", "variant": "vectorized"}),
    (ADD, {"op": "elementwise", "dtype": "bf16", "vector_width": 4, "variant": "add"}),
    (SILU, {"op": "elementwise", "variant": "silu"}),
    (MUL, {"op": "elementwise", "dtype": "fp32", "variant": "mul"}),
    (SPLITK_REDUCE, {"op": "splitk_reduce", "split_k": True, "dtype": "bf16"}),
    ("triton_poi_fused_add_mul_0", {"op": "elementwise", "library": "triton"}),
    ("some_custom_kernel", {"op": "unknown", "tile": ""}),
]


@pytest.mark.parametrize(("name", "expected"), CASES, ids=[c[0][:60] for c in CASES])
def test_kernel_names_parse_into_tile_configurations(name, expected):
    config = parse_kernel_name(name)
    got = {key: getattr(config, key) for key in expected}
    assert got == expected
    assert config.name == name


def test_main_kernel_is_the_one_with_most_device_time():
    assert main_kernel([("a", 1e-6), ("b", 3e-6), ("a", 2.5e-6)]) == "a"
    assert main_kernel([]) == ""

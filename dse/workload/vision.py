"""Vision models as workload graphs: ResNet, VGG and ViT (torchvision architectures), inference and training.

    g, num_params = build_vision_graph(load_vision_model("resnet-50"), batch=256, precision="fp16")

Convolutions are implicit GEMMs (DESIGN.md section 3): `[N*P*Q, C*R*S] x [C*R*S, K]` as a `GemmOp` with a
shared weight, so the GEMM estimator and its corrections price them. NOTE(dse): convolutions have no
fitted corrections of their own yet (cuDNN's implicit-GEMM kernels pay for the im2col gather the GEMM
model does not see). ReLU and residual adds are elementwise, pooling is a streaming copy of its output. ViT
is a pre-LayerNorm encoder over `(image / patch)^2 + 1` tokens (16-px patches, 32 for vit-b-32 and vit-l-32)
with a GELU MLP of 4d.

ViT under autocast (bf16/fp16 precision: PyTorch AMP, as torchvision's, timm's and Hugging Face's ViTs run
in mixed precision) keeps an fp32 residual stream: concatenating the half-precision patch embeddings with the
fp32 class-token parameter promotes them to fp32 (`torch.cat` type promotion), the position embedding and
every residual add (a half-precision branch plus the fp32 stream) stay fp32, and autocast runs `layer_norm`
in fp32 (its float32 op list), so each Linear after a LayerNorm first casts its fp32 input to half precision
(`cast` ops; their backward casts the gradient back). Our H100 profile of torchvision's ViT-B/16 shows these
fp32 LayerNorm and add kernels and the casts (`dse/calibrate/measured`). The fused attention (`flash`,
PyTorch's SDPA) writes its output token-major, so timm's and Hugging Face's reshape back to tokens is a
view; the unfused one (`eager`) copies its context back to tokens. Not modelled: torchvision's
`MultiheadAttention` copies its input, its packed QKV projection and its output between layouts (copies of
1, 3 and 1 x the tokens' width, and back in the backward), autocast's per-step casts of the weights, and
PyTorch's strided copies and mixed-dtype adds run slower than streaming kernels (`dse validate training`,
own-h100 groups).

Batch norm over `[N*P*Q, K]` (K channels). Inference (running statistics, as eager PyTorch runs it
unfolded): one normalize pass, a `NormOp` (read once, written once). Training (`training=True`): the
statistics are reduced over all N*P*Q positions of each channel before any output can be normalized, and a
training activation (megabytes per channel, far over the chip's SRAM) cannot stay on chip between the two,
so the forward is a read-only statistics pass (`bn_stats`) and a normalize pass (`bn_apply`), and the
backward a reduction over x and dy and a pass writing dx: 2 reads + 1 write forward, 4 reads + 1 write
backward (PyTorch's `batch_norm_collect_statistics` / `batch_norm_transform_input` and
`batch_norm_backward_reduce` / `batch_norm_backward_elemt` kernels, aten/src/ATen/native/cuda/
Normalization.cuh; cuDNN's non-fused spatial batch norm makes the same passes). Pricing the training norm
as a one-pass row norm under-counted that traffic by a third forward and a fifth backward. Which library
runs it sets its speed: bf16 takes ATen's kernels (training and eval), fp16/fp32 cuDNN's; ATen's and
cuDNN's NCHW training kernels carry their launch configuration (`ElementwiseOp.bn_layout`,
`dse.perf.batchnorm`), cuDNN's channels-last and inference ones are streaming passes.

Memory format. cuDNN's tensor-core convolution kernels (fp16, bf16, TF32, fp8) work on NHWC; given NCHW
tensors (PyTorch's default layout) it transposes the input into NHWC and the output back around every
convolution (NVIDIA Deep Learning Performance docs, Convolutional Layers User's Guide, "Tensor Layouts
In Memory: NCHW vs. NHWC"), so an NCHW graph carries two streaming copies per convolution
(`dse.workload.backward.LAYOUT_SUFFIX`) that channels-last (`memory_format="nhwc"`) does not. fp32 runs
CUDA-core kernels that read NCHW directly. timm's RTX 3090 AMP training table shows the size: ResNet-50
1218 img/s channels-last against 826 NCHW.

Depthwise convolutions (MobileNet-V2, EfficientNet) are memory-bound elementwise work with their FLOPs
(`ElementwiseOp` kinds `depthwise3x3` / `depthwise5x5`: 2 R S FLOP per element on the CUDA cores, one read
and one write per element) rather than an op and estimator of their own: with one filter per channel they
have no reuse for the tensor cores, and the elementwise estimator prices streaming kernels at their loads
in flight (`dse.perf.depthwise`). The op's elements are the traffic-equivalent count (I + O) / 2 for I
input and O output elements, so its DRAM traffic is the input read once and the output written once (a
stride-2 layer reads 4x its outputs); its backward (`dse.workload.backward`) reuses that count. The kind
names the library PyTorch picks (`_Builder.cudnn_depthwise`): cuDNN, or its own kernels (`_aten`), whose
weight gradient re-reads its tensors per tap. SE blocks are a global pool (a mean: a read of the block),
two small GEMMs, a sigmoid and a scale; their backward runs the kernels autograd runs
(`dse.workload.backward`). Their SiLU (EfficientNet) and ReLU6 (MobileNet-V2, priced as a ReLU) run in
place, and their gradient reads their input (a ReLU's reads its output), so in training autograd copies
each one's input first (`INPUT_CLONE_SUFFIX` ops: our H100 profile holds one device-to-device copy per
ReLU6 in MobileNet-V2's step, 2.0 ms, and 2.1 ms of copies in EfficientNet-B0's; a ResNet's step has one).

Architectures and parameter counts (tested): torchvision `resnet18` 11.7M, `resnet34` 21.8M, `resnet50`
25.6M, `resnet101` 44.5M, `resnet152` 60.2M, `vgg16` 138.4M, `vit_b_16` 86.6M, `vit_l_16` 304.3M, `vit_b_32`
88.2M, `vit_l_32` 306.5M, `vit_h_14` 632.0M (at 224 px), `mobilenet_v2` 3.50M, `efficientnet_b0` 5.29M, `b1`
7.79M, `b2` 9.11M, `b3` 12.23M, `b4` 19.34M, `b5` 30.39M (torchvision model docs; B1-B5 are B0 scaled by
their width and depth coefficients, Tan and Le 2019); timm `resnet200` 64.67M (He et al.'s 2016 ResNet-200:
3, 24, 36, 3 bottlenecks), `vit_tiny_patch16_224` 5.72M (DeiT-Ti: width 192, 3 heads), `vit_small_patch32_224`
22.88M and `vit_base_patch8_224` 86.58M (timm's model tables). `efficientnet-widese-b0/b4` are NVIDIA
DeepLearningExamples' variants (ConvNets/efficientnet README): the SE squeeze is a quarter of the expanded
(depthwise) width instead of the block's input width; their counts are not checked against a published one.
`vit-s-16` is ViT-S/16 as DeiT-S (Touvron et al. 2021) and timm's `vit_small_patch16_224` define it (width
384, 6 heads, 12 layers; 22.05M parameters in timm's tables); torchvision ships no ViT-S.
"""

from __future__ import annotations

from dataclasses import dataclass

from dse.errors import ConfigError, ShapeError
from dse.workload.backward import CONTIGUOUS_SUFFIX, INPUT_CLONE_SUFFIX, LAYOUT_SUFFIX
from dse.workload.graph import WorkloadGraph
from dse.workload.ops import (
    BYTES_PER_ELEMENT,
    AttentionOp,
    Dtype,
    ElementwiseOp,
    GemmOp,
    NormOp,
    Op,
    SoftmaxOp,
)

__all__ = [
    "MEMORY_FORMATS",
    "inference_memory_bytes",
    "op_output_bytes",
    "VISION_MODELS",
    "VISION_PRECISIONS",
    "VisionModel",
    "build_vision_graph",
    "is_vision_model",
    "load_vision_model",
]

MEMORY_FORMATS = ("nchw", "nhwc")
# Convolution / GEMM dtypes of a vision graph, inference or training (no weight-only formats).
VISION_PRECISIONS: tuple[str, ...] = ("fp32", "tf32", "bf16", "fp16", "fp8")


@dataclass(frozen=True, slots=True, kw_only=True)
class VisionModel:
    """A torchvision architecture: `family` resnet (block kind and stage depths), vgg, vit, mobilenet
    (V2) or efficientnet (B0 scaled by `width_mult` and `depth_mult`)."""

    name: str
    family: str
    blocks: tuple[int, ...] = ()
    bottleneck: bool = False
    width: int = 0  # ViT hidden size
    depth: int = 0  # ViT layers
    heads: int = 0
    patch: int = 16
    num_classes: int = 1000
    width_mult: float = 1.0  # EfficientNet compound scaling (channels, layers)
    depth_mult: float = 1.0
    wide_se: bool = False  # DeepLearningExamples' EfficientNet-WideSE


VISION_MODELS: dict[str, VisionModel] = {
    m.name: m
    for m in (
        VisionModel(name="resnet-18", family="resnet", blocks=(2, 2, 2, 2)),
        VisionModel(name="resnet-34", family="resnet", blocks=(3, 4, 6, 3)),
        VisionModel(name="resnet-50", family="resnet", blocks=(3, 4, 6, 3), bottleneck=True),
        VisionModel(name="resnet-101", family="resnet", blocks=(3, 4, 23, 3), bottleneck=True),
        VisionModel(name="resnet-152", family="resnet", blocks=(3, 8, 36, 3), bottleneck=True),
        VisionModel(name="resnet-200", family="resnet", blocks=(3, 24, 36, 3), bottleneck=True),
        VisionModel(name="vgg-16", family="vgg"),
        VisionModel(name="vit-ti-16", family="vit", width=192, depth=12, heads=3),
        VisionModel(name="vit-s-16", family="vit", width=384, depth=12, heads=6),
        VisionModel(name="vit-s-32", family="vit", width=384, depth=12, heads=6, patch=32),
        VisionModel(name="vit-b-8", family="vit", width=768, depth=12, heads=12, patch=8),
        VisionModel(name="vit-b-16", family="vit", width=768, depth=12, heads=12),
        VisionModel(name="vit-l-16", family="vit", width=1024, depth=24, heads=16),
        VisionModel(name="vit-b-32", family="vit", width=768, depth=12, heads=12, patch=32),
        VisionModel(name="vit-l-32", family="vit", width=1024, depth=24, heads=16, patch=32),
        VisionModel(name="vit-h-14", family="vit", width=1280, depth=32, heads=16, patch=14),
        VisionModel(name="mobilenet-v2", family="mobilenet"),
        VisionModel(name="efficientnet-b0", family="efficientnet"),
        VisionModel(name="efficientnet-b1", family="efficientnet", width_mult=1.0, depth_mult=1.1),
        VisionModel(name="efficientnet-b2", family="efficientnet", width_mult=1.1, depth_mult=1.2),
        VisionModel(name="efficientnet-b3", family="efficientnet", width_mult=1.2, depth_mult=1.4),
        VisionModel(name="efficientnet-b4", family="efficientnet", width_mult=1.4, depth_mult=1.8),
        VisionModel(name="efficientnet-b5", family="efficientnet", width_mult=1.6, depth_mult=2.2),
        VisionModel(name="efficientnet-widese-b0", family="efficientnet", wide_se=True),
        VisionModel(
            name="efficientnet-widese-b4", family="efficientnet", width_mult=1.4, depth_mult=1.8, wide_se=True
        ),
    )
}
_ALIASES = {
    "resnet50": "resnet-50", "resnet18": "resnet-18", "resnet152": "resnet-152", "vgg16": "vgg-16",
    "resnet34": "resnet-34", "resnet101": "resnet-101", "resnet200": "resnet-200",
    "tv-resnet50": "resnet-50", "tv-resnet152": "resnet-152", "tv-resnet34": "resnet-34",
    "tv-resnet101": "resnet-101", "mobilenetv2-100": "mobilenet-v2",
    "mobilenet-v2-100": "mobilenet-v2",
    # timm's ViTs (and DeiT's, the same encoders) at 16-px patches and 224 px
    "vit-small-patch16-224": "vit-s-16", "deit-small-patch16-224": "vit-s-16",
    "vit-base-patch16-224": "vit-b-16", "deit-base-patch16-224": "vit-b-16",
    "vit-large-patch16-224": "vit-l-16",
    "vit-base-patch32-224": "vit-b-32", "vit-large-patch32-224": "vit-l-32",
    "vit-tiny-patch16-224": "vit-ti-16", "deit-tiny-patch16-224": "vit-ti-16",
    "vit-small-patch32-224": "vit-s-32", "vit-base-patch8-224": "vit-b-8", "vit-huge-patch14-224": "vit-h-14",
}  # fmt: skip
# torchvision inverted-residual settings: MobileNet-V2 (expand t, out c, blocks n, stride s) and
# EfficientNet-B0 (expand, kernel, stride, in, out, blocks) before width and depth scaling.
_MOBILENET_V2 = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                 (6, 320, 1, 1))  # fmt: skip
_EFFICIENTNET_B0 = ((1, 3, 1, 32, 16, 1), (6, 3, 2, 16, 24, 2), (6, 5, 2, 24, 40, 2), (6, 3, 2, 40, 80, 3),
                    (6, 5, 1, 80, 112, 3), (6, 5, 2, 112, 192, 4), (6, 3, 1, 192, 320, 1))  # fmt: skip


def _divisible(value: float, divisor: int = 8) -> int:
    """torchvision's `_make_divisible`: round channels to a multiple of 8, never below 90% of `value`."""
    out = max(divisor, int(value + divisor / 2) // divisor * divisor)
    return out + divisor if out < 0.9 * value else out


_VGG16 = (64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M")


def is_vision_model(name: str) -> bool:
    key = name.lower().replace("_", "-")
    return key in VISION_MODELS or key in _ALIASES


def load_vision_model(name: str) -> VisionModel:
    key = name.lower().replace("_", "-")
    return VISION_MODELS[_ALIASES.get(key, key)]


class _Builder:
    def __init__(
        self, model: VisionModel, batch: int, dtype: Dtype, act: Dtype, layout: str, training: bool,
        attention: str = "flash",
    ) -> None:  # fmt: skip
        self.m, self.n, self.dtype, self.act, self.layout = model, batch, dtype, act, layout
        self.attention = attention  # a ViT's: fused (flash) or unfused (eager); see `_attention`
        # NCHW tensors around tensor-core convolutions (module docstring); fp32 convolutions read NCHW
        self.transpose = layout == "nchw" and dtype != "fp32"
        self.training = training  # batch norm from batch statistics (module docstring)
        self.ops: list[Op] = []
        self.params = 0

    def conv(self, name: str, c: int, k: int, hw: int, r: int, stride: int = 1, bn: bool = True) -> int:
        out = (hw + stride - 1) // stride
        rows = self.n * out * out
        if self.transpose:
            self.ew(f"{name}{LAYOUT_SUFFIX}", "copy", self.n * hw * hw * c)
        self.ops.append(GemmOp(name=name, m=rows, n=k, k=c * r * r, dtype=self.dtype, b_shared=True))
        if self.transpose:
            self.ew(f"{name}_out{LAYOUT_SUFFIX}", "copy", rows * k)
        self.params += c * r * r * k
        if bn:
            self.bn(f"{name}_bn", rows, k)
        return out

    def bn(self, name: str, rows: int, channels: int) -> None:
        """Batch norm over `rows` positions of `channels` (module docstring)."""
        # bf16 batch norm runs ATen's own kernels at their launch configuration (dse.perf.batchnorm); fp16
        # and fp32 take cuDNN's: its NCHW training kernels likewise, its NHWC and inference ones priced as
        # streaming passes.
        if self.act == "bf16":
            layout = self.layout
        else:
            layout = "cudnn-nchw" if self.layout == "nchw" and self.training else ""

        def op(op_name: str, kind: str) -> ElementwiseOp:
            return ElementwiseOp(
                name=op_name, kind=kind, num_elements=rows * channels, dtype=self.act, bn_layout=layout,
                bn_batch=self.n if layout else 0, bn_channels=channels if layout else 0,
            )  # fmt: skip

        if self.training:
            self.ops += [op(f"{name}_stats", "bn_stats"), op(name, "bn_apply")]
        elif layout:  # eval mode: ATen's normalize kernel over the running statistics
            self.ops.append(op(name, "bn_apply"))
        else:
            self.ops.append(NormOp(name=name, rows=rows, cols=channels, kind="layernorm", dtype=self.act))
        self.params += 2 * channels

    def ew(self, name: str, kind: str, elements: int, out_dtype: Dtype | None = None) -> None:
        self.ops.append(
            ElementwiseOp(name=name, kind=kind, num_elements=elements, dtype=self.act, out_dtype=out_dtype)
        )

    def inplace_act(self, name: str, kind: str, elements: int) -> None:
        """An in-place SiLU or ReLU6 (torchvision's MobileNet-V2 and EfficientNet, `inplace=True`); in
        training autograd first copies its input, which the gradient reads (module docstring)."""
        if self.training:
            self.ew(f"{name}{INPUT_CLONE_SUFFIX}", "copy", elements)
        self.ew(name, kind, elements)

    def fc(self, name: str, rows: int, c: int, k: int) -> None:
        self.ops.append(GemmOp(name=name, m=rows, n=k, k=c, dtype=self.dtype, b_shared=True))
        self.params += c * k + k

    def cudnn_depthwise(self, c: int, hw: int, stride: int) -> bool:
        """Whether PyTorch sends a depthwise convolution to cuDNN (aten/src/ATen/native/Convolution.cpp,
        `use_cudnn_depthwise` with cuDNN 8.2+): always for channels-last; for NCHW only in fp16 with 32+
        channels and a width of 7+, at stride 1, a batch of one, or stride 2 with 512+ channels or 256+ at a
        width of 28+ (`check_cudnn_depthwise_workload_with_filter`); else its own kernels."""
        if self.layout == "nhwc":
            return True
        if self.act != "fp16" or c < 32 or hw < 7:
            return False
        return stride == 1 or self.n == 1 or c >= 512 or (c >= 256 and hw >= 28)

    def depthwise(self, name: str, c: int, hw: int, r: int, stride: int, act: str) -> int:
        """Depthwise conv (module docstring) + batch norm + activation; returns the output side."""
        out = (hw + stride - 1) // stride
        rows = self.n * out * out
        # reads the input (n hw^2 c) once and writes the output (rows c) once: module docstring
        library = "" if self.cudnn_depthwise(c, hw, stride) else "_aten"
        self.ew(name, f"depthwise{r}x{r}{library}", -(-(self.n * hw * hw + rows) * c // 2))
        self.bn(f"{name}_bn", rows, c)
        self.inplace_act(f"{name}_act", act, rows * c)
        self.params += c * r * r
        return out

    def squeeze_excite(self, name: str, c: int, squeeze: int, hw: int) -> None:
        """Global pool, fc + SiLU, fc + sigmoid, channel scale (EfficientNet's SE block)."""
        self.ew(f"{name}/pool", "reduce", self.n * hw * hw * c)
        self.fc(f"{name}/fc1", self.n, c, squeeze)
        self.inplace_act(f"{name}/fc1_act", "silu", self.n * squeeze)
        self.fc(f"{name}/fc2", self.n, squeeze, c)
        self.ew(f"{name}/gate", "exp", self.n * c)
        self.ew(f"{name}/scale", "mul", self.n * hw * hw * c)

    def inverted_residual(self, pre: str, cin: int, cout: int, hw: int, spec: tuple[int, int, int]) -> int:
        """MobileNet-V2 / EfficientNet block: 1x1 expand, depthwise, (SE), 1x1 project, residual."""
        expand, r, stride = spec
        effnet = self.m.family == "efficientnet"
        act = "silu" if effnet else "relu"  # ReLU6 priced as ReLU
        hidden = _divisible(cin * expand) if effnet else int(round(cin * expand))
        if expand != 1:
            self.conv(f"{pre}/expand", cin, hidden, hw, 1)
            self.inplace_act(f"{pre}/expand_act", act, self.n * hw * hw * hidden)
        out = self.depthwise(f"{pre}/depthwise", hidden, hw, r, stride, act)
        if effnet:
            squeeze = max(1, (hidden if self.m.wide_se else cin) // 4)
            self.squeeze_excite(f"{pre}/se", hidden, squeeze, out)
        self.conv(f"{pre}/project", hidden, cout, out, 1)
        if stride == 1 and cin == cout:
            self.ew(f"{pre}/residual_add", "add", self.n * out * out * cout)
        return out

    def mobile(self, image_size: int) -> None:
        """MobileNet-V2 or EfficientNet (torchvision), with the width and depth multipliers."""
        root, effnet = self.m.name, self.m.family == "efficientnet"
        act = "silu" if effnet else "relu"
        c = _divisible(32 * self.m.width_mult)
        hw = self.conv(f"{root}/stem/conv", 3, c, image_size, 3, 2)
        self.inplace_act(f"{root}/stem/act", act, self.n * hw * hw * c)
        if effnet:
            stages = [
                (e, k, s, _divisible(co * self.m.width_mult), -(-n * self.m.depth_mult // 1))
                for e, k, s, _, co, n in _EFFICIENTNET_B0
            ]
        else:
            stages = [(t, 3, s, co, n) for t, co, n, s in _MOBILENET_V2]
        for si, (expand, r, stride, cout, num) in enumerate(stages):
            for i in range(int(num)):
                spec = (expand, r, stride if i == 0 else 1)
                hw = self.inverted_residual(f"{root}/stage{si + 1}/block{i}", c, cout, hw, spec)
                c = cout
        last = 4 * c if effnet else 1280
        self.conv(f"{root}/head/conv", c, last, hw, 1)
        self.inplace_act(f"{root}/head/act", act, self.n * hw * hw * last)
        self.ew(f"{root}/avgpool", "reduce", self.n * hw * hw * last)
        self.fc(f"{root}/classifier", self.n, last, self.m.num_classes)

    def resnet(self, image_size: int) -> None:
        root, n = self.m.name, self.n
        hw = self.conv(f"{root}/stem/conv", 3, 64, image_size, 7, 2)
        self.ew(f"{root}/stem/relu", "relu", n * hw * hw * 64)
        hw = (hw + 1) // 2
        self.ew(f"{root}/stem/maxpool", "copy", n * hw * hw * 64)
        c = 64
        for stage, count in enumerate(self.m.blocks):
            width = 64 * 2**stage
            out_c = width * 4 if self.m.bottleneck else width
            for i in range(count):
                stride = 2 if stage > 0 and i == 0 else 1
                pre = f"{root}/stage{stage + 1}/block{i}"
                # a ReLU follows every convolution but the last, and the residual add: each over its
                # own output (the bottleneck's inner two are a quarter of the block's width)
                if self.m.bottleneck:
                    self.conv(f"{pre}/conv1", c, width, hw, 1)
                    self.ew(f"{pre}/conv1_relu", "relu", n * hw * hw * width)
                    new = self.conv(f"{pre}/conv2", width, width, hw, 3, stride)
                    self.ew(f"{pre}/conv2_relu", "relu", n * new * new * width)
                    self.conv(f"{pre}/conv3", width, out_c, new, 1)
                else:
                    new = self.conv(f"{pre}/conv1", c, width, hw, 3, stride)
                    self.ew(f"{pre}/conv1_relu", "relu", n * new * new * width)
                    self.conv(f"{pre}/conv2", width, out_c, new, 3)
                if stride != 1 or c != out_c:
                    self.conv(f"{pre}/downsample", c, out_c, hw, 1, stride)
                hw, c = new, out_c
                self.ew(f"{pre}/residual_add", "add", n * hw * hw * c)
                self.ew(f"{pre}/relu", "relu", n * hw * hw * c)
        self.ew(f"{root}/avgpool", "copy", n * c)
        self.fc(f"{root}/fc", n, c, self.m.num_classes)

    def vgg(self, hw: int) -> None:
        root, n, c = self.m.name, self.n, 3
        for i, item in enumerate(_VGG16):
            if item == "M":
                hw //= 2
                self.ew(f"{root}/features/pool{i}", "copy", n * hw * hw * c)
                continue
            k = int(str(item))
            self.conv(f"{root}/features/conv{i}", c, k, hw, 3, bn=False)
            self.params += k  # bias
            self.ew(f"{root}/features/relu{i}", "relu", n * hw * hw * k)
            c = k
        self.fc(f"{root}/classifier/fc1", n, 512 * 7 * 7, 4096)
        self.fc(f"{root}/classifier/fc2", n, 4096, 4096)
        self.fc(f"{root}/classifier/fc3", n, 4096, self.m.num_classes)

    def vit(self, hw: int) -> None:
        """Pre-LayerNorm encoder as eager PyTorch runs it under autocast (module docstring): an fp32
        residual stream and LayerNorms, a cast before each Linear after a LayerNorm, and the attention
        of `_attention`."""
        m, n, root = self.m, self.n, self.m.name
        d, patches = m.width, (hw // m.patch) ** 2
        s = patches + 1
        t, pre, L = n * s, f"{root}/layer[0-{m.depth - 1}]", m.depth
        act, autocast = self.act, self.act != "fp32"
        self.ops.append(
            GemmOp(
                name=f"{root}/patch_embed",
                m=n * patches,
                n=d,
                k=3 * m.patch**2,
                dtype=self.dtype,
                b_shared=True,
            )
        )
        self.params += 3 * m.patch**2 * d + d + d + s * d  # conv + bias, class token, positions
        if autocast:  # cat with the fp32 class token promotes the patches to fp32
            self.ew(f"{root}/class_token_cat", "cast", t * d, out_dtype="fp32")
        self.ops.append(ElementwiseOp(name=f"{root}/pos_add", kind="add", num_elements=t * d, dtype="fp32"))

        def ew(name: str, kind: str, elements: int, dtype: Dtype = act, out: Dtype | None = None) -> Op:
            return ElementwiseOp(
                name=f"{pre}/{name}", kind=kind, num_elements=elements, dtype=dtype, out_dtype=out, count=L
            )

        def cast(name: str) -> list[Op]:  # the fp32 LayerNorm output cast for the next Linear
            return [ew(name, "cast", t * d, "fp32", act)] if autocast else []

        layer: list[Op] = [
            NormOp(name=f"{pre}/attn/norm", rows=t, cols=d, dtype="fp32", count=L),
            *cast("attn/cast"),
            GemmOp(name=f"{pre}/attn/qkv_proj", m=t, n=3 * d, k=d, dtype=self.dtype, b_shared=True, count=L),
            *self._attention(pre, s, L),
            GemmOp(name=f"{pre}/attn/o_proj", m=t, n=d, k=d, dtype=self.dtype, b_shared=True, count=L),
            ew("attn/residual_add", "add", t * d, "fp32"),
            NormOp(name=f"{pre}/mlp/norm", rows=t, cols=d, dtype="fp32", count=L),
            *cast("mlp/cast"),
            GemmOp(name=f"{pre}/mlp/up_proj", m=t, n=4 * d, k=d, dtype=self.dtype, b_shared=True, count=L),
            ew("mlp/act", "gelu", t * 4 * d),
            GemmOp(name=f"{pre}/mlp/down_proj", m=t, n=d, k=4 * d, dtype=self.dtype, b_shared=True, count=L),
            ew("mlp/residual_add", "add", t * d, "fp32"),
        ]
        self.ops += layer
        self.params += L * (12 * d * d + 13 * d)  # qkv, o, up, down with biases; two LayerNorms
        # every token is normalized before the class token is taken (torchvision's encoder `ln`, timm)
        self.ops.append(NormOp(name=f"{root}/final_norm", rows=t, cols=d, dtype="fp32"))
        self.params += 2 * d
        self.fc(f"{root}/head", n, d, m.num_classes)

    def _attention(self, pre: str, s: int, layers: int) -> list[Op]:
        """A ViT layer's attention over `s` tokens: one fused kernel (`flash`: PyTorch's SDPA, as timm
        and torchvision run it since PyTorch 2) or, `eager`, the unfused kernels of a hand-written
        attention under autocast (timm before its fused path, Hugging Face's eager ViT, DeiT): the Q, K, V
        heads made contiguous, S = Q K^T, its scale, the softmax (fp32 under autocast), the probabilities
        cast back for P V, and the context transposed back to tokens (a copy)."""
        m, n, act = self.m, self.n, self.act
        heads, head_dim = m.heads, m.width // m.heads
        # The fused kernel writes its output token-major: the reshape back to tokens is a view (timm,
        # Hugging Face); torchvision's `MultiheadAttention` copies around it (module docstring).
        if self.attention == "flash":
            return [
                AttentionOp(
                    name=f"{pre}/attn/attention",
                    batch=n,
                    num_heads=heads,
                    num_kv_heads=heads,
                    head_dim=head_dim,
                    seq_len_q=s,
                    seq_len_kv=s,
                    causal=False,
                    dtype=act,
                    count=layers,
                )  # fmt: skip
            ]
        scores = n * heads * s * s
        soft: Dtype = "fp32" if act != "fp32" else act

        def ew(name: str, kind: str, elements: int, dtype: Dtype = act, out: Dtype | None = None) -> Op:
            return ElementwiseOp(
                name=f"{pre}/attn/{name}", kind=kind, num_elements=elements, dtype=dtype, out_dtype=out,
                count=layers,
            )  # fmt: skip

        def bmm(name: str, rows: int, cols: int, inner: int) -> GemmOp:
            return GemmOp(
                name=f"{pre}/attn/{name}", m=rows, n=cols, k=inner, batch=n * heads, dtype=act,
                b_shared=False, count=layers,
            )  # fmt: skip

        return [
            ew(f"qkv_to_heads{CONTIGUOUS_SUFFIX}", "copy", 3 * n * s * m.width),
            bmm("scores", s, s, head_dim),
            ew("scale", "scale", scores),
            SoftmaxOp(name=f"{pre}/attn/softmax", rows=n * heads * s, cols=s, dtype=soft, count=layers),
            *([ew("probs_cast", "cast", scores, "fp32", act)] if soft != act else []),
            bmm("context", s, head_dim, s),
            ew(f"heads_to_tokens{CONTIGUOUS_SUFFIX}", "copy", n * s * m.width),
        ]


# Every convolutional family here halves the image five times (stride 32 to its last feature map).
CNN_STRIDE_PX = 32


def _check_image_size(model: VisionModel, image_size: int) -> None:
    """ConfigError naming --image-size unless every layer keeps at least one pixel: a multiple of the patch
    for a ViT (torchvision's `VisionTransformer` refuses other sizes), at least the total stride for CNNs."""
    if model.family == "vit":
        if image_size < model.patch or image_size % model.patch:
            raise ConfigError(
                f"--image-size {image_size}: {model.name} needs a positive multiple of its "
                f"{model.patch}-px patch"
            )
    elif image_size < CNN_STRIDE_PX:
        raise ConfigError(
            f"--image-size {image_size}: {model.name} needs at least {CNN_STRIDE_PX} px (its total stride)"
        )


def op_output_bytes(op: Op) -> float:
    """Bytes of one run of `op`'s output tensor (0 for an op without one)."""
    if isinstance(op, GemmOp):
        return op.batch * op.m * op.n * BYTES_PER_ELEMENT[op.c_dtype]
    if isinstance(op, NormOp | SoftmaxOp):
        return op.rows * op.cols * BYTES_PER_ELEMENT[op.dtype]
    if isinstance(op, ElementwiseOp):
        return op.num_elements * BYTES_PER_ELEMENT[op.out_dtype or op.dtype] if op.num_outputs else 0.0
    if isinstance(op, AttentionOp):
        return op.batch * op.seq_len_q * op.num_heads * op.head_dim * BYTES_PER_ELEMENT[op.dtype]
    return 0.0


def inference_memory_bytes(graph: WorkloadGraph) -> float:
    """GPU memory of a vision forward pass (`build_vision_graph`, inference): the fp32 weights (and their
    half-precision copies under autocast, cached for the pass), the fp32 input images, and the largest op's
    input and output at once (eager inference frees each activation once its consumer has run; an op's
    input is taken as large as its output)."""
    meta = graph.meta
    params, batch, size = (int(str(meta[k])) for k in ("num_params", "batch", "image_size"))
    half = 2.0 if str(meta.get("precision")) not in ("fp32", "tf32") else 0.0
    largest = max((op_output_bytes(op) for op in graph.ops), default=0.0)
    return params * (4.0 + half) + batch * 3 * size * size * 4.0 + 2.0 * largest


def build_vision_graph(
    model: VisionModel,
    *,
    batch: int,
    image_size: int = 224,
    precision: str = "fp16",
    memory_format: str = "nhwc",
    training: bool = False,
    attention: str = "flash",
) -> tuple[WorkloadGraph, int]:
    """(forward graph of `batch` images, parameter count). Precision: GEMM dtype; activations in fp32
    for fp32/tf32, else in `precision` (bf16 activations under fp8). `memory_format` nchw (PyTorch's
    default) or nhwc (channels_last): NCHW tensor-core convolutions pay cuDNN's layout transposes.
    `training`: the forward of a training step (batch norm from batch statistics, two passes).
    `attention`: a ViT's attention, flash (fused, PyTorch's SDPA) or eager (its unfused kernels under
    autocast); convolutional networks have none and refuse eager."""
    if memory_format not in MEMORY_FORMATS:
        raise ConfigError(f"memory format '{memory_format}' is not one of {', '.join(MEMORY_FORMATS)}")
    if precision not in VISION_PRECISIONS:
        raise ConfigError(
            f"precision '{precision}' (--precision): {model.name} is a vision model, which runs in "
            + ", ".join(VISION_PRECISIONS)
        )
    if precision == "fp8" and model.family != "vit":  # a ViT's Linear layers take fp8 (Transformer Engine)
        raise ConfigError(
            f"precision fp8 (--precision): {model.name} is a convolutional network, modelled as eager "
            "PyTorch, which has no fp8 convolutions (TensorRT's are not modelled): use fp16, bf16, tf32 "
            "or fp32"
        )
    if batch < 1:
        raise ConfigError(f"batch {batch} (--batch / --micro-batch): {model.name} needs at least one image")
    _check_image_size(model, image_size)
    if attention not in ("flash", "eager") or (attention == "eager" and model.family != "vit"):
        has = "flash or eager" if model.family == "vit" else "none: it is a convolutional network"
        raise ConfigError(f"attention '{attention}' (--attention): {model.name}'s attention is {has}")
    dtype: Dtype = precision  # type: ignore[assignment]
    act: Dtype = "fp32" if precision in ("fp32", "tf32") else ("bf16" if precision == "fp8" else dtype)
    b = _Builder(model, batch, dtype, act, memory_format, training, attention)
    layers = {"resnet": b.resnet, "vgg": b.vgg, "mobilenet": b.mobile, "efficientnet": b.mobile}
    try:
        layers.get(model.family, b.vit)(image_size)
    except ShapeError as exc:  # it named an operator, not the flags that made it too large
        raise ShapeError(
            f"batch {batch} (--batch / --micro-batch) at --image-size {image_size}: {exc}"
        ) from None
    meta: dict[str, object] = {
        "model": model.name,
        "phase": "train_forward" if training else "forward",
        "batch": batch,
        "image_size": image_size,
        "num_tokens": batch,
        "precision": precision,
        **({"attention": attention} if model.family == "vit" else {"memory_format": memory_format}),
        "num_params": b.params,
    }
    return WorkloadGraph(name=f"{model.name}/forward", ops=tuple(b.ops), meta=meta), b.params

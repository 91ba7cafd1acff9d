"""TorchLlm: an `LlmArch` as eager torch ops with random weights, for `dse.measure.model_run.measure_model`.

torch is imported when a TorchLlm is built, never at import. The model runs exactly the ops that
`dse.workload.llm` puts in the graph, in the same order, each inside a `record_function` named like the
graph op (`<model>/layer[0-31]/attn/qkv_proj`), so measured and predicted breakdowns share keys. Nothing is
downloaded: weights are random normal (std 0.02), inputs random token ids.
"""

from __future__ import annotations

import json
import logging
import math
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from dse.errors import ConfigError, MeasurementError
from dse.measure.model_run import SYNC_MARKER, ProfiledRun
from dse.workload.llm import LlmArch

logger = logging.getLogger(__name__)


def _check_arch(arch: LlmArch, precision: str, attention: str, phase: str, kv_len: int) -> None:
    if precision not in ("fp32", "tf32", "bf16", "fp16"):
        raise ConfigError(f"model runs support precision fp32, tf32, bf16 or fp16, not '{precision}'")
    if attention not in ("flash", "eager"):
        raise ConfigError(f"attention '{attention}' is not flash or eager")
    if phase not in ("prefill", "decode"):
        raise ConfigError(f"phase '{phase}' is not prefill or decode")
    if phase == "decode" and arch.family != "decoder":
        raise ConfigError(f"{arch.name} is an encoder: it has no decode phase")
    if kv_len > arch.max_position_embeddings:
        raise ConfigError(
            f"{kv_len} tokens exceed {arch.name}'s max_position_embeddings {arch.max_position_embeddings}"
        )


class TorchLlm:
    """`arch` as eager torch ops with random weights, one forward pass of `phase` per `run` call.

    Prefill: `batch` sequences of `seq_len` tokens (causal for decoders), LM head on the last token of each
    sequence. Decode: one new token per sequence against a KV cache of `seq_len` tokens. Op annotations are
    the `dse.workload.llm` graph names; see the module docstring.
    """

    def __init__(
        self,
        arch: LlmArch,
        *,
        batch: int,
        seq_len: int,
        phase: str = "prefill",
        precision: str = "bf16",
        attention: str = "flash",
        device_index: int = 0,
        seed: int = 0,
        device: str = "cuda",
    ) -> None:
        from dse.measure.kernels import import_torch, torch_dtype

        _check_arch(arch, precision, attention, phase, seq_len if phase == "prefill" else seq_len + 1)
        if device not in ("cuda", "cpu"):
            raise ConfigError(f"device '{device}' is not cuda or cpu")
        torch = import_torch()
        if device == "cuda" and not torch.cuda.is_available():
            raise MeasurementError(
                "PyTorch sees no CUDA GPU: dse measure needs a CUDA build of PyTorch and a GPU"
            )
        self.torch = torch
        # "cpu" runs the same ops on the host: a dry run that checks the model against the dse graph
        # (op names, order, shapes) without a GPU; nothing is measured there.
        self.on_gpu = device == "cuda"
        self.arch, self.batch, self.phase, self.attention = arch, batch, phase, attention
        self.q_len = seq_len if phase == "prefill" else 1
        self.kv_len = seq_len if phase == "prefill" else seq_len + 1
        self.dtype = torch_dtype(torch, precision)
        self.name = arch.name
        self.label = f"{arch.name}/{phase}"
        self.kernel_name = ""
        self.meta = {
            "precision": precision,
            "attention": attention,
            "batch": batch,
            "seq_len": seq_len,
            "seq_len_q": self.q_len,
            "seq_len_kv": self.kv_len,
        }
        self.device = torch.device("cuda", device_index) if self.on_gpu else torch.device("cpu")
        self._native_gqa = True
        self._previous_tf32 = torch.backends.cuda.matmul.allow_tf32
        torch.backends.cuda.matmul.allow_tf32 = precision == "tf32"
        if self.on_gpu:
            self._check_memory()
        self._gen = torch.Generator(device=self.device)
        self._gen.manual_seed(seed)
        self._build()

    def _check_memory(self) -> None:
        a, item = self.arch, self.torch.tensor([], dtype=self.dtype).element_size()
        cache = a.kv_cache_elements_per_token * self.batch * self.kv_len if a.causal else 0
        acts = 8 * self.batch * self.q_len * max(a.hidden_size, a.intermediate_size * 2)
        scores = self.batch * a.num_heads * self.q_len * self.kv_len if self.attention == "eager" else 0
        need = (a.num_params + cache + acts + 2 * scores) * item
        free, _ = self.torch.cuda.mem_get_info(self.device)
        if need > 0.9 * free:
            raise MeasurementError(
                f"{a.name} at batch {self.batch} x {self.kv_len} tokens needs about "
                f"{need / 2**30:.1f} GiB; the GPU has {free / 2**30:.1f} GiB free"
            )

    def _w(self, *shape: int, std: float = 0.02) -> Any:
        x = self.torch.empty(*shape, device=self.device, dtype=self.dtype)
        return x.normal_(0.0, std, generator=self._gen)

    def _build(self) -> None:
        a, torch = self.arch, self.torch
        d, e, ff = a.hidden_size, a.embed_dim, a.intermediate_size
        b, sq = self.batch, self.q_len
        self.tok_emb = self._w(a.vocab_size, e)
        self.ids = torch.randint(0, a.vocab_size, (b, sq), device=self.device, generator=self._gen)
        self.proj_in = self._w(d, e) if e != d else None
        self.proj_out = self._w(e, d) if e != d else None
        self.pos_emb = self._w(a.num_position_embeddings, d) if a.position_embedding == "learned" else None
        start = self.kv_len - sq
        self.pos_ids = torch.arange(start, start + sq, device=self.device).expand(b, sq)
        self.type_emb = self._w(a.type_vocab_size, d) if a.type_vocab_size else None
        self.type_ids = torch.zeros(b, sq, dtype=torch.long, device=self.device)
        self.embed_norm = self._norm_weights() if a.embedding_norm else None
        self.final_norm = self._norm_weights() if a.final_norm else None
        self.lm_head = None
        if a.family == "decoder":
            self.lm_head = self.tok_emb if a.tie_word_embeddings else self._w(a.vocab_size, e)
        self.pooler = (self._w(d, d), self._w(d)) if a.pooler else None
        if a.position_embedding == "rope":
            half = a.head_dim // 2
            inv = 1.0 / (float(a.rope_theta or 10000.0) ** (torch.arange(half, device=self.device) / half))
            ang = torch.arange(start, start + sq, device=self.device)[:, None] * inv[None, :]
            emb = torch.cat((ang, ang), dim=-1)
            self.cos, self.sin = emb.cos().to(self.dtype), emb.sin().to(self.dtype)
        self.layers = []
        num_up = 2 if a.gated_mlp else 1
        for _ in range(a.num_layers):
            qkv_out = a.q_dim + 2 * a.kv_dim
            layer = {
                "attn_norm": self._norm_weights(),
                "mlp_norm": self._norm_weights(),
                "qkv": self._w(qkv_out, d),
                "qkv_b": self._w(qkv_out) if a.qkv_bias else None,
                "o": self._w(d, a.q_dim),
                "o_b": self._w(d) if a.o_bias else None,
                "up": self._w(num_up * ff, d),
                "up_b": self._w(num_up * ff) if a.mlp_bias else None,
                "down": self._w(d, ff),
                "down_b": self._w(d) if a.mlp_bias else None,
                # Qwen3: one RMSNorm weight of head_dim for q and one for k, shared by all heads
                "q_norm": 1.0 + self._w(a.head_dim) if a.qk_norm else None,
                "k_norm": 1.0 + self._w(a.head_dim) if a.qk_norm else None,
            }
            if a.causal:
                layer["k_cache"] = self._w(b, a.num_kv_heads, self.kv_len, a.head_dim, std=1.0)
                layer["v_cache"] = self._w(b, a.num_kv_heads, self.kv_len, a.head_dim, std=1.0)
            self.layers.append(layer)
        last = a.num_layers - 1
        self._layer_prefix = f"{a.name}/layer[0-{last}]" if last else f"{a.name}/layer[0]"
        if self.attention == "eager" and a.causal and sq > 1:
            keep = torch.ones(sq, self.kv_len, device=self.device, dtype=torch.bool).tril(
                diagonal=self.kv_len - sq
            )
            self.mask = torch.zeros(sq, self.kv_len, device=self.device, dtype=self.dtype).masked_fill(
                ~keep, float("-inf")
            )
        else:
            self.mask = None

    def _norm_weights(self) -> tuple[Any, Any]:
        d = self.arch.hidden_size
        w = 1.0 + self._w(d)
        return (w, self._w(d)) if self.arch.norm == "layernorm" else (w, None)

    def _norm(self, x: Any, weights: tuple[Any, Any]) -> Any:
        F = self.torch.nn.functional
        w, bias = weights
        d, eps = x.shape[-1], self.arch.norm_eps
        if self.arch.norm == "layernorm":
            return F.layer_norm(x, (d,), w, bias, eps)
        if hasattr(F, "rms_norm"):
            return F.rms_norm(x, (d,), w, eps)
        xf = x.float()
        return (xf * self.torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)).to(self.dtype) * w

    def _act(self, x: Any) -> Any:
        F = self.torch.nn.functional
        return {"silu": F.silu, "relu": F.relu}.get(
            self.arch.activation, lambda t: F.gelu(t, approximate="tanh")
        )(x)

    def _rotate(self, x: Any) -> Any:
        half = x.shape[-1] // 2
        return x * self.cos + self.torch.cat((-x[..., half:], x[..., :half]), dim=-1) * self.sin

    def _attend(self, q: Any, k: Any, v: Any) -> Any:
        torch, a = self.torch, self.arch
        F = torch.nn.functional
        if self.attention == "eager":
            if a.num_kv_heads != a.num_heads:  # Hugging Face `repeat_kv`
                rep = a.num_heads // a.num_kv_heads
                k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
            scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(a.head_dim))
            if self.mask is not None:
                scores = scores + self.mask
            return torch.matmul(torch.softmax(scores, dim=-1), v)
        from torch.nn.attention import SDPBackend, sdpa_kernel

        causal = a.causal and self.q_len > 1
        # Flash attention has no fp32 kernels; PyTorch's memory-efficient one is the fused fp32 choice.
        half = self.dtype in (torch.bfloat16, torch.float16)
        backend = SDPBackend.FLASH_ATTENTION if half else SDPBackend.EFFICIENT_ATTENTION
        backends = [backend] if self.on_gpu else [SDPBackend.FLASH_ATTENTION, SDPBackend.MATH]
        with sdpa_kernel(backends):
            if a.num_kv_heads == a.num_heads:
                return F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            if self._native_gqa:
                try:
                    return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=True)
                except (TypeError, RuntimeError) as exc:  # torch < 2.5, or a backend without GQA
                    logger.info("no native GQA in SDPA (%s): expanding K/V", str(exc).splitlines()[0])
                    self._native_gqa = False
            rep = a.num_heads // a.num_kv_heads
            return F.scaled_dot_product_attention(
                q, k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1), is_causal=causal
            )

    def forward(self) -> Any:
        torch, a = self.torch, self.arch
        F = torch.nn.functional
        rf = torch.profiler.record_function
        b, sq, pre, root = self.batch, self.q_len, self._layer_prefix, a.name
        with rf(f"{root}/embed/tokens"):
            x = F.embedding(self.ids, self.tok_emb)  # [b, s, e]
        if self.proj_in is not None:
            with rf(f"{root}/embed/project_in"):
                x = F.linear(x, self.proj_in)
        extra = []
        if self.pos_emb is not None:
            with rf(f"{root}/embed/positions"):
                extra.append(F.embedding(self.pos_ids + (2 if a.model_type == "opt" else 0), self.pos_emb))
        if self.type_emb is not None:
            with rf(f"{root}/embed/token_types"):
                extra.append(F.embedding(self.type_ids, self.type_emb))
        for table in extra:
            with rf(f"{root}/embed/add"):
                x = x + table
        if self.embed_norm is not None:
            with rf(f"{root}/embed/norm"):
                x = self._norm(x, self.embed_norm)
        for layer in self.layers:
            x = self._attention_block(x, layer, pre, b, sq)
            x = self._mlp_block(x, layer, pre)
        if self.final_norm is not None:
            with rf(f"{root}/final_norm"):
                x = self._norm(x, self.final_norm)
        if self.proj_out is not None:
            with rf(f"{root}/project_out"):
                x = F.linear(x, self.proj_out)
        out = x
        if self.lm_head is not None:
            with rf(f"{root}/lm_head"):
                out = F.linear(x[:, -1, :], self.lm_head)  # [b, vocab]: last token of each sequence
        if self.pooler is not None:
            with rf(f"{root}/pooler/dense"):
                out = F.linear(x[:, 0, :], self.pooler[0], self.pooler[1])
            with rf(f"{root}/pooler/act"):
                out = torch.tanh(out)
        return out

    def _attention_block(self, x: Any, layer: dict[str, Any], pre: str, b: int, sq: int) -> Any:
        a, torch = self.arch, self.torch
        F, rf = torch.nn.functional, torch.profiler.record_function
        h = x
        if a.norm_position == "pre":
            with rf(f"{pre}/attn/norm"):
                h = self._norm(x, layer["attn_norm"])
        with rf(f"{pre}/attn/qkv_proj"):
            qkv = F.linear(h, layer["qkv"], layer["qkv_b"])  # [b, s, (h + 2kv) * hd]
        q, k, v = qkv.split([a.q_dim, a.kv_dim, a.kv_dim], dim=-1)
        q = q.view(b, sq, a.num_heads, a.head_dim).transpose(1, 2)
        k = k.view(b, sq, a.num_kv_heads, a.head_dim).transpose(1, 2)
        v = v.view(b, sq, a.num_kv_heads, a.head_dim).transpose(1, 2)
        if a.qk_norm:  # RMSNorm of every q and k head over head_dim, before RoPE
            with rf(f"{pre}/attn/q_norm"):
                q = self._norm(q, (layer["q_norm"], None))
            with rf(f"{pre}/attn/k_norm"):
                k = self._norm(k, (layer["k_norm"], None))
        if a.position_embedding == "rope":
            with rf(f"{pre}/attn/rotary"):
                q, k = self._rotate(q), self._rotate(k)
        if a.causal:
            with rf(f"{pre}/attn/kv_cache_write"):
                layer["k_cache"][:, :, self.kv_len - sq :].copy_(k)
                layer["v_cache"][:, :, self.kv_len - sq :].copy_(v)
            k, v = layer["k_cache"], layer["v_cache"]
            if sq == 1:  # a decoding token sees the last `decode_keys` keys (sliding window)
                keys = a.decode_keys(self.kv_len)
                k, v = k[:, :, -keys:], v[:, :, -keys:]
        with rf(f"{pre}/attn/attention"):
            o = self._attend(q, k, v)  # [b, h, s, hd]
            o = o.transpose(1, 2).reshape(b, sq, a.q_dim)  # the layout copy counts as attention
        with rf(f"{pre}/attn/o_proj"):
            o = F.linear(o, layer["o"], layer["o_b"])
        with rf(f"{pre}/attn/residual_add"):
            x = x + o
        if a.norm_position == "post":
            with rf(f"{pre}/attn/norm"):
                x = self._norm(x, layer["attn_norm"])
        return x

    def _mlp_block(self, x: Any, layer: dict[str, Any], pre: str) -> Any:
        a, torch = self.arch, self.torch
        F, rf = torch.nn.functional, torch.profiler.record_function
        h = x
        if a.norm_position == "pre":
            with rf(f"{pre}/mlp/norm"):
                h = self._norm(x, layer["mlp_norm"])
        if a.gated_mlp:
            with rf(f"{pre}/mlp/gate_up_proj"):
                gu = F.linear(h, layer["up"], layer["up_b"])
            with rf(f"{pre}/mlp/act"):
                gate, up = gu.chunk(2, dim=-1)
                h = self._act(gate) * up
        else:
            with rf(f"{pre}/mlp/up_proj"):
                h = F.linear(h, layer["up"], layer["up_b"])
            with rf(f"{pre}/mlp/act"):
                h = self._act(h)
        with rf(f"{pre}/mlp/down_proj"):
            h = F.linear(h, layer["down"], layer["down_b"])
        with rf(f"{pre}/mlp/residual_add"):
            x = x + h
        if a.norm_position == "post":
            with rf(f"{pre}/mlp/norm"):
                x = self._norm(x, layer["mlp_norm"])
        return x

    # ---- ModelRunner interface
    def run(self, num_calls: int) -> int:
        with self.torch.inference_mode():
            for _ in range(num_calls):
                self.forward()
        self._sync()
        return num_calls

    def _sync(self) -> None:
        if self.on_gpu:
            self.torch.cuda.synchronize()

    def profile(self, num_passes: int, now_s: Callable[[], float]) -> ProfiledRun:
        from torch.profiler import ProfilerActivity, profile, record_function

        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if self.on_gpu else [])
        with profile(activities=activities) as prof:
            self._sync()
            marker_host_s = now_s()
            with record_function(SYNC_MARKER):
                pass
            t0 = now_s()
            self.run(num_passes)
            t1 = now_s()
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "trace.json"
            prof.export_chrome_trace(str(path))
            trace = json.loads(path.read_text())
        return ProfiledRun(trace=trace, marker_host_s=marker_host_s, t0_s=t0, t1_s=t1, num_passes=num_passes)

    def release(self) -> None:
        self.layers = []
        self.torch.backends.cuda.matmul.allow_tf32 = self._previous_tf32
        if self.on_gpu:
            self.torch.cuda.empty_cache()


def build_torch_llm(
    arch: LlmArch,
    *,
    batch: int,
    seq_len: int,
    phase: str = "prefill",
    precision: str = "bf16",
    attention: str = "flash",
    device_index: int = 0,
    seed: int = 0,
    device: str = "cuda",
) -> TorchLlm:
    """A TorchLlm for `arch` (raises MeasurementError without torch or a GPU, ConfigError on bad options).

    `device="cpu"` builds the same model on the host (a dry run of the op sequence; nothing to measure).
    """
    return TorchLlm(
        arch,
        batch=batch,
        seq_len=seq_len,
        phase=phase,
        precision=precision,
        attention=attention,
        device_index=device_index,
        seed=seed,
        device=device,
    )

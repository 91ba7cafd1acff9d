"""The serving load options of `dse predict` and `dse whatif`: one load mode, engine knobs, lengths.

Exactly one of `--batch B` (a static batch: the default, batch 1 for predict), `--concurrency C` (closed
loop), `--request-rate R` (Poisson) or `--max-throughput` (offline). The engine knobs and length options
apply to the three load modes (`dse.serving.load`); given with a static batch they are an error rather
than silently ignored. The layout (--tp, --pp, --ep, --dp) applies to every serving mode.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Annotated, Any

import typer
from rich.text import Text

from dse.cli.common import ServingBatchOpt, err_console
from dse.errors import ConfigError, DseError
from dse.serving import DEFAULT_INPUT_TOKENS, DEFAULT_OUTPUT_TOKENS
from dse.serving.load import DEFAULT_LENGTH_SIGMA, MODE_TEXT, engine_settings
from dse.workload.sharding import PARALLEL_FLAGS

ConcurrencyOpt = Annotated[
    int | None, typer.Option("--concurrency", help="Load: closed loop, this many requests always in flight.")
]
RequestRateOpt = Annotated[
    float | None, typer.Option("--request-rate", help="Load: open loop, Poisson arrivals at this many req/s.")
]
MaxThroughputOpt = Annotated[
    bool, typer.Option("--max-throughput", help="Load: offline, every request queued at t = 0.")
]
MaxSeqsOpt = Annotated[
    int | None, typer.Option("--max-num-seqs", help="Load: most running sequences (default: the engine's).")
]
MaxTokensOpt = Annotated[
    int | None,
    typer.Option("--max-batched-tokens", help="Load: tokens per engine step (default: the engine's)."),
]
MemFracOpt = Annotated[
    float | None,
    typer.Option(
        "--gpu-memory-utilization",
        help="Load: the engine's memory fraction (vllm, none: share of GPU memory for weights + KV cache, "
        "default 0.9; sglang: mem_fraction_static; trtllm: share of the memory the weights leave for the "
        "KV cache, default 0.9).",
    ),
]
HostStepOpt = Annotated[
    float | None,
    typer.Option(
        "--host-step-us",
        help="Load: the engine's CPU time per step, the GPU idle meanwhile (default: vllm 700, as vLLM "
        "0.10-0.12 without async scheduling; 0 for sglang, trtllm, none and vLLM with async scheduling).",
    ),
]
LayerHostOpt = Annotated[
    float | None,
    typer.Option(
        "--layer-host-us",
        help="Load: the engine's CPU time per dense decoder layer, i.e. per 10 kernel launches (a Llama "
        "layer as vLLM runs it), of a step without CUDA graphs (long prompt chunks, decodes past its "
        "largest graph, trtllm's and sglang's prompt steps; none models no graphs, so every step): the step "
        "lasts at least its layers' launches / 10 x this (an MoE layer launches 14-29) (default: vllm, "
        "sglang and trtllm 800, none 0).",
    ),
]
NumRequestsOpt = Annotated[
    int | None,
    typer.Option(
        "--num-requests",
        help="Load: requests simulated. Default (per --dp replica): 10 x concurrency, >= 200 "
        "(--concurrency); 500 (--request-rate); 4 x max_num_seqs, >= 1,000 (--max-throughput); each times "
        "1 + CV^2 of the lengths (lognormal 1.28 at sigma 0.5, exponential 2). A number given is shared by "
        "the --dp replicas, rounded up to a multiple of dp. README: --num-requests.",
    ),
]
RequestSeedOpt = Annotated[int, typer.Option("--seed", help="Load: seed of lengths and arrivals.")]
LengthDistOpt = Annotated[
    str,
    typer.Option(
        "--length-dist",
        help="Load: fixed, lognormal (mean = the tokens given, --length-sigma) or exponential lengths.",
    ),
]
TpOpt = Annotated[int, typer.Option("--tp", help="Tensor-parallel GPUs per replica (heads, widths / T).")]
PpOpt = Annotated[int, typer.Option("--pp", help="Pipeline stages (layers / P; one micro-batch per step).")]
EpOpt = Annotated[
    int, typer.Option("--ep", help="Expert-parallel ways of the MoE layers (experts / E); divides T x D.")
]
# `dse predict`'s: it alone takes --training, whose step reads --pp and --ep as a training layout
PredictPpOpt = Annotated[
    int,
    typer.Option(
        "--pp",
        help="Pipeline stages (layers / P). Serving: one micro-batch per step. A training step (--training): "
        "1F1B over its global batch / (micro-batch x dp) micro-batches plus a bubble of (P - 1) / vp "
        "micro-batch times.",
    ),
]
PredictEpOpt = Annotated[
    int,
    typer.Option(
        "--ep",
        help="Expert-parallel ways of the MoE layers (experts / E); divides T x D (serving) or the "
        "tp x cp x dp GPUs of a stage (--training).",
    ),
]
DpOpt = Annotated[
    int,
    typer.Option(
        "--dp", help="Attention data-parallel replicas, each with its own scheduler (--max-num-seqs each)."
    ),
]
LengthSigmaOpt = Annotated[
    float | None,
    typer.Option(
        "--length-sigma", help=f"Load: log-space std of lognormal lengths (default {DEFAULT_LENGTH_SIGMA})."
    ),
]


@dataclass(frozen=True, slots=True, kw_only=True)
class LoadArgs:
    """What the load options of one command said (each field is its option: `with_options(load=LoadArgs)`)."""

    batch: ServingBatchOpt = None
    concurrency: ConcurrencyOpt = None
    request_rate: RequestRateOpt = None
    max_throughput: MaxThroughputOpt = False
    max_num_seqs: MaxSeqsOpt = None
    max_batched_tokens: MaxTokensOpt = None
    gpu_memory_utilization: MemFracOpt = None
    host_step_us: HostStepOpt = None
    layer_host_us: LayerHostOpt = None
    num_requests: NumRequestsOpt = None
    seed: RequestSeedOpt = 0
    length_dist: LengthDistOpt = "fixed"
    length_sigma: LengthSigmaOpt = None  # None: not given (DEFAULT_LENGTH_SIGMA), refused at any value
    tp: TpOpt = 1
    pp: PpOpt = 1
    ep: EpOpt = 1
    dp: DpOpt = 1

    def mode(self) -> str:
        """The one load mode asked for ("static" when none of the load modes is)."""
        given = [
            name
            for name, on in (
                ("--batch", self.batch is not None),
                ("--concurrency", self.concurrency is not None),
                ("--request-rate", self.request_rate is not None),
                ("--max-throughput", self.max_throughput),
            )
            if on
        ]
        if len(given) > 1:
            raise DseError(f"give one load mode, not {' and '.join(given)}")
        if self.concurrency is not None:
            return "concurrency"
        if self.request_rate is not None:
            return "request_rate"
        if self.max_throughput:
            return "max_throughput"
        knobs = {
            "--max-num-seqs": self.max_num_seqs,
            "--max-batched-tokens": self.max_batched_tokens,
            "--gpu-memory-utilization": self.gpu_memory_utilization,
            "--host-step-us": self.host_step_us,
            "--layer-host-us": self.layer_host_us,
            "--num-requests": self.num_requests,
        }
        extra = [k for k, v in knobs.items() if v is not None]
        extra += ["--length-dist"] if self.length_dist != "fixed" else []
        extra += ["--seed"] if self.seed != 0 else []
        extra += ["--length-sigma"] if self.length_sigma is not None else []
        if extra:
            verb = "applies" if len(extra) == 1 else "apply"
            raise DseError(
                f"{', '.join(extra)} {verb} to a load mode: add --concurrency C, --request-rate R or "
                "--max-throughput (a --batch is one static batch)"
            )
        return "static"

    def host_step_s(self) -> float | None:
        """`--host-step-us` in seconds (None: the engine's); DseError outside [0, 1e6] us."""
        return _micro_s("--host-step-us", "step", self.host_step_us, 6)

    def sigma(self) -> float:
        """`--length-sigma`, or its default where not given."""
        return DEFAULT_LENGTH_SIGMA if self.length_sigma is None else self.length_sigma

    def layer_host_s(self) -> float | None:
        """`--layer-host-us` in seconds (None: the engine's); DseError outside [0, 1e5] us."""
        return _micro_s("--layer-host-us", "dense layer", self.layer_host_us, 5)

    def request(self, *, input_tokens: int, output_tokens: int, precision: str, kv_dtype: str | None,
                engine: str, sampling: str | None) -> Any:  # fmt: skip
        """The LoadRequest of a load mode (its checks name the flags)."""
        if self.length_sigma is not None and self.length_dist != "lognormal":
            raise DseError(f"--length-sigma applies to --length-dist lognormal only (got {self.length_dist})")

        with named_as_flags():
            return self._request(input_tokens, output_tokens, precision, kv_dtype, engine, sampling)

    def _request(self, input_tokens: int, output_tokens: int, precision: str, kv_dtype: str | None,
                 engine: str, sampling: str | None) -> Any:  # fmt: skip
        from dse.serving.load import LoadRequest

        return LoadRequest(
            mode=self.mode(),
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            concurrency=self.concurrency,
            request_rate_per_s=self.request_rate,
            num_requests=self.num_requests,
            length_dist=self.length_dist,
            length_sigma=self.sigma(),
            seed=self.seed,
            precision=precision,
            kv_dtype=kv_dtype,
            engine=engine,
            sampling=sampling,
            max_num_seqs=self.max_num_seqs,
            max_batched_tokens=self.max_batched_tokens,
            gpu_memory_utilization=self.gpu_memory_utilization,
            host_step_s=self.host_step_s(),
            layer_host_s=self.layer_host_s(),
            tp=self.tp,
            pp=self.pp,
            ep=self.ep,
            dp=self.dp,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PredictLoadArgs(LoadArgs):
    """`dse predict`'s load options: LoadArgs with the help of --pp and --ep for a training step too."""

    pp: PredictPpOpt = 1
    ep: PredictEpOpt = 1


# (metric key, label, scale, format) for estimates under load.
LOAD_ROWS: tuple[tuple[str, str, float, str], ...] = (
    ("ttft_s", "TTFT mean (ms)", 1e3, ".1f"),
    ("ttft_p50_s", "TTFT p50 (ms)", 1e3, ".1f"),
    ("ttft_p90_s", "TTFT p90 (ms)", 1e3, ".1f"),
    ("ttft_p99_s", "TTFT p99 (ms)", 1e3, ".1f"),
    ("tpot_s", "TPOT mean (ms)", 1e3, ".2f"),
    ("tpot_p50_s", "TPOT p50 (ms)", 1e3, ".2f"),
    ("tpot_p90_s", "TPOT p90 (ms)", 1e3, ".2f"),
    ("tpot_p99_s", "TPOT p99 (ms)", 1e3, ".2f"),
    ("e2e_latency_s", "end-to-end latency mean (s)", 1.0, ".2f"),
    ("output_tokens_per_s", "output tokens/s", 1.0, ".0f"),
    ("requests_per_s", "requests/s", 1.0, ".2f"),
    ("avg_batch_size", "running sequences (mean)", 1.0, ".1f"),
    ("input_tokens_mean", "input tokens (mean drawn)", 1.0, ".0f"),
    ("output_tokens_mean", "output tokens (mean drawn)", 1.0, ".0f"),
    ("num_gpus", "GPUs", 1.0, ".0f"),
    ("avg_power_w", "average power per GPU (W)", 1.0, ".0f"),
    ("total_power_w", "power, all GPUs (W)", 1.0, ".0f"),
    ("comm_time_fraction", "communication share of a decode step", 1.0, ".1%"),
    ("energy_per_output_token_j", "energy per output token (mJ)", 1e3, ".1f"),
    ("energy_per_request_j", "energy per request (J)", 1.0, ".1f"),
    ("kv_cache_utilization", "KV cache in use (mean share)", 1.0, ".1%"),
    ("preemptions", "preemptions", 1.0, ".0f"),
    ("kv_capacity_tokens", "KV cache capacity (tokens)", 1.0, ".0f"),
    ("memory_bytes", "memory needed per GPU (GiB)", 2**-30, ".2f"),
    ("memory_capacity_bytes", "memory capacity (GiB)", 2**-30, ".1f"),
)


def check_load_attention(attention: str) -> None:
    """DseError unless `attention` is flash, the serving engines' (one naming an unknown value as written:
    `--attention foo` under load was refused as if it said eager)."""
    from dse.workload.llm import ATTENTION_IMPLS

    if attention not in ATTENTION_IMPLS:
        raise DseError(f"attention '{attention}' (--attention) is not one of {', '.join(ATTENTION_IMPLS)}")
    if attention != "flash":
        raise DseError("--attention eager applies to a static batch; serving engines run flash attention")


def serving_lengths(
    input_tokens: int | None, output_tokens: int | None, *, context_tokens: int | None = None
) -> tuple[int, int]:
    """A serving command's --input-tokens / --output-tokens, a missing one DEFAULT_INPUT_TOKENS /
    DEFAULT_OUTPUT_TOKENS (what `dse whatif` and a study's workload default to; `note_lengths` says so).
    DseError when a default makes the request longer than the model's `context_tokens`: the user is told
    which lengths to give rather than shown numbers they never wrote."""
    filled = (
        DEFAULT_INPUT_TOKENS if input_tokens is None else input_tokens,
        DEFAULT_OUTPUT_TOKENS if output_tokens is None else output_tokens,
    )
    defaulted = input_tokens is None or output_tokens is None
    if defaulted and context_tokens is not None and sum(filled) > context_tokens:
        given = (input_tokens, output_tokens)
        shown = [f"{n} {what}" + (" (default)" if v is None else "")
                 for n, what, v in zip(filled, ("in", "out"), given, strict=True)]  # fmt: skip
        raise DseError(
            f"serving lengths {' + '.join(shown)} exceed the model's context of {context_tokens} tokens: "
            "give --input-tokens and --output-tokens"
        )
    return filled


def implied_lengths(
    model: str | None,
    load: LoadArgs,
    given: tuple[int | None, int | None],
    *,
    one_pass: bool,
    layout_given: bool,
    engine_given: bool,
) -> tuple[int | None, int | None]:
    """`dse predict`'s --input-tokens / --output-tokens (`given`), the missing ones filled in
    (`serving_lengths`) when the command is an LLM serving prediction: one length given, a load mode, a
    layout (--tp, --pp, --ep, --dp other than 1, or written at all: `layout_given`) or an engine option
    (`engine_given`). `given` as it is otherwise: no model, a vision model, or a command that asks for one
    pass (`one_pass`: --kernels, --training, --phase or --seq-len; a serving flag beside them is refused)."""
    from dse.workload.vision import is_vision_model

    input_tokens, output_tokens = given
    if model is None or one_pass or is_vision_model(model):
        return given
    layout = layout_given or any(getattr(load, flag) != 1 for flag in PARALLEL_FLAGS)
    asked = input_tokens is not None or output_tokens is not None or layout or engine_given
    if not asked and load.mode() == "static":
        return None, None
    from dse.serving.static import check_decoder
    from dse.workload.models import load_model_config

    arch = load_model_config(model)
    check_decoder(arch)  # an encoder is refused as one, not by the default lengths' context check
    return serving_lengths(input_tokens, output_tokens, context_tokens=arch.max_position_embeddings)


def note_lengths(input_tokens: int | None, output_tokens: int | None) -> None:
    """Say on stderr which lengths `serving_lengths` filled in (once the command's input is checked, so that
    an error stays one line)."""
    filled = serving_lengths(input_tokens, output_tokens)
    given = (input_tokens, output_tokens)
    flags = ("--input-tokens", "--output-tokens")
    missing = [f"{flag} {n}" for flag, n, v in zip(flags, filled, given, strict=True) if v is None]
    if missing:
        err_console.print(f"[dim]note: serving lengths not given: {' '.join(missing)}[/]", soft_wrap=True)


# A serving request's fields and the flags that set them: a check inside the model names the field it
# validates (`request_rate_per_s must be ...`), which the command line writes as a flag.
REQUEST_FLAGS: dict[str, str] = {
    "request_rate_per_s": "--request-rate", "num_requests": "--num-requests",
    "max_num_seqs": "--max-num-seqs", "max_batched_tokens": "--max-batched-tokens",
    "gpu_memory_utilization": "--gpu-memory-utilization",
    "length_dist": "--length-dist", "length_sigma": "--length-sigma", "seed": "--seed",
    "input_tokens": "--input-tokens", "output_tokens": "--output-tokens", "concurrency": "--concurrency",
    "batch": "--batch", "kv_dtype": "--kv-dtype", "engine": "--engine", "sampling": "--sampling",
}  # fmt: skip


@contextlib.contextmanager
def named_as_flags() -> Iterator[None]:
    """A ConfigError that opens with a request field (REQUEST_FLAGS) is raised again opening with its flag."""
    try:
        yield
    except ConfigError as exc:
        field, _, rest = str(exc).partition(" ")
        if field not in REQUEST_FLAGS:
            raise
        raise ConfigError(f"{REQUEST_FLAGS[field]} {rest}") from exc


def _micro_s(flag: str, per: str, value: float | None, most_exp: int) -> float | None:
    """A microseconds option in seconds (None stays None); DseError outside [0, 10^most_exp] us."""
    if value is None:
        return None
    if not (math.isfinite(value) and 0 <= value <= 10.0**most_exp):
        raise DseError(f"{flag} is microseconds of CPU time per {per} in [0, 1e{most_exp}] (got {value})")
    return value / 1e6 + 0.0  # / 1e6: 800 us is 0.0008 s exactly as printed; + 0.0: a -0 given prints as 0


def load_title(est: Any) -> str:
    """One line saying what was simulated: mode, engine, lengths, requests."""
    r, e = est.request, est.engine
    if r.mode == "concurrency":
        load = f"concurrency {r.concurrency}"
    elif r.mode == "request_rate":
        load = f"{r.request_rate_per_s:g} requests/s"
    else:
        load = "max throughput"
    lengths = f"{r.input_tokens} in / {r.output_tokens} out" + (
        f" ({r.length_dist} lengths)" if r.length_dist != "fixed" else ""
    )
    n = est.values.get("num_requests")
    requests = f", {int(n)} request{'s' if int(n) != 1 else ''}" if n else ""
    return (
        f"{est.model} on {est.gpu}: {load} ({MODE_TEXT[r.mode]}), {engine_text(engine_settings(e, r))}, "
        f"{lengths}, {r.precision}{requests}"
    )


def load_warnings(est: Any) -> list[str]:
    """The lines under a load run's table (rich markup; `plain_warnings` for JSON): an overloaded open
    loop (`dse.serving.metrics.overloaded`), whose queue grows with every request, so its TTFT figures are
    those of the run's length, not the server's; or a rate run that keeps up but held no steady window
    (`dse.serving.metrics.steady_window` fell back to the whole run: its batch was still filling), whose
    system figures include that ramp (a newcomer's Mixtral-8x7B TP2 at 20 requests/s read 4,150 tokens/s
    over the default 500 requests, 5,099 over 3,000, of 5,120 offered); and a run whose KV cache holds
    fewer sequences than the engine admits (`_preemption_warning`)."""
    if not getattr(est, "feasible", False):
        return []
    first = _overload_warning(est) if getattr(est, "overloaded", False) else _ramp_warning(est)
    return [w for w in (first, _preemption_warning(est)) if w is not None]


def plain_warnings(est: Any) -> list[str]:
    """`load_warnings` without markup: the `warnings` key of a load run's JSON."""
    return [Text.from_markup(w).plain.removeprefix("warning: ") for w in load_warnings(est)]


def _overload_warning(est: Any) -> str:
    m = est.metrics()
    return (
        f"[bold yellow]warning:[/] overloaded: {est.request.request_rate_per_s:g} requests/s arrive and the "
        f"server completes {float(m['requests_per_s']):.3g}/s (requests_per_s, the rate it sustains): its "
        f"queue grows through the run, so TTFT and queue figures depend on --num-requests "
        f"({int(m['num_requests'] or 0)} here)"
    )


# Preemptions per request above which a run is said to thrash: vLLM's recompute preemption evicts the
# newest request when a decode finds no free block, and a pool that holds fewer whole requests than
# max_num_seqs admits does so every few steps (Qwen3-32B TP2 on H100s, 1024 / 1024 offline: 2,771 in
# 4,096 requests, 3,950 tokens/s against 4,095 at concurrency 256 and 4,398 at 162 sequences, all the pool
# holds whole). Capping the batch there is not always faster: requests hold about half their output on
# average, so a larger batch with some recompute can win (Llama-3.1-8B on an L4, 1024 / 1024 offline: 309
# tokens/s with 950 preemptions, 289 at the 22 it holds whole, 318 at 32), hence "between" in the warning.
PREEMPTIONS_PER_REQUEST = 0.05


def _preemption_warning(est: Any) -> str | None:
    m = est.metrics()
    n, preempted = float(m.get("num_requests") or 0), float(m.get("preemptions") or 0)
    if n <= 0 or preempted <= PREEMPTIONS_PER_REQUEST * n:
        return None
    per_request = float(m["input_tokens_mean"]) + float(m["output_tokens_mean"])
    fit = int(float(m["kv_capacity_tokens"]) // per_request)
    r, admits = est.request, est.engine.max_num_seqs  # a closed loop runs at most its replica's clients
    if r.mode == "concurrency":
        admits = min(admits, -(-r.concurrency // r.dp))
    head = (
        f"[bold yellow]warning:[/] {int(preempted)} preemptions in {int(n)} requests: the KV cache "
        f"({int(m['kv_capacity_tokens'])} tokens) holds about {fit} whole requests of the mean lengths"
    )
    if fit >= admits:  # drawn lengths: the longer requests outgrow a pool that holds the mean ones
        return (
            f"{head}, as many as the engine runs ({admits}), but longer ones outgrow it, so running requests "
            "are evicted and recomputed (throughput, power and J/token include the recompute)"
        )
    return (
        f"{head} and the engine admits up to {admits}, so running requests are evicted and recomputed "
        f"(throughput, power and J/token include the recompute); --max-num-seqs {max(fit, 1)} admits no more "
        "than it holds whole, with no preemption but a smaller batch: the fastest setting lies between"
    )


def _ramp_warning(est: Any) -> str | None:
    if getattr(getattr(est, "request", None), "mode", None) != "request_rate":
        return None
    m = est.metrics()
    window_s, duration_s = m.get("window_s"), m.get("duration_s")
    if window_s is None or duration_s is None or window_s < duration_s * (1 - 1e-9):
        return None  # a steady window inside the run (or replicas' totals, which are not summed)
    return (
        f"[bold yellow]warning:[/] no steady state in {int(m['num_requests'] or 0)} requests: the running "
        "batch was still filling, so throughput, power and J/token are over the whole run, ramp included; "
        "raise --num-requests for the server's steady figures"
    )


def engine_text(settings: Mapping[str, Any]) -> str:
    """The engine settings of `dse.serving.load.engine_settings` in a few words."""
    host = f", {settings['host_step_s'] * 1e6:g} us host/step" if settings["host_step_s"] else ""
    if settings["layer_host_s"]:
        host += f", {settings['layer_host_s'] * 1e6:g} us host/dense layer without CUDA graphs"
    return (
        f"{settings['engine']} engine (max {settings['max_num_seqs']} seqs, "
        f"{settings['max_batched_tokens']} tokens/step{host})"
    )


def note_one_pass(model: str, phase: str, seq_len: int) -> None:
    """`--batch` alone reads like a serving batch: say what ran instead, for a decoder that serves (stderr:
    the table stays clean; an encoder has no serving to point to)."""
    from dse.workload.models import load_model_config

    if load_model_config(model).family == "encoder":
        return
    err_console.print(
        f"note: no --input-tokens/--output-tokens, so this is one {phase} pass of {seq_len} tokens "
        "(--phase, --seq-len); give --input-tokens / --output-tokens or a load mode for LLM serving",
        highlight=False,
        soft_wrap=True,
    )

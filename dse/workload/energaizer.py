"""Import the kernel-list JSON of the EnergAIzer ISPASS'26 artifact as a `WorkloadGraph`.

Each file (`shared/data/energaizer/workloads/all/*.json`) is a list of `[descriptor, tags]` pairs, in
launch order, for one eager-PyTorch forward pass; `tags[0]` is the entry kind and all dims are element
counts. Entries map to ops as follows:

| entry (`tags[0]`) | required descriptor keys | `dse` op |
|---|---|---|
| `gemm` | batch, dimM, dimN, dimK, precM, useTensorCore | `GemmOp(batch, m=dimM, n=dimN, k=dimK)` |
| `conv2d` | as `gemm` (implicit GEMM) | `GemmOp` named `...:conv2d` |
| `softmax` | batch (rows), dim (cols), prec | `SoftmaxOp(rows, cols)` |
| `layernorm` | batch (rows), dim (cols), prec | `NormOp(kind="layernorm")` |
| `elementwise` | dim (elements), op, prec | `ElementwiseOp`, kind from the table below |

GEMMs may also carry `precA` (accumulator dtype, checked but not modelled); conv2d entries also carry the
convolution `b, m, c, hw, rs, stride, padding` (ignored: dimM/N/K already give the implicit GEMM). Any other
key is an error.

GEMM dtype: `precM` with `useTensorCore`; fp32 on CUDA cores is `fp32`, fp32 on Tensor Cores is `tf32`,
every other dtype must use Tensor Cores. The output dtype is the GEMM's default. Dims are taken as given:
the artifact records the cuBLAS call, so an `nn.Linear` appears with m = output features and n = tokens
(BERT, OPT, Qwen2) and a GPT-2 `Conv1D` with m = tokens; FLOP and compulsory bytes are the same either way.

Elementwise `op` -> `ElementwiseOp.kind` (`dtype` = `prec`):

| EnergAIzer `op` | kind | note |
|---|---|---|
| `pointwise_add` | `add` | tensor + tensor (residual adds, bias) |
| `pointwise_mul` | `mul` | tensor * tensor |
| `scalar_add` | `scale` | tensor + scalar |
| `scalar_mul` | `scale` | tensor * scalar |
| `unspecified_scalar` | `scale` | unnamed one-input op (pow, rsqrt in RMSNorm); SFU work not counted |
| `unspecified_tensor` | `add` | unnamed two-input op (GPT-2's score op, below) |
| `typecast_to_<dtype>` | `cast` | `out_dtype` = `<dtype>`, e.g. `typecast_to_fp32`, `typecast_to_bf16` |
| `relu`, `gelu`, `silu`, `tanh` | same name | |

GPT-2's eager attention makes two elementwise passes over its [B, H, S, S] scores before the softmax: the
division by sqrt(head_dim), held in a 0-dim tensor, and the causal-mask `torch.where` (transformers'
`GPT2Attention`). The artifact's GPT-2 lists hold one `unspecified_tensor` entry there (no other list has
that op), so the other pass is restored after it: a one-input `scale` of the same size, named
`<file stem>/<index>:score_pass` (`meta["restored_kernels"]` counts them). Without it the lists'
GPT-2 passes were 22-28% short on the A100 (EnergAIzer, s1024) and 21-33% on our H100 runs (s1024-4096),
where the other models' were 0-14% short.

Consecutive identical entries become one op with `count` > 1; the order is otherwise kept. Ops are named
`<file stem>/<index>:<entry kind>`, where index is the position of the (first) entry in the file and
entry kind is the elementwise `op` or `tags[0]` (e.g. `gpt2model_gpt2_pbf16_b1_s1024_modeprefill/2:gemm`).
Malformed input raises `ConfigError` naming the file, the entry index, the entry and what is allowed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

from dse.errors import ConfigError
from dse.units import MHZ
from dse.workload.graph import WorkloadGraph
from dse.workload.ops import (
    BYTES_PER_ELEMENT,
    DTYPES,
    Dtype,
    ElementwiseOp,
    GemmOp,
    NormOp,
    Op,
    SoftmaxOp,
)

ELEMENTWISE_OP_KINDS: dict[str, str] = {
    "pointwise_add": "add",
    "pointwise_mul": "mul",
    "scalar_add": "scale",
    "scalar_mul": "scale",
    "unspecified_scalar": "scale",
    "unspecified_tensor": "add",
    "relu": "relu",
    "gelu": "gelu",
    "silu": "silu",
    "tanh": "tanh",
}
_TYPECAST_PREFIX = "typecast_to_"

_GEMM_KEYS = frozenset({"batch", "dimM", "dimN", "dimK", "precM", "precA", "useTensorCore"})
_GEMM_REQUIRED = frozenset({"batch", "dimM", "dimN", "dimK", "precM", "useTensorCore"})
_CONV_EXTRA_KEYS = frozenset({"b", "m", "c", "hw", "rs", "stride", "padding"})
_ROW_KEYS = frozenset({"batch", "dim", "prec"})
_ELEMENTWISE_KEYS = frozenset({"dim", "op", "prec"})


class _EntryError(Exception):
    """A problem with one entry; `load_kernel_list` adds the file, index and entry."""


def _require_keys(desc: Mapping[str, Any], required: frozenset[str], allowed: frozenset[str]) -> None:
    missing = sorted(required - desc.keys())
    if missing:
        raise _EntryError(f"missing key(s) {missing}; required: {sorted(required)}")
    unknown = sorted(desc.keys() - allowed)
    if unknown:
        raise _EntryError(f"unknown key(s) {unknown}; allowed: {sorted(allowed)}")


def _dtype(value: Any, key: str) -> Dtype:
    # not a string: a list was "unhashable type: 'list'" in the lookup, naming no key
    if not isinstance(value, str) or value not in BYTES_PER_ELEMENT:
        raise _EntryError(f"{key} {value!r} is not one of {', '.join(DTYPES)}")
    return cast(Dtype, str(value))


def _gemm(name: str, desc: Mapping[str, Any], tags: Sequence[str], allowed: frozenset[str]) -> Op:
    _require_keys(desc, _GEMM_REQUIRED, allowed)
    use_tc = desc["useTensorCore"]
    if not isinstance(use_tc, bool):
        raise _EntryError(f"useTensorCore must be true or false, got {use_tc!r}")
    unit = tags[1] if len(tags) > 1 else None
    if unit in ("tc", "cuda") and (unit == "tc") != use_tc:
        raise _EntryError(f"tag '{unit}' contradicts useTensorCore={use_tc}")
    prec = _dtype(desc["precM"], "precM")
    if "precA" in desc:
        _dtype(desc["precA"], "precA")
    dtype: Dtype
    if prec == "fp32":
        dtype = "tf32" if use_tc else "fp32"
    elif use_tc:
        dtype = prec
    else:
        raise _EntryError(f"a {prec} GEMM without Tensor Cores is not modelled (CUDA-core GEMMs are fp32)")
    return GemmOp(name=name, m=desc["dimM"], n=desc["dimN"], k=desc["dimK"], batch=desc["batch"], dtype=dtype)


def _softmax(name: str, desc: Mapping[str, Any]) -> Op:
    _require_keys(desc, _ROW_KEYS, _ROW_KEYS)
    return SoftmaxOp(name=name, rows=desc["batch"], cols=desc["dim"], dtype=_dtype(desc["prec"], "prec"))


def _layernorm(name: str, desc: Mapping[str, Any]) -> Op:
    _require_keys(desc, _ROW_KEYS, _ROW_KEYS)
    return NormOp(
        name=name, rows=desc["batch"], cols=desc["dim"], kind="layernorm", dtype=_dtype(desc["prec"], "prec")
    )


def _elementwise(name: str, desc: Mapping[str, Any]) -> Op:
    _require_keys(desc, _ELEMENTWISE_KEYS, _ELEMENTWISE_KEYS)
    src, dtype = desc["op"], _dtype(desc["prec"], "prec")
    if isinstance(src, str) and src.startswith(_TYPECAST_PREFIX):
        out_dtype = _dtype(src[len(_TYPECAST_PREFIX) :], "typecast target")
        return ElementwiseOp(
            name=name, kind="cast", num_elements=desc["dim"], dtype=dtype, out_dtype=out_dtype
        )
    if not isinstance(src, str) or src not in ELEMENTWISE_OP_KINDS:
        allowed = [*ELEMENTWISE_OP_KINDS, f"{_TYPECAST_PREFIX}<dtype>"]
        raise _EntryError(f"unknown elementwise op {src!r}; allowed: {', '.join(allowed)}")
    return ElementwiseOp(name=name, kind=ELEMENTWISE_OP_KINDS[src], num_elements=desc["dim"], dtype=dtype)


_BUILDERS: dict[str, Callable[[str, Mapping[str, Any], Sequence[str]], Op]] = {
    "gemm": lambda name, desc, tags: _gemm(name, desc, tags, _GEMM_KEYS),
    "conv2d": lambda name, desc, tags: _gemm(name, desc, tags, _GEMM_KEYS | _CONV_EXTRA_KEYS),
    "softmax": lambda name, desc, tags: _softmax(name, desc),
    "layernorm": lambda name, desc, tags: _layernorm(name, desc),
    "elementwise": lambda name, desc, tags: _elementwise(name, desc),
}


def _split_entry(entry: Any) -> tuple[Mapping[str, Any], Sequence[str]]:
    if not (isinstance(entry, list) and len(entry) == 2):
        raise _EntryError("an entry must be a two-item list [descriptor, tags]")
    desc, tags = entry
    if not isinstance(desc, dict):
        raise _EntryError("the descriptor (first item) must be a JSON object")
    if not (isinstance(tags, list) and tags and all(isinstance(t, str) for t in tags)):
        raise _EntryError("the tags (second item) must be a non-empty list of strings")
    if tags[0] not in _BUILDERS:
        raise _EntryError(f"unknown entry kind {tags[0]!r}; allowed: {', '.join(_BUILDERS)}")
    return desc, tags


def _build_op(stem: str, index: int, entry: Any, count: int) -> Op:
    desc, tags = _split_entry(entry)
    label = desc.get("op") if tags[0] == "elementwise" else tags[0]
    name = f"{stem}/{index}:{label}"
    try:
        op = _BUILDERS[tags[0]](name, desc, tags)
    except (ValueError, TypeError) as exc:  # the op's own validation (non-positive or non-integer dims)
        raise _EntryError(str(exc)) from exc
    return op if count == 1 else dataclasses.replace(op, count=count)


def load_kernel_list(path: str | Path) -> WorkloadGraph:
    """Read one EnergAIzer kernel-list JSON file into a `WorkloadGraph` (one forward pass).

    Args:
        path: the JSON file; its stem names the graph and prefixes every op name.

    Returns:
        The graph; `meta` holds `source` (the path), `num_entries`, `precision` (`list_precision`) and,
        when the stem follows the artifact's naming scheme, the other fields of `parse_workload_name`.

    Raises:
        ConfigError: missing file, invalid JSON, a top level that is not a non-empty list, or an entry of
            unknown kind, with missing/unknown keys or invalid values.
    """
    from dse.config.jsonio import read_json_file

    path = Path(path)
    entries = read_json_file(path, "kernel list", expect=list)
    if not entries:
        raise ConfigError(f"{path}: expected a non-empty JSON list of [descriptor, tags] entries")

    stem = path.stem
    # Compare canonical text, not Python values, so that `true` and `1` (or `1` and `1.0`) never merge.
    keys = [json.dumps(entry, sort_keys=True) for entry in entries]
    ops: list[Op] = []
    start = 0
    while start < len(entries):
        stop = start + 1
        while stop < len(entries) and keys[stop] == keys[start]:
            stop += 1
        try:
            ops.append(_build_op(stem, start, entries[start], stop - start))
        except _EntryError as exc:
            raise ConfigError(f"{path}: entry {start}: {exc}; entry = {_short(entries[start])}") from exc
        start = stop

    ops, restored = _restore_score_passes(stem, ops)
    meta: dict[str, object] = {"source": str(path), "num_entries": len(entries), "restored_kernels": restored}
    # A hand-written file need not follow the artifact's naming scheme. Its precision is what its entries
    # record: a name's `p<precision>` token labelled a bf16 list saved as `..._pfp32_...` fp32 (session 36).
    with contextlib.suppress(ConfigError):
        meta.update(parse_workload_name(stem))
    meta["precision"] = list_precision(ops)
    return WorkloadGraph(name=stem, ops=tuple(ops), meta=meta)


def _restore_score_passes(stem: str, ops: list[Op]) -> tuple[list[Op], int]:
    """`ops` with GPT-2's unrecorded score pass after each `unspecified_tensor` op over the scores of the
    softmax that follows it (module docstring), and how many kernels that added. The pattern decides, not
    the file's name: in the artifact only GPT-2's lists have it, and any list with it gets the pass."""
    out: list[Op] = []
    restored = 0
    for op, nxt in zip(ops, [*ops[1:], None], strict=True):
        out.append(op)
        if not (isinstance(op, ElementwiseOp) and op.name.endswith(":unspecified_tensor")):
            continue
        if isinstance(nxt, SoftmaxOp) and nxt.rows * nxt.cols == op.num_elements:
            index, _ = entry_of(op.name)
            out.append(dataclasses.replace(op, name=f"{stem}/{index}:score_pass", kind="scale"))
            restored += op.count
    return out, restored


def entry_of(op_name: str) -> tuple[int, str]:
    """(the index of the file's entry, its entry kind) of an op named `<stem>/<index>:<entry kind>`."""
    index, label = op_name.rsplit("/", 1)[1].split(":", 1)
    return int(index), label


def list_precision(ops: Sequence[Op]) -> str:
    """The precision a kernel list is priced at, from its ops' dtypes: that of its Tensor-Core GEMMs and
    convolutions (the math `--precision` names for a model; a bf16 trace keeps RoPE's small fp32 CUDA-core
    GEMM), else of its CUDA-core GEMMs, else of its other ops; "mixed" where they differ."""
    gemms = [op for op in ops if isinstance(op, GemmOp)]
    tensor = [op for op in gemms if op.dtype != "fp32"]
    dtypes = {op.dtype for op in tensor or gemms or ops}
    return dtypes.pop() if len(dtypes) == 1 else "mixed"


def _short(entry: Any, limit: int = 300) -> str:
    text = json.dumps(entry) if _is_jsonable(entry) else repr(entry)
    return text if len(text) <= limit else text[:limit] + "..."


def _is_jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


_PRECISIONS = ("bf16", "fp16", "fp32")
_INT_TOKEN = re.compile(r"^(b|s|freq|iter)(\d+)$")


def _friendly_model(model_class: str, model_config: str) -> str:
    base = model_class.removesuffix("model")
    config = re.sub(r"(?<=\d)p(?=\d)", ".", model_config)  # opt-1p3b -> opt-1.3b
    if not config:
        return base
    return config if config.startswith(base) else f"{base}-{config}"


def parse_workload_name(stem: str) -> dict[str, Any]:
    """Split an EnergAIzer workload name into its fields.

    Accepts kernel-list stems (`gpt2model_gpt2_pbf16_b1_s1024_modeprefill`, `resnet101__pbf16_b8_freq900`)
    and measurement log names (`..._attneager_freq900_iter1891.csv`; a `.json`/`.csv` suffix is dropped).

    Returns:
        `model` (friendly name as in the measurement CSVs, e.g. `opt-1.3b`), `model_class`, `model_config`
        (None when empty, as for `resnet101__...`),
        `precision`, `batch`, `seq_len` (None for vision models), `mode` (None for vision models),
        `attention` (`eager` or None), `sm_clock_hz` (from `freq<MHz>`, or None) and `iterations` (or None).

    Raises:
        ConfigError: a token that is not part of the scheme, or no precision/batch token.
    """
    name = Path(stem).name
    for suffix in (".json", ".csv"):
        name = name.removesuffix(suffix)
    tokens = name.split("_")
    if len(tokens) < 3:
        raise ConfigError(f"workload name {stem!r}: expected <class>_<config>_p<precision>_b<batch>[...]")
    out: dict[str, Any] = {
        "model": _friendly_model(tokens[0], tokens[1]),
        "model_class": tokens[0],
        "model_config": tokens[1] or None,
        "precision": None,
        "batch": None,
        "seq_len": None,
        "mode": None,
        "attention": None,
        "sm_clock_hz": None,
        "iterations": None,
    }
    int_fields = {"b": "batch", "s": "seq_len", "freq": "sm_clock_hz", "iter": "iterations"}
    for token in tokens[2:]:
        match = _INT_TOKEN.match(token)
        if match:
            field = int_fields[match.group(1)]
            value = int(match.group(2))
            out[field] = value * MHZ if field == "sm_clock_hz" else value
        elif token.startswith("mode") and len(token) > 4:
            out["mode"] = token[4:]
        elif token.startswith("attn") and len(token) > 4:
            out["attention"] = token[4:]
        elif token.startswith("p") and token[1:] in _PRECISIONS:
            out["precision"] = token[1:]
        else:
            raise ConfigError(
                f"workload name {stem!r}: unknown token {token!r}; expected p<{'|'.join(_PRECISIONS)}>, "
                "b<batch>, s<seq_len>, mode<mode>, attn<backend>, freq<MHz> or iter<n>"
            )
    if out["precision"] is None or out["batch"] is None:
        raise ConfigError(f"workload name {stem!r}: needs a p<precision> and a b<batch> token")
    return out


# `as_precision`: the Tensor-Core GEMM dtypes a 16-bit run re-types (its own type is kept).
_HALF_RETYPE: dict[str, frozenset[str]] = {
    "bf16": frozenset({"fp16", "fp8", "int8", "fp4"}),
    "fp16": frozenset({"bf16", "fp8", "int8", "fp4"}),
}


def as_precision(graph: WorkloadGraph, precision: str) -> WorkloadGraph:
    """An EnergAIzer kernel list re-typed for a run at `precision` (`meta["precision"]` says which).

    fp32 (the README's fp32 rows): runs of eager PyTorch: `nn.Linear` / matmul GEMMs on CUDA cores
    (`allow_tf32` is off by default for matmul), convolutions on Tensor Cores as TF32 (cuDNN's `allow_tf32`
    is on by default), every other kernel in fp32, and no dtype casts (a cast to the tensor's own dtype
    launches nothing).
    bf16 or fp16: the list's 16-bit and narrower Tensor-Core GEMMs and convolutions (bf16, fp16, fp8, int8,
    fp4) in that type, the rest as recorded: a bf16 trace on a GPU with fp16 Tensor Cores only (Volta), or
    an fp8 list on one without fp8 (Ampere), priced as a 16-bit run.
    """
    if precision in _HALF_RETYPE:
        half = tuple(
            dataclasses.replace(op, dtype=cast(Dtype, precision))
            if isinstance(op, GemmOp) and op.dtype in _HALF_RETYPE[precision]
            else op
            for op in graph.ops
        )
        # the precision priced, not the flag's: a TF32 list keeps its TF32 GEMMs, so it stays "tf32"
        priced = list_precision(half)
        if all(a is b for a, b in zip(half, graph.ops, strict=True)):  # as recorded (a bf16 trace)
            if graph.meta.get("precision") == priced:
                return graph
            return WorkloadGraph(name=graph.name, ops=graph.ops, meta={**graph.meta, "precision": priced})
        return WorkloadGraph(
            name=f"{graph.name}@{precision}", ops=half, meta={**graph.meta, "precision": priced}
        )
    if precision != "fp32":
        raise ConfigError(
            f"--precision {precision}: a kernel list (priced in the dtypes it records) can be re-typed to "
            "bf16, fp16 or fp32 only"
        )
    ops: list[Op] = []
    for op in graph.ops:
        if isinstance(op, ElementwiseOp) and op.kind == "cast":
            continue
        if isinstance(op, GemmOp):
            dtype: Dtype = "tf32" if op.name.endswith(":conv2d") else "fp32"
            ops.append(dataclasses.replace(op, dtype=dtype, out_dtype="fp32"))
        elif isinstance(op, ElementwiseOp):  # the only other op with an out_dtype
            ops.append(dataclasses.replace(op, dtype="fp32", out_dtype=None))
        else:
            ops.append(dataclasses.replace(op, dtype="fp32"))
    return WorkloadGraph(name=f"{graph.name}@fp32", ops=tuple(ops), meta={**graph.meta, "precision": "fp32"})
